//! Per-spec JSON, REPORT.md and the self-contained report.html: provenance, the figures, the
//! mean tables, and each claim with the verdict computed from the data.

use super::claim::{fmt, Verdict};
use super::grid::Grid;
use super::spec::{Chart, Spec};
use super::svg::{self, escape, Panel};
use super::table::Table;
use crate::bench::BenchRow;
use std::fmt::Write;

/// Where results come from.
#[derive(Clone, Debug)]
pub struct Provenance {
    pub version: String,
    pub git_rev: String,
    pub quick: bool,
}

impl Provenance {
    pub fn current(quick: bool) -> Provenance {
        Provenance { version: crate::runner::VERSION.into(), git_rev: crate::runner::GIT_REV.into(), quick }
    }

    fn mode(&self) -> &'static str {
        if self.quick {
            "quick"
        } else {
            "full"
        }
    }
}

/// A spec's figure: grids per metric, the SVG, the claims' verdicts.
pub struct Figure {
    pub name: String,
    /// The spec's file stem, and its machine when it runs under several (`machines`).
    pub base: String,
    pub machine: Option<String>,
    pub title: String,
    pub figure: String,
    pub note: String,
    pub metrics: Vec<(String, String, Grid)>,
    pub average: bool,
    pub claims: Vec<(String, String, Verdict)>,
    pub svg: String,
}

/// Axis label with its unit.
fn axis_label(axis: &str) -> String {
    match axis {
        "mem_latency_ns" => "memory read and write latency (ns)".into(),
        "sd" => "speculation degree (transactions)".into(),
        "workload.btree.ops_per_tx" => "B+tree operations per transaction".into(),
        other => other.replace('_', " "),
    }
}

impl Figure {
    pub fn new(spec: &Spec, t: &Table) -> Figure {
        let metrics: Vec<(String, String, Grid)> =
            spec.metrics.iter().map(|m| (m.clone(), spec.unit(m), t.grid(spec, m))).collect();
        let panels: Vec<Panel> = metrics
            .iter()
            .map(|(m, unit, g)| Panel {
                grid: g,
                y_label: format!("{} ({unit})", m.replace('_', " ")),
                x_label: axis_label(&spec.x),
                average: spec.average,
            })
            .collect();
        let svg = svg::figure(&format!("{} ({})", spec.title, spec.figure), spec.chart, &panels);
        let claims = spec
            .claims
            .iter()
            .map(|c| (c.text.clone(), c.metric.clone(), c.evaluate(&t.grid(spec, &c.metric))))
            .collect();
        Figure {
            name: spec.name.clone(),
            base: spec.base.clone(),
            machine: spec.machine.clone(),
            title: spec.title.clone(),
            figure: spec.figure.clone(),
            note: spec.note.clone(),
            metrics,
            average: spec.average && spec.chart == Chart::Bar,
            claims,
            svg,
        }
    }
}

/// `DIR/NAME.json`: provenance, claims, every row.
pub fn spec_json(spec: &Spec, t: &Table, fig: &Figure, prov: &Provenance) -> String {
    let cols = spec.columns();
    let axes = super::table::axis_order(spec);
    let rows: Vec<serde_json::Value> = t
        .rows
        .iter()
        .map(|(p, v)| {
            let mut o = serde_json::Map::new();
            for a in &axes {
                o.insert(a.clone(), p.get(a).unwrap_or("").into());
            }
            o.insert("seed".into(), p.seed.into());
            for (c, x) in cols.iter().zip(v) {
                o.insert(c.clone(), x.map_or(serde_json::Value::Null, |x| x.into()));
            }
            serde_json::Value::Object(o)
        })
        .collect();
    let config_hash = crate::config::Config::build(None, &spec.set).map(|c| c.hash_hex()).unwrap_or_default();
    let j = serde_json::json!({
        "name": spec.name,
        "title": spec.title,
        "figure": spec.figure,
        "kind": spec.kind.name(),
        "provenance": {
            "version": prov.version,
            "git_rev": prov.git_rev,
            "mode": prov.mode(),
            "seeds": spec.run.seeds,
            "txs": spec.run.txs,
            "warmup_txs": spec.run.warmup_txs,
            "config_hash": config_hash,
            "config_overrides": spec.set,
            "spec_hash": super::cache::hash_hex(spec.source.as_bytes()),
        },
        "claims": fig.claims.iter().map(|(text, metric, v)| serde_json::json!({
            "text": text, "metric": metric, "verdict": v.word(), "supported": v.supported, "detail": v.detail,
        })).collect::<Vec<_>>(),
        "columns": cols,
        "rows": rows,
    });
    serde_json::to_string_pretty(&j).expect("serializable") + "\n"
}

pub fn bench_csv(rows: &[BenchRow]) -> String {
    let mut s = String::from("workload,protocol,txs,sim_mem_accesses,host_seconds,sim_mem_accesses_per_second,native_seconds,slowdown_vs_native,host_clock_ghz,host_cycles_per_access\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{}",
            r.workload,
            r.protocol,
            r.txs,
            r.sim_mem_accesses,
            r.host_seconds,
            r.sim_mem_accesses_per_second,
            r.native_seconds,
            r.slowdown_vs_native,
            r.host_clock_ghz.map_or(String::new(), |v| v.to_string()),
            r.host_cycles_per_access.map_or(String::new(), |v| v.to_string())
        );
    }
    s
}

/// Rows: series; columns: x values (and the average). Markdown table.
fn md_grid(metric: &str, unit: &str, g: &Grid, average: bool) -> String {
    let mut s = format!(
        "{metric} ({unit})\n\n| series | {}{} |\n|---|",
        g.xs.join(" | "),
        if average { " | average" } else { "" }
    );
    s.push_str(&"---|".repeat(g.xs.len() + average as usize));
    s.push('\n');
    for (si, name) in g.series.iter().enumerate() {
        let mut cells: Vec<String> = g.cells[si].iter().map(|v| v.map_or("-".into(), fmt)).collect();
        if average {
            cells.push(g.average(name).map_or("-".into(), fmt));
        }
        let _ = writeln!(s, "| {name} | {} |", cells.join(" | "));
    }
    s
}

fn summary_rows(figs: &[Figure]) -> Vec<[String; 4]> {
    let mut rows = Vec::new();
    for f in figs {
        for (text, _, v) in &f.claims {
            rows.push([format!("{} ({})", f.name, f.figure), text.clone(), v.word().to_string(), v.detail.clone()]);
        }
    }
    rows
}

/// The claims of specs that run under several machines, side by side: (experiment, claim,
/// verdict per machine of [`super::spec::MACHINES`], "-" where a machine did not run).
fn machine_rows(figs: &[Figure]) -> Vec<(String, String, Vec<String>)> {
    let mut rows: Vec<(String, String, Vec<String>)> = Vec::new();
    for f in figs {
        let Some(m) = &f.machine else { continue };
        let col = super::spec::MACHINES.iter().position(|x| x == m).expect("a known machine");
        for (text, _, v) in &f.claims {
            let i = match rows.iter().position(|r| r.0 == f.base && r.1 == *text) {
                Some(i) => i,
                None => {
                    rows.push((f.base.clone(), text.clone(), vec!["-".into(); super::spec::MACHINES.len()]));
                    rows.len() - 1
                }
            };
            rows[i].2[col] = v.word().to_string();
        }
    }
    rows
}

const MACHINES_INTRO: &str = "Each claim of the LOC evaluation on the papers' strict-ordering machine (`ordering.preset = paper`), on locsim's overlapped machine and on the strictest reading of the papers' text (`strictest`; docs/ordering.md).";

fn provenance_line(prov: &Provenance) -> String {
    format!("locsim {} (git {}), {} run lengths", prov.version, prov.git_rev, prov.mode())
}

pub fn markdown(figs: &[Figure], pending: &[Spec], bench: Option<&[BenchRow]>, prov: &Provenance) -> String {
    let mut s = format!(
        "# locsim reproduction report\n\n{}. Every claim's verdict is computed from the data below.\n\n",
        provenance_line(prov)
    );
    s.push_str("## Summary\n\n| experiment | claim | verdict | detail |\n|---|---|---|---|\n");
    for r in summary_rows(figs) {
        let _ = writeln!(s, "| {} | {} | {} | {} |", r[0], r[1], r[2], r[3].replace('|', "/"));
    }
    let rows = machine_rows(figs);
    if !rows.is_empty() {
        let _ = write!(s, "\n## Claims on each machine\n\n{MACHINES_INTRO}\n\n| experiment | claim |");
        for m in super::spec::MACHINES {
            let _ = write!(s, " {m} |");
        }
        s.push_str("\n|---|---|");
        s.push_str(&"---|".repeat(super::spec::MACHINES.len()));
        s.push('\n');
        for (e, c, v) in rows {
            let _ = writeln!(s, "| {e} | {c} | {} |", v.join(" | "));
        }
    }
    for f in figs {
        let _ = write!(s, "\n## {}: {} ({})\n\n![{}]({}.svg)\n\n", f.name, f.title, f.figure, f.name, f.name);
        if !f.note.is_empty() {
            let _ = write!(s, "{}\n\n", f.note.trim());
        }
        for (m, unit, g) in &f.metrics {
            s.push_str(&md_grid(m, unit, g, f.average));
            s.push('\n');
        }
        for (text, _, v) in &f.claims {
            let _ = writeln!(s, "- claim: {text} -- **{}** ({})", v.word(), v.detail);
        }
    }
    if !pending.is_empty() {
        s.push_str("\n## Not run in this build\n\n");
        for p in pending {
            let _ = writeln!(s, "- {} ({}): {}", p.name, p.figure, p.pending.as_deref().unwrap_or(""));
        }
    }
    if let Some(b) = bench {
        s.push_str("\n## Simulator speed\n\nHost timings (they vary from run to run): simulated core accesses per host second and slowdown against the native back end; host cycles per access at the host clock measured around each point.\n\n| workload | protocol | Macc/s | slowdown | host cycles / access |\n|---|---|---|---|---|\n");
        for r in b {
            let _ = writeln!(s, "| {} |", speed_cells(r).join(" | "));
        }
    }
    s
}

/// One row of the reports' simulator-speed table: workload, protocol, million simulated accesses
/// per host second, slowdown against the native back end, host cycles per access.
fn speed_cells(r: &BenchRow) -> [String; 5] {
    [
        r.workload.clone(),
        r.protocol.clone(),
        format!("{:.1}", r.sim_mem_accesses_per_second / 1e6),
        format!("{:.1}", r.slowdown_vs_native),
        crate::bench::show(r.host_cycles_per_access, 0),
    ]
}

fn html_grid(metric: &str, unit: &str, g: &Grid, average: bool) -> String {
    let mut s = format!("<table><caption>{} ({})</caption><tr><th>series</th>", escape(metric), escape(unit));
    for x in &g.xs {
        let _ = write!(s, "<th>{}</th>", escape(x));
    }
    if average {
        s.push_str("<th>average</th>");
    }
    s.push_str("</tr>");
    for (si, name) in g.series.iter().enumerate() {
        let _ = write!(s, "<tr><td>{}</td>", escape(name));
        for v in &g.cells[si] {
            let _ = write!(s, "<td>{}</td>", v.map_or("-".into(), fmt));
        }
        if average {
            let _ = write!(s, "<td>{}</td>", g.average(name).map_or("-".into(), fmt));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>\n");
    s
}

/// Marks the page once every figure has a non-empty box, and records script errors: what the
/// headless-browser test reads from the rendered DOM.
const CHECK_SCRIPT: &str = r#"<script>
window.addEventListener('error', function (e) { document.body.setAttribute('data-errors', (document.body.getAttribute('data-errors') || '') + e.message + ';'); });
window.addEventListener('load', function () {
  var figs = document.querySelectorAll('figure svg'), ok = 0;
  figs.forEach(function (s) { var b = s.getBoundingClientRect(); var marks = s.querySelectorAll('rect.bar, polyline.line').length; if (b.width > 0 && b.height > 0 && marks > 0) ok++; });
  document.body.setAttribute('data-figures', String(figs.length));
  document.body.setAttribute('data-figures-rendered', String(ok));
});
</script>"#;

pub fn html(figs: &[Figure], pending: &[Spec], bench: Option<&[BenchRow]>, prov: &Provenance) -> String {
    let mut s = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>locsim reproduction report</title><style>body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 1em}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}.supported{color:#1a7f37}.not{color:#c62828}.none{color:#777}caption{text-align:left;font-weight:bold}table.summary td{text-align:left}</style></head><body>\n");
    let _ = writeln!(
        s,
        "<h1>locsim reproduction report</h1><p>{}. Every claim's verdict is computed from the data below.</p>",
        escape(&provenance_line(prov))
    );
    s.push_str("<h2>Summary</h2><table class=\"summary\"><tr><th>experiment</th><th>claim</th><th>verdict</th><th>detail</th></tr>");
    for r in summary_rows(figs) {
        let class = verdict_class(&r[2]);
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}</td></tr>",
            escape(&r[0]),
            escape(&r[1]),
            escape(&r[2]),
            escape(&r[3])
        );
    }
    s.push_str("</table>\n");
    html_machines(&mut s, figs);
    for f in figs {
        html_figure(&mut s, f);
    }
    if !pending.is_empty() {
        s.push_str("<h2>Not run in this build</h2><ul>");
        for p in pending {
            let _ = write!(
                s,
                "<li>{} ({}): {}</li>",
                escape(&p.name),
                escape(&p.figure),
                escape(p.pending.as_deref().unwrap_or(""))
            );
        }
        s.push_str("</ul>\n");
    }
    if let Some(b) = bench {
        s.push_str("<h2>Simulator speed</h2><p>Host timings (they vary from run to run).</p><table><tr><th>workload</th><th>protocol</th><th>M accesses/s</th><th>slowdown vs native</th><th>host cycles / access</th></tr>");
        for r in b {
            let _ = write!(s, "<tr><td>{}</td></tr>", speed_cells(r).join("</td><td>"));
        }
        s.push_str("</table>\n");
    }
    s.push_str(CHECK_SCRIPT);
    s.push_str("\n</body></html>\n");
    s
}

/// The report's table of each claim's verdict on each machine, if any claim has them.
fn html_machines(s: &mut String, figs: &[Figure]) {
    let rows = machine_rows(figs);
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        s,
        "<h2>Claims on each machine</h2><p>{}</p><table class=\"summary\"><tr><th>experiment</th><th>claim</th>",
        escape(MACHINES_INTRO)
    );
    for m in super::spec::MACHINES {
        let _ = write!(s, "<th>{m}</th>");
    }
    s.push_str("</tr>");
    for (e, c, v) in rows {
        let _ = write!(s, "<tr><td>{}</td><td>{}</td>", escape(&e), escape(&c));
        for w in v {
            let _ = write!(s, "<td class=\"{}\">{}</td>", verdict_class(&w), escape(&w));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>\n");
}

/// One figure of the report: its heading, SVG, note, grids and claims.
fn html_figure(s: &mut String, f: &Figure) {
    let _ = write!(
        s,
        "<h2 id=\"{}\">{}: {} ({})</h2>\n<figure>{}</figure>\n",
        escape(&f.name),
        escape(&f.name),
        escape(&f.title),
        escape(&f.figure),
        f.svg
    );
    if !f.note.is_empty() {
        let _ = write!(s, "<p>{}</p>", escape(f.note.trim()));
    }
    for (m, unit, g) in &f.metrics {
        s.push_str(&html_grid(m, unit, g, f.average));
    }
    s.push_str("<ul>");
    for (text, _, v) in &f.claims {
        let _ = write!(
            s,
            "<li>claim: {} &mdash; <b class=\"{}\">{}</b> ({})</li>",
            escape(text),
            verdict_class(v.word()),
            v.word(),
            escape(&v.detail)
        );
    }
    s.push_str("</ul>\n");
}

fn verdict_class(word: &str) -> &'static str {
    match word {
        "supported" => "supported",
        "not supported" => "not",
        _ => "none",
    }
}
