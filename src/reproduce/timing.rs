//! Where `reproduce`'s time goes: the host seconds of every point (wall and the CPU time of the
//! thread that ran it), per experiment and per phase. Host timings are never part of a figure;
//! they go to standard output (the slow experiments, after the summary) and, with
//! `--timings FILE`, to a CSV with one row per point.
//!
//! A point shared by several experiments is charged to the first that needs it (the order of
//! `super::distinct_points`), so the experiments' seconds add up to the points' total.
//! Experiments run side by side on the worker threads: an experiment's point seconds are a
//! share of the work, not of the wall time.

use std::fmt::Write;
use std::time::Instant;

/// One point of a run: the experiment it is charged to, its coordinates, and what it cost.
#[derive(Clone, Debug)]
pub struct PointTime {
    pub experiment: String,
    /// Coordinates and seed (`protocol=h-wal workload=sps seed=1`).
    pub point: String,
    /// Wall seconds of the point in this run (0 when not run: [`Source`]).
    pub seconds: f64,
    /// CPU seconds of the worker thread over the point (0 when not run).
    pub cpu_seconds: f64,
    pub source: Source,
}

/// Where a point's values came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Simulated in this run.
    Run,
    /// The cache of an earlier run.
    Cache,
    /// Another point of this run that computes the same ([`super::kind::Executor::identity`]).
    Shared,
}

impl Source {
    pub fn word(self) -> &'static str {
        match self {
            Source::Run => "run",
            Source::Cache => "cache",
            Source::Shared => "shared",
        }
    }
}

/// What a run spent outside the points, in wall seconds, by phase.
#[derive(Clone, Debug, Default)]
pub struct Phases {
    /// Loading and expanding the specs, and looking points up in the cache.
    pub setup: f64,
    /// Running the points (wall time of the parallel sweep).
    pub points: f64,
    /// The simulator-speed measurement of the report (it runs on a worker, beside the points:
    /// part of the points' wall time).
    pub bench: f64,
    /// Tables, claims, SVGs, JSONs and the report.
    pub outputs: f64,
    /// Worker threads.
    pub jobs: usize,
}

/// CPU seconds consumed by the calling thread so far.
pub fn thread_cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `clock_gettime` writes one `timespec` into the valid, exclusive `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// Run `f`, returning its result with its wall and thread CPU seconds.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, f64, f64) {
    let (wall, cpu) = (Instant::now(), thread_cpu_seconds());
    let r = f();
    (r, wall.elapsed().as_secs_f64(), thread_cpu_seconds() - cpu)
}

/// Quote a CSV field when it needs it.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The per-point table (`--timings FILE`): one row per distinct point, in the order of the
/// points of all experiments.
pub fn csv(rows: &[PointTime]) -> String {
    let mut s = String::from("experiment,point,seconds,cpu_seconds,source\n");
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{:.3},{:.3},{}",
            field(&r.experiment),
            field(&r.point),
            r.seconds,
            r.cpu_seconds,
            r.source.word()
        );
    }
    s
}

/// Per experiment (first-appearance order): points run, points not run (cached or shared), wall
/// and CPU seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentTime {
    pub experiment: String,
    pub executed: usize,
    pub not_run: usize,
    pub seconds: f64,
    pub cpu_seconds: f64,
}

pub fn by_experiment(rows: &[PointTime]) -> Vec<ExperimentTime> {
    let mut out: Vec<ExperimentTime> = Vec::new();
    for r in rows {
        let i = match out.iter().position(|e| e.experiment == r.experiment) {
            Some(i) => i,
            None => {
                out.push(ExperimentTime {
                    experiment: r.experiment.clone(),
                    executed: 0,
                    not_run: 0,
                    seconds: 0.0,
                    cpu_seconds: 0.0,
                });
                out.len() - 1
            }
        };
        let e = &mut out[i];
        if r.source == Source::Run {
            e.executed += 1;
        } else {
            e.not_run += 1;
        }
        e.seconds += r.seconds;
        e.cpu_seconds += r.cpu_seconds;
    }
    out
}

/// An experiment is listed at the end of a run when its points took at least this share of
/// all point seconds.
pub const SLOW_SHARE: f64 = 0.02;

/// The lines `reproduce` ends with: the phases, then every experiment whose points took at least
/// [`SLOW_SHARE`] of the point seconds, slowest first, with its seconds, share and slowest point.
pub fn report_lines(rows: &[PointTime], phases: &Phases) -> Vec<String> {
    let total: f64 = rows.iter().map(|r| r.seconds).sum();
    let cpu: f64 = rows.iter().map(|r| r.cpu_seconds).sum();
    let mut lines = vec![format!(
        "time: set-up {:.1} s, points {:.1} s wall ({total:.1} s of point time, {cpu:.1} s CPU, {} jobs; the speed measurement {:.1} s beside them), outputs {:.1} s",
        phases.setup, phases.points, phases.jobs, phases.bench, phases.outputs
    )];
    if total <= 0.0 {
        return lines;
    }
    let mut exps = by_experiment(rows);
    exps.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    for e in exps.iter().filter(|e| e.seconds >= SLOW_SHARE * total) {
        let slowest = rows
            .iter()
            .filter(|r| r.experiment == e.experiment)
            .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
            .expect("an experiment with seconds has points");
        lines.push(format!(
            "  {:<28} {:>7.1} s {:>5.1} %  {} points (slowest {:.1} s: {})",
            e.experiment,
            e.seconds,
            100.0 * e.seconds / total,
            e.executed,
            slowest.seconds,
            slowest.point
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(e: &str, p: &str, s: f64, cached: bool) -> PointTime {
        let source = if cached { Source::Cache } else { Source::Run };
        PointTime { experiment: e.into(), point: p.into(), seconds: s, cpu_seconds: s / 2.0, source }
    }

    #[test]
    fn experiments_sum_their_points_and_count_cached_ones_apart() {
        let rows = [row("a", "x=1", 1.0, false), row("b", "x=1", 0.0, true), row("a", "x=2", 2.5, false)];
        let e = by_experiment(&rows);
        assert_eq!(e.len(), 2);
        assert_eq!(
            e[0],
            ExperimentTime { experiment: "a".into(), executed: 2, not_run: 0, seconds: 3.5, cpu_seconds: 1.75 }
        );
        assert_eq!(
            e[1],
            ExperimentTime { experiment: "b".into(), executed: 0, not_run: 1, seconds: 0.0, cpu_seconds: 0.0 }
        );
    }

    #[test]
    fn report_lists_slow_experiments_slowest_first_and_leaves_out_small_ones() {
        let rows = [row("small", "p", 0.01, false), row("fast", "p", 1.0, false), row("slow", "q", 3.0, false)];
        let lines = report_lines(&rows, &Phases { jobs: 2, ..Phases::default() });
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[1].trim_start().starts_with("slow") && lines[1].contains("74.8 %"), "{}", lines[1]);
        assert!(lines[2].trim_start().starts_with("fast"), "{}", lines[2]);
    }

    #[test]
    fn csv_quotes_fields_with_commas() {
        let t = csv(&[row("e", "app=fb,x", 1.0, false)]);
        assert_eq!(t, "experiment,point,seconds,cpu_seconds,source\ne,\"app=fb,x\",1.000,0.500,run\n");
    }
}
