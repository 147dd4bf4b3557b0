//! The subcommands: argument checking, then calls into [`crate::runner`] and [`crate::crash`].

use super::{
    build_config, check_common, emit, parse_list, BenchArgs, Cmd, CrashArgs, MergeArgs, ReproduceArgs, RunArgs,
    WorkloadsArgs, RUN_TXS,
};
use crate::crash::{self, CrashSpec};
use crate::protocol::{Bug, ProtocolKind};
use crate::runner::{self, RunResult, RunSpec};
use crate::types::Cycle;
use crate::workload::WorkloadKind;

macro_rules! outln {
    ($($arg:tt)*) => { emit(&format!("{}\n", format!($($arg)*))) };
}

pub fn dispatch(cmd: Cmd) -> Result<i32, String> {
    match cmd {
        Cmd::Run(a) => run(a),
        Cmd::Crashtest(a) => crashtest(a),
        Cmd::Bench(a) => bench(a),
        Cmd::Workloads(a) => workloads(a),
        Cmd::Journal(a) => super::journal::run(a),
        Cmd::JournalCrashtest(a) => super::journal::crashtest(a),
        Cmd::Reproduce(a) => reproduce(a),
        Cmd::Merge(a) => merge(a),
        Cmd::ReproduceWorker => crate::reproduce::worker::serve(),
        Cmd::TraceGen(a) => super::trace_commands::generate(a),
        Cmd::Config(a) => {
            emit(&build_config(&a)?.to_toml());
            Ok(0)
        }
    }
}

fn run(a: RunArgs) -> Result<i32, String> {
    print_runs(run_results(&a)?, a.json);
    Ok(0)
}

/// What `run` prints, one result per protocol, related to the baseline's if it ran (the
/// printer and [`super::json`] both take it from here).
pub(super) fn run_results(a: &RunArgs) -> Result<Vec<RunResult>, String> {
    check_common(a.tx.abort_rate)?;
    let mut results = match &a.trace {
        Some(path) => super::trace_commands::run(a, path)?,
        None => run_workload(a)?,
    };
    runner::relate_to_baseline(&mut results);
    Ok(results)
}

fn run_workload(a: &RunArgs) -> Result<Vec<RunResult>, String> {
    let cfg = build_config(&a.machine)?;
    let workload = WorkloadKind::parse(a.workload.as_deref().expect("clap requires it"))?;
    let protocols = parse_list(&a.protocol, "protocol", ProtocolKind::parse)?;
    let mut results: Vec<RunResult> = Vec::new();
    for &p in &protocols {
        let spec = RunSpec {
            cfg: cfg.clone(),
            workload,
            protocol: p,
            txs: a.txs.unwrap_or(RUN_TXS),
            warmup_txs: a.warmup_txs.unwrap_or(cfg.workload.warmup_txs),
            seed: a.tx.seed,
            abort_rate: a.tx.abort_rate,
            bug: None,
            record: false,
            tape: false,
            prefault: false,
        };
        results.push(runner::execute(&spec)?.result);
    }
    Ok(results)
}

/// The results of `run`, as JSON or a table.
fn print_runs(results: Vec<RunResult>, json: bool) {
    if json {
        outln!("{}", serde_json::to_string_pretty(&results).expect("serializable"));
    } else {
        print_run_table(&results);
    }
}

fn print_run_table(rs: &[RunResult]) {
    outln!(
        "{:<10} {:>9} {:>12} {:>10} {:>7} {:>8} {:>6} {:>11}",
        "protocol",
        "txs",
        "cycles",
        "tx/Mcyc",
        "norm",
        "traffic",
        "P-Set",
        "Macc/s"
    );
    for r in rs {
        let norm = r.normalized_throughput.map_or("-".to_string(), |n| format!("{n:.3}"));
        outln!(
            "{:<10} {:>9} {:>12} {:>10.2} {:>7} {:>8.2} {:>6.2} {:>11.1}",
            r.protocol,
            r.txs_committed,
            r.cycles,
            r.throughput_tx_per_mcycle,
            norm,
            r.write_traffic,
            r.pset_blocks_per_tx,
            r.sim_mem_accesses_per_second / 1e6
        );
    }
    if let Some(r) = rs.first() {
        outln!(
            "workload {} seed {} | locsim {} ({}) config {}",
            r.workload,
            r.seed,
            r.version,
            r.git_rev,
            r.config_hash
        );
    }
    print_retired(rs);
}

/// With `pcm.retire_worn_cells`: per run and region, the cells retired, the first of them, and
/// the writes that failed their read-back.
fn print_retired(rs: &[RunResult]) {
    for r in rs {
        for f in r.pcm.iter().flat_map(|p| p.retire.iter().flatten()).skip(1) {
            let first = f.first_retired.map_or("none".into(), |e| {
                let cell = if e.flip_cell { "flip cell".into() } else { format!("bit {}", e.bit) };
                format!("byte {} {cell}, write {}, cycle {}", e.byte, e.write, e.cycle)
            });
            outln!(
                "{} {}: {} cells retired (first: {first}); {} writes failed read-back ({} cells)",
                r.protocol,
                f.name,
                f.retired_cells,
                f.failed_writes,
                f.failed_cells
            );
        }
    }
}

fn crashtest(a: CrashArgs) -> Result<i32, String> {
    if !a.list_bugs {
        return Ok(print_crash_report(&crash_report(&a, None)?, a.json));
    }
    for p in ProtocolKind::ALL {
        let bugs: Vec<String> = p.injectable().iter().map(|b| format!("{} ({})", b.name(), b.describe())).collect();
        let list = if bugs.is_empty() { "none: makes no durability promise".into() } else { bugs.join("; ") };
        outln!("{}: {}", p.name(), list);
    }
    Ok(0)
}

/// What `crashtest` reports (the printer and [`super::json`] both take it from here), with a
/// library caller's own structural check of the data area besides the workload's, if any.
pub(super) fn crash_report(a: &CrashArgs, verify: Option<crash::UserVerify>) -> Result<crash::CrashReport, String> {
    check_common(a.tx.abort_rate)?;
    let cfg = build_config(&a.machine)?;
    let protocol = ProtocolKind::parse(a.protocol.as_deref().expect("clap requires it"))?;
    let bug = a.inject_bug.as_deref().map(|b| Bug::parse(b, protocol)).transpose()?;
    if a.crashes == 0 && !a.exhaustive && a.crash_at.is_none() {
        return Err("--crashes 0: allowed 1 or more".into());
    }
    let gpf_budget_lines = a.gpf_budget_lines.map(crash::gpf::parse_budget).transpose()?;
    if gpf_budget_lines.is_some() && cfg.machine.persist_domain != crate::config::PersistDomain::Gpf {
        return Err(format!(
            "--gpf-budget-lines with machine.persist_domain = {:?}: allowed only with gpf (the fault cuts GPF's \
             cache write-back short)",
            cfg.machine.persist_domain
        )
        .to_lowercase());
    }
    let workload = match &a.trace {
        Some(_) => WorkloadKind::Trace,
        None => WorkloadKind::parse(a.workload.as_deref().expect("clap requires it"))?,
    };
    let spec = CrashSpec {
        run: RunSpec {
            cfg,
            workload,
            protocol,
            txs: a.txs.unwrap_or(if a.trace.is_some() { u64::MAX } else { CRASH_TXS }),
            warmup_txs: a.warmup_txs,
            seed: a.tx.seed,
            abort_rate: a.tx.abort_rate,
            bug,
            record: true,
            tape: false,
            prefault: false,
        },
        crashes: a.crashes,
        exhaustive: a.exhaustive,
        crash_at: a.crash_at.map(Cycle::new),
        replay_base: replay_base(a),
        threads: a.threads.resolve()?,
        progress: true,
        atomicity: crash::torn::parse_atomicity(a.atomicity)?,
        gpf_budget_lines,
        verify,
    };
    match &a.trace {
        Some(path) => super::trace_commands::crashtest(spec, path),
        None => crash::check(&spec),
    }
}

/// Transactions of `crashtest` on a built-in workload unless `--txs` says.
const CRASH_TXS: u64 = 2_000;

/// A crash report as JSON or text; returns the exit status (1 if there are violations).
fn print_crash_report(report: &crash::CrashReport, json: bool) -> i32 {
    if json {
        outln!("{}", serde_json::to_string_pretty(&report).expect("serializable"));
    } else {
        outln!(
            "{} / {}{}: {} crash points of {} candidate cycles, {} violations ({:.0} states/s, seed {})",
            report.workload,
            report.protocol,
            report.inject_bug.as_ref().map_or(String::new(), |b| format!(" with bug {b}")),
            report.crash_points,
            report.candidate_crash_cycles,
            report.violations,
            report.states_per_second,
            report.seed
        );
        if report.atomicity < 64 {
            outln!("atomicity {} bytes: {} torn states checked besides", report.atomicity, report.torn_states);
        }
        if let Some(g) = &report.gpf_cut {
            outln!("GPF cut short after {} lines: {} states with lines lost checked besides", g.budget_lines, g.states);
        }
        if let Some(v) = report.first_violation.as_ref().filter(|v| v.kind == crash::ViolationKind::ProgramFault) {
            outln!("first violation (program-fault), while the machine ran: {}", v.detail);
            outln!("replay: {}", v.replay);
        } else if let Some(v) = &report.first_violation {
            outln!(
                "first violation ({}): crash at cycle {}, A={} I={}, closest k={}, {} blocks differ, first at {:?}: {}",
                v.kind,
                v.crash_cycle,
                v.acked,
                v.issued,
                v.closest_k,
                v.differing_blocks,
                v.first_diff_addr,
                v.detail
            );
            if let Some(torn) = &v.torn {
                outln!("variant: {torn}");
            }
            outln!("replay: {}", v.replay);
        }
    }
    if report.violations > 0 {
        1
    } else {
        0
    }
}

fn replay_base(a: &CrashArgs) -> String {
    let source = match &a.trace {
        Some(path) => format!("--trace {path}"),
        None => format!("--workload {}", a.workload.as_deref().unwrap_or("")),
    };
    let mut s =
        format!("locsim crashtest {source} --protocol {} --seed {}", a.protocol.as_deref().unwrap_or(""), a.tx.seed);
    if a.trace.is_none() || a.txs.is_some() {
        s += &format!(" --txs {}", a.txs.unwrap_or(CRASH_TXS));
    }
    if a.warmup_txs > 0 {
        s += &format!(" --warmup-txs {}", a.warmup_txs);
    }
    if a.tx.abort_rate > 0.0 {
        s += &format!(" --abort-rate {}", a.tx.abort_rate);
    }
    if let Some(sd) = a.machine.sd {
        s += &format!(" --sd {sd}");
    }
    if let Some(n) = a.machine.cores {
        s += &format!(" --cores {n}");
    }
    if let Some(b) = &a.inject_bug {
        s += &format!(" --inject-bug {b}");
    }
    if a.atomicity != 64 {
        s += &format!(" --atomicity {}", a.atomicity);
        if a.exhaustive {
            s += " --exhaustive"; // which torn states a point gets
        }
    }
    if let Some(n) = a.gpf_budget_lines {
        s += &format!(" --gpf-budget-lines {n}");
    }
    if let Some(ns) = a.machine.mem_latency_ns {
        s += &format!(" --mem-latency-ns {ns}");
    }
    if let Some(c) = &a.machine.config {
        s += &format!(" --config {c}");
    }
    for kv in &a.machine.sets {
        s += &format!(" --set {kv}");
    }
    s
}

/// `locsim bench --crash`: crash states per second per workload and protocol.
fn bench_crash(a: &BenchArgs, cfg: &crate::config::Config, workloads: &[WorkloadKind]) -> Result<i32, String> {
    let protocols = match &a.protocol {
        Some(s) => parse_list(s, "protocol", ProtocolKind::parse)?,
        None => ProtocolKind::ALL.iter().copied().filter(|p| !p.bugs().is_empty()).collect(),
    };
    let threads = a.threads.resolve()?;
    let shape = (a.txs.unwrap_or(2_000), a.crashes, threads, a.repeat);
    let rows = crate::bench::measure_crash(cfg, workloads, &protocols, shape)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&rows).expect("serializable"));
        return Ok(0);
    }
    outln!(
        "{:<10} {:<10} {:>7} {:>8} {:>11} {:>10} {:>8}",
        "workload",
        "protocol",
        "txs",
        "points",
        "candidates",
        "states/s",
        "threads"
    );
    for r in &rows {
        outln!(
            "{:<10} {:<10} {:>7} {:>8} {:>11} {:>10.0} {:>8}",
            r.workload,
            r.protocol,
            r.txs,
            r.crash_points,
            r.candidate_crash_cycles,
            r.states_per_second,
            r.threads
        );
    }
    let mut rates: Vec<f64> = rows.iter().map(|r| r.states_per_second).collect();
    rates.sort_by(|x, y| x.total_cmp(y));
    if let (Some(lo), Some(mid)) = (rates.first(), rates.get(rates.len() / 2)) {
        outln!(
            "median {mid:.0} states/s, lowest {lo:.0} | {} | locsim {} ({})",
            crate::bench::cpu_model(),
            crate::runner::VERSION,
            crate::runner::GIT_REV
        );
    }
    Ok(0)
}

fn bench(a: BenchArgs) -> Result<i32, String> {
    let cfg = build_config(&a.machine)?;
    // On several cores the default workloads are those that run there (every protocol does).
    let multi = cfg.machine.cores > 1;
    let workloads = match &a.workload {
        Some(s) => parse_list(s, "workload", WorkloadKind::parse)?,
        None => WorkloadKind::ALL.iter().copied().filter(|w| !multi || *w != WorkloadKind::Sqlite).collect(),
    };
    let protocols = match &a.protocol {
        Some(s) => parse_list(s, "protocol", ProtocolKind::parse)?,
        None => ProtocolKind::ALL.to_vec(),
    };
    if a.repeat == 0 || a.txs == Some(0) || a.crashes == 0 {
        return Err("--repeat, --txs and --crashes: allowed 1 or more".into());
    }
    if a.crash {
        return bench_crash(&a, &cfg, &workloads);
    }
    let shape = (a.txs.unwrap_or(300_000), a.repeat);
    let rows = crate::bench::measure_devices(&cfg, &workloads, &protocols, shape, a.pcm)?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&rows).expect("serializable"));
        return Ok(0);
    }
    let pcm = |h: &str| if a.pcm { format!(" {h:>8} {:>8}", "pcm/plain") } else { String::new() };
    let multi = if cfg.machine.cores > 1 { format!(" {:>9} {:>9}", "1-core", "t/acc/1c") } else { String::new() };
    outln!(
        "{:<10} {:<10} {:>12} {:>8} {:>12} {:>8} {:>9} {:>8} {:>6}{}{multi}",
        "workload",
        "protocol",
        "accesses",
        "Macc/s",
        "NVM reqs",
        "Mreq/s",
        "slowdown",
        "cyc/acc",
        "GHz",
        pcm("pcm Macc")
    );
    for r in &rows {
        let pcm = match (r.pcm_sim_mem_accesses_per_second, r.pcm_vs_plain) {
            (Some(v), Some(x)) => format!(" {:>8.1} {:>8.0}%", v / 1e6, x * 100.0),
            _ => String::new(),
        };
        let multi = match (r.one_core_sim_mem_accesses_per_second, r.time_per_access_vs_one_core) {
            (Some(v), Some(x)) => format!(" {:>9.1} {:>8.2}x", v / 1e6, x),
            _ => String::new(),
        };
        outln!(
            "{:<10} {:<10} {:>12} {:>8.1} {:>12} {:>8.1} {:>9.1} {:>8} {:>6}{pcm}{multi}",
            r.workload,
            r.protocol,
            r.sim_mem_accesses,
            r.sim_mem_accesses_per_second / 1e6,
            r.sim_mem_requests,
            r.sim_mem_requests_per_second / 1e6,
            r.slowdown_vs_native,
            crate::bench::show(r.host_cycles_per_access, 0),
            crate::bench::show(r.host_clock_ghz, 2)
        );
    }
    let simd =
        rows.first().and_then(|r| r.pcm_simd.as_deref()).map(|s| format!("; PCM block path {s}")).unwrap_or_default();
    let paired = rows.first().is_some_and(|r| r.pcm_vs_plain.is_some() || r.time_per_access_vs_one_core.is_some());
    let paired = if paired { "; ratios: median over the repeats of two runs back to back" } else { "" };
    outln!(
        "median of {} runs of {} transactions; cyc/acc: host cycles per access at the host clock (GHz) measured around each point{simd}{paired} | {} | locsim {} ({})",
        a.repeat,
        a.txs.unwrap_or(300_000),
        crate::bench::cpu_model(),
        runner::VERSION,
        runner::GIT_REV
    );
    Ok(0)
}

#[derive(serde::Serialize)]
struct WorkloadRow {
    workload: &'static str,
    parameters: toml::Value,
    data_bytes: u64,
    pset_blocks_per_tx: f64,
    pset_txs: u64,
}

fn workloads(a: WorkloadsArgs) -> Result<i32, String> {
    let cfg = build_config(&a.machine)?;
    let tree = toml::Value::try_from(&cfg.workload).expect("config serializes");
    let mut rows = Vec::new();
    for &w in WorkloadKind::ALL {
        let spec = RunSpec {
            cfg: cfg.clone(),
            workload: w,
            protocol: ProtocolKind::Baseline,
            txs: a.txs,
            warmup_txs: a.txs / 10,
            seed: 1,
            abort_rate: 0.0,
            bug: None,
            record: false,
            tape: false,
            prefault: false,
        };
        let r = runner::execute(&spec)?.result;
        rows.push(WorkloadRow {
            workload: w.name(),
            parameters: tree.get(w.section()).cloned().unwrap_or(toml::Value::Table(Default::default())),
            data_bytes: w.build(&cfg.workload).data_bytes(),
            pset_blocks_per_tx: r.pset_blocks_per_tx,
            pset_txs: r.txs_committed,
        });
    }
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&rows).expect("serializable"));
        return Ok(0);
    }
    for r in &rows {
        outln!(
            "{:<8} P-Set {:>7.2} blocks/tx ({} txs)   data area {:.1} MiB",
            r.workload,
            r.pset_blocks_per_tx,
            r.pset_txs,
            r.data_bytes as f64 / (1 << 20) as f64
        );
        if let Some(t) = r.parameters.as_table() {
            for (k, v) in t {
                outln!("    workload.{}.{} = {}", r.workload, k, v);
            }
        }
    }
    Ok(0)
}

/// `I/N` with `0 <= I < N`.
fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard {s}: allowed I/N with 0 <= I < N, e.g. 0/4");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (i.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
}

fn reproduce(a: ReproduceArgs) -> Result<i32, String> {
    let started = std::time::Instant::now();
    let out = a.out.clone();
    // Worker processes are this executable (`locsim reproduce-worker`).
    let (s, sharded) = reproduce_summary(a, std::env::current_exe().ok())?;
    print_summary(&s, &out, started.elapsed().as_secs_f64(), sharded);
    for line in crate::reproduce::timing::report_lines(&s.times, &s.phases) {
        outln!("{line}");
    }
    Ok(0)
}

/// Run `reproduce`: what it wrote, and whether it was one shard (the printer and
/// [`super::json`] both take it from here).
/// `workers`: the `locsim` executable for worker processes (`None` when this process is not
/// `locsim`, e.g. the Python module).
pub(super) fn reproduce_summary(
    a: ReproduceArgs,
    workers: Option<std::path::PathBuf>,
) -> Result<(crate::reproduce::Summary, bool), String> {
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let opts = crate::reproduce::Options {
        experiments: a.experiments.into(),
        out: a.out.clone().into(),
        quick: a.quick,
        only: a.only.as_deref().map(|s| parse_list(s, "only", |x| Ok(x.to_string()))).transpose()?.unwrap_or_default(),
        jobs,
        shard: a.shard.as_deref().map(parse_shard).transpose()?,
        bench: !a.no_bench,
        quiet: false,
        timings: a.timings.map(Into::into),
        workers,
    };
    Ok((crate::reproduce::reproduce(&opts)?, opts.shard.is_some()))
}

fn print_summary(s: &crate::reproduce::Summary, out: &str, secs: f64, sharded: bool) {
    outln!(
        "{} points simulated, {} from the cache, {} shared with another point, {secs:.1} s",
        s.executed,
        s.cached,
        s.shared
    );
    for (name, why) in &s.pending {
        outln!("not run: {name}: {why}");
    }
    if sharded {
        outln!("shard file written to {out}/; combine the shards with `locsim merge DIR... --out DIR`");
    } else {
        outln!("wrote {} experiments to {out}/ (REPORT.md, report.html)", s.written.len());
    }
}

fn merge(a: MergeArgs) -> Result<i32, String> {
    let dirs: Vec<std::path::PathBuf> = a.dirs.iter().map(Into::into).collect();
    let started = std::time::Instant::now();
    let s = crate::reproduce::merge(&dirs, std::path::Path::new(&a.out))?;
    outln!("merged {} points in {:.1} s", s.cached, started.elapsed().as_secs_f64());
    for (name, why) in &s.pending {
        outln!("not run: {name}: {why}");
    }
    outln!("wrote {} experiments to {}/ (REPORT.md, report.html)", s.written.len(), a.out);
    Ok(0)
}
