//! The cache hierarchy: three set-associative LRU levels, write-back, write-allocate,
//! **inclusive** (every line in L1 is in L2, every line in L2 is in the LLC).
//!
//! Caches hold tags and state only, no data: the content of a cached line always equals the
//! program's view of memory ([`crate::machine::Machine::arch`]), so a write-back takes its
//! payload from there at the moment it leaves. With more than one core each has its own L1 and
//! L2 (the running core's are `l1` and `l2`), kept coherent by MESI with a directory at the LLC
//! (`coherence.rs`): one writer at a time keeps every valid copy equal to `arch`.
//! Multi-versioned lines (LOC) keep their own copies in the protocol.
//!
//! Dirty bits are per level, as in a real write-back hierarchy: a store marks its L1 line dirty;
//! an evicted dirty L1 line marks its L2 copy dirty, an evicted dirty L2 line its LLC copy.
//! These inner write-backs cost no core time (write-back buffers). An LLC eviction
//! back-invalidates L1 and L2 and gathers their dirty bits: the victim is dirty if any level
//! held it dirty, and a dirty victim is handed to the caller. The LLC carries the per-line
//! transaction tag (`aux`).

mod coherence;
mod set_assoc;

pub use set_assoc::{Evicted, SetAssoc, Slot, NO_LINK, VERSION_BIT};

use set_assoc::Line;

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
    /// The line was an older version of `block` (LOC's multi-versioned LLC), not its current copy.
    pub version: bool,
    /// The LLC slot it left (the line that replaced it is there now). A protocol that keeps
    /// state per slot (Kiln's NV-LLC records) finds it here also when the eviction was caused
    /// by an access outside the protocol (a lock's, with more than one core).
    pub slot: Slot,
}

/// Result of one block access.
#[derive(Copy, Clone, Debug)]
pub struct Access {
    pub level: HitLevel,
    /// Cycles spent in cache look-ups (memory time is added by the caller).
    pub lookup_cycles: Cycle,
    /// The LLC slot holding the block (known at every level through the links). Valid until
    /// the block leaves the LLC.
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
    /// Private copies invalidated by another core's store (more than one core).
    pub invalidations: u64,
    /// Owners (E or M) downgraded to S by another core's load.
    pub downgrades: u64,
    /// Dirty private lines passed to another core through the LLC.
    pub c2c_transfers: u64,
}

/// The inclusive three-level hierarchy.
///
/// Besides each level's tags, the hierarchy keeps links between the copies of a line: every L1
/// line knows its L2 slot, every L2 line its LLC slot, and the LLC and L2 lines know their
/// inner copy's slot (or none). Lines never move between ways, so these links stay valid until
/// a line leaves; back-invalidation, dirty propagation and `clean` then need no tag searches.
pub struct Hierarchy {
    pub l1: SetAssoc,
    pub l2: SetAssoc,
    /// The LLC; its per-line `aux` is the transaction tag (0 = none).
    pub llc: SetAssoc,
    pub stats: CacheStats,
    /// With more than one core: the other cores' private caches and the directory
    /// (`coherence.rs`); `None` with one, whose paths never look further.
    coh: Option<Box<coherence::Coherence>>,
}

impl Hierarchy {
    pub fn new(cfg: &Config) -> Hierarchy {
        let (l1, l2, llc) =
            (SetAssoc::new_inner(&cfg.l1), SetAssoc::new_inner(&cfg.l2), SetAssoc::new(&cfg.llc_cache()));
        let coh = (cfg.machine.cores > 1).then(|| Box::new(coherence::Coherence::new(cfg)));
        Hierarchy { l1, l2, llc, stats: CacheStats::default(), coh }
    }

    /// More than one core: accesses go through [`Hierarchy::access_shared`].
    #[inline(always)]
    pub fn shared(&self) -> bool {
        self.coh.is_some()
    }

    /// Access one block for a load (`write = false`) or a store (`write = true`) by the running
    /// core.
    #[inline]
    pub fn access(&mut self, b: BlockId, write: bool) -> Access {
        if self.shared() {
            return self.access_shared(b, write);
        }
        match self.l1_hit(b, write) {
            Some(a) => a,
            None => self.access_below_l1(b, write),
        }
    }

    /// [`Hierarchy::access`] when the block is in L1 (the common case, kept short); `None`
    /// (and no change) otherwise.
    #[inline(always)]
    pub fn l1_hit(&mut self, b: BlockId, write: bool) -> Option<Access> {
        let s1 = self.l1.lookup(b)?;
        self.stats.l1_hits += 1;
        if write {
            self.l1.set_dirty(s1, true);
        }
        let llc_slot = Slot(self.l2.up(self.l1.up(s1.0) as usize) as usize);
        Some(Access { level: HitLevel::L1, lookup_cycles: self.l1.latency, llc_slot, victim: None })
    }

    /// [`Hierarchy::access`] after an L1 miss.
    #[inline(always)]
    ///
    /// Inclusion saves the L2 tag search: a block is in L2 exactly when it is in the LLC with a
    /// link to an L2 copy, so one LLC search answers for both levels (the timing still charges
    /// the L2 look-up, as the hardware searches L2 first).
    pub fn access_below_l1(&mut self, b: BlockId, write: bool) -> Access {
        let mut cycles = self.l1.latency + self.l2.latency;
        let (found, s3) = self.llc_find(b);
        let linked = if found.is_some() { self.llc.down(s3) } else { NO_LINK };
        debug_assert_eq!(self.l2.find(b).map(|s| s.0 as u32), (linked != NO_LINK).then_some(linked));
        if linked != NO_LINK {
            let s2 = linked as usize;
            self.l2.touch_slot(Slot(s2));
            self.stats.l2_hits += 1;
            self.fill_l1(b, s2, write);
            // The L2 line's up link is `s3`: no need to read it.
            debug_assert_eq!(self.l2.up(s2) as usize, s3);
            return Access { level: HitLevel::L2, lookup_cycles: cycles, llc_slot: Slot(s3), victim: None };
        }
        cycles += self.llc.latency;
        // On a miss the new line has aux 0 (the LLC has no up link); `down` is set by `fill_l2`.
        let (level, s3, old) = self.llc_step(b, found, s3);
        let victim = old.and_then(|(tag, line)| self.llc_replaced(Slot(s3), tag, line));
        let s2 = self.fill_l2(b, s3);
        self.fill_l1(b, s2, write);
        Access { level, lookup_cycles: cycles, llc_slot: Slot(s3), victim }
    }

    /// The LLC's way of `b` (set, way), if it holds it, and its slot (`usize::MAX` if not).
    #[inline(always)]
    fn llc_find(&self, b: BlockId) -> (Option<(usize, usize)>, usize) {
        let found = self.llc.find_way(b);
        (found, found.map_or(usize::MAX, |(set, way)| self.llc.slot_of(set, way)))
    }

    /// The LLC step of an access that missed L1 and L2, on one core or many (`found`, `s3`:
    /// [`Hierarchy::llc_find`]): a hit touches the line; a miss takes the LRU way for a fresh
    /// line. Returns the level that answered, the LLC slot, and on a miss the old tag and state
    /// of the line that left (the caller's own victim handling).
    #[inline(always)]
    fn llc_step(
        &mut self,
        b: BlockId,
        found: Option<(usize, usize)>,
        s3: usize,
    ) -> (HitLevel, usize, Option<(u32, Line)>) {
        match found {
            Some((set, way)) => {
                self.llc.touch(set, way);
                self.stats.llc_hits += 1;
                (HitLevel::Llc, s3, None)
            }
            None => {
                self.stats.llc_misses += 1;
                let (s3, old) = self.llc.replace_lru(b, Line::fresh(0, false));
                (HitLevel::Memory, s3, old)
            }
        }
    }

    /// [`Hierarchy::llc_evicted`] for a line the miss path replaced, given its old tag and state
    /// (its `down` link is that of the line that left).
    #[inline(always)]
    fn llc_replaced(&mut self, s3: Slot, tag: u32, line: Line) -> Option<Victim> {
        let inner_dirty = self.drop_l2_copy(line.down());
        let block = BlockId((tag & !VERSION_BIT) as u64);
        let v = Victim { block, tag: line.up_or_aux(), version: tag & VERSION_BIT != 0, slot: s3 };
        self.dirty_victim(line.dirty() || inner_dirty, v)
    }

    /// `v` if the line that left the LLC was dirty at some level (counted), else nothing.
    #[inline(always)]
    fn dirty_victim(&mut self, dirty: bool, v: Victim) -> Option<Victim> {
        self.stats.llc_dirty_evictions += dirty as u64;
        dirty.then_some(v)
    }

    /// The line an LLC insert into `s3` pushed out: back-invalidate its inner copies
    /// (inclusion), gathering their dirty bits; a dirty line is the caller's to write.
    #[inline(always)]
    fn llc_evicted(&mut self, s3: Slot, ev: Option<Evicted>) -> Option<Victim> {
        let e = ev?;
        let inner_dirty = self.drop_inner_of_llc(s3);
        self.dirty_victim(e.dirty || inner_dirty, Victim { block: e.block, tag: e.aux, version: e.version, slot: s3 })
    }

    /// Keep an older version of `b` (LOC): a dirty LLC line with transaction tag `aux` in
    /// another way of `b`'s set, never hit by look-ups, with no inner copies. Returns its slot
    /// and the dirty line it pushed out, if any.
    pub fn insert_version(&mut self, b: BlockId, aux: u32) -> (Slot, Option<Victim>) {
        let (s3, ev) = self.llc.insert_version(b, aux);
        if self.shared() {
            // The line that left gives up its directory entry (a version has none).
            let inner_dirty = ev.is_some_and(|e| self.drop_all_private(s3.0, e.block));
            let v = ev.and_then(|e| {
                let v = Victim { block: e.block, tag: e.aux, version: e.version, slot: s3 };
                self.dirty_victim(e.dirty || inner_dirty, v)
            });
            return (s3, v);
        }
        (s3, self.llc_evicted(s3, ev))
    }

    /// Drop the L2 (and L1) copies of the line in LLC slot `s3`; returns whether any was dirty.
    #[inline(always)]
    fn drop_inner_of_llc(&mut self, s3: Slot) -> bool {
        let s2 = self.llc.take_down(s3.0);
        self.drop_l2_copy(s2)
    }

    /// Drop the L2 line in slot `s2` ([`NO_LINK`]: none) and its L1 copy; returns whether any
    /// was dirty.
    #[inline(always)]
    fn drop_l2_copy(&mut self, s2: u32) -> bool {
        drop_l2_copy_in(&mut self.l1, &mut self.l2, s2)
    }

    /// Put `b` (held in LLC slot `s3`) into L2; an evicted L2 line takes its L1 copy with it
    /// and leaves its dirtiness in the LLC.
    #[inline(always)]
    fn fill_l2(&mut self, b: BlockId, s3: usize) -> usize {
        let (s2, old) = self.l2.replace_lru(b, Line::fresh(s3 as u32, false));
        if let Some((_, e)) = old {
            let d1 = e.down() != NO_LINK && self.l1.invalidate_slot(Slot(e.down() as usize)).0;
            self.llc.unlink_down(e.up_or_aux() as usize, e.dirty() || d1);
        }
        self.llc.set_down(s3, s2 as u32);
        s2
    }

    /// Put `b` (held in L2 slot `s2`) into L1; an evicted dirty L1 line marks its L2 copy.
    #[inline(always)]
    fn fill_l1(&mut self, b: BlockId, s2: usize, write: bool) {
        let (s1, old) = self.l1.replace_lru(b, Line::fresh(s2 as u32, write));
        if let Some((_, e)) = old {
            self.l2.unlink_down(e.up_or_aux() as usize, e.dirty());
        }
        self.l2.set_down(s2, s1 as u32);
    }

    /// The slots of `b` in the running core's L2 and L1 (if there), from its LLC slot.
    #[inline(always)]
    fn inner(&self, s3: Slot) -> (Option<Slot>, Option<Slot>) {
        if self.shared() {
            return self.inner_shared(s3);
        }
        let s2 = self.llc.down(s3.0);
        if s2 == NO_LINK {
            return (None, None);
        }
        let s1 = self.l2.down(s2 as usize);
        (Some(Slot(s2 as usize)), (s1 != NO_LINK).then_some(Slot(s1 as usize)))
    }

    /// Is the block dirty at any level (of any core)?
    pub fn is_dirty(&self, b: BlockId) -> bool {
        let Some(s3) = self.llc.find(b) else {
            return false;
        };
        if self.shared() {
            return self.llc.dirty(s3) || self.any_private_dirty(s3.0, b);
        }
        let (s2, s1) = self.inner(s3);
        self.llc.dirty(s3) || s2.is_some_and(|s| self.l2.dirty(s)) || s1.is_some_and(|s| self.l1.dirty(s))
    }

    /// Mark a block clean at every level (its data has been written to memory); it stays cached.
    pub fn clean(&mut self, b: BlockId) {
        if let Some(s3) = self.llc.find(b) {
            self.clean_slot(s3);
        }
    }

    /// [`Hierarchy::clean`] for a block whose LLC slot is known. With more than one core every
    /// core's copies become clean (memory now holds the program's bytes, which every copy holds).
    #[inline]
    pub fn clean_slot(&mut self, s3: Slot) {
        self.llc.set_dirty(s3, false);
        if self.shared() {
            return self.clean_slot_shared(s3);
        }
        // One core: the LLC line's down link is its L2 copy, whose down link is its L1 copy.
        let s2 = self.llc.down(s3.0);
        if s2 != NO_LINK {
            self.l2.set_dirty(Slot(s2 as usize), false);
            let s1 = self.l2.down(s2 as usize);
            if s1 != NO_LINK {
                self.l1.set_dirty(Slot(s1 as usize), false);
            }
        }
    }

    /// [`Hierarchy::clean_slot`] with more than one core (out of line).
    #[inline(never)]
    fn clean_slot_shared(&mut self, s3: Slot) {
        let b = self.llc.block_at(s3).expect("a valid line");
        self.clean_all_private(s3.0, b);
    }

    /// Whether the running core's inner copies (L1, L2) of the line in LLC slot `s3` are dirty.
    /// Only the running core's copies matter to a committing transaction's line: isolation is
    /// line-granular (docs/multicore.md), and any other core that touched the line since the
    /// transaction wrote it took it away by an invalidation or a downgrade, which left the
    /// dirty data in the LLC line; only the owner (M) holds a line dirty.
    pub fn inner_dirty(&self, s3: Slot) -> (bool, bool) {
        let (s2, s1) = self.inner(s3);
        (s1.is_some_and(|s| self.l1.dirty(s)), s2.is_some_and(|s| self.l2.dirty(s)))
    }

    /// Write the running core's inner (L1, L2) copies of the line in LLC slot `s3` back into it
    /// (a commit flush; see [`Hierarchy::inner_dirty`] for why no other core's): they become clean, the LLC line dirty if any was. Returns whether any was dirty.
    pub fn flush_inner(&mut self, s3: Slot) -> bool {
        let (s2, s1) = self.inner(s3);
        let mut dirty = false;
        if let Some(s) = s1 {
            dirty |= self.l1.dirty(s);
            self.l1.set_dirty(s, false);
        }
        if let Some(s) = s2 {
            dirty |= self.l2.dirty(s);
            self.l2.set_dirty(s, false);
        }
        if dirty {
            self.llc.set_dirty(s3, true);
        }
        dirty
    }

    /// Remove a block from every level of every core (clflush, abort). Returns (was it cached,
    /// was it dirty).
    pub fn invalidate(&mut self, b: BlockId) -> (bool, bool) {
        let Some(s3) = self.llc.find(b) else {
            return (false, false);
        };
        let inner_dirty = if self.shared() { self.drop_all_private(s3.0, b) } else { self.drop_inner_of_llc(s3) };
        let (d3, _) = self.llc.invalidate_slot(s3);
        (true, inner_dirty || d3)
    }
}

/// Drop the L2 line in slot `s2` ([`NO_LINK`]: none) of a core's `l2` and its copy in that
/// core's `l1`; returns whether either was dirty.
#[inline(always)]
fn drop_l2_copy_in(l1: &mut SetAssoc, l2: &mut SetAssoc, s2: u32) -> bool {
    if s2 == NO_LINK {
        return false;
    }
    let s1 = l2.take_down(s2 as usize);
    let d1 = s1 != NO_LINK && l1.invalidate_slot(Slot(s1 as usize)).0;
    let (d2, _) = l2.invalidate_slot(Slot(s2 as usize));
    d1 || d2
}

#[cfg(test)]
mod tests;
