//! The oracle, the one part of the crash checker that differs between one core and N cores
//! (docs/model.md section 5): which data areas a recovered image may equal at a crash cycle.
//!
//! - [`prefix::Prefix`], one core: `S_k` for some `A(t) <= k <= I(t)`, the first `k` committed
//!   transactions;
//! - [`closure::Closure`], N cores: the image of a set of transactions closed under each
//!   core's order and dependence that holds every acknowledged one ([`super::concurrent`]).
//!
//! With one core every closed set is a prefix, so the prefix rule is the closure rule with one
//! core; the one-core oracle is kept for its cost (a running count of differing blocks and a
//! search over at most `I(t) - A(t)` prefixes instead of a fixpoint). The engine
//! ([`super::engine`]) owns the durable image and recovery; an oracle keeps its own image of
//! what the recovered data area is compared with, the running difference between the two, and
//! the workload's structural verifier.

pub(super) mod closure;
pub(super) mod prefix;

use super::ViolationKind;
use crate::types::Cycle;
use std::time::Duration;

/// What the engine asks of an oracle at each crash point. `img` is always the data area of the
/// engine's image as it stands (with recovery's redo writes laid over it when the oracle
/// judges).
pub(super) trait Oracle {
    /// Whether a state's checks begin with a second recovery of the whole recovered image
    /// (log writes included), which must write nothing new, before the data area is judged;
    /// a crash during recovery after every write of the plan is then decided by it. The
    /// N-core checker does; the one-core checker reaches that case only when the crash during
    /// recovery draws it. Kept apart so that each checker's reports stay what they are.
    const RECOVERS_RECOVERED: bool;

    /// Which block a failed crash-during-recovery check names when several of the plan's
    /// blocks end wrong: the lowest (N cores), or the first in the plan's order (one core).
    const NAMES_LOWEST_BLOCK: bool;

    /// Data block `b` of the engine's image changed (`b` may lie past the data area: then
    /// nothing).
    fn img_changed(&mut self, b: usize);

    /// Host cache hint: a durable write to block `b` lands soon. No effect on results.
    fn prefetch(&self, _b: usize) {}

    /// Move to crash cycle `t` (not below the previous one): `(A(t), I(t))`, the transactions
    /// acknowledged and issued.
    fn advance(&mut self, t: Cycle) -> (u64, u64);

    /// Judge the recovered data area `img` at crash cycle `t` (A(t) = `a`, I(t) = `i`): the
    /// rule, then the structural verifier (the workload's, then a library caller's).
    fn judge(&mut self, img: &[u8], t: Cycle, a: u64, i: u64) -> Result<(), (ViolationKind, String)>;

    /// For a violation's report: the transactions of the allowed image closest to the
    /// recovered data area `recovered`, the first byte where they differ and how many blocks.
    fn closest(&self, recovered: &[u8], a: u64, i: u64) -> (u64, Option<u64>, u64);

    /// Following done lazily while judging (the incremental verifier hearing of changed
    /// blocks) since the last call: counted as following, not as checking
    /// ([`super::WorkerSeconds`]).
    fn take_lazy(&mut self) -> Duration {
        Duration::ZERO
    }
}

/// Two 64-byte blocks are equal: eight word compares, inlined (a slice comparison calls
/// `memcmp`, whose call costs more than the compare at this size).
#[inline(always)]
pub(super) fn same_block(x: &[u8], y: &[u8]) -> bool {
    let (x, y): (&crate::types::BlockData, &crate::types::BlockData) = (x.try_into().unwrap(), y.try_into().unwrap());
    let w = |b: &crate::types::BlockData, i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
    (0..8).fold(0, |acc, i| acc | (w(x, i) ^ w(y, i))) == 0
}
