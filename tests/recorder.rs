//! The C recorder (crates/recorder, include/locsim_pm.h): a C program compiled with the system
//! C compiler records its transactions, and the trace replays and crash-checks clean under
//! every protocol.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_locsim");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Build the recorder's static library in a target directory of its own (the outer cargo holds
/// the lock of the main one while tests run).
fn recorder_lib(dir: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = dir.join("recorder-target");
    let out = Command::new(cargo)
        .args(["build", "--release", "--offline", "-p", "locsim-recorder", "--manifest-path"])
        .arg(Path::new(ROOT).join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    target.join("release").join("liblocsim_recorder.a")
}

#[test]
fn a_c_program_traced_by_the_recorder_replays_and_crash_checks_clean_under_every_protocol() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("recorder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = recorder_lib(&dir);
    let exe = dir.join("bank");
    let cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(Path::new(ROOT).join("crates/recorder/include"))
        .arg(Path::new(ROOT).join("examples/c/bank.c"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("the system C compiler runs");
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
    let trace = dir.join("bank.trace");
    let run = Command::new(&exe).arg(&trace).arg("600").output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(String::from_utf8_lossy(&run.stdout), "600 transfers, total 4096000\n");
    let trace = trace.to_str().unwrap();

    let out = Command::new(BIN)
        .args(["run", "--trace", trace, "-p", "baseline,s-wal,h-wal,ec-wal,loc-wal,kiln,loc-kiln", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rs: Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in rs.as_array().unwrap() {
        assert_eq!((r["txs_committed"].as_u64(), r["txs_aborted"].as_u64()), (Some(540), Some(60)), "{r}");
    }
    for p in ["s-wal", "h-wal", "ec-wal", "loc-wal", "kiln", "loc-kiln"] {
        let out = Command::new(BIN)
            .args(["crashtest", "--trace", trace, "-p", p, "--crashes", "300", "--json"])
            .output()
            .unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        assert_eq!((out.status.code(), &r["violations"]), (Some(0), &Value::from(0)), "{p}: {r}");
        let (code, r) = {
            let out = Command::new(BIN)
                .args([
                    "crashtest",
                    "--trace",
                    trace,
                    "-p",
                    p,
                    "--crashes",
                    "2000",
                    "--json",
                    "--inject-bug",
                    "ack-before-durable",
                ])
                .output()
                .unwrap();
            (out.status.code(), serde_json::from_slice::<Value>(&out.stdout).unwrap())
        };
        assert_eq!(code, Some(1), "{p} with ack-before-durable not caught: {r}");
    }
}
