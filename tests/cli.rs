//! The command-line contract (README "CLI contract"): JSON fields, exit codes, one-line errors,
//! determinism, and the crash checker's verdicts as a user sees them.

use serde_json::Value;
use std::process::{Command, Output};

const SMALL: [&str; 4] = ["--set", "workload.sps.entries=65536", "--set", "log.size_bytes=1048576"];

fn locsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).output().expect("runs")
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

/// Exit status 2 and exactly one line on stderr that mentions every `needles`.
fn assert_usage_error(args: &[&str], needles: &[&str]) {
    let out = locsim(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: not one line: {err}");
    for n in needles {
        assert!(err.contains(n), "{args:?}: `{n}` missing from: {err}");
    }
}

fn run_json(extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["run", "--workload", "sps", "--protocol", "baseline,s-wal,h-wal", "--txs", "20000", "--json"];
    args.extend_from_slice(extra);
    json(&locsim(&args)).as_array().expect("array").clone()
}

#[test]
fn run_json_has_the_contract_fields_and_wal_costs_throughput_and_traffic() {
    let rs = run_json(&["--warmup-txs", "20000"]);
    assert_eq!(rs.len(), 3);
    for f in [
        "workload",
        "protocol",
        "sd",
        "mem_latency_ns",
        "seed",
        "txs_committed",
        "cycles",
        "throughput_tx_per_mcycle",
        "normalized_throughput",
        "program_write_bytes",
        "mem_write_bytes",
        "write_traffic",
        "pset_blocks_per_tx",
        "sim_mem_accesses",
        "host_seconds",
        "sim_mem_accesses_per_second",
        "version",
        "git_rev",
    ] {
        for r in &rs {
            assert!(r.get(f).is_some(), "field {f} missing in {r}");
        }
    }
    let get = |p: &str, f: &str| rs.iter().find(|r| r["protocol"] == p).unwrap()[f].as_f64().unwrap();
    assert_eq!(get("baseline", "normalized_throughput"), 1.0);
    for p in ["s-wal", "h-wal"] {
        assert!(get(p, "normalized_throughput") < 1.0, "{p}");
        assert!(get(p, "write_traffic") > get("baseline", "write_traffic"), "{p}");
        assert_eq!(get(p, "program_write_bytes"), get("baseline", "program_write_bytes"), "{p}: same program stores");
    }
}

#[test]
fn normalized_throughput_is_null_without_baseline() {
    let out = locsim(&["run", "--workload", "sps", "--protocol", "h-wal", "--txs", "1000", "--json"]);
    assert!(json(&out)[0]["normalized_throughput"].is_null());
}

#[test]
fn same_seed_twice_gives_identical_results_apart_from_host_timing() {
    let strip = |mut v: Vec<Value>| {
        for r in &mut v {
            let o = r.as_object_mut().unwrap();
            o.remove("host_seconds");
            o.remove("sim_mem_accesses_per_second");
        }
        serde_json::to_string(&v).unwrap()
    };
    let mut args = vec!["--seed", "7"];
    args.extend_from_slice(&SMALL);
    let (a, b) = (strip(run_json(&args)), strip(run_json(&args)));
    assert_eq!(a, b);
    let mut other = vec!["--seed", "8"];
    other.extend_from_slice(&SMALL);
    assert_ne!(a, strip(run_json(&other)), "a different seed must change something");
}

fn crashtest(protocol: &str, extra: &[&str]) -> (Option<i32>, Value) {
    let txs = if extra.contains(&"--exhaustive") { "150" } else { "600" };
    let mut args = vec!["crashtest", "--workload", "sps", "--protocol", protocol, "--txs", txs, "--json"];
    args.extend_from_slice(&SMALL);
    args.extend_from_slice(extra);
    let out = locsim(&args);
    (out.status.code(), serde_json::from_slice(&out.stdout).expect("JSON even on violation"))
}

#[test]
fn crashtest_finds_no_violation_in_correct_protocols() {
    for p in ["s-wal", "h-wal", "ec-wal"] {
        let (code, r) = crashtest(p, &["--crashes", "1500"]);
        assert_eq!(r["violations"], 0, "{p}: {}", r["first_violation"]);
        assert_eq!(code, Some(0));
        assert!(r["crash_points"].as_u64().unwrap() >= 1500, "{p}");
        assert!(r["first_violation"].is_null());
        assert!(r["states_per_second"].as_f64().unwrap() > 0.0);
        // The workers' time split: both parts measured, neither more than the workers had.
        let (w, wall) = (&r["worker_seconds"], r["check_seconds"].as_f64().unwrap());
        let parts: Vec<f64> = ["starting", "following", "at_points"].map(|k| w[k].as_f64().unwrap()).into();
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(parts.iter().all(|&s| s > 0.0) && parts.iter().sum::<f64>() <= workers * wall, "{p}: {w} of {wall} s");
    }
}

/// Persistence domains (docs/machine.md): under `eadr` and `bbb` a correct protocol survives
/// every crash point, and S-WAL's truncation before its in-place stores is still caught (the
/// stores, durable when performed, keep their program order in the durable image).
#[test]
fn crashtest_under_eadr_and_bbb_passes_and_still_catches_an_order_bug() {
    for d in ["machine.persist_domain=eadr", "machine.persist_domain=bbb"] {
        for p in ["s-wal", "h-wal", "loc-wal"] {
            let (code, r) = crashtest(p, &["--crashes", "800", "--set", d]);
            assert_eq!((code, r["violations"].as_u64()), (Some(0), Some(0)), "{p} {d}: {}", r["first_violation"]);
        }
        let (code, r) =
            crashtest("s-wal", &["--crashes", "1500", "--set", d, "--inject-bug", "truncate-before-checkpoint"]);
        assert_eq!(code, Some(1), "{d}: {r}");
        assert!(r["first_violation"]["replay"].as_str().unwrap().contains(d), "{d}: the replay keeps the domain");
    }
}

#[test]
fn an_unknown_persist_domain_or_the_old_adr_key_exits_2_naming_the_allowed_values() {
    for (set, want) in [
        ("machine.persist_domain=nvdimm", "`memory`, `adr`, `eadr`, `bbb`"),
        ("memory.adr=true", "machine.persist_domain"),
    ] {
        let out = locsim(&["run", "-w", "sps", "-p", "s-wal", "--txs", "10", "--set", set]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{set}: {err}");
        assert!(err.contains(want) && err.trim().lines().count() == 1, "{set}: {err}");
    }
}

/// The torn-write fixes of docs/faults.md: each replayed torn violation is gone with its knob.
#[test]
fn each_torn_write_fix_removes_its_violation() {
    for (case, fix) in [
        (
            "--workload hash --protocol loc-wal --seed 1 --txs 2000 --atomicity 8 --crash-at 339167",
            "--set log.meta_checksum=true --set loc.two_slot_head=true",
        ),
        (
            "--workload hash --protocol loc-wal --seed 1 --txs 2000 --cores 4 --atomicity 8 --set log.meta_checksum=true --crash-at 1126099",
            "--set loc.two_slot_head=true",
        ),
        (
            "--workload hash --protocol s-wal --seed 1 --txs 300 --atomicity 8 --exhaustive --set log.size_bytes=65536 --crash-at 1658328",
            "--set swal.packed_headers=true",
        ),
        (
            "--workload sps --protocol h-wal --seed 1 --txs 500 --atomicity 8 --set startgap.enabled=true --set log.size_bytes=65536 --crash-at 18080",
            "--set startgap.two_register_copies=true",
        ),
        (
            "--workload sps --protocol atom --seed 1 --txs 2000 --atomicity 8 --crash-at 18597",
            "--set atom.checked_meta=true",
        ),
        (
            "--workload sps --protocol hoop --seed 1 --txs 300 --atomicity 8 --exhaustive --set log.size_bytes=65536 --set hoop.gc_threshold_percent=5 --crash-at 23572",
            "--set hoop.two_slot_head=true",
        ),
    ] {
        let mut args: Vec<&str> = ["crashtest", "--json"].into_iter().chain(case.split_whitespace()).collect();
        assert_eq!(locsim(&args).status.code(), Some(1), "without the fix: {case}");
        args.extend(fix.split_whitespace());
        let out = locsim(&args);
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(0), "{case} {fix}: {}", r["first_violation"]);
        assert!(r["torn_states"].as_u64().unwrap() > 0, "{case}: torn states checked");
    }
}

#[test]
fn crashtest_exhaustive_on_a_short_run_finds_no_violation() {
    for p in ["s-wal", "h-wal", "ec-wal"] {
        let (code, r) = crashtest(p, &["--exhaustive"]);
        assert_eq!((code, r["violations"].as_u64()), (Some(0), Some(0)), "{p}: {}", r["first_violation"]);
        assert_eq!(r["crash_points"], r["candidate_crash_cycles"]);
        assert!(r["durable_states"].as_u64().unwrap() > 100, "{p}");
    }
}

#[test]
fn every_injected_bug_is_caught_and_its_replay_reproduces_it() {
    for (p, bug) in [
        ("h-wal", "ack-before-durable"),
        ("h-wal", "commit-before-log"),
        ("h-wal", "truncate-before-checkpoint"),
        ("s-wal", "ack-before-durable"),
        ("s-wal", "truncate-before-checkpoint"),
        ("ec-wal", "ack-before-durable"),
        ("ec-wal", "meta-before-data"),
        ("loc-wal", "ack-before-durable"),
    ] {
        // A non-default speculation degree must be part of the replay command.
        let (code, r) = crashtest(p, &["--crashes", "1500", "--inject-bug", bug, "--sd", "4"]);
        assert_eq!(code, Some(1), "{p} {bug}: exit status");
        assert!(r["violations"].as_u64().unwrap() > 0, "{p} {bug} not caught");
        let v = &r["first_violation"];
        for f in ["seed", "crash_cycle", "acked", "issued", "closest_k", "first_diff_addr", "replay"] {
            assert!(v.get(f).is_some(), "{p} {bug}: violation lacks {f}");
        }
        let replay: Vec<String> = v["replay"].as_str().unwrap().split_whitespace().skip(1).map(String::from).collect();
        assert!(replay.windows(2).any(|w| w == ["--sd", "4"]), "{p} {bug}: {replay:?}");
        let mut args: Vec<&str> = replay.iter().map(String::as_str).collect();
        args.push("--json");
        let out = locsim(&args);
        assert_eq!(out.status.code(), Some(1), "{p} {bug}: replay {args:?}");
        let again: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(again["first_violation"]["crash_cycle"], v["crash_cycle"]);
        assert_eq!(again["first_violation"]["closest_k"], v["closest_k"]);
    }
}

/// Torn writes (docs/faults.md): at `--atomicity 8` a write in flight may be durable in part.
/// H-WAL survives its torn states; LOC-WAL does not (a META with a new SID over stale tags, a
/// head with a new start and an old start TxID), and the printed replay reproduces the first
/// violation with its torn state; the report does not depend on the thread count; at 64 no torn
/// state is checked.
#[test]
fn torn_writes_break_loc_wal_not_h_wal_and_the_replay_reproduces_it() {
    let (code, r) = crashtest("h-wal", &["--crashes", "300", "--atomicity", "8"]);
    assert_eq!((code, r["violations"].as_u64()), (Some(0), Some(0)), "{}", r["first_violation"]);
    assert!(r["torn_states"].as_u64().unwrap() > 100, "{r}");
    let (_, r) = crashtest("h-wal", &["--crashes", "300"]);
    assert_eq!((r["atomicity"].as_u64(), r["torn_states"].as_u64()), (Some(64), Some(0)));
    let (code, r) = crashtest("loc-wal", &["--crashes", "300", "--atomicity", "8"]);
    assert_eq!(code, Some(1));
    let (_, one) = crashtest("loc-wal", &["--crashes", "300", "--atomicity", "8", "--threads", "1"]);
    let (_, two) = crashtest("loc-wal", &["--crashes", "300", "--atomicity", "8", "--threads", "2"]);
    assert_eq!(without_timing(one), without_timing(two), "torn states are a function of the point");
    let v = &r["first_violation"];
    assert!(v["torn"].as_str().is_some_and(|t| t.contains("torn")), "{v}");
    let replay: Vec<String> = v["replay"].as_str().unwrap().split_whitespace().skip(1).map(String::from).collect();
    assert!(replay.windows(2).any(|w| w == ["--atomicity", "8"]), "{replay:?}");
    let mut args: Vec<&str> = replay.iter().map(String::as_str).collect();
    args.push("--json");
    let again: Value = serde_json::from_slice(&locsim(&args).stdout).unwrap();
    assert_eq!(again["first_violation"]["crash_cycle"], v["crash_cycle"]);
    assert_eq!(again["first_violation"]["torn"], v["torn"]);
}

/// The report without its host-timing fields.
fn without_timing(mut v: Value) -> Value {
    for f in ["states_per_second", "check_seconds", "worker_seconds"] {
        v.as_object_mut().expect("object").remove(f);
    }
    v
}

/// The report of a crash check (`base`, `--inject-bug bug` if any) at 1, 2 and 3 threads: the
/// same apart from timing, a violation exactly with a bug; returns it.
fn same_report_at_any_thread_count<'a>(mut base: Vec<&'a str>, bug: Option<&'a str>) -> Value {
    if let Some(b) = bug {
        base.extend(["--inject-bug", b]);
    }
    let reports: Vec<Value> = ["1", "2", "3"]
        .iter()
        .map(|n| {
            let mut args = base.clone();
            args.extend(["--threads", n]);
            let out = locsim(&args);
            assert_eq!(out.status.code(), Some(bug.map_or(0, |_| 1)), "{args:?}");
            without_timing(serde_json::from_slice(&out.stdout).expect("JSON"))
        })
        .collect();
    assert_eq!(reports[0], reports[1], "{base:?}: 1 vs 2 threads");
    assert_eq!(reports[0], reports[2], "{base:?}: 1 vs 3 threads");
    if bug.is_some() {
        assert!(reports[0]["violations"].as_u64().unwrap() > 0, "{base:?} not caught");
    }
    reports[0].clone()
}

#[test]
fn crashtest_report_is_the_same_for_any_thread_count() {
    for (w, p, bug) in [
        ("sps", "h-wal", None),
        ("btree", "loc-kiln", None),
        ("hash", "ec-wal", Some("meta-before-data")),
        ("btree", "loc-wal", Some("ignore-dependency-pairs")),
    ] {
        let base = vec!["crashtest", "-w", w, "-p", p, "--txs", "300", "--crashes", "400", "--json"];
        same_report_at_any_thread_count(base, bug);
    }
}

#[test]
fn journal_crashtest_report_is_the_same_for_any_thread_count() {
    for bug in [None, Some("hot-clear-before-db-sync")] {
        let base = "journal-crashtest --app kt --config RU20-S2X --txs 60 --crashes 150 --json";
        let report = same_report_at_any_thread_count(base.split(' ').collect(), bug);
        assert_eq!(report["crash_points"].as_u64(), Some(150));
    }
}

#[test]
fn baseline_makes_no_promise_and_the_checker_says_so() {
    let (code, r) = crashtest("baseline", &["--crashes", "200", "--set", "workload.sps.entries=1048576"]);
    assert_eq!(code, Some(1));
    assert!(r["violations"].as_u64().unwrap() > 0);
}

#[test]
fn list_bugs_names_every_protocols_bugs() {
    let out = locsim(&["crashtest", "--list-bugs"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for n in [
        "h-wal",
        "s-wal",
        "ec-wal",
        "ack-before-durable",
        "commit-before-log",
        "truncate-before-checkpoint",
        "meta-before-data",
    ] {
        assert!(text.contains(n), "{n} missing: {text}");
    }
}

#[test]
fn bad_arguments_get_one_line_naming_the_allowed_values_and_exit_2() {
    assert_usage_error(&["run", "--workload", "sps", "--protocol", "x-wal"], &["x-wal", "baseline", "s-wal", "h-wal"]);
    assert_usage_error(&["run", "--workload", "nope"], &["nope", "sps", "btree"]);
    assert_usage_error(
        &["run", "--workload", "sps", "--set", "memory.latency=3"],
        &["memory.latency", "read_latency_ns"],
    );
    assert_usage_error(&["run", "--workload", "sps", "--set", "memory.banks=0"], &["memory.banks", "1..=1024"]);
    assert_usage_error(&["run", "--workload", "sps", "--sd", "33"], &["--sd", "1..=32"]);
    assert_usage_error(&["run", "--workload", "sps", "--sd", "0"], &["--sd", "1..=32"]);
    assert_usage_error(&["crashtest", "--workload", "sps", "--protocol", "loc-wal", "--sd", "40"], &["--sd", "1..=32"]);
    assert_usage_error(&["run", "--workload", "sps", "--abort-rate", "2"], &["--abort-rate", "0..=1"]);
    assert_usage_error(
        &["crashtest", "--workload", "sps", "--protocol", "h-wal", "--atomicity", "12"],
        &["--atomicity 12", "8, 16, 32, 64"],
    );
    assert_usage_error(
        &["run", "--workload", "sps", "--set", "ordering.preset=strict"],
        &["ordering.preset", "overlapped", "paper"],
    );
    assert_usage_error(
        &["crashtest", "--workload", "sps", "--protocol", "h-wal", "--set", "ordering.write_order=sometimes"],
        &["ordering.write_order", "accepted", "durable"],
    );
    assert_usage_error(&["run", "--workload", "sps", "--txs", "many"], &["many"]);
    assert_usage_error(&["run", "--workload", "sps", "--config", "/nonexistent.toml"], &["/nonexistent.toml"]);
    assert_usage_error(
        &["crashtest", "--workload", "sps", "--protocol", "h-wal", "--inject-bug", "nope"],
        &["nope", "ack-before-durable"],
    );
    assert_usage_error(
        &["crashtest", "--workload", "sps", "--protocol", "baseline", "--inject-bug", "ack-before-durable"],
        &["baseline"],
    );
    assert_usage_error(
        &["crashtest", "--workload", "sps", "--protocol", "h-wal", "--threads", "0"],
        &["--threads", "1 or more"],
    );
    assert_usage_error(&["frobnicate"], &["frobnicate"]);
    // Found by a sweep of every key over extreme values: each of these had panicked or aborted.
    assert_usage_error(
        &["run", "--workload", "sps", "--protocol", "kiln", "--set", "llc.size_bytes=68719476736"],
        &["an LLC of 68719476736 bytes", "31-bit block numbers", "2^37"],
    );
    assert_usage_error(
        &["run", "--workload", "sps", "--set", "memory.device=pcm", "--set", "pcm.chunk_program_ns=1e308"],
        &["pcm.chunk_program_ns", "at most 9223372036854775807"],
    );
}

#[test]
fn config_prints_a_toml_file_that_run_accepts() {
    let out = locsim(&["config", "--mem-latency-ns", "95"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("read_latency_ns = 95") && text.contains("write_latency_ns = 95"), "{text}");
    let path = std::env::temp_dir().join(format!("locsim-cfg-{}.toml", std::process::id()));
    std::fs::write(&path, &text).unwrap();
    let r = json(&locsim(&[
        "run",
        "--workload",
        "sps",
        "--protocol",
        "h-wal",
        "--txs",
        "100",
        "--json",
        "--config",
        path.to_str().unwrap(),
    ]));
    assert_eq!(r[0]["mem_latency_ns"], 95);
    std::fs::remove_file(path).ok();
}

#[test]
fn bench_json_reports_speed_and_slowdown_per_workload_and_protocol() {
    let out = locsim(&["bench", "--workload", "sps", "--txs", "20000", "--repeat", "1", "--json"]);
    let rows = json(&out);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), locsim::protocol::ProtocolKind::ALL.len());
    for r in rows {
        assert_eq!(r["workload"], "sps");
        assert!(r["sim_mem_accesses_per_second"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["slowdown_vs_native"].as_f64().unwrap() > 0.0, "{r}");
        if cfg!(target_arch = "x86_64") {
            // Host cycles per access are host seconds x clock / accesses.
            let (ghz, cycles) = (r["host_clock_ghz"].as_f64().unwrap(), r["host_cycles_per_access"].as_f64().unwrap());
            let expect = r["host_seconds"].as_f64().unwrap() * ghz * 1e9 / r["sim_mem_accesses"].as_f64().unwrap();
            assert!(ghz > 0.0 && (cycles - expect).abs() <= 1e-9 * expect, "{r}");
        }
    }
}

#[test]
fn bench_pcm_reports_the_pcm_device_speed_beside_the_plain_one_on_the_chosen_block_path() {
    let args = ["bench", "-w", "sps", "-p", "h-wal", "--txs", "3000", "--repeat", "1", "--pcm", "--json"];
    let out = Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).env("LOCSIM_PCM_SIMD", "portable").output();
    let rows = json(&out.expect("runs"));
    let r = &rows.as_array().expect("array")[0];
    let (plain, pcm) =
        (r["sim_mem_accesses_per_second"].as_f64().unwrap(), r["pcm_sim_mem_accesses_per_second"].as_f64().unwrap());
    let ratio = r["pcm_vs_plain"].as_f64().unwrap();
    assert!(pcm > 0.0 && (ratio - pcm / plain).abs() <= 1e-9 * ratio, "{r}");
    assert_eq!(r["pcm_simd"], "portable");
    // Without --pcm the fields are null; the PCM device cannot be its own plain reference.
    let rows = json(&locsim(&["bench", "-w", "sps", "-p", "h-wal", "--txs", "1000", "--repeat", "1", "--json"]));
    assert!(rows[0]["pcm_vs_plain"].is_null() && rows[0]["pcm_simd"].is_null());
    assert_usage_error(&["bench", "-w", "sps", "--pcm", "--set", "memory.device=pcm"], &["--pcm", "memory.device"]);
    let out = Command::new(env!("CARGO_BIN_EXE_locsim")).args(["bench"]).env("LOCSIM_PCM_SIMD", "sse").output();
    let out = out.expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.trim_end().lines().count() == 1 && err.contains("allowed auto, avx512, avx2, portable"), "{err}");
}

#[test]
fn help_is_available_for_every_subcommand() {
    for sub in ["run", "crashtest", "bench", "config"] {
        let out = locsim(&[sub, "--help"]);
        assert!(out.status.success(), "{sub}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Usage"), "{sub}");
    }
}

#[test]
fn every_loc_protocol_runs_and_reports_its_speculation_degree_and_counters() {
    let o = locsim(&[
        "run",
        "--workload",
        "sps",
        "--protocol",
        "baseline,h-wal,ec-wal,loc-wal,kiln,loc-kiln",
        "--txs",
        "2000",
        "--warmup-txs",
        "0",
        "--sd",
        "8",
        "--json",
    ]);
    let rs = json(&o);
    let rs = rs.as_array().expect("array");
    assert_eq!(rs.len(), 6);
    for r in rs {
        let p = r["protocol"].as_str().unwrap();
        let want_sd = if p.starts_with("loc-") { serde_json::json!(8) } else { serde_json::Value::Null };
        assert_eq!(r["sd"], want_sd, "{p}");
        for f in ["commit_to_ack_mean_cycles", "commit_to_ack_p99_cycles", "log_write_bytes"] {
            assert!(r.get(f).is_some(), "{p}: {f} missing");
        }
        assert!(r["normalized_throughput"].as_f64().unwrap() <= 1.0 + 1e-9, "{p}");
    }
    let loc = rs.iter().find(|r| r["protocol"] == "loc-wal").unwrap();
    for c in ["coalesced_blocks", "version_overflows", "dependency_pairs_written", "window_stall_cycles"] {
        assert!(loc["protocol_counters"].get(c).is_some(), "loc-wal counter {c} missing");
    }
    assert_eq!(loc["protocol_counters"]["windows"], 2000 / 8);
}

/// A crash test whose record would outgrow the host memory it may use stops early with one line
/// that says how long a run fits (here the limit is set small with `LOCSIM_RECORD_MEMORY`),
/// on one core and on four; a run that fits is not affected.
#[test]
fn a_crashtest_whose_record_outgrows_host_memory_stops_with_one_line() {
    let with_limit = |limit: &str, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).env("LOCSIM_RECORD_MEMORY", limit).output().expect("runs")
    };
    for cores in ["1", "4"] {
        let args = ["crashtest", "-w", "sps", "-p", "h-wal", "--cores", cores, "--txs", "1000000", "--crashes", "10"];
        let out = with_limit("4000000", &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        for n in
            ["would hold about", "for 1000000 transactions", "4.0 MB", "LOCSIM_RECORD_MEMORY", "lower --txs to about"]
        {
            assert!(err.contains(n), "`{n}` missing from: {err}");
        }
        let fits = with_limit("4000000", &["crashtest", "-w", "sps", "-p", "h-wal", "--cores", cores, "--txs", "1000"]);
        assert_eq!(fits.status.code(), Some(0), "{}", String::from_utf8_lossy(&fits.stderr));
    }
    let bad = with_limit("4 GB", &["crashtest", "-w", "sps", "-p", "h-wal", "--txs", "10"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(err.contains("LOCSIM_RECORD_MEMORY=4 GB: expected a number of bytes"), "{err}");
}
