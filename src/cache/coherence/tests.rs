//! Tests of the coherent hierarchy: the exact cycles of a downgrade, an invalidation, an
//! upgrade and a cache-to-cache transfer (default latencies: L1 1, L2 8, LLC 21; a miss in L1
//! and L2 pays 30), back-invalidation of every core's copies, and a model-based check of random
//! multi-core access streams against a flat memory of line versions.

use super::*;
use crate::config::Config;
use crate::rng::Rng;

const MISS: Cycle = Cycle::new(1 + 8 + 21);
/// The LLC's sets on two cores: 2 MiB (1 MiB per core), 16 ways.
const LLC_SETS_2: u64 = 2048;

fn config(sets: &[&str]) -> Config {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::build(None, &sets).unwrap()
}

fn hier(cores: u32) -> Hierarchy {
    Hierarchy::new(&config(&[&format!("machine.cores={cores}")]))
}

/// Access `b` as core `c`.
fn on(h: &mut Hierarchy, c: usize, b: u64, write: bool) -> Access {
    h.switch_core(c);
    h.access(BlockId(b), write)
}

fn dir_of(h: &Hierarchy, b: u64) -> (u16, Option<usize>) {
    h.directory(h.llc.find(BlockId(b)).expect("in the LLC"))
}

#[test]
fn a_first_load_makes_the_core_the_exclusive_owner() {
    let mut h = hier(2);
    let a = on(&mut h, 1, 5, false);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::Memory, MISS));
    assert_eq!(dir_of(&h, 5), (0b10, Some(1)), "E at core 1");
    // E -> M on a store costs nothing beyond the L1 hit.
    let a = on(&mut h, 1, 5, true);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::L1, Cycle::new(1)));
    assert_eq!((h.stats.invalidations, h.stats.downgrades, h.stats.c2c_transfers), (0, 0, 0));
}

#[test]
fn a_load_of_a_line_held_clean_elsewhere_downgrades_the_owner_for_one_l2_lookup() {
    let mut h = hier(2);
    on(&mut h, 0, 5, false);
    let a = on(&mut h, 1, 5, false);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::Llc, MISS + Cycle::new(8)));
    assert_eq!(dir_of(&h, 5), (0b11, None), "both S");
    assert_eq!((h.stats.downgrades, h.stats.c2c_transfers), (1, 0));
    // A third load, by either core, hits its own copy.
    assert_eq!(on(&mut h, 0, 5, false).lookup_cycles, Cycle::new(1));
}

#[test]
fn a_load_of_a_line_modified_elsewhere_is_a_cache_to_cache_transfer_through_the_llc() {
    let mut h = hier(2);
    on(&mut h, 0, 5, true);
    let a = on(&mut h, 1, 5, false);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::Llc, MISS + Cycle::new(8) + Cycle::new(21)));
    assert_eq!((h.stats.downgrades, h.stats.c2c_transfers), (1, 1));
    let s3 = h.llc.find(BlockId(5)).unwrap();
    assert!(h.llc.dirty(s3), "the dirty data went to the LLC");
    let (l1, l2) = h.private(0);
    assert!(
        !l1.dirty(l1.find(BlockId(5)).unwrap()) && !l2.dirty(l2.find(BlockId(5)).unwrap()),
        "core 0 is in S, clean"
    );
    assert!(h.is_dirty(BlockId(5)));
}

#[test]
fn a_store_hitting_a_shared_copy_upgrades_at_the_directory_and_invalidates_the_other_sharer() {
    let mut h = hier(3);
    on(&mut h, 0, 5, false);
    on(&mut h, 1, 5, false);
    // L1 hit (1) + the way to the directory (8 + 21) + the sharer's invalidation (8).
    let a = on(&mut h, 1, 5, true);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::L1, Cycle::new(1 + 8 + 21 + 8)));
    assert_eq!(dir_of(&h, 5), (0b10, Some(1)), "M at core 1");
    assert_eq!(h.stats.invalidations, 1);
    assert!(h.private(0).1.find(BlockId(5)).is_none() && h.private(0).0.find(BlockId(5)).is_none());
    assert_eq!(on(&mut h, 1, 5, true).lookup_cycles, Cycle::new(1), "now M: a silent store");
}

#[test]
fn an_upgrade_with_no_other_sharer_left_pays_the_way_to_the_directory_only() {
    let mut h = hier(2);
    on(&mut h, 0, 5, false);
    on(&mut h, 1, 5, false);
    // Core 0's copy leaves its L2 (8 ways; its L2 sets are 512): nine blocks of its set.
    for k in 1..=8 {
        on(&mut h, 0, 5 + k * 512, false);
    }
    assert!(h.private(0).1.find(BlockId(5)).is_none());
    assert_eq!(dir_of(&h, 5), (0b10, None), "core 1 still S");
    let a = on(&mut h, 1, 5, true);
    assert_eq!(a.lookup_cycles, Cycle::new(1) + Cycle::new(8) + Cycle::new(21));
    assert_eq!(h.stats.invalidations, 0);
}

#[test]
fn a_store_miss_invalidates_every_sharer_in_parallel_and_takes_a_dirty_owners_line() {
    let mut h = hier(4);
    for c in 0..3 {
        on(&mut h, c, 5, false);
    }
    let a = on(&mut h, 3, 5, true);
    assert_eq!((a.level, a.lookup_cycles), (HitLevel::Llc, MISS + Cycle::new(8)), "three sharers, one probe time");
    assert_eq!((h.stats.invalidations, h.stats.c2c_transfers), (3, 0));
    let a = on(&mut h, 2, 5, true);
    assert_eq!(a.lookup_cycles, MISS + Cycle::new(8) + Cycle::new(21), "the owner's dirty line crosses over");
    assert_eq!((h.stats.invalidations, h.stats.c2c_transfers), (4, 1));
    assert_eq!(dir_of(&h, 5), (0b100, Some(2)));
}

#[test]
fn an_llc_eviction_back_invalidates_every_core_and_gathers_their_dirty_bits() {
    let mut h = hier(2);
    on(&mut h, 1, 7, true);
    on(&mut h, 0, 7 + LLC_SETS_2, false);
    // Core 0 fills the rest of the LLC set (16 ways); the 17th block pushes out block 7, the
    // least recently used, which only core 1 holds, dirty.
    for k in 2..16 {
        assert!(on(&mut h, 0, 7 + k * LLC_SETS_2, false).victim.is_none());
    }
    let a = on(&mut h, 0, 7 + 16 * LLC_SETS_2, false);
    assert_eq!(a.victim, Some(Victim { block: BlockId(7), tag: 0, version: false, slot: a.llc_slot }));
    assert!(h.private(1).0.find(BlockId(7)).is_none() && h.private(1).1.find(BlockId(7)).is_none());
    assert_eq!(h.stats.llc_dirty_evictions, 1);
}

#[test]
fn invalidate_and_clean_reach_every_core() {
    let mut h = hier(3);
    on(&mut h, 0, 5, false);
    on(&mut h, 2, 5, true);
    on(&mut h, 1, 5, false);
    on(&mut h, 1, 9, true);
    h.switch_core(0);
    let s9 = h.llc.find(BlockId(9)).unwrap();
    assert_eq!(h.inner_dirty(s9), (false, false), "the running core's copies only");
    h.clean_slot(s9);
    assert!(!h.is_dirty(BlockId(9)), "core 1's copy is clean too");
    assert_eq!(h.invalidate(BlockId(5)), (true, true), "the LLC line holds core 2's dirty data");
    for c in 0..3 {
        assert!(h.private(c).1.find(BlockId(5)).is_none(), "core {c}");
    }
}

/// Random accesses by `cores` cores over `blocks` blocks of small caches (L1 2 x 2, L2 4 x 4,
/// LLC 8 x 4 lines: many evictions at every level), checked after every step against a flat
/// memory of versions (a store makes a new version): a hit in a core's L1 or L2 must find the
/// version that core fetched or wrote to be the current one. Also checked after every step:
/// inclusion, the links between levels, the directory's sharers against every L2, single
/// ownership, and that only the owner holds a line dirty. `Err` names the seed and step.
fn check_streams(seed: u64, cores: usize, blocks: u64, steps: usize, lose: bool) -> Result<(), String> {
    let cfg = config(&[
        &format!("machine.cores={cores}"),
        "l1.size_bytes=256",
        "l1.ways=2",
        "l2.size_bytes=1024",
        "l2.ways=4",
        "llc.size_bytes=2048",
        "llc.ways=4",
    ]);
    let mut h = Hierarchy::new(&cfg);
    if lose {
        h.lose_invalidations();
    }
    let mut rng = Rng::new(seed);
    let mut memory = vec![0u64; blocks as usize];
    let mut seen = vec![vec![0u64; blocks as usize]; cores];
    for step in 0..steps {
        let (c, b, write) = (rng.below(cores as u64) as usize, rng.below(blocks), rng.below(3) == 0);
        h.switch_core(c);
        let a = h.access(BlockId(b), write);
        let at = || format!("seed {seed}, step {step}, core {c}, block {b}");
        match a.level {
            HitLevel::L1 | HitLevel::L2 if seen[c][b as usize] != memory[b as usize] => {
                return Err(format!(
                    "{}: stale copy hit in {:?} (version {}, memory {})",
                    at(),
                    a.level,
                    seen[c][b as usize],
                    memory[b as usize]
                ));
            }
            HitLevel::L1 | HitLevel::L2 => {}
            _ => seen[c][b as usize] = memory[b as usize],
        }
        if write {
            memory[b as usize] += 1;
            seen[c][b as usize] = memory[b as usize];
        }
        check_structure(&h, lose).map_err(|e| format!("{}: {e}", at()))?;
    }
    Ok(())
}

/// Inclusion, links, directory and ownership invariants of `h` (see [`check_streams`]).
fn check_structure(h: &Hierarchy, lose: bool) -> Result<(), String> {
    for c in 0..h.cores() {
        let (l1, l2) = h.private(c);
        for s1 in (0..l1.slots()).map(Slot) {
            let Some(b) = l1.block_at(s1) else { continue };
            let s2 = l2.find(b).ok_or(format!("core {c}: block {} in L1, not in L2", b.0))?;
            if l1.up(s1.0) as usize != s2.0 || l2.down(s2.0) as usize != s1.0 {
                return Err(format!("core {c}: L1/L2 links of block {} broken", b.0));
            }
        }
        for s2 in (0..l2.slots()).map(Slot) {
            let Some(b) = l2.block_at(s2) else { continue };
            let s3 = h.llc.find(b).ok_or(format!("core {c}: block {} in L2, not in the LLC", b.0))?;
            if l2.up(s2.0) as usize != s3.0 {
                return Err(format!("core {c}: L2 up link of block {} broken", b.0));
            }
            let (sharers, owner) = h.directory(s3);
            if sharers & 1 << c == 0 {
                return Err(format!("core {c} holds block {} but is no sharer", b.0));
            }
            let s1 = l2.down(s2.0);
            let dirty = l2.dirty(s2) || (s1 != NO_LINK && l1.dirty(Slot(s1 as usize)));
            if dirty && owner != Some(c) {
                return Err(format!("core {c} holds block {} dirty without owning it", b.0));
            }
        }
    }
    for s3 in (0..h.llc.slots()).map(Slot) {
        let Some(b) = h.llc.block_at(s3) else { continue };
        let (sharers, owner) = h.directory(s3);
        let held = (0..h.cores()).filter(|&c| h.private(c).1.find(b).is_some()).fold(0u16, |m, c| m | 1 << c);
        if sharers != held {
            return Err(format!("block {}: directory sharers {sharers:#b}, held by {held:#b}", b.0));
        }
        if let Some(o) = owner {
            if sharers & 1 << o == 0 || (!lose && sharers != 1 << o) {
                return Err(format!("block {}: owner {o} with sharers {sharers:#b}", b.0));
            }
        }
    }
    Ok(())
}

#[test]
fn random_multicore_streams_never_hit_a_stale_copy_and_keep_the_directory_exact() {
    for seed in 0..12 {
        let cores = [2, 4, 16][seed as usize % 3];
        check_streams(seed, cores, 96, 3000, false).unwrap();
    }
}

#[test]
fn the_model_check_catches_a_lost_invalidation() {
    let found = (0..12).filter_map(|seed| check_streams(seed, 4, 96, 3000, true).err()).collect::<Vec<_>>();
    assert!(!found.is_empty(), "no stale hit found with the bug injected");
    assert!(found.iter().all(|e| e.contains("stale copy hit")), "{found:?}");
}
