//! A spec's results: one row per point (metric values, derived ones appended), the CSV text,
//! and the grid a figure shows (mean per x value and series).

use super::grid::Grid;
use super::point::{Point, Values};
use super::spec::Spec;
use std::collections::BTreeMap;

/// Every point of a spec with its values, in `Spec::all_points` order; columns `Spec::columns`.
pub struct Table {
    pub rows: Vec<(Point, Vec<Option<f64>>)>,
}

impl Table {
    /// Assemble the table from per-point values (`lookup` must know every point of the spec),
    /// computing the derived columns.
    pub fn build(spec: &Spec, lookup: impl Fn(&Point) -> Option<Values>) -> Result<Table, String> {
        let kind_cols = spec.kind.executor().metrics();
        let mut raw: BTreeMap<Point, Values> = BTreeMap::new();
        let order = spec.all_points();
        for p in &order {
            let v = lookup(p).ok_or_else(|| format!("experiment {}: no result for point {}", spec.name, label(p)))?;
            if v.len() != kind_cols.len() {
                return Err(format!(
                    "experiment {}: point {} has {} values, its kind gives {} (a damaged cache or shard file)",
                    spec.name,
                    label(p),
                    v.len(),
                    kind_cols.len()
                ));
            }
            raw.insert(p.clone(), v);
        }
        let mut rows = Vec::with_capacity(order.len());
        for p in order {
            let mut v = raw[&p].clone();
            for d in &spec.derive {
                let col = kind_cols.iter().position(|m| m.name == d.metric).expect("validated");
                let reference = raw.get(&p.with(&d.axis, &d.reference)).and_then(|r| r[col]);
                v.push(match (v[col], reference) {
                    (Some(a), Some(b)) if b != 0.0 => Some(a / b),
                    _ => None,
                });
            }
            rows.push((p, v));
        }
        Ok(Table { rows })
    }

    /// The CSV text: axis columns (x, series, then the others by name), seed, metric columns.
    /// Numbers are printed in Rust's shortest round-trip form; a missing value is empty.
    pub fn csv(&self, spec: &Spec) -> String {
        let axes = axis_order(spec);
        let mut out = axes.join(",");
        out.push_str(",seed,");
        out.push_str(&spec.columns().join(","));
        out.push('\n');
        for (p, v) in &self.rows {
            let mut cells: Vec<String> = axes.iter().map(|a| csv_cell(p.get(a).unwrap_or(""))).collect();
            cells.push(p.seed.to_string());
            cells.extend(v.iter().map(|x| x.map_or(String::new(), |x| x.to_string())));
            out.push_str(&cells.join(","));
            out.push('\n');
        }
        out
    }

    /// Mean of `metric` per (x value, series value), over seeds and the other axes' values;
    /// only points whose every coordinate is one of the spec's axis values count (reference
    /// points added for a derived metric are not shown).
    pub fn grid(&self, spec: &Spec, metric: &str) -> Grid {
        let col = spec.columns().iter().position(|c| c == metric).expect("validated metric");
        let xs = spec.axes[&spec.x].clone();
        let series = spec.axes[&spec.series].clone();
        let mut sums = vec![vec![(0.0f64, 0u32, false); xs.len()]; series.len()];
        for (p, v) in &self.rows {
            if !p.coords.iter().all(|(a, val)| spec.axes[a].contains(val)) {
                continue;
            }
            let xi = xs.iter().position(|x| Some(x.as_str()) == p.get(&spec.x)).expect("x coordinate");
            let si = series.iter().position(|s| Some(s.as_str()) == p.get(&spec.series)).expect("series coordinate");
            let cell = &mut sums[si][xi];
            match v[col] {
                Some(x) => {
                    cell.0 += x;
                    cell.1 += 1;
                }
                None => cell.2 = true,
            }
        }
        let cells = sums
            .iter()
            .map(|row| row.iter().map(|&(s, n, missing)| (!missing && n > 0).then(|| s / n as f64)).collect())
            .collect();
        Grid { xs, series, cells }
    }
}

/// Axis columns in CSV order: x, series, then the others by name.
pub fn axis_order(spec: &Spec) -> Vec<String> {
    let mut v = vec![spec.x.clone(), spec.series.clone()];
    v.extend(spec.axes.keys().filter(|a| **a != spec.x && **a != spec.series).cloned());
    v
}

fn csv_cell(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `workload=sps protocol=h-wal seed=1`.
pub fn label(p: &Point) -> String {
    let mut s: Vec<String> = p.coords.iter().map(|(a, v)| format!("{a}={v}")).collect();
    s.push(format!("seed={}", p.seed));
    s.join(" ")
}
