//! Tests of the hierarchy's timing, LRU, inclusion and dirty-victim reporting (default
//! configuration: L1 256 sets x 2, L2 512 x 8, LLC 1024 x 16), and of `SetAssoc` against a
//! reference LRU model. Blocks `b` and `b + k * sets` share a set of a level with `sets` sets;
//! since the set counts divide each other, blocks that share an LLC set share their L1 and L2
//! sets too.

use super::*;
use crate::config::{CacheConfig, Config, LlcConfig};
use crate::rng::Rng;
use std::collections::{HashSet, VecDeque};

const L1_SETS: u64 = 256;
const L2_SETS: u64 = 512;
const LLC_SETS: u64 = 1024;

fn hier() -> Hierarchy {
    Hierarchy::new(&Config::default())
}

/// The k-th block mapping to LLC set `set`.
fn llc_mate(set: u64, k: u64) -> BlockId {
    BlockId(set + k * LLC_SETS)
}

/// Every valid block of a level.
fn contents(c: &SetAssoc) -> HashSet<BlockId> {
    (0..c.slots()).filter_map(|i| c.block_at(Slot(i))).collect()
}

#[test]
fn first_access_misses_every_level_and_costs_the_three_lookups() {
    let mut h = hier();
    let a = h.access(BlockId(5), false);
    assert_eq!(a.level, HitLevel::Memory);
    assert_eq!(a.lookup_cycles, Cycle::new(1) + Cycle::new(8) + Cycle::new(21));
    assert_eq!(h.llc.block_at(a.llc_slot), Some(BlockId(5)));
    assert!(a.victim.is_none());
    assert!(h.l1.find(BlockId(5)).is_some() && h.l2.find(BlockId(5)).is_some());
    assert_eq!(h.stats.llc_misses, 1);
}

#[test]
fn l1_hit_costs_one_cycle() {
    let mut h = hier();
    h.access(BlockId(5), false);
    let a = h.access(BlockId(5), false);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::L1, Cycle::new(1)));
    assert_eq!(h.llc.block_at(a.llc_slot), Some(BlockId(5)), "the LLC slot is known through the links");
    let a = h.access(BlockId(5), true);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::L1, Cycle::new(1)));
    assert_eq!(h.stats.l1_hits, 2);
}

#[test]
fn l2_hit_costs_l1_plus_l2_lookups() {
    let mut h = hier();
    let b = BlockId(3);
    // Two more blocks of b's L1 set (2 ways) push it out of L1 only.
    for k in 0..3 {
        h.access(BlockId(b.0 + k * L1_SETS), false);
    }
    assert!(h.l1.find(b).is_none() && h.l2.find(b).is_some());
    let a = h.access(b, false);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::L2, Cycle::new(9)));
    assert_eq!(h.stats.l2_hits, 1);
}

#[test]
fn llc_hit_costs_all_three_lookups() {
    let mut h = hier();
    let b = BlockId(3);
    // Eight more blocks of b's L2 set (8 ways) push it out of L2; they spread over two LLC sets.
    for k in 0..=8 {
        h.access(BlockId(b.0 + k * L2_SETS), false);
    }
    assert!(h.l2.find(b).is_none() && h.l1.find(b).is_none());
    let a = h.access(b, false);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::Llc, Cycle::new(30)));
    assert_eq!((h.stats.llc_hits, h.stats.llc_misses), (1, 9));
}

#[test]
fn seventeenth_block_of_an_llc_set_evicts_the_least_recently_used() {
    let mut h = hier();
    for k in 0..16 {
        assert_eq!(h.access(llc_mate(7, k), false).level, HitLevel::Memory);
    }
    let expect: Vec<BlockId> = (0..16).rev().map(|k| llc_mate(7, k)).collect();
    assert_eq!(h.llc.set_contents(llc_mate(7, 0)), expect);
    let a = h.access(llc_mate(7, 16), false);
    assert!(a.victim.is_none(), "a clean victim is not reported");
    assert!(h.llc.find(llc_mate(7, 0)).is_none());
    let expect: Vec<BlockId> = (1..=16).rev().map(|k| llc_mate(7, k)).collect();
    assert_eq!(h.llc.set_contents(llc_mate(7, 0)), expect);
    assert_eq!(h.stats.llc_dirty_evictions, 0);
}

#[test]
fn llc_hit_refreshes_recency_so_the_next_oldest_line_is_evicted() {
    let mut h = hier();
    for k in 0..16 {
        h.access(llc_mate(7, k), false);
    }
    assert_eq!(h.access(llc_mate(7, 0), false).level, HitLevel::Llc);
    h.access(llc_mate(7, 16), false);
    let set = h.llc.set_contents(llc_mate(7, 0));
    assert_eq!(set[..2], [llc_mate(7, 16), llc_mate(7, 0)], "refreshed line survives");
    assert!(!set.contains(&llc_mate(7, 1)), "next oldest line is evicted");
}

/// Keep `b0` (first block of LLC set `set`) in L1 and L2 but never look it up in the LLC again,
/// while 15 newer blocks fill its LLC set: `b0` is then the LLC's LRU line and still in L1.
fn fill_llc_set_keeping_first_block_inner(h: &mut Hierarchy, set: u64) {
    let b0 = llc_mate(set, 0);
    for k in 1..16 {
        h.access(llc_mate(set, k), false);
        // Same L1 set, other L2 and LLC sets: pushes b0 out of L1 only.
        h.access(BlockId(llc_mate(set, k).0 + L1_SETS), false);
        assert_eq!(h.access(b0, false).level, HitLevel::L2, "k = {k}");
    }
    assert!(h.l1.find(b0).is_some() && h.l2.find(b0).is_some());
    assert_eq!(h.llc.set_contents(b0).last(), Some(&b0), "LLC's LRU");
}

#[test]
fn llc_eviction_back_invalidates_l1_and_l2() {
    let mut h = hier();
    let b0 = llc_mate(9, 0);
    h.access(b0, false);
    fill_llc_set_keeping_first_block_inner(&mut h, 9);
    let a = h.access(llc_mate(9, 16), false);
    assert_eq!(a.level, HitLevel::Memory);
    assert!(a.victim.is_none());
    assert!(h.llc.find(b0).is_none());
    assert!(h.l2.find(b0).is_none(), "inclusion: L2 copy dropped");
    assert!(h.l1.find(b0).is_none(), "inclusion: L1 copy dropped");
}

#[test]
fn store_that_hits_only_l1_still_produces_a_dirty_victim() {
    let mut h = hier();
    let b0 = llc_mate(2, 0);
    h.access(b0, false);
    assert_eq!(h.access(b0, true).level, HitLevel::L1);
    for k in 1..16 {
        assert!(h.access(llc_mate(2, k), false).victim.is_none());
    }
    let a = h.access(llc_mate(2, 16), false);
    assert_eq!(a.victim, Some(Victim { block: b0, tag: 0, version: false, slot: a.llc_slot }));
    assert_eq!(h.stats.llc_dirty_evictions, 1);
}

#[test]
fn line_dirty_only_in_an_inner_level_is_still_a_dirty_victim() {
    let mut h = hier();
    let b0 = llc_mate(9, 0);
    h.access(b0, true);
    // Leave the dirt in the inner levels only: the LLC copy alone does not know.
    let s = h.llc.find(b0).unwrap();
    h.llc.set_dirty(s, false);
    fill_llc_set_keeping_first_block_inner(&mut h, 9);
    assert!(h.is_dirty(b0));
    let a = h.access(llc_mate(9, 16), false);
    assert_eq!(a.victim, Some(Victim { block: b0, tag: 0, version: false, slot: a.llc_slot }));
}

#[test]
fn dirty_victim_carries_its_llc_tag() {
    let mut h = hier();
    let b0 = llc_mate(4, 0);
    let a = h.access(b0, true);
    h.llc.set_aux(a.llc_slot, 42);
    for k in 1..16 {
        assert!(h.access(llc_mate(4, k), false).victim.is_none(), "k = {k}");
    }
    let a = h.access(llc_mate(4, 16), false);
    assert_eq!(a.victim, Some(Victim { block: b0, tag: 42, version: false, slot: a.llc_slot }));
}

#[test]
fn invalidate_reports_whether_cached_and_dirty_and_clean_keeps_the_line() {
    let mut h = hier();
    let b = BlockId(77);
    assert_eq!(h.invalidate(b), (false, false));
    h.access(b, false);
    assert!(!h.is_dirty(b));
    assert_eq!(h.invalidate(b), (true, false));
    assert!(h.l1.find(b).is_none() && h.l2.find(b).is_none() && h.llc.find(b).is_none());
    h.access(b, true);
    assert!(h.is_dirty(b));
    h.clean(b);
    assert!(!h.is_dirty(b));
    assert_eq!(h.access(b, false).level, HitLevel::L1, "still cached");
    h.access(b, true);
    assert_eq!(h.invalidate(b), (true, true));
}

/// A level of `sets` sets of `ways` ways.
fn level(sets: u64, ways: u64, latency_cycles: u64) -> CacheConfig {
    CacheConfig { size_bytes: 64 * sets * ways, ways, latency_cycles: Cycle::new(latency_cycles) }
}

/// `c` as a fixed-size LLC.
fn fixed(c: &CacheConfig) -> LlcConfig {
    LlcConfig {
        size_bytes: c.size_bytes,
        size_per_core_bytes: c.size_bytes,
        ways: c.ways,
        latency_cycles: c.latency_cycles,
    }
}

fn small_config() -> Config {
    let mut c = Config::default();
    (c.l1, c.l2, c.llc) = (level(2, 2, 1), level(4, 4, 8), fixed(&level(8, 8, 21)));
    c
}

/// Random loads, stores, flushes and cleans on a tiny hierarchy. Checks after every step:
/// the level and cost predicted from the contents before it, inclusion, and that a line
/// leaving the LLC is reported as a victim exactly when it was stored to since it was last
/// written back. Does not check LRU order (the `SetAssoc` model test does).
#[test]
fn hierarchy_stays_inclusive_and_reports_exactly_the_dirty_lines_it_drops() {
    for seed in [1u64, 2, 3, 0xC0FFEE] {
        let mut rng = Rng::new(seed);
        let mut h = Hierarchy::new(&small_config());
        let mut dirty: HashSet<BlockId> = HashSet::new();
        for step in 0..20_000 {
            let ctx = format!("seed {seed} step {step}");
            let b = BlockId(rng.below(160));
            match rng.below(20) {
                0 => {
                    let cached = h.llc.find(b).is_some();
                    assert_eq!(h.invalidate(b), (cached, dirty.remove(&b)), "{ctx}");
                    continue;
                }
                1 => {
                    h.clean(b);
                    dirty.remove(&b);
                    continue;
                }
                _ => {}
            }
            let write = rng.chance(0.3);
            let expect = match (h.l1.find(b), h.l2.find(b), h.llc.find(b)) {
                (Some(_), _, _) => (HitLevel::L1, Cycle::new(1)),
                (None, Some(_), _) => (HitLevel::L2, Cycle::new(9)),
                (None, None, Some(_)) => (HitLevel::Llc, Cycle::new(30)),
                _ => (HitLevel::Memory, Cycle::new(30)),
            };
            let before = contents(&h.llc);
            let a = h.access(b, write);
            assert_eq!((a.level, a.lookup_cycles), expect, "{ctx}");
            let (l1, l2, llc) = (contents(&h.l1), contents(&h.l2), contents(&h.llc));
            let gone: Vec<BlockId> = before.difference(&llc).copied().collect();
            assert!(gone.len() <= 1, "{ctx}: {gone:?}");
            let expect_victim = gone.first().filter(|g| dirty.remove(*g)).copied();
            assert_eq!(a.victim.map(|v| v.block), expect_victim, "{ctx}");
            if write {
                dirty.insert(b);
            }
            assert!(l1.is_subset(&l2) && l2.is_subset(&llc), "{ctx}: inclusion");
            for &d in &dirty {
                assert!(llc.contains(&d) && h.is_dirty(d), "{ctx}: {d:?}");
            }
        }
    }
}

// ---- SetAssoc (8 sets of 4 ways) against a reference LRU ----

/// A line's state, as `insert` reports it and as the reference model keeps it.
fn line(block: u64, dirty: bool, aux: u32) -> Evicted {
    Evicted { block: BlockId(block), dirty, aux, version: false }
}

#[test]
fn insert_fills_free_ways_then_evicts_the_least_recently_used() {
    let mut c = SetAssoc::new(&level(8, 4, 1));
    for k in 0..4 {
        assert_eq!(c.insert(BlockId(1 + 8 * k)).1, None);
    }
    let s = c.find(BlockId(1)).unwrap();
    c.set_dirty(s, true);
    let (s, ev) = c.insert(BlockId(33));
    assert_eq!(ev, Some(line(1, true, 0)));
    assert_eq!(c.block_at(s), Some(BlockId(33)));
    assert!(!c.dirty(s), "inserted lines are clean");
    assert_eq!(c.set_contents(BlockId(1)), [33, 25, 17, 9].map(BlockId));
    assert_eq!(c.set_contents(BlockId(2)), [], "other sets untouched");
}

#[test]
fn lookup_refreshes_recency_and_find_does_not() {
    let mut c = SetAssoc::new(&level(8, 4, 1));
    for k in 0..4 {
        c.insert(BlockId(8 * k));
    }
    assert!(c.find(BlockId(0)).is_some());
    assert_eq!(c.set_contents(BlockId(0)), [24, 16, 8, 0].map(BlockId));
    assert!(c.lookup(BlockId(8)).is_some());
    assert_eq!(c.set_contents(BlockId(0)), [8, 24, 16, 0].map(BlockId));
    assert_eq!(c.insert(BlockId(32)).1.map(|e| e.block), Some(BlockId(0)));
    assert_eq!(c.insert(BlockId(40)).1.map(|e| e.block), Some(BlockId(16)));
}

#[test]
fn aux_moves_with_its_line_and_a_new_line_starts_at_zero() {
    let mut c = SetAssoc::new(&level(8, 4, 1));
    let (s, _) = c.insert(BlockId(3));
    c.set_aux(s, 9);
    for k in 1..4 {
        c.insert(BlockId(3 + 8 * k));
    }
    let s = c.lookup(BlockId(3)).unwrap();
    assert_eq!(c.aux(s), 9);
    for k in 1..4 {
        assert_eq!(c.aux(c.find(BlockId(3 + 8 * k)).unwrap()), 0);
    }
    assert_eq!(c.invalidate(BlockId(3)), Some((false, 9)));
    let (s, _) = c.insert(BlockId(35));
    assert_eq!(c.aux(s), 0, "the freed frame does not leak its tag");
}

/// The set holding `b` must list the model's blocks, most recent first, with its states.
fn check_set(c: &SetAssoc, b: BlockId, set: &VecDeque<Evicted>, ctx: &str) {
    let blocks: Vec<BlockId> = set.iter().map(|l| l.block).collect();
    assert_eq!(c.set_contents(b), blocks, "{ctx}: set contents");
    for l in set {
        let s = c.find(l.block).expect(ctx);
        assert_eq!(line(l.block.0, c.dirty(s), c.aux(s)), *l, "{ctx}");
    }
}

/// Random look-ups, inserts, invalidations, dirty and aux updates; 7 candidate blocks per
/// 4-way set, so sets are often full.
#[test]
fn set_assoc_matches_a_reference_lru_model() {
    for seed in [7u64, 8, 9, 1234, 0xDEAD_BEEF] {
        let mut rng = Rng::new(seed);
        let mut c = SetAssoc::new(&level(8, 4, 1));
        let mut model: Vec<VecDeque<Evicted>> = vec![VecDeque::new(); 8];
        for step in 0..20_000 {
            let ctx = format!("seed {seed} step {step}");
            let b = BlockId(rng.below(56));
            let set = &mut model[(b.0 % 8) as usize];
            let pos = set.iter().position(|l| l.block == b);
            // The line a fill of `b` would push out: none if `b` is cached or its set has room.
            let lru = set.back().filter(|_| pos.is_none() && set.len() == 4);
            assert_eq!(c.victim_for(b), lru.map(|l| (l.block, l.dirty)), "{ctx}: victim_for");
            match (rng.below(5), pos) {
                (0, _) => {
                    let got = c.lookup(b).map(|s| c.block_at(s));
                    assert_eq!(got, pos.map(|_| Some(b)), "{ctx}: lookup");
                    if let Some(p) = pos {
                        let l = set.remove(p).unwrap();
                        set.push_front(l);
                    }
                }
                (1, None) | (2, None) => {
                    let want = (set.len() == 4).then(|| set.pop_back().unwrap());
                    let (s, ev) = c.insert(b);
                    assert_eq!(ev, want, "{ctx}: insert evicts the LRU line");
                    assert_eq!(c.block_at(s), Some(b), "{ctx}");
                    set.push_front(line(b.0, false, 0));
                }
                (1, Some(p)) => {
                    let d = rng.chance(0.5);
                    c.set_dirty(c.find(b).unwrap(), d);
                    set[p].dirty = d;
                }
                (2, Some(p)) => {
                    let v = rng.below(1000) as u32 + 1;
                    c.set_aux(c.find(b).unwrap(), v);
                    set[p].aux = v;
                }
                (3, _) => {
                    let want = pos.map(|p| set.remove(p).unwrap());
                    let want = want.map(|l| (l.dirty, l.aux));
                    assert_eq!(c.invalidate(b), want, "{ctx}: invalidate");
                }
                _ => assert_eq!(c.find(b).is_some(), pos.is_some(), "{ctx}: find"),
            }
            check_set(&c, b, set, &ctx);
        }
    }
}

// ---- The whole hierarchy against a reference model ----

/// One level of the reference hierarchy: per set, (block, dirty) most recently used first.
struct RefLevel {
    sets: Vec<VecDeque<(BlockId, bool)>>,
    ways: usize,
}

impl RefLevel {
    fn new(cfg: &CacheConfig) -> RefLevel {
        let ways = cfg.ways as usize;
        RefLevel { sets: vec![VecDeque::new(); (cfg.size_bytes / 64) as usize / ways], ways }
    }

    fn set(&mut self, b: BlockId) -> &mut VecDeque<(BlockId, bool)> {
        let n = self.sets.len() as u64;
        &mut self.sets[(b.0 % n) as usize]
    }

    /// Remove `b` if present; returns its dirty bit.
    fn remove(&mut self, b: BlockId) -> Option<bool> {
        let set = self.set(b);
        let p = set.iter().position(|l| l.0 == b)?;
        set.remove(p).map(|l| l.1)
    }

    /// Move `b` to the front if present.
    fn hit(&mut self, b: BlockId) -> bool {
        let Some(d) = self.remove(b) else { return false };
        self.set(b).push_front((b, d));
        true
    }

    fn mark_dirty(&mut self, b: BlockId) {
        self.set(b).iter_mut().find(|l| l.0 == b).expect("inclusion").1 = true;
    }

    /// Insert `b` (absent) in front; returns the line pushed out of a full set.
    fn insert(&mut self, b: BlockId, dirty: bool) -> Option<(BlockId, bool)> {
        let ways = self.ways;
        let set = self.set(b);
        let out = if set.len() == ways { set.pop_back() } else { None };
        set.push_front((b, dirty));
        out
    }
}

/// The hierarchy as the module docs describe it, one `VecDeque` per set, plus the LLC tags.
struct RefHierarchy {
    l1: RefLevel,
    l2: RefLevel,
    llc: RefLevel,
    tags: std::collections::HashMap<BlockId, u32>,
}

impl RefHierarchy {
    fn access(&mut self, b: BlockId, write: bool) -> (HitLevel, Option<Victim>) {
        if self.l1.hit(b) {
            if write {
                self.l1.mark_dirty(b);
            }
            return (HitLevel::L1, None);
        }
        let mut victim = None;
        let level = if self.l2.hit(b) {
            HitLevel::L2
        } else {
            let level = if self.llc.hit(b) { HitLevel::Llc } else { HitLevel::Memory };
            if level == HitLevel::Memory {
                if let Some((v, d3)) = self.llc.insert(b, false) {
                    let d1 = self.l1.remove(v).unwrap_or(false);
                    let d2 = self.l2.remove(v).unwrap_or(false);
                    let tag = self.tags.remove(&v).unwrap_or(0);
                    if d1 || d2 || d3 {
                        victim = Some(Victim { block: v, tag, version: false, slot: Slot(0) });
                    }
                }
            }
            if let Some((v, d2)) = self.l2.insert(b, false) {
                let d1 = self.l1.remove(v).unwrap_or(false);
                if d1 || d2 {
                    self.llc.mark_dirty(v);
                }
            }
            level
        };
        if let Some((v, true)) = self.l1.insert(b, write) {
            self.l2.mark_dirty(v);
        }
        (level, victim)
    }

    /// Remove `b` from every level: (was it cached, was it dirty).
    fn invalidate(&mut self, b: BlockId) -> (bool, bool) {
        let d = [self.l1.remove(b), self.l2.remove(b), self.llc.remove(b)];
        self.tags.remove(&b);
        (d[2].is_some(), d.contains(&Some(true)))
    }

    fn clean(&mut self, b: BlockId) {
        for level in [&mut self.l1, &mut self.l2, &mut self.llc] {
            if let Some(l) = level.set(b).iter_mut().find(|l| l.0 == b) {
                l.1 = false;
            }
        }
    }
}

/// Every set of `c` must hold the model's blocks in the model's order, with its dirty bits.
fn check_level(c: &SetAssoc, r: &RefLevel, name: &str, ctx: &str) {
    for (i, set) in r.sets.iter().enumerate() {
        let blocks: Vec<BlockId> = set.iter().map(|l| l.0).collect();
        assert_eq!(c.set_contents(BlockId(i as u64)), blocks, "{ctx}: {name} set {i}");
        for &(b, d) in set {
            assert_eq!(c.dirty(c.find(b).unwrap()), d, "{ctx}: {name} dirty bit of {b:?}");
        }
    }
}

/// Random loads, stores, tags, flushes and cleans, against [`RefHierarchy`]: the level, cost
/// and victim of every access and then the contents, recency order and dirty bits of every
/// set of every level. Geometries with power-of-two way counts and without (whose arrays are
/// padded), and one with more L2 sets than LLC sets.
#[test]
fn hierarchy_matches_a_reference_model() {
    let geometries = [
        (level(2, 2, 1), level(4, 4, 8), level(8, 8, 21)),
        (level(2, 3, 1), level(4, 6, 8), level(4, 12, 21)),
        (level(4, 1, 1), level(16, 2, 8), level(4, 16, 21)),
    ];
    for (g, (l1, l2, llc)) in geometries.into_iter().enumerate() {
        for seed in [1u64, 2, 0xC0FFEE] {
            let mut cfg = Config::default();
            (cfg.l1, cfg.l2, cfg.llc) = (l1.clone(), l2.clone(), fixed(&llc));
            let mut h = Hierarchy::new(&cfg);
            let mut r = RefHierarchy {
                l1: RefLevel::new(&l1),
                l2: RefLevel::new(&l2),
                llc: RefLevel::new(&llc),
                tags: Default::default(),
            };
            let mut rng = Rng::new(seed);
            for step in 0..20_000 {
                let ctx = format!("geometry {g} seed {seed} step {step}");
                let b = BlockId(rng.below(192));
                match rng.below(20) {
                    0 => assert_eq!(h.invalidate(b), r.invalidate(b), "{ctx}: invalidate"),
                    1 => {
                        h.clean(b);
                        r.clean(b);
                    }
                    2 => {
                        if let Some(s) = h.llc.find(b) {
                            let tag = rng.below(5) as u32;
                            h.llc.set_aux(s, tag);
                            r.tags.insert(b, tag);
                        }
                    }
                    _ => {
                        let write = rng.chance(0.3);
                        let a = h.access(b, write);
                        let (level, victim) = r.access(b, write);
                        // (The model knows no slots: the victim's is checked by the directed tests.)
                        let got = a.victim.map(|v| Victim { slot: Slot(0), ..v });
                        assert_eq!((a.level, got), (level, victim), "{ctx}: access {b:?}");
                        assert_eq!(h.llc.block_at(a.llc_slot), Some(b), "{ctx}: llc_slot");
                    }
                }
                check_level(&h.l1, &r.l1, "L1", &ctx);
                check_level(&h.l2, &r.l2, "L2", &ctx);
                check_level(&h.llc, &r.llc, "LLC", &ctx);
            }
        }
    }
}
