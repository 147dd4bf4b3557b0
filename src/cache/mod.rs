//! The cache hierarchy: three set-associative LRU levels, write-back, write-allocate,
//! **inclusive** (every line in L1 is in L2, every line in L2 is in the LLC).
//!
//! Caches hold tags and state only, no data: with one core and no coherence, the content of a
//! cached line always equals the program's view of memory ([`crate::machine::Machine::arch`]),
//! so a write-back takes its payload from there at the moment it leaves. Multi-versioned lines
//! (LOC) keep their own copies in the protocol.
//!
//! Dirty bits are per level, as in a real write-back hierarchy: a store marks its L1 line dirty;
//! an evicted dirty L1 line marks its L2 copy dirty, an evicted dirty L2 line its LLC copy.
//! These inner write-backs cost no core time (write-back buffers). An LLC eviction
//! back-invalidates L1 and L2 and gathers their dirty bits: the victim is dirty if any level
//! held it dirty, and a dirty victim is handed to the caller. The LLC carries the per-line
//! transaction tag (`aux`).

mod set_assoc;

pub use set_assoc::{Evicted, SetAssoc, Slot};

use crate::config::Config;
use crate::types::{BlockId, Cycle};

/// Where an access was satisfied.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HitLevel {
    L1,
    L2,
    Llc,
    Memory,
}

/// A dirty line pushed out of the LLC: the caller must write it somewhere (home or log).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Victim {
    pub block: BlockId,
    /// The transaction tag the line carried (0 = none).
    pub tag: u32,
}

/// Result of one block access.
#[derive(Copy, Clone, Debug)]
pub struct Access {
    pub level: HitLevel,
    /// Cycles spent in cache look-ups (memory time is added by the caller).
    pub lookup_cycles: Cycle,
    /// The LLC slot now holding the block, when the access looked it up (misses in L1 and
    /// L2); [`Slot::NONE`] on an L1 or L2 hit. Valid until the next access.
    pub llc_slot: Slot,
    /// A dirty line evicted from the LLC to make room, if any.
    pub victim: Option<Victim>,
}

/// Hit and miss counters per level.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CacheStats {
    pub l1_hits: u64,
    pub l2_hits: u64,
    pub llc_hits: u64,
    pub llc_misses: u64,
    pub llc_dirty_evictions: u64,
}

/// The inclusive three-level hierarchy.
pub struct Hierarchy {
    pub l1: SetAssoc,
    pub l2: SetAssoc,
    /// The LLC; its per-line `aux` is the transaction tag (0 = none).
    pub llc: SetAssoc,
    pub stats: CacheStats,
}

impl Hierarchy {
    pub fn new(cfg: &Config) -> Hierarchy {
        Hierarchy {
            l1: SetAssoc::new(&cfg.l1),
            l2: SetAssoc::new(&cfg.l2),
            llc: SetAssoc::with_aux(&cfg.llc),
            stats: CacheStats::default(),
        }
    }

    /// Access one block for a load (`write = false`) or a store (`write = true`).
    #[inline]
    pub fn access(&mut self, b: BlockId, write: bool) -> Access {
        let l1_lat = self.l1.latency;
        if let Some(s) = self.l1.lookup(b) {
            self.stats.l1_hits += 1;
            if write {
                self.l1.set_dirty(s, true);
            }
            return Access {
                level: HitLevel::L1,
                lookup_cycles: l1_lat,
                llc_slot: Slot::NONE,
                victim: None,
            };
        }
        let mut cycles = l1_lat + self.l2.latency;
        let mut victim = None;
        let (level, llc_slot) = if self.l2.lookup(b).is_some() {
            self.stats.l2_hits += 1;
            (HitLevel::L2, Slot::NONE)
        } else {
            cycles += self.llc.latency;
            let level;
            let ls = if let Some(ls) = self.llc.lookup(b) {
                self.stats.llc_hits += 1;
                level = HitLevel::Llc;
                ls
            } else {
                self.stats.llc_misses += 1;
                level = HitLevel::Memory;
                let (ls, v) = self.llc.insert(b);
                if let Some(e) = v {
                    // Back-invalidate the inner levels (inclusion), gathering their dirty bits.
                    let d1 = self.l1.invalidate(e.block).is_some_and(|(d, _)| d);
                    let d2 = self.l2.invalidate(e.block).is_some_and(|(d, _)| d);
                    if e.dirty || d1 || d2 {
                        self.stats.llc_dirty_evictions += 1;
                        victim = Some(Victim {
                            block: e.block,
                            tag: e.aux,
                        });
                    }
                }
                ls
            };
            self.fill_l2(b);
            (level, ls)
        };
        self.fill_l1(b, write);
        Access {
            level,
            lookup_cycles: cycles,
            llc_slot,
            victim,
        }
    }

    fn fill_l2(&mut self, b: BlockId) {
        let (_, v) = self.l2.insert(b);
        if let Some(e) = v {
            let l1_dirty = self.l1.invalidate(e.block).is_some_and(|(d, _)| d);
            if e.dirty || l1_dirty {
                let ls = self
                    .llc
                    .find(e.block)
                    .expect("inclusion: L2 victim is in the LLC");
                self.llc.set_dirty(ls, true);
            }
        }
    }

    fn fill_l1(&mut self, b: BlockId, write: bool) {
        let (s, v) = self.l1.insert(b);
        if let Some(Evicted {
            block, dirty: true, ..
        }) = v
        {
            let s2 = self.l2.find(block).expect("inclusion: L1 victim is in L2");
            self.l2.set_dirty(s2, true);
        }
        self.l1.set_dirty(s, write);
    }

    /// Is the block dirty at any level?
    pub fn is_dirty(&self, b: BlockId) -> bool {
        [&self.l1, &self.l2, &self.llc]
            .iter()
            .any(|c| c.find(b).is_some_and(|s| c.dirty(s)))
    }

    /// Mark a block clean at every level (its data has been written to memory); it stays cached.
    pub fn clean(&mut self, b: BlockId) {
        for c in [&mut self.l1, &mut self.l2, &mut self.llc] {
            if let Some(s) = c.find(b) {
                c.set_dirty(s, false);
            }
        }
    }

    /// Remove a block from every level (clflush, abort). Returns (was it cached, was it dirty).
    pub fn invalidate(&mut self, b: BlockId) -> (bool, bool) {
        let d1 = self.l1.invalidate(b).is_some_and(|(d, _)| d);
        let d2 = self.l2.invalidate(b).is_some_and(|(d, _)| d);
        match self.llc.invalidate(b) {
            Some((d3, _)) => (true, d1 || d2 || d3),
            None => (false, false),
        }
    }
}

#[cfg(test)]
mod tests;
