//! One set-associative cache level with true LRU, stored as dense arrays indexed by
//! slot = set * ways + way: one u64 word per line (block number, dirty bit in bit 63), one u64
//! last-use stamp, and an optional u32 `aux` (the LLC's transaction tag).
//!
//! Costs are what a simulator's inner loop can afford: a hit writes one stamp; the LRU victim is
//! the minimum stamp (invalid lines have stamp 0, so they are filled first, lowest way first).
//! Sets are 1 to 64 ways: plain early-exit loops beat the standard library's unrolled,
//! vectorized `min`/`sum`/`position`, whose set-up costs more than the work at these lengths
//! (measured with callgrind). A [`Slot`] stays valid until its line is evicted or invalidated.

use crate::config::CacheConfig;
use crate::types::{BlockId, Cycle};

const DIRTY: u64 = 1 << 63;
const INVALID: u64 = DIRTY - 1;

/// Index of a line frame in a [`SetAssoc`] (set * ways + way).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Slot(pub usize);

impl Slot {
    /// "No slot": returned where the caller did not need one.
    pub const NONE: Slot = Slot(usize::MAX);
}

/// A line pushed out by [`SetAssoc::insert`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub block: BlockId,
    pub dirty: bool,
    pub aux: u32,
}

/// A set-associative, LRU cache level holding tags and state.
pub struct SetAssoc {
    ways: usize,
    set_mask: u64,
    words: Vec<u64>,
    stamps: Vec<u64>,
    aux: Vec<u32>,
    clock: u64,
    /// Look-up latency in cycles.
    pub latency: Cycle,
}

impl SetAssoc {
    /// A level without per-line auxiliary tags.
    pub fn new(cfg: &CacheConfig) -> SetAssoc {
        SetAssoc::build(cfg, false)
    }

    /// A level with a u32 auxiliary tag per line (initially 0).
    pub fn with_aux(cfg: &CacheConfig) -> SetAssoc {
        SetAssoc::build(cfg, true)
    }

    fn build(cfg: &CacheConfig, aux: bool) -> SetAssoc {
        let lines = (cfg.size_bytes / 64) as usize;
        let ways = cfg.ways as usize;
        let sets = lines / ways;
        assert!(
            sets.is_power_of_two() && ways <= 64,
            "validated by Config::validate"
        );
        SetAssoc {
            ways,
            set_mask: sets as u64 - 1,
            words: vec![INVALID; lines],
            stamps: vec![0; lines],
            aux: if aux { vec![0; lines] } else { Vec::new() },
            clock: 0,
            latency: cfg.latency_cycles,
        }
    }

    /// Number of line frames.
    pub fn slots(&self) -> usize {
        self.words.len()
    }

    #[inline]
    fn set_start(&self, b: BlockId) -> usize {
        (b.0 & self.set_mask) as usize * self.ways
    }

    /// Find a block without touching LRU state.
    #[inline]
    pub fn find(&self, b: BlockId) -> Option<Slot> {
        let start = self.set_start(b);
        let set = &self.words[start..start + self.ways];
        let mut i = 0;
        while i < set.len() {
            if set[i] & !DIRTY == b.0 {
                return Some(Slot(start + i));
            }
            i += 1;
        }
        None
    }

    #[inline]
    fn touch(&mut self, s: usize) {
        self.clock += 1;
        self.stamps[s] = self.clock;
    }

    /// Find a block and make it most recently used.
    #[inline]
    pub fn lookup(&mut self, b: BlockId) -> Option<Slot> {
        let s = self.find(b)?;
        self.touch(s.0);
        Some(s)
    }

    /// Insert a block that is not present (clean, most recently used, aux 0). Returns its slot
    /// and the least recently used line if the set was full.
    #[inline]
    pub fn insert(&mut self, b: BlockId) -> (Slot, Option<Evicted>) {
        debug_assert!(self.find(b).is_none());
        let start = self.set_start(b);
        let stamps = &self.stamps[start..start + self.ways];
        let (mut best, mut min) = (0, stamps[0]);
        let mut i = 1;
        while i < stamps.len() {
            if stamps[i] < min {
                (best, min) = (i, stamps[i]);
            }
            i += 1;
        }
        let s = start + best;
        let w = self.words[s];
        let victim = (w != INVALID).then(|| Evicted {
            block: BlockId(w & !DIRTY),
            dirty: w & DIRTY != 0,
            aux: self.aux.get(s).copied().unwrap_or(0),
        });
        self.words[s] = b.0;
        if !self.aux.is_empty() {
            self.aux[s] = 0;
        }
        self.touch(s);
        (Slot(s), victim)
    }

    /// Drop a block if present; returns its dirty bit and aux.
    #[inline]
    pub fn invalidate(&mut self, b: BlockId) -> Option<(bool, u32)> {
        let s = self.find(b)?.0;
        let dirty = self.words[s] & DIRTY != 0;
        let aux = self.aux.get(s).copied().unwrap_or(0);
        self.words[s] = INVALID;
        self.stamps[s] = 0;
        if !self.aux.is_empty() {
            self.aux[s] = 0;
        }
        Some((dirty, aux))
    }

    #[inline]
    pub fn dirty(&self, s: Slot) -> bool {
        self.words[s.0] & DIRTY != 0
    }

    #[inline]
    pub fn set_dirty(&mut self, s: Slot, d: bool) {
        debug_assert!(self.words[s.0] != INVALID);
        if d {
            self.words[s.0] |= DIRTY;
        } else {
            self.words[s.0] &= !DIRTY;
        }
    }

    /// The auxiliary tag of a line (0 for levels built without aux).
    #[inline]
    pub fn aux(&self, s: Slot) -> u32 {
        self.aux.get(s.0).copied().unwrap_or(0)
    }

    #[inline]
    pub fn set_aux(&mut self, s: Slot, v: u32) {
        self.aux[s.0] = v;
    }

    /// The block in a slot, if valid.
    pub fn block_at(&self, s: Slot) -> Option<BlockId> {
        (self.words[s.0] != INVALID).then_some(BlockId(self.words[s.0] & !DIRTY))
    }

    /// Valid blocks of the set that holds `b`, most recently used first (tests, debugging).
    pub fn set_contents(&self, b: BlockId) -> Vec<BlockId> {
        let start = self.set_start(b);
        let mut v: Vec<(u64, BlockId)> = (start..start + self.ways)
            .filter_map(|i| self.block_at(Slot(i)).map(|blk| (self.stamps[i], blk)))
            .collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.0));
        v.into_iter().map(|(_, blk)| blk).collect()
    }
}
