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

/// A protocol that keeps older versions of lines in other ways of their LLC set needs two
/// ways at least: the one line (`llc.ways`) saying so, naming the protocol, if not.
pub fn needs_two_ways(cfg: &crate::config::Config, protocol: &str) -> Result<(), String> {
    match cfg.llc.ways < 2 {
        true => Err(format!("llc.ways = {}: {protocol} keeps versions in other ways, allowed 2..=16", cfg.llc.ways)),
        false => Ok(()),
    }
}

/// The speculation degree's range (committed transactions per window).
pub const SD_RANGE: std::ops::RangeInclusive<u32> = crate::config::LocConfig::SD_RANGE;

/// LLC `aux` of the lines of window transaction `seq` (non-zero; unique among the live
/// transactions, which span fewer than 2^16 sequence numbers).
#[inline(always)]
pub fn aux_of(seq: u64) -> u32 {
    (seq & 0xFFFF) as u32 + 1
}

/// LLC `aux` of the lines of core `c`'s window transaction `seq` on N cores:
/// `(c << 16 | seq mod 2^16) + 1`, so that the tag names the core (the Tx Dirty Block
/// Table's CID) as well as the transaction; core 0's is [`aux_of`], the single-core tag.
#[inline(always)]
pub fn aux_of_core(c: usize, seq: u64) -> u32 {
    ((c as u32) << 16 | (seq & 0xFFFF) as u32) + 1
}

/// The core whose window transaction wrote a line tagged `aux` ([`aux_of_core`]; non-zero).
#[inline(always)]
pub fn core_of_aux(aux: u32) -> usize {
    debug_assert!(aux != 0, "an untagged line has no owner");
    ((aux - 1) >> 16) as usize
}

/// Most cores a machine has (`machine.cores`): one row of [`CrossDeps`] each.
pub const MAX_CORES: usize = 16;

/// Cross-core dependencies of speculation windows (docs/multicore.md, "LOC-WAL"): for each
/// dependent core, the latest window of every other core it depends on. A transaction of core
/// j that loads or stores a line whose LLC tag names a transaction of core i in a window not
/// yet durable depends on that window (the inter-thread epoch conflicts of Joshi et al.,
/// "Efficient persist barriers for multicores", MICRO 2015); core j's window may become
/// durable only after it. Windows are numbered per core from 1 (0 = none), and a core's
/// windows become durable in order, so one number per (dependent, source) pair says
/// everything: the table is dense, one row of [`MAX_CORES`] entries per core, and never fills.
pub struct CrossDeps {
    rows: Vec<[u64; MAX_CORES]>,
}

impl CrossDeps {
    pub fn new(cores: usize) -> CrossDeps {
        assert!((1..=MAX_CORES).contains(&cores), "checked by Config::validate");
        CrossDeps { rows: vec![[0; MAX_CORES]; cores] }
    }

    /// Core `dep_core`'s open window depends on core `src_core`'s window `src_window`.
    #[inline]
    pub fn note(&mut self, dep_core: usize, src_core: usize, src_window: u64) {
        let e = &mut self.rows[dep_core][src_core];
        *e = (*e).max(src_window);
    }

    /// The (core, window) pairs core `dep_core`'s open window depends on, copied out of the
    /// table (the caller may close those windows, which changes the table, while it goes
    /// through them).
    pub fn sources(&self, dep_core: usize) -> impl Iterator<Item = (usize, u64)> {
        let row = self.rows[dep_core];
        (0..MAX_CORES).filter(move |&c| row[c] != 0).map(move |c| (c, row[c]))
    }

    /// Core `dep_core`'s window became durable: it depends on nothing any more.
    pub fn clear(&mut self, dep_core: usize) {
        self.rows[dep_core] = [0; MAX_CORES];
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_deps_keep_the_latest_window_per_source() {
        let mut d = CrossDeps::new(4);
        d.note(1, 0, 3);
        d.note(1, 0, 2);
        d.note(1, 3, 7);
        d.note(2, 1, 1);
        assert_eq!(d.sources(1).collect::<Vec<_>>(), vec![(0, 3), (3, 7)]);
        d.clear(1);
        assert_eq!(d.sources(1).count(), 0);
        assert_eq!(d.sources(2).collect::<Vec<_>>(), vec![(1, 1)]);
    }

    #[test]
    fn a_core_tag_names_its_core_and_core_0_keeps_the_single_core_tag() {
        assert_eq!(aux_of_core(0, 0x1_2345), aux_of(0x1_2345));
        for c in 0..MAX_CORES {
            assert_eq!(core_of_aux(aux_of_core(c, 0xFFFF)), c);
            assert_eq!(core_of_aux(aux_of_core(c, 0)), c);
        }
    }
}
