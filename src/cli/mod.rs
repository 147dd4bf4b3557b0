//! The command line: `locsim run | crashtest | bench | config | workloads | journal | journal-crashtest | reproduce | merge`.
//!
//! Contract (users' scripts depend on it): see the README. Every bad argument ends with one
//! line on stderr naming the bad value and the allowed ones, and exit status 2.

mod commands;
mod journal;
mod trace_commands;

use crate::config::Config;
use crate::protocol::ProtocolKind;
use crate::types::Ns;
use clap::{Args, Parser, Subcommand};

/// Write to stdout; a closed pipe (`locsim run ... | head`) ends output quietly.
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}

/// Crash-verified cycle-level simulator of transactional persistent memory.
#[derive(Parser, Debug)]
#[command(name = "locsim", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Simulate a workload under one or more protocols and report throughput and write traffic.
    Run(RunArgs),
    /// Inject crashes into a run, recover each durable image, and check it against the oracle.
    Crashtest(CrashArgs),
    /// Measure simulator speed per workload and protocol (accesses per host second, slowdown).
    Bench(BenchArgs),
    /// Print the configuration (defaults plus --config/--set) as TOML.
    Config(MachineArgs),
    /// List the workloads with their parameters and the P-Set measured by a short baseline run.
    Workloads(WorkloadsArgs),
    /// Replay a mobile-application SQL trace through real SQLite with its rollback journal in PCM
    /// (the PCM SQLite-journal paper) and report bit updates, energy and command latency.
    Journal(journal::JournalArgs),
    /// Crash the PCM journal at chosen events, recover with real SQLite, and check the databases.
    JournalCrashtest(journal::JournalCrashArgs),
    /// Regenerate every figure and table from the specs in experiments/: CSV, JSON, SVG, report.
    Reproduce(ReproduceArgs),
    /// Combine the shard files of `reproduce --shard` runs into the outputs of an unsharded run.
    Merge(MergeArgs),
    /// A worker process of `reproduce` (started by it): answers point requests on standard input.
    #[command(hide = true)]
    ReproduceWorker,
    /// Write a built-in workload as a trace (docs/formats/trace.md) for `run --trace` and
    /// `crashtest --trace`.
    TraceGen(trace_commands::TraceGenArgs),
}

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Short run lengths (every figure, in minutes); the default is the full run lengths.
    #[arg(long)]
    pub quick: bool,
    /// Comma-separated spec names (file stems in the experiments directory).
    #[arg(long, value_name = "NAME[,NAME]")]
    pub only: Option<String>,
    /// Worker threads (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Output directory.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: String,
    /// Run the points whose index is I modulo N (0 <= I < N) and write a shard file for `merge`.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Directory of the experiment specs.
    #[arg(long, value_name = "DIR", default_value = "experiments")]
    pub experiments: String,
    /// Leave the simulator-speed measurement out of the report.
    #[arg(long)]
    pub no_bench: bool,
    /// Write the host seconds of every point (experiment, point, seconds, CPU seconds, cached)
    /// to FILE as CSV.
    #[arg(long, value_name = "FILE")]
    pub timings: Option<String>,
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Directories holding shard-I-of-N.json files.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<String>,
    /// Output directory.
    #[arg(long, value_name = "DIR", default_value = "results")]
    pub out: String,
}

#[derive(Args, Debug)]
pub struct WorkloadsArgs {
    /// Transactions of the baseline run that measures each P-Set (after a tenth as many warm-up).
    #[arg(long, default_value_t = 1000)]
    pub txs: u64,
    /// Print one JSON array.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

/// Options shared by every command that builds a machine.
#[derive(Args, Debug, Clone, Default)]
pub struct MachineArgs {
    /// TOML file overriding configuration defaults (see `locsim config`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<String>,
    /// Override one configuration value, e.g. `--set memory.write_latency_ns=300` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Shortcut: set both memory read and write latency, in ns (the papers sweep 35, 95, 168, 1000).
    #[arg(long, value_name = "N")]
    pub mem_latency_ns: Option<u64>,
    /// Shortcut: speculation degree of loc-wal and loc-kiln, 1..=32 (loc.speculation_degree,
    /// default 16).
    #[arg(long)]
    pub sd: Option<u32>,
    /// Shortcut: simulated cores, 1..=16 (machine.cores, default 1; docs/multicore.md).
    #[arg(long, value_name = "N")]
    pub cores: Option<u32>,
}

/// What the workload does, shared by `run` and `crashtest`.
#[derive(Args, Debug, Clone)]
pub struct TxArgs {
    /// Seed of the workload's random operations (and of crashtest's crash-point draw).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fraction of transactions the workload aborts, 0..=1.
    #[arg(long, default_value_t = 0.0)]
    pub abort_rate: f64,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Workload (sps, btree, ...; an unknown name lists them all).
    #[arg(long, short, required_unless_present = "trace", conflicts_with = "trace")]
    pub workload: Option<String>,
    /// Replay a trace (docs/formats/trace.md; `-` reads standard input) instead of a workload.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<String>,
    #[arg(long, short, default_value = "baseline,s-wal,h-wal", help = format!("Comma-separated protocols: {}", ProtocolKind::names()))]
    pub protocol: String,
    /// Transactions in the measured region (default 50000; a trace: all after its warm-up, or
    /// at most this many).
    #[arg(long)]
    pub txs: Option<u64>,
    /// Transactions before the measured region (default: workload.warmup_txs; a trace declares
    /// its own). With `--set workload.warmup_to_steady=true` the warm-up then goes on until the
    /// caches' dirty lines stop growing, as every experiment of `reproduce` does.
    #[arg(long, conflicts_with = "trace")]
    pub warmup_txs: Option<u64>,
    #[command(flatten)]
    pub tx: TxArgs,
    /// Print one JSON array (one object per protocol) instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

#[derive(Args, Debug)]
pub struct CrashArgs {
    /// Workload (sps, btree, ...; an unknown name lists them all).
    #[arg(long, short, required_unless_present_any = ["list_bugs", "trace"], conflicts_with = "trace")]
    pub workload: Option<String>,
    /// Crash-check a replayed trace (docs/formats/trace.md; `-` reads standard input).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<String>,
    #[arg(long, short, required_unless_present = "list_bugs", help = format!("Protocol under test: {}", ProtocolKind::names()))]
    pub protocol: Option<String>,
    /// Crash points to check, drawn without replacement from the candidate cycles (the first and
    /// the last cycle of every distinct durable state).
    #[arg(long, default_value_t = 1000)]
    pub crashes: u64,
    /// Check every candidate cycle, i.e. every distinct durable state (use with a short run).
    #[arg(long)]
    pub exhaustive: bool,
    /// Check only this crash cycle (replays a reported violation).
    #[arg(long, value_name = "CYCLE")]
    pub crash_at: Option<u64>,
    /// Bytes a write persists atomically: 8, 16, 32 or 64 (the papers' assumption). Below 64
    /// a write in flight at a crash may be durable in part (docs/faults.md).
    #[arg(long, default_value_t = 64, value_name = "BYTES")]
    pub atomicity: u32,
    /// Under machine.persist_domain=gpf: also check each crash point with GPF's cache
    /// write-back cut short after this many dirty lines, 1 or more (docs/cxl.md).
    #[arg(long, value_name = "LINES")]
    pub gpf_budget_lines: Option<u64>,
    /// Transactions to run (a trace: at most this many after its warm-up, default all). The
    /// whole run is kept in host memory for the checker; a run whose record would exceed half
    /// the host's available memory (or LOCSIM_RECORD_MEMORY bytes) stops early, saying how
    /// many transactions fit.
    #[arg(long)]
    pub txs: Option<u64>,
    /// Transactions before them (also checked; default 0; a trace declares its own).
    #[arg(long, default_value_t = 0, conflicts_with = "trace")]
    pub warmup_txs: u64,
    /// Turn on a deliberate defect in the protocol (see --list-bugs).
    #[arg(long, value_name = "BUG")]
    pub inject_bug: Option<String>,
    /// List the injectable bugs of every protocol and exit.
    #[arg(long)]
    pub list_bugs: bool,
    #[command(flatten)]
    pub tx: TxArgs,
    #[command(flatten)]
    pub threads: ThreadsArg,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

/// Worker threads of a crash check, shared by `crashtest` and `journal-crashtest`.
#[derive(Args, Debug)]
pub struct ThreadsArg {
    /// Worker threads (default: the number of cores); the report is the same for any number.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
}

impl ThreadsArg {
    /// The number of workers: given (1 or more), else the host's cores.
    pub fn resolve(&self) -> Result<usize, String> {
        match self.threads {
            Some(0) => Err("--threads 0: allowed 1 or more".into()),
            Some(n) => Ok(n),
            None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
        }
    }
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Comma-separated workloads (default: all; with --cores N > 1, all that run on N cores).
    #[arg(long, short)]
    pub workload: Option<String>,
    /// Comma-separated protocols (default: all; with --cores N > 1, all that run on N cores).
    #[arg(long, short)]
    pub protocol: Option<String>,
    /// Transactions per measurement (default: 300000; with --crash 2000).
    #[arg(long)]
    pub txs: Option<u64>,
    /// Measurements per point; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub repeat: u32,
    /// Measure crash checking instead: crash states per second of `crashtest` per workload and
    /// protocol (default protocols: every one that promises durability).
    #[arg(long)]
    pub crash: bool,
    /// Also run each point with the bit-level PCM device (`memory.device = pcm`) and report its
    /// speed beside the plain device's, and their ratio (the block path's instructions:
    /// LOCSIM_PCM_SIMD = auto, avx512, avx2 or portable).
    #[arg(long, conflicts_with = "crash")]
    pub pcm: bool,
    /// With --crash: crash points per check.
    #[arg(long, default_value_t = 1000)]
    pub crashes: u64,
    /// With --crash: worker threads of each check (default: the number of cores).
    #[command(flatten)]
    pub threads: ThreadsArg,
    /// Print one JSON array.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub machine: MachineArgs,
}

/// Parse arguments and run; returns the exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind::*;
            if matches!(e.kind(), DisplayHelp | DisplayVersion | DisplayHelpOnMissingArgumentOrSubcommand) {
                let _ = e.print();
                return if e.kind() == DisplayHelpOnMissingArgumentOrSubcommand { 2 } else { 0 };
            }
            eprintln!("{}", one_line_clap_error(&e));
            return 2;
        }
    };
    // The PCM block path's instructions are chosen by the environment (host speed only).
    if let Err(e) = crate::pcm::Simd::from_env() {
        eprintln!("error: {e}");
        return 2;
    }
    match commands::dispatch(cli.cmd) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("{}", error_line(&msg));
            2
        }
    }
}

/// The line the command line prints on standard error for a bad input: one line, whatever a
/// message quotes from the user's input.
fn error_line(msg: &str) -> String {
    format!("error: {}", msg.trim_end().replace('\n', "\\n"))
}

/// The `--help` text of the subcommand `name` (`run`, `crashtest`, ...), as `locsim NAME
/// --help` prints it; `None` for an unknown name.
pub fn help(name: &str) -> Option<String> {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    cli.build();
    Some(cli.find_subcommand_mut(name)?.render_help().to_string())
}

/// Run `locsim ARGS...` as the command line does and return what it prints with `--json` (as
/// JSON text) instead of printing it: `run` (an array, one object per protocol), `crashtest` (one
/// object; `verify` is a structural check of the caller's own, run on each recovered data
/// area besides the workload's: a message is a `structure` violation), `journal` (an array),
/// `journal-crashtest` (one object), `reproduce` (what it wrote: `written`, `pending`,
/// `executed`, `cached`). `Err` is the exact line the command line prints on standard error
/// for the same arguments (it would exit with status 2). This is the Python binding's one way
/// in (python/, docs/python.md): the same parsing, checks and code paths as the command line.
pub fn json(args: &[String], verify: Option<crate::crash::UserVerify>) -> Result<String, String> {
    let cli = Cli::try_parse_from(std::iter::once("locsim".to_string()).chain(args.iter().cloned()))
        .map_err(|e| one_line_clap_error(&e))?;
    // Serialized from the results themselves, as the printers do: the same fields in the same order.
    fn text<T: serde::Serialize>(v: T) -> String {
        serde_json::to_string(&v).expect("serializable")
    }
    match cli.cmd {
        Cmd::Run(a) => commands::run_results(&a).map(text),
        Cmd::Crashtest(a) if !a.list_bugs => commands::crash_report(&a, verify).map(text),
        Cmd::Journal(a) if !a.emit_trace => journal::measure(&a).map(|r| text(r.expect("no --emit-trace"))),
        Cmd::JournalCrashtest(a) => journal::campaign(&a).map(text),
        Cmd::Reproduce(a) => commands::reproduce_summary(a, None).map(|(s, _)| {
            text(serde_json::json!({
                "executed": s.executed,
                "cached": s.cached,
                "written": s.written,
                "pending": s.pending,
            }))
        }),
        _ => Err(format!(
            "{}: no JSON form (run, crashtest, journal, journal-crashtest, reproduce have one)",
            args.join(" ")
        )),
    }
    .map_err(|msg| error_line(&msg))
}

/// clap's error, condensed to one line (its message plus the possible values, if any).
fn one_line_clap_error(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:"))
        .collect();
    parts.join("; ")
}

/// The configuration from `--config`, `--set`, and the shortcuts `--mem-latency-ns` and `--sd`.
fn build_config(a: &MachineArgs) -> Result<Config, String> {
    let sd = a.sd;
    let text = match &a.config {
        Some(path) => Some(std::fs::read_to_string(path).map_err(|e| format!("--config {path}: {e}"))?),
        None => None,
    };
    // `--cores` is one more `--set`, so that what the configuration resolves from the core
    // count (`workload.tpcc.warehouses = cores`) sees it.
    let mut sets = a.sets.clone();
    if let Some(n) = a.cores {
        sets.push(format!("machine.cores={n}"));
    }
    let mut cfg = Config::build(text.as_deref(), &sets).map_err(|e| match a.cores {
        Some(_) if e.0.starts_with("machine.cores") => format!("--cores: {e}"),
        _ => e.0,
    })?;
    // The shortcuts set their fields directly; `validate` checks them like any other value.
    if let Some(ns) = a.mem_latency_ns {
        (cfg.memory.read_latency_ns, cfg.memory.write_latency_ns) = (Ns::new(ns), Ns::new(ns));
    }
    if let Some(sd) = sd {
        cfg.loc.speculation_degree = sd;
    }
    if let Some(n) = a.cores {
        cfg.machine.cores = n;
    }
    cfg.validate().map_err(|e| match (a.mem_latency_ns, sd) {
        (Some(_), _) if e.0.starts_with("memory.") => format!("--mem-latency-ns: {e}"),
        (_, Some(_)) if e.0.starts_with("loc.speculation_degree") => format!("--sd: {e}"),
        _ if a.cores.is_some() && e.0.starts_with("machine.cores") => format!("--cores: {e}"),
        _ => e.0,
    })?;
    Ok(cfg)
}

fn parse_list<T>(s: &str, what: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let items: Vec<T> = s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(parse).collect::<Result<_, _>>()?;
    if items.is_empty() {
        return Err(format!("--{what}: empty list"));
    }
    Ok(items)
}

fn check_common(abort_rate: f64) -> Result<(), String> {
    if !(0.0..=1.0).contains(&abort_rate) {
        return Err(format!("--abort-rate {abort_rate}: allowed 0..=1"));
    }
    Ok(())
}

/// Transactions of `run` on a built-in workload unless `--txs` says (`trace-gen` writes as many).
const RUN_TXS: u64 = 50_000;
