//! CXL-attached memory and Global Persistent Flush (docs/cxl.md) as a user sees them: every
//! protocol runs under both GPF domains and reports the drain work, the crash checker finds no
//! violation under them, the cut-short GPF catches the protocol that relies on the cache
//! write-back, and bad input exits 2 with one line.

use serde_json::Value;
use std::process::{Command, Output};

fn locsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).output().expect("runs")
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

const ALL: &str = "baseline,s-wal,h-wal,ec-wal,loc-wal,kiln,loc-kiln,atom,proteus,hoop,s-undo";

#[test]
fn every_protocol_runs_under_both_gpf_domains_and_reports_the_drain_work() {
    for cores in ["1", "8"] {
        for d in ["gpf", "gpf-no-writeback"] {
            let domain = format!("machine.persist_domain={d}");
            let args = ["run", "-w", "sps", "-p", ALL, "--txs", "400", "--warmup-txs", "100", "--cores", cores];
            let rs = json(&locsim(&[&args[..], &["--set", "memory.attach=cxl", "--set", &domain, "--json"]].concat()));
            for r in rs.as_array().unwrap() {
                let g = &r["gpf"];
                for f in [
                    "samples",
                    "dirty_lines_mean",
                    "dirty_lines_max",
                    "device_buffer_bytes_mean",
                    "device_buffer_bytes_max",
                    "drain_ns_mean",
                    "drain_ns_max",
                    "drain_energy_nj_mean",
                    "drain_energy_nj_max",
                ] {
                    assert!(g[f].is_number(), "{d} {cores} {}: {f} in {g}", r["protocol"]);
                }
                assert!(g["samples"].as_u64().unwrap() > 0);
                if d == "gpf-no-writeback" {
                    assert_eq!(g["dirty_lines_max"], 0, "phase 1 skipped");
                }
            }
            // The software protocols leave dirty lines to phase 1 under `gpf`.
            if d == "gpf" {
                let swal = rs.as_array().unwrap().iter().find(|r| r["protocol"] == "s-wal").unwrap();
                assert!(swal["gpf"]["dirty_lines_max"].as_u64().unwrap() > 100, "{}", swal["gpf"]);
            }
        }
    }
    // Not under the other domains, and `ddr` by default: the field is absent.
    let rs =
        json(&locsim(&["run", "-w", "sps", "-p", "h-wal", "--txs", "200", "--set", "memory.attach=cxl", "--json"]));
    assert!(rs[0].get("gpf").is_none());
}

#[test]
fn cxl_is_slower_than_ddr_and_each_switch_slower_still() {
    let cycles = |sets: &[&str]| {
        let mut args = vec!["run", "-w", "btree", "-p", "h-wal", "--txs", "500", "--json"];
        for s in sets {
            args.extend(["--set", s]);
        }
        json(&locsim(&args))[0]["cycles"].as_u64().unwrap()
    };
    let (ddr, cxl, hop) =
        (cycles(&[]), cycles(&["memory.attach=cxl"]), cycles(&["memory.attach=cxl", "memory.cxl_switch_hops=1"]));
    assert!(ddr < cxl && cxl < hop, "{ddr} {cxl} {hop}");
}

fn crashtest(args: &[&str]) -> (Option<i32>, Value) {
    let out = locsim(&[&["crashtest", "--json", "--set", "memory.attach=cxl"], args].concat());
    (out.status.code(), serde_json::from_slice(&out.stdout).expect("JSON even on violation"))
}

/// A short form of `scripts/cxl_crash_sweep.sh` (docs/cxl.md).
#[test]
fn crashtest_under_gpf_and_gpf_no_writeback_finds_no_violation() {
    for d in ["machine.persist_domain=gpf", "machine.persist_domain=gpf-no-writeback"] {
        for w in ["sps", "btree", "hash"] {
            for p in ["s-wal", "h-wal", "loc-wal", "atom", "hoop"] {
                let (code, r) = crashtest(&["-w", w, "-p", p, "--txs", "400", "--crashes", "300", "--set", d]);
                assert_eq!(
                    (code, r["violations"].as_u64()),
                    (Some(0), Some(0)),
                    "{p} {w} {d}: {}",
                    r["first_violation"]
                );
            }
        }
        for p in ["s-wal", "kiln", "proteus"] {
            let (code, r) =
                crashtest(&["-w", "hash", "-p", p, "--txs", "400", "--crashes", "200", "--cores", "4", "--set", d]);
            assert_eq!(
                (code, r["violations"].as_u64()),
                (Some(0), Some(0)),
                "{p} 4 cores {d}: {}",
                r["first_violation"]
            );
        }
    }
}

/// The cut-short GPF (`--gpf-budget-lines`): S-WAL, which under `gpf` drops its flushes and
/// relies on phase 1, loses acknowledged transactions; the hardware protocols, which never
/// leave what they acknowledged in the caches, survive with no state to check.
#[test]
fn the_cut_short_gpf_catches_the_protocol_that_relies_on_the_drain() {
    let gpf = ["--set", "machine.persist_domain=gpf", "--gpf-budget-lines", "16"];
    let (code, r) = crashtest(&[&["-w", "sps", "-p", "s-wal", "--txs", "400", "--crashes", "200"], &gpf[..]].concat());
    assert_eq!(code, Some(1), "{r}");
    assert!(r["gpf_cut"]["states"].as_u64().unwrap() > 0, "{r}");
    let v = &r["first_violation"];
    assert!(v["torn"].as_str().unwrap().starts_with("GPF cut short: 16 of"), "{v}");
    assert!(v["replay"].as_str().unwrap().contains("--gpf-budget-lines 16"), "{v}");
    // Without the cut the same run survives.
    let (code, r) = crashtest(&[
        "-w",
        "sps",
        "-p",
        "s-wal",
        "--txs",
        "400",
        "--crashes",
        "200",
        "--set",
        "machine.persist_domain=gpf",
    ]);
    assert_eq!(code, Some(0), "{r}");
    for p in ["h-wal", "loc-wal", "hoop"] {
        let (code, r) = crashtest(&[&["-w", "sps", "-p", p, "--txs", "400", "--crashes", "200"], &gpf[..]].concat());
        assert_eq!((code, r["gpf_cut"]["states"].as_u64()), (Some(0), Some(0)), "{p}: {r}");
    }
}

#[test]
fn bad_cxl_and_gpf_input_exits_2_with_one_line() {
    for (args, want) in [
        (vec!["run", "-w", "sps", "-p", "s-wal", "--txs", "10", "--set", "memory.attach=pcie"], "`ddr` or `cxl`"),
        (vec!["run", "-w", "sps", "-p", "s-wal", "--txs", "10", "--set", "memory.cxl_switch_hops=-1"], "allowed 0..=8"),
        (
            vec![
                "crashtest",
                "-w",
                "sps",
                "-p",
                "s-wal",
                "--set",
                "machine.persist_domain=gpf",
                "--gpf-budget-lines",
                "0",
            ],
            "allowed 1 or more",
        ),
        (vec!["crashtest", "-w", "sps", "-p", "s-wal", "--gpf-budget-lines", "8"], "allowed only with gpf"),
    ] {
        let out = locsim(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want) && err.trim().lines().count() == 1, "{args:?}: {err}");
    }
}
