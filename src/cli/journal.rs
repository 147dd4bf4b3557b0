//! `locsim journal` and `locsim journal-crashtest`: the PCM SQLite journal (src/journal/).

use crate::journal::replay::{OnError, Setup};
use crate::journal::{self, apps, crash, media::Timing, script, sql_trace::Trace, vfs::Bug, App, Policy};
use clap::Args;

/// Configurations run by default: eight of the journal paper's configurations (its Table IV).
pub const DEFAULT_CONFIGS: &str = "RR,RR-S2,RR-S2X,RU,RU-S2,RU-S2X,RU20-S2X,RU20-S2X-WH64";

/// Where the trace comes from (a built-in application's, a recorded trace file, a SQL script),
/// what a statement SQLite rejects does, the seed, the journal area and the transaction count:
/// the arguments `journal` and `journal-crashtest` share.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Application of Table III: fb, tw, kt, gm.
    #[arg(long, required_unless_present_any = ["trace_file", "sql"])]
    pub app: Option<String>,
    /// Trace 1..=4 of the application (increasing length).
    #[arg(long, default_value_t = 1)]
    pub trace: u32,
    /// A recorded SQL trace file instead (format: docs/journal.md).
    #[arg(long, value_name = "FILE", conflicts_with = "app")]
    pub trace_file: Option<String>,
    /// Your own SQL script instead (`-`: standard input; form: docs/your-sqlite-app.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["app", "trace_file"])]
    pub sql: Option<String>,
    /// A statement SQLite rejects: stop (exit 2 naming its line) or continue (counted in
    /// `statement_errors`, each printed to standard error with its line).
    #[arg(long, default_value = "stop", value_name = "stop|continue")]
    pub on_error: String,
    /// Seed of the trace generator and of SQLite's journal nonces.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Frames (64 KiB) of the PCM journal area, 3..=64 (the paper: 32 = 2 MB).
    #[arg(long, default_value_t = journal::DEFAULT_FRAMES)]
    pub frames: u64,
    /// Override the application trace's transaction count, 0..=1000000.
    #[arg(long, conflicts_with = "sql")]
    pub txs: Option<u64>,
}

#[derive(Args, Debug)]
pub struct JournalArgs {
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Comma-separated configurations of Table IV (RR, RU20-S2X-WH64, ...).
    #[arg(long, default_value = DEFAULT_CONFIGS)]
    pub config: String,
    /// Print the generated trace in the trace file format and exit.
    #[arg(long)]
    pub emit_trace: bool,
    /// A PCM device parameter, e.g. `pcm.chunk_program_ns=300` (repeatable; `pcm.*` keys only).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// SQLite's CPU time per command as a constant, ns (0..=100000000), in place of the measured
    /// one (overrides --cpu-time).
    #[arg(long)]
    pub cpu_ns_per_command: Option<u64>,
    /// Where SQLite's measured CPU time comes from: arm-a9 (its ARM instructions per command,
    /// measured on the board's ISA, at the Cortex-A9's cycles per instruction and 667 MHz) or
    /// host-calibrated (the host's cycles per virtual-machine instruction taken for the board's).
    #[arg(long, default_value = "arm-a9", value_name = "arm-a9|host-calibrated")]
    pub cpu_time: String,
    /// Print one JSON array (one object per configuration).
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct JournalCrashArgs {
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// One configuration of Table IV.
    #[arg(long)]
    pub config: String,
    /// Crash points, drawn in turn from each kind of event (journal data, journal metadata,
    /// GC, database write, database sync).
    #[arg(long, default_value_t = 1000)]
    pub crashes: u64,
    /// Check only this event (replays a reported violation).
    #[arg(long, value_name = "EVENT")]
    pub crash_at: Option<u64>,
    /// Turn on a deliberate defect: hot-clear-before-db-sync, reuse-live-portion,
    /// place-taken-portion, stale-association-kept, portion-limit-shared.
    #[arg(long, value_name = "BUG")]
    pub inject_bug: Option<String>,
    #[command(flatten)]
    pub threads: super::ThreadsArg,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Largest `--txs` of a generated application trace (the longest of Table III has 3 500).
const MAX_TXS: u64 = 1_000_000;

fn load_trace(src: &ReplayArgs) -> Result<(String, String, Trace), String> {
    let ReplayArgs { app, trace, trace_file: file, sql, seed, txs, .. } = src;
    let (trace, seed, txs) = (*trace, *seed, *txs);
    if let Some(path) = sql {
        let bytes = if path == "-" {
            let mut b = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut b).map_err(|e| format!("--sql -: {e}"))?;
            b
        } else {
            std::fs::read(path).map_err(|e| format!("--sql {path}: {e}"))?
        };
        let text = String::from_utf8(bytes).map_err(|e| {
            format!(
                "--sql {path}: not a text file of SQL statements (byte {} is not UTF-8)",
                e.utf8_error().valid_up_to()
            )
        })?;
        return Ok(("sql".into(), path.clone(), script::parse(&text).map_err(|e| format!("{e} ({path})"))?));
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(path).map_err(|e| format!("--trace-file {path}: {e}"))?;
        return Ok(("file".into(), path.clone(), Trace::parse(&text)?));
    }
    if !(1..=4).contains(&trace) {
        return Err(format!("--trace {trace}: allowed 1..=4"));
    }
    // The generated trace is held whole (a few KB per transaction).
    if let Some(n) = txs.filter(|&n| n > MAX_TXS) {
        return Err(format!("--txs {n}: allowed 0..={MAX_TXS}"));
    }
    let app = App::parse(app.as_deref().expect("clap requires --app or --trace-file"))?;
    Ok((app.code().into(), trace.to_string(), apps::generate(app, trace, seed, txs)))
}

fn check_frames(frames: u64) -> Result<(), String> {
    if !(3..=journal::format::MAX_FRAMES).contains(&frames) {
        return Err(format!("--frames {frames}: allowed 3..={}", journal::format::MAX_FRAMES));
    }
    Ok(())
}

pub fn run(a: JournalArgs) -> Result<i32, String> {
    let Some(rs) = measure(&a)? else { return Ok(0) };
    if a.json {
        super::emit(&format!("{}\n", serde_json::to_string_pretty(&rs).expect("serializable")));
        return Ok(0);
    }
    let mut out = format!(
        "{:<22} {:>11} {:>7} {:>10} {:>7} {:>12} {:>10} {:>12} {:>9}\n",
        "config", "total bits", "vs RR", "max bits", "vs S2X", "energy uJ", "counted us", "cmd us", "jrnl us"
    );
    let opt = |x: Option<f64>| x.map_or("-".into(), |v| format!("{v:.3}"));
    for r in &rs {
        out += &format!(
            "{:<22} {:>11} {:>7} {:>10} {:>7} {:>12.1} {:>10.2} {:>12.2} {:>9.2}\n",
            r.config,
            r.total_bit_updates,
            opt(r.total_bit_updates_vs_rr),
            r.max_bit_updates,
            opt(r.max_bit_updates_vs_rr_s2x),
            r.energy_nj / 1e3,
            r.avg_cmd_counted_ns / 1e3,
            r.avg_cmd_latency_ns / 1e3,
            r.avg_cmd_journal_ns / 1e3
        );
    }
    if let Some(r) = rs.first() {
        out += &format!(
            "{} trace {}: {} page writes ({} database, {} journal), {} transactions, {} commands, no-journal {:.2} us/cmd | seed {} | locsim {} ({})\n",
            r.app, r.trace, r.page_writes, r.db_page_writes, r.journal_records, r.transactions, r.commands,
            r.avg_cmd_latency_nojournal_ns / 1e3, r.seed, r.version, r.git_rev
        );
    }
    super::emit(&out);
    Ok(0)
}

/// What `journal` prints, one result per configuration (the printer and [`super::json`] both
/// take it from here); `None` once `--emit-trace` has printed the trace.
pub(super) fn measure(a: &JournalArgs) -> Result<Option<Vec<journal::JournalResult>>, String> {
    check_frames(a.replay.frames)?;
    let policies: Vec<Policy> =
        a.config.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Policy::parse).collect::<Result<_, _>>()?;
    if policies.is_empty() {
        return Err("--config: empty list".into());
    }
    let mut dev = journal::Device::build(&a.set, a.cpu_ns_per_command)?;
    dev.timing.cpu_time = journal::cpu::CpuTime::parse(&a.cpu_time)?;
    let on_error = OnError::parse(&a.replay.on_error)?;
    let (app, trace, tr) = load_trace(&a.replay)?;
    if a.emit_trace {
        super::emit(&tr.to_text());
        return Ok(None);
    }
    let tr = std::sync::Arc::new(tr);
    let mut rs = Vec::new();
    for p in &policies {
        let r = journal::measure((&app, &trace), &tr, p, a.replay.seed, a.replay.frames, &dev, on_error)?;
        if rs.is_empty() {
            for e in &r.statement_error_details {
                eprintln!("{e}");
            }
            if r.statement_errors > 10 {
                eprintln!("... {} statement errors in all", r.statement_errors);
            }
        }
        rs.push(r);
    }
    journal::normalize(&mut rs);
    Ok(Some(rs))
}

pub fn crashtest(a: JournalCrashArgs) -> Result<i32, String> {
    let r = campaign(&a)?;
    if a.json {
        super::emit(&format!("{}\n", serde_json::to_string_pretty(&r).expect("serializable")));
    } else {
        let kinds: Vec<String> = r
            .per_kind
            .iter()
            .map(|(k, n)| format!("{} {n}", serde_json::to_string(k).expect("kind").trim_matches('"')))
            .collect();
        let mut out = format!(
            "{}{}: {} crash points of {} events ({}), {} violations (seed {})\n",
            r.config,
            r.bug.as_ref().map_or(String::new(), |b| format!(" with bug {b}")),
            r.crash_points,
            r.events,
            kinds.join(", "),
            r.violations,
            r.seed
        );
        if let Some(v) = r.violation_details.first() {
            out += &format!("first violation at event {} ({:?}): {}\nreplay: {}\n", v.event, v.kind, v.what, v.replay);
        }
        super::emit(&out);
    }
    Ok(if r.violations > 0 { 1 } else { 0 })
}

/// What `journal-crashtest` reports (the printer and [`super::json`] both take it from here).
pub(super) fn campaign(a: &JournalCrashArgs) -> Result<crash::CrashReport, String> {
    check_frames(a.replay.frames)?;
    let policy = Policy::parse(&a.config)?;
    let bug = a.inject_bug.as_deref().map(Bug::parse).transpose()?;
    if a.crashes == 0 && a.crash_at.is_none() {
        return Err("--crashes 0: allowed 1 or more".into());
    }
    let on_error = OnError::parse(&a.replay.on_error)?;
    let threads = a.threads.resolve()?;
    let (_, _, tr) = load_trace(&a.replay)?;
    let setup = Setup {
        policy,
        pcm: Default::default(),
        timing: Timing::default(),
        frames: a.replay.frames,
        seed: a.replay.seed,
        journal: true,
        bug,
        on_error,
    };
    let mut r = crash::campaign(&tr, &setup, a.crashes, a.crash_at, a.inject_bug.as_deref(), threads, true)?;
    let base = replay_base(a);
    for v in &mut r.violation_details {
        v.replay = format!("{base} {}", v.replay);
    }
    Ok(r)
}

/// The command that replays a violation, but for its `--config`, `--crash-at` and `--seed`
/// (which the crash checker adds): the trace's source and every argument that changes the run.
fn replay_base(a: &JournalCrashArgs) -> String {
    let mut s = String::from("locsim journal-crashtest");
    let src = &a.replay;
    match (&src.sql, &src.trace_file, &src.app) {
        (Some(path), _, _) => s += &format!(" --sql {path}"),
        (None, Some(path), _) => s += &format!(" --trace-file {path}"),
        (None, None, app) => s += &format!(" --app {} --trace {}", app.as_deref().unwrap_or(""), src.trace),
    }
    if let Some(n) = a.replay.txs {
        s += &format!(" --txs {n}");
    }
    if a.replay.frames != journal::DEFAULT_FRAMES {
        s += &format!(" --frames {}", a.replay.frames);
    }
    if src.on_error != "stop" {
        s += &format!(" --on-error {}", src.on_error);
    }
    if let Some(b) = &a.inject_bug {
        s += &format!(" --inject-bug {b}");
    }
    s
}
