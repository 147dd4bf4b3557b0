//! The qualitative claim a figure tests, as data, and its evaluation on the figure's grid.
//!
//! Kinds:
//! - `order`: `a` relation `b` (`<`, `<=`, `>`, `>=`), compared per x value when `a`, `b` are
//!   series (`along = "series"`, the default) or per series when they are x values
//!   (`along = "x"`); `scope = "every"` (default) needs it at every comparison, `"average"` only
//!   on the means over the x values.
//! - `monotonic`: each listed series (default all) is non-decreasing (`direction =
//!   "increasing"`) or non-increasing along the x values, in the spec's order.
//! - `bound`: every shown value of the listed series relation `value`; with `scope =
//!   "largest"`, only the largest of them (a claim about an extreme: "up to ...").
//! - `ratio_trend`: the ratio series `a` / series `b` is monotonic along x (`direction`).
//!
//! `tolerance` (relative, default 0) forgives differences that small: `a <= b` holds when
//! `a <= b * (1 + tolerance)`. `except` lists series or x values the paper's own text exempts
//! from the trend (e.g. "except for FB"): comparisons that involve one are left out, and the
//! verdict names them. A claim over a series or x value the data lack is "not evaluated", never
//! "supported".

use super::grid::Grid;
use serde::Deserialize;

#[derive(Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct RawClaim {
    text: String,
    kind: String,
    metric: String,
    #[serde(default)]
    a: Option<String>,
    #[serde(default)]
    b: Option<String>,
    #[serde(default)]
    relation: Option<String>,
    #[serde(default)]
    along: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    series: Option<Vec<String>>,
    #[serde(default)]
    direction: Option<String>,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    tolerance: Option<f64>,
    #[serde(default)]
    except: Vec<String>,
}

#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Rel {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Rel {
    fn parse(s: &str) -> Result<Rel, String> {
        Ok(match s {
            "<" => Rel::Lt,
            "<=" => Rel::Le,
            ">" => Rel::Gt,
            ">=" => Rel::Ge,
            _ => return Err(format!("relation `{s}`: allowed <, <=, >, >=")),
        })
    }

    fn symbol(self) -> &'static str {
        match self {
            Rel::Lt => "<",
            Rel::Le => "<=",
            Rel::Gt => ">",
            Rel::Ge => ">=",
        }
    }

    /// `a rel b`, with relative tolerance `tol` in the claim's favour.
    pub fn holds(self, a: f64, b: f64, tol: f64) -> bool {
        let slack = b.abs() * tol;
        match self {
            Rel::Lt => a < b + slack,
            Rel::Le => a <= b + slack,
            Rel::Gt => a > b - slack,
            Rel::Ge => a >= b - slack,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Test {
    Order { a: String, b: String, rel: Rel, along_x: bool, every: bool },
    Monotonic { series: Option<Vec<String>>, increasing: bool },
    Bound { series: Option<Vec<String>>, rel: Rel, value: f64, largest: bool },
    RatioTrend { a: String, b: String, increasing: bool },
}

/// A claim: its wording, the metric it is about and the test.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub text: String,
    pub metric: String,
    pub test: Test,
    pub tolerance: f64,
    /// Series or x values the paper's text exempts (left out of every comparison).
    pub except: Vec<String>,
}

/// The verdict on one claim.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Verdict {
    /// Some(true): the data support the claim; Some(false): they contradict it; None: not
    /// evaluated (data missing).
    pub supported: Option<bool>,
    /// The comparisons made, e.g. `6/6 hold; tightest sps: 0.91 >= 0.88`.
    pub detail: String,
}

impl Verdict {
    pub fn word(&self) -> &'static str {
        match self.supported {
            Some(true) => "supported",
            Some(false) => "not supported",
            None => "not evaluated",
        }
    }
}

fn need<T>(v: Option<T>, what: &str, kind: &str) -> Result<T, String> {
    v.ok_or_else(|| format!("claim kind {kind} needs `{what}`"))
}

fn direction(d: Option<String>, kind: &str) -> Result<bool, String> {
    match need(d, "direction", kind)?.as_str() {
        "increasing" => Ok(true),
        "decreasing" => Ok(false),
        o => Err(format!("direction `{o}`: allowed increasing, decreasing")),
    }
}

impl Claim {
    /// The claim of a spec's `[[claim]]` table; `metric_known` says whether the spec has a
    /// metric of that name.
    pub fn from_raw(r: RawClaim, metric_known: impl Fn(&str) -> bool) -> Result<Claim, String> {
        if !metric_known(&r.metric) {
            return Err(format!("claim `{}`: unknown metric `{}`", r.text, r.metric));
        }
        let k = r.kind.as_str();
        let test = match k {
            "order" => {
                let along_x = match r.along.as_deref().unwrap_or("series") {
                    "series" => false,
                    "x" => true,
                    o => return Err(format!("along `{o}`: allowed series, x")),
                };
                let every = match r.scope.as_deref().unwrap_or("every") {
                    "every" => true,
                    "average" => false,
                    o => return Err(format!("scope `{o}`: allowed every, average")),
                };
                let rel = Rel::parse(&need(r.relation, "relation", k)?)?;
                Test::Order { a: need(r.a, "a", k)?, b: need(r.b, "b", k)?, rel, along_x, every }
            }
            "monotonic" => Test::Monotonic { series: r.series, increasing: direction(r.direction, k)? },
            "bound" => Test::Bound {
                series: r.series,
                rel: Rel::parse(&need(r.relation, "relation", k)?)?,
                value: need(r.value, "value", k)?,
                largest: match r.scope.as_deref().unwrap_or("every") {
                    "every" => false,
                    "largest" => true,
                    o => return Err(format!("scope `{o}` of a bound: allowed every, largest")),
                },
            },
            "ratio_trend" => Test::RatioTrend {
                a: need(r.a, "a", k)?,
                b: need(r.b, "b", k)?,
                increasing: direction(r.direction, k)?,
            },
            o => return Err(format!("claim kind `{o}`: allowed order, monotonic, bound, ratio_trend")),
        };
        let tolerance = r.tolerance.unwrap_or(0.0);
        if !(0.0..1.0).contains(&tolerance) {
            return Err(format!("claim tolerance {tolerance}: allowed 0 <= t < 1"));
        }
        Ok(Claim { text: r.text, metric: r.metric, test, tolerance, except: r.except })
    }

    /// The (axis, value) pairs the claim names, for checking them against the spec's kind.
    pub fn names(&self, x: &str, series: &str) -> Vec<(String, String)> {
        let on = |axis: &str, v: &[String]| v.iter().map(|v| (axis.to_string(), v.clone())).collect::<Vec<_>>();
        match &self.test {
            Test::Order { a, b, along_x, .. } => on(if *along_x { x } else { series }, &[a.clone(), b.clone()]),
            Test::RatioTrend { a, b, .. } => on(series, &[a.clone(), b.clone()]),
            Test::Monotonic { series: s, .. } | Test::Bound { series: s, .. } => {
                on(series, s.as_deref().unwrap_or(&[]))
            }
        }
    }

    /// Evaluate on the grid of the claim's metric.
    pub fn evaluate(&self, g: &Grid) -> Verdict {
        match self.eval(g) {
            Ok((held, total, detail)) => Verdict { supported: Some(held == total), detail },
            Err(why) => Verdict { supported: None, detail: why },
        }
    }

    fn eval(&self, g: &Grid) -> Result<(usize, usize, String), String> {
        let (held, total, detail) = self.eval_all(g)?;
        if self.except.is_empty() {
            return Ok((held, total, detail));
        }
        Ok((held, total, format!("{detail}; excepted as in the paper: {}", self.except.join(", "))))
    }

    /// A grid without the excepted series and x values.
    fn kept(&self, g: &Grid) -> Grid {
        let xs: Vec<usize> = (0..g.xs.len()).filter(|&i| !self.except.contains(&g.xs[i])).collect();
        let ss: Vec<usize> = (0..g.series.len()).filter(|&i| !self.except.contains(&g.series[i])).collect();
        Grid {
            xs: xs.iter().map(|&i| g.xs[i].clone()).collect(),
            series: ss.iter().map(|&i| g.series[i].clone()).collect(),
            cells: ss.iter().map(|&s| xs.iter().map(|&x| g.cells[s][x]).collect()).collect(),
        }
    }

    fn eval_all(&self, g: &Grid) -> Result<(usize, usize, String), String> {
        let tol = self.tolerance;
        let kept = self.kept(g);
        let g = &kept;
        let mut checks: Vec<(String, f64, f64, Rel)> = Vec::new();
        match &self.test {
            Test::Order { a, b, rel, along_x, every } => {
                // `pick(a, other)`: the value of a (a series or an x value) at the other coordinate.
                let by_x = |x: &str, s: &str| g.get(x, s);
                let by_series = |s: &str, x: &str| g.get(x, s);
                let (others, pick): (&[String], &Pick) =
                    if *along_x { (&g.series, &by_x) } else { (&g.xs, &by_series) };
                if *every {
                    for o in others {
                        checks.push((o.clone(), value(pick(a, o), a, o)?, value(pick(b, o), b, o)?, *rel));
                    }
                } else if *along_x {
                    return Err("scope average compares series means: use along = series".into());
                } else {
                    checks.push((
                        "average".into(),
                        value(g.average(a), a, "average")?,
                        value(g.average(b), b, "average")?,
                        *rel,
                    ));
                }
                describe(&checks, tol, &format!("{a} {} {b}", rel.symbol()))
            }
            Test::Monotonic { series, increasing } => {
                let rel = if *increasing { Rel::Ge } else { Rel::Le };
                for s in series.clone().unwrap_or_else(|| g.series.clone()) {
                    for w in g.xs.windows(2) {
                        let here = format!("{s} {}->{}", w[0], w[1]);
                        checks.push((
                            here,
                            value(g.get(&w[1], &s), &s, &w[1])?,
                            value(g.get(&w[0], &s), &s, &w[0])?,
                            rel,
                        ));
                    }
                }
                describe(&checks, tol, if *increasing { "non-decreasing" } else { "non-increasing" })
            }
            Test::Bound { series, rel, value: bound, largest } => {
                for s in series.clone().unwrap_or_else(|| g.series.clone()) {
                    for x in &g.xs {
                        checks.push((format!("{s} {x}"), value(g.get(x, &s), &s, x)?, *bound, *rel));
                    }
                }
                if *largest {
                    let top = checks.iter().max_by(|a, b| a.1.total_cmp(&b.1)).cloned();
                    checks = top.into_iter().collect();
                    return describe(&checks, tol, &format!("largest {} {bound}", rel.symbol()));
                }
                describe(&checks, tol, &format!("{} {bound}", rel.symbol()))
            }
            Test::RatioTrend { a, b, increasing } => {
                let ratio = |x: &str| -> Result<f64, String> {
                    let (va, vb) = (value(g.get(x, a), a, x)?, value(g.get(x, b), b, x)?);
                    if vb == 0.0 {
                        return Err(format!("{b} is 0 at {x}"));
                    }
                    Ok(va / vb)
                };
                let rel = if *increasing { Rel::Ge } else { Rel::Le };
                for w in g.xs.windows(2) {
                    checks.push((format!("{a}/{b} {}->{}", w[0], w[1]), ratio(&w[1])?, ratio(&w[0])?, rel));
                }
                describe(&checks, tol, if *increasing { "ratio non-decreasing" } else { "ratio non-increasing" })
            }
        }
    }
}

/// A grid look-up by (first, second) coordinate, in either order.
type Pick<'a> = dyn Fn(&str, &str) -> Option<f64> + 'a;

fn value(v: Option<f64>, series: &str, x: &str) -> Result<f64, String> {
    v.ok_or_else(|| format!("not evaluated: no data for {series} at {x}"))
}

/// Count the comparisons that hold and name the first that fails (or the tightest that holds).
fn describe(checks: &[(String, f64, f64, Rel)], tol: f64, what: &str) -> Result<(usize, usize, String), String> {
    if checks.is_empty() {
        return Err("not evaluated: nothing to compare".into());
    }
    let held = checks.iter().filter(|(_, a, b, r)| r.holds(*a, *b, tol)).count();
    let shown = checks.iter().find(|(_, a, b, r)| !r.holds(*a, *b, tol)).unwrap_or_else(|| {
        checks.iter().min_by(|x, y| (x.1 - x.2).abs().total_cmp(&(y.1 - y.2).abs())).expect("non-empty")
    });
    let tag = if held == checks.len() { "tightest" } else { "fails at" };
    let tol_text = if tol > 0.0 { format!(", tolerance {tol}") } else { String::new() };
    Ok((
        held,
        checks.len(),
        format!(
            "{what}: {held}/{} hold{tol_text}; {tag} {}: {} {} {}",
            checks.len(),
            shown.0,
            fmt(shown.1),
            shown.3.symbol(),
            fmt(shown.2)
        ),
    ))
}

/// Four significant digits.
pub fn fmt(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let digits = (3 - v.abs().log10().floor() as i32).max(0) as usize;
    format!("{v:.digits$}")
}
