//! One set-associative cache level with true LRU, stored as dense arrays in move-to-front
//! order: within a set, way 0 is the most recently used line and the valid lines come first.
//!
//! One u64 word per line holds the block number and, in bit 63, the dirty bit, so a 16-way set
//! is 128 contiguous bytes (two host cache lines) and needs no LRU stamps. A hit rotates the
//! line to the front; an insert evicts the last line of a full set. An optional u32 `aux` per
//! line (the LLC's transaction tag) moves with its line.
//!
//! A [`Slot`] is valid until the next operation on the same set.

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
    aux: Vec<u32>,
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
        assert!(sets.is_power_of_two(), "validated by Config::validate");
        SetAssoc {
            ways,
            set_mask: sets as u64 - 1,
            words: vec![INVALID; lines],
            aux: if aux { vec![0; lines] } else { Vec::new() },
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
        for i in start..start + self.ways {
            let w = self.words[i];
            if w & !DIRTY == b.0 {
                return Some(Slot(i));
            }
            if w == INVALID {
                return None;
            }
        }
        None
    }

    /// Move the line in `s` to the front of its set (`start`) and return its new slot.
    #[inline]
    fn to_front(&mut self, start: usize, s: usize) -> Slot {
        if s > start {
            shift_right(&mut self.words[start..=s]);
            if !self.aux.is_empty() {
                shift_right(&mut self.aux[start..=s]);
            }
        }
        Slot(start)
    }

    /// Find a block and make it most recently used.
    #[inline]
    pub fn lookup(&mut self, b: BlockId) -> Option<Slot> {
        let s = self.find(b)?;
        Some(self.to_front(self.set_start(b), s.0))
    }

    /// Insert a block that is not present (clean, most recently used, aux 0). Returns its slot
    /// and the least recently used line if the set was full.
    #[inline]
    pub fn insert(&mut self, b: BlockId) -> (Slot, Option<Evicted>) {
        debug_assert!(self.find(b).is_none());
        let start = self.set_start(b);
        let last = start + self.ways - 1;
        let w = self.words[last];
        let victim = (w != INVALID).then(|| Evicted {
            block: BlockId(w & !DIRTY),
            dirty: w & DIRTY != 0,
            aux: self.aux.get(last).copied().unwrap_or(0),
        });
        let s = self.to_front(start, last);
        self.words[s.0] = b.0;
        if !self.aux.is_empty() {
            self.aux[s.0] = 0;
        }
        (s, victim)
    }

    /// Drop a block if present; returns its dirty bit and aux.
    #[inline]
    pub fn invalidate(&mut self, b: BlockId) -> Option<(bool, u32)> {
        let s = self.find(b)?.0;
        let end = self.set_start(b) + self.ways;
        let dirty = self.words[s] & DIRTY != 0;
        let aux = self.aux.get(s).copied().unwrap_or(0);
        shift_left(&mut self.words[s..end]);
        self.words[end - 1] = INVALID;
        if !self.aux.is_empty() {
            shift_left(&mut self.aux[s..end]);
            self.aux[end - 1] = 0;
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
        (start..start + self.ways)
            .filter_map(|i| self.block_at(Slot(i)))
            .collect()
    }
}

/// Rotate right by one (last element to the front). Sets are a few words long: a plain loop
/// beats the general `rotate_right`, which calls `memmove`.
#[inline(always)]
fn shift_right<T: Copy>(v: &mut [T]) {
    let last = v[v.len() - 1];
    for i in (1..v.len()).rev() {
        v[i] = v[i - 1];
    }
    v[0] = last;
}

/// Rotate left by one (first element to the back).
#[inline(always)]
fn shift_left<T: Copy>(v: &mut [T]) {
    let first = v[0];
    for i in 0..v.len() - 1 {
        v[i] = v[i + 1];
    }
    let n = v.len();
    v[n - 1] = first;
}
