//! locsim: a crash-verified, cycle-level simulator of transactional persistent memory.
//!
//! Reading order: `docs/ARCHITECTURE.md`. In short: [`types`] and [`config`]; the machine
//! ([`cache`], [`memctl`], [`pmem`], [`machine`]); the workload interface ([`workload`]) and its
//! simulator back end ([`sim`]); the protocols ([`protocol`]) with their log formats ([`log`])
//! and [`recovery`]; the [`crash`] checker; [`runner`] and the [`cli`].

pub mod cache;
pub mod cli;
pub mod config;
pub mod crash;
pub mod log;
pub mod machine;
pub mod memctl;
pub mod pmem;
pub mod protocol;
pub mod recovery;
pub mod rng;
pub mod runner;
pub mod sim;
pub mod types;
pub mod workload;
