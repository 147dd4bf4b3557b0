//! The YCSB workloads from the command line (docs/ycsb.md): every protocol on 1 and 4 cores,
//! reads that write nothing, crash checks clean with an injected bug caught, a trace that
//! replays exactly on one core, and one-line errors for bad knobs and names.

use serde_json::Value;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_locsim");
const ALL: &str = "baseline,s-wal,h-wal,ec-wal,loc-wal,kiln,loc-kiln,atom,proteus,hoop";
/// Small sizes, so that the matrix runs in seconds.
const SMALL: [&str; 4] = ["--set", "workload.ycsb.records=4096", "--set", "workload.ycsb.operations=8000"];

fn locsim(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("runs")
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

#[test]
fn every_ycsb_workload_runs_under_every_protocol_on_one_and_four_cores_and_reads_write_nothing() {
    for w in ["ycsb-a", "ycsb-b", "ycsb-c", "ycsb-d", "ycsb-e", "ycsb-f"] {
        for cores in ["1", "4"] {
            let args = [
                &["run", "-w", w, "-p", ALL, "--cores", cores, "--txs", "400", "--warmup-txs", "100", "--json"][..],
                &SMALL,
            ];
            let rs = json(&locsim(&args.concat()));
            let rs = rs.as_array().unwrap();
            assert_eq!(rs.len(), 10, "{w} {cores}");
            for r in rs {
                assert_eq!(r["txs_committed"], 400, "{w} {cores} {}", r["protocol"]);
                let writes = r["program_write_bytes"].as_u64().unwrap();
                assert_eq!(writes == 0, w == "ycsb-c", "{w} {cores} {}: {writes} bytes written", r["protocol"]);
            }
        }
    }
}

fn crash(args: &[&str]) -> (Option<i32>, Value) {
    let out = locsim(&[&["crashtest", "--json"][..], args, &SMALL].concat());
    (out.status.code(), serde_json::from_slice(&out.stdout).expect("crashtest JSON"))
}

#[test]
fn ycsb_a_and_e_crash_check_clean_on_one_and_four_cores_and_a_broken_protocol_is_caught() {
    for w in ["ycsb-a", "ycsb-e"] {
        for cores in ["1", "4"] {
            for p in ["h-wal", "loc-wal", "atom", "hoop"] {
                let (code, r) = crash(&[
                    "-w",
                    w,
                    "-p",
                    p,
                    "--cores",
                    cores,
                    "--txs",
                    "300",
                    "--crashes",
                    "300",
                    "--abort-rate",
                    "0.1",
                ]);
                assert_eq!(
                    (code, r["violations"].as_u64()),
                    (Some(0), Some(0)),
                    "{w} {p} {cores}: {}",
                    r["first_violation"]
                );
            }
        }
        let (code, r) =
            crash(&["-w", w, "-p", "atom", "--inject-bug", "in-place-before-undo", "--txs", "300", "--exhaustive"]);
        assert_eq!(code, Some(1), "{w}: {r}");
        assert!(r["violations"].as_u64().unwrap() > 0, "{w}");
    }
}

#[test]
fn a_ycsb_trace_replays_exactly_on_one_and_four_cores_and_crash_checks_clean() {
    let dir = std::env::temp_dir().join(format!("locsim-ycsb-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let shape = ["--txs", "300", "--warmup-txs", "50"];
    for cores in ["1", "4"] {
        let file = dir.join(format!("a{cores}.trace")).to_string_lossy().into_owned();
        let gen = locsim(&[&["trace-gen", "-w", "ycsb-a", "--cores", cores, "-o", &file][..], &shape, &SMALL].concat());
        assert!(gen.status.success(), "{}", String::from_utf8_lossy(&gen.stderr));
        let trace = json(&locsim(&["run", "--trace", &file, "-p", "baseline,h-wal,atom", "--cores", cores, "--json"]));
        let builtin = json(&locsim(
            &[&["run", "-w", "ycsb-a", "-p", "baseline,h-wal,atom", "--cores", cores, "--json"][..], &shape, &SMALL]
                .concat(),
        ));
        for (t, b) in trace.as_array().unwrap().iter().zip(builtin.as_array().unwrap()) {
            assert_eq!(t["txs_committed"], b["txs_committed"]);
            assert_eq!(t["program_write_bytes"], b["program_write_bytes"], "{cores} {}", b["protocol"]);
            // On 4 cores too: the replay takes the recorded locks (`lock` records), and
            // YCSB-A's addresses do not depend on the order in which the cores ran.
            for f in ["cycles", "mem_write_bytes", "mem_reads", "pset_blocks_per_tx", "core_end_cycles"] {
                assert_eq!(t[f], b[f], "{cores} {} {f}", b["protocol"]);
            }
        }
        let out =
            locsim(&["crashtest", "--trace", &file, "-p", "h-wal", "--cores", cores, "--crashes", "300", "--json"]);
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!((out.status.code(), r["violations"].as_u64()), (Some(0), Some(0)), "{r}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_bad_ycsb_knob_or_name_is_one_line_and_exit_2() {
    for (args, want) in [
        (&["-w", "ycsb-g"][..], "unknown workload `ycsb-g`: allowed "),
        (
            &["-w", "ycsb-a", "--set", "workload.ycsb.field_bytes=0"][..],
            "workload.ycsb.field_bytes = 0: allowed 8..=4096",
        ),
        (&["-w", "ycsb-b", "--set", "workload.ycsb.records=0"][..], "workload.ycsb.records = 0: allowed 2..=67108864"),
        (&["-w", "ycsb-e", "--set", "workload.ycsb.index=skiplist"][..], "workload.ycsb.index"),
    ] {
        let out = locsim(&[&["run", "-p", "h-wal", "--txs", "10"][..], args].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    let out = locsim(&["run", "-p", "h-wal", "-w", "ycsb-g"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("ycsb-a, ycsb-b, ycsb-c, ycsb-d, ycsb-e, ycsb-f"));
}
