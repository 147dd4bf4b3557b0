//! Coherence of the private caches with more than one core: MESI kept by a full-map directory
//! at the shared inclusive LLC.
//!
//! References: the full-map directory of Censier & Feautrier ("A New Solution to Coherence
//! Problems in Multicache Systems", IEEE TC 1978: per memory block one presence bit per cache
//! and one bit saying a single cache may hold it modified); the MESI states of Papamarcos &
//! Patel (ISCA 1984); Sorin, Hill & Wood, "A Primer on Memory Consistency and Cache Coherence",
//! 2nd ed. 2020, ch. 6-8 (ch. 7: the MESI transitions; ch. 8: a directory at an inclusive LLC).
//!
//! **State.** Each core has its own L1 and L2 (the running core's sit in `Hierarchy::l1` and
//! `l2`, where the single-core paths find them; the others wait in `Coherence::parked` and are
//! swapped in by [`Hierarchy::switch_core`]: one swap of a level's three arrays, no line). Per
//! LLC line the directory holds a 16-bit sharer vector (bit c: core c's L2 holds the line, and
//! by inclusion only then its L1) and whether one core, the `owner`, holds it in E or M. The
//! entry lives in the LLC line's own state, in the place of the down link a single-core LLC
//! line keeps to its L2 copy (`SetAssoc::word`; with several cores each L2 has its own slot, so
//! there is no one link to keep): the look-up that finds the line, and the write-back of an L2
//! victim to its LLC line, find the entry in the host cache line they read anyway, and a line
//! the LLC evicts hands its entry to the back-invalidation. A
//! private copy's MESI state follows from the directory and its dirty bits:
//!
//! | directory             | this core's copy       | MESI |
//! |-----------------------|------------------------|------|
//! | owned, owner = core   | dirty in L1 or L2      | M    |
//! | owned, owner = core   | clean                  | E    |
//! | not owned, bit set    | (clean)                | S    |
//! | bit clear             | none                   | I    |
//!
//! **Transitions** (requests of the running core c; every other core's copies are probed by the
//! directory, never by a search of all caches):
//!
//! | request                    | directory before      | action                                               | after        |
//! |----------------------------|-----------------------|------------------------------------------------------|--------------|
//! | load, miss in L1/L2        | none / others S       | data from the LLC                                    | c E / all S  |
//! | load, miss in L1/L2        | owned by o            | downgrade o (M: its dirty line passes to the LLC, a cache-to-cache transfer) | o, c S |
//! | store, miss in L1/L2       | others S, or owned by o | invalidate every other copy (o's dirty line: a cache-to-cache transfer) | c M |
//! | store, hit in S            | any                   | upgrade at the directory, invalidate the others      | c M          |
//! | store, hit in E or M       | owned by c            | none (E -> M silently)                               | c M          |
//! | load, hit                  | any                   | none                                                 | unchanged    |
//! | L2 eviction at c           | c's bit set           | bit cleared (and ownership); a dirty copy marks the LLC line dirty | - |
//! | LLC eviction               | any                   | every sharer's copy dropped (inclusion), dirty bits gathered | line gone |
//!
//! **Costs** (derived from the configured look-up latencies, no new parameter): a request that
//! misses L1 and L2 has paid the LLC look-up, which is the directory look-up (the directory
//! lives in the LLC's tags). Probing another core costs its L2 look-up (`l2.latency_cycles`; its
//! L1 is checked at the same time through inclusion), and the sharers of an invalidation are
//! probed in parallel, so an invalidation adds one L2 latency whatever the number of sharers, as
//! does a downgrade. When the probed copy is dirty (M) its line crosses to the LLC, where it is
//! written (the LLC copy becomes dirty) and from where it reaches the requester: a
//! cache-to-cache transfer adds one more LLC latency. A store that hits its own copy in S must
//! first reach the directory: the L2 and LLC latencies from an L1 hit, the LLC latency from an
//! L2 hit. With the default Table I latencies (L1 1, L2 8, LLC 21): a load of a line another
//! core holds clean in E costs 1 + 8 + 21 + 8 = 38 cycles, in M 38 + 21 = 59; a store that
//! invalidates sharers 38; an upgrade from an L1 hit 1 + 8 + 21 + 8 = 38.
//!
//! **Caches still hold no data.** There is one writer at a time: a core may write a line only in
//! M, and then every other private copy is gone, so the program's view `Machine::arch` is the
//! content of every valid copy, and a write-back still takes its payload from `arch`. The one
//! exception is deliberate: [`Hierarchy::lose_invalidations`] (the injected bug
//! `lost-invalidation`) leaves stale shared copies behind, whose bytes `Machine` keeps aside.
//!
//! Coherence never changes an LLC line's transaction tag (`aux`) and gives the older versions
//! of LOC's multi-versioned LLC no directory state: they have no private copies.

use super::set_assoc::Line;
use super::{drop_l2_copy_in, Access, Hierarchy, HitLevel, SetAssoc, Slot, Victim, NO_LINK, VERSION_BIT};
use crate::types::{BlockId, Cycle};

/// Bits of a directory entry: the sharer vector (bits 0-15), "owned" (one core holds the line in
/// E or M), and the owner (bits 17-20).
const SHARERS: u32 = 0xFFFF;
const OWNED: u32 = 1 << 16;
const OWNER_SHIFT: u32 = 17;

/// The directory entry of a line owned (E or M) by core `c`, with `others` still marked as
/// sharers (only under the injected lost invalidation).
#[inline(always)]
fn owned_by(c: usize, others: u32) -> u32 {
    others | 1 << c | OWNED | (c as u32) << OWNER_SHIFT
}

/// The owner in an entry, if the line is owned.
#[inline(always)]
fn owner(d: u32) -> Option<usize> {
    (d & OWNED != 0).then_some((d >> OWNER_SHIFT & 0xF) as usize)
}

/// The multi-core part of a [`Hierarchy`] (absent with one core).
pub(super) struct Coherence {
    /// The core whose caches are `Hierarchy::l1` and `l2`.
    running: usize,
    /// The (L1, L2) of the cores that are not running, in any order (`cores - 1` entries).
    parked: Vec<(SetAssoc, SetAssoc)>,
    /// Per core, the index of its caches in `parked` (unused for the running core).
    at: Vec<usize>,
    /// The injected bug `lost-invalidation`: a store's invalidations of shared (S) copies are
    /// lost; those copies stay valid and stale (the directory still lists them, so that inclusion
    /// still removes them).
    lose_invalidations: bool,
}

impl Coherence {
    /// Core 0 running (its caches are the hierarchy's `l1` and `l2`), every other core's caches
    /// empty, no line shared.
    pub(super) fn new(cfg: &crate::config::Config) -> Self {
        let cores = cfg.machine.cores as usize;
        let parked = (1..cores).map(|_| (SetAssoc::new_inner(&cfg.l1), SetAssoc::new_inner(&cfg.l2))).collect();
        // Core c >= 1 at index c - 1; core 0's entry is never read while it runs.
        let at = (0..cores).map(|c| c.saturating_sub(1)).collect();
        Coherence { running: 0, parked, at, lose_invalidations: false }
    }
}

impl Hierarchy {
    /// Number of cores whose private caches this hierarchy keeps coherent.
    pub fn cores(&self) -> usize {
        self.coh.as_ref().map_or(1, |c| c.at.len())
    }

    /// Dirty line frames over every level and every core's private caches (a line dirty in
    /// several levels counts in each): the dirty population the warm-up watches for steady
    /// state (`crate::runner`). A scan, not for the access path.
    pub fn dirty_lines(&self) -> usize {
        let parked =
            self.coh.as_ref().map_or(0, |c| c.parked.iter().map(|(l1, l2)| l1.dirty_lines() + l2.dirty_lines()).sum());
        self.l1.dirty_lines() + self.l2.dirty_lines() + self.llc.dirty_lines() + parked
    }

    /// The core whose private caches `l1` and `l2` are.
    pub fn running(&self) -> usize {
        self.coh.as_ref().map_or(0, |c| c.running)
    }

    /// Make core `c`'s L1 and L2 the ones accesses go through (`Hierarchy::l1`, `l2`).
    #[inline]
    pub fn switch_core(&mut self, c: usize) {
        let Some(coh) = self.coh.as_mut() else {
            debug_assert_eq!(c, 0);
            return;
        };
        let r = coh.running;
        if c != r {
            // The running core's caches take the place the next one's leave.
            let i = coh.at[c];
            let p = &mut coh.parked[i];
            self.l1.swap_lines(&mut p.0);
            self.l2.swap_lines(&mut p.1);
            coh.at[r] = i;
            coh.running = c;
        }
    }

    /// Inject the bug `lost-invalidation` (see `Coherence::lose_invalidations`); no effect with
    /// one core.
    pub fn lose_invalidations(&mut self) {
        if let Some(coh) = self.coh.as_mut() {
            coh.lose_invalidations = true;
        }
    }

    /// Core `c`'s (L1, L2).
    pub fn private(&self, c: usize) -> (&SetAssoc, &SetAssoc) {
        match &self.coh {
            Some(coh) if c != coh.running => (&coh.parked[coh.at[c]].0, &coh.parked[coh.at[c]].1),
            _ => (&self.l1, &self.l2),
        }
    }

    #[inline(always)]
    fn private_mut(&mut self, c: usize) -> (&mut SetAssoc, &mut SetAssoc) {
        let coh = self.coh.as_mut().expect("more than one core");
        if c == coh.running {
            (&mut self.l1, &mut self.l2)
        } else {
            let p = &mut coh.parked[coh.at[c]];
            (&mut p.0, &mut p.1)
        }
    }

    #[inline(always)]
    fn coh(&mut self) -> &mut Coherence {
        self.coh.as_mut().expect("more than one core")
    }

    /// The sharer vector of the line in LLC slot `s3` (bit c: core c holds a copy) and its
    /// owner (E or M), if any. With one core: core 0 shares it iff it has an L2 copy, and owns
    /// nothing (the single-core machine keeps no directory).
    pub fn directory(&self, s3: Slot) -> (u16, Option<usize>) {
        match &self.coh {
            Some(_) => (self.llc.word(s3.0) as u16, owner(self.llc.word(s3.0))),
            None => ((self.llc.down(s3.0) != NO_LINK) as u16, None),
        }
    }

    /// The running core's (L2, L1) slots of the line in LLC slot `s3`, with more than one core.
    #[inline]
    pub(super) fn inner_shared(&self, s3: Slot) -> (Option<Slot>, Option<Slot>) {
        let coh = self.coh.as_ref().expect("more than one core");
        if self.llc.word(s3.0) & 1 << coh.running == 0 {
            return (None, None);
        }
        let b = self.llc.block_at(s3).expect("a line with sharers is valid");
        let s2 = self.l2.find(b).expect("inclusion: a sharer's L2 holds the line");
        let s1 = self.l2.down(s2.0);
        (Some(s2), (s1 != NO_LINK).then_some(Slot(s1 as usize)))
    }

    /// [`Hierarchy::access`] with more than one core: the running core's private caches, kept
    /// coherent through the directory (the transitions in the module docs).
    #[inline(never)]
    pub fn access_shared(&mut self, b: BlockId, write: bool) -> Access {
        self.access_shared_inline(b, write)
    }

    /// [`Hierarchy::access_shared`] inlined into its caller: the machine's access path
    /// (`Machine::access_block`), which is itself out of line, so that a simulated access with
    /// several cores pays one call, not two.
    #[inline(always)]
    pub(crate) fn access_shared_inline(&mut self, b: BlockId, write: bool) -> Access {
        if let Some(s1) = self.l1.lookup(b) {
            self.stats.l1_hits += 1;
            let s3 = self.l2.up(self.l1.up(s1.0) as usize) as usize;
            let mut cycles = self.l1.latency;
            if write {
                cycles += self.own(s3, b, self.l2.latency + self.llc.latency);
                self.l1.set_dirty(s1, true);
            }
            return Access { level: HitLevel::L1, lookup_cycles: cycles, llc_slot: Slot(s3), victim: None };
        }
        let mut cycles = self.l1.latency + self.l2.latency;
        let (found, s3) = self.llc_find(b);
        let me = 1u32 << self.coh().running;
        if found.is_some() && self.llc.word(s3) & me != 0 {
            let s2 = self.l2.find(b).expect("inclusion: a sharer's L2 holds the line");
            self.l2.touch_slot(s2);
            self.stats.l2_hits += 1;
            if write {
                cycles += self.own(s3, b, self.llc.latency);
            }
            self.fill_l1(b, s2.0, write);
            return Access { level: HitLevel::L2, lookup_cycles: cycles, llc_slot: Slot(s3), victim: None };
        }
        cycles += self.llc.latency;
        let (level, s3, old) = self.llc_step(b, found, s3);
        let mut victim = None;
        if level == HitLevel::Llc {
            cycles += if write { self.take_ownership(s3, b) } else { self.share(s3) };
        } else {
            if let Some((tag, line)) = old {
                victim = self.llc_replaced_shared(s3, tag, line);
            }
            let c = self.coh().running;
            self.llc.set_word(s3, owned_by(c, 0));
        }
        let s2 = self.fill_l2_shared(b, s3);
        self.fill_l1(b, s2, write);
        Access { level, lookup_cycles: cycles, llc_slot: Slot(s3), victim }
    }

    /// A store hit the running core's copy of the line in LLC slot `s3`: nothing in E or M; in S
    /// the request reaches the directory (`reach` cycles) and takes ownership. Returns the cycles.
    #[inline(always)]
    fn own(&mut self, s3: usize, b: BlockId, reach: Cycle) -> Cycle {
        if owner(self.llc.word(s3)) == Some(self.coh().running) {
            return Cycle::ZERO;
        }
        reach + self.take_ownership(s3, b)
    }

    /// The running core becomes the owner (M) of the line in LLC slot `s3`: every other copy is
    /// invalidated (a dirty one passes through the LLC: a cache-to-cache transfer). Returns the
    /// cycles beyond the directory look-up.
    fn take_ownership(&mut self, s3: usize, b: BlockId) -> Cycle {
        let coh = self.coh();
        let (c, lose) = (coh.running, coh.lose_invalidations);
        let d = self.llc.word(s3);
        let others = d & SHARERS & !(1 << c);
        let (mut kept, mut dropped, mut dirty) = (0, 0u64, false);
        let mut rest = others;
        while rest != 0 {
            let o = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            if lose && owner(d) != Some(o) {
                kept |= 1 << o;
                continue;
            }
            dirty |= self.drop_private(o, b);
            dropped += 1;
        }
        self.llc.set_word(s3, owned_by(c, kept));
        self.stats.invalidations += dropped;
        let mut cycles = if dropped > 0 { self.l2.latency } else { Cycle::ZERO };
        if dirty {
            cycles += self.transfer(s3);
        }
        cycles
    }

    /// The running core reads the line in LLC slot `s3`, which it does not hold: an owner on
    /// another core is downgraded to S (its dirty line passes through the LLC: a cache-to-cache
    /// transfer). Returns the cycles beyond the directory look-up.
    fn share(&mut self, s3: usize) -> Cycle {
        let (c, d) = (self.coh().running, self.llc.word(s3));
        let others = d & SHARERS & !(1 << c);
        if others == 0 {
            self.llc.set_word(s3, owned_by(c, 0));
            return Cycle::ZERO;
        }
        self.llc.set_word(s3, others | 1 << c);
        let Some(o) = owner(d) else { return Cycle::ZERO };
        self.stats.downgrades += 1;
        let b = self.llc.block_at(Slot(s3)).expect("valid");
        let dirty = self.clean_private(o, b);
        self.l2.latency + if dirty { self.transfer(s3) } else { Cycle::ZERO }
    }

    /// A dirty private line crosses to the LLC (written there) on its way to the requester.
    #[inline]
    fn transfer(&mut self, s3: usize) -> Cycle {
        self.stats.c2c_transfers += 1;
        self.llc.set_dirty(Slot(s3), true);
        self.llc.latency
    }

    /// Drop core `o`'s copies of `b`; returns whether one was dirty.
    fn drop_private(&mut self, o: usize, b: BlockId) -> bool {
        let (l1, l2) = self.private_mut(o);
        let s2 = l2.find(b).expect("inclusion: a sharer's L2 holds the line");
        drop_l2_copy_in(l1, l2, s2.0 as u32)
    }

    /// Make core `o`'s copies of `b` clean; returns whether one was dirty.
    fn clean_private(&mut self, o: usize, b: BlockId) -> bool {
        let (l1, l2) = self.private_mut(o);
        let s2 = l2.find(b).expect("inclusion: a sharer's L2 holds the line");
        let s1 = l2.down(s2.0);
        let mut dirty = l2.dirty(s2);
        l2.set_dirty(s2, false);
        if s1 != NO_LINK {
            dirty |= l1.dirty(Slot(s1 as usize));
            l1.set_dirty(Slot(s1 as usize), false);
        }
        dirty
    }

    /// Drop every core's copies of the line in LLC slot `s3` (block `b`) and clear its
    /// directory entry; returns whether any copy was dirty.
    pub(super) fn drop_all_private(&mut self, s3: usize, b: BlockId) -> bool {
        let rest = self.llc.word(s3) & SHARERS;
        self.llc.set_word(s3, 0);
        self.drop_sharers(rest, b)
    }

    /// Drop the copies of `b` of every core in the sharer vector `rest`; returns whether any
    /// was dirty.
    fn drop_sharers(&mut self, mut rest: u32, b: BlockId) -> bool {
        let mut dirty = false;
        while rest != 0 {
            let o = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            dirty |= self.drop_private(o, b);
        }
        dirty
    }

    /// Make every core's copies of the line in LLC slot `s3` (block `b`) clean.
    pub(super) fn clean_all_private(&mut self, s3: usize, b: BlockId) {
        let mut rest = self.llc.word(s3) & SHARERS;
        while rest != 0 {
            let o = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            self.clean_private(o, b);
        }
    }

    /// Is any core's copy of the line in LLC slot `s3` (block `b`) dirty?
    pub(super) fn any_private_dirty(&self, s3: usize, b: BlockId) -> bool {
        let mut rest = self.llc.word(s3) & SHARERS;
        while rest != 0 {
            let o = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let (l1, l2) = self.private(o);
            let s2 = l2.find(b).expect("inclusion: a sharer's L2 holds the line");
            let s1 = l2.down(s2.0);
            if l2.dirty(s2) || (s1 != NO_LINK && l1.dirty(Slot(s1 as usize))) {
                return true;
            }
        }
        false
    }

    /// [`Hierarchy::llc_replaced`] with more than one core: the line that left slot `s3`
    /// (tag `tag`, state `line`) is back-invalidated in every core that shares it.
    fn llc_replaced_shared(&mut self, s3: usize, tag: u32, line: Line) -> Option<Victim> {
        let block = BlockId((tag & !VERSION_BIT) as u64);
        // The line that left took its directory entry along (the new line's is empty).
        let inner_dirty = self.drop_sharers((line.down() ^ NO_LINK) & SHARERS, block);
        let v = Victim { block, tag: line.up_or_aux(), version: tag & VERSION_BIT != 0, slot: Slot(s3) };
        self.dirty_victim(line.dirty() || inner_dirty, v)
    }

    /// [`Hierarchy::fill_l2`] with more than one core: the running core's L2 takes `b` (LLC slot
    /// `s3`); an L2 line it evicts leaves the directory's sharers (and its ownership).
    fn fill_l2_shared(&mut self, b: BlockId, s3: usize) -> usize {
        let (s2, old) = self.l2.replace_lru(b, Line::fresh(s3 as u32, false));
        if let Some((_, e)) = old {
            let d1 = e.down() != NO_LINK && self.l1.invalidate_slot(Slot(e.down() as usize)).0;
            let up = e.up_or_aux() as usize;
            self.llc.or_dirty(up, e.dirty() || d1);
            let c = self.coh().running;
            let d = self.llc.word(up) & !(1u32 << c);
            // An owner that leaves gives up ownership; stale sharers left by a lost
            // invalidation stay S.
            self.llc.set_word(up, if owner(d) == Some(c) { d & SHARERS } else { d });
        }
        s2
    }
}

#[cfg(test)]
mod tests;
