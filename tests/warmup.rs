//! The warm-up to steady state (`workload.warmup_to_steady`): a write-back protocol's write
//! traffic depends on the measured region's length while the caches' dirty population is still
//! growing, and not once the warm-up has gone on until it stopped; a run that was already steady
//! is left as it was.

use locsim::config::Config;
use locsim::protocol::ProtocolKind;
use locsim::runner::{execute, RunResult, RunSpec};
use locsim::workload::WorkloadKind;

#[path = "../src/testdir.rs"]
mod testdir;
use testdir::TempDir;

fn run(w: WorkloadKind, p: ProtocolKind, sets: &[&str], warmup_txs: u64, txs: u64) -> RunResult {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let spec = RunSpec {
        cfg: Config::build(None, &sets).unwrap(),
        workload: w,
        protocol: p,
        txs,
        warmup_txs,
        seed: 7,
        abort_rate: 0.0,
        bug: None,
        record: false,
        tape: false,
        prefault: false,
    };
    execute(&spec).unwrap().result
}

const STEADY: &str = "workload.warmup_to_steady=true";

/// Relative difference of two write-traffic figures.
fn apart(a: f64, b: f64) -> f64 {
    (a - b).abs() / b
}

/// SPS dirties two scattered lines per transaction: after 1 000 transactions most of the 1 MiB
/// LLC is still empty, the baseline, Kiln and LOC-Kiln write back nothing yet, and their write
/// traffic grows with the region. With the warm-up to steady state, 2 000 and 8 000 measured
/// transactions give the same figure.
#[test]
fn a_write_back_protocols_traffic_no_longer_depends_on_the_regions_length() {
    for p in [ProtocolKind::Baseline, ProtocolKind::Kiln, ProtocolKind::LocKiln] {
        for cores in ["machine.cores=1", "machine.cores=2"] {
            let short = run(WorkloadKind::Sps, p, &[cores], 1000, 2000);
            let long = run(WorkloadKind::Sps, p, &[cores], 1000, 8000);
            assert!(
                apart(short.write_traffic, long.write_traffic) > 0.2,
                "{p:?} {cores}: without the option the figure moves with the length ({} against {})",
                short.write_traffic,
                long.write_traffic
            );
            assert_eq!(short.warmup_steady_txs, None);
            let short = run(WorkloadKind::Sps, p, &[cores, STEADY], 1000, 2000);
            let long = run(WorkloadKind::Sps, p, &[cores, STEADY], 1000, 8000);
            assert!(
                apart(short.write_traffic, long.write_traffic) < 0.02,
                "{p:?} {cores}: steady warm-up, {} against {}",
                short.write_traffic,
                long.write_traffic
            );
            let extra = short.warmup_steady_txs.unwrap();
            assert!(extra >= 5000, "{p:?} {cores}: {extra} more warm-up transactions");
            assert_eq!(long.warmup_steady_txs, Some(extra), "the warm-up does not depend on the region");
        }
    }
}

/// A protocol that writes at commit (H-WAL) keeps no dirty population to wait for, and a
/// workload whose warm-up already reached its steady population (the red-black tree after
/// 2 000 transactions) runs nothing more: every figure is that of the run without the option.
#[test]
fn a_run_already_steady_is_left_as_it_was() {
    for (w, p) in [
        (WorkloadKind::Sps, ProtocolKind::HWal),
        (WorkloadKind::RbTree, ProtocolKind::Baseline),
        (WorkloadKind::RbTree, ProtocolKind::Kiln),
    ] {
        let plain = run(w, p, &[], 2000, 500);
        let mut steady = run(w, p, &[STEADY], 2000, 500);
        assert_eq!(steady.warmup_steady_txs, Some(0), "{w:?} {p:?}");
        steady.warmup_steady_txs = None;
        let figures = |r: &RunResult| {
            let mut v = serde_json::to_value(r).unwrap();
            for k in ["host_seconds", "sim_mem_accesses_per_second", "config_hash"] {
                v.as_object_mut().unwrap().remove(k);
            }
            v
        };
        assert_eq!(figures(&plain), figures(&steady), "{w:?} {p:?}");
    }
}

#[test]
fn the_steady_warmup_is_deterministic() {
    let a = run(WorkloadKind::Sps, ProtocolKind::LocKiln, &["machine.cores=4", STEADY], 500, 1000);
    let b = run(WorkloadKind::Sps, ProtocolKind::LocKiln, &["machine.cores=4", STEADY], 500, 1000);
    assert_eq!((a.cycles, a.mem_write_bytes, a.warmup_steady_txs), (b.cycles, b.mem_write_bytes, b.warmup_steady_txs));
}

/// A replayed trace declares its own warm-up: asking for more, when running one or when
/// generating one, is a one-line error with exit 2.
#[test]
fn a_trace_with_the_steady_warmup_is_refused() {
    let dir = TempDir::new("warmup-trace");
    let trace = dir.join("t.trace");
    let bin = env!("CARGO_BIN_EXE_locsim");
    let gen = std::process::Command::new(bin)
        .args(["trace-gen", "-w", "sps", "--txs", "50", "-o", trace.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
    let out = std::process::Command::new(bin)
        .args(["run", "--trace", trace.to_str().unwrap(), "-p", "h-wal", "--set", STEADY])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("workload.warmup_to_steady") && err.contains("sps, btree"), "{err}");
    let gen = std::process::Command::new(bin)
        .args(["trace-gen", "-w", "sps", "--txs", "50", "-o", trace.to_str().unwrap(), "--set", STEADY])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&gen.stderr);
    assert_eq!(gen.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("workload.warmup_to_steady"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
