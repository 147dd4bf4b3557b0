//! Multi-core runs and their crash check as a user sees them (docs/multicore.md): the N-core
//! oracle finds no violation in the logging protocols, finds the cross-core defects with a
//! replay line that reproduces them, gives the same report for any number of host threads, and
//! bad core counts are one-line errors.

use serde_json::Value;
use std::process::{Command, Output};

fn locsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).output().expect("runs")
}

/// A crash report as JSON, and the process's exit status.
fn crashtest(args: &[&str]) -> (Value, Option<i32>) {
    let mut all = vec!["crashtest", "--json"];
    all.extend_from_slice(args);
    let out = locsim(&all);
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (v, out.status.code())
}

/// A report without its host timings and provenance.
fn verdicts(mut v: Value) -> Value {
    for k in ["states_per_second", "check_seconds", "worker_seconds", "git_rev", "version"] {
        v.as_object_mut().unwrap().remove(k);
    }
    v
}

const HOT: [&str; 2] = ["--set", "workload.sps.entries=1024"];

#[test]
fn the_logging_protocols_recover_on_four_cores_and_the_report_does_not_depend_on_threads() {
    for p in ["s-wal", "h-wal", "ec-wal", "loc-wal", "loc-kiln"] {
        let args = ["-w", "sps", "-p", p, "--cores", "4", "--txs", "600", "--crashes", "300", HOT[0], HOT[1]];
        let (one, code) = crashtest(&[&args[..], &["--threads", "1"]].concat());
        assert_eq!(code, Some(0), "{p}: {one}");
        assert_eq!(one["violations"], 0, "{p}: {one}");
        assert!(one["crash_points"].as_u64().unwrap() >= 100, "{p}: {one}");
        let (two, _) = crashtest(&[&args[..], &["--threads", "2"]].concat());
        assert_eq!(verdicts(one), verdicts(two), "{p}: the report depends on --threads");
    }
}

#[test]
fn torn_writes_are_checked_on_four_cores_and_the_report_does_not_depend_on_threads() {
    let args = ["-w", "sps", "-p", "h-wal", "--cores", "4", "--txs", "300", "--crashes", "300", "--atomicity", "8"];
    let (one, code) = crashtest(&[&args[..], &HOT, &["--threads", "1"]].concat());
    assert_eq!(code, Some(0), "{one}");
    assert_eq!(one["violations"], 0, "{one}");
    assert!(one["torn_states"].as_u64().unwrap() >= 100, "{one}");
    let (two, _) = crashtest(&[&args[..], &HOT, &["--threads", "2"]].concat());
    assert_eq!(verdicts(one), verdicts(two), "the torn report depends on --threads");
    let (bad, code) = crashtest(&[&args[..], &HOT, &["--inject-bug", "commit-before-log"]].concat());
    assert_eq!(code, Some(1), "{bad}");
    assert!(bad["violations"].as_u64().unwrap() > 0, "{bad}");
}

/// A core that ran behind another core's commit takes a lock that core released no earlier than
/// the release (docs/multicore.md, "Scheduler, locks and workloads"). Taken at its own earlier
/// clock, its transaction read the releasing transaction's data before that commit in simulated
/// time, and HOOP's garbage collection made it durable out of dependence order (closure
/// violations at these seeds before the rule).
#[test]
fn a_lock_is_taken_no_earlier_than_its_release_so_hoop_recovers_on_four_cores() {
    for seed in ["2", "11"] {
        let (r, code) = crashtest(&[
            "-w",
            "sps",
            "-p",
            "hoop",
            "--seed",
            seed,
            "--txs",
            "400",
            "--abort-rate",
            "0.1",
            "--cores",
            "4",
            "--crashes",
            "2000",
            HOT[0],
            HOT[1],
            "--set",
            "log.size_bytes=65536",
            "--set",
            "hoop.gc_threshold_percent=5",
        ]);
        assert_eq!(code, Some(0), "seed {seed}: {r}");
        assert_eq!(r["violations"], 0, "seed {seed}: {r}");
        assert!(r["crash_points"].as_u64().unwrap() >= 1000, "seed {seed}: {r}");
    }
}

/// A window closed for another core (a forced close) is acknowledged on that core's clock; the
/// closed core, whose clock may be behind, must not acknowledge its next window earlier
/// (docs/multicore.md, "LOC-WAL on N cores"). Before the rule this run acknowledged core 6's
/// transaction 1021 at cycle 187347 while its window became durable at 188601 under every
/// domain where a write is durable at acceptance: 16 closure violations over its 4 587 states.
#[test]
fn a_core_acknowledges_no_window_before_the_one_forced_closed_for_another_core() {
    for domain in ["adr", "eadr", "bbb", "memory"] {
        let set_domain = format!("machine.persist_domain={domain}");
        let args = ["-w", "sps", "-p", "loc-wal", "--seed", "1", "--txs", "2000", "--cores", "8", "--exhaustive"];
        let (r, code) = crashtest(&[&args[..], &HOT, &["--set", &set_domain]].concat());
        assert_eq!(code, Some(0), "{domain}: {r}");
        assert_eq!(r["violations"], 0, "{domain}: {r}");
        assert!(r["crash_points"].as_u64().unwrap() >= 4000, "{domain}: {r}");
    }
}

/// LOC-Kiln with transactions that overflow a small NV-LLC on four cores: placing one victim can
/// register another core's window (a forced close), which drops the registered versions that
/// window's transactions superseded, one of them a victim of the same access still waiting to
/// be placed. Before the rule (such a victim's record is forgotten and nothing is written) the
/// run panicked with "an evicted version is tracked".
#[test]
fn loc_kiln_survives_a_version_dropped_while_its_victim_waits_on_four_cores() {
    let args = ["-w", "sps", "-p", "loc-kiln", "--cores", "4", "--txs", "300", "--set", "workload.sps.swaps_per_tx=64"];
    no_violation_over_a_small_llc(&args, 1000);
}

/// Under `adr` (a write durable once accepted) a core whose clock is behind can issue a write
/// at a cycle before another core's write to the same bank issued first: before the controller
/// accepted a bank's writes in issue order (`memctl`), the older bytes of a block could land
/// last in the durable image. Kiln on eight cores: a core logging another core's evicted line
/// into its fallback-log region rewrote a block group's META from behind, the META naming fewer
/// blocks landed last, and an acknowledged transaction lost the line (9 violations at these
/// 3 000 points). ATOM on four cores: a line evicted by a core ahead was written home, then its
/// owner's commit wrote the line's final bytes home from behind, and the evicted, intermediate
/// bytes landed last (234 violations).
#[test]
fn kiln_keeps_a_line_logged_by_a_core_whose_clock_is_behind_on_eight_cores() {
    let args = ["-w", "sps", "-p", "kiln", "--cores", "8", "--seed", "2", "--txs", "300", "--abort-rate", "0.2"];
    let more = ["--set", "workload.sps.swaps_per_tx=200", "--set", "machine.persist_domain=adr"];
    no_violation_over_a_small_llc(&[&args[..], &more].concat(), 3000);
}

#[test]
fn atom_keeps_a_commits_home_write_issued_from_behind_an_eviction_on_four_cores() {
    let args = ["-w", "sps", "-p", "atom", "--cores", "4", "--seed", "3", "--txs", "400", "--abort-rate", "0.1"];
    let more = ["--set", "workload.sps.swaps_per_tx=200", "--set", "machine.persist_domain=adr"];
    no_violation_over_a_small_llc(&[&args[..], &more].concat(), 1500);
}

/// `crashtest ARGS` at `crashes` points over a 128 KiB LLC (16 KiB L2, 4 KiB L1), so that large
/// transactions overflow it: exit 0, no violation.
fn no_violation_over_a_small_llc(args: &[&str], crashes: u64) {
    let n = crashes.to_string();
    let small = ["--set", "llc.size_bytes=131072", "--set", "l2.size_bytes=16384", "--set", "l1.size_bytes=4096"];
    let (r, code) = crashtest(&[args, &small, &["--crashes", &n]].concat());
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(r["violations"], 0, "{r}");
    assert!(r["crash_points"].as_u64().unwrap() >= crashes, "{r}");
}

/// `crashtest` with `bug` finds a violation of `kind`, and its replay line finds it again;
/// returns the first violation.
fn found(protocol: &str, bug: &str, kind: &str) -> Value {
    found_at(protocol, bug, kind, "1")
}

/// [`found`] at `seed`.
fn found_at(protocol: &str, bug: &str, kind: &str, seed: &str) -> Value {
    let args = [
        "-w",
        "sps",
        "-p",
        protocol,
        "--cores",
        "4",
        "--txs",
        "2000",
        "--crashes",
        "1000",
        "--inject-bug",
        bug,
        "--seed",
        seed,
    ];
    let (v, code) = crashtest(&[&args[..], &HOT].concat());
    assert_eq!(code, Some(1), "{bug}: {v}");
    assert!(v["violations"].as_u64().unwrap() > 0, "{bug}: {v}");
    let first = &v["first_violation"];
    assert_eq!(first["kind"], kind, "{bug}: {v}");
    let replay = first["replay"].as_str().unwrap();
    let words: Vec<&str> = replay.split_whitespace().skip(2).collect();
    let (again, code) = crashtest(&words);
    assert_eq!(code, Some(1), "replay {replay}: {again}");
    assert_eq!(again["first_violation"]["crash_cycle"], first["crash_cycle"], "replay {replay}");
    first.clone()
}

/// The report names where the recovered image differs from the closest valid set's image: the
/// one line the stale log entry was replayed over (line 33, whose byte 2160 differs).
#[test]
fn a_log_replayed_over_another_cores_newer_write_is_found() {
    let first = found_at("s-wal", "lazy-truncate", "closure", "2");
    assert_eq!(first["differing_blocks"], 1, "{first}");
    assert_eq!(first["first_diff_addr"], 2160, "{first}");
    assert!(first["detail"].as_str().unwrap().starts_with("line 33:"), "{first}");
}

#[test]
fn a_loc_wal_window_made_durable_before_its_source_is_found() {
    found("loc-wal", "dependent-before-source", "closure");
}

#[test]
fn a_loc_kiln_window_registered_before_its_source_is_found() {
    found("loc-kiln", "dependent-before-source", "closure");
}

#[test]
fn a_lost_coherence_invalidation_is_found() {
    found("h-wal", "lost-invalidation", "structure");
}

/// A lost invalidation can hand a core a stale pointer (an rbtree node's child since rotated
/// away), which it follows off the data area: the run stops with that fault, reported as the
/// bug caught (exit 1, kind `program-fault`) rather than a panic, and the replay line finds the
/// same fault again.
#[test]
fn a_stale_pointer_from_a_lost_invalidation_is_a_program_fault_not_a_panic() {
    let args = [
        "-w",
        "rbtree",
        "-p",
        "h-wal",
        "--cores",
        "4",
        "--set",
        "workload.rbtree.trees=4",
        "--inject-bug",
        "lost-invalidation",
    ];
    let (v, code) = crashtest(&args);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(v["violations"], 1, "{v}");
    assert_eq!(v["violations_by_kind"]["program-fault"], 1, "{v}");
    let first = &v["first_violation"];
    let detail = first["detail"].as_str().unwrap();
    assert!(detail.starts_with("the simulated program accessed memory outside the data area: core "), "{v}");
    let replay = first["replay"].as_str().unwrap();
    let (again, code) = crashtest(&replay.split_whitespace().skip(2).collect::<Vec<_>>());
    assert_eq!(code, Some(1), "replay {replay}: {again}");
    assert_eq!(again["first_violation"]["detail"], first["detail"], "replay {replay}");
}

#[test]
fn bad_core_counts_and_unsupported_combinations_are_one_line_errors() {
    for (args, needle) in [
        (vec!["run", "-w", "sps", "-p", "h-wal", "--cores", "0"], "allowed 1..=16"),
        (vec!["run", "-w", "sps", "-p", "h-wal", "--cores", "17"], "allowed 1..=16"),
        (vec!["run", "-w", "sqlite", "-p", "baseline", "--cores", "2"], "one core"),
        (vec!["crashtest", "-w", "sps", "-p", "s-wal", "--inject-bug", "lazy-truncate"], "--cores"),
    ] {
        let out = locsim(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: `{needle}` missing from {err}");
    }
}

#[test]
fn the_pcm_device_counts_bit_updates_on_eight_cores_and_lock_lines_never_reach_it() {
    let out = locsim(&[
        "run",
        "-w",
        "sps",
        "-p",
        "h-wal",
        "--cores",
        "8",
        "--txs",
        "400",
        "--set",
        "memory.device=pcm",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pcm = &v[0]["pcm"];
    let regions: Vec<&str> = pcm["regions"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(!regions.is_empty() && regions.iter().all(|r| !r.contains("lock")), "{regions:?}");
    let data = pcm["regions"].as_array().unwrap().iter().find(|r| r["name"] == "data").unwrap();
    let log = pcm["regions"].as_array().unwrap().iter().find(|r| r["name"] == "log").unwrap();
    assert!(data["total_bit_updates"].as_u64().unwrap() > 0, "{pcm}");
    assert!(log["total_bit_updates"].as_u64().unwrap() > 0, "{pcm}");
}
