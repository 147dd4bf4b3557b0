//! Worker processes for the points that must not run beside each other in one process (SQLite
//! keeps process-wide state: [`super::kind::Executor::exclusive`]). With `--jobs N`, worker
//! thread 0 runs such points in the `reproduce` process itself and every other worker thread in
//! a `locsim reproduce-worker` child of its own, one point at a time: N SQLite points run at
//! once, each alone in its process, instead of one chain through a single process.
//!
//! The child reads one request per line on standard input (JSON: a point's kind, overrides,
//! coordinates, seed and run lengths, or the simulator-speed measurement) and answers one line
//! per request on standard output. Its first line is its build ([`super::cache::build_id`]); a
//! child of another build is refused, so a binary replaced during a run cannot mix results.
//! Values travel as the bit patterns of their f64s ([`super::cache::encode`]): a point run in a
//! child gives the same bytes as run in the parent.

use super::kind::{Job, Kind};
use super::point::{Point, Values};
use crate::bench::BenchRow;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What a worker is asked to compute.
#[derive(Serialize, Deserialize)]
pub enum Request {
    /// One point: its kind (`sim`, `journal`), the spec's overrides, coordinates, seed and run
    /// lengths.
    Point { kind: String, set: Vec<String>, coords: Vec<(String, String)>, seed: u64, txs: u64, warmup_txs: u64 },
    /// The report's simulator-speed measurement (`super::measure_speed`).
    Speed,
}

/// A worker's answer to one [`Request`].
#[derive(Serialize, Deserialize)]
pub enum Answer {
    /// A point's values (encoded), the configuration keys its run never read
    /// ([`super::kind::Executor::run_reads`]) and the CPU seconds of the worker's thread over it.
    Point {
        values: serde_json::Value,
        unread: Vec<String>,
        cpu_seconds: f64,
    },
    Speed(Vec<BenchRow>),
    Error(String),
}

impl Request {
    pub fn point(kind: Kind, job: &Job) -> Request {
        Request::Point {
            kind: kind.name().into(),
            set: job.set.to_vec(),
            coords: job.point.coords.clone(),
            seed: job.point.seed,
            txs: job.txs,
            warmup_txs: job.warmup_txs,
        }
    }

    /// Compute the answer in this process.
    fn answer(self) -> Answer {
        match self {
            Request::Point { kind, set, coords, seed, txs, warmup_txs } => {
                let kind = match Kind::parse(&kind) {
                    Ok(k) => k,
                    Err(e) => return Answer::Error(e),
                };
                let point = Point { coords, seed };
                let job = Job { point: &point, set: &set, txs, warmup_txs };
                match super::timing::timed(|| kind.executor().run_reads(&job)) {
                    (Ok((v, unread)), _, cpu) => {
                        Answer::Point { values: super::cache::encode(&v), unread, cpu_seconds: cpu }
                    }
                    (Err(e), _, _) => Answer::Error(e),
                }
            }
            Request::Speed => match super::measure_speed() {
                Ok(rows) => Answer::Speed(rows),
                Err(e) => Answer::Error(e),
            },
        }
    }
}

/// `locsim reproduce-worker`: print the build, then answer each request line until standard
/// input ends.
pub fn serve() -> Result<i32, String> {
    let mut out = std::io::stdout().lock();
    let io = |e: std::io::Error| format!("reproduce-worker: {e}");
    writeln!(out, "{}", serde_json::to_string(super::cache::build_id()).expect("serializable")).map_err(io)?;
    out.flush().map_err(io)?;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(io)?;
        let answer = match serde_json::from_str::<Request>(&line) {
            Ok(r) => r.answer(),
            Err(e) => Answer::Error(format!("reproduce-worker: bad request: {e}")),
        };
        writeln!(out, "{}", serde_json::to_string(&answer).expect("serializable")).map_err(io)?;
        out.flush().map_err(io)?;
    }
    Ok(0)
}

/// A running `locsim reproduce-worker` child.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    /// Start `exe reproduce-worker` and check that it is this build.
    pub fn spawn(exe: &Path) -> Result<Worker, String> {
        let mut child = Command::new(exe)
            .arg("reproduce-worker")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("reproduce worker {}: {e}", exe.display()))?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut w = Worker { child, stdin, stdout };
        let build: String = serde_json::from_str(&w.line()?).map_err(|e| format!("reproduce worker: {e}"))?;
        if build != super::cache::build_id() {
            return Err(format!(
                "reproduce worker {}: build {build}, not this build {}",
                exe.display(),
                super::cache::build_id()
            ));
        }
        Ok(w)
    }

    fn line(&mut self) -> Result<String, String> {
        let mut s = String::new();
        match self.stdout.read_line(&mut s) {
            Ok(0) => Err("reproduce worker: ended early".into()),
            Ok(_) => Ok(s),
            Err(e) => Err(format!("reproduce worker: {e}")),
        }
    }

    /// Send `r` and wait for the answer.
    pub fn ask(&mut self, r: &Request) -> Result<Answer, String> {
        let stdin = self.stdin.as_mut().ok_or("reproduce worker: closed")?;
        writeln!(stdin, "{}", serde_json::to_string(r).expect("serializable"))
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("reproduce worker: {e}"))?;
        serde_json::from_str(&self.line()?).map_err(|e| format!("reproduce worker: {e}"))
    }

    /// A point's values, the configuration keys its run never read, and its CPU seconds.
    pub fn point(&mut self, r: &Request) -> Result<(Values, Vec<String>, f64), String> {
        match self.ask(r)? {
            Answer::Point { values, unread, cpu_seconds } => {
                let v = super::cache::decode(&values).ok_or("reproduce worker: corrupt values")?;
                Ok((v, unread, cpu_seconds))
            }
            Answer::Error(e) => Err(e),
            Answer::Speed(_) => Err("reproduce worker: answered another request".into()),
        }
    }
}

impl Drop for Worker {
    /// Close its input (it ends at the end of input) and reap it, so that its CPU time counts in
    /// the parent's.
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
