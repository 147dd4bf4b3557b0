//! ATOM (hardware undo logging): crash safety on every workload shape with and without aborts,
//! the negative controls, and recovery of hand-built undo logs (named as sentences).

mod common;

use common::*;
use locsim::crash::{check, CrashReport};
use locsim::log::atom::{entry_block, meta_block, Meta, ENTRIES};
use locsim::log::head::{LogFormat, LogHead};
use locsim::pmem::Layout;
use locsim::protocol::{Bug, ProtocolKind::Atom};
use locsim::recovery;
use locsim::runner::execute;
use locsim::types::BlockId;
use locsim::workload::WorkloadKind;

/// A 16 KiB LLC: transactions' lines are evicted and go home, held back, before commit.
const TINY: [&str; 3] = ["l1.size_bytes=2048", "l2.size_bytes=8192", "llc.size_bytes=16384"];

fn crash(w: WorkloadKind, extra: &[&str], txs: u64, ar: f64, bug: Option<Bug>) -> CrashReport {
    check(&crash_spec(Atom, w, extra, txs, ar, bug, 500)).unwrap()
}

#[test]
fn atom_recovers_with_and_without_aborts() {
    for ar in [0.0, 0.1] {
        for w in [WorkloadKind::Sps, WorkloadKind::Hash, WorkloadKind::BTree] {
            let r = crash(w, &[], 200, ar, None);
            assert_eq!(r.violations, 0, "{w:?} abort rate {ar}: {:?}", r.first_violation);
        }
    }
}

#[test]
fn lines_evicted_during_a_transaction_go_home_held_back_and_recover() {
    let r = crash(WorkloadKind::Sps, &[TINY[0], TINY[1], TINY[2], "workload.sps.swaps_per_tx=150"], 40, 0.2, None);
    assert_eq!(r.violations, 0, "{:?}", r.first_violation);
    let mut s = spec(small_cfg(&[TINY[0], TINY[1], TINY[2], "workload.sps.swaps_per_tx=150"]), Atom, 20, 11, None);
    s.record = false;
    let c = execute(&s).unwrap().result.protocol_counters;
    assert!(c["evicted_home"] > 100, "{c:?}");
    assert!(c["meta_writes"] >= c["undo_entries"] / ENTRIES as u64, "{c:?}");
}

#[test]
fn every_injected_bug_is_caught() {
    // Replay: locsim crashtest --workload sps --protocol atom --inject-bug in-place-before-undo
    for bug in [Bug::AckBeforeDurable, Bug::InPlaceBeforeUndo, Bug::FreeLogBeforeData] {
        let r = crash(WorkloadKind::Sps, &[], 200, 0.0, Some(bug));
        assert!(r.violations > 0, "{} not caught", bug.name());
    }
}

fn image(layout: &Layout) -> Vec<u8> {
    let mut img = vec![0u8; layout.total_bytes() as usize];
    for (i, b) in img[..layout.data_bytes as usize].iter_mut().enumerate() {
        *b = (i / 64) as u8;
    }
    LogHead { format: LogFormat::Atom, start: 0, start_seq: 3 }.write_initial(layout, &mut img);
    img
}

#[test]
fn recovery_undoes_the_transaction_the_head_names_oldest_copy_last() {
    let layout = Layout::new(64 * 64, 64 * 64);
    let log0 = layout.log_block0();
    let mut img = image(&layout);
    // Transaction 3 logged 13 entries: a full group and one more. Block 5 appears twice: its
    // older copy (0xA0) must be what is left.
    let mut homes: Vec<u32> = (10..22).collect();
    homes[0] = 5;
    img[meta_block(log0, 0).range()].copy_from_slice(&Meta::encode_parts(3, 0, &homes));
    for j in 0..ENTRIES {
        img[entry_block(log0, 0, j).range()].fill(0xA0 + j as u8);
    }
    img[meta_block(log0, 1).range()].copy_from_slice(&Meta::encode_parts(3, 1, &[5]));
    img[entry_block(log0, 1, 0).range()].fill(0xEE);
    let plan = recovery::recover(Some(LogFormat::Atom), &layout, &img).unwrap();
    let mut out = img.clone();
    recovery::apply(&mut out, &plan.writes);
    assert_eq!(out[BlockId(5).range()], [0xA0; 64], "the oldest copy wins");
    assert_eq!(out[BlockId(21).range()], [0xAB; 64]);
    assert_eq!(LogHead::decode(&out[log0.range()]).unwrap().start_seq, 4, "the log is freed");
    // Recovering the recovered image changes nothing more.
    let again = recovery::recover(Some(LogFormat::Atom), &layout, &out).unwrap();
    let mut out2 = out.clone();
    recovery::apply(&mut out2, &again.writes);
    assert_eq!(out2, out);
}

#[test]
fn recovery_ignores_groups_of_an_older_transaction_and_after_a_partial_group() {
    let layout = Layout::new(64 * 64, 64 * 64);
    let log0 = layout.log_block0();
    let mut img = image(&layout);
    // An older transaction's group (seq 2): its log was freed, it is not undone.
    img[meta_block(log0, 0).range()].copy_from_slice(&Meta::encode_parts(2, 0, &[7]));
    img[entry_block(log0, 0, 0).range()].fill(0x77);
    let plan = recovery::recover(Some(LogFormat::Atom), &layout, &img).unwrap();
    assert!(plan.writes.iter().all(|(b, _)| !layout.is_data(*b)), "{:?}", plan.writes.len());
    // A partial group of transaction 3, then a stale full-looking group: only the first counts.
    img[meta_block(log0, 0).range()].copy_from_slice(&Meta::encode_parts(3, 0, &[7]));
    img[meta_block(log0, 1).range()].copy_from_slice(&Meta::encode_parts(3, 1, &[8]));
    let plan = recovery::recover(Some(LogFormat::Atom), &layout, &img).unwrap();
    let data: Vec<u64> = plan.writes.iter().filter(|(b, _)| layout.is_data(*b)).map(|(b, _)| b.0).collect();
    assert_eq!(data, vec![7]);
}

#[test]
fn a_metadata_line_naming_a_block_outside_the_data_area_is_an_error() {
    let layout = Layout::new(64 * 64, 64 * 64);
    let log0 = layout.log_block0();
    let mut img = image(&layout);
    img[meta_block(log0, 0).range()].copy_from_slice(&Meta::encode_parts(3, 0, &[64]));
    assert!(recovery::recover(Some(LogFormat::Atom), &layout, &img).is_err());
}

/// The torn-write fix `atom.checked_meta` (docs/faults.md "ATOM: the metadata line"): the replayed
/// torn state (only the `seq` unit of a group's metadata line durable, over an earlier
/// transaction's line) is a `prefix` violation in the paper's format and recovers with the fix.
#[test]
fn a_torn_metadata_line_undoes_stale_entries_unless_lines_are_checked() {
    for (sets, want) in [(&[][..], 1), (&["atom.checked_meta=true"][..], 0)] {
        let r = torn_replay(Atom, WorkloadKind::Sps, sets, 2000, false, 18597);
        assert_eq!((r.torn_states, r.violations), (1, want), "{sets:?}: {:?}", r.first_violation);
        if want == 1 {
            assert_eq!(r.first_violation.unwrap().kind, "prefix");
        }
    }
}

/// In the checked form a partial group is closed when its line is written: a transaction whose
/// lines go home before its group fills starts a new group each time, and recovery reads past
/// the partial groups (a 16 KiB direct-mapped LLC and 150 swaps per transaction force lines of
/// the open group home mid-way).
#[test]
fn checked_metadata_lines_close_partial_groups_and_recover() {
    let big = [TINY[0], TINY[1], TINY[2], "llc.ways=1", "workload.sps.swaps_per_tx=150"];
    let checked = [&big[..], &["atom.checked_meta=true"]].concat();
    let r = crash(WorkloadKind::Sps, &checked, 40, 0.2, None);
    assert_eq!(r.violations, 0, "{:?}", r.first_violation);
    let meta_writes = |sets: &[&str]| {
        let mut s = spec(small_cfg(sets), Atom, 20, 11, None);
        s.record = false;
        let c = execute(&s).unwrap().result.protocol_counters;
        (c["meta_writes"], c["undo_entries"])
    };
    let (plain, checked) = (meta_writes(&big), meta_writes(&checked));
    assert_eq!(plain.1, checked.1, "the same entries");
    // The paper's form rewrites a partial group's line each time another of its lines goes
    // home; the checked form writes each line once and closes the group (618 against 545).
    assert!(checked.0 < plain.0, "partial groups closed, not rewritten: {plain:?} {checked:?}");
    let r = crash(WorkloadKind::Sps, &["atom.checked_meta=true"], 200, 0.0, Some(Bug::InPlaceBeforeUndo));
    assert!(r.violations > 0, "the negative control is still caught with the fix");
}
