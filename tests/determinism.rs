//! Determinism (docs/model.md section 7) and the claim that payload bytes do not affect timing.

mod common;
use common::*;
use locsim::protocol::ProtocolKind;
use locsim::runner::execute;
use locsim::types::Cycle;

fn figures(r: &locsim::runner::RunResult) -> String {
    let mut v = serde_json::to_value(r).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("host_seconds");
    o.remove("sim_mem_accesses_per_second");
    v.to_string()
}

#[test]
fn recording_payloads_does_not_change_any_figure() {
    for &p in ProtocolKind::ALL {
        let mut s = spec(small_cfg(&["workload.sps.entries=262144"]), p, 3000, 5, None);
        s.warmup_txs = 1000;
        s.record = false;
        let plain = execute(&s).unwrap().result;
        s.record = true;
        let recorded = execute(&s).unwrap().result;
        assert_eq!(figures(&plain), figures(&recorded), "{}", p.name());
    }
}

#[test]
fn same_seed_gives_byte_identical_durable_writes_and_acknowledgements() {
    for &p in ProtocolKind::ALL {
        let s = spec(small_cfg(&[]), p, 500, 9, None);
        let (a, b) = (record(&s), record(&s));
        assert_eq!(a.record.durable.writes.len(), b.record.durable.writes.len(), "{}", p.name());
        for (x, y) in a.record.durable.writes.iter().zip(&b.record.durable.writes) {
            assert_eq!((x.durable, x.block, x.kind, x.data), (y.durable, y.block, y.kind, y.data), "{}", p.name());
        }
        assert_eq!(a.record.acks, b.record.acks, "{}", p.name());
        assert_eq!(a.record.commit_called, b.record.commit_called, "{}", p.name());
    }
}

#[test]
fn aborted_transactions_leave_no_trace_in_the_oracle_and_recovery_agrees() {
    for p in [ProtocolKind::HWal, ProtocolKind::SWal] {
        let mut s = spec(small_cfg(&[]), p, 600, 21, None);
        s.abort_rate = 0.3;
        let rec = record(&s);
        let committed = rec.oracle.txs();
        assert!(committed > 300 && committed < 550, "{}: {committed} committed of 600", p.name());
        assert_same(&recovered_at(&rec, p, Cycle::MAX), &s_k(&rec, committed), p.name());
    }
}

/// `RunSpec::tape` (what `reproduce` sets, and what SQLite runs take): under every protocol and
/// with the PCM device, with aborts and a warm-up that goes on to steady state, a SQLite run
/// gives every figure of the run that executes SQLite itself, whether it records the shared
/// tape, replays what an earlier run recorded, or records further with a recorder that the
/// runs of another seed between them closed (each run's connection opening closes the idle
/// recorders, so two seeds alternating start recorders again). No other test of this binary
/// opens a SQLite connection, which would change the pages this one's keep cached.
#[test]
fn replaying_a_shared_recording_of_sqlite_changes_no_figure() {
    use locsim::workload::WorkloadKind;
    let sets =
        ["workload.sqlite.rows=2000", "workload.sqlite.file_capacity_bytes=4194304", "workload.warmup_to_steady=true"];
    let runs =
        ProtocolKind::ALL.iter().map(|&p| (p, &[][..])).chain([(ProtocolKind::HWal, &["memory.device=pcm"][..])]);
    for (p, extra) in runs {
        for seed in [3, 4] {
            let mut s = spec(small_cfg(&[&sets[..], extra].concat()), p, 300, seed, None);
            (s.workload, s.warmup_txs, s.abort_rate, s.record) = (WorkloadKind::Sqlite, 200, 0.1, false);
            let own = execute(&s).unwrap().result;
            s.tape = true;
            let replayed = execute(&s).unwrap().result;
            assert_eq!(figures(&own), figures(&replayed), "{} seed {seed} {extra:?}", p.name());
        }
    }
}
