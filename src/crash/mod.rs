//! The crash checker (docs/model.md section 5).
//!
//! One recorded run gives the initial image, every NVM write with the cycle it became durable,
//! the cycle each commit was called and the acknowledgement timeline, and the oracle log (the
//! workload's own stores per committed transaction, recorded before the protocol saw them).
//!
//! For each crash cycle `t`, in increasing order, the checker:
//! 1. advances the durable image to `t` (initial image + writes durable at or before `t`);
//! 2. runs recovery, a pure function of that image ([`crate::recovery::recover`]);
//! 3. requires the recovered data area to equal `S_k` for some `A(t) <= k <= I(t)`;
//! 4. runs the workload's structural verifier on it;
//! 5. crashes recovery itself after a random prefix of its writes, recovers again, and requires
//!    the same result (idempotence).
//!
//! Crash cycles. The durable image only changes when a write becomes durable, so the distinct
//! crash states are the boundaries between durable writes. For every state the checker uses
//! two cycles: the first at which the state holds (fewest transactions issued) and the last
//! (most acknowledged), which are the two hardest for the prefix rule. `--exhaustive` checks all
//! of these candidate cycles; `--crashes N` checks N of them drawn uniformly without
//! replacement (a state that lasts a single cycle has one candidate, so it is drawn half as
//! often as the others). A uniform draw over all cycles would mostly land in long idle
//! stretches and revisit the same few states.
//!
//! Not checked: anything the durable image does not contain (volatile state is lost by
//! definition), and timing: a protocol that is correct but slow passes.

pub mod concurrent;
mod dispatch;
mod engine;
mod gapview;
pub mod gpf;
pub mod incremental;
mod oracle;
mod overlay;
pub mod torn;

pub use dispatch::{check, check_run};

/// The cut-short GPF fault's part of a report ([`gpf`]).
#[derive(Clone, Debug, Serialize)]
pub struct GpfCutReport {
    /// Dirty lines phase 1 writes back before its energy runs out.
    pub budget_lines: u64,
    /// Crash states checked with lines lost (points whose dirty lines exceeded the budget).
    pub states: u64,
}

use crate::runner::RunSpec;
use crate::types::Cycle;
use serde::Serialize;
use std::time::Duration;

/// What a crash state violates. Declared in the order of the names, so that a map keyed by
/// kind lists them as one keyed by name would (`violations_by_kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ViolationKind {
    /// N cores: the recovered data area is the image of no set of transactions closed under
    /// each core's order and dependence that holds every acknowledged one.
    Closure,
    /// A crash during recovery, recovered again, does not end where recovery did.
    Idempotence,
    /// One core: the recovered data area equals no `S_k` with `A(t) <= k <= I(t)`.
    Prefix,
    /// The run itself faulted under an injected bug, before any crash
    /// ([`crate::sim::PROGRAM_FAULT`]).
    ProgramFault,
    /// Recovery rejects the durable image.
    RecoveryError,
    /// The workload's structural verifier (or the caller's) rejects the recovered data area.
    Structure,
}

impl ViolationKind {
    /// The name printed and written in JSON.
    pub fn name(self) -> &'static str {
        match self {
            ViolationKind::Closure => "closure",
            ViolationKind::Idempotence => "idempotence",
            ViolationKind::Prefix => "prefix",
            ViolationKind::ProgramFault => "program-fault",
            ViolationKind::RecoveryError => "recovery-error",
            ViolationKind::Structure => "structure",
        }
    }
}

impl std::fmt::Display for ViolationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq<&str> for ViolationKind {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

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
    /// Bytes a write persists atomically (8, 16, 32 or 64, [`torn::ATOMICITIES`]). Below
    /// 64, each crash point is also checked in the torn states of the writes in flight at it
    /// ([`torn`], docs/faults.md).
    pub atomicity: u32,
    /// The cut-short Global Persistent Flush (`--gpf-budget-lines`, under `gpf` only): each
    /// crash point is also checked with phase 1 stopped after this many lines
    /// ([`gpf`], docs/cxl.md).
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
    pub kind: ViolationKind,
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
    /// The torn write(s) of this state, if it is a torn state ([`torn`]).
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
    pub violations_by_kind: std::collections::BTreeMap<ViolationKind, u64>,
    pub first_violation: Option<Violation>,
    pub states_per_second: f64,
    pub check_seconds: f64,
    /// Where the workers' time went (host timing like `check_seconds`, summed over workers).
    pub worker_seconds: WorkerSeconds,
    pub version: &'static str,
    pub git_rev: &'static str,
    pub config_hash: String,
}

/// The crash checker's workers' time, split by what it grows with: `starting`, a worker's own
/// images and verifier (a copy of the initial image: grows with the memory); `following`, bringing a
/// worker from one point to the next (landing the durable writes between them, applying the
/// transactions committed between them to the oracle, the incremental verifier and an incremental
/// recoverer catching up on the blocks those changed), which grows with the transactions between
/// points; `at_points`,
/// checking each state (recovery, the comparison with S_k, the prefix search, idempotence),
/// which grows with the points. Host timing: not part of the verdicts.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct WorkerSeconds {
    pub starting: f64,
    pub following: f64,
    pub at_points: f64,
}

/// Where two data areas differ, for a violation's report: the first differing byte address
/// (`None` if equal) and how many 64-byte blocks differ.
pub(crate) fn difference(x: &[u8], y: &[u8]) -> (Option<u64>, u64) {
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

/// What one worker found over its chunk of crash points.
#[derive(Default)]
pub(super) struct Part {
    pub(super) starting: Duration,
    pub(super) following: Duration,
    pub(super) at_points: Duration,
    pub(super) torn_states: u64,
    pub(super) gpf_states: u64,
    pub(super) violations: u64,
    pub(super) by_kind: std::collections::BTreeMap<ViolationKind, u64>,
    pub(super) first: Option<Violation>,
}

/// The guards of incremental bookkeeping (a whole comparison, a whole verification or a crash
/// run of its own beside the incremental answer) run at the `n`-th use when `n` is a power of
/// `2^shift`, so that they cost a whole pass a logarithmic number of times.
pub(crate) fn guard_due(n: u64, shift: u32) -> bool {
    n.is_power_of_two() && n.trailing_zeros().is_multiple_of(shift)
}

/// The last recovery plan `last` when it is still the plan of the durable image `img`: no
/// durable write outside the data area has landed since it was made (`outside_written`) and
/// recovery of `format` reads no data block ([`crate::recovery::reads_data_area`]: the plan is
/// then a function of the log area alone). On the 1st, 8th, 64th, ... reuse (`reuses` counts
/// them) a whole recovery runs anyway and must agree. `None` leaves `last` as it was.
pub(crate) fn reuse_plan(
    last: &mut Option<crate::recovery::Plan>,
    outside_written: bool,
    reuses: &mut u64,
    format: Option<crate::log::head::LogFormat>,
    layout: &crate::pmem::Layout,
    img: &[u8],
) -> Option<crate::recovery::Plan> {
    if outside_written || crate::recovery::reads_data_area(format) {
        return None;
    }
    let plan = last.take()?;
    *reuses += 1;
    if guard_due(*reuses, 3) {
        let fresh = crate::recovery::recover(format, layout, img);
        assert!(fresh.as_ref() == Ok(&plan), "crash checker: recovery read the data area");
    }
    Some(plan)
}

/// A progress bar on standard error (states checked, states per second, the message set by the
/// caller, time left) when standard error is a terminal; `None` otherwise. Shared by
/// `crashtest` and `journal-crashtest`.
pub(crate) fn progress_bar(total: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "[{bar:30}] {pos}/{len} states, {per_sec}, {msg}, {elapsed} elapsed, ETA {eta}",
    )
    .expect("valid template")
    .progress_chars("=> ");
    bar.set_style(style);
    Some(bar)
}
