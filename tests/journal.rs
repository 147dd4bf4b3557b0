//! The `locsim journal` and `locsim journal-crashtest` command lines (short traces).

use std::process::Command;

#[path = "../src/testdir.rs"]
mod testdir;
use testdir::TempDir;

fn locsim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn journal_json_has_the_required_fields_for_each_configuration_and_is_deterministic() {
    let args = ["journal", "--app", "tw", "--trace", "2", "--txs", "30", "--config", "RR,RU-S2X,RR-S2X", "--json"];
    let (code, out, err) = locsim(&args);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rs = v.as_array().unwrap();
    assert_eq!(rs.len(), 3);
    for (r, name) in rs.iter().zip(["RR", "RU-S2X", "RR-S2X"]) {
        assert_eq!(r["config"], name);
        assert_eq!(r["app"], "tw");
        assert_eq!(r["trace"], "2");
        for f in [
            "page_writes",
            "total_bit_updates",
            "max_bit_updates",
            "energy_nj",
            "avg_cmd_latency_ns",
            "avg_cmd_counted_ns",
            "avg_cmd_counted_nojournal_ns",
            "energy_counted_nj",
            "avg_cmd_cpu_ns",
            "vm_steps_per_command",
            "git_rev",
            "seed",
        ] {
            assert!(!r[f].is_null(), "{name}: {f} missing");
        }
        assert!(r["total_bit_updates"].as_u64().unwrap() > 0);
        // The counted time leaves out the flash syncs of the whole command time; SQLite's CPU
        // time comes from its instruction count; the cited chip programs a chunk in 5 us.
        let f = |k: &str| r[k].as_f64().unwrap();
        assert!(f("avg_cmd_counted_ns") < f("avg_cmd_latency_ns"), "{name}");
        assert!(f("avg_cmd_cpu_ns") > 0.0 && f("vm_steps_per_command") > 1.0, "{name}");
        // ... its ARM instructions, from the table's row of tw trace 2.
        assert_eq!(r["cpu_time_source"], "arm-a9", "{name}");
        assert!(f("arm_instructions_per_command") > 1000.0 * f("vm_steps_per_command") * 0.9, "{name}");
        assert_eq!(r["pcm_chunk_program_ns"].as_u64(), Some(5000));
    }
    assert_eq!(rs[0]["total_bit_updates_vs_rr"].as_f64(), Some(1.0));
    assert_eq!(rs[2]["max_bit_updates_vs_rr_s2x"].as_f64(), Some(1.0));
    assert_eq!(locsim(&args).1, out, "same seed, same bytes");
}

/// A list of configurations runs SQLite for the first and replays its recorded calls for the
/// others (docs/journal.md, "What runs"): each gives what a run of it alone, with SQLite, gives.
#[test]
fn each_configuration_of_a_list_reports_what_it_reports_alone() {
    let base = ["journal", "--app", "kt", "--trace", "1", "--txs", "40", "--seed", "3", "--json", "--config"];
    let run = |configs: &str| {
        let (code, out, err) = locsim(&[&base[..], &[configs]].concat());
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v.as_array().unwrap().clone()
    };
    // The ratios to RR and RR-S2X depend on the list; every other field must not.
    let own = |mut r: serde_json::Value| {
        let m = r.as_object_mut().unwrap();
        for k in
            ["total_bit_updates_vs_rr", "max_bit_updates_vs_rr_s2x", "energy_vs_rr_s2x", "energy_counted_vs_rr_s2x"]
        {
            m.remove(k);
        }
        r
    };
    let configs = ["RU20-S2X-WH64", "RR", "RU2F-S2X", "RR-S2X"];
    let listed = run(&configs.join(","));
    assert_eq!(listed.len(), configs.len());
    for (r, c) in listed.into_iter().zip(configs) {
        let alone = run(c).remove(0);
        assert_eq!(own(r), own(alone), "{c}");
    }
}

#[test]
fn unknown_configuration_names_fail_with_one_line_and_exit_2() {
    for bad in [
        vec!["journal", "--app", "tw", "--config", "RU-S3"],
        vec!["journal", "--app", "xx"],
        vec!["journal", "--app", "tw", "--trace", "5"],
        vec!["journal", "--app", "tw", "--frames", "2"],
        vec!["journal-crashtest", "--app", "kt", "--config", "RU", "--inject-bug", "nope"],
        vec!["journal", "--app", "tw", "--config", "RUF"],
        vec!["journal", "--app", "tw", "--set", "memory.device=pcm"],
        vec!["journal", "--app", "tw", "--set", "pcm.chunk_bytes=7"],
        vec!["journal", "--app", "tw", "--cpu-ns-per-command", "100000001"],
        // The whole generated trace is held in memory: this one had the process killed.
        vec!["journal", "--app", "fb", "--txs", "18446744073709551615"],
        vec!["journal-crashtest", "--app", "fb", "--config", "RU", "--txs", "1000001"],
    ] {
        let (code, out, err) = locsim(&bad);
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(out.is_empty());
        assert_eq!(err.trim_end().lines().count(), 1, "{bad:?}: {err}");
    }
    let (_, _, err) = locsim(&["journal", "--app", "tw", "--config", "RU-S3"]);
    assert!(err.contains("(RR | RU[n[F]]) [-S2[X]] [-WHm] [-INVp]"), "{err}");
    let (_, _, err) = locsim(&["journal-crashtest", "--app", "kt", "--config", "RU", "--inject-bug", "nope"]);
    assert!(err.contains("place-taken-portion, stale-association-kept, portion-limit-shared"), "{err}");
}

#[test]
fn a_trace_file_replays_and_a_bad_one_names_its_line() {
    let dir = TempDir::new("journal");
    let (code, text, err) = locsim(&["journal", "--app", "kt", "--txs", "10", "--emit-trace"]);
    assert_eq!(code, 0, "{err}");
    let good = dir.join("kt.trace");
    std::fs::write(&good, &text).unwrap();
    let (code, out, err) = locsim(&["journal", "--trace-file", good.to_str().unwrap(), "--config", "RU-S2X", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["transactions"], 10);
    let bad = dir.join("bad.trace");
    std::fs::write(&bad, "@db a.db\n@measure\nCOMMIT\n").unwrap();
    let (code, _, err) = locsim(&["journal", "--trace-file", bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("trace line 3"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn journal_crashtest_reports_zero_violations_and_exits_1_on_an_injected_bug() {
    let base =
        ["journal-crashtest", "--app", "gm", "--txs", "20", "--config", "RU20-S2X-WH64", "--crashes", "25", "--json"];
    let (code, out, err) = locsim(&base);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["crash_points"], 25);
    assert_eq!(v["violations"], 0);
    let mut with_bug = base.to_vec();
    with_bug[8] = "60";
    with_bug.extend(["--inject-bug", "hot-clear-before-db-sync"]);
    let (code, out, _) = locsim(&with_bug);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v["violations"].as_u64().unwrap() > 0);
    // The replay line is a whole command: run as it stands, it finds the same violation.
    let replay = v["violation_details"][0]["replay"].as_str().unwrap();
    let event = v["violation_details"][0]["event"].as_u64().unwrap();
    let words: Vec<&str> = replay.split_whitespace().collect();
    assert_eq!(&words[..6], ["locsim", "journal-crashtest", "--app", "gm", "--trace", "1"], "{replay}");
    let (code, out, err) = locsim(&[&words[1..], &["--json"]].concat());
    assert_eq!(code, 1, "{replay}: {err}");
    let again: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((again["crash_points"].as_u64(), again["violations"].as_u64()), (Some(1), Some(1)), "{replay}");
    assert_eq!(again["violation_details"][0]["event"].as_u64(), Some(event));
}

#[test]
fn a_sql_script_reports_the_built_in_fields_and_its_errors_by_line() {
    let args = ["journal", "--sql", "examples/sql/notes.sql", "--config", "RR-S2X,RU20-S2X-WH64", "--json"];
    let (code, out_sql, err) = locsim(&args);
    assert_eq!(code, 0, "{err}");
    let sql: serde_json::Value = serde_json::from_str(&out_sql).unwrap();
    let (code, out, err) = locsim(&["journal", "--app", "tw", "--txs", "5", "--config", "RR-S2X", "--json"]);
    assert_eq!(code, 0, "{err}");
    let builtin: serde_json::Value = serde_json::from_str(&out).unwrap();
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&sql[0]), keys(&builtin[0]));
    assert_eq!(sql.as_array().unwrap().len(), 2);
    assert!(sql[0]["commands"].as_u64().unwrap() > 2000, "{}", sql[0]["commands"]);
    assert!(sql[1]["total_bit_updates"].as_u64().unwrap() < sql[0]["total_bit_updates"].as_u64().unwrap());
    assert_eq!(sql[0]["statement_errors"], 0);
    let (_, again, _) = locsim(&args);
    assert_eq!(again, out_sql, "same script, config and seed: byte-identical");

    let dir = TempDir::new("journal-sql");
    let script = dir.join("e.sql");
    std::fs::write(
        &script,
        "CREATE TABLE t(x UNIQUE);\nINSERT INTO t VALUES(1);\n\nINSERT INTO t VALUES(1);\nINSERT INTO t VALUES(2);\n",
    )
    .unwrap();
    let s = script.to_str().unwrap();
    let (code, _, err) = locsim(&["journal", "--sql", s, "--config", "RR"]);
    assert_eq!(code, 2);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("line 4 (INSERT INTO t VALUES(1)): UNIQUE constraint failed"), "{err}");
    let (code, out, err) = locsim(&["journal", "--sql", s, "--config", "RR", "--on-error", "continue", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("line 4"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v[0]["statement_errors"].as_u64(), v[0]["commands"].as_u64()), (Some(1), Some(4)));
    let two = dir.join("two.sql");
    std::fs::write(
        &two,
        "CREATE TABLE t(x);\n.open 'file:b.db?vfs=pcmjournal'\nCREATE TABLE u(y);\nBEGIN;\nINSERT INTO u VALUES(1);\n\
         INSERT INTO u VALUES(2);\nCOMMIT;\n.open app.db\nINSERT INTO t VALUES(3);\n",
    )
    .unwrap();
    let (code, out, err) = locsim(&["journal", "--sql", two.to_str().unwrap(), "--config", "RU-S2X", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v[0]["transactions"].as_u64(), v[0]["allocator"]["journals"].as_u64()), (Some(4), Some(4)));
    assert_eq!(v[0]["area_overhead_bytes"], 0);
    let not_sql = dir.join("x.png");
    std::fs::write(&not_sql, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    for bad in [
        vec!["journal", "--sql", not_sql.to_str().unwrap()],
        vec!["journal", "--sql", "tests/journal.rs"],
        vec!["journal", "--sql", s, "--on-error", "maybe"],
        vec!["journal-crashtest", "--sql", "Cargo.toml", "--config", "RR"],
    ] {
        let (code, _, err) = locsim(&bad);
        assert_eq!(code, 2, "{bad:?}");
        assert_eq!(err.trim_end().lines().count(), 1, "{bad:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn journal_crashtest_runs_a_sql_script_and_catches_an_injected_bug_in_it() {
    let base = ["journal-crashtest", "--sql", "examples/sql/notes.sql", "--config", "RU20-S2X-WH64", "--crashes", "40"];
    let (code, out, err) = locsim(&[&base[..], &["--json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["crash_points"].as_u64(), v["violations"].as_u64()), (Some(40), Some(0)));
    let (code, out, _) = locsim(&[&base[..], &["--inject-bug", "reuse-live-portion", "--json"]].concat());
    assert_eq!(code, 1, "{out}");
}

/// `--cpu-time` names its source; a bad one is one line naming the allowed values, exit 2.
#[test]
fn cpu_time_selects_the_host_calibrated_variant_and_refuses_others() {
    let base = ["journal", "--app", "kt", "--trace", "1", "--txs", "10", "--config", "RR", "--json", "--cpu-time"];
    let (code, out, err) = locsim(&[&base[..], &["host-calibrated"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["cpu_time_source"], "host-calibrated");
    assert_eq!(v[0]["arm_instructions_per_command"].as_f64(), Some(0.0));
    let (code, _, err) = locsim(&[&base[..], &["x86"]].concat());
    assert_eq!(code, 2);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--cpu-time x86: allowed arm-a9, host-calibrated"), "{err}");
}
