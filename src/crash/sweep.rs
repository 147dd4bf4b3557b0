//! The sweep over crash points; see the module documentation of [`crate::crash`].

use super::gapview::GapView;
use super::overlay::{Overlaid, Overlay};
use super::{guard_due, torn};
use crate::hostmem::Sparse;
use crate::log::head::LogFormat;
use crate::recovery::{self, Plan};
use crate::rng::Rng;
use crate::runner::{execute, Recorded, RunSpec, GIT_REV, VERSION};
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};
use crate::workload::follow::Follow;
use crate::workload::Workload;

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many durable writes ahead of the one landing the sweep starts loading the lines the
/// next landings touch (a host cache hint; no effect on results).
const LOOK_AHEAD: usize = 8;

/// Flags of a data block in [`Sweep`]'s running difference: it differs between the image and
/// the oracle; it is queued to be compared again.
const DIFFERS: u8 = 1;
const QUEUED: u8 = 2;

/// What to check.
#[derive(Clone, Debug)]
pub struct CrashSpec {
    pub run: RunSpec,
    /// Number of crash points to draw (ignored with `exhaustive` or `crash_at`).
    pub crashes: u64,
    pub exhaustive: bool,
    /// Check exactly this crash cycle (replay of a reported violation).
    pub crash_at: Option<Cycle>,
    /// The command line that reproduces the run, without crash-point options.
    pub replay_base: String,
    /// Worker threads (at least 1). The crash points are split into this many contiguous
    /// chunks; the report does not depend on it, only the timings do.
    pub threads: usize,
    /// Show a progress bar on standard error (only drawn when it is a terminal).
    pub progress: bool,
    /// Bytes a write persists atomically (8, 16, 32 or 64, [`super::torn::ATOMICITIES`]). Below
    /// 64, each crash point is also checked in the torn states of the writes in flight at it
    /// ([`super::torn`], docs/faults.md).
    pub atomicity: u32,
    /// The cut-short Global Persistent Flush (`--gpf-budget-lines`, under `gpf` only): each
    /// crash point is also checked with phase 1 stopped after this many lines
    /// ([`super::gpf`], docs/cxl.md).
    pub gpf_budget_lines: Option<u64>,
    /// A library caller's structural check of each recovered data area, besides the
    /// workload's own (the Python binding's `verify=`): a message is a `structure` violation.
    pub verify: Option<UserVerify>,
}

/// A structural check of a data area: `Err` names what is broken.
pub type VerifyFn = dyn Fn(&[u8]) -> Result<(), String> + Send + Sync;

/// A structural check of a data area supplied by a library caller.
#[derive(Clone)]
pub struct UserVerify(pub std::sync::Arc<VerifyFn>);

impl std::fmt::Debug for UserVerify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UserVerify")
    }
}

impl CrashSpec {
    /// `crashes` points drawn from a run of `run`, one thread, no progress bar.
    pub fn new(run: RunSpec, crashes: u64) -> CrashSpec {
        CrashSpec {
            run,
            crashes,
            exhaustive: false,
            crash_at: None,
            replay_base: String::new(),
            threads: 1,
            progress: false,
            atomicity: 64,
            gpf_budget_lines: None,
            verify: None,
        }
    }
}

/// One violation, with what is needed to replay it.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// `prefix`, `structure`, `idempotence`, `recovery-error` or `program-fault` (the run itself
    /// faulted under an injected bug, [`crate::sim::PROGRAM_FAULT`]).
    pub kind: String,
    pub seed: u64,
    pub crash_cycle: Cycle,
    /// A(t): transactions acknowledged durable at the crash.
    pub acked: u64,
    /// I(t): transactions whose commit had been called.
    pub issued: u64,
    /// The k in A..=I whose S_k differs from the recovered image in the fewest blocks.
    pub closest_k: u64,
    /// First byte address where the recovered data area differs from S_closest_k.
    pub first_diff_addr: Option<u64>,
    pub differing_blocks: u64,
    pub detail: String,
    pub replay: String,
    /// The torn write(s) of this state, if it is a torn state ([`super::torn`]).
    pub torn: Option<String>,
}

/// The result of `locsim crashtest`.
#[derive(Clone, Debug, Serialize)]
pub struct CrashReport {
    pub workload: String,
    pub protocol: String,
    pub inject_bug: Option<String>,
    pub seed: u64,
    pub txs_committed: u64,
    pub durable_writes: u64,
    /// Distinct durable images during the run (one more than the distinct durability cycles).
    pub durable_states: u64,
    /// Crash cycles worth checking: the first and the last cycle of each durable state.
    pub candidate_crash_cycles: u64,
    pub crash_points: u64,
    /// Bytes a write persists atomically, and the torn states checked besides the crash points.
    pub atomicity: u32,
    pub torn_states: u64,
    /// The cut-short Global Persistent Flush: its budget and the states it added (absent
    /// without `--gpf-budget-lines`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpf_cut: Option<GpfCutReport>,
    pub violations: u64,
    pub violations_by_kind: std::collections::BTreeMap<String, u64>,
    pub first_violation: Option<Violation>,
    pub states_per_second: f64,
    pub check_seconds: f64,
    /// Where the workers' time went (host timing like `check_seconds`, summed over workers).
    pub worker_seconds: WorkerSeconds,
    pub version: &'static str,
    pub git_rev: &'static str,
    pub config_hash: String,
}

/// The cut-short GPF fault's part of a report ([`super::gpf`]).
#[derive(Clone, Debug, Serialize)]
pub struct GpfCutReport {
    /// Dirty lines phase 1 writes back before its energy runs out.
    pub budget_lines: u64,
    /// Crash states checked with lines lost (points whose dirty lines exceeded the budget).
    pub states: u64,
}

/// The crash checker's workers' time, split by what it grows with: `starting`, a worker's own
/// images and verifier (a copy of the initial image: grows with the memory); `following`, bringing a
/// worker from one point to the next (landing the durable writes between them, applying the
/// transactions committed between them to the oracle, the incremental verifier and the Kiln
/// tracker catching up on the blocks those changed), which grows with the transactions between
/// points; `at_points`,
/// checking each state (recovery, the comparison with S_k, the prefix search, idempotence),
/// which grows with the points. Host timing: not part of the verdicts.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct WorkerSeconds {
    pub starting: f64,
    pub following: f64,
    pub at_points: f64,
}

/// Block writes applied to an image, kept so they can be rolled back.
#[derive(Default)]
struct Undo(Vec<(BlockId, BlockData)>);

impl Undo {
    fn apply(&mut self, img: &mut [u8], writes: &[(BlockId, BlockData)]) {
        for (b, d) in writes {
            self.0.push((*b, img[b.range()].try_into().unwrap()));
            img[b.range()].copy_from_slice(d);
        }
    }
    fn rollback(&mut self, img: &mut [u8]) {
        while let Some((b, d)) = self.0.pop() {
            img[b.range()].copy_from_slice(&d);
        }
    }
}

/// Every distinct crash cycle: for each durable state, its first and last cycle.
fn candidate_cycles(rec: &Recorded) -> Vec<Cycle> {
    let w = &rec.record.durable.writes;
    let mut times: Vec<Cycle> = w.iter().map(|x| x.durable).collect();
    times.dedup();
    let end = rec.end_cycle.max(times.last().copied().unwrap_or(Cycle::ZERO)) + Cycle(1);
    let mut c = Vec::with_capacity(2 * times.len() + 2);
    c.push(Cycle::ZERO);
    for (i, &d) in times.iter().enumerate() {
        if i == 0 && d > Cycle::ZERO {
            c.push(d - Cycle(1));
        }
        c.push(d);
        let next = times.get(i + 1).copied().unwrap_or(end + Cycle(1));
        if next - Cycle(1) > d {
            c.push(next - Cycle(1));
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
    let kind = "program-fault".to_string();
    let violation = Violation {
        kind: kind.clone(),
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
fn check_recorded(spec: &CrashSpec, run: &RunSpec, rec: &Recorded) -> CrashReport {
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
        *by_kind.entry(kind.clone()).or_default() += n;
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

/// Where two data areas differ, for a violation's report: the first differing byte address
/// (`None` if equal) and how many 64-byte blocks differ.
pub(super) fn difference(x: &[u8], y: &[u8]) -> (Option<u64>, u64) {
    let (mut n, mut first) = (0u64, None);
    for (bi, (x, y)) in x.chunks(64).zip(y.chunks(64)).enumerate() {
        if x != y {
            n += 1;
            if first.is_none() {
                let off = x.iter().zip(y).position(|(p, q)| p != q).unwrap_or(0);
                first = Some((bi * 64 + off) as u64);
            }
        }
    }
    (first, n)
}

/// Two 64-byte blocks are equal: eight word compares, inlined (a slice comparison calls
/// `memcmp`, whose call costs more than the compare at this size).
#[inline(always)]
fn same_block(x: &[u8], y: &[u8]) -> bool {
    let (x, y): (&BlockData, &BlockData) = (x.try_into().unwrap(), y.try_into().unwrap());
    let w = |b: &BlockData, i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
    (0..8).fold(0, |acc, i| acc | (w(x, i) ^ w(y, i))) == 0
}

/// What one worker found over its chunk of crash points.
#[derive(Default)]
pub(super) struct Part {
    pub(super) starting: Duration,
    pub(super) following: Duration,
    pub(super) at_points: Duration,
    pub(super) torn_states: u64,
    pub(super) gpf_states: u64,
    pub(super) violations: u64,
    pub(super) by_kind: std::collections::BTreeMap<String, u64>,
    pub(super) first: Option<Violation>,
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
    // `Sweep::new`).
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
                    if let Some(h) = history {
                        let mut sweep = super::cores::CoreSweep::new(spec, rec, h, &verifier, sparse);
                        let starting = start.elapsed();
                        for &t in pts {
                            let before = sweep.part.violations;
                            sweep.check_point(t);
                            done.fetch_add(1, Ordering::Relaxed);
                            found.fetch_add(sweep.part.violations - before, Ordering::Relaxed);
                        }
                        return Part { starting, ..sweep.part };
                    }
                    let mut sweep = Sweep::new(spec, rec, &verifier, sparse, shared);
                    let starting = start.elapsed();
                    for &t in pts {
                        let before = sweep.violations;
                        sweep.check_point(t);
                        done.fetch_add(1, Ordering::Relaxed);
                        found.fetch_add(sweep.violations - before, Ordering::Relaxed);
                    }
                    Part {
                        starting,
                        following: sweep.following,
                        at_points: sweep.at_points,
                        torn_states: sweep.torn_states,
                        gpf_states: sweep.gpf_states,
                        violations: sweep.violations,
                        by_kind: sweep.by_kind,
                        first: sweep.first,
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

/// How long an exhaustive check runs before it estimates its whole time.
const ESTIMATE_AFTER: Duration = Duration::from_secs(1);

/// The estimate an exhaustive check prints once it has checked `done` of `total` states in
/// `elapsed` (the workers' start included, so it errs long).
fn estimate_line(total: u64, done: u64, elapsed: Duration) -> String {
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

/// State carried across crash points (all advanced monotonically in time).
///
/// The cost of a crash point is what changed since the previous one (durable writes, oracle
/// transactions) plus what recovery reads and writes; nothing here grows with the length of the
/// run (docs/performance.md, "Crash checking").
struct Sweep<'a> {
    spec: &'a CrashSpec,
    rec: &'a Recorded,
    /// The workload's structural verifier (one per worker: a workload need not be `Sync`).
    verifier: &'a Workload,
    /// The durable image in the protocols' (logical) layout: what recovery reads.
    img: Vec<u8>,
    /// With Start-Gap: the durable physical image the writes it owns land in, from which the
    /// log area of `img` is brought up to date before recovery.
    phys: Option<GapView>,
    next_write: usize,
    /// S_oracle_k: the data area after the first `oracle_k` committed transactions.
    oracle: Vec<u8>,
    oracle_k: usize,
    data_len: usize,
    /// The running difference between the data area of `img` and `oracle`: `differs[b] &
    /// DIFFERS` says data block `b` differs, `ndiff` counts such blocks. Every write to either
    /// side (a durable write, an oracle transaction, a recovery plan and its rollback) queues
    /// the blocks it lands in (`unsettled`, flagged `QUEUED`), and each queued block is
    /// compared once before the next comparison ([`Sweep::settle`]), so "recovered data ==
    /// S_k" is `ndiff == 0`; a whole comparison at the 1st, 8th, 64th, ... comparison guards
    /// this bookkeeping.
    differs: Vec<u8>,
    unsettled: Vec<u32>,
    ndiff: usize,
    compares: u64,
    /// The last write of the current recovery plan to each block: `plan_last[b] = (gen, index)`
    /// is valid when `gen == plan_gen` (a stamp, so that no per-point clearing is needed).
    plan_last: Vec<(u32, u32)>,
    plan_gen: u32,
    /// The last recovery plan, and whether a durable write outside the data area has landed
    /// since (see [`Sweep::plan`]); plans reused, and cuts inside the redo writes, so far.
    last_plan: Option<Plan>,
    outside_written: bool,
    /// Kiln's recovery kept up to date block by block ([`recovery::kiln::Tracker`]), in place of
    /// `last_plan` while it can follow the image; whether building one may succeed now (not
    /// after a failed try until the log area is written); its uses (the 1st, 8th, 64th, ...
    /// compared with a whole recovery); the homes it re-derives.
    tracker: Option<recovery::kiln::Tracker>,
    /// Whether this check uses a tracker at all (Kiln's log format, no Start-Gap).
    trackable: bool,
    tracker_retry: bool,
    /// Recovery, through HOOP's scan cache where it applies ([`super::Recoverer`]): told of
    /// every durable write; the idempotence check's second recovery runs on an image the cache
    /// has not heard of (the plan's writes reach no slice, only homes and heads, which the
    /// cache compares).
    recoverer: super::Recoverer,
    tracked: u64,
    retrack: Vec<(BlockId, Option<BlockId>)>,
    /// The overlay (see [`Sweep::plan`]): D's content under each redo write laid over `img`.
    overlay: Overlay,
    reuses: u64,
    redo_prefixes: u64,
    /// The structural verdict on S_k, per k, once computed. When the prefix rule holds the
    /// recovered data area equals S_k byte for byte, so the verifier's verdict depends on k
    /// alone: each distinct recovered image is verified once.
    verdicts: Vec<Option<Result<(), String>>>,
    /// The incremental verifier, where the workload has one ([`crate::workload::follow`]): it
    /// follows the oracle's own data area, hearing of the blocks changed since it last looked
    /// (`vold`: each block once, `vmark[b] == vstamp`, with its content then) whenever the
    /// oracle holds an S_k whose verdict is wanted ([`Sweep::verdict_here`]); `synced`: it has
    /// taken the oracle whole once.
    follower: Option<Box<dyn Follow>>,
    synced: bool,
    vold: Vec<(usize, BlockData)>,
    vmark: Vec<u32>,
    vstamp: u32,
    /// Verdicts the follower gave; a whole check confirms them at the 64th, 4096th, ...
    followed: u64,
    /// Reused buffers: the undo of tentative oracle transactions, of a plan, of a second plan,
    /// the blocks only a second plan writes.
    oracle_undo: Vec<(u64, u32, usize)>,
    oracle_undo_bytes: Vec<u8>,
    plan_undo: Vec<(BlockId, BlockData)>,
    second_undo: Vec<(BlockId, BlockData)>,
    outside: Vec<(BlockId, BlockData)>,
    violations: u64,
    by_kind: std::collections::BTreeMap<String, u64>,
    first: Option<Violation>,
    /// Torn writes: the longest service time of a write, the torn states checked, and the one
    /// being checked (for the violation report).
    max_service: Cycle,
    torn_states: u64,
    torn_now: Option<String>,
    /// The cut-short GPF fault ([`super::gpf`]) and the states it added.
    gpf_cut: Option<super::gpf::GpfCut<'a>>,
    gpf_states: u64,
    /// This worker's time ([`WorkerSeconds`]).
    following: Duration,
    at_points: Duration,
    /// The part of `following` done lazily at the current point ([`Sweep::lazily`]).
    heard: Duration,
}

impl<'a> Sweep<'a> {
    /// `sparse`: the non-zero pages of `rec.initial` (workers copy only those); `shared`: other
    /// workers run beside this one.
    fn new(spec: &'a CrashSpec, rec: &'a Recorded, verifier: &'a Workload, sparse: &Sparse, shared: bool) -> Sweep<'a> {
        let data_len = rec.layout.data_bytes as usize;
        let phys = GapView::new(&spec.run.cfg.startgap, &rec.layout, || sparse.copy(&rec.initial));
        let trackable = spec.run.protocol.log_format() == Some(LogFormat::Kiln) && phys.is_none();
        let recoverer = super::Recoverer::new(spec.run.protocol.log_format(), &rec.layout, phys.is_some());
        let logical_len = rec.layout.total_bytes() as usize;
        // Arrays read at random places before they are written there: committed when other
        // workers run. Otherwise a page read first maps the kernel's shared zero page, and the
        // write that later replaces it interrupts every other worker to flush its TLB
        // (`hostmem::commit_zeroed`; at two workers this took half of their time at the points).
        // Not `plan_last`, which only plans reach: committing its 8 bytes per block of the
        // whole layout cost more at the start than it saved.
        fn commit<T: Copy>(mut v: Vec<T>, zero: T, shared: bool) -> Vec<T> {
            if shared {
                crate::hostmem::commit_zeroed(&mut v, zero);
            }
            v
        }
        Sweep {
            spec,
            rec,
            verifier,
            img: sparse.copy(&rec.initial[..logical_len]),
            phys,
            next_write: 0,
            oracle: sparse.copy(&rec.initial[..data_len]),
            oracle_k: 0,
            data_len,
            differs: commit(vec![0; data_len / 64], 0, shared),
            unsettled: Vec::new(),
            ndiff: 0,
            compares: 0,
            plan_last: vec![(0, 0); logical_len / 64],
            plan_gen: 0,
            last_plan: None,
            outside_written: true,
            tracker: None,
            trackable,
            tracker_retry: trackable,
            recoverer,
            tracked: 0,
            retrack: Vec::new(),
            overlay: Overlay::new(commit(vec![(0, 0); data_len / 64], (0, 0), shared)),
            reuses: 0,
            redo_prefixes: 0,
            verdicts: vec![None; rec.oracle.txs() + 1],
            // A caller's own check sees whole images: no incremental verifier then.
            follower: if spec.verify.is_none() { verifier.follower() } else { None },
            synced: false,
            vold: Vec::new(),
            vmark: commit(vec![0; data_len.div_ceil(64)], 0, shared),
            vstamp: 1,
            followed: 0,
            oracle_undo: Vec::new(),
            oracle_undo_bytes: Vec::new(),
            plan_undo: Vec::new(),
            second_undo: Vec::new(),
            outside: Vec::new(),
            violations: 0,
            by_kind: Default::default(),
            first: None,
            // A pass over every write of the run: only where torn states are checked.
            max_service: if spec.atomicity < 64 { torn::max_service(&rec.record.durable.writes) } else { Cycle::ZERO },
            torn_states: 0,
            torn_now: None,
            gpf_cut: super::gpf::for_run(spec, rec),
            gpf_states: 0,
            following: Duration::ZERO,
            at_points: Duration::ZERO,
            heard: Duration::ZERO,
        }
    }

    /// A(t) and I(t).
    fn bounds(&self, t: Cycle) -> (u64, u64) {
        let r = &self.rec.record;
        let i = r.commit_called.partition_point(|&c| c <= t) as u64;
        let a = r.acks.partition_point(|&(c, _)| c <= t);
        let a = if a == 0 { 0 } else { r.acks[a - 1].1 };
        (a, i)
    }

    fn check_point(&mut self, t: Cycle) {
        let rec = self.rec;
        let writes = &rec.record.durable.writes;
        let (a, i) = self.bounds(t);
        let start = Instant::now();
        if self.next_write == 0 && !self.synced {
            self.catch_up(t, a);
        }
        while self.next_write < writes.len() && writes[self.next_write].durable <= t {
            if let Some(ahead) = writes.get(self.next_write + LOOK_AHEAD) {
                self.prefetch_block(ahead.block.0 as usize);
                if let Some(tracker) = &self.tracker {
                    tracker.prefetch(ahead.block, &ahead.data);
                }
            }
            let w = &writes[self.next_write];
            self.land(w.block, &w.data);
            self.next_write += 1;
        }
        while (self.oracle_k as u64) < a {
            if self.oracle_k + 1 < rec.oracle.txs() {
                for b in rec.oracle.tx_blocks(self.oracle_k + 1) {
                    self.prefetch_block(b);
                }
            }
            for (addr, bytes) in rec.oracle.tx_stores(self.oracle_k) {
                self.set_oracle(addr, bytes);
            }
            self.oracle_k += 1;
        }
        let followed = Instant::now();
        self.following += followed - start;
        self.check_state(t, a, i);
        if self.spec.atomicity < 64 {
            self.check_torn(t, a, i);
        }
        if let Some(s) = self.gpf_cut.as_mut().and_then(|c| c.state(t)) {
            self.gpf_states += 1;
            self.check_variant(s, t, a, i);
        }
        // Less the following done lazily at the point, counted already ([`Sweep::lazily`]).
        self.at_points += followed.elapsed().saturating_sub(std::mem::take(&mut self.heard));
    }

    /// A worker's first point (before the follower has looked at the oracle): the oracle moves
    /// to S_`a` and the writes durable by `t` land at once, the last one to each block only
    /// (found walking them backwards), instead of one by one; the running difference is then
    /// brought up to date once per block either changed. Nothing else is laid over the image
    /// yet (no overlay, no tracker), so this is what landing each would leave. Not with
    /// Start-Gap, whose physical image keeps a list of the log lines written.
    fn catch_up(&mut self, t: Cycle, a: u64) {
        let (rec, writes) = (self.rec, &self.rec.record.durable.writes);
        let end = writes.partition_point(|w| w.durable <= t);
        if self.phys.is_some() || !self.overlay.is_empty() || self.tracker.is_some() {
            return;
        }
        // Per block: bit 0, a later durable write has landed; bit 1, listed in `changed`.
        let mut state = vec![0u8; self.img.len() / 64];
        let mut changed = Vec::new();
        for j in self.oracle_k..a as usize {
            for (addr, bytes) in rec.oracle.tx_stores(j) {
                self.oracle[addr as usize..addr as usize + bytes.len()].copy_from_slice(bytes);
                for b in blocks_of(Addr(addr), bytes.len()) {
                    let s = &mut state[b.0 as usize];
                    if *s & 2 == 0 {
                        *s |= 2;
                        changed.push(b.0 as usize);
                    }
                }
            }
        }
        self.oracle_k = a as usize;
        for w in writes[..end].iter().rev() {
            let s = &mut state[w.block.0 as usize];
            if *s & 1 == 0 {
                *s |= 1;
                if *s & 2 == 0 {
                    *s |= 2;
                    changed.push(w.block.0 as usize);
                }
                self.img[w.block.range()].copy_from_slice(&w.data);
            }
        }
        for b in changed {
            self.refresh(b);
        }
        self.recoverer.forget(&rec.layout);
        self.outside_written |= end > 0;
        self.next_write = end;
    }

    /// Check each torn state of crash point `t` ([`torn::variants`]) like the clean one: land
    /// the torn blocks in the durable image, [`Sweep::check_state`], land the clean blocks back.
    fn check_torn(&mut self, t: Cycle, a: u64, i: u64) {
        let rec = self.rec;
        let writes = &rec.record.durable.writes;
        let flight: Vec<_> = torn::in_flight(writes, self.next_write, t, self.max_service)
            .into_iter()
            .map(|j| (&writes[j], self.durable_block(writes[j].block)))
            .collect();
        let states = torn::variants(&flight, self.spec.atomicity, self.spec.exhaustive, self.spec.run.seed, t);
        for s in states {
            self.torn_states += 1;
            self.check_variant(s, t, a, i);
        }
    }

    /// Check one variant of crash point `t` (a torn state, a cut-short GPF) like the clean
    /// state: land its blocks in the durable image, [`Sweep::check_state`], land the clean
    /// blocks back.
    fn check_variant(&mut self, s: torn::TornState, t: Cycle, a: u64, i: u64) {
        let clean: Vec<(BlockId, BlockData)> = s.blocks.iter().map(|(b, _)| (*b, self.durable_block(*b))).collect();
        for (b, d) in &s.blocks {
            self.land(*b, d);
        }
        self.torn_now = Some(s.describe);
        self.check_state(t, a, i);
        self.torn_now = None;
        for (b, d) in clean.iter().rev() {
            self.land(*b, d);
        }
    }

    /// A block of the durable image: physical with Start-Gap, the overlay's record of D for a
    /// block under the overlay ([`Sweep::plan`]).
    fn durable_block(&self, b: BlockId) -> BlockData {
        match &self.phys {
            Some(view) if view.holds(b) => view.block(b),
            _ => match self.overlay.durable(b) {
                Some(d) => *d,
                None => self.img[b.range()].try_into().unwrap(),
            },
        }
    }

    /// A block write becomes durable: in the physical image with Start-Gap; for a block under
    /// the overlay, in the overlay's record of D (its first entry for the block, which taking
    /// the overlay away restores last); else in `img`.
    fn land(&mut self, b: BlockId, data: &BlockData) {
        self.outside_written |= !self.rec.layout.is_data(b);
        match &mut self.phys {
            Some(view) if view.holds(b) => view.land(b, data),
            _ => match self.overlay.durable_mut(b) {
                Some(d) => *d = *data,
                None => self.set_img(b, data),
            },
        }
        self.recoverer.land(&self.rec.layout, b);
        if let Some(tracker) = &mut self.tracker {
            if !tracker.land(b, &self.img) {
                self.tracker = None;
                self.tracker_retry = true;
            }
        } else if self.trackable {
            let log0 = self.rec.layout.log_block0().0;
            self.tracker_retry |= (log0..log0 + self.rec.layout.log_blocks()).contains(&b.0);
        }
    }

    /// Recover the durable image as it stands and judge the result (A(t) = `a`, I(t) = `i`).
    fn check_state(&mut self, t: Cycle, a: u64, i: u64) {
        let rec = self.rec;
        if let Err(e) = self.logical_view() {
            return self.violation("recovery-error", t, a, i, e);
        }
        // The recovery plan, or with the Kiln tracker the count of its redo writes (the plan
        // itself is made only when the idempotence check below needs it).
        let (plan, redo, writes) = match self.track() {
            Some(redo) => (None, redo, redo + 2),
            None => match self.plan() {
                Ok(p) => {
                    let redo = p.writes.iter().position(|(b, _)| !rec.layout.is_data(*b)).unwrap_or(p.writes.len());
                    let n = p.writes.len();
                    (Some(p), redo, n)
                }
                Err(e) => return self.violation("recovery-error", t, a, i, e),
            },
        };
        // The data area of `img` holds the plan's redo writes (the overlay, see `plan`): judge
        // the recovered image as it stands.
        let cut = Rng::derive(self.spec.run.seed ^ 0x1DE0, t.0).below(writes as u64 + 1) as usize;
        let mut verdict = self.judge(a, i);
        // A prefix of redo writes alone leaves every block recovery reads as it was (when it
        // reads no data block, see `plan`), so recovering again makes the same plan and ends
        // where the first recovery did: the check can only fail when the prefix reaches past
        // the redo writes. It still runs on the 1st, 8th, 64th, ... such prefix.
        let decided = cut <= redo && !recovery::reads_data_area(self.spec.run.protocol.log_format()) && {
            self.redo_prefixes += 1;
            !guard_due(self.redo_prefixes, 3)
        };
        let mut plan = plan;
        if verdict.is_ok() && !decided {
            let plan = plan.get_or_insert_with(|| {
                recovery::recover(self.spec.run.protocol.log_format(), &rec.layout, &self.img)
                    .expect("crash checker: the Kiln tracker follows an image recovery rejects")
            });
            if !self.same_again_laid(plan, cut, redo) {
                // Back to the durable image D, then D with the plan's first `cut` writes.
                self.overlay_off();
                let mut undo = Undo(std::mem::take(&mut self.plan_undo));
                undo.apply(&mut self.img, &plan.writes[..cut]);
                verdict = self.idempotence(plan, cut).map_err(|e| ("idempotence", e));
                undo.rollback(&mut self.img);
                self.plan_undo = undo.0;
                self.overlay_on(plan);
            }
        }
        if self.tracker.is_none() {
            self.last_plan = plan;
        }
        if let Err((kind, detail)) = verdict {
            self.violation(kind, t, a, i, detail);
        }
    }

    /// The recovery plan of the durable image, with its redo writes laid over the data area
    /// of `img` (the overlay: `img`'s data area is then the recovered one, and durable writes
    /// to blocks under it go to the overlay's record of D, [`Sweep::land`]).
    ///
    /// Recovery of every log format but S-WAL's reads no block of the data area
    /// ([`recovery::reads_data_area`]: its plan is a function of the log area and Kiln's NV-LLC
    /// state alone), so it may run on `img` with the overlay in place, and when every durable
    /// write since the last plan landed in the data area, the last plan is the plan and its
    /// overlay stays: the cost of such a point does not depend on the plan's length. On the
    /// 1st, 8th, 64th, ... reuse recovery runs anyway and must agree.
    fn plan(&mut self) -> Result<Plan, String> {
        let format = self.spec.run.protocol.log_format();
        let reads = recovery::reads_data_area(format);
        let (layout, img) = (&self.rec.layout, &self.img);
        if let Some(plan) =
            super::reuse_plan(&mut self.last_plan, self.outside_written, &mut self.reuses, format, layout, img)
        {
            return Ok(plan);
        }
        self.outside_written = false;
        let cached = self.recoverer.caches();
        let plan = match cached {
            true => self.recover_laid(),
            false => {
                if reads {
                    self.overlay_off();
                }
                let plan = self.recover(false);
                self.overlay_off();
                plan
            }
        };
        match plan {
            Ok(plan) => {
                if !cached {
                    self.overlay_on(&plan);
                }
                if std::mem::take(&mut self.tracker_retry) {
                    self.tracker = recovery::kiln::Tracker::new(&self.rec.layout, &self.img);
                }
                Ok(plan)
            }
            Err(e) => {
                self.outside_written = true;
                Err(e)
            }
        }
    }

    /// Recovery of the durable image through HOOP's scan cache with the last plan still laid
    /// (the home blocks read from under it), and the new plan laid in its place
    /// ([`Overlaid::overlay_update`]: a point costs what changed in the plan, not twice its
    /// length). On the 1st, 8th, 64th, ... use a whole recovery of the durable image, the
    /// overlay taken away, must agree. An error leaves the overlay away.
    fn recover_laid(&mut self) -> Result<Plan, String> {
        let (layout, img, overlay) = (&self.rec.layout, &self.img, &self.overlay);
        let (plan, guard) = self.recoverer.recover_under(layout, img, |b| overlay.durable_in(img, b));
        self.lay_recovered(plan, guard, self.spec.run.protocol.log_format())
    }

    /// The check of a crash during recovery after `cut` of `plan`'s writes through HOOP's
    /// scan cache, the overlay left laid ([`super::Recoverer::same_again`]); false for the
    /// caller to check the whole way.
    fn same_again_laid(&mut self, plan: &Plan, cut: usize, redo: usize) -> bool {
        let (img, overlay) = (&self.img, &self.overlay);
        self.recoverer.same_again(&self.rec.layout, img, plan, (cut, redo), |b| overlay.durable_in(img, b))
    }

    /// Recovery of `img` as it stands (`second`: an image the scan cache has not heard of,
    /// see [`super::Recoverer`]).
    fn recover(&mut self, second: bool) -> Result<Plan, String> {
        self.recoverer.recover(&self.rec.layout, &self.img, second)
    }

    /// The Kiln tracker in use for this point: lay the homes whose outcome changed since the
    /// last point over the data area (or take them away), and return the plan's redo count.
    fn track(&mut self) -> Option<usize> {
        self.tracker.as_ref()?;
        let redo = self.lazily(|s| {
            let tracker = s.tracker.as_mut().expect("checked above");
            let mut retrack = std::mem::take(&mut s.retrack);
            tracker.take_dirty(|home, from| retrack.push((home, from)));
            let redo = tracker.redo_writes();
            for &(home, from) in &retrack {
                let data = from.map(|f| <BlockData>::try_from(&s.img[f.range()]).unwrap());
                s.overlay_set(home, data);
            }
            retrack.clear();
            s.retrack = retrack;
            redo
        });
        self.tracked += 1;
        if guard_due(self.tracked, 3) {
            self.check_tracker(redo);
        }
        Some(redo)
    }

    /// Run `f`, following done lazily at a point (the incremental verifier hearing of the
    /// blocks changed since it last looked, the Kiln tracker laying the homes changed since the
    /// last point over the image): its time counts as following ([`WorkerSeconds`]).
    fn lazily<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let start = Instant::now();
        let out = f(self);
        let took = start.elapsed();
        (self.following, self.heard) = (self.following + took, self.heard + took);
        out
    }

    /// Write a block of `img`, keeping the running difference.
    #[inline]
    fn set_img(&mut self, b: BlockId, data: &BlockData) {
        let at: &mut BlockData = (&mut self.img[b.range()]).try_into().expect("a whole block");
        *at = *data;
        self.refresh(b.0 as usize);
    }

    /// Write bytes of the oracle's data area, keeping the running difference and, once the
    /// follower has looked, each block's content as it last saw it.
    fn set_oracle(&mut self, addr: u64, bytes: &[u8]) {
        if self.synced {
            for b in blocks_of(Addr(addr), bytes.len()) {
                let b = b.0 as usize;
                if self.vmark[b] != self.vstamp {
                    self.vmark[b] = self.vstamp;
                    let mut before = [0u8; 64];
                    let r = b * 64..(b * 64 + 64).min(self.data_len);
                    before[..r.len()].copy_from_slice(&self.oracle[r]);
                    self.vold.push((b, before));
                }
            }
        }
        self.oracle[addr as usize..addr as usize + bytes.len()].copy_from_slice(bytes);
        for b in blocks_of(Addr(addr), bytes.len()) {
            self.refresh(b.0 as usize);
        }
    }

    /// Host cache hint: start loading what landing a write to block `b` (or an oracle store
    /// to it) touches: its line in `img`, and for a data block its line in the oracle, its
    /// difference flag, its follower mark and its overlay entry. No effect on results.
    #[inline]
    fn prefetch_block(&self, b: usize) {
        if let Some(x) = self.img.get(b * 64) {
            crate::hostmem::prefetch(x);
        }
        if let (Some(d), Some(o), Some(m)) = (self.differs.get(b), self.oracle.get(b * 64), self.vmark.get(b)) {
            crate::hostmem::prefetch(d);
            crate::hostmem::prefetch(o);
            crate::hostmem::prefetch(m);
            self.overlay.prefetch(b);
        }
    }

    /// Data block `b` of `img` or `oracle` changed: compare it again before the next
    /// comparison (once, however often it changes before then).
    #[inline]
    fn refresh(&mut self, b: usize) {
        let Some(f) = self.differs.get_mut(b) else { return }; // outside the data area
        if *f & QUEUED == 0 {
            *f |= QUEUED;
            self.unsettled.push(b as u32);
        }
    }

    /// Compare each queued block, bringing `ndiff` up to date.
    fn settle(&mut self) {
        let mut queued = std::mem::take(&mut self.unsettled);
        for &b in &queued {
            let b = b as usize;
            let r = b * 64..b * 64 + 64;
            let (was, now) = (self.differs[b] & DIFFERS != 0, !same_block(&self.img[r.clone()], &self.oracle[r]));
            self.differs[b] = if now { DIFFERS } else { 0 };
            if now != was {
                if now {
                    self.ndiff += 1;
                } else {
                    self.ndiff -= 1;
                }
            }
        }
        queued.clear();
        self.unsettled = queued;
    }

    /// Start-Gap: bring the log area of `self.img` up to the physical durable image.
    fn logical_view(&mut self) -> Result<(), String> {
        match &mut self.phys {
            Some(view) => view.refresh(&self.rec.layout, &mut self.img),
            None => Ok(()),
        }
    }

    /// Checks on the recovered image (`self.img` has the plan applied).
    fn judge(&mut self, a: u64, i: u64) -> Result<(), (&'static str, String)> {
        let Some(k) = self.matching_k(a, i) else {
            return Err(("prefix", format!("recovered data equals no S_k with {a} <= k <= {i}")));
        };
        let k = k as usize;
        let verdict = match self.verdicts.get(k) {
            Some(v) => v.clone().expect("verdict recorded"),
            None => self.verify(&self.img[..self.data_len]),
        };
        verdict.map_err(|e| ("structure", e))
    }

    /// The oracle holds S_k (and the recovered data area equals it): record S_k's verdict if
    /// none is yet, through the follower where the workload has one (it hears of every block
    /// the oracle changed since it last looked, however the oracle moved: forward through
    /// transactions, or back from a tentative one), else from the whole verifier. A "broken"
    /// verdict of the follower takes its message from the whole verifier, which must agree; a
    /// "sound" one is confirmed by the whole verifier at the 64th, 4096th, ... time (the
    /// followers' model-based tests compare every verdict, `follow::check::agrees`).
    fn verdict_here(&mut self, k: usize) {
        if !self.verdicts.get(k).is_some_and(|v| v.is_none()) {
            return;
        }
        let Some(mut f) = self.follower.take() else {
            let verdict = self.verify(&self.oracle);
            self.verdicts[k] = Some(verdict);
            return;
        };
        // The first verdict this worker wants takes S_k whole.
        let sound = self.lazily(|s| match std::mem::replace(&mut s.synced, true) {
            true => f.changed(&s.oracle, &s.vold),
            false => f.reset(&s.oracle),
        });
        self.follower = Some(f);
        self.vold.clear();
        self.vstamp = self.vstamp.wrapping_add(1);
        if self.vstamp == 0 {
            self.vmark.fill(0);
            self.vstamp = 1;
        }
        self.record(k, sound);
    }

    /// The whole structural check of a data area: the workload's verifier, then the library
    /// caller's own check if the spec has one.
    fn verify(&self, data: &[u8]) -> Result<(), String> {
        self.verifier.verify(data)?;
        match &self.spec.verify {
            Some(UserVerify(f)) => f(data),
            None => Ok(()),
        }
    }

    /// Record the follower's verdict on S_j (the oracle's data area).
    fn record(&mut self, j: usize, sound: bool) {
        if self.verdicts[j].is_some() {
            return;
        }
        let verdict = if sound {
            self.followed += 1;
            if self.followed > 1 && guard_due(self.followed, 6) {
                assert_eq!(
                    self.verifier.verify(&self.oracle),
                    Ok(()),
                    "crash checker: the incremental verifier missed a fault in S_{j}"
                );
            }
            Ok(())
        } else {
            let whole = self.verifier.verify(&self.oracle);
            assert!(
                whole.is_err(),
                "crash checker: the incremental verifier rejects S_{j}, the whole verifier does not"
            );
            whole
        };
        self.verdicts[j] = Some(verdict);
    }

    /// The smallest k in a..=i with recovered data == S_k.
    /// S_k's verdict is recorded while the oracle holds it ([`Sweep::verdict_here`]).
    fn matching_k(&mut self, a: u64, i: u64) -> Option<u64> {
        if self.same_data() {
            self.verdict_here(a as usize);
            return Some(a);
        }
        let rec = self.rec;
        let (mut undo, mut bytes) =
            (std::mem::take(&mut self.oracle_undo), std::mem::take(&mut self.oracle_undo_bytes));
        let mut found = None;
        for k in a..i {
            for (addr, new) in rec.oracle.tx_stores(k as usize) {
                let r = addr as usize..addr as usize + new.len();
                undo.push((addr, new.len() as u32, bytes.len()));
                bytes.extend_from_slice(&self.oracle[r]);
                self.set_oracle(addr, new);
            }
            if self.same_data() {
                self.verdict_here(k as usize + 1);
                found = Some(k + 1);
                break;
            }
        }
        while let Some((addr, len, off)) = undo.pop() {
            self.set_oracle(addr, &bytes[off..off + len as usize]);
        }
        bytes.clear();
        (self.oracle_undo, self.oracle_undo_bytes) = (undo, bytes);
        found
    }

    /// Does the (recovered) data area equal the oracle's current S_k?
    fn same_data(&mut self) -> bool {
        self.settle();
        self.compares += 1;
        let same = self.ndiff == 0;
        if guard_due(self.compares, 3) {
            let whole = self.img[..self.data_len] == self.oracle[..];
            assert_eq!(same, whole, "crash checker: the running difference missed a change");
        }
        same
    }

    /// Crash recovery after a random prefix of its writes, recover again: the result must equal
    /// the one of an uninterrupted recovery. Called with `self.img` = the durable image D with
    /// the first `cut` writes of `plan` applied.
    ///
    /// Expected final content of a block: the last write of the first plan to it, else D's
    /// (blocks outside the first plan are untouched by its prefix). The last write per block is
    /// found through `plan_last`, so this costs the two plans' lengths.
    fn idempotence(&mut self, plan: &Plan, cut: usize) -> Result<(), String> {
        let n = plan.writes.len();
        self.plan_gen = self.plan_gen.wrapping_add(1);
        if self.plan_gen == 0 {
            self.plan_last.fill((0, 0));
            self.plan_gen = 1;
        }
        let generation = self.plan_gen;
        for (j, (b, _)) in plan.writes.iter().enumerate() {
            self.plan_last[b.0 as usize] = (generation, j as u32);
        }
        let mut undo = Undo(std::mem::take(&mut self.second_undo));
        let result = match self.recover(true) {
            Err(e) => Err(format!("second recovery after a crash at recovery write {cut} of {n} failed: {e}")),
            Ok(p2) => {
                // Blocks only the second plan writes must keep D's content: read it first.
                let mut outside = std::mem::take(&mut self.outside);
                outside.extend(
                    p2.writes
                        .iter()
                        .filter(|(b, _)| self.plan_last[b.0 as usize].0 != generation)
                        .map(|(b, _)| (*b, <BlockData>::try_from(&self.img[b.range()]).unwrap())),
                );
                undo.apply(&mut self.img, &p2.writes);
                let in_plan =
                    plan.writes.iter().map(|(b, _)| (*b, &plan.writes[self.plan_last[b.0 as usize].1 as usize].1));
                let mut expected = in_plan.chain(outside.iter().map(|(b, d)| (*b, d)));
                let differs = expected.find(|(b, v)| !same_block(&self.img[b.range()], &v[..]));
                let result = differs.map_or(Ok(()), |(b, _)| {
                    Err(format!(
                        "after a crash at recovery write {cut} of {n}, recovering again leaves block {} different",
                        b.0
                    ))
                });
                outside.clear();
                self.outside = outside;
                result
            }
        };
        undo.rollback(&mut self.img);
        self.second_undo = undo.0;
        result
    }

    fn violation(&mut self, kind: &str, t: Cycle, a: u64, i: u64, detail: String) {
        self.violations += 1;
        *self.by_kind.entry(kind.to_string()).or_default() += 1;
        if self.first.is_some() {
            return;
        }
        let (closest_k, first_diff_addr, differing_blocks) = self.closest(t, a, i);
        self.first = Some(Violation {
            kind: kind.into(),
            seed: self.spec.run.seed,
            crash_cycle: t,
            acked: a,
            issued: i,
            closest_k,
            first_diff_addr,
            differing_blocks,
            detail,
            replay: format!("{} --crash-at {t}", self.spec.replay_base),
            torn: self.torn_now.clone(),
        });
    }

    /// For the report: which S_k the recovered image is closest to, and where it differs.
    fn closest(&mut self, _t: Cycle, a: u64, i: u64) -> (u64, Option<u64>, u64) {
        let overlaid = match self.tracker.is_some() {
            // The tracker's overlay is the whole recovery's outcome (`check_tracker`).
            true => recovery::recover(self.spec.run.protocol.log_format(), &self.rec.layout, &self.img).ok(),
            false => self.last_plan.take(),
        };
        self.overlay_off();
        let found = self.closest_from_durable(a, i);
        if let Some(plan) = overlaid {
            self.overlay_on(&plan);
            if self.tracker.is_none() {
                self.last_plan = Some(plan);
            }
        }
        found
    }

    /// [`Sweep::closest`] with `img` the durable image.
    fn closest_from_durable(&mut self, a: u64, i: u64) -> (u64, Option<u64>, u64) {
        let plan =
            recovery::recover(self.spec.run.protocol.log_format(), &self.rec.layout, &self.img).unwrap_or_default();
        let mut undo = Undo::default();
        undo.apply(&mut self.img, &plan.writes);
        let mut oracle = self.oracle.clone();
        let mut best = (a, None, u64::MAX);
        for k in a..=i {
            if k > a {
                self.rec.oracle.apply_tx(k as usize - 1, &mut oracle);
            }
            let (first, n) = difference(&self.img[..self.data_len], &oracle);
            if n < best.2 {
                best = (k, first, n);
            }
        }
        undo.rollback(&mut self.img);
        best
    }
}

impl Overlaid for Sweep<'_> {
    fn overlay(&self) -> &Overlay {
        &self.overlay
    }
    fn overlay_mut(&mut self) -> &mut Overlay {
        &mut self.overlay
    }
    fn img(&self) -> &[u8] {
        &self.img
    }
    fn set_img(&mut self, b: BlockId, data: &BlockData) {
        Sweep::set_img(self, b, data)
    }
    fn layout(&self) -> &crate::pmem::Layout {
        &self.rec.layout
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::protocol::ProtocolKind;
    use crate::workload::WorkloadKind;

    /// The exhaustive check's estimate: the whole time at the rate so far, and what is left.
    #[test]
    fn the_exhaustive_estimate_extrapolates_the_rate_so_far() {
        let line = estimate_line(600_000, 10_000, Duration::from_secs(1));
        assert_eq!(line, "exhaustive: about 60 s in all at 10000 states/s so far (59 s left)");
        let line = estimate_line(5_000_000, 1_000, Duration::from_secs(2));
        assert_eq!(line, "exhaustive: about 2.8 h in all at 500 states/s so far (2.8 h left)");
        let line = estimate_line(1_200_000, 2_000, Duration::from_secs(1));
        assert_eq!(line, "exhaustive: about 10 min in all at 2000 states/s so far (10 min left)");
    }

    /// Data blocks no committed transaction writes.
    fn untouched(rec: &Recorded) -> impl Fn(u64) -> bool {
        let mut touched = vec![false; rec.layout.data_bytes as usize / 64 + 1];
        for k in 0..rec.oracle.txs() {
            for (addr, bytes) in rec.oracle.tx_stores(k) {
                blocks_of(Addr(addr), bytes.len()).for_each(|b| touched[b.0 as usize] = true);
            }
        }
        move |addr| !touched[addr as usize / 64]
    }

    /// A recorded 150-transaction H-WAL run of `workload` (10 % aborts) whose check at 60
    /// points on two workers finds nothing: what the structural-defect tests damage.
    fn sound_run(cfg: Config, workload: WorkloadKind) -> (CrashSpec, RunSpec, Recorded) {
        let run = RunSpec {
            cfg,
            workload,
            protocol: ProtocolKind::HWal,
            txs: 150,
            warmup_txs: 0,
            seed: 3,
            abort_rate: 0.1,
            bug: None,
            record: true,
            tape: false,
            prefault: false,
        };
        let mut spec = CrashSpec::new(run.clone(), 60);
        spec.threads = 2;
        let rec = execute(&run).unwrap().recorded.unwrap();
        assert_eq!(check_recorded(&spec, &run, &rec).violations, 0, "{workload:?}: sound run");
        (spec, run, rec)
    }

    fn rd(d: &[u8], at: u64) -> u64 {
        u64::from_le_bytes(d[at as usize..at as usize + 8].try_into().unwrap())
    }

    /// A structural defect that the prefix rule cannot see: the same damage, in a part of the
    /// structure no transaction writes, in the initial image of both the durable image and the
    /// oracle, so every recovered image equals some S_k and every S_k is broken. The
    /// structural verifier must report it at every crash point, through the incremental
    /// verifiers (sdg: a degree off by one; hash: an entry's key moved to another bucket;
    /// btree: two keys of a leaf swapped), whose broken verdicts the whole verifier confirms;
    /// without the damage, none.
    #[test]
    fn a_structural_defect_the_prefix_rule_misses_is_caught_at_every_point() {
        for workload in [WorkloadKind::Sdg, WorkloadKind::Hash, WorkloadKind::BTree] {
            let mut cfg = Config::default();
            cfg.workload.sdg.vertices = 16384;
            cfg.workload.sdg.initial_edges = 32768;
            cfg.workload.sdg.max_edges = 65536;
            (cfg.workload.hash.key_space, cfg.workload.hash.buckets) = (8192, 2048);
            let (spec, run, mut rec) = sound_run(cfg, workload);
            let free = untouched(&rec);
            let d = &mut rec.initial;
            let (at, value) = match workload {
                // The degree of a vertex whose table entry no transaction writes.
                WorkloadKind::Sdg => {
                    let v = (0..16384u64).rev().find(|v| free(64 + 16 * v)).unwrap();
                    (64 + 16 * v + 8, rd(d, 64 + 16 * v + 8) + 1)
                }
                // The key of an untouched first entry of an untouched bucket: the next key.
                WorkloadKind::Hash => {
                    let b = (0..2048u64)
                        .rev()
                        .find(|b| free(64 + 8 * b) && rd(d, 64 + 8 * b) != 0 && free(rd(d, 64 + 8 * b)));
                    let e = rd(d, 64 + 8 * b.unwrap());
                    (e, rd(d, e) ^ 1)
                }
                // Two keys of an untouched leaf swapped (keys at +16, +24; the kind at +0).
                _ => {
                    let leaf = (0..rec.layout.data_bytes / 4096 - 1)
                        .map(|i| 4096 + 4096 * i)
                        .find(|&n| (n..n + 4096).step_by(64).all(&free) && rd(d, n) as u32 == 1 && rd(d, n) >> 32 >= 2)
                        .unwrap();
                    let (k0, k1) = (rd(d, leaf + 16), rd(d, leaf + 24));
                    d[leaf as usize + 24..leaf as usize + 32].copy_from_slice(&k0.to_le_bytes());
                    (leaf + 16, k1)
                }
            };
            d[at as usize..at as usize + 8].copy_from_slice(&value.to_le_bytes());
            let r = check_recorded(&spec, &run, &rec);
            assert_eq!(r.violations, r.crash_points, "{workload:?}: every point");
            assert_eq!(r.violations_by_kind.get("structure"), Some(&r.violations), "{workload:?}: {r:?}");
        }
    }

    /// The same for the SQLite workload, through its follower: a key byte of a row on a table
    /// leaf no transaction writes, in the initial image, so that the index no longer matches
    /// the table in any S_k (integrity_check: "row missing from index"). Every crash point is a
    /// `structure` violation; without the damage, none.
    #[test]
    fn a_structural_defect_in_the_sqlite_database_is_caught_at_every_point() {
        let mut cfg = Config::default();
        cfg.workload.sqlite.rows = 2000;
        cfg.workload.sqlite.file_capacity_bytes = 1 << 20;
        let (spec, run, mut rec) = sound_run(cfg, WorkloadKind::Sqlite);
        let free = untouched(&rec);
        let d = &mut rec.initial;
        let size = rd(d, 0);
        // A table leaf (page type 0x0D) none of whose blocks a transaction writes.
        let page = |p: u64| 64 + (p - 1) * 1024;
        let leaf = (2..=size / 1024)
            .find(|&p| d[page(p) as usize] == 0x0D && (page(p)..page(p) + 1024).step_by(64).all(&free))
            .expect("an untouched table leaf");
        // Its first cell: payload size (1 byte: 120), rowid (varint), record header (4 bytes),
        // then the key.
        let at = page(leaf) as usize;
        let mut c = u16::from_be_bytes([d[at + 8], d[at + 9]]) as usize + at + 1;
        while d[c] >= 0x80 {
            c += 1;
        }
        d[c + 1 + 4 + 15] ^= 1;
        let r = check_recorded(&spec, &run, &rec);
        assert_eq!(r.violations, r.crash_points, "every point");
        assert_eq!(r.violations_by_kind.get("structure"), Some(&r.violations), "{r:?}");
        let detail = r.first_violation.map(|v| v.detail).unwrap_or_default();
        assert!(detail.contains("index"), "{detail}");
    }
}
