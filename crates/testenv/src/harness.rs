//! A test harness printing libtest's lines, which can report a test ignored at run time, and
//! the record of what each binary skipped for the crate's doc-tests (src/lib.rs).

use crate::Missing;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{mpsc, Mutex};
use std::time::Instant;

/// What a test function returns when it may lack something: `Err` reports it ignored (failed
/// in CI) with the [`Missing`] as the reason.
pub type Outcome = Result<(), Missing>;

/// A test function's return type: `()` or [`Outcome`].
pub trait IntoOutcome {
    fn into_outcome(self) -> Outcome;
}

impl IntoOutcome for () {
    fn into_outcome(self) -> Outcome {
        Ok(())
    }
}

impl IntoOutcome for Outcome {
    fn into_outcome(self) -> Outcome {
        self
    }
}

type TestFn = Box<dyn FnOnce() -> Outcome + Send>;

/// One test: its name (as filters match it) and its function.
pub struct Test {
    name: String,
    f: TestFn,
}

impl Test {
    pub fn new<R: IntoOutcome>(name: impl Into<String>, f: impl FnOnce() -> R + Send + 'static) -> Test {
        Test { name: name.into(), f: Box::new(move || f().into_outcome()) }
    }
}

/// libtest's arguments that this harness understands.
#[derive(Debug, Default, PartialEq)]
struct Args {
    filters: Vec<String>,
    skip: Vec<String>,
    exact: bool,
    list: bool,
    quiet: bool,
    ignored_only: bool,
    threads: Option<usize>,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value =
            |name: &str| inline.clone().or_else(|| it.next()).ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--exact" => a.exact = true,
            "--list" => a.list = true,
            "-q" | "--quiet" => a.quiet = true,
            "--ignored" => a.ignored_only = true,
            "--include-ignored" | "--nocapture" | "--show-output" | "--test" => {}
            "--skip" => a.skip.push(value("--skip")?),
            "--test-threads" => {
                let v = value("--test-threads")?;
                a.threads =
                    Some(v.parse().ok().filter(|&n| n > 0).ok_or(format!("--test-threads {v}: a positive count"))?);
            }
            "--color" | "--format" | "-Z" => {
                value(&flag)?;
            }
            f if f.starts_with('-') => {
                return Err(format!(
                "unrecognized option {f} (allowed: filters, --exact, --skip, --list, -q, --test-threads, --ignored, \
                     --include-ignored, --nocapture, --show-output, --color, --format)"
            ))
            }
            _ => a.filters.push(arg),
        }
    }
    Ok(a)
}

impl Args {
    fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| if self.exact { name == f } else { name.contains(f.as_str()) };
        !self.ignored_only && (self.filters.is_empty() || self.filters.iter().any(hit)) && !self.skip.iter().any(hit)
    }
}

enum Verdict {
    Ok,
    Failed(String),
    Ignored(Missing),
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panicked".into())
}

/// The test binary's name: its file name without cargo's `-<hash>`.
fn binary_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe.as_deref().and_then(Path::file_stem).map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    match stem.rsplit_once('-') {
        Some((name, hash)) if !hash.is_empty() && hash.chars().all(|c| c.is_ascii_hexdigit()) => name.to_string(),
        _ => stem,
    }
}

/// Runs `tests` as libtest would for the arguments this binary was given, printing its lines:
/// each test `ok`, `FAILED`, or `ignored, needs WHAT: WHY` when it returned `Err(Missing)`
/// (`FAILED` in CI), then `test result: ...`. Exit status 101 when one failed.
pub fn run(tests: Vec<Test>) -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(101);
        }
    };
    let total = tests.len();
    let selected: Vec<Test> = tests.into_iter().filter(|t| args.selects(&t.name)).collect();
    if args.list {
        for t in &selected {
            println!("{}: test", t.name);
        }
        if !args.quiet {
            println!("\n{} test{}, 0 benchmarks", selected.len(), if selected.len() == 1 { "" } else { "s" });
        }
        return ExitCode::SUCCESS;
    }
    let filtered = total - selected.len();
    let n = selected.len();
    println!("\nrunning {n} test{}", if n == 1 { "" } else { "s" });
    let start = Instant::now();
    let threads = args
        .threads
        .or_else(|| std::env::var("RUST_TEST_THREADS").ok().and_then(|v| v.parse().ok()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, n.max(1));
    let results = run_tests(selected, threads, args.quiet);
    if args.quiet && n > 0 {
        println!();
    }
    report(&results, filtered, start)
}

/// Runs `tests` on `threads` threads, printing each verdict as it comes (a line, or with
/// `quiet` a character); the verdicts in that order.
fn run_tests(tests: Vec<Test>, threads: usize, quiet: bool) -> Vec<(String, Verdict)> {
    let queue = Mutex::new(tests.into_iter().rev().collect::<Vec<_>>());
    let (tx, rx) = mpsc::channel::<(String, Verdict)>();
    let ci = crate::in_ci();
    let mut results = Vec::new();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (queue, tx) = (&queue, tx.clone());
            s.spawn(move || loop {
                let Some(t) = queue.lock().unwrap().pop() else { break };
                let name = t.name.clone();
                // A thread named after the test, as libtest's: its panic message names it.
                let verdict = match std::thread::Builder::new().name(name.clone()).spawn(t.f).unwrap().join() {
                    Ok(Ok(())) => Verdict::Ok,
                    Ok(Err(m)) if ci => Verdict::Failed(format!("CI runs every test, and this one {m}")),
                    Ok(Err(m)) => Verdict::Ignored(m),
                    Err(p) => Verdict::Failed(panic_text(&*p)),
                };
                if tx.send((name, verdict)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut out = std::io::stdout();
        for (name, v) in rx {
            let _ = match (&v, quiet) {
                (Verdict::Ok, false) => writeln!(out, "test {name} ... ok"),
                (Verdict::Failed(_), false) => writeln!(out, "test {name} ... FAILED"),
                (Verdict::Ignored(m), false) => writeln!(out, "test {name} ... ignored, {m}"),
                (Verdict::Ok, true) => write!(out, "."),
                (Verdict::Failed(_), true) => write!(out, "F"),
                (Verdict::Ignored(_), true) => write!(out, "i"),
            };
            let _ = out.flush();
            results.push((name, v));
        }
    });
    results
}

/// Prints the failures and libtest's `test result:` line, records the skipped tests; the
/// exit status (101 when one failed).
fn report(results: &[(String, Verdict)], filtered: usize, start: Instant) -> ExitCode {
    let failed: Vec<(&String, &String)> = results
        .iter()
        .filter_map(|(n, v)| match v {
            Verdict::Failed(why) => Some((n, why)),
            _ => None,
        })
        .collect();
    let skipped: Vec<(&String, &Missing)> = results
        .iter()
        .filter_map(|(n, v)| match v {
            Verdict::Ignored(m) => Some((n, m)),
            _ => None,
        })
        .collect();
    if !failed.is_empty() {
        println!("\nfailures:\n");
        for (name, why) in &failed {
            println!("---- {name} stdout ----\n{why}\n");
        }
        println!("failures:");
        for (name, _) in &failed {
            println!("    {name}");
        }
    }
    let passed = results.len() - failed.len() - skipped.len();
    println!(
        "\ntest result: {}. {passed} passed; {} failed; {} ignored; 0 measured; {filtered} filtered out; finished in {:.2}s\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        skipped.len(),
        start.elapsed().as_secs_f64()
    );
    record(&binary_name(), &skipped);
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}

/// This crate's build directory, where the records and the doc-tests' file live.
const STATE: &str = env!("OUT_DIR");

/// `s` as a Rust identifier: every other character `_`.
fn ident(s: &str) -> String {
    let mut id: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    while id.contains("__") {
        id = id.replace("__", "_");
    }
    let id = id.trim_matches('_').to_string();
    if id.starts_with(|c: char| c.is_ascii_digit()) || id.is_empty() {
        format!("_{id}")
    } else {
        id
    }
}

/// A test binary's name and the tests it skipped: (test, what it needs, why it is missing).
type Record = (String, Vec<(String, String, String)>);

/// One module per binary, one per skipped test, holding one ignored doc-test named after what
/// the test needs.
fn skipped_rs(records: &[Record]) -> String {
    let mut s = String::new();
    for (binary, tests) in records.iter().filter(|(_, t)| !t.is_empty()) {
        s += &format!("pub mod {} {{\n", ident(binary));
        for (test, what, why) in tests {
            s += &format!(
                "    pub mod {} {{\n        /// ```ignore\n        /// needs {}: {}\n        /// ```\n        pub mod needs_{} {{}}\n    }}\n",
                ident(test),
                what.replace('\n', " "),
                why.replace('\n', " "),
                ident(what)
            );
        }
        s += "}\n";
    }
    s
}

/// Records what this binary skipped (`STATE/skipped/<binary>.txt`: the parent's process id,
/// then `test\twhat\twhy` lines) and rewrites `STATE/skipped.rs` from the records of binaries
/// run by the same parent (this `cargo test`); older ones are dropped.
fn record(binary: &str, skipped: &[(&String, &Missing)]) {
    let dir = Path::new(STATE).join("skipped");
    if std::fs::create_dir_all(&dir).is_err() {
        return; // a binary copied away from its build: nothing to tell the doc-tests
    }
    let Ok(lock) = std::fs::File::options().create(true).truncate(false).write(true).open(dir.join(".lock")) else {
        return;
    };
    let _ = lock.lock();
    // SAFETY: getppid has no preconditions and cannot fail.
    let parent = unsafe { libc::getppid() }.to_string();
    let clean = |s: &str| s.replace(['\t', '\n'], " ");
    let mut text = format!("{parent}\n");
    for (test, m) in skipped {
        text += &format!("{}\t{}\t{}\n", clean(test), clean(&m.what), clean(&m.why));
    }
    let _ = std::fs::write(dir.join(format!("{binary}.txt")), text);
    let mut records: Vec<Record> = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir).into_iter().flatten().flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files.iter().filter(|f| f.extension().is_some_and(|x| x == "txt")) {
        let Ok(t) = std::fs::read_to_string(f) else { continue };
        let mut lines = t.lines();
        if lines.next() != Some(parent.as_str()) {
            continue;
        }
        let tests = lines
            .filter_map(|l| {
                let mut p = l.splitn(3, '\t');
                Some((p.next()?.to_string(), p.next()?.to_string(), p.next()?.to_string()))
            })
            .collect();
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        records.push((name, tests));
    }
    let _ = std::fs::write(Path::new(STATE).join("skipped.rs"), skipped_rs(&records));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Result<Args, String> {
        parse(a.iter().map(|s| s.to_string()))
    }

    #[test]
    fn libtests_arguments_parse_and_select() {
        let a = args(&["report", "--skip", "slow", "--test-threads=2", "-q", "--color", "never"]).unwrap();
        assert_eq!(
            a,
            Args {
                filters: vec!["report".into()],
                skip: vec!["slow".into()],
                quiet: true,
                threads: Some(2),
                ..Args::default()
            }
        );
        assert!(a.selects("report_html_renders"));
        assert!(!a.selects("report_slow"));
        assert!(!a.selects("python"));
        let exact = args(&["--exact", "report"]).unwrap();
        assert!(exact.selects("report") && !exact.selects("report_html"));
        assert!(!args(&["--ignored"]).unwrap().selects("anything"));
        assert!(args(&["--bogus"]).unwrap_err().contains("unrecognized option --bogus"));
        assert!(args(&["--test-threads", "0"]).is_err());
    }

    #[test]
    fn skipped_tests_become_ignored_doc_tests_named_after_what_they_need() {
        let records = vec![
            ("report_html".to_string(), vec![("renders".into(), "chromium".into(), "apt-get is not on PATH".into())]),
            ("python".to_string(), vec![]),
        ];
        let s = skipped_rs(&records);
        assert_eq!(
            s,
            "pub mod report_html {\n    pub mod renders {\n        /// ```ignore\n        /// needs chromium: apt-get is \
             not on PATH\n        /// ```\n        pub mod needs_chromium {}\n    }\n}\n"
        );
        assert_eq!(ident("sqlite3, libsqlite3-dev"), "sqlite3_libsqlite3_dev");
        assert_eq!(ident("3d"), "_3d");
    }
}
