//! Seeded mutation fuzzing of every input locsim reads from a user (docs/faults.md, "Fuzzed
//! inputs"): the TOML configuration, `--set` values, experiment specs, journal traces, trace
//! files (binary and text) and merge's shard files. Each target starts from a fixed corpus of
//! valid inputs, mutates them (bit flips, byte changes, insertions of tokens that parsers treat
//! specially, deletions, duplications, truncations, splices of two inputs) and requires that
//! the parser returns `Ok` or a one-line `Err`, never a panic. Bounded: a fixed number of inputs
//! per target, a few seconds in all. A failure prints the seed and the input; replay it with
//! `LOCSIM_FUZZ_SEED=N` (and more inputs with `LOCSIM_FUZZ_ITERS=N`).
//!
//! Not checked here: hangs (each input is small and every parser is a single pass; a hang would
//! stop the test suite) and what the CLI does with the error (tests/cli.rs and tests/reproduce.rs
//! check one-line errors with exit status 2; `merge_and_run_inputs_fail_with_one_line_and_status_2`
//! below runs the binary on a few malformed files).

use locsim::config::Config;
use locsim::journal::sql_trace::Trace;
use locsim::rng::Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::Command;

/// Tokens that parsers treat specially: delimiters, numbers at the edges of their types, other
/// types where one is expected.
const TOKENS: &[&str] = &[
    "=",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "\"",
    "'",
    ",",
    ".",
    "\n",
    "#",
    "-",
    "0",
    "-1",
    "1e400",
    "nan",
    "inf",
    "-inf",
    "18446744073709551616",
    "9223372036854775807",
    "4294967296",
    "0x",
    "true",
    "false",
    "\"\"",
    "[]",
    "{}",
    "\\u0000",
    "\u{0}",
    "é",
    "@db ",
    "@measure",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "null",
    ":",
    "1.5",
    "1e-300",
    "99999999999",
];

fn seed() -> u64 {
    std::env::var("LOCSIM_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(26)
}

fn iters(default: usize) -> usize {
    std::env::var("LOCSIM_FUZZ_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// One to four mutations of `base` (with `other`, another corpus input, for splicing).
fn mutate(rng: &mut Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = |rng: &mut Rng, v: &Vec<u8>| rng.below(v.len() as u64 + 1) as usize;
        match rng.below(8) {
            0 if !v.is_empty() => {
                let i = at(rng, &v).min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 if !v.is_empty() => {
                let i = at(rng, &v).min(v.len() - 1);
                v[i] = rng.below(256) as u8;
            }
            2 | 3 => {
                let t = TOKENS[rng.below(TOKENS.len() as u64) as usize].as_bytes();
                let i = at(rng, &v);
                v.splice(i..i, t.iter().copied());
            }
            4 => {
                let (i, j) = (at(rng, &v), at(rng, &v));
                v.drain(i.min(j)..i.max(j).min(i.min(j) + 64));
            }
            5 => {
                let (i, j) = (at(rng, &v), at(rng, &v));
                let (i, j) = (i.min(j), i.max(j).min(i.min(j) + 64));
                let copy = v[i..j].to_vec();
                let k = at(rng, &v);
                v.splice(k..k, copy);
            }
            6 => {
                let i = at(rng, &v);
                v.truncate(i);
            }
            _ => {
                let (i, j) = (at(rng, &v), rng.below(other.len() as u64 + 1) as usize);
                v.truncate(i);
                v.extend_from_slice(&other[j..]);
            }
        }
    }
    v
}

/// Run `target` on `n` mutations of the corpus: every result must be `Ok` or a one-line `Err`.
fn fuzz(name: &str, corpus: &[Vec<u8>], n: usize, mut target: impl FnMut(&[u8]) -> Result<(), String>) -> usize {
    assert!(!corpus.is_empty());
    let seed = seed();
    let mut rng = Rng::derive(seed, name.bytes().fold(0, |h: u64, b| h.wrapping_mul(31) + b as u64));
    let mut errors = 0;
    for i in 0..n {
        let base = &corpus[rng.below(corpus.len() as u64) as usize];
        let other = &corpus[rng.below(corpus.len() as u64) as usize];
        let input = if i < corpus.len() { corpus[i].clone() } else { mutate(&mut rng, base, other) };
        let finding = |what: &str| -> String {
            let file = std::env::temp_dir().join(format!("locsim-fuzz-{name}-seed{seed}-input{i}"));
            std::fs::write(&file, &input).expect("write the finding");
            let head: String = String::from_utf8_lossy(&input).chars().take(200).collect();
            format!("{name}, seed {seed}, input {i}: {what} (LOCSIM_FUZZ_SEED={seed} replays; input in {})\ninput starts: {head:?}", file.display())
        };
        match catch_unwind(AssertUnwindSafe(|| target(&input))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                assert!(!e.trim_end().contains('\n'), "{}", finding(&format!("error not one line: {e:?}")));
                assert!(!e.is_empty(), "{}", finding("empty error"));
                errors += 1;
            }
            Err(_) => panic!("{}", finding("panicked")),
        }
    }
    eprintln!("fuzz {name}: {n} inputs, {errors} rejected with one line, seed {seed}");
    errors
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(b: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(b).map_err(|e| format!("not UTF-8: {e}"))
}

#[test]
fn config_files_malformed_anyhow_give_one_line_errors() {
    let mut corpus = vec![Config::default().to_toml().into_bytes()];
    corpus.push(b"[pcm]\nwrite_mode = \"diff\"\ncell_endurance_writes = 1e6\n".to_vec());
    corpus.push(b"[memory]\ndevice = \"pcm\"\n[startgap]\nenabled = true\npsi_writes = 8\n".to_vec());
    corpus.push(b"[ordering]\npreset = \"paper\"\n[core]\nfreq_mhz = 2000\n".to_vec());
    let rejected =
        fuzz("config_toml", &corpus, iters(3000), |b| Config::build(Some(text(b)?), &[]).map(|_| ()).map_err(|e| e.0));
    assert!(rejected > 0, "no input was rejected: the mutations are too weak");
}

#[test]
fn set_values_malformed_anyhow_give_one_line_errors() {
    let corpus: Vec<Vec<u8>> = [
        "pcm.write_mode=\"fnw\"",
        "memory.device=pcm",
        "core.freq_mhz=1000",
        "log.size_bytes=1048576",
        "startgap.psi_writes=8",
        "workload.sps.entries=4096",
        "ordering.preset=paper",
        "memory.write_latency_ns=[35, 95]",
        "pcm.cell_endurance_writes=1e8",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    fuzz("set_value", &corpus, iters(3000), |b| {
        let sets: Vec<String> = text(b)?.split('\n').map(String::from).collect();
        Config::build(None, &sets).map(|_| ()).map_err(|e| e.0)
    });
}

#[test]
fn experiment_specs_malformed_anyhow_give_one_line_errors() {
    let mut corpus = Vec::new();
    for dir in [root().join("experiments"), root().join("tests/data/reproduce")] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        corpus.extend(files.iter().map(|p| std::fs::read(p).unwrap()));
    }
    fuzz("spec", &corpus, iters(2000), |b| {
        let s = locsim::reproduce::spec::parse("fuzz", text(b)?, true)?;
        // What a run does with a spec before simulating: its points and columns.
        let points = s.all_points();
        std::hint::black_box((points.len(), s.columns()));
        Ok(())
    });
}

#[test]
fn journal_traces_malformed_anyhow_give_one_line_errors() {
    use locsim::journal::apps::{generate, App};
    let corpus: Vec<Vec<u8>> = ["ms", "fb", "tw"]
        .iter()
        .filter_map(|a| App::parse(a).ok())
        .map(|a| generate(a, 1, 1, Some(6)).to_text().into_bytes())
        .chain([b"# setup\n@db a.db\nCREATE TABLE t(x);\n@measure\nBEGIN\nINSERT INTO t VALUES(1);\nCOMMIT\n".to_vec()])
        .collect();
    assert!(corpus.len() > 1, "the app generators are missing");
    fuzz("journal_trace", &corpus, iters(3000), |b| Trace::parse(text(b)?).map(|_| ()));
}

/// Every record of a trace file, decoded (errors as the decoder reports them).
fn decode_all(b: &[u8]) -> Result<(), String> {
    let mut d = locsim_trace::Decoder::new(b).map_err(|e| e.to_string())?;
    while d.next_record().map_err(|e| e.to_string())?.is_some() {}
    Ok(())
}

#[test]
fn trace_files_malformed_anyhow_give_one_line_errors() {
    use locsim::trace::{generate, GenSpec};
    use locsim::workload::WorkloadKind;
    let mut corpus = Vec::new();
    for (w, enc) in [("sps", locsim_trace::Encoding::Binary), ("btree", locsim_trace::Encoding::Text)] {
        let cfg =
            Config::build(None, &["workload.sps.entries=64".into(), "workload.btree.key_space=64".into()]).unwrap();
        let g = GenSpec {
            workload: WorkloadKind::parse(w).unwrap(),
            txs: 6,
            warmup_txs: 2,
            seed: 1,
            abort_rate: 0.2,
            encoding: enc,
            cfg,
        };
        let mut out = Vec::new();
        generate(&g, &mut out).unwrap();
        corpus.push(out);
    }
    // Transactions of several cores (`core` records), each taking a lock (`lock` records), in
    // both encodings.
    for enc in [locsim_trace::Encoding::Binary, locsim_trace::Encoding::Text] {
        use locsim_trace::Record;
        let mut e = locsim_trace::Encoder::with_version(Vec::new(), enc, locsim_trace::LOCK_VERSION).unwrap();
        e.write(&Record::Region { base: 0x1000, size: 4096 }).unwrap();
        for (i, core) in [0, 2, 2, 1, 300, 0].into_iter().enumerate() {
            e.set_core(core).unwrap();
            let addr = 0x1000 + 64 * i as u64;
            for r in [
                Record::Begin,
                Record::Lock { addr },
                Record::Load { addr, len: 8 },
                Record::Store { addr, bytes: &[7; 8] },
                Record::Commit,
            ] {
                e.write(&r).unwrap();
            }
        }
        e.write(&Record::End).unwrap();
        corpus.push(e.finish().unwrap());
    }
    fuzz("trace_file", &corpus, iters(2000), decode_all);
}

#[path = "../src/testdir.rs"]
mod testdir;
use testdir::TempDir;

fn tmp_dir(tag: &str) -> TempDir {
    TempDir::new(&format!("fuzz-{tag}"))
}

/// A shard file of the tiny test specs (one shard of one), with the directory holding it.
fn shard_file(tag: &str) -> (TempDir, PathBuf, Vec<u8>) {
    let exp = tmp_dir(&format!("{tag}-exp"));
    for f in ["tiny-bar.toml", "tiny-line.toml"] {
        std::fs::copy(root().join("tests/data/reproduce").join(f), exp.join(f)).unwrap();
    }
    let out = tmp_dir(&format!("{tag}-shard"));
    let o = locsim::reproduce::Options {
        experiments: exp.to_path_buf(),
        out: out.to_path_buf(),
        quick: true,
        only: vec![],
        jobs: 1,
        shard: Some((0, 1)),
        bench: false,
        quiet: true,
        timings: None,
        workers: None,
    };
    locsim::reproduce::reproduce(&o).unwrap();
    let path = out.join("shard-0-of-1.json");
    let bytes = std::fs::read(&path).unwrap();
    (out, path, bytes)
}

#[test]
fn shard_files_malformed_anyhow_give_one_line_errors_and_no_partial_output() {
    let (_shard, path, bytes) = shard_file("merge");
    let out = tmp_dir("merge-out");
    let dir = path.parent().unwrap().to_path_buf();
    fuzz("merge", &[bytes], iters(300), |b| {
        std::fs::write(&path, b).unwrap();
        let r = locsim::reproduce::merge(std::slice::from_ref(&dir), &out).map(|_| ());
        // Whatever happened, no temporary file is left behind and no output is half written.
        let left: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "temporary files left: {left:?}");
        r
    });
}

fn locsim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).output().expect("runs")
}

fn assert_one_line_status_2(o: &std::process::Output, what: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: not one line: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

#[test]
fn merge_and_run_inputs_fail_with_one_line_and_status_2() {
    let (_shard, path, bytes) = shard_file("cli");
    let dir = path.parent().unwrap();
    let out = tmp_dir("cli-out");
    std::fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
    let o = locsim(&["merge", "--out", out.to_str().unwrap(), dir.to_str().unwrap()]);
    assert_one_line_status_2(&o, "truncated shard");
    let cfg = dir.join("bad.toml");
    std::fs::write(&cfg, "[pcm]\ncell_endurance_writes = nan\n").unwrap();
    assert_one_line_status_2(&locsim(&["run", "--config", cfg.to_str().unwrap(), "--txs", "10"]), "nan endurance");
    std::fs::write(&cfg, "[core\nfreq_mhz = 1").unwrap();
    assert_one_line_status_2(&locsim(&["run", "--config", cfg.to_str().unwrap(), "--txs", "10"]), "broken TOML");
    let trace = dir.join("bad.trace");
    std::fs::write(&trace, b"LOCSIMT\x00\xff\xff\xff\xff").unwrap();
    assert_one_line_status_2(&locsim(&["run", "--trace", trace.to_str().unwrap(), "--txs", "10"]), "garbage trace");
    let jt = dir.join("bad.sqltrace");
    std::fs::write(&jt, "@db a.db\n@measure\nBEGIN\nSELEC nonsense;\nCOMMIT\n").unwrap();
    let o = locsim(&["journal", "--trace-file", jt.to_str().unwrap()]);
    assert!(
        o.status.code() != Some(101),
        "journal trace with bad SQL panicked: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// What the fuzzing found, kept as cases (each panicked or gave a multi-line error before its fix).
#[test]
fn earlier_findings_stay_fixed() {
    // A claim kind holding a newline (TOML `\n`) was quoted into a two-line error.
    let tiny = std::fs::read_to_string(root().join("tests/data/reproduce/tiny-bar.toml")).unwrap();
    let e = locsim::reproduce::spec::parse("fig", &tiny.replace("kind = \"bound\"", "kind = \"bo\\nd\""), true)
        .unwrap_err();
    assert!(e.contains("claim kind `bo\\nd`") && !e.contains('\n'), "{e}");
    let (_shard, path, bytes) = shard_file("findings");
    let dir = vec![path.parent().unwrap().to_path_buf()];
    let out = tmp_dir("findings-out");
    let shard: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let edit = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut j = shard.clone();
        f(j["points"].as_object_mut().unwrap());
        std::fs::write(&path, j.to_string()).unwrap();
        locsim::reproduce::merge(&dir, &out).unwrap_err()
    };
    // A foreign point whose text holds a newline: named on one line.
    let e = edit(&|p| {
        p.insert("kind=sim\nset=[]".into(), serde_json::json!([]));
    });
    assert!(e.contains("not its own (kind=sim\\nset=[])") && !e.contains('\n'), "{e}");
    // A point with one value too few indexed past its end when the table was built.
    let e = edit(&|p| {
        let v = p.values_mut().next().unwrap().as_array_mut().unwrap();
        v.pop();
    });
    assert!(e.contains("values, its kind gives") && e.contains("damaged cache or shard"), "{e}");
}
