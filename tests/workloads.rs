//! Every workload under every crash-consistent protocol, at small sizes: the run contract, no
//! violation under crashes (with aborts), and a negative control caught on each workload.

use serde_json::Value;
use std::process::Command;

/// Small data sets so that the whole matrix runs in seconds.
const SMALL: &[&str] = &[
    "workload.sps.entries=65536",
    "workload.btree.key_space=16384",
    "workload.hash.key_space=16384",
    "workload.hash.buckets=4096",
    "workload.rbtree.key_space=16384",
    "workload.sdg.vertices=4096",
    "workload.sdg.initial_edges=8192",
    "workload.sdg.max_edges=16384",
    "workload.sqlite.rows=2048",
    "workload.sqlite.file_capacity_bytes=4194304",
    "log.size_bytes=4194304",
    "workload.ycsb.records=4096",
    "workload.ycsb.operations=8000",
];

fn workloads() -> Vec<&'static str> {
    locsim::workload::WorkloadKind::names()
}

fn locsim(args: &[&str]) -> (Option<i32>, Value) {
    let mut all: Vec<&str> = args.to_vec();
    for s in SMALL {
        all.extend(["--set", s]);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_locsim")).args(&all).output().expect("runs");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{all:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

#[test]
fn every_workload_runs_under_every_protocol_with_the_same_program_writes() {
    for w in workloads() {
        let (code, v) = locsim(&[
            "run",
            "--workload",
            w,
            "--protocol",
            "baseline,s-wal,h-wal,ec-wal",
            "--txs",
            "300",
            "--warmup-txs",
            "50",
            "--json",
        ]);
        assert_eq!(code, Some(0), "{w}");
        let rs = v.as_array().unwrap();
        let base = &rs[0];
        assert_eq!(base["normalized_throughput"], 1.0, "{w}");
        if w == "ycsb-c" {
            // Read only: the program stores nothing (a protocol may still log the empty commit).
            for r in rs {
                assert_eq!((r["program_write_bytes"].as_u64(), r["pset_blocks_per_tx"].as_f64()), (Some(0), Some(0.0)));
            }
            continue;
        }
        // The other workloads write in every transaction; most of YCSB B's (5% updates) and D's (5% inserts) only read.
        let least = if w == "ycsb-b" || w == "ycsb-d" { 0.05 } else { 1.0 };
        assert!(base["pset_blocks_per_tx"].as_f64().unwrap() >= least, "{w}");
        for r in &rs[1..] {
            assert_eq!(r["program_write_bytes"], base["program_write_bytes"], "{w} {}", r["protocol"]);
            assert_eq!(r["pset_blocks_per_tx"], base["pset_blocks_per_tx"], "{w} {}", r["protocol"]);
            assert!(r["normalized_throughput"].as_f64().unwrap() < 1.0, "{w} {}", r["protocol"]);
            assert!(
                r["write_traffic"].as_f64().unwrap() > base["write_traffic"].as_f64().unwrap(),
                "{w} {}",
                r["protocol"]
            );
        }
    }
}

#[test]
fn no_workload_shows_a_violation_under_crashes_and_aborts() {
    for w in workloads() {
        for p in ["s-wal", "h-wal", "ec-wal"] {
            let (code, v) = locsim(&[
                "crashtest",
                "--workload",
                w,
                "--protocol",
                p,
                "--txs",
                "40",
                "--crashes",
                "150",
                "--abort-rate",
                "0.2",
                "--json",
            ]);
            assert_eq!(v["violations"], 0, "{w} {p}: {}", v["first_violation"]);
            assert_eq!(code, Some(0), "{w} {p}");
        }
    }
}

#[test]
fn an_injected_bug_is_caught_on_every_workload() {
    // A read-only workload (YCSB's C) stores no data a crash could lose.
    for w in workloads().into_iter().filter(|&w| w != "ycsb-c") {
        for (p, bug) in
            [("h-wal", "commit-before-log"), ("ec-wal", "meta-before-data"), ("s-wal", "truncate-before-checkpoint")]
        {
            let (code, v) = locsim(&[
                "crashtest",
                "--workload",
                w,
                "--protocol",
                p,
                "--txs",
                "60",
                "--crashes",
                "400",
                "--inject-bug",
                bug,
                "--json",
            ]);
            assert!(v["violations"].as_u64().unwrap() > 0, "{w} {p} {bug} not caught");
            assert_eq!(code, Some(1), "{w} {p} {bug}");
        }
    }
}
