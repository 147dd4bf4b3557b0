//! Helpers shared by the integration tests: small recorded runs and the oracle's S_k.
#![allow(dead_code)]

use locsim::config::Config;
use locsim::crash::CrashSpec;
use locsim::pmem::WriteKind;
use locsim::protocol::{Bug, ProtocolKind};
use locsim::recovery;
use locsim::runner::{execute, Recorded, RunSpec};
use locsim::types::Cycle;
use locsim::workload::WorkloadKind;

/// A small, fast configuration: 64 Ki SPS entries (512 KiB, half the LLC) and a 1 MiB log,
/// unless overridden.
pub fn small_cfg(extra: &[&str]) -> Config {
    let mut sets = vec!["workload.sps.entries=65536".to_string(), "log.size_bytes=1048576".to_string()];
    sets.extend(extra.iter().map(|s| s.to_string()));
    Config::build(None, &sets).unwrap()
}

pub fn spec(cfg: Config, protocol: ProtocolKind, txs: u64, seed: u64, bug: Option<Bug>) -> RunSpec {
    RunSpec {
        cfg,
        workload: WorkloadKind::Sps,
        protocol,
        txs,
        warmup_txs: 0,
        seed,
        abort_rate: 0.0,
        bug,
        record: true,
        tape: false,
        prefault: false,
    }
}

/// Replay one torn-write crash point as `locsim crashtest --workload w --protocol p --seed 1
/// --txs txs --atomicity 8 [--exhaustive] --set ... --crash-at t` does (default configuration
/// but for `sets`; docs/faults.md).
pub fn torn_replay(
    p: ProtocolKind,
    w: WorkloadKind,
    sets: &[&str],
    txs: u64,
    exhaustive: bool,
    t: u64,
) -> locsim::crash::CrashReport {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let mut run = spec(Config::build(None, &sets).unwrap(), p, txs, 1, None);
    run.workload = w;
    let mut cs = locsim::crash::CrashSpec::new(run, 1);
    (cs.exhaustive, cs.crash_at, cs.atomicity) = (exhaustive, Some(Cycle::new(t)), 8);
    locsim::crash::check(&cs).unwrap()
}

/// The crash check of the protocol tests: `w` under `protocol` with seed 11, `txs` transactions
/// at abort rate `ar`, `bug` injected and `points` crash points, on [`small_cfg`] with a hash
/// table of 4096 buckets over 8192 keys and then `extra`.
pub fn crash_spec(
    protocol: ProtocolKind,
    w: WorkloadKind,
    extra: &[&str],
    txs: u64,
    ar: f64,
    bug: Option<Bug>,
    points: u64,
) -> CrashSpec {
    let mut sets = vec!["workload.hash.buckets=4096", "workload.hash.key_space=8192"];
    sets.extend_from_slice(extra);
    let mut run = spec(small_cfg(&sets), protocol, txs, 11, bug);
    run.workload = w;
    run.abort_rate = ar;
    CrashSpec::new(run, points)
}

pub fn record(spec: &RunSpec) -> Recorded {
    execute(spec).unwrap().recorded.unwrap()
}

/// S_k: the data area after the first k committed transactions.
pub fn s_k(rec: &Recorded, k: usize) -> Vec<u8> {
    let mut d = rec.initial[..rec.layout.data_bytes as usize].to_vec();
    for i in 0..k {
        rec.oracle.apply_tx(i, &mut d);
    }
    d
}

/// The durable image at crash cycle t, recovered; returns the data area.
pub fn recovered_at(rec: &Recorded, proto: ProtocolKind, t: Cycle) -> Vec<u8> {
    let mut img = rec.record.durable.image_at(&rec.initial, t);
    let plan = recovery::recover(proto.log_format(), &rec.layout, &img).expect("recovery succeeds");
    recovery::apply(&mut img, &plan.writes);
    img[..rec.layout.data_bytes as usize].to_vec()
}

/// Durable cycles of the writes of one kind, in durability order.
pub fn durable_of(rec: &Recorded, kind: WriteKind) -> Vec<Cycle> {
    rec.record.durable.writes.iter().filter(|w| w.kind == kind).map(|w| w.durable).collect()
}

/// A(t): transactions acknowledged durable at t.
pub fn acked_at(rec: &Recorded, t: Cycle) -> usize {
    rec.record.acks.iter().take_while(|(c, _)| *c <= t).last().map_or(0, |&(_, n)| n as usize)
}

/// Per committed transaction: the durable cycles of the first and the last write of its commit
/// record (Commit-kind writes between its commit call and its acknowledgement; an S-WAL commit
/// entry may straddle two blocks, and then stale bytes in the second block can complete a
/// header whose first block is durable: see docs/formats/wal-log.md).
pub fn commit_span(rec: &Recorded) -> Vec<(Cycle, Cycle)> {
    commit_span_of(rec, WriteKind::Commit)
}

/// [`commit_span`] for the writes of `kind` that decide commitment (Commit records for WAL, the
/// METAs written at commit for Eager Commit).
pub fn commit_span_of(rec: &Recorded, kind: WriteKind) -> Vec<(Cycle, Cycle)> {
    let commits = durable_of(rec, kind);
    let acks = &rec.record.acks;
    (0..rec.oracle.txs())
        .map(|k| {
            let called = rec.record.commit_called[k];
            let acked = acks.iter().find(|&&(_, n)| n as usize > k).map_or(Cycle::MAX, |&(c, _)| c);
            let mine = commits.iter().copied().filter(|&c| c >= called && c <= acked);
            let first = mine.clone().min().expect("a commit write per transaction");
            (first, mine.max().expect("non-empty"))
        })
        .collect()
}

/// Per committed transaction: when its commit record is wholly durable.
pub fn commit_done(rec: &Recorded) -> Vec<Cycle> {
    commit_span(rec).into_iter().map(|(_, last)| last).collect()
}

/// Panics with the first differing byte instead of dumping megabytes.
#[track_caller]
pub fn assert_same(got: &[u8], want: &[u8], what: &str) {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: data differs first at byte {i} (got {}, want {})", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}: lengths");
}
