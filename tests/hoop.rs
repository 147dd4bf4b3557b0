//! HOOP (docs/protocols/hoop.md): crash safety with and without aborts while its OOP regions
//! wrap and are garbage-collected, on one core and on four; every injected bug caught; home is
//! written by garbage collection only; and recovery of hand-built slice images (named as
//! sentences; docs/formats/hoop-log.md).

mod common;

use common::*;
use locsim::crash::{check, CrashReport};
use locsim::log::head::{LogFormat, LogHead};
use locsim::log::hoop::{encode_data, SliceMeta, COMMIT};
use locsim::pmem::Layout;
use locsim::protocol::{Bug, ProtocolKind::Hoop};
use locsim::recovery;
use locsim::runner::execute;
use locsim::types::BlockId;
use locsim::workload::WorkloadKind;

/// A 64 KiB log (511 slices with one core): the region wraps and is collected often.
const SMALL_LOG: &str = "log.size_bytes=65536";

fn crash(w: WorkloadKind, extra: &[&str], txs: u64, ar: f64, bug: Option<Bug>) -> CrashReport {
    check(&crash_spec(Hoop, w, &[&[SMALL_LOG], extra].concat(), txs, ar, bug, 400)).unwrap()
}

#[test]
fn hoop_recovers_with_and_without_aborts_while_its_region_wraps() {
    for ar in [0.0, 0.1] {
        for w in [WorkloadKind::Sps, WorkloadKind::Hash, WorkloadKind::BTree] {
            let r = crash(w, &[], 300, ar, None);
            assert_eq!(r.violations, 0, "{w:?} abort rate {ar}: {:?}", r.first_violation);
            assert!(r.crash_points >= 300, "{r:?}");
        }
    }
    let r = crash(WorkloadKind::Sps, &["machine.cores=4", "workload.sps.entries=1024"], 400, 0.1, None);
    assert_eq!(r.violations, 0, "four cores: {:?}", r.first_violation);
}

#[test]
fn a_region_too_full_for_the_next_transaction_is_collected_during_its_commit() {
    // 75 slices per transaction, GC at 90 % of 511: the seventh transaction finds no room and
    // collects the six before it (not itself: its slices are not written yet).
    let big = ["hoop.gc_threshold_percent=90", "workload.sps.swaps_per_tx=300"];
    let r = crash(WorkloadKind::Sps, &big, 60, 0.0, None);
    assert_eq!(r.violations, 0, "{:?}", r.first_violation);
    let mut s = spec(small_cfg(&[&big[..], &[SMALL_LOG]].concat()), Hoop, 60, 11, None);
    s.record = false;
    let c = execute(&s).unwrap().result.protocol_counters;
    assert!(c["gc_forced"] >= 5, "{c:?}");
}

#[test]
fn every_injected_bug_is_caught() {
    for bug in [Bug::AckBeforeDurable, Bug::CommitBeforeLog, Bug::TruncateBeforeCheckpoint] {
        let r = crash(WorkloadKind::Sps, &[], 600, 0.0, Some(bug));
        assert!(r.violations > 0, "{} not caught", bug.name());
    }
    let r =
        crash(WorkloadKind::Sps, &["machine.cores=4", "workload.sps.entries=1024"], 1000, 0.0, Some(Bug::GcOwnRegion));
    assert!(r.violations > 0, "gc-own-region not caught on four cores");
}

#[test]
fn home_is_written_by_garbage_collection_only_and_evicted_lines_are_dropped() {
    // Tiny caches: transactional lines are evicted before and after their commit; none of
    // those evictions writes home.
    let tiny = [
        "l1.size_bytes=2048",
        "l2.size_bytes=8192",
        "llc.size_bytes=16384",
        "workload.sps.swaps_per_tx=150",
        "hoop.mapping_entries=1024",
    ];
    let mut s = spec(small_cfg(&tiny), Hoop, 200, 3, None);
    s.record = false;
    let r = execute(&s).unwrap().result;
    let c = &r.protocol_counters;
    assert!(c["dropped_evictions"] > 100 && c["redirected_reads"] > 100 && c["gc_runs"] > 5, "{c:?}");
    assert_eq!(r.mem_write_bytes_by_kind["home"], 64 * c["gc_home_writes"], "{r:?}");
}

/// A two-core image: data area of 16 lines, a 64 KiB log split in two regions.
fn two_regions() -> (Layout, Vec<u8>) {
    let layout = Layout::new(16 * 64, 65536).with_cores(2);
    let mut img = vec![0u8; layout.total_bytes() as usize];
    LogHead { format: LogFormat::Hoop, start: 0, start_seq: 1 }.write_regions(&layout, &mut img);
    (layout, img)
}

/// Put slice `pos` of core `c`'s region: its transaction `(seq, order, index, commit)` and its
/// words (home word number, value).
fn put(layout: &Layout, img: &mut [u8], c: usize, pos: u64, tx: (u64, u64, u32, bool), words: &[(u32, u64)]) {
    let (seq, order, index, commit) = tx;
    let (log0, _) = layout.log_region(c);
    let data = encode_data(&words.iter().map(|w| w.1).collect::<Vec<_>>());
    let mut addrs = [0u32; 8];
    for (a, w) in addrs.iter_mut().zip(words) {
        *a = w.0;
    }
    let meta = SliceMeta { seq, order, index, count: words.len() as u8, flags: if commit { COMMIT } else { 0 }, addrs };
    let at = BlockId(log0.0 + 1 + 2 * pos);
    img[at.range()].copy_from_slice(&data);
    img[BlockId(at.0 + 1).range()].copy_from_slice(&meta.encode(&data));
}

fn recovered(layout: &Layout, img: &[u8]) -> Vec<u8> {
    let mut img = img.to_vec();
    let plan = recovery::recover(Some(LogFormat::Hoop), layout, &img).unwrap();
    recovery::apply(&mut img, &plan.writes);
    let again = recovery::recover(Some(LogFormat::Hoop), layout, &img).unwrap();
    assert_eq!(again.redone_txs, 0, "recovered once, nothing is left to redo");
    img[..layout.data_bytes as usize].to_vec()
}

fn word(d: &[u8], w: usize) -> u64 {
    u64::from_le_bytes(d[w * 8..w * 8 + 8].try_into().unwrap())
}

#[test]
fn recovery_replays_both_regions_in_global_order_whatever_the_region() {
    let (layout, mut img) = two_regions();
    // Word 3 written by core 1 (order 1), then core 0 (order 2), then core 1 again (order 3).
    put(&layout, &mut img, 1, 0, (1, 1, 0, true), &[(3, 10)]);
    put(&layout, &mut img, 0, 0, (1, 2, 0, true), &[(3, 20), (9, 7)]);
    put(&layout, &mut img, 1, 1, (2, 3, 0, true), &[(3, 30)]);
    let d = recovered(&layout, &img);
    assert_eq!((word(&d, 3), word(&d, 9)), (30, 7));
}

#[test]
fn a_transaction_without_its_commit_slice_is_dropped_and_ends_the_region() {
    let (layout, mut img) = two_regions();
    put(&layout, &mut img, 0, 0, (1, 1, 0, false), &[(1, 5); 8]);
    put(&layout, &mut img, 0, 1, (1, 1, 1, true), &[(2, 6)]);
    put(&layout, &mut img, 0, 2, (2, 2, 0, false), &[(4, 8)]);
    let d = recovered(&layout, &img);
    assert_eq!((word(&d, 1), word(&d, 2), word(&d, 4)), (5, 6, 0));
    // A slice whose data block is not the one its metadata vouches for ends the region.
    let (log0, _) = layout.log_region(0);
    img[BlockId(log0.0 + 1 + 2).range()][0] ^= 1;
    let d = recovered(&layout, &img);
    assert_eq!((word(&d, 1), word(&d, 2)), (0, 0), "the first transaction lost its second slice");
}

#[test]
fn a_head_moved_by_garbage_collection_skips_what_it_says_is_home() {
    // A crash after GC wrote word 3 = 20 home and moved region 0's head (home_below 3), but
    // before region 1's head moved: region 1's order-1 slice is older than home.
    let (layout, mut img) = two_regions();
    put(&layout, &mut img, 1, 0, (1, 1, 0, true), &[(3, 10)]);
    put(&layout, &mut img, 0, 0, (1, 2, 0, true), &[(3, 20)]);
    img[24..32].copy_from_slice(&20u64.to_le_bytes());
    let (log0, _) = layout.log_region(0);
    let head = LogHead { format: LogFormat::Hoop, start: 1, start_seq: 2 };
    img[log0.range()].copy_from_slice(&head.encode_home(3));
    let d = recovered(&layout, &img);
    assert_eq!(word(&d, 3), 20);
}

/// The torn-write fix `hoop.two_slot_head` (docs/faults.md "HOOP: slices survive, the head does
/// not"): with GC after every few transactions, the replayed point has 6 torn states, 4 of
/// which (the head's new `start` with its old `start_seq`) lose acknowledged transactions in
/// the plain head; with two slots every torn head reads as the old or the new one.
#[test]
fn a_torn_head_loses_committed_transactions_unless_it_has_two_slots() {
    let base = [SMALL_LOG, "hoop.gc_threshold_percent=5"];
    for (fix, want) in [(None, 4), (Some("hoop.two_slot_head=true"), 0)] {
        let sets: Vec<&str> = base.iter().copied().chain(fix).collect();
        let r = torn_replay(Hoop, WorkloadKind::Sps, &sets, 300, true, 23572);
        assert_eq!((r.torn_states, r.violations), (6, want), "{fix:?}: {:?}", r.first_violation);
    }
    let sets = [SMALL_LOG, "hoop.gc_threshold_percent=5", "hoop.two_slot_head=true"];
    for w in [WorkloadKind::Sps, WorkloadKind::Hash] {
        let r = crash(w, &sets, 300, 0.1, None);
        assert_eq!(r.violations, 0, "{w:?}: {:?}", r.first_violation);
    }
    let four = ["hoop.two_slot_head=true", "machine.cores=4", "workload.sps.entries=1024"];
    let r = crash(WorkloadKind::Sps, &four, 400, 0.1, None);
    assert_eq!(r.violations, 0, "four cores: {:?}", r.first_violation);
}

/// HOOP's scan cache (`crash::incremental::hoop::Cache`): after every one of
/// a seeded mix of slice writes (committed, open, torn or out-of-step transactions, overwrites
/// of scanned slices, wraps), head moves in two regions and changes of home blocks, recovery
/// resuming from the cache (its scans and its replay) makes the plan a whole recovery makes.
/// The same through a second cache the crash checker's way (`Engine::lay` and
/// `Engine::crash_during_recovery`, src/crash/engine.rs): the image it is given has junk over its data
/// area (the checker's overlay) and its home blocks are read through a view of the image; and
/// after each recovery, with a prefix of the plan's home writes shown through the view, it
/// makes what a whole recovery of the image with that prefix made makes (every other step
/// through `recover_cached_again`, whose `None` stands for the last plan; one step in four with
/// a prefix block that is not the plan's, which it must not take for the last plan), and the
/// next recovery, told of those blocks again, reads them from the image.
#[test]
fn recovery_from_the_scan_cache_equals_a_whole_recovery_after_every_write() {
    use locsim::crash::incremental::hoop::{recover_cached, recover_cached_again, recover_cached_with, Cache};
    use locsim::pmem::read_block;
    use locsim::rng::Rng;
    let (layout, mut img) = two_regions();
    let cap = (layout.log_region(0).1 - 1) / 2;
    let mut cache = Cache::new(&layout);
    let mut laid = Cache::new(&layout);
    let data = layout.data_bytes as usize;
    let mut prefixes = 0;
    let mut rng = Rng::new(7);
    // Per region: the next ring position, sequence number and slice index; the global order.
    let mut next = [(0u64, 1u64, 0u32); 2];
    let mut order = 1u64;
    let mut checked_ok = 0;
    // Second recoveries that knew the plan was made again, and that made another one.
    let (mut known_again, mut made_again) = (0, 0);
    for step in 0..4000 {
        let c = rng.below(2) as usize;
        let (log0, _) = layout.log_region(c);
        let (pos, seq, index) = next[c];
        let written: Vec<BlockId> = match rng.below(20) {
            // Move the head to the next position (past what is written, as GC does).
            0 => {
                let head = LogHead { format: LogFormat::Hoop, start: pos, start_seq: seq };
                img[log0.range()].copy_from_slice(&head.encode_home(order));
                next[c].2 = 0;
                vec![log0]
            }
            // Overwrite a random slice (stale or torn).
            1 | 2 => {
                let at = BlockId(log0.0 + 1 + rng.below(2 * cap));
                img[at.range()][rng.below(64) as usize] ^= 1 + rng.below(255) as u8;
                vec![at]
            }
            // A home block changes (garbage collection writing home, or a torn home write):
            // recovery reads the home blocks it replays into.
            4 | 5 => {
                let b = BlockId(rng.below(16));
                img[b.range()][rng.below(64) as usize] ^= 1 + rng.below(255) as u8;
                vec![b]
            }
            // Start the region's log over from an earlier position.
            3 if pos > 0 => {
                next[c].0 = pos - rng.below(pos.min(6)) - 1;
                next[c].2 = 0;
                vec![]
            }
            _ => {
                let commit = rng.chance(0.5);
                let n = 1 + rng.below(8) as usize;
                let words: Vec<(u32, u64)> = (0..n).map(|_| (rng.below(128) as u32, rng.next_u64())).collect();
                put(&layout, &mut img, c, pos % cap, (seq, order, index, commit), &words);
                next[c] = if commit { (pos + 1, seq + 1, 0) } else { (pos + 1, seq, index + 1) };
                if commit {
                    order += 1;
                }
                let at = BlockId(log0.0 + 1 + 2 * (pos % cap));
                vec![at, BlockId(at.0 + 1)]
            }
        };
        for &b in &written {
            cache.land(&layout, b);
            laid.land(&layout, b);
        }
        let whole = recovery::recover(Some(LogFormat::Hoop), &layout, &img);
        assert_eq!(recover_cached(&layout, &img, &mut cache), whole, "step {step}");
        let mut shown = img.clone();
        shown[..data].iter_mut().for_each(|x| *x = rng.next_u64() as u8);
        let plan = recover_cached_with(&layout, &shown, &mut laid, |b| read_block(&img, b));
        assert_eq!(plan, whole, "step {step}, through a view");
        if let Ok(plan) = plan {
            let redo = plan.writes.iter().take_while(|(b, _)| layout.is_data(*b)).count();
            let mut prefix = plan.writes[..rng.below(redo as u64 + 1) as usize].to_vec();
            // One step in four, one of the prefix's blocks is not what the plan wrote (a torn
            // redo write): the second recovery must see it.
            if step % 4 == 1 && !prefix.is_empty() {
                let j = rng.below(prefix.len() as u64) as usize;
                prefix[j].1[rng.below(64) as usize] ^= 1 + rng.below(255) as u8;
            }
            let mut cut = img.clone();
            recovery::apply(&mut cut, &prefix);
            for (b, _) in &prefix {
                laid.land(&layout, *b);
            }
            let view = |b: BlockId| match prefix.iter().find(|(x, _)| *x == b) {
                Some((_, d)) => *d,
                None => read_block(&img, b),
            };
            let expect = recovery::recover(Some(LogFormat::Hoop), &layout, &cut);
            // Every other step the checker's way (`Recoverer::same_again`): `laid`'s
            // last plan is `plan`, and `None` says it was made again.
            let again = if step % 2 == 0 {
                recover_cached_with(&layout, &shown, &mut laid, view)
            } else {
                let again = recover_cached_again(&layout, &shown, &mut laid, view);
                known_again += usize::from(again == Ok(None));
                made_again += usize::from(matches!(again, Ok(Some(_))) && expect.as_ref() != Ok(&plan));
                again.map(|p| p.unwrap_or_else(|| plan.clone()))
            };
            assert_eq!(again, expect, "step {step}, after a prefix");
            for (b, _) in &prefix {
                laid.land(&layout, *b);
            }
            prefixes += usize::from(!prefix.is_empty());
        }
        checked_ok += whole.is_ok_and(|p| p.redone_txs > 0) as u32;
    }
    assert!(checked_ok > 1000, "most steps recover transactions ({checked_ok})");
    assert!(prefixes > 1000, "most steps recover again after a prefix ({prefixes})");
    assert!(known_again > 500 && made_again > 100, "both ways of the second recovery ({known_again}, {made_again})");
}
