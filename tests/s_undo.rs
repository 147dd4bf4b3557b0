//! S-Undo (software undo logging as PMDK does it): crash safety on every workload shape with and
//! without aborts, on one core and on four, under every persistence domain; the negative
//! controls; the writes a transaction makes; and recovery of hand-built undo logs (named as
//! sentences).

mod common;

use common::*;
use locsim::crash::{check, CrashReport};
use locsim::log::head::{LogFormat, LogHead};
use locsim::log::sundo::{entry_block, Entry, ENTRY_BYTES};
use locsim::pmem::Layout;
use locsim::protocol::{Bug, ProtocolKind::SUndo};
use locsim::recovery;
use locsim::runner::execute;
use locsim::types::BlockId;
use locsim::workload::WorkloadKind;

fn crash(w: WorkloadKind, extra: &[&str], txs: u64, ar: f64, bug: Option<Bug>) -> CrashReport {
    check(&crash_spec(SUndo, w, extra, txs, ar, bug, 500)).unwrap()
}

#[test]
fn s_undo_recovers_with_and_without_aborts_on_one_core_and_on_four() {
    for cores in ["machine.cores=1", "machine.cores=4"] {
        for ar in [0.0, 0.1] {
            for w in [WorkloadKind::Sps, WorkloadKind::Hash, WorkloadKind::BTree] {
                let r = crash(w, &[cores], 200, ar, None);
                assert_eq!(r.violations, 0, "{w:?} {cores} abort rate {ar}: {:?}", r.first_violation);
            }
        }
    }
}

#[test]
fn s_undo_recovers_under_every_persistence_domain() {
    for d in ["memory", "adr", "eadr", "bbb", "gpf", "gpf-no-writeback"] {
        let set = format!("machine.persist_domain={d}");
        for cores in ["machine.cores=1", "machine.cores=4"] {
            let r = crash(WorkloadKind::Hash, &[&set, cores], 150, 0.1, None);
            assert_eq!(r.violations, 0, "{d} {cores}: {:?}", r.first_violation);
        }
    }
}

/// A 16 KiB direct-mapped LLC and 20 swaps per transaction: lines stored to leave the cache
/// within the transaction, so they are home before commit, and an abort restores lines that
/// went home.
#[test]
fn lines_evicted_during_a_transaction_are_undone() {
    let tiny = ["l1.size_bytes=2048", "l2.size_bytes=8192", "llc.size_bytes=16384", "llc.ways=1"];
    let r = crash(WorkloadKind::Sps, &[&tiny[..], &["workload.sps.swaps_per_tx=20"]].concat(), 60, 0.2, None);
    assert_eq!(r.violations, 0, "{:?}", r.first_violation);
}

#[test]
fn an_sps_transaction_writes_two_entries_of_two_lines_its_two_lines_and_the_head() {
    let mut s = spec(small_cfg(&[]), SUndo, 1000, 11, None);
    s.record = false;
    let r = execute(&s).unwrap().result;
    let c = &r.protocol_counters;
    assert_eq!((c["undo_entries"], c["invalidations"], c["restored_lines"]), (2000, 1000, 0), "{c:?}");
    let by_kind = &r.mem_write_bytes_by_kind;
    assert_eq!(by_kind["log_data"], 1000 * 4 * 64, "{by_kind:?}");
    assert_eq!(by_kind["home"], 1000 * 2 * 64, "{by_kind:?}");
    assert_eq!(by_kind["log_head"], 1000 * 64, "{by_kind:?}");
    assert_eq!(by_kind["commit"] + by_kind["log_meta"], 0, "{by_kind:?}");
}

#[test]
fn every_injected_bug_is_caught() {
    // Replay: locsim crashtest --workload sps --protocol s-undo --inject-bug invalidate-before-flush
    for bug in [Bug::InvalidateBeforeFlush, Bug::UncheckedUndoEntry] {
        let r = crash(WorkloadKind::Sps, &[], 200, 0.0, Some(bug));
        assert!(r.violations > 0, "{} not caught", bug.name());
    }
    // Without the fence an entry is still issued before the store it protects, so with equal
    // write latencies it is durable first unless its bank is busier: the line must leave the
    // cache at once (a direct-mapped 16 KiB LLC) and the entry's write take longer than the
    // line's (the PCM device, whose latency grows with the cells a write programs). Every
    // crash point of a short run.
    let sets = [
        "l1.size_bytes=2048",
        "l2.size_bytes=8192",
        "l2.ways=1",
        "llc.size_bytes=16384",
        "llc.ways=1",
        "memory.device=pcm",
        "workload.sps.swaps_per_tx=20",
    ];
    for (bug, caught) in [(None, false), (Some(Bug::UndoWithoutFence), true)] {
        let mut cs = crash_spec(SUndo, WorkloadKind::Sps, &sets, 200, 0.0, bug, 1);
        cs.exhaustive = true;
        let r = check(&cs).unwrap();
        assert_eq!(r.violations > 0, caught, "{bug:?}: {r:?}");
    }
}

/// Under 8-byte atomicity the first write to a slot never written may leave only some of its
/// units durable over zeros, its `gen` unit alone among them: with a zero check read as the
/// unchecked form, that is an entry of the running generation naming line 0 (128 violations in
/// this run); with the `nocheck` marker, no entry. Every point of a short run, with its torn
/// states.
#[test]
fn torn_entries_at_eight_byte_atomicity_are_no_entries() {
    let mut cs = crash_spec(SUndo, WorkloadKind::Sps, &["log.size_bytes=65536"], 100, 0.0, None, 1);
    cs.exhaustive = true;
    cs.atomicity = 8;
    let r = check(&cs).unwrap();
    assert_eq!((r.crash_points, r.violations), (1202, 0), "{:?}", r.first_violation);
    assert_eq!(r.torn_states, 53400);
}

fn image(layout: &Layout, gen: u64) -> Vec<u8> {
    let mut img = vec![0u8; layout.total_bytes() as usize];
    for (i, b) in img[..layout.data_bytes as usize].iter_mut().enumerate() {
        *b = (i / 64) as u8;
    }
    LogHead { format: LogFormat::SUndo, start: 0, start_seq: gen }.write_initial(layout, &mut img);
    img
}

fn put(img: &mut [u8], log0: BlockId, i: u64, e: &Entry) {
    let at = entry_block(log0, i).addr().0 as usize;
    img[at..at + ENTRY_BYTES].copy_from_slice(&e.encode());
}

fn entry(block: u64, gen: u64, fill: u8) -> Entry {
    Entry { home: block * 64, gen, old: [fill; 64], checked: true }
}

fn recovered(layout: &Layout, img: &[u8]) -> Vec<u8> {
    let plan = recovery::recover(Some(LogFormat::SUndo), layout, img).unwrap();
    let mut out = img.to_vec();
    recovery::apply(&mut out, &plan.writes);
    out
}

#[test]
fn recovery_rolls_back_the_valid_generation_oldest_copy_last_and_invalidates_it() {
    let layout = Layout::new(64 * 64, 64 * 64);
    let log0 = layout.log_block0();
    let mut img = image(&layout, 5);
    put(&mut img, log0, 0, &entry(9, 5, 0xA0));
    put(&mut img, log0, 1, &entry(12, 5, 0xA1));
    put(&mut img, log0, 2, &entry(9, 5, 0xEE));
    let out = recovered(&layout, &img);
    assert_eq!(out[BlockId(9).range()], [0xA0; 64], "the oldest copy wins");
    assert_eq!(out[BlockId(12).range()], [0xA1; 64]);
    assert_eq!(out[BlockId(10).range()], [10; 64], "a line not logged is left");
    assert_eq!(LogHead::decode(&out[log0.range()]).unwrap().start_seq, 6, "the log is invalidated");
    assert_eq!(recovered(&layout, &out), out, "recovering the recovered image changes nothing");
}

#[test]
fn recovery_stops_at_an_earlier_generation_or_a_torn_entry() {
    let layout = Layout::new(64 * 64, 64 * 64);
    let log0 = layout.log_block0();
    let mut img = image(&layout, 5);
    // Entry 0 of the running generation, then an earlier generation's entry 1: only entry 0.
    put(&mut img, log0, 0, &entry(3, 5, 0x33));
    put(&mut img, log0, 1, &entry(4, 4, 0x44));
    put(&mut img, log0, 2, &entry(5, 5, 0x55));
    let out = recovered(&layout, &img);
    assert_eq!((out[BlockId(3).range()][0], out[BlockId(4).range()][0], out[BlockId(5).range()][0]), (0x33, 4, 5));
    // Entry 1 of the running generation with only its first line durable (its second line is
    // the earlier entry's): torn, so the scan stops there; entry 2 is not reached.
    let at = entry_block(log0, 1).addr().0 as usize;
    img[at..at + 64].copy_from_slice(&entry(4, 5, 0x4F).encode()[..64]);
    let out = recovered(&layout, &img);
    assert_eq!((out[BlockId(3).range()][0], out[BlockId(4).range()][0], out[BlockId(5).range()][0]), (0x33, 4, 5));
    // The same tear in the unchecked form is taken whole: the stale second line goes home.
    let unchecked = Entry { checked: false, ..entry(4, 5, 0x4F) };
    img[at..at + 64].copy_from_slice(&unchecked.encode()[..64]);
    let out = recovered(&layout, &img);
    assert_eq!(out[BlockId(4).range()][..40], [0x4F; 40]);
    assert_eq!(out[BlockId(4).range()][40..], [0x44; 24], "the earlier entry's bytes");
}

#[test]
fn an_entry_naming_a_place_outside_the_data_area_or_inside_a_line_is_an_error() {
    let layout = Layout::new(64 * 64, 64 * 64);
    let log0 = layout.log_block0();
    for home in [64 * 64, 64 * 3 + 8] {
        let mut img = image(&layout, 5);
        put(&mut img, log0, 0, &Entry { home, ..entry(0, 5, 1) });
        let e = recovery::recover(Some(LogFormat::SUndo), &layout, &img).unwrap_err();
        assert!(e.starts_with(&format!("corrupt log at block {}:", entry_block(log0, 0).0)), "{e}");
    }
}
