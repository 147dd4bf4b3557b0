//! Hand-written SVG plots, no dependency: one panel per metric, stacked; grouped bars or lines,
//! labelled axes with units, a legend. Coordinates are printed with two decimals so the same
//! data give the same bytes.

use super::claim::fmt;
use super::grid::Grid;
use super::spec::Chart;
use std::fmt::Write;

const WIDTH: f64 = 760.0;
const PANEL_H: f64 = 300.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 8] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f"];

/// One panel: a metric's grid with its axis labels.
pub struct Panel<'a> {
    pub grid: &'a Grid,
    pub y_label: String,
    pub x_label: String,
    /// Bar charts: add a group with each series' mean over the x values.
    pub average: bool,
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" upper bound and tick step for values up to `max`.
pub fn ticks(max: f64) -> (f64, f64) {
    if max <= 0.0 || !max.is_finite() {
        return (1.0, 0.25);
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// A tick value without trailing zeros (`0.8`, `2.5`, `300`).
pub fn tick_text(v: f64) -> String {
    let r = (v * 1e6).round() / 1e6;
    if r.abs() >= 1e6 {
        format!("{r:.3e}")
    } else {
        format!("{r}")
    }
}

/// The whole figure: a title and one panel per metric.
pub fn figure(title: &str, chart: Chart, panels: &[Panel]) -> String {
    let height = TOP + panels.len() as f64 * (PANEL_H + BOTTOM + 20.0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{:.2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    for (i, p) in panels.iter().enumerate() {
        let top = TOP + i as f64 * (PANEL_H + BOTTOM + 20.0);
        panel(&mut s, chart, p, top);
    }
    s.push_str("</svg>\n");
    s
}

fn panel(s: &mut String, chart: Chart, p: &Panel, top: f64) {
    let g = p.grid;
    let mut xs: Vec<String> = g.xs.clone();
    let mut cells = g.cells.clone();
    if p.average && chart == Chart::Bar {
        xs.push("average".into());
        for (row, name) in cells.iter_mut().zip(&g.series) {
            row.push(g.average(name));
        }
    }
    let max = cells.iter().flatten().flatten().fold(0.0f64, |a, &b| a.max(b));
    let (ymax, step) = ticks(max);
    let plot_w = WIDTH - LEFT - RIGHT;
    let bottom = top + PANEL_H;
    let y = |v: f64| bottom - v / ymax * (PANEL_H - 20.0);
    // Axes, grid lines and tick labels.
    let _ = write!(
        s,
        r##"<line x1="{LEFT}" y1="{bottom:.2}" x2="{:.2}" y2="{bottom:.2}" stroke="#000"/><line x1="{LEFT}" y1="{:.2}" x2="{LEFT}" y2="{bottom:.2}" stroke="#000"/>"##,
        LEFT + plot_w,
        top + 10.0
    );
    let n_ticks = (ymax / step).round() as usize;
    for t in 0..=n_ticks {
        let v = t as f64 * step;
        let yy = y(v);
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" y1="{yy:.2}" x2="{:.2}" y2="{yy:.2}" stroke="#ddd"/><text x="{:.2}" y="{:.2}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            yy + 4.0,
            fmt(v)
        );
    }
    let _ = write!(
        s,
        r#"<text transform="translate(18 {:.2}) rotate(-90)" text-anchor="middle">{}</text>"#,
        top + PANEL_H / 2.0,
        escape(&p.y_label)
    );
    let _ = write!(
        s,
        r#"<text x="{:.2}" y="{:.2}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        bottom + 42.0,
        escape(&p.x_label)
    );
    let group_w = plot_w / xs.len().max(1) as f64;
    for (xi, x) in xs.iter().enumerate() {
        let cx = LEFT + group_w * (xi as f64 + 0.5);
        let _ = write!(s, r#"<text x="{cx:.2}" y="{:.2}" text-anchor="middle">{}</text>"#, bottom + 18.0, escape(x));
    }
    match chart {
        Chart::Bar => bars(s, &cells, group_w, &y, bottom),
        Chart::Line => lines(s, &cells, group_w, &y),
    }
    legend(s, &g.series, top, chart);
}

fn bars(s: &mut String, cells: &[Vec<Option<f64>>], group_w: f64, y: &dyn Fn(f64) -> f64, bottom: f64) {
    let bar_w = group_w * 0.8 / cells.len().max(1) as f64;
    for (si, row) in cells.iter().enumerate() {
        for (xi, v) in row.iter().enumerate() {
            let Some(v) = v else { continue };
            let x0 = LEFT + group_w * (xi as f64 + 0.1) + bar_w * si as f64;
            let top = y(*v);
            let _ = write!(
                s,
                r#"<rect class="bar" x="{x0:.2}" y="{top:.2}" width="{bar_w:.2}" height="{:.2}" fill="{}"><title>{}</title></rect>"#,
                bottom - top,
                COLORS[si % COLORS.len()],
                fmt(*v)
            );
        }
    }
}

fn lines(s: &mut String, cells: &[Vec<Option<f64>>], group_w: f64, y: &dyn Fn(f64) -> f64) {
    for (si, row) in cells.iter().enumerate() {
        let color = COLORS[si % COLORS.len()];
        let pts: Vec<(f64, f64)> = row
            .iter()
            .enumerate()
            .filter_map(|(xi, v)| v.map(|v| (LEFT + group_w * (xi as f64 + 0.5), y(v))))
            .collect();
        let path: Vec<String> = pts.iter().map(|(a, b)| format!("{a:.2},{b:.2}")).collect();
        let _ = write!(
            s,
            r#"<polyline class="line" points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for (a, b) in pts {
            let _ = write!(s, r#"<circle cx="{a:.2}" cy="{b:.2}" r="3.5" fill="{color}"/>"#);
        }
    }
}

fn legend(s: &mut String, series: &[String], top: f64, chart: Chart) {
    let x = WIDTH - RIGHT + 16.0;
    for (i, name) in series.iter().enumerate() {
        let yy = top + 16.0 + i as f64 * 18.0;
        let color = COLORS[i % COLORS.len()];
        match chart {
            Chart::Bar => {
                let _ = write!(s, r#"<rect x="{x:.2}" y="{:.2}" width="12" height="12" fill="{color}"/>"#, yy - 10.0);
            }
            Chart::Line => {
                let _ = write!(
                    s,
                    r#"<line x1="{x:.2}" y1="{:.2}" x2="{:.2}" y2="{:.2}" stroke="{color}" stroke-width="2"/>"#,
                    yy - 4.0,
                    x + 12.0,
                    yy - 4.0
                );
            }
        }
        let _ = write!(s, r#"<text x="{:.2}" y="{yy:.2}">{}</text>"#, x + 18.0, escape(name));
    }
}
