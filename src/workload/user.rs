//! A workload written outside locsim, against the same [`Pm`] interface as the built-in ones
//! (docs/your-own-workload.md, `examples/queue.rs`).
//!
//! Implement [`UserWorkload`], wrap it in [`crate::workload::Workload::User`], and run it with
//! [`crate::runner::execute_with`] under any protocol and configuration; record the run and
//! hand it to [`crate::crash::check_run`] to crash-check it. The crash checker's oracle is the
//! workload's own stores (taken by the simulator's back end, as for every workload): the
//! recovered data area must equal the state after some allowed prefix of committed
//! transactions, byte for byte.
#![warn(missing_docs)]

use super::Pm;
use crate::rng::Rng;

/// A transactional program on persistent memory.
///
/// The back end is a trait object (`&mut dyn Pm`): one indirect call per access, which the
/// built-in workloads avoid by being generic; for a user's program it is the price of not
/// editing locsim.
pub trait UserWorkload: Send {
    /// Bytes of persistent memory (the data area) the program uses, from address 0.
    fn data_bytes(&self) -> u64;
    /// Write the initial data set straight into the data area, all zero bytes on entry (no
    /// protocol sees it).
    fn populate(&mut self, data: &mut [u8]);
    /// Run one transaction: `pm.begin()`, loads and stores, `pm.commit()` (or `pm.abort()`
    /// when `abort` asks for it). `rng` is the run's operation stream (seeded by `--seed`).
    /// `pm.core()` is the thread id, the core this transaction runs on (`0..machine.cores`;
    /// always 0 on one core): on N cores each core calls `run_tx` for its own transactions,
    /// and a program that ignores the id runs the same code on every core.
    fn run_tx(&mut self, pm: &mut dyn Pm, rng: &mut Rng, abort: bool);
}
