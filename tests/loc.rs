//! LOC-WAL (Speculative Persistence): crash safety across speculation degrees and abort rates,
//! the negative controls, recovery of hand-built logs (named as sentences), and the
//! multi-versioned cache at work.

mod common;

use common::*;
use locsim::crash::{check, CrashSpec};
use locsim::log::ec::{BlkTag, Meta, DATA_SLOTS};
use locsim::log::head::{LogFormat, LogHead};
use locsim::log::loc::{encode, Pair};
use locsim::pmem::Layout;
use locsim::protocol::{Bug, ProtocolKind::LocWal};
use locsim::recovery;
use locsim::runner::execute;
use locsim::types::BlockId;
use locsim::workload::WorkloadKind;

fn crash(
    workload: WorkloadKind,
    sd: u32,
    abort_rate: f64,
    crashes: u64,
    bug: Option<Bug>,
) -> locsim::crash::CrashReport {
    let sdset = format!("loc.speculation_degree={sd}");
    let mut run =
        spec(small_cfg(&[&sdset, "workload.hash.buckets=4096", "workload.hash.key_space=8192"]), LocWal, 300, 7, bug);
    run.workload = workload;
    run.abort_rate = abort_rate;
    check(&CrashSpec { exhaustive: crashes == 0, ..CrashSpec::new(run, crashes) }).unwrap()
}

#[test]
fn every_speculation_degree_recovers_with_and_without_aborts() {
    for sd in [1, 4, 16, 32] {
        for ar in [0.0, 0.1] {
            for w in [WorkloadKind::Sps, WorkloadKind::Hash] {
                let r = crash(w, sd, ar, 400, None);
                assert_eq!(r.violations, 0, "sd {sd} abort rate {ar} {w:?}: {:?}", r.first_violation);
                assert!(r.crash_points >= 400);
            }
        }
    }
}

#[test]
fn exhaustive_crash_points_on_a_short_run_recover() {
    let r = crash(WorkloadKind::Hash, 4, 0.1, 0, None);
    assert_eq!(r.violations, 0, "{:?}", r.first_violation);
    assert_eq!(r.crash_points, r.candidate_crash_cycles);
}

#[test]
fn every_injected_bug_is_caught() {
    // The cross-core bug (`dependent-before-source`) is caught on N cores: tests/multicore.rs.
    for bug in LocWal.bugs().iter().filter(|b| b.min_cores() == 1) {
        let r = crash(WorkloadKind::Hash, 16, 0.0, 600, Some(*bug));
        assert!(r.violations > 0, "{} not caught", bug.name());
    }
}

#[test]
fn coalescing_versions_and_rescues_happen_and_are_counted() {
    // Hash updates hit the same buckets across transactions: versions are kept, coalesced at
    // commit, rescued at aborts; a 2-way LLC overflows versions.
    let mut s = spec(small_cfg(&["workload.hash.buckets=256", "workload.hash.key_space=512"]), LocWal, 400, 3, None);
    s.workload = WorkloadKind::Hash;
    s.abort_rate = 0.2;
    s.record = false;
    let c = execute(&s).unwrap().result.protocol_counters;
    assert!(c["coalesced_blocks"] > 100, "{c:?}");
    assert!(c["dependency_pairs_written"] > 10, "{c:?}");
    assert!(c["rescued_blocks"] > 0, "{c:?}");
    assert_eq!(c["windows"], (400 * 8 / 10) / 16, "windows of 16 committed txs: {c:?}");
    s.cfg = small_cfg(&[
        "workload.hash.buckets=256",
        "workload.hash.key_space=512",
        "llc.size_bytes=8192",
        "llc.ways=2",
        "l2.size_bytes=4096",
        "l2.ways=2",
        "l1.size_bytes=2048",
        "l1.ways=1",
    ]);
    let c = execute(&s).unwrap().result.protocol_counters;
    assert!(c["version_overflows"] > 0, "{c:?}");
    s.record = true;
    let r = check(&CrashSpec::new(s, 600)).unwrap();
    assert_eq!(r.violations, 0, "overflowing versions: {:?}", r.first_violation);
}

#[test]
fn a_larger_window_writes_less() {
    let traffic = |sd: u32| {
        let mut s = spec(small_cfg(&[&format!("loc.speculation_degree={sd}")]), LocWal, 3000, 5, None);
        s.workload = WorkloadKind::Hash;
        s.record = false;
        execute(&s).unwrap().result.mem_write_bytes
    };
    let (t1, t16) = (traffic(1), traffic(16));
    assert!(t16 < t1, "coalescing: sd 16 wrote {t16} bytes, sd 1 {t1}");
}

// ---- recovery of hand-built logs ----

const DATA_BLOCKS: u64 = 64;

fn layout() -> Layout {
    Layout::new(DATA_BLOCKS * 64, 64 * 1024)
}

/// A log image: `groups[i]` = the tags of group SID i (data slots hold `[home as u8; 64]`,
/// or the pairs for pair slots).
fn image(groups: &[Vec<(BlkTag, Vec<Pair>)>], start_seq: u64) -> Vec<u8> {
    let l = layout();
    let mut img = vec![0u8; l.total_bytes() as usize];
    let log0 = l.log_block0();
    img[log0.range()].copy_from_slice(&LogHead { format: LogFormat::Loc, start: 0, start_seq }.encode());
    for (sid, g) in groups.iter().enumerate() {
        let g0 = log0.0 + 1 + 8 * sid as u64;
        let mut tags = [None; DATA_SLOTS];
        for (slot, (t, pairs)) in g.iter().enumerate() {
            tags[slot] = Some(*t);
            let data = if t.pair { encode(pairs) } else { [t.addr as u8 + 100; 64] };
            img[BlockId(g0 + slot as u64).range()].copy_from_slice(&data);
        }
        img[BlockId(g0 + 7).range()].copy_from_slice(&Meta { sid: sid as u64, tags }.encode());
    }
    img
}

fn data(tx: u8, home: u32, cnt: u16) -> (BlkTag, Vec<Pair>) {
    (BlkTag { addr: home, tx_cnt: cnt, tx_id: tx, ..Default::default() }, vec![])
}

fn pairs(ps: &[Pair]) -> (BlkTag, Vec<Pair>) {
    (BlkTag { addr: ps.len() as u32, pair: true, ..Default::default() }, ps.to_vec())
}

/// Home blocks recovery redoes, in order.
fn redone(img: &[u8]) -> Vec<u64> {
    let plan = recovery::recover(LocWal.log_format(), &layout(), img).unwrap();
    plan.writes.iter().map(|(b, _)| b.0).filter(|&b| b < DATA_BLOCKS).collect()
}

#[test]
fn a_transaction_whose_coalesced_blocks_went_to_a_committed_later_one_is_committed() {
    // T1 wrote 5 and 6; 6 was coalesced into T2, which logged 6 and 7.
    let g = vec![vec![data(1, 5, 2), data(2, 6, 0), data(2, 7, 2), pairs(&[Pair { tx: 1, ty: 2, n: 1 }])]];
    assert_eq!(redone(&image(&g, 1)), vec![5, 6, 7]);
}

#[test]
fn a_transaction_depending_on_a_later_uncommitted_one_is_not_committed_and_cuts_the_rest() {
    // Same, but T2's last block (with its TxCnt) never became durable.
    let g = vec![vec![data(1, 5, 2), data(2, 6, 0), pairs(&[Pair { tx: 1, ty: 2, n: 1 }])]];
    assert_eq!(redone(&image(&g, 1)), Vec::<u64>::new());
}

#[test]
fn pairs_are_resolved_from_the_newest_transaction_to_the_oldest() {
    // A chain: T1 -> T2 -> T3, each coalesced into the next; only T3 logged the block.
    let g = vec![vec![
        data(3, 9, 1),
        pairs(&[Pair { tx: 1, ty: 2, n: 1 }, Pair { tx: 2, ty: 3, n: 1 }, Pair::count(1, 1), Pair::count(2, 1)]),
    ]];
    assert_eq!(redone(&image(&g, 1)), vec![9]);
}

#[test]
fn an_aborted_transaction_in_the_window_is_skipped_without_cutting_the_rest() {
    let g = vec![vec![data(1, 5, 1), data(2, 6, 0), data(3, 7, 1), pairs(&[Pair::aborted(2)])]];
    assert_eq!(redone(&image(&g, 1)), vec![5, 7]);
    // Without its abort record, T2's lone block is an incomplete transaction: T3 is cut.
    let g = vec![vec![data(1, 5, 1), data(2, 6, 0), data(3, 7, 1)]];
    assert_eq!(redone(&image(&g, 1)), vec![5]);
}

#[test]
fn a_transaction_id_with_no_trace_in_the_log_cuts_the_rest() {
    // T2 logged nothing durable (its count record was not written yet): T3 must not be redone.
    let g = vec![vec![data(1, 5, 1), data(3, 7, 1)]];
    assert_eq!(redone(&image(&g, 1)), vec![5]);
}

#[test]
fn transaction_ids_wrap_around_relative_to_the_head() {
    let g = vec![vec![data(255, 5, 1), data(0, 6, 1), data(1, 7, 1)]];
    assert_eq!(redone(&image(&g, 255)), vec![5, 6, 7]);
    assert!(
        recovery::recover(LocWal.log_format(), &layout(), &image(&g, 100)).is_err(),
        "TxIDs 155 away from the head"
    );
}

#[test]
fn recovering_twice_gives_the_same_image() {
    let g = vec![vec![data(1, 5, 2), data(2, 6, 0), data(2, 7, 2), pairs(&[Pair { tx: 1, ty: 2, n: 1 }])]];
    let mut img = image(&g, 1);
    let plan = recovery::recover(LocWal.log_format(), &layout(), &img).unwrap();
    for cut in 0..=plan.writes.len() {
        let mut partial = img.clone();
        recovery::apply(&mut partial, &plan.writes[..cut]);
        let again = recovery::recover(LocWal.log_format(), &layout(), &partial).unwrap();
        recovery::apply(&mut partial, &again.writes);
        recovery::apply(&mut img.clone(), &plan.writes);
        let mut full = img.clone();
        recovery::apply(&mut full, &plan.writes);
        assert_eq!(partial[..DATA_BLOCKS as usize * 64], full[..DATA_BLOCKS as usize * 64], "crash after {cut} writes");
    }
    recovery::apply(&mut img, &plan.writes);
    assert_eq!(redone(&img), Vec::<u64>::new(), "the head moved past the recovered groups");
}

/// The torn-write fix `loc.two_slot_head` on four cores (docs/faults.md, "LOC-WAL on more than
/// one core"): each region's head moves `start`, `start_seq` and `home_below` at a truncation,
/// so with 8-byte atomicity a torn plain head makes a window's TxIDs fall outside the 128 it
/// allows; in the two-slot form with `home_below` every torn head reads as the old or the new.
#[test]
fn a_torn_region_head_on_four_cores_is_survived_with_two_slots() {
    for (w, txs) in [(WorkloadKind::Sps, 1500), (WorkloadKind::Hash, 800)] {
        let mut found = 0;
        for head in ["loc.two_slot_head=false", "loc.two_slot_head=true"] {
            let sets = ["machine.cores=4", "workload.sps.entries=4096", "log.meta_checksum=true", head];
            let mut cs = crash_spec(LocWal, w, &sets, txs, 0.0, None, 600);
            cs.atomicity = 8;
            let r = check(&cs).unwrap();
            assert!(r.torn_states > 0, "{w:?} {head}: torn states checked");
            if head.ends_with("true") {
                assert_eq!(r.violations, 0, "{w:?} {head}: {:?}", r.first_violation);
            } else {
                found = r.violations;
            }
        }
        assert!(found > 0, "{w:?}: the plain head tears (else this test shows nothing)");
    }
}
