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

/// `run --json` on the PCM device with cells that stick after `endurance` programs.
fn worn_run(protocols: &str, endurance: &str, startgap: &str) -> Value {
    let mut args = vec!["run", "-w", "sps", "-p", protocols, "--txs", "2000", "--warmup-txs", "100", "--json"];
    args.extend_from_slice(&SMALL);
    let e = format!("pcm.cell_endurance_writes={endurance}");
    let sg = format!("startgap.enabled={startgap}");
    args.extend_from_slice(&["--set", "memory.device=pcm", "--set", "pcm.retire_worn_cells=true", "--set", &e]);
    args.extend_from_slice(&["--set", &sg, "--set", "startgap.psi_writes=8"]);
    let (code, v) = locsim(&args);
    assert_eq!(code, Some(0), "{args:?}");
    v
}

#[test]
fn worn_out_cells_are_reported_per_protocol_for_the_log_area_with_and_without_start_gap() {
    for sg in ["false", "true"] {
        let v = worn_run("s-wal,h-wal,ec-wal,loc-wal", "150", sg);
        let mut head_blocks = Vec::new();
        for r in v.as_array().unwrap() {
            let (p, f) = (r["protocol"].as_str().unwrap(), &r["pcm"]["retire"]);
            let names: Vec<&str> = f.as_array().unwrap().iter().map(|x| x["name"].as_str().unwrap()).collect();
            assert_eq!(names, ["device", "data", "log"], "{p}");
            for k in ["retired_cells", "failed_writes", "failed_cells"] {
                let sum = f[1][k].as_u64().unwrap() + f[2][k].as_u64().unwrap();
                assert_eq!(f[0][k].as_u64().unwrap(), sum, "{p}: device {k} = data + log");
            }
            let log = &f[2];
            if let Some(failed) = log["first_failed_write"].as_object() {
                let retired = log["first_retired"].as_object().expect("a failure needs a stuck cell");
                assert!(failed["write"].as_u64() > retired["write"].as_u64(), "{p}: failed before any cell stuck");
                assert!(failed["cycle"].as_u64() >= retired["cycle"].as_u64(), "{p}");
            }
            if p != "loc-wal" {
                // The WAL protocols rewrite their log head every transaction: 2000 > 150.
                assert!(log["retired_cells"].as_u64().unwrap() > 0, "{p}, Start-Gap {sg}: nothing wore out");
                assert!(log["failed_writes"].as_u64().unwrap() > 0, "{p}, Start-Gap {sg}: no read-back failed");
                head_blocks.push(log["first_retired"]["byte"].as_u64().unwrap() / 64);
            }
        }
        // Start-Gap moves a line only when the gap passes it: the head stays where it is.
        assert!(head_blocks.windows(2).all(|w| w[0] == w[1]), "Start-Gap {sg}: first cells in {head_blocks:?}");
    }
}

#[test]
fn cells_that_never_reach_their_endurance_change_no_figure() {
    let strip = |mut v: Value| {
        for r in v.as_array_mut().unwrap() {
            let o = r.as_object_mut().unwrap();
            for k in ["host_seconds", "sim_mem_accesses_per_second", "config_hash"] {
                o.remove(k);
            }
            o["pcm"].as_object_mut().unwrap().remove("retire");
        }
        v
    };
    let worn = worn_run("h-wal,loc-kiln", "1e8", "true");
    assert_eq!(worn[0]["pcm"]["retire"][0]["retired_cells"], 0);
    let mut args = vec!["run", "-w", "sps", "-p", "h-wal,loc-kiln", "--txs", "2000", "--warmup-txs", "100", "--json"];
    args.extend_from_slice(&SMALL);
    args.extend_from_slice(&[
        "--set",
        "memory.device=pcm",
        "--set",
        "startgap.enabled=true",
        "--set",
        "startgap.psi_writes=8",
    ]);
    let (_, plain) = locsim(&args);
    assert!(plain[0]["pcm"]["retire"].is_null(), "off by default, and then not in the JSON");
    assert_eq!(strip(worn), strip(plain));
}
