//! The speculation window of Speculative Persistence (`loc-extended.txt` 3.3-3.4), as LOC-WAL
//! and LOC-Kiln share it: the LLC transaction tag (`aux`) of the window's transactions, the
//! limits that close a window, and the multi-versioned LLC's older versions.
//!
//! A window holds up to `sd` committed transactions (the speculation degree) and closes early
//! after [`MAX_WINDOW_TXS`] transactions in all (aborts included), so that the live TxIDs stay
//! unambiguous in the 8-bit log tags. Inside a window a later transaction's store to a line
//! holding an earlier transaction's unlogged version keeps that version in another way of the
//! set; the bytes it held are copied just before the store ([`Versions::snapshot`]), since the
//! caches hold no data of their own.

use crate::cache::Slot;
use crate::machine::Machine;
use crate::types::{BlockData, BlockId};

/// A window closes after this many transactions even if fewer than `sd` committed (aborts).
pub const MAX_WINDOW_TXS: usize = 64;

/// The speculation degree's range (committed transactions per window).
pub const SD_RANGE: std::ops::RangeInclusive<u32> = crate::config::LocConfig::SD_RANGE;

/// LLC `aux` of the lines of window transaction `seq` (non-zero; unique among the live
/// transactions, which span fewer than 2^16 sequence numbers).
#[inline(always)]
pub fn aux_of(seq: u64) -> u32 {
    (seq & 0xFFFF) as u32 + 1
}

/// Does a window with `committed` committed transactions out of `txs` in all close now?
#[inline]
pub fn is_complete(committed: usize, txs: usize, sd: usize) -> bool {
    debug_assert!(committed <= txs && txs <= MAX_WINDOW_TXS, "window sizes: {committed} of {txs}");
    committed >= sd || txs >= MAX_WINDOW_TXS
}

/// An older version of a block kept in another LLC way.
pub struct Version {
    pub block: BlockId,
    /// `aux` of the line it came from (the transaction that wrote it).
    pub aux: u32,
    /// The way it was moved to.
    pub slot: Slot,
    /// Its bytes (zero when the run keeps no bytes; the timing is the same either way).
    pub data: BlockData,
}

impl Version {
    /// Is the version still in its slot, not pushed out or dropped since?
    #[inline]
    pub fn present(&self, m: &Machine) -> bool {
        m.hier.llc.is_version_of(self.slot, self.block) && m.hier.llc.aux(self.slot) == self.aux
    }
}

/// The running transaction's older versions and the bytes copied for them.
#[derive(Default)]
pub struct Versions {
    pub kept: Vec<Version>,
    /// Bytes of lines about to become older versions, copied before the store changes them.
    snaps: Vec<(BlockId, BlockData)>,
}

impl Versions {
    /// Before a store to `b`, whose line carries another transaction's `aux`: copy the bytes
    /// it holds (once per block and transaction; only when the run keeps bytes).
    #[inline]
    pub fn snapshot(&mut self, m: &Machine, b: BlockId) {
        if m.keep_bytes && !self.snaps.iter().any(|&(x, _)| x == b) {
            self.snaps.push((b, m.arch_block(b)));
        }
    }

    /// The bytes copied for `b` (zero when none were).
    #[inline]
    pub fn snapped(&self, b: BlockId) -> BlockData {
        self.snaps.iter().find(|&&(x, _)| x == b).map_or([0; 64], |&(_, d)| d)
    }

    /// The running transaction ended: forget its versions and copies.
    pub fn clear(&mut self) {
        self.kept.clear();
        self.snaps.clear();
    }
}
