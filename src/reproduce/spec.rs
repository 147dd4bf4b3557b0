//! Experiment specs (`experiments/*.toml`): one file per figure or table. Parsing is strict: an
//! unknown key, an unknown axis, or a value the experiment kind does not know (a protocol or
//! workload name, a configuration key) is a one-line error naming it and what is allowed.
//!
//! A spec is expanded into [`Point`]s: the cartesian product of its axes (in the order the file
//! gives the values), times its seeds, plus the reference points its `[[derive]]` entries need.

use super::claim::Claim;
use super::kind::{Check, Kind};
use super::point::Point;
use serde::Deserialize;
use std::collections::BTreeMap;

/// How a figure is drawn.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Chart {
    /// Grouped bars: one group per x value (plus the average, when asked for), one bar per series.
    Bar,
    /// One line per series over the x values (equally spaced, in the file's order).
    Line,
}

/// Run lengths and seeds of one mode (`[quick]` or `[full]`).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunLen {
    /// Transactions in the measured region of each point (`sim`; a `journal` point replays its
    /// whole trace and needs none).
    #[serde(default)]
    pub txs: u64,
    /// Transactions before it (warm-up, excluded from the figures).
    #[serde(default)]
    pub warmup_txs: u64,
    /// Seeds; every point runs once per seed and the figures show the mean.
    pub seeds: Vec<u64>,
    /// Axis values replacing the spec's in this mode (e.g. fewer workloads in `--quick`).
    #[serde(default)]
    pub axes: BTreeMap<String, Vec<toml::Value>>,
}

/// A metric computed from two points: `name = metric / metric at (axis = reference)`, the other
/// coordinates and the seed equal (e.g. throughput normalised to the baseline protocol).
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Derive {
    pub name: String,
    pub metric: String,
    pub axis: String,
    pub reference: String,
    /// Unit shown on the plot's y axis.
    #[serde(default)]
    pub unit: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    title: String,
    /// The figure or table of the papers it reproduces ("LOC Fig. 9", "new").
    figure: String,
    kind: String,
    x: String,
    series: String,
    #[serde(default = "default_chart")]
    chart: String,
    metrics: Vec<String>,
    #[serde(default)]
    average: bool,
    #[serde(default)]
    note: String,
    axes: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    set: BTreeMap<String, toml::Value>,
    #[serde(default)]
    derive: Vec<Derive>,
    #[serde(default)]
    claim: Vec<super::claim::RawClaim>,
    /// The machines (`ordering.preset` values) the spec runs under, each its own figure: the
    /// first keeps the file's name, the others are named `NAME@MACHINE`.
    #[serde(default)]
    machines: Vec<String>,
    quick: RunLen,
    full: RunLen,
}

fn default_chart() -> String {
    "bar".into()
}

/// A parsed, validated spec, with the run lengths of the chosen mode.
#[derive(Clone, Debug)]
pub struct Spec {
    /// File stem: `experiments/loc-throughput.toml` is `loc-throughput`.
    pub name: String,
    pub title: String,
    pub figure: String,
    pub note: String,
    pub kind: Kind,
    /// Axis along the plot's x axis, and the axis whose values are the series.
    pub x: String,
    pub series: String,
    pub chart: Chart,
    /// Metrics plotted, one panel each.
    pub metrics: Vec<String>,
    /// Bar charts: add a group with the mean over the x values.
    pub average: bool,
    /// Axes by name, values as canonical text in the file's order.
    pub axes: BTreeMap<String, Vec<String>>,
    /// Fixed configuration overrides, as `key=value`.
    pub set: Vec<String>,
    pub derive: Vec<Derive>,
    pub claims: Vec<Claim>,
    pub run: RunLen,
    /// Why the spec cannot run in this build (e.g. it needs a protocol not yet implemented).
    pub pending: Option<String>,
    /// The file's text (kept for shard files, so `merge` is self-contained).
    pub source: String,
    /// The machine (`ordering.preset`) of a spec that runs under several; `None` otherwise.
    pub machine: Option<String>,
    /// The file stem (`name` without its `@MACHINE`).
    pub base: String,
}

/// The machines a spec's `machines` key may name (`ordering.preset` values).
pub const MACHINES: [&str; 3] = ["paper", "overlapped", "strictest"];

/// A TOML scalar as canonical text (`168`, `sps`, `0.5`, `true`).
fn value_text(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!("axis value {other}: allowed a string, integer, float or boolean")),
    }
}

fn axis_values(axes: &BTreeMap<String, Vec<toml::Value>>) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut out = BTreeMap::new();
    for (name, values) in axes {
        let texts: Vec<String> = values.iter().map(value_text).collect::<Result<_, _>>()?;
        if texts.is_empty() {
            return Err(format!("axis `{name}`: empty list"));
        }
        out.insert(name.clone(), texts);
    }
    Ok(out)
}

/// Parse and validate the text of spec `name`; `quick` chooses the run lengths.
/// A spec with `machines` stands for one spec per machine: `NAME` (the first machine) and
/// `NAME@MACHINE` (the others).
pub fn parse(name: &str, text: &str, quick: bool) -> Result<Spec, String> {
    // One line whatever the text holds: a value quoted in an error may contain a newline.
    parse_lines(name, text, quick).map_err(|e| e.replace('\n', "\\n"))
}

fn parse_lines(name: &str, text: &str, quick: bool) -> Result<Spec, String> {
    let e = |m: String| format!("experiment {name}: {m}");
    let raw: RawSpec = toml::from_str(text).map_err(|err| e(one_line(&err.to_string())))?;
    let (base, asked) = match name.split_once('@') {
        Some((b, m)) => (b, Some(m)),
        None => (name, None),
    };
    for m in &raw.machines {
        if !MACHINES.contains(&m.as_str()) {
            return Err(e(format!("machines: unknown machine `{m}`: allowed {}", MACHINES.join(", "))));
        }
    }
    let machine = match (asked, raw.machines.first()) {
        (Some(m), _) if raw.machines.iter().any(|x| x == m) => Some(m.to_string()),
        (Some(m), _) => return Err(e(format!("machine `{m}` is not in the spec's machines {:?}", raw.machines))),
        (None, first) => first.cloned(),
    };
    let kind = Kind::parse(&raw.kind).map_err(e)?;
    let chart = match raw.chart.as_str() {
        "bar" => Chart::Bar,
        "line" => Chart::Line,
        other => return Err(e(format!("chart `{other}`: allowed bar, line"))),
    };
    let mut run = if quick { raw.quick } else { raw.full };
    let mut axes = axis_values(&raw.axes).map_err(e)?;
    for (axis, values) in axis_values(&std::mem::take(&mut run.axes)).map_err(e)? {
        if !axes.contains_key(&axis) {
            return Err(e(format!(
                "[{}.axes] `{axis}` is not an axis of the spec",
                if quick { "quick" } else { "full" }
            )));
        }
        axes.insert(axis, values);
    }
    let mut set: Vec<String> =
        raw.set.iter().map(|(k, v)| value_text(v).map(|t| format!("{k}={t}"))).collect::<Result<_, _>>().map_err(e)?;
    let mut title = raw.title;
    if let Some(m) = &machine {
        set.push(format!("ordering.preset={m}"));
        title = format!("{title} ({m} machine)");
    }
    let mut spec = Spec {
        name: name.to_string(),
        title,
        figure: raw.figure,
        note: raw.note,
        kind,
        x: raw.x,
        series: raw.series,
        chart,
        metrics: raw.metrics,
        average: raw.average,
        axes,
        set,
        derive: raw.derive,
        claims: Vec::new(),
        run,
        pending: None,
        source: text.to_string(),
        machine,
        base: base.to_string(),
    };
    spec.claims = raw
        .claim
        .into_iter()
        .map(|c| Claim::from_raw(c, |m| has_metric(&spec, m)))
        .collect::<Result<_, _>>()
        .map_err(e)?;
    validate(&mut spec).map_err(e)?;
    Ok(spec)
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn validate(spec: &mut Spec) -> Result<(), String> {
    for axis in [&spec.x, &spec.series] {
        if !spec.axes.contains_key(axis) {
            return Err(format!("`{axis}` (x or series) is not an axis: axes are {}", names(&spec.axes)));
        }
    }
    if spec.x == spec.series {
        return Err(format!("x and series are both `{}`", spec.x));
    }
    if spec.run.seeds.is_empty() {
        return Err("seeds: allowed a list of at least one seed".into());
    }
    if spec.kind == Kind::Sim && spec.run.txs == 0 {
        return Err("txs = 0: allowed 1 or more".into());
    }
    let ex = spec.kind.executor();
    for d in spec.derive.clone() {
        if !ex.metrics().iter().any(|m| m.name == d.metric) {
            return Err(format!("derive `{}`: unknown metric `{}`: allowed {}", d.name, d.metric, metric_names(spec)));
        }
        spec.axes.get(&d.axis).ok_or_else(|| format!("derive `{}`: `{}` is not an axis", d.name, d.axis))?;
        check_value(spec, &d.axis, &d.reference)?;
    }
    for m in &spec.metrics {
        if !has_metric(spec, m) {
            return Err(format!("unknown metric `{m}`: allowed {}", metric_names(spec)));
        }
    }
    for (axis, values) in spec.axes.clone() {
        for v in &values {
            check_value(spec, &axis, v)?;
        }
    }
    for s in &spec.set {
        ex.check_set(s)?;
    }
    // A claim may name a protocol not implemented yet (it is then not evaluated), never an
    // unknown one.
    for c in &spec.claims {
        for (axis, v) in c.names(&spec.x, &spec.series) {
            ex.check(&axis, &v).map_err(|e| format!("claim `{}`: {e}", c.text))?;
        }
    }
    Ok(())
}

fn check_value(spec: &mut Spec, axis: &str, value: &str) -> Result<(), String> {
    match spec.kind.executor().check(axis, value)? {
        Check::Ok => Ok(()),
        Check::Pending(why) => {
            spec.pending.get_or_insert(why);
            Ok(())
        }
    }
}

fn names(axes: &BTreeMap<String, Vec<String>>) -> String {
    axes.keys().cloned().collect::<Vec<_>>().join(", ")
}

/// Is `m` a metric of the spec (its kind's, or derived)?
pub fn has_metric(spec: &Spec, m: &str) -> bool {
    spec.kind.executor().metrics().iter().any(|k| k.name == m) || spec.derive.iter().any(|d| d.name == m)
}

fn metric_names(spec: &Spec) -> String {
    let mut v: Vec<&str> = spec.kind.executor().metrics().iter().map(|m| m.name).collect();
    v.extend(spec.derive.iter().map(|d| d.name.as_str()));
    v.join(", ")
}

impl Spec {
    /// Every point the spec shows, in a fixed order: axes by name, values in file order, then
    /// seeds (the last axis varies fastest).
    pub fn points(&self) -> Vec<Point> {
        let mut pts = vec![Vec::new()];
        for (axis, values) in &self.axes {
            let mut next = Vec::with_capacity(pts.len() * values.len());
            for p in &pts {
                for v in values {
                    let mut q: Vec<(String, String)> = p.clone();
                    q.push((axis.clone(), v.clone()));
                    next.push(q);
                }
            }
            pts = next;
        }
        let mut out = Vec::new();
        for coords in pts {
            for &seed in &self.run.seeds {
                out.push(Point { coords: coords.clone(), seed });
            }
        }
        out
    }

    /// The shown points plus the reference points of every `[[derive]]`, without duplicates,
    /// in a fixed order (shown points first).
    pub fn all_points(&self) -> Vec<Point> {
        let shown = self.points();
        let mut seen: std::collections::BTreeSet<Point> = shown.iter().cloned().collect();
        let mut out = shown.clone();
        for d in &self.derive {
            for p in &shown {
                let r = p.with(&d.axis, &d.reference);
                if seen.insert(r.clone()) {
                    out.push(r);
                }
            }
        }
        out
    }

    /// Every metric column of the spec's CSV: the kind's, then the derived ones.
    pub fn columns(&self) -> Vec<String> {
        let mut c: Vec<String> = self.kind.executor().metrics().iter().map(|m| m.name.to_string()).collect();
        c.extend(self.derive.iter().map(|d| d.name.clone()));
        c
    }

    /// Unit of a metric (for the y axis).
    pub fn unit(&self, metric: &str) -> String {
        if let Some(m) = self.kind.executor().metrics().iter().find(|m| m.name == metric) {
            return m.unit.to_string();
        }
        self.derive.iter().find(|d| d.name == metric).and_then(|d| d.unit.clone()).unwrap_or_else(|| "ratio".into())
    }
}

/// The `machines` list of a spec's text (empty when it has none or does not parse).
fn machines_of(text: &str) -> Vec<String> {
    toml::from_str::<RawSpec>(text).map(|r| r.machines).unwrap_or_default()
}

/// Read every `*.toml` in `dir` (sorted by name); `only` keeps the named specs (each must exist).
pub fn load_dir(dir: &std::path::Path, only: &[String], quick: bool) -> Result<Vec<Spec>, String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("experiments directory {}: {e}", dir.display()))?;
    let mut files: Vec<(String, std::path::PathBuf)> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| Some((p.file_stem()?.to_str()?.to_string(), p)))
        .collect();
    files.sort();
    for o in only {
        if !files.iter().any(|(n, _)| n == o) {
            let all: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
            return Err(format!("--only {o}: unknown experiment: allowed {}", all.join(", ")));
        }
    }
    let mut specs = Vec::new();
    for (name, path) in files {
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let first = parse(&name, &text, quick)?;
        let others: Vec<String> = machines_of(&text).into_iter().skip(1).collect();
        specs.push(first);
        for m in others {
            specs.push(parse(&format!("{name}@{m}"), &text, quick)?);
        }
    }
    Ok(specs)
}
