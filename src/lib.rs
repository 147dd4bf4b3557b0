//! locsim: a crash-verified, cycle-level simulator of transactional persistent memory.
//!
//! Reading order: `docs/ARCHITECTURE.md`. In short: [`types`] and [`config`]; the machine
//! ([`cache`], [`memctl`], [`pmem`], [`machine`]); the workload interface ([`workload`]) and its
//! simulator back end ([`sim`]); the protocols ([`protocol`]) with their log formats ([`log`])
//! and [`recovery`]; the [`crash`] checker; [`runner`] and the [`cli`]. Separately, [`journal`]:
//! real SQLite with its rollback journal in PCM (the PCM SQLite-journal paper).
//!
//! Running your own program from Rust: [`api`] (the small, documented surface;
//! docs/your-own-workload.md). Running a built-in workload from Rust:
//!
//! ```
//! use locsim::config::Config;
//! use locsim::protocol::ProtocolKind;
//! use locsim::runner::{execute, RunSpec};
//! use locsim::workload::WorkloadKind;
//!
//! let cfg = Config::build(None, &["workload.sps.entries=4096".into()]).unwrap();
//! let spec = RunSpec {
//!     cfg, workload: WorkloadKind::Sps, protocol: ProtocolKind::HWal, txs: 100, warmup_txs: 0,
//!     seed: 1, abort_rate: 0.0, bug: None, record: false, tape: false, prefault: false,
//! };
//! let r = execute(&spec).unwrap().result;
//! assert_eq!(r.txs_committed, 100);
//! assert!(r.write_traffic > 1.0); // every program byte costs a log copy and a home copy
//! ```

// First: the registration table, a macro the modules below expand (`src/protocols.rs`).
#[macro_use]
mod protocols;

pub mod api;
pub mod bench;
pub mod cache;
pub mod cli;
pub mod config;
pub mod crash;
pub mod hostmem;
pub mod journal;
pub mod log;
pub mod machine;
pub mod memctl;
pub mod ordering;
pub mod outfile;
pub mod pcm;
pub mod pmem;
pub mod protocol;
pub mod recent;
pub mod recovery;
pub mod reproduce;
pub mod rng;
pub mod runner;
pub mod sched;
pub mod sim;
pub mod startgap;
#[cfg(test)]
mod testdir;
pub mod trace;
pub mod types;
pub mod workload;
