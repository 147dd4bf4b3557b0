//! The C recorder (crates/recorder, include/locsim_pm.h): a C program compiled with the system
//! C compiler records its transactions, and the trace replays and crash-checks clean under
//! every protocol.

use locsim::trace::format::{Decoder, Record};
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

/// The directory of this test process and `examples/c/NAME.c` compiled in it against the
/// recorder.
fn compiled(name: &str) -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("recorder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = recorder_lib(&dir);
    let exe = dir.join(name);
    let cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(Path::new(ROOT).join("crates/recorder/include"))
        .arg(Path::new(ROOT).join(format!("examples/c/{name}.c")))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("the system C compiler runs");
    assert!(cc.status.success(), "cc: {}", String::from_utf8_lossy(&cc.stderr));
    (dir, exe)
}

/// What a trace holds: per core its (committed, aborted) transactions, the number of `core`
/// records, and the region's bytes after replaying it in stream order on plain memory (an
/// abort undoes its transaction's stores).
struct Replayed {
    per_core: std::collections::BTreeMap<u32, (u64, u64)>,
    core_records: u64,
    image: Vec<u8>,
}

fn replay_in_order(trace: &Path) -> Replayed {
    let mut d = Decoder::new(std::fs::File::open(trace).unwrap()).unwrap();
    let (mut base, mut image, mut undo) = (0, Vec::new(), Vec::<(usize, Vec<u8>)>::new());
    let mut r = Replayed { per_core: Default::default(), core_records: 0, image: Vec::new() };
    while let Some(rec) = d.next_record().unwrap() {
        match rec {
            Record::Region { base: b, size } => (base, image) = (b, vec![0u8; size as usize]),
            Record::Init { addr, bytes } | Record::Store { addr, bytes } => {
                let a = (addr - base) as usize;
                if matches!(rec, Record::Store { .. }) {
                    undo.push((a, image[a..a + bytes.len()].to_vec()));
                }
                image[a..a + bytes.len()].copy_from_slice(bytes);
            }
            Record::Begin => undo.clear(),
            Record::Commit => r.per_core.entry(d.core()).or_default().0 += 1,
            Record::Abort => {
                for (a, old) in undo.drain(..).rev() {
                    image[a..a + old.len()].copy_from_slice(&old);
                }
                r.per_core.entry(d.core()).or_default().1 += 1;
            }
            Record::Core { .. } => r.core_records += 1,
            _ => {}
        }
    }
    r.image = image;
    r
}

#[test]
fn a_c_program_traced_by_the_recorder_replays_and_crash_checks_clean_under_every_protocol() {
    let (dir, exe) = compiled("bank");
    let trace = dir.join("bank.trace");
    let run = Command::new(&exe).arg(&trace).arg("600").output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(String::from_utf8_lossy(&run.stdout), "600 transfers, total 4096000\n");
    // A program that never calls pm_thread records as thread 0: no `core` record.
    let r = replay_in_order(&trace);
    assert_eq!((r.core_records, r.per_core.into_iter().collect::<Vec<_>>()), (0, vec![(0, (540, 60))]));
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

#[test]
fn a_threaded_c_program_records_each_thread_as_its_core_in_a_serial_order_of_the_program() {
    let (dir, exe) = compiled("bank_threads");
    let (trace, heap) = (dir.join("bank4.trace"), dir.join("bank4.heap"));
    let run = Command::new(&exe).arg(&trace).args(["300", "4"]).arg(&heap).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(String::from_utf8_lossy(&run.stdout), "4 threads, 300 transfers each, total 4096000\n");
    let r = replay_in_order(&trace);
    // Every thread's transactions under its own core number, every tenth aborted.
    let want: Vec<(u32, (u64, u64))> = (0..4).map(|c| (c, (270, 30))).collect();
    assert_eq!(r.per_core.into_iter().collect::<Vec<_>>(), want);
    assert!(r.core_records >= 3, "{} core records", r.core_records);
    // The stream's order is a serial order of the program: replayed in it, the stores give
    // the heap the program ended with, byte for byte.
    assert_eq!(r.image, std::fs::read(&heap).unwrap());
    // On one core the first record of core 1, 2 or 3 is refused: one line, exit status 2.
    let out = Command::new(BIN).args(["run", "--trace", trace.to_str().unwrap(), "-p", "h-wal"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: trace record at byte offset ") && err.trim_end().ends_with("allowed 0..=0 (--cores 1)"),
        "{err}"
    );
}
