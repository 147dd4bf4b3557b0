//! `locsim reproduce`: every figure and table of the papers from the experiment specs in
//! `experiments/`, and `locsim merge` for sharded runs. See `docs/reproduce.md`.
//!
//! Flow: load the specs ([`spec`]), expand each into points, identify each point by its text
//! (kind, overrides, coordinates, seed, run lengths) so that a point shared by several specs
//! (e.g. a baseline run) runs once, take what the [`cache`] has, run the rest in parallel, the
//! longest first (`schedule`: `--jobs` threads, one [`kind::Executor`] call per point, the
//! points that must not share a process in [`worker`] processes, the simulator-speed
//! measurement beside them), then write per spec a CSV, a JSON with
//! provenance and an SVG ([`svg`]), and the report ([`report`]). With `--shard i/N` only the
//! points whose index is `i` modulo `N` run and a shard file is written instead; [`merge`]
//! combines shard files and writes the same outputs.
//!
//! Every figure is a pure function of the point values, so outputs are identical whatever the
//! number of jobs, the shards or the cache; only the simulator-speed section of the report (host
//! timings) varies.

pub mod cache;
pub mod claim;
pub mod grid;
pub mod kind;
pub mod point;
mod progress;
pub mod report;
mod schedule;
pub mod spec;
pub mod svg;
pub mod table;
pub mod timing;
pub mod worker;

use crate::bench::BenchRow;
use kind::Job;
use point::{Point, Values};
use serde::{Deserialize, Serialize};
use spec::Spec;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What `reproduce` was asked to do.
#[derive(Clone, Debug)]
pub struct Options {
    /// Directory of the specs (`experiments/`).
    pub experiments: PathBuf,
    pub out: PathBuf,
    pub quick: bool,
    /// Spec names to run (empty: all).
    pub only: Vec<String>,
    /// Worker threads (>= 1).
    pub jobs: usize,
    /// `(i, n)`: run the points whose index is `i` modulo `n`, `0 <= i < n`.
    pub shard: Option<(usize, usize)>,
    /// Measure simulator speed for the report.
    pub bench: bool,
    /// No progress output (tests).
    pub quiet: bool,
    /// Write the per-point host timings ([`timing::csv`]) to this file.
    pub timings: Option<PathBuf>,
    /// The `locsim` executable to start [`worker`] processes from (`locsim reproduce-worker`),
    /// so that the points that must not share a process run in parallel; `None` (a library
    /// caller, whose executable is not `locsim`): they run one after the other in this process.
    pub workers: Option<PathBuf>,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Distinct points simulated, and taken from the cache.
    pub executed: usize,
    pub cached: usize,
    /// Points not simulated because another point of this run computes the same (see
    /// [`kind::Executor::identity`]).
    pub shared: usize,
    /// Specs written (name), and specs left out with the reason.
    pub written: Vec<String>,
    pub pending: Vec<(String, String)>,
    /// Host seconds of every distinct point (cached ones included, at 0 s), in point order.
    pub times: Vec<timing::PointTime>,
    /// Host seconds by phase.
    pub phases: timing::Phases,
}

/// The identity of a point's computation (without the build; see [`cache`]).
pub fn point_text(spec: &Spec, p: &Point) -> String {
    let coords: Vec<String> = p.coords.iter().map(|(a, v)| format!("{a}={v}")).collect();
    format!(
        "kind={} set=[{}] point=[{}] seed={} txs={} warmup_txs={}",
        spec.kind.name(),
        spec.set.join(" "),
        coords.join(" "),
        p.seed,
        spec.run.txs,
        spec.run.warmup_txs
    )
}

/// A shard's results, written to `OUT/shard-I-of-N.json` and read by `merge`.
#[derive(Serialize, Deserialize)]
pub struct ShardFile {
    pub version: String,
    pub git_rev: String,
    pub quick: bool,
    pub shard: usize,
    pub shards: usize,
    /// The specs run: name and file text.
    pub specs: Vec<(String, String)>,
    /// Point text -> encoded values.
    pub points: BTreeMap<String, serde_json::Value>,
    pub bench: Option<Vec<BenchRow>>,
}

/// Run the reproduction.
pub fn reproduce(o: &Options) -> Result<Summary, String> {
    if o.jobs == 0 {
        return Err("--jobs 0: allowed 1 or more".into());
    }
    let started = std::time::Instant::now();
    let specs = spec::load_dir(&o.experiments, &o.only, o.quick)?;
    let mut summary = Summary::default();
    summary.phases.jobs = o.jobs;
    let (runnable, pending): (Vec<Spec>, Vec<Spec>) = specs.into_iter().partition(|s| s.pending.is_none());
    summary.pending = pending.iter().map(|s| (s.name.clone(), s.pending.clone().unwrap_or_default())).collect();
    let (results, bench) = run_points(o, &runnable, &mut summary, started)?;
    let outputs_started = std::time::Instant::now();
    std::fs::create_dir_all(&o.out).map_err(|e| format!("--out {}: {e}", o.out.display()))?;
    if let Some(path) = &o.timings {
        crate::outfile::write(path, timing::csv(&summary.times))?;
    }
    if let Some((i, n)) = o.shard {
        let file = ShardFile {
            version: crate::runner::VERSION.into(),
            git_rev: crate::runner::GIT_REV.into(),
            quick: o.quick,
            shard: i,
            shards: n,
            specs: runnable.iter().chain(&pending).map(|s| (s.name.clone(), s.source.clone())).collect(),
            points: results.iter().map(|(k, v)| (k.clone(), cache::encode(v))).collect(),
            bench,
        };
        let path = o.out.join(format!("shard-{i}-of-{n}.json"));
        let text = serde_json::to_string_pretty(&file).expect("serializable");
        crate::outfile::write(&path, text)?;
        summary.phases.outputs = outputs_started.elapsed().as_secs_f64();
        return Ok(summary);
    }
    let prov = report::Provenance::current(o.quick);
    summary.written = write_outputs(&o.out, &runnable, &pending, &results, bench.as_deref(), &prov)?;
    summary.phases.outputs = outputs_started.elapsed().as_secs_f64();
    Ok(summary)
}

/// Distinct points of all specs (first appearance order), with the index of the spec that
/// first needs each.
fn distinct_points(specs: &[Spec]) -> Vec<(String, usize, Point)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (si, s) in specs.iter().enumerate() {
        for p in s.all_points() {
            let t = point_text(s, &p);
            if seen.insert(t.clone()) {
                out.push((t, si, p));
            }
        }
    }
    out
}

/// The values of every point, and the speed measurement when asked for.
type Outcome = (BTreeMap<String, Values>, Option<Vec<BenchRow>>);

/// A point to compute: its text, its spec, the point, and its entry in the timings.
type Todo = (String, usize, Point, usize);

fn run_points(
    o: &Options,
    specs: &[Spec],
    summary: &mut Summary,
    started: std::time::Instant,
) -> Result<Outcome, String> {
    let cache = cache::Cache::new(&o.out);
    let mut results = BTreeMap::new();
    let (todo, mut times) = look_up_cached(o, specs, &cache, &mut results, summary);
    summary.phases.setup = started.elapsed().as_secs_f64();
    let (same_as, runs) = distinct_runs(specs, &todo);
    let sweep_started = std::time::Instant::now();
    let outcomes = Sweep::new(o, specs, &todo, &runs, &cache).run();
    summary.phases.points = sweep_started.elapsed().as_secs_f64();
    let mut bench = None;
    let mut done: Vec<Option<PointOutcome>> = (0..runs.len()).map(|_| None).collect();
    for outcome in outcomes {
        match outcome {
            Finished::Point(r, v) => done[r] = Some(v),
            Finished::Speed(rows, secs) => {
                summary.phases.bench = secs;
                bench = Some(rows?);
            }
        }
    }
    let done: Vec<(Values, f64, f64, bool)> =
        done.into_iter().map(|d| d.expect("every point ran")).collect::<Result<_, _>>()?;
    for (i, (text, _, _, ti)) in todo.iter().enumerate() {
        let r = same_as[i];
        let (v, secs, cpu, reused) = &done[r];
        times[*ti] = if runs[r] == i && !reused {
            summary.executed += 1;
            timing::PointTime { seconds: *secs, cpu_seconds: *cpu, source: timing::Source::Run, ..times[*ti].clone() }
        } else {
            if runs[r] != i {
                cache.put(text, v)?;
            }
            summary.shared += 1;
            timing::PointTime { source: timing::Source::Shared, ..times[*ti].clone() }
        };
        results.insert(text.clone(), v.clone());
    }
    summary.times = times;
    Ok((results, bench))
}

/// The points of this shard: the cached ones' values into `results`, the others returned to
/// compute; and every point's timing entry (a cached one's final).
fn look_up_cached(
    o: &Options,
    specs: &[Spec],
    cache: &cache::Cache,
    results: &mut BTreeMap<String, Values>,
    summary: &mut Summary,
) -> (Vec<Todo>, Vec<timing::PointTime>) {
    let (mut todo, mut times) = (Vec::new(), Vec::new());
    for (idx, (text, si, p)) in distinct_points(specs).into_iter().enumerate() {
        if o.shard.is_some_and(|(i, n)| idx % n != i) {
            continue;
        }
        let time = timing::PointTime {
            experiment: specs[si].name.clone(),
            point: table::label(&p),
            seconds: 0.0,
            cpu_seconds: 0.0,
            source: timing::Source::Cache,
        };
        // An entry of the wrong length (edited by hand) is computed again.
        match cache.get(&text).filter(|v| v.len() == specs[si].kind.executor().metrics().len()) {
            Some(v) => {
                results.insert(text, v);
                summary.cached += 1;
            }
            None => todo.push((text, si, p, times.len())),
        }
        times.push(time);
    }
    (todo, times)
}

/// Points of different texts that compute the same thing (e.g. the ordering ablation's `paper`
/// step and the figures on the papers' machine, at equal run lengths) run once: per point of
/// `todo`, its run; and per run, its first point.
fn distinct_runs(specs: &[Spec], todo: &[Todo]) -> (Vec<usize>, Vec<usize>) {
    let mut first_of: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut same_as: Vec<usize> = Vec::with_capacity(todo.len());
    let mut runs: Vec<usize> = Vec::new();
    for (i, t) in todo.iter().enumerate() {
        let id = specs[t.1].kind.executor().identity(&job_of(specs, t)).unwrap_or_else(|| t.0.clone());
        let r = *first_of.entry(format!("{}\n{id}", specs[t.1].kind.name())).or_insert_with(|| {
            runs.push(i);
            runs.len() - 1
        });
        same_as.push(r);
    }
    (same_as, runs)
}

/// The runs of one `reproduce` (each distinct point, and the speed measurement if asked), on
/// the workers: what each needs to run, pass over or answer one.
struct Sweep<'a> {
    o: &'a Options,
    specs: &'a [Spec],
    todo: &'a [Todo],
    runs: &'a [usize],
    cache: &'a cache::Cache,
    progress: progress::Progress,
    /// Per spec, its progress bar (specs with work only).
    bar_of: Vec<Option<usize>>,
    /// Each worker but the first runs exclusive tasks in a child process of its own.
    processes: bool,
    children: Vec<Mutex<Option<worker::Worker>>>,
    /// Per run, the workload configuration it populates: a worker passes over a point whose
    /// workload configuration another worker is populating.
    populates: Vec<Option<String>>,
    /// Per run, its base identity: a point that differs from a finished one only in
    /// configuration keys that run never read takes its values ([`kind::Executor::run_reads`]);
    /// a worker passes over a point while another runs one of the same base identity, whose
    /// finished run may answer it.
    bases: Vec<Option<String>>,
    reads: Reads,
}

impl<'a> Sweep<'a> {
    fn new(o: &'a Options, specs: &'a [Spec], todo: &'a [Todo], runs: &'a [usize], cache: &'a cache::Cache) -> Self {
        let sweeps: Vec<(String, u64)> = specs
            .iter()
            .enumerate()
            .map(|(si, s)| (s.name.clone(), runs.iter().filter(|&&i| todo[i].1 == si).count() as u64))
            .filter(|s| s.1 > 0)
            .collect();
        let of_run = |f: &dyn Fn(&dyn kind::Executor, &Job) -> Option<String>| -> Vec<Option<String>> {
            (0..runs.len()).map(|r| f(specs[todo[runs[r]].1].kind.executor(), &job_of(specs, &todo[runs[r]]))).collect()
        };
        Sweep {
            o,
            specs,
            todo,
            runs,
            cache,
            progress: progress::Progress::new(&sweeps, o.quiet),
            bar_of: specs.iter().map(|s| sweeps.iter().position(|w| w.0 == s.name)).collect(),
            processes: o.workers.is_some() && o.jobs > 1,
            children: (0..o.jobs).map(|_| Mutex::new(None)).collect(),
            populates: of_run(&|e, j| e.populates(j)),
            bases: of_run(&|e, j| e.base_identity(j)),
            reads: Reads::default(),
        }
    }

    /// Every task on the workers, costliest first; their outcomes.
    fn run(self) -> Vec<Finished> {
        let tasks = tasks(self.o, self.specs, self.todo, self.runs);
        let exclusive: Vec<bool> = tasks.iter().map(|t| t.point().is_none_or(|r| self.exclusive(r))).collect();
        let blocked = |t: &Task| {
            t.point().is_some_and(|r| {
                self.populates[r].as_deref().is_some_and(crate::runner::populating)
                    || self.bases[r].as_ref().is_some_and(|b| self.reads.running(b))
            })
        };
        let outcomes =
            schedule::run(&tasks, &exclusive, self.o.jobs, self.processes, blocked, |task, w| match task.point() {
                None => self.speed(w),
                Some(r) => self.point(r, w),
            });
        let Sweep { children, progress, .. } = self;
        drop(children);
        progress.finish();
        outcomes
    }

    /// Must run `r` have a process to itself?
    fn exclusive(&self, r: usize) -> bool {
        let t = &self.todo[self.runs[r]];
        self.specs[t.1].kind.executor().exclusive(&job_of(self.specs, t))
    }

    /// Worker `w`'s child process, if it runs a task that must be `exclusive` in one.
    fn child(&self, w: usize, exclusive: bool) -> Option<(&Mutex<Option<worker::Worker>>, &Path)> {
        match &self.o.workers {
            Some(exe) if self.processes && exclusive && w > 0 => Some((&self.children[w], exe.as_path())),
            _ => None,
        }
    }

    /// The simulator-speed measurement, on worker `w`.
    fn speed(&self, w: usize) -> Finished {
        let (rows, secs, _) = timing::timed(|| match self.child(w, true) {
            Some((slot, exe)) => in_child(slot, exe, |c| match c.ask(&worker::Request::Speed)? {
                worker::Answer::Speed(rows) => Ok(rows),
                worker::Answer::Error(e) => Err(e),
                worker::Answer::Point { .. } => Err("reproduce worker: answered another request".into()),
            }),
            None => {
                let _alone = kind::sqlite_alone();
                measure_speed()
            }
        });
        Finished::Speed(rows, secs)
    }

    /// Run `r` on worker `w` (or its values from a finished run that answers it), cached.
    fn point(&self, r: usize, w: usize) -> Finished {
        let t = &self.todo[self.runs[r]];
        let s = &self.specs[t.1];
        let job = job_of(self.specs, t);
        let exec = s.kind.executor();
        let base = self.bases[r].as_deref();
        let answered = base.and_then(|b| self.reads.answer(b, |unread| exec.identity_without(&job, unread)));
        let (v, secs, cpu, reused) = match answered {
            Some(v) => (Ok(v), 0.0, 0.0, true),
            None => {
                let _running = base.map(|b| self.reads.start(b));
                let (v, secs, cpu) = match self.child(w, self.exclusive(r)) {
                    Some((slot, exe)) => {
                        let (v, secs, _) =
                            timing::timed(|| in_child(slot, exe, |c| c.point(&worker::Request::point(s.kind, &job))));
                        match v {
                            Ok((v, unread, cpu)) => (Ok((v, unread)), secs, cpu),
                            Err(e) => (Err(e), secs, 0.0),
                        }
                    }
                    None => timing::timed(|| exec.run_reads(&job)),
                };
                if let (Some(b), Ok((v, unread))) = (base, &v) {
                    if let Some(id) = exec.identity_without(&job, unread) {
                        self.reads.finish(b, id, unread, v);
                    }
                }
                (v.map(|(v, _)| v), secs, cpu, false)
            }
        };
        let v = v.map_err(|e| format!("experiment {} at {}: {e}", s.name, table::label(&t.2)));
        let v = v.and_then(|v| self.cache.put(&t.0, &v).map(|()| v));
        self.progress.tick(self.bar_of[t.1].expect("spec with work has a bar"));
        Finished::Point(r, v.map(|v| (v, secs, cpu, reused)))
    }
}

/// What the workers run: the simulator-speed measurement, or the `i`th point of `runs`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Task {
    Speed,
    Point(usize),
}

/// A task's outcome: the speed measurement with its wall seconds, or a point's values with its
/// wall and CPU seconds.
enum Finished {
    Speed(Result<Vec<BenchRow>, String>, f64),
    Point(usize, PointOutcome),
}

/// A point's values with its wall and CPU seconds, and whether another point's run gave them.
type PointOutcome = Result<(Values, f64, f64, bool), String>;

/// The finished runs that may answer other points ([`kind::Executor::run_reads`]), and the base
/// identities being run now, shared by the workers.
#[derive(Default)]
struct Reads {
    /// Base identity -> each finished run of it.
    finished: Mutex<HashMap<String, Vec<FinishedRun>>>,
    /// Base identity -> runs of it in progress.
    running: Mutex<HashMap<String, usize>>,
}

impl Reads {
    /// The values of a finished run of base identity `base` whose identity without the keys it
    /// never read is the asking point's (`identity_without` gives the asking point's).
    fn answer(&self, base: &str, identity_without: impl Fn(&[String]) -> Option<String>) -> Option<Values> {
        let finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        let runs = finished.get(base)?;
        runs.iter().find(|(id, unread, _)| identity_without(unread).as_ref() == Some(id)).map(|(_, _, v)| v.clone())
    }

    fn finish(&self, base: &str, id: String, unread: &[String], values: &Values) {
        let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        finished.entry(base.to_string()).or_default().push((id, unread.to_vec(), values.clone()));
    }

    /// Note a run of `base` in progress until the guard drops.
    fn start<'a>(&'a self, base: &'a str) -> Running<'a> {
        *self.running.lock().unwrap_or_else(|e| e.into_inner()).entry(base.to_string()).or_default() += 1;
        Running { reads: self, base }
    }

    fn running(&self, base: &str) -> bool {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).get(base).is_some_and(|&n| n > 0)
    }
}

/// A finished run's identity without the keys it never read, those keys, and its values.
type FinishedRun = (String, Vec<String>, Values);

/// A run in progress ([`Reads::start`]).
struct Running<'a> {
    reads: &'a Reads,
    base: &'a str,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.reads.running.lock().unwrap_or_else(|e| e.into_inner()).get_mut(self.base) {
            *n -= 1;
        }
    }
}

impl Task {
    fn point(self) -> Option<usize> {
        match self {
            Task::Speed => None,
            Task::Point(r) => Some(r),
        }
    }
}

/// The tasks in the order the workers take them: the speed measurement (when asked for), then
/// the points, the costliest first ([`kind::Executor::cost`]; equal costs in point order), so
/// that no long point starts last and the workers finish together.
fn tasks(o: &Options, specs: &[Spec], todo: &[Todo], runs: &[usize]) -> Vec<Task> {
    let cost = |r: usize| specs[todo[runs[r]].1].kind.executor().cost(&job_of(specs, &todo[runs[r]]));
    let mut points: Vec<(f64, usize)> = (0..runs.len()).map(|r| (cost(r), r)).collect();
    points.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let speed = o.bench && o.shard.is_none_or(|(i, _)| i == 0);
    speed.then_some(Task::Speed).into_iter().chain(points.into_iter().map(|(_, r)| Task::Point(r))).collect()
}

/// Run `f` on the worker process of `slot`, starting it first if need be.
fn in_child<R>(
    slot: &std::sync::Mutex<Option<worker::Worker>>,
    exe: &Path,
    f: impl FnOnce(&mut worker::Worker) -> Result<R, String>,
) -> Result<R, String> {
    let mut w = slot.lock().unwrap_or_else(|e| e.into_inner());
    if w.is_none() {
        *w = Some(worker::Worker::spawn(exe)?);
    }
    f(w.as_mut().expect("started above"))
}

/// The job of a point to run (text, spec index, point, timing row).
fn job_of<'a>(specs: &'a [Spec], (_, si, p, _): &'a Todo) -> Job<'a> {
    let s = &specs[*si];
    Job { point: p, set: &s.set, txs: s.run.txs, warmup_txs: s.run.warmup_txs }
}

/// Simulator speed for the report: every workload and protocol, one short measurement each,
/// the same in both modes (a sample beside the figures; `locsim bench` measures with longer
/// runs and repeats).
pub(crate) fn measure_speed() -> Result<Vec<BenchRow>, String> {
    let mut cfg = crate::config::Config::default();
    cfg.workload.warmup_txs = 200;
    crate::bench::measure(&cfg, crate::workload::WorkloadKind::ALL, crate::protocol::ProtocolKind::ALL, 2_000, 1)
}

/// Write every runnable spec's CSV, JSON and SVG, then REPORT.md and report.html. Returns the
/// names written.
pub fn write_outputs(
    out: &Path,
    specs: &[Spec],
    pending: &[Spec],
    results: &BTreeMap<String, Values>,
    bench: Option<&[BenchRow]>,
    prov: &report::Provenance,
) -> Result<Vec<String>, String> {
    let write = |name: &str, text: &str| crate::outfile::write(&out.join(name), text);
    let mut figures = Vec::new();
    for s in specs {
        let t = table::Table::build(s, |p| results.get(&point_text(s, p)).cloned())?;
        let fig = report::Figure::new(s, &t);
        write(&format!("{}.csv", s.name), &t.csv(s))?;
        write(&format!("{}.json", s.name), &report::spec_json(s, &t, &fig, prov))?;
        write(&format!("{}.svg", s.name), &fig.svg)?;
        figures.push(fig);
    }
    if let Some(b) = bench {
        write("bench.csv", &report::bench_csv(b))?;
    }
    write("REPORT.md", &report::markdown(&figures, pending, bench, prov))?;
    write("report.html", &report::html(&figures, pending, bench, prov))?;
    Ok(specs.iter().map(|s| s.name.clone()).collect())
}

/// Combine shard files from `dirs` (each holding one or more `shard-*-of-N.json`) and write the
/// outputs an unsharded run writes into `out`. Refuses, with one line naming the file, a shard
/// that is missing, given twice, truncated (not JSON, or lacking some of its points), or foreign
/// (another spec set, mode, build or shard count, or holding points that are not its own).
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Summary, String> {
    // One line whatever the files hold: a point named in an error may contain a newline.
    merge_shards(dirs, out).map_err(|e| e.replace('\n', "\\n"))
}

fn merge_shards(dirs: &[PathBuf], out: &Path) -> Result<Summary, String> {
    let shards = read_shards(dirs)?;
    let (first_path, first) = shards.first().ok_or("merge: no shard-*-of-N.json files in the given directories")?;
    let n = first.shards;
    let specs: Vec<Spec> =
        first.specs.iter().map(|(name, text)| spec::parse(name, text, first.quick)).collect::<Result<_, _>>()?;
    let (runnable, pending): (Vec<Spec>, Vec<Spec>) = specs.into_iter().partition(|s| s.pending.is_none());
    let points: Vec<String> = distinct_points(&runnable).into_iter().map(|(t, _, _)| t).collect();
    let mut have = vec![false; n];
    for (path, s) in &shards {
        let p = path.display();
        if s.shards != n || s.quick != first.quick || s.specs != first.specs || s.git_rev != first.git_rev {
            return Err(format!(
                "merge: {p}: shard {} of {} does not match {} (shard {} of {n}): another spec set, mode, build or shard count",
                s.shard,
                s.shards,
                first_path.display(),
                first.shard
            ));
        }
        if s.shard >= n {
            return Err(format!("merge: {p}: shard {} of {n}: allowed 0 <= I < N", s.shard));
        }
        if std::mem::replace(&mut have[s.shard], true) {
            return Err(format!("merge: {p}: shard {} of {n} given twice", s.shard));
        }
        check_shard_points(&p.to_string(), s, &points)?;
    }
    if let Some(missing) = have.iter().position(|h| !h) {
        return Err(format!("merge: shard {missing} of {n} is missing"));
    }
    let mut results = BTreeMap::new();
    for (_, s) in &shards {
        for (k, v) in &s.points {
            results.insert(k.clone(), cache::decode(v).ok_or_else(|| format!("merge: corrupt values for {k}"))?);
        }
    }
    let bench = shards.iter().find_map(|(_, s)| s.bench.clone());
    std::fs::create_dir_all(out).map_err(|e| format!("--out {}: {e}", out.display()))?;
    let prov =
        report::Provenance { version: first.version.clone(), git_rev: first.git_rev.clone(), quick: first.quick };
    let mut summary = Summary { cached: results.len(), ..Default::default() };
    summary.pending = pending.iter().map(|s| (s.name.clone(), s.pending.clone().unwrap_or_default())).collect();
    summary.written = write_outputs(out, &runnable, &pending, &results, bench.as_deref(), &prov)?;
    Ok(summary)
}

/// Every `shard-*.json` file of `dirs`, parsed, with its path, in path order per directory.
fn read_shards(dirs: &[PathBuf]) -> Result<Vec<(PathBuf, ShardFile)>, String> {
    let mut shards = Vec::new();
    for d in dirs {
        let rd = std::fs::read_dir(d).map_err(|e| format!("{}: {e}", d.display()))?;
        let mut paths: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("shard-") && n.ends_with(".json"))
            })
            .collect();
        paths.sort();
        for p in paths {
            let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let s = serde_json::from_str(&text)
                .map_err(|e| format!("merge: {}: not a shard file (truncated or damaged?): {e}", p.display()))?;
            shards.push((p, s));
        }
    }
    Ok(shards)
}

/// A shard holds exactly its own points (index `shard` modulo `shards` among `points`, the
/// distinct points of its specs): fewer means a truncated or edited file, others a foreign one.
fn check_shard_points(path: &str, s: &ShardFile, points: &[String]) -> Result<(), String> {
    let own: std::collections::HashSet<&str> =
        points.iter().enumerate().filter(|(i, _)| i % s.shards == s.shard).map(|p| p.1.as_str()).collect();
    if let Some(k) = s.points.keys().find(|k| !own.contains(k.as_str())) {
        return Err(format!("merge: {path}: shard {} of {} holds a point not its own ({k})", s.shard, s.shards));
    }
    let lacks = own.iter().filter(|&&k| !s.points.contains_key(k)).count();
    if lacks > 0 {
        return Err(format!(
            "merge: {path}: shard {} of {} lacks {lacks} of its {} points (truncated or edited)",
            s.shard,
            s.shards,
            own.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
