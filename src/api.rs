//! The library's surface for running your own program (docs/your-own-workload.md): everything
//! a user needs, in one place, documented (`missing_docs` is a warning here, and CI denies
//! warnings).
//!
//! Build a machine from a [`Config`], write a program against [`Pm`] as a [`UserWorkload`],
//! [`run`] it under any [`ProtocolKind`], and [`crash_check`] it: the checker recovers every
//! chosen crash state from the durable bytes alone and compares the data area with the
//! program's own committed stores. A trace replays through [`TraceWorkload`] (or the
//! command line, `locsim run --trace`), written with [`format::Encoder`].
//!
//! ```
//! use locsim::api::{run, Config, Pm, ProtocolKind, Rng, UserWorkload, Addr};
//!
//! /// A persistent counter: one u64 incremented per transaction.
//! struct Counter;
//! impl UserWorkload for Counter {
//!     fn data_bytes(&self) -> u64 { 64 }
//!     fn populate(&mut self, _data: &mut [u8]) {}
//!     fn run_tx(&mut self, pm: &mut dyn Pm, _rng: &mut Rng, _abort: bool) {
//!         pm.begin();
//!         let v = pm.load_u64(Addr(0));
//!         pm.store_u64(Addr(0), v + 1);
//!         pm.commit();
//!     }
//! }
//!
//! let cfg = Config::default();
//! let r = run(&cfg, ProtocolKind::HWal, 100, 1, Box::new(Counter)).unwrap();
//! assert_eq!(r.txs_committed, 100);
//! let report = locsim::api::crash_check(&cfg, ProtocolKind::HWal, 100, 1, 200, None, || Box::new(Counter)).unwrap();
//! assert_eq!(report.violations, 0);
//! ```
#![warn(missing_docs)]

pub use crate::config::Config;
pub use crate::crash::{check_run, CrashReport, CrashSpec, UserVerify};
pub use crate::protocol::{Bug, ProtocolKind};
pub use crate::rng::Rng;
pub use crate::runner::{execute_with, RunOutput, RunResult, RunSpec};
pub use crate::trace::format;
pub use crate::types::Addr;
pub use crate::workload::trace_replay::TraceWorkload;
pub use crate::workload::user::UserWorkload;
pub use crate::workload::Pm;
pub use crate::workload::{Workload, WorkloadKind};

/// The run of a user's workload: `txs` transactions (none aborted, no warm-up) seeded by `seed`.
fn spec(cfg: &Config, protocol: ProtocolKind, txs: u64, seed: u64, bug: Option<Bug>, record: bool) -> RunSpec {
    RunSpec {
        cfg: cfg.clone(),
        workload: WorkloadKind::User,
        protocol,
        txs,
        warmup_txs: 0,
        seed,
        abort_rate: 0.0,
        bug,
        record,
        tape: false,
        prefault: false,
    }
}

/// Run `workload` for `txs` transactions under `protocol` on the machine of `cfg`; the
/// figures of `locsim run` (cycles, write traffic, P-Set, ...). `Err` is one line (e.g. a
/// configuration the protocol cannot run). For warm-up or aborts, build a [`RunSpec`] and call
/// [`execute_with`].
pub fn run(
    cfg: &Config,
    protocol: ProtocolKind,
    txs: u64,
    seed: u64,
    workload: Box<dyn UserWorkload>,
) -> Result<RunResult, String> {
    Ok(execute_with(&spec(cfg, protocol, txs, seed, None, false), Workload::User(workload))?.result)
}

/// Crash-check `txs` transactions of the workload `make` builds under `protocol` (with the
/// injected defect `bug`, if any): `crashes` crash states drawn from the run, each recovered
/// and compared with the oracle of the workload's own committed stores. `report.violations`
/// is 0 for a correct protocol.
pub fn crash_check(
    cfg: &Config,
    protocol: ProtocolKind,
    txs: u64,
    seed: u64,
    crashes: u64,
    bug: Option<Bug>,
    make: impl Fn() -> Box<dyn UserWorkload>,
) -> Result<CrashReport, String> {
    let crash = CrashSpec::new(spec(cfg, protocol, txs, seed, bug, true), crashes);
    let out = execute_with(&crash.run, Workload::User(make()))?;
    check_run(&crash, out)
}

/// Run `locsim ARGS...` and get what it prints with `--json` (or the one line it would print
/// on standard error): the same parsing, checks and code paths as the command line. The
/// Python binding (docs/python.md) calls locsim through it.
pub use crate::cli::json as command_json;

/// The `--help` text of a command (`run`, `crashtest`, ...), as the command line prints it.
pub use crate::cli::help as command_help;
