//! The PCM device seen from the command line: endurance figures in the run JSON, and crash
//! consistency unchanged when write latencies vary with the cells programmed.

use serde_json::Value;
use std::process::Command;

fn locsim(args: &[&str]) -> (Option<i32>, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).output().expect("runs");
    (out.status.code(), serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

const SMALL: [&str; 4] = ["--set", "workload.sps.entries=65536", "--set", "log.size_bytes=1048576"];

#[test]
fn a_pcm_run_reports_bit_updates_energy_and_lifetime_and_an_ideal_run_does_not() {
    // 8 MiB of array: larger than the LLC, so the baseline writes back too.
    let mut args = vec!["run", "--workload", "sps", "--protocol", "baseline,h-wal", "--txs", "3000", "--json"];
    args.extend_from_slice(&["--warmup-txs", "20000", "--set", "workload.sps.entries=1048576"]);
    let (_, ideal) = locsim(&args);
    assert!(ideal[0]["pcm"].is_null());
    args.extend_from_slice(&["--set", "memory.device=pcm"]);
    let (code, v) = locsim(&args);
    assert_eq!(code, Some(0));
    for r in v.as_array().unwrap() {
        let p = &r["pcm"];
        let total = p["total_bit_updates"].as_u64().unwrap();
        let regions: u64 =
            p["regions"].as_array().unwrap().iter().map(|x| x["total_bit_updates"].as_u64().unwrap()).sum();
        assert!(total > 0 && total == regions, "{}: totals {total} vs regions {regions}", r["protocol"]);
        assert!(p["max_bit_updates"].as_u64().unwrap() >= 1);
        assert!(p["energy_nj"].as_f64().unwrap() > 0.0);
        assert!(p["lifetime_years"].as_f64().unwrap() > 0.0);
    }
    // H-WAL rewrites its log head every transaction: its hottest cell is far hotter than any
    // cell the baseline programs.
    let max = |i: usize| v[i]["pcm"]["max_bit_updates"].as_u64().unwrap();
    assert!(max(1) > 10 * max(0), "h-wal {} vs baseline {}", max(1), max(0));
}

#[test]
fn crash_consistency_holds_with_variable_pcm_write_latencies() {
    for p in ["s-wal", "h-wal", "ec-wal"] {
        let mut args = vec![
            "crashtest",
            "--workload",
            "sps",
            "--protocol",
            p,
            "--txs",
            "300",
            "--crashes",
            "800",
            "--abort-rate",
            "0.1",
            "--json",
        ];
        args.extend_from_slice(&SMALL);
        args.extend_from_slice(&["--set", "memory.device=pcm"]);
        let (code, v) = locsim(&args);
        assert_eq!((code, v["violations"].as_u64()), (Some(0), Some(0)), "{p}: {}", v["first_violation"]);
    }
}
