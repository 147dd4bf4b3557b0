//! `locsim reproduce` and `locsim merge` as a user runs them: one-line errors with exit status 2
//! for bad specs and arguments and the files written (report.html rendered by headless
//! Chromium: tests/report_html.rs).

use std::path::Path;
use std::process::{Command, Output};

fn locsim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).output().expect("runs")
}

#[path = "../src/testdir.rs"]
mod testdir;
use testdir::TempDir;

fn tmp_dir(tag: &str) -> TempDir {
    TempDir::new(&format!("cli-reproduce-{tag}"))
}

/// Small SPS specs (4096 entries, 60 transactions): a bar chart and a line chart.
const TINY: &str = include_str!("data/reproduce/tiny-bar.toml");
const TINY_LINE: &str = include_str!("data/reproduce/tiny-line.toml");

fn experiments(tag: &str, specs: &[(&str, &str)]) -> TempDir {
    let d = tmp_dir(tag);
    for (name, text) in specs {
        std::fs::write(d.join(format!("{name}.toml")), text).expect("write spec");
    }
    d
}

/// Exit status 2 and one line on stderr containing every needle.
fn assert_usage_error(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    for n in needles {
        assert!(err.contains(n), "`{n}` missing from: {err}");
    }
}

fn reproduce(exp: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "reproduce",
        "--quick",
        "--no-bench",
        "--experiments",
        exp.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    locsim(&args)
}

#[test]
fn spec_with_unknown_key_or_protocol_fails_with_one_line_and_status_2() {
    let out = tmp_dir("bad-out");
    let exp = experiments("bad-key", &[("fig", &TINY.replace("average = true", "average = true\nlegend = 1"))]);
    assert_usage_error(&reproduce(&exp, &out, &[]), &["experiment fig", "unknown field `legend`"]);
    let exp = experiments("bad-protocol", &[("fig", &TINY.replace("\"ec-wal\"]", "\"hw-wal\"]"))]);
    assert_usage_error(&reproduce(&exp, &out, &[]), &["unknown protocol `hw-wal`", "allowed baseline, s-wal, h-wal"]);
    let exp = experiments("bad-only", &[("fig", TINY)]);
    assert_usage_error(&reproduce(&exp, &out, &["--only", "gif"]), &["--only gif", "allowed fig"]);
    assert_usage_error(&reproduce(&exp, &out, &["--shard", "2/2"]), &["--shard 2/2", "0 <= I < N"]);
    assert_usage_error(&locsim(&["merge", "--out", out.to_str().unwrap(), exp.to_str().unwrap()]), &["no shard"]);
}

#[test]
fn shipped_specs_of_both_kinds_run() {
    let out = tmp_dir("shipped");
    let exp = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    let o = reproduce(&exp, &out, &["--only", "pset,journal-fig18"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!stdout.contains("not run"), "{stdout}");
    let fig18 = std::fs::read_to_string(out.join("journal-fig18.csv")).unwrap();
    assert!(fig18.lines().count() > 4 && fig18.contains("RU20-S2X-WH64"), "{fig18}");
    for f in ["pset.csv", "pset.json", "pset.svg", "journal-fig18.svg", "REPORT.md", "report.html"] {
        assert!(out.join(f).exists(), "{f} not written");
    }
    let csv = std::fs::read_to_string(out.join("pset.csv")).unwrap();
    assert_eq!(csv.lines().count(), 7, "header and six workloads: {csv}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("pset.json")).unwrap()).unwrap();
    for k in ["version", "git_rev", "seeds", "config_hash", "spec_hash"] {
        assert!(!json["provenance"][k].is_null(), "provenance.{k} missing");
    }
}

/// Each run is its own process, so no SQLite simulation of another test runs beside these.
#[test]
fn sqlite_points_are_identical_whatever_runs_beside_them() {
    let exp = experiments("sqlite", &[("tiny-sqlite", include_str!("data/reproduce/tiny-sqlite.toml"))]);
    let (a, b) = (tmp_dir("sqlite-a"), tmp_dir("sqlite-b"));
    for (out, jobs) in [(&a, "1"), (&b, "3")] {
        let o = reproduce(&exp, out, &["--jobs", jobs]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let csv = |d: &Path| std::fs::read_to_string(d.join("tiny-sqlite.csv")).unwrap();
    assert_eq!(csv(&a), csv(&b), "--jobs 1 and --jobs 3 differ");
}

/// Output files of a reproduction (no cache, no temporary dot files), name -> bytes.
fn outputs(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap()))
        .filter(|(n, _)| !n.starts_with('.'))
        .collect()
}

/// SIGKILL at seeded random moments (fractions of an uninterrupted run's wall time: the moments
/// adapt to the host's speed; nothing is asserted about time), each killed run resumed from the
/// cache by the next: after every kill, each output file present equals the uninterrupted run's
/// byte for byte (written whole or not at all) and every cache entry parses; the final outputs
/// equal the uninterrupted run's. Replay a seed with `LOCSIM_KILL_SEED=N`.
#[test]
fn reproduce_killed_at_random_moments_resumes_to_the_same_bytes() {
    let seed = std::env::var("LOCSIM_KILL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(26);
    eprintln!("kill test seed {seed} (LOCSIM_KILL_SEED={seed} replays it)");
    let longer = |t: &str| t.replace("txs = 60", "txs = 40000").replace("seeds = [1, 2]", "seeds = [1, 2, 3]");
    let exp = experiments("kill", &[("tiny-bar", &longer(TINY)), ("tiny-line", &longer(TINY_LINE))]);
    let (whole, killed) = (tmp_dir("kill-whole"), tmp_dir("kill-killed"));
    let start = std::time::Instant::now();
    let o = reproduce(&exp, &whole, &["--jobs", "1"]);
    let wall = start.elapsed();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = outputs(&whole);
    let mut rng = locsim::rng::Rng::new(seed);
    let mut hit = 0;
    for k in 0..6 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_locsim"))
            .args(["reproduce", "--quick", "--no-bench", "--jobs", "1", "--experiments"])
            .args([exp.as_os_str(), "--out".as_ref(), killed.as_os_str()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawns");
        let delay = wall.mul_f64(rng.below(1000) as f64 / 1000.0);
        std::thread::sleep(delay);
        let running = child.try_wait().expect("wait").is_none();
        hit += running as usize;
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        eprintln!(
            "kill {k}: after {delay:?} of {wall:?}, {}",
            if running { "while running" } else { "after it ended" }
        );
        for (name, bytes) in outputs(&killed) {
            assert!(want.get(&name) == Some(&bytes), "kill {k}: {name} differs from the uninterrupted run's");
        }
        for e in std::fs::read_dir(killed.join("cache")).into_iter().flatten() {
            let p = e.unwrap().path();
            if !p.file_name().unwrap().to_string_lossy().starts_with('.') {
                let text = std::fs::read_to_string(&p).unwrap();
                assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "kill {k}: {} damaged", p.display());
            }
        }
    }
    let o = reproduce(&exp, &killed, &["--jobs", "1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(outputs(&killed), want, "resumed outputs differ from the uninterrupted run's");
    eprintln!("{hit} of 6 kills landed while reproduce ran");
    assert!(hit > 0, "no kill landed while reproduce ran: the test proved nothing");
}
