//! Proteus: undo entries in a persistent log pending queue (LPQ) at the controller, spilled to
//! memory when it is full. Crash safety with and without aborts, with a queue small enough to
//! spill, under 8-byte write atomicity, the negative controls, and recovery of hand-built
//! images (named as sentences).

mod common;

use common::*;
use locsim::crash::{check, CrashReport};
use locsim::log::head::{LogFormat, LogHead};
use locsim::log::proteus::{self as fmt, EntryHeader};
use locsim::pmem::Layout;
use locsim::protocol::{Bug, ProtocolKind::Proteus};
use locsim::recovery;
use locsim::runner::execute;
use locsim::types::BlockId;
use locsim::workload::WorkloadKind;

/// An LPQ of 4 entries and 12 swaps per SPS transaction: every transaction spills.
const SMALL_LPQ: [&str; 2] = ["proteus.lpq_entries=4", "workload.sps.swaps_per_tx=12"];

fn crash(w: WorkloadKind, extra: &[&str], txs: u64, ar: f64, bug: Option<Bug>) -> CrashReport {
    check(&crash_spec(Proteus, w, extra, txs, ar, bug, 500)).unwrap()
}

#[test]
fn proteus_recovers_with_and_without_aborts() {
    for ar in [0.0, 0.1] {
        for w in [WorkloadKind::Sps, WorkloadKind::Hash] {
            let r = crash(w, &[], 300, ar, None);
            assert_eq!(r.violations, 0, "{w:?} abort rate {ar}: {:?}", r.first_violation);
        }
    }
}

#[test]
fn entries_spilled_from_a_full_queue_recover_also_under_8_byte_atomicity() {
    let r = crash(WorkloadKind::Sps, &SMALL_LPQ, 60, 0.2, None);
    assert_eq!(r.violations, 0, "{:?}", r.first_violation);
    let mut s = crash_spec(Proteus, WorkloadKind::Sps, &SMALL_LPQ, 60, 0.2, None, 500);
    s.atomicity = 8;
    let r = check(&s).unwrap();
    assert_eq!(r.violations, 0, "torn spilled headers fail their check: {:?}", r.first_violation);
    let mut s = spec(small_cfg(&SMALL_LPQ), Proteus, 20, 11, None);
    s.record = false;
    let c = execute(&s).unwrap().result.protocol_counters;
    assert!(c["lpq_spills"] > 15 * 20, "most of 24 entries per transaction spill: {c:?}");
}

#[test]
fn committed_entries_die_in_the_queue_and_never_reach_memory() {
    let mut s = spec(small_cfg(&[]), Proteus, 300, 5, None);
    s.record = false;
    let r = execute(&s).unwrap().result;
    let c = &r.protocol_counters;
    assert!(c["log_entries"] >= 600 && c["lpq_spills"] == 0, "{c:?}");
    assert_eq!(c["entries_dropped"], c["log_entries"]);
    assert_eq!(r.log_write_bytes, 0, "no log byte reaches memory: {r:?}");
}

#[test]
fn the_log_lookup_table_drops_repeated_logging_of_a_line() {
    let mut s = spec(small_cfg(&["workload.hash.buckets=4096", "workload.hash.key_space=8192"]), Proteus, 300, 5, None);
    s.workload = WorkloadKind::Hash;
    s.record = false;
    let c = execute(&s).unwrap().result.protocol_counters;
    assert!(c["llt_hits"] > 100, "{c:?}");
    let mut one = s.clone();
    one.cfg.proteus.llt_entries = 1;
    let c1 = execute(&one).unwrap().result.protocol_counters;
    assert!(c1["log_entries"] > c["log_entries"], "a one-line LLT logs more: {c1:?} vs {c:?}");
}

#[test]
fn every_injected_bug_is_caught() {
    for bug in [Bug::AckBeforeDurable, Bug::DropUncommittedEntry, Bug::StoreBeforeLogFlush] {
        let r = crash(WorkloadKind::Sps, &[], 300, 0.0, Some(bug));
        assert!(r.violations > 0, "{} not caught", bug.name());
    }
    assert!(Proteus.bugs().contains(&Bug::CommitDropsOtherCores));
    assert_eq!(Bug::CommitDropsOtherCores.min_cores(), 2, "caught by src/protocol/multicore_tests.rs");
}

fn image(layout: &Layout) -> Vec<u8> {
    let mut img = vec![0u8; layout.total_bytes() as usize];
    LogHead { format: LogFormat::Proteus, start: 0, start_seq: 0 }.write_regions(layout, &mut img);
    for c in 0..fmt::REGISTERS as usize {
        let b = BlockId(layout.nvllc_block0().0 + fmt::register_block(c));
        img[b.range()].copy_from_slice(&fmt::encode_register(0));
    }
    img
}

fn put_entry(img: &mut [u8], header: BlockId, data_block: BlockId, h: EntryHeader, data: [u8; 64]) {
    img[data_block.range()].copy_from_slice(&data);
    img[header.range()].copy_from_slice(&h.encode(&data));
}

#[test]
fn recovery_writes_back_the_oldest_entry_of_the_unfinished_transaction_only() {
    let layout = Layout::new(64 * 64, 64 * 1024).with_nvllc(fmt::bytes(4));
    let mut img = image(&layout);
    let nv = |off: u64| BlockId(layout.nvllc_block0().0 + off);
    let (log0, _) = layout.log_region(0);
    let e = |seq, index, home| EntryHeader { core: 0, seq, index, home };
    // Core 0 finished transaction 1; transaction 2 logged block 5 twice (index 0 spilled to
    // memory, index 2 in the LPQ after the LLT forgot it) and block 6 once; a dead entry of
    // transaction 1 still sits in slot 3.
    img[nv(fmt::register_block(0)).range()].copy_from_slice(&fmt::encode_register(1));
    let spill = |p| (BlockId(log0.0 + fmt::spill_header_block(p)), BlockId(log0.0 + fmt::spill_data_block(p)));
    let (h, d) = spill(0);
    put_entry(&mut img, h, d, e(2, 0, 5), [0xA0; 64]);
    let slot = |s| (nv(fmt::slot_header_block(s)), nv(fmt::slot_data_block(s)));
    let (h, d) = slot(0);
    put_entry(&mut img, h, d, e(2, 2, 5), [0xA2; 64]);
    let (h, d) = slot(1);
    put_entry(&mut img, h, d, e(2, 1, 6), [0xB1; 64]);
    let (h, d) = slot(3);
    put_entry(&mut img, h, d, e(1, 0, 7), [0xC0; 64]);
    let plan = recovery::recover(Some(LogFormat::Proteus), &layout, &img).unwrap();
    let want = vec![(BlockId(5), [0xA0; 64]), (BlockId(6), [0xB1; 64]), (nv(0), fmt::encode_register(2))];
    assert_eq!(plan.writes, want);
    // Recovering the recovered image changes nothing; a torn spilled header is no entry.
    recovery::apply(&mut img, &plan.writes);
    assert!(recovery::recover(Some(LogFormat::Proteus), &layout, &img).unwrap().writes.is_empty());
    img[nv(0).range()].copy_from_slice(&fmt::encode_register(1));
    let (h, _) = spill(0);
    img[h.0 as usize * 64 + 24] ^= 1;
    let plan = recovery::recover(Some(LogFormat::Proteus), &layout, &img).unwrap();
    assert_eq!(plan.writes[0], (BlockId(5), [0xA2; 64]), "the torn entry is not used");
}

#[test]
fn a_log_region_that_is_not_proteus_is_corrupt() {
    let layout = Layout::new(64 * 64, 64 * 1024).with_nvllc(fmt::bytes(4));
    let mut img = image(&layout);
    img[layout.log_block0().range()].fill(0);
    let e = recovery::recover(Some(LogFormat::Proteus), &layout, &img).unwrap_err();
    assert!(e.contains("not a Proteus log region head"), "{e}");
}
