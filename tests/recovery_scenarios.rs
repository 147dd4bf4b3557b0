//! Recovery scenarios, each named as the sentence it checks, on the durable images of real
//! recorded runs of S-WAL and H-WAL. Crash cycles are chosen around specific writes.

mod common;
use common::*;
use locsim::pmem::WriteKind;
use locsim::protocol::ProtocolKind::{self, EcWal, HWal, SWal};
use locsim::recovery;
use locsim::types::Cycle;

const TXS: u64 = 300;

fn both(f: impl Fn(ProtocolKind)) {
    for p in [HWal, SWal] {
        f(p);
    }
}

#[test]
fn crash_before_any_part_of_a_commit_record_is_durable_recovers_the_previous_transaction() {
    both(|p| {
        let rec = record(&spec(small_cfg(&[]), p, TXS, 11, None));
        for (k, &(c, _)) in commit_span(&rec).iter().enumerate().step_by(37) {
            assert_same(
                &recovered_at(&rec, p, c - Cycle::new(1)),
                &s_k(&rec, k),
                &format!("{} tx {}", p.name(), k + 1),
            );
        }
    });
}

#[test]
fn crash_just_after_a_commit_record_is_durable_recovers_its_transaction() {
    both(|p| {
        let rec = record(&spec(small_cfg(&[]), p, TXS, 12, None));
        for (k, &c) in commit_done(&rec).iter().enumerate().step_by(37) {
            assert_same(&recovered_at(&rec, p, c), &s_k(&rec, k + 1), &format!("{} tx {}", p.name(), k + 1));
        }
    });
}

#[test]
fn torn_log_without_commit_record_is_discarded() {
    both(|p| {
        let rec = record(&spec(small_cfg(&[]), p, TXS, 13, None));
        let commits = commit_done(&rec);
        let logs = durable_of(&rec, WriteKind::LogData);
        let mut checked = 0;
        for (k, &c) in commits.iter().enumerate().skip(1) {
            // The first log block of transaction k+1 is durable, its commit record is not.
            if let Some(&l) = logs.iter().find(|&&l| l > commits[k - 1] && l < c) {
                assert_same(&recovered_at(&rec, p, l), &s_k(&rec, k), &format!("{} tx {}", p.name(), k + 1));
                checked += 1;
            }
        }
        assert!(checked > TXS as usize / 2, "{}: only {checked} torn logs found", p.name());
    });
}

#[test]
fn crash_mid_checkpoint_redoes_the_committed_transaction() {
    both(|p| {
        let rec = record(&spec(small_cfg(&[]), p, TXS, 14, None));
        let commits = commit_done(&rec);
        let homes = durable_of(&rec, WriteKind::Home);
        let mut checked = 0;
        for (k, &c) in commits.iter().enumerate() {
            let next = commits.get(k + 1).copied().unwrap_or(Cycle::MAX);
            let mine: Vec<Cycle> = homes.iter().copied().filter(|&h| h > c && h < next).collect();
            if mine.len() >= 2 && mine[0] < mine[mine.len() - 1] {
                // One home write durable, another not: the log must redo the transaction.
                assert_same(&recovered_at(&rec, p, mine[0]), &s_k(&rec, k + 1), &format!("{} tx {}", p.name(), k + 1));
                checked += 1;
            }
        }
        assert!(checked > 0, "{}: no crash point inside a checkpoint", p.name());
    });
}

#[test]
fn crash_on_either_side_of_a_truncation_recovers_the_same_data() {
    both(|p| {
        let rec = record(&spec(small_cfg(&[]), p, TXS, 15, None));
        for &h in durable_of(&rec, WriteKind::LogHead).iter().step_by(29) {
            let (before, after) = (recovered_at(&rec, p, h - Cycle::new(1)), recovered_at(&rec, p, h));
            let a = acked_at(&rec, h - Cycle::new(1));
            let k = (a..=TXS as usize).find(|&k| s_k(&rec, k) == before).expect("before is some S_k");
            assert!(after == before || after == s_k(&rec, k + 1), "{}: head write at {h} changed the data", p.name());
        }
    });
}

#[test]
fn crash_during_recovery_then_recovering_again_gives_the_same_image() {
    both(|p| {
        let rec = record(&spec(small_cfg(&[]), p, TXS, 16, None));
        for &c in commit_done(&rec).iter().step_by(41) {
            let img = rec.record.durable.image_at(&rec.initial, c);
            let plan = recovery::recover(p.log_format(), &rec.layout, &img).unwrap();
            let mut full = img.clone();
            recovery::apply(&mut full, &plan.writes);
            assert!(plan.writes.len() >= 2, "a durable commit record means redo writes");
            for cut in 0..=plan.writes.len() {
                let mut partial = img.clone();
                recovery::apply(&mut partial, &plan.writes[..cut]);
                let again = recovery::recover(p.log_format(), &rec.layout, &partial).unwrap();
                recovery::apply(&mut partial, &again.writes);
                assert_same(
                    &partial,
                    &full,
                    &format!("{}: crash after recovery write {cut} of {}", p.name(), plan.writes.len()),
                );
            }
        }
    });
}

#[test]
fn recovery_after_the_circular_log_wraps_ignores_stale_records() {
    // A 64 KiB log holds 1023 H-WAL blocks or about 2700 S-WAL entries: 3000 transactions wrap
    // it many times, so old records of every kind lie beyond the valid log at each crash.
    both(|p| {
        let cfg = small_cfg(&["log.size_bytes=65536"]);
        let rec = record(&spec(cfg, p, 3000, 17, None));
        for (k, &(first, last)) in commit_span(&rec).iter().enumerate().skip(2500).step_by(23) {
            assert_same(
                &recovered_at(&rec, p, first - Cycle::new(1)),
                &s_k(&rec, k),
                &format!("{} before commit {}", p.name(), k + 1),
            );
            assert_same(&recovered_at(&rec, p, last), &s_k(&rec, k + 1), &format!("{} at commit {}", p.name(), k + 1));
        }
    });
}

#[test]
fn an_unreadable_log_head_is_a_recovery_error_not_a_guess() {
    both(|p| {
        let rec = record(&spec(small_cfg(&[]), p, 10, 18, None));
        let mut img = rec.initial.clone();
        img[rec.layout.log_block0().range()].fill(0xAB);
        let e = recovery::recover(p.log_format(), &rec.layout, &img).unwrap_err();
        assert!(e.contains("head"), "{e}");
    });
}

#[test]
fn the_final_image_after_all_writes_recovers_to_the_last_transaction() {
    both(|p| {
        let rec = record(&spec(small_cfg(&[]), p, TXS, 19, None));
        assert_same(&recovered_at(&rec, p, Cycle::MAX), &s_k(&rec, TXS as usize), p.name());
    });
}

#[test]
fn transactions_larger_than_the_cache_recover_from_lines_evicted_to_the_log() {
    // A 16 KiB LLC (256 lines) and 150 swaps (about 300 blocks) per transaction: H-WAL must
    // log tagged lines as they are evicted mid-transaction, and aborts must discard them.
    use locsim::crash::{check, CrashSpec};
    let tiny = ["l1.size_bytes=2048", "l2.size_bytes=8192", "llc.size_bytes=16384", "workload.sps.swaps_per_tx=150"];
    for p in [HWal, SWal, EcWal] {
        let mut run = spec(small_cfg(&tiny), p, 60, 23, None);
        run.abort_rate = 0.25;
        let r = execute_checked(CrashSpec::new(run, 1500));
        assert_eq!(r.violations, 0, "{}: {:?}", p.name(), r.first_violation);
        let evicting = locsim::runner::execute(&spec(small_cfg(&tiny), p, 20, 23, None)).unwrap().result;
        if p != SWal {
            assert!(evicting.protocol_counters["evicted_to_log"] > 100, "{:?}", evicting.protocol_counters);
            assert!(evicting.protocol_counters["checkpoint_log_reads"] > 0, "{:?}", evicting.protocol_counters);
        }
    }
    fn execute_checked(s: CrashSpec) -> locsim::crash::CrashReport {
        check(&s).unwrap()
    }
}

#[test]
fn eager_commit_recovers_a_transaction_exactly_when_its_last_meta_is_durable() {
    // No commit record: the META written at commit (with TxCnt) decides. Before its first part
    // is durable the transaction is absent; once the last META of the commit is durable it is
    // redone, even though no record says so.
    let rec = record(&spec(small_cfg(&[]), EcWal, TXS, 24, None));
    for (k, &(first, last)) in commit_span_of(&rec, WriteKind::LogMeta).iter().enumerate().step_by(29) {
        assert_same(
            &recovered_at(&rec, EcWal, first - Cycle::new(1)),
            &s_k(&rec, k),
            &format!("before META of tx {}", k + 1),
        );
        assert_same(&recovered_at(&rec, EcWal, last), &s_k(&rec, k + 1), &format!("at META of tx {}", k + 1));
    }
    assert_same(&recovered_at(&rec, EcWal, Cycle::MAX), &s_k(&rec, TXS as usize), "final image");
}

#[test]
fn eager_commit_data_blocks_without_their_meta_are_invisible() {
    // Crash after a transaction's data blocks are durable but before its META: S_k.
    let rec = record(&spec(small_cfg(&[]), EcWal, TXS, 25, None));
    let logs = durable_of(&rec, WriteKind::LogData);
    let mut checked = 0;
    for (k, &(first, _)) in commit_span_of(&rec, WriteKind::LogMeta).iter().enumerate() {
        let called = rec.record.commit_called[k];
        if let Some(&l) = logs.iter().rfind(|&&l| l >= called && l < first) {
            assert_same(&recovered_at(&rec, EcWal, l), &s_k(&rec, k), &format!("tx {}", k + 1));
            checked += 1;
        }
    }
    assert!(checked > TXS as usize / 2, "only {checked} crash points between data and META");
}

/// Recovery reads no block of the data area, except S-WAL's (`recovery::reads_data_area`):
/// the plan (or the error) is the same whatever the data area holds, and for S-WAL it is not
/// (its redo records hold single stores merged into the home block). The crash checker relies
/// on this to reuse a plan across crash points that differ only in data-area blocks and to
/// decide the idempotence of a cut inside the redo writes (`Engine::lay_whole`, `src/crash/engine.rs`).
#[test]
fn recovery_never_reads_the_data_area() {
    use locsim::protocol::ProtocolKind::{Kiln, LocKiln, LocWal};
    for p in [SWal, HWal, EcWal, LocWal, Kiln, LocKiln] {
        let reads = recovery::reads_data_area(p.log_format());
        let rec = record(&spec(small_cfg(&[]), p, 200, 17, None));
        let mut rng = locsim::rng::Rng::new(5);
        let writes = &rec.record.durable.writes;
        let (mut checked, mut redo, mut differ) = (0, 0, 0);
        for w in writes.iter().step_by(writes.len() / 40 + 1) {
            let img = rec.record.durable.image_at(&rec.initial, w.durable);
            let plan = recovery::recover(p.log_format(), &rec.layout, &img);
            let mut other = img.clone();
            for x in &mut other[..rec.layout.data_bytes as usize] {
                *x = rng.next_u64() as u8;
            }
            let again = recovery::recover(p.log_format(), &rec.layout, &other);
            assert!(reads || again == plan, "{}: at cycle {}, the plan depends on the data area", p.name(), w.durable);
            differ += usize::from(again != plan);
            checked += 1;
            redo += plan.map_or(0, |p| p.redone_txs);
        }
        assert!(checked >= 30 && redo > 0, "{}: {checked} images, {redo} transactions redone", p.name());
        assert!(!reads || differ > 0, "{}: said to read the data area, but no plan depends on it", p.name());
    }
}
