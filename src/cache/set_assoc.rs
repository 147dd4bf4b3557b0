//! One set-associative cache level with true LRU, stored as dense arrays indexed by
//! slot = set * ways + way: a u32 tag per line (the block number: the papers' ADDR is a 32-bit
//! block number, so memory is at most 256 GB), a dirty bit, a u64 last-use stamp, and an
//! optional u32 `aux` (the LLC's transaction tag).
//!
//! Costs are what a simulator's inner loop can afford. A 16-way set's tags are one host cache
//! line, compared four at a time with SSE2 (part of every x86_64; other targets use a plain
//! loop). A hit writes one stamp; the LRU victim is the minimum stamp (invalid lines have stamp
//! 0, so they are filled first, lowest way first). A [`Slot`] stays valid until its line is
//! evicted or invalidated.

use crate::config::CacheConfig;
use crate::types::{BlockId, Cycle};

const INVALID: u32 = u32::MAX;

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
    tags: Vec<u32>,
    dirty: Vec<bool>,
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
            tags: vec![INVALID; lines],
            dirty: vec![false; lines],
            stamps: vec![0; lines],
            aux: if aux { vec![0; lines] } else { Vec::new() },
            clock: 0,
            latency: cfg.latency_cycles,
        }
    }

    /// Number of line frames.
    pub fn slots(&self) -> usize {
        self.tags.len()
    }

    #[inline]
    fn set_start(&self, b: BlockId) -> usize {
        (b.0 & self.set_mask) as usize * self.ways
    }

    /// Find a block without touching LRU state.
    #[inline]
    pub fn find(&self, b: BlockId) -> Option<Slot> {
        debug_assert!(b.0 < INVALID as u64, "block numbers are 32-bit");
        let start = self.set_start(b);
        let set = &self.tags[start..start + self.ways];
        find_tag(set, b.0 as u32).map(|w| Slot(start + w))
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
        let w = self.tags[s];
        let victim = (w != INVALID).then(|| Evicted {
            block: BlockId(w as u64),
            dirty: self.dirty[s],
            aux: self.aux.get(s).copied().unwrap_or(0),
        });
        self.tags[s] = b.0 as u32;
        self.dirty[s] = false;
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
        let dirty = std::mem::replace(&mut self.dirty[s], false);
        let aux = self.aux.get(s).copied().unwrap_or(0);
        self.tags[s] = INVALID;
        self.stamps[s] = 0;
        if !self.aux.is_empty() {
            self.aux[s] = 0;
        }
        Some((dirty, aux))
    }

    #[inline]
    pub fn dirty(&self, s: Slot) -> bool {
        self.dirty[s.0]
    }

    #[inline]
    pub fn set_dirty(&mut self, s: Slot, d: bool) {
        debug_assert!(self.tags[s.0] != INVALID);
        self.dirty[s.0] = d;
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
        (self.tags[s.0] != INVALID).then_some(BlockId(self.tags[s.0] as u64))
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

/// The way of `set` holding `tag`, if any.
#[inline(always)]
fn find_tag(set: &[u32], tag: u32) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if set.len().is_multiple_of(4) {
        use std::arch::x86_64::*;
        let mut mask = 0u64;
        // SAFETY: SSE2 is part of the x86_64 baseline; every 16-byte load lies inside `set`
        // (its length is a multiple of 4 u32), and unaligned loads are used.
        unsafe {
            let key = _mm_set1_epi32(tag as i32);
            for c in 0..set.len() / 4 {
                let v = _mm_loadu_si128(set.as_ptr().add(4 * c) as *const __m128i);
                let eq = _mm_castsi128_ps(_mm_cmpeq_epi32(v, key));
                mask |= (_mm_movemask_ps(eq) as u64) << (4 * c);
            }
        }
        return (mask != 0).then(|| mask.trailing_zeros() as usize);
    }
    set.iter().position(|&t| t == tag)
}
