//! Kiln and LOC-Kiln: the NV-LLC is part of the durable image. Crash safety with and without
//! aborts, transactions that do not fit the LLC (fallback log), the negative controls, and
//! recovery of hand-built NV-LLC states (named as sentences).

mod common;

use common::*;
use locsim::crash::{check, CrashReport};
use locsim::log::head::{LogFormat, LogHead};
use locsim::log::nvllc::{self, Register};
use locsim::pmem::Layout;
use locsim::protocol::{Bug, ProtocolKind, ProtocolKind::Kiln, ProtocolKind::LocKiln};
use locsim::recovery;
use locsim::runner::execute;
use locsim::types::BlockId;
use locsim::workload::WorkloadKind;

/// A 16 KiB LLC and 150 swaps per SPS transaction: transactions overflow into the fallback log.
const TINY: [&str; 4] =
    ["l1.size_bytes=2048", "l2.size_bytes=8192", "llc.size_bytes=16384", "workload.sps.swaps_per_tx=150"];

fn crash(p: ProtocolKind, w: WorkloadKind, extra: &[&str], txs: u64, ar: f64, bug: Option<Bug>) -> CrashReport {
    check(&crash_spec(p, w, extra, txs, ar, bug, 500)).unwrap()
}

/// A run without a record (for its counters and cycles): `w` under `p` on [`small_cfg`] with
/// `sets`.
fn run(p: ProtocolKind, w: WorkloadKind, sets: &[&str], txs: u64, seed: u64) -> locsim::runner::RunResult {
    let mut s = spec(small_cfg(sets), p, txs, seed, None);
    s.workload = w;
    s.record = false;
    execute(&s).unwrap().result
}

#[test]
fn kiln_and_loc_kiln_recover_with_and_without_aborts() {
    for p in [Kiln, LocKiln] {
        for ar in [0.0, 0.1] {
            for w in [WorkloadKind::Sps, WorkloadKind::Hash] {
                let r = crash(p, w, &[], 300, ar, None);
                assert_eq!(r.violations, 0, "{} {w:?} abort rate {ar}: {:?}", p.name(), r.first_violation);
            }
        }
    }
}

#[test]
fn transactions_that_do_not_fit_the_llc_fall_back_to_the_log_and_recover() {
    for p in [Kiln, LocKiln] {
        let r = crash(p, WorkloadKind::Sps, &TINY, 40, 0.2, None);
        assert_eq!(r.violations, 0, "{}: {:?}", p.name(), r.first_violation);
        let c = run(p, WorkloadKind::Sps, &TINY, 20, 11).protocol_counters;
        assert!(c["fallback_log_blocks"] > 100, "{}: {c:?}", p.name());
    }
}

#[test]
fn every_injected_bug_is_caught() {
    for p in [Kiln, LocKiln] {
        let r = crash(p, WorkloadKind::Hash, &[], 300, 0.0, Some(Bug::AckBeforeDurable));
        assert!(r.violations > 0, "{} ack-before-durable not caught", p.name());
        let r = crash(p, WorkloadKind::Sps, &TINY, 40, 0.0, Some(Bug::EvictUncommittedHome));
        assert!(r.violations > 0, "{} evict-uncommitted-home not caught", p.name());
    }
}

#[test]
fn loc_kiln_keeps_versions_instead_of_writing_old_data_home() {
    let small_hash = ["workload.hash.buckets=256", "workload.hash.key_space=512"];
    let (k, lk) =
        (run(Kiln, WorkloadKind::Hash, &small_hash, 400, 3), run(LocKiln, WorkloadKind::Hash, &small_hash, 400, 3));
    assert!(k.protocol_counters["old_version_writebacks"] > 100, "{:?}", k.protocol_counters);
    assert_eq!(lk.protocol_counters["old_version_writebacks"], 0);
    assert!(lk.protocol_counters["versions_kept"] > 100, "{:?}", lk.protocol_counters);
    assert!(lk.protocol_counters["coalesced_blocks"] > 10, "{:?}", lk.protocol_counters);
    assert!(lk.cycles < k.cycles, "loose ordering: loc-kiln {} cycles, kiln {}", lk.cycles, k.cycles);
}

// ---- recovery of hand-built NV-LLC states ----

const DATA_BLOCKS: u64 = 16;
const SLOTS: usize = 8;

fn layout() -> Layout {
    Layout::new(DATA_BLOCKS * 64, 64 * 1024).with_nvllc(nvllc::bytes(SLOTS, 1))
}

/// An image whose NV-LLC holds `lines` (slot, home, seq, byte) under `reg`.
fn image(reg: Register, lines: &[(usize, u64, u64, u8)]) -> Vec<u8> {
    let l = layout();
    let mut img = vec![0u8; l.total_bytes() as usize];
    img[l.log_block0().range()].copy_from_slice(&LogHead { format: LogFormat::Kiln, start: 0, start_seq: 1 }.encode());
    let nv0 = l.nvllc_block0().0;
    img[BlockId(nv0).range()].copy_from_slice(&reg.encode());
    for &(s, home, seq, byte) in lines {
        img[BlockId(nv0 + nvllc::tag_block(s)).range()].copy_from_slice(&nvllc::encode_tag(Some((home, seq))));
        img[BlockId(nv0 + nvllc::data_block(s)).range()].fill(byte);
    }
    img
}

fn recovered(img: &[u8]) -> Vec<u8> {
    let mut img = img.to_vec();
    let plan = recovery::recover(Kiln.log_format(), &layout(), &img).unwrap();
    recovery::apply(&mut img, &plan.writes);
    img[..(DATA_BLOCKS * 64) as usize].to_vec()
}

#[test]
fn committed_lines_go_home_and_lines_past_the_register_are_discarded() {
    let img = image(Register { committed: 5, applied: 0 }, &[(0, 3, 5, 0xAA), (1, 4, 6, 0xBB)]);
    let d = recovered(&img);
    assert_eq!(d[3 * 64], 0xAA, "seq 5 is committed");
    assert_eq!(d[4 * 64], 0, "seq 6 is past the register: its data is not a committed version");
}

#[test]
fn the_newest_committed_version_of_a_block_wins() {
    // An older version (seq 4) kept in another way and the line that superseded it (seq 5).
    let img = image(Register { committed: 5, applied: 0 }, &[(2, 7, 5, 0x55), (6, 7, 4, 0x44)]);
    assert_eq!(recovered(&img)[7 * 64], 0x55);
    // Not yet registered: the older version is what survives.
    let img = image(Register { committed: 4, applied: 0 }, &[(2, 7, 5, 0x55), (6, 7, 4, 0x44)]);
    assert_eq!(recovered(&img)[7 * 64], 0x44);
}

#[test]
fn recovering_again_after_recovery_changes_nothing() {
    let img = image(Register { committed: 5, applied: 0 }, &[(0, 3, 5, 0xAA), (1, 3, 2, 0x11)]);
    let mut once = img.clone();
    let plan = recovery::recover(Kiln.log_format(), &layout(), &once).unwrap();
    recovery::apply(&mut once, &plan.writes);
    // Home changes after recovery (the system runs on); a second recovery must not undo it.
    once[3 * 64] = 0x77;
    let again = recovery::recover(Kiln.log_format(), &layout(), &once).unwrap();
    assert!(again.writes.iter().all(|(b, _)| b.0 >= DATA_BLOCKS), "no home writes: {:?}", again.redone_txs);
    for cut in 0..plan.writes.len() {
        let mut partial = img.clone();
        recovery::apply(&mut partial, &plan.writes[..cut]);
        assert_eq!(recovered(&partial), recovered(&img), "crash after {cut} recovery writes");
    }
}

#[test]
fn an_image_without_a_commit_register_is_an_error() {
    let mut img = image(Register { committed: 1, applied: 0 }, &[]);
    let nv0 = layout().nvllc_block0();
    img[nv0.range()].fill(0);
    assert!(recovery::recover(Kiln.log_format(), &layout(), &img).is_err());
}
