//! The crash checker's dispatcher: the crash points of a recorded run (every candidate cycle,
//! or a draw of them), split into contiguous chunks over worker threads, each worker one
//! [`Engine`] over its chunk (with the prefix oracle on one core, the closure oracle on N); the
//! workers' parts summed into the report.

use super::engine::Engine;
use super::oracle::{closure::Closure, prefix::Prefix, Oracle};
use super::{CrashReport, CrashSpec, GpfCutReport, Part, Violation, ViolationKind, WorkerSeconds};
use crate::hostmem::Sparse;
use crate::rng::Rng;
use crate::runner::{execute, Recorded, RunSpec, GIT_REV, VERSION};
use crate::types::Cycle;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Every distinct crash cycle: for each durable state, its first and last cycle.
pub(super) fn candidate_cycles(rec: &Recorded) -> Vec<Cycle> {
    let w = &rec.record.durable.writes;
    let mut times: Vec<Cycle> = w.iter().map(|x| x.durable).collect();
    times.dedup();
    let end = rec.end_cycle.max(times.last().copied().unwrap_or(Cycle::ZERO)) + Cycle::new(1);
    let mut c = Vec::with_capacity(2 * times.len() + 2);
    c.push(Cycle::ZERO);
    for (i, &d) in times.iter().enumerate() {
        if i == 0 && d > Cycle::ZERO {
            c.push(d - Cycle::new(1));
        }
        c.push(d);
        let next = times.get(i + 1).copied().unwrap_or(end + Cycle::new(1));
        if next - Cycle::new(1) > d {
            c.push(next - Cycle::new(1));
        }
    }
    // The end of the run: every transaction issued and acknowledged, every write durable.
    c.push(end);
    c.sort_unstable();
    c.dedup();
    c
}

fn durable_states(rec: &Recorded) -> u64 {
    let w = &rec.record.durable.writes;
    1 + w.windows(2).filter(|p| p[0].durable != p[1].durable).count() as u64 + u64::from(!w.is_empty())
}

fn choose_points(spec: &CrashSpec, cands: &[Cycle]) -> Vec<Cycle> {
    if let Some(t) = spec.crash_at {
        return vec![t];
    }
    if spec.exhaustive || spec.crashes as usize >= cands.len() {
        return cands.to_vec();
    }
    let mut idx: Vec<usize> = (0..cands.len()).collect();
    let mut rng = Rng::derive(spec.run.seed, 0xC4A5);
    let n = spec.crashes as usize;
    for i in 0..n {
        let j = i + rng.below((idx.len() - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut pts: Vec<Cycle> = idx[..n].iter().map(|&i| cands[i]).collect();
    pts.sort_unstable();
    pts
}

/// Run the workload with recording and check every chosen crash point.
pub fn check(spec: &CrashSpec) -> Result<CrashReport, String> {
    let mut run = spec.run.clone();
    run.record = true;
    match execute(&run) {
        Err(e) if run.bug.is_some() && e.starts_with(crate::sim::PROGRAM_FAULT) => Ok(fault_report(spec, e)),
        out => check_run(spec, out?),
    }
}

/// The report of a run whose program faulted under an injected bug: the bug caught while the
/// machine ran, before any crash (a broken machine handed the program a bad pointer), one
/// violation of kind `program-fault` whose replay is the run itself. Without an injected bug a
/// fault stays an error: a correct machine cannot cause one.
fn fault_report(spec: &CrashSpec, detail: String) -> CrashReport {
    let run = &spec.run;
    let kind = ViolationKind::ProgramFault;
    let violation = Violation {
        kind,
        seed: run.seed,
        crash_cycle: Cycle::ZERO,
        acked: 0,
        issued: 0,
        closest_k: 0,
        first_diff_addr: None,
        differing_blocks: 0,
        detail,
        replay: spec.replay_base.clone(),
        torn: None,
    };
    CrashReport {
        workload: run.workload.name().into(),
        protocol: run.protocol.name().into(),
        inject_bug: run.bug.map(|b| b.name().to_string()),
        seed: run.seed,
        txs_committed: 0,
        durable_writes: 0,
        durable_states: 0,
        candidate_crash_cycles: 0,
        crash_points: 0,
        atomicity: spec.atomicity,
        torn_states: 0,
        gpf_cut: None,
        violations: 1,
        violations_by_kind: [(kind, 1)].into(),
        first_violation: Some(violation),
        states_per_second: 0.0,
        check_seconds: 0.0,
        worker_seconds: WorkerSeconds::default(),
        version: VERSION,
        git_rev: GIT_REV,
        config_hash: run.cfg.hash_hex(),
    }
}

/// Check every chosen crash point of a recorded run of `spec.run` (made by the caller: a
/// replayed trace, [`crate::runner::execute_with`]).
pub fn check_run(spec: &CrashSpec, out: crate::runner::RunOutput) -> Result<CrashReport, String> {
    let rec = out.recorded.ok_or("check_run: the run was not recorded")?;
    Ok(check_recorded(spec, &spec.run, &rec))
}

/// Check the chosen crash points of a recorded run (`run` is `spec.run`).
pub(super) fn check_recorded(spec: &CrashSpec, run: &RunSpec, rec: &Recorded) -> CrashReport {
    let cands = candidate_cycles(rec);
    let points = choose_points(spec, &cands);
    let started = Instant::now();
    let parts = sweep_all(spec, rec, &points);
    let secs = started.elapsed().as_secs_f64();
    let worker_seconds = WorkerSeconds {
        starting: parts.iter().map(|p| p.starting.as_secs_f64()).sum(),
        following: parts.iter().map(|p| p.following.as_secs_f64()).sum(),
        at_points: parts.iter().map(|p| p.at_points.as_secs_f64()).sum(),
    };
    let mut by_kind = std::collections::BTreeMap::new();
    for (kind, n) in parts.iter().flat_map(|p| &p.by_kind) {
        *by_kind.entry(*kind).or_default() += n;
    }
    CrashReport {
        workload: run.workload.name().into(),
        protocol: run.protocol.name().into(),
        inject_bug: run.bug.map(|b| b.name().to_string()),
        seed: run.seed,
        txs_committed: rec.oracle.txs() as u64,
        durable_writes: rec.record.durable.writes.len() as u64,
        durable_states: durable_states(rec),
        candidate_crash_cycles: cands.len() as u64,
        crash_points: points.len() as u64,
        atomicity: spec.atomicity,
        torn_states: parts.iter().map(|p| p.torn_states).sum(),
        gpf_cut: spec
            .gpf_budget_lines
            .map(|budget_lines| GpfCutReport { budget_lines, states: parts.iter().map(|p| p.gpf_states).sum() }),
        violations: parts.iter().map(|p| p.violations).sum(),
        violations_by_kind: by_kind,
        // The chunks are in time order: the first violation of the first chunk that has one.
        first_violation: parts.into_iter().find_map(|p| p.first),
        states_per_second: points.len() as f64 / secs.max(1e-9),
        check_seconds: secs,
        worker_seconds,
        version: VERSION,
        git_rev: GIT_REV,
        config_hash: run.cfg.hash_hex(),
    }
}

/// Check `points` (sorted) on `spec.threads` workers, each over a contiguous chunk with its own
/// images advanced to the chunk's first point. Every check at a point is a function of the
/// point alone (the durable image, A(t), I(t), the seed), so the parts do not depend on how the
/// points are split.
fn sweep_all(spec: &CrashSpec, rec: &Recorded, points: &[Cycle]) -> Vec<Part> {
    let threads = spec.threads.clamp(1, points.len().max(1));
    let chunk = points.len().div_ceil(threads).max(1);
    let done = AtomicU64::new(0);
    let found = AtomicU64::new(0);
    let bar = spec.progress.then(|| progress_bar(spec, points.len() as u64)).flatten();
    let sparse = &Sparse::of(&rec.initial);
    // With other workers beside it, a worker commits its per-block arrays at its start (see
    // `Engine::new`).
    let shared = threads > 1;
    // With more than one core: the concurrent history, indexed once for every worker.
    let history = (rec.layout.cores > 1).then(|| {
        super::concurrent::History::new(&rec.oracle, &rec.record, &rec.initial[..rec.layout.data_bytes as usize])
    });
    let history = history.as_ref();
    std::thread::scope(|s| {
        let workers: Vec<_> = points
            .chunks(chunk)
            .map(|pts| {
                let (done, found) = (&done, &found);
                s.spawn(move || {
                    let start = Instant::now();
                    let verifier = spec.run.workload.build(&spec.run.cfg.workload);
                    let verifier = &verifier;
                    match history {
                        Some(h) => {
                            let oracle = Closure::new(spec, rec, h, verifier, sparse);
                            walk(Engine::new(spec, rec, oracle, sparse, shared), start, pts, done, found)
                        }
                        None => {
                            let oracle = Prefix::new(spec, rec, verifier, sparse, shared);
                            walk(Engine::new(spec, rec, oracle, sparse, shared), start, pts, done, found)
                        }
                    }
                })
            })
            .collect();
        if let Some(bar) = &bar {
            let began = Instant::now();
            let mut estimated = !spec.exhaustive;
            while workers.iter().any(|w| !w.is_finished()) {
                let n = done.load(Ordering::Relaxed);
                bar.set_position(n);
                bar.set_message(format!("{} violations", found.load(Ordering::Relaxed)));
                // An exhaustive check that is still running after its first second says how
                // long the whole takes at the rate so far.
                let elapsed = began.elapsed();
                if !estimated && elapsed >= ESTIMATE_AFTER && n > 0 {
                    estimated = true;
                    bar.println(estimate_line(points.len() as u64, n, elapsed));
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            bar.finish_and_clear();
        }
        workers.into_iter().map(|w| w.join().expect("crash-check worker panicked")).collect()
    })
}

/// One worker's walk over its points `pts` (made at `start`), counting the points done and the
/// violations found for the progress bar.
fn walk<O: Oracle>(
    mut engine: Engine<'_, O>,
    start: Instant,
    pts: &[Cycle],
    done: &AtomicU64,
    found: &AtomicU64,
) -> Part {
    let starting = start.elapsed();
    for &t in pts {
        let before = engine.part.violations;
        engine.check_point(t);
        done.fetch_add(1, Ordering::Relaxed);
        found.fetch_add(engine.part.violations - before, Ordering::Relaxed);
    }
    Part { starting, ..engine.part }
}

/// How long an exhaustive check runs before it estimates its whole time.
const ESTIMATE_AFTER: Duration = Duration::from_secs(1);

/// The estimate an exhaustive check prints once it has checked `done` of `total` states in
/// `elapsed` (the workers' start included, so it errs long).
pub(super) fn estimate_line(total: u64, done: u64, elapsed: Duration) -> String {
    let rate = done as f64 / elapsed.as_secs_f64().max(1e-9);
    let whole = total as f64 / rate.max(1e-9);
    let span = |s: f64| match s {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    };
    format!(
        "exhaustive: about {} in all at {:.0} states/s so far ({} left)",
        span(whole),
        rate,
        span((whole - elapsed.as_secs_f64()).max(0.0))
    )
}

/// A progress bar on standard error ([`super::progress_bar`]); an exhaustive check first says
/// how many states it will check, and after its first second about how long the whole takes
/// ([`estimate_line`]).
fn progress_bar(spec: &CrashSpec, total: u64) -> Option<indicatif::ProgressBar> {
    let bar = super::progress_bar(total)?;
    if spec.exhaustive {
        bar.println(format!("exhaustive: {total} crash states to check on {} threads", spec.threads.max(1)));
    }
    Some(bar)
}
