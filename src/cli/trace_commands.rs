//! `locsim trace-gen`, and the `--trace FILE` forms of `run` and `crashtest`
//! (docs/your-own-workload.md).

use super::{build_config, check_common, parse_list, MachineArgs, RunArgs, TxArgs, RUN_TXS};
use crate::crash::{self, CrashReport, CrashSpec};
use crate::protocol::ProtocolKind;
use crate::runner::{execute_with, RunOutput, RunSpec};
use crate::trace::{self, format::Encoding, GenSpec, Source};
use crate::workload::trace_replay::TraceWorkload;
use crate::workload::{Workload, WorkloadKind};
use clap::Args;
use std::io::Write;

#[derive(Args, Debug)]
pub struct TraceGenArgs {
    /// Built-in workload to write as a trace (sps, btree, ...; an unknown name lists them all).
    #[arg(long, short)]
    pub workload: String,
    /// Transactions after the warm-up (default: as many as `run` measures, 50000).
    #[arg(long)]
    pub txs: Option<u64>,
    /// Warm-up transactions, declared in the trace's `warmup` record (default:
    /// workload.warmup_txs, as `run`).
    #[arg(long)]
    pub warmup_txs: Option<u64>,
    #[command(flatten)]
    pub tx: TxArgs,
    /// Write the text encoding (one record per line) instead of the binary one.
    #[arg(long)]
    pub text: bool,
    /// Output file (`-`: standard output).
    #[arg(long, short, value_name = "FILE", default_value = "-")]
    pub output: String,
    #[command(flatten)]
    pub machine: MachineArgs,
}

/// A trace given with an abort rate: the trace records its own aborts.
fn no_abort_rate(rate: f64) -> Result<(), String> {
    if rate != 0.0 {
        return Err(format!("--abort-rate {rate} with --trace: a trace records its own aborts (`abort` records)"));
    }
    Ok(())
}

/// Open a trace and run it under `run` (its warm-up as the trace declares); also the bytes of
/// its region (the data area is that, rounded up by the machine's layout). On N cores each
/// core other than 0 reads `path` again (standard input cannot be read N times: refused).
fn replay(mut run: RunSpec, src: Source, path: &str) -> Result<(RunSpec, RunOutput, usize), String> {
    let cores = run.cfg.machine.cores;
    if cores > 1 && path == "-" {
        return Err(format!(
            "--trace - with --cores {cores}: each core reads the trace at its own place, so it must be a file"
        ));
    }
    let tw = TraceWorkload::open_cores(src, cores, &|| trace::open(path))?;
    let region = tw.data_bytes() as usize;
    run.workload = WorkloadKind::Trace;
    run.warmup_txs = tw.warmup_txs();
    let out = execute_with(&run, Workload::Trace(tw))?;
    Ok((run, out, region))
}

/// `locsim run --trace FILE`: every protocol at once, each on its own branch of the stream (a
/// file is opened once per protocol; standard input is split by [`trace::tee::tee`]).
pub(super) fn run(a: &RunArgs, path: &str) -> Result<Vec<crate::runner::RunResult>, String> {
    no_abort_rate(a.tx.abort_rate)?;
    let cfg = build_config(&a.machine)?;
    let protocols = parse_list(&a.protocol, "protocol", ProtocolKind::parse)?;
    let sources: Vec<Source> = if path == "-" && protocols.len() > 1 {
        trace::tee::tee(trace::open(path)?, protocols.len()).into_iter().map(|b| Box::new(b) as Source).collect()
    } else {
        protocols.iter().map(|_| trace::open(path)).collect::<Result<_, _>>()?
    };
    let results: Vec<Result<_, String>> = std::thread::scope(|s| {
        let runs: Vec<_> = protocols
            .iter()
            .zip(sources)
            .map(|(&protocol, src)| {
                let spec = RunSpec {
                    cfg: cfg.clone(),
                    workload: WorkloadKind::Trace,
                    protocol,
                    txs: a.txs.unwrap_or(u64::MAX),
                    warmup_txs: 0,
                    seed: a.tx.seed,
                    abort_rate: 0.0,
                    bug: None,
                    record: false,
                    tape: false,
                    prefault: false,
                };
                s.spawn(move || replay(spec, src, path).map(|(_, out, _)| out.result))
            })
            .collect();
        runs.into_iter().map(|h| h.join().expect("replay thread panicked")).collect()
    });
    results.into_iter().collect()
}

/// `locsim crashtest --trace FILE`: a recorded replay, then the crash sweep.
pub(super) fn crashtest(spec: CrashSpec, path: &str) -> Result<CrashReport, String> {
    no_abort_rate(spec.run.abort_rate)?;
    let (run, out, region) = replay(spec.run.clone(), trace::open(path)?, path)?;
    // A caller's own check sees the trace's region, not the layout's rounding beyond it.
    let verify = spec.verify.clone().map(|crash::UserVerify(f)| {
        crash::UserVerify(std::sync::Arc::new(move |data: &[u8]| f(&data[..region.min(data.len())])))
    });
    crash::check_run(&CrashSpec { run, verify, ..spec }, out)
}

/// `locsim trace-gen`.
pub(super) fn generate(a: TraceGenArgs) -> Result<i32, String> {
    check_common(a.tx.abort_rate)?;
    let cfg = build_config(&a.machine)?;
    let workload = WorkloadKind::parse(&a.workload)?;
    if cfg.workload.warmup_to_steady {
        // The trace records the program's accesses, not the caches': where steady state falls
        // is the simulated run's to find, and a replayed trace's warm-up is the count it declares.
        return Err(
            "trace-gen: workload.warmup_to_steady applies to simulated runs; a trace's warm-up is its --warmup-txs"
                .into(),
        );
    }
    if cfg.machine.cores > 1 {
        workload
            .build(&cfg.workload)
            .multicore()
            .map_err(|e| format!("trace-gen --cores {}: {e}", cfg.machine.cores))?;
    }
    let g = GenSpec {
        workload,
        txs: a.txs.unwrap_or(RUN_TXS),
        warmup_txs: a.warmup_txs.unwrap_or(cfg.workload.warmup_txs),
        seed: a.tx.seed,
        abort_rate: a.tx.abort_rate,
        encoding: if a.text { Encoding::Text } else { Encoding::Binary },
        cfg,
    };
    let written = if a.output == "-" {
        trace::generate(&g, std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock()))
    } else {
        return write_trace_file(&g, &a.output);
    };
    match written {
        Ok(_) => Ok(0),
        // The reader went away (`trace-gen | head`, or a replay that stopped on an error of
        // its own): end quietly, as every command's output does.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
        Err(e) => Err(format!("trace-gen: writing {}: {e}", a.output)),
    }
}

/// `trace-gen --output FILE`: written whole or not at all (a killed trace-gen leaves no
/// truncated trace).
fn write_trace_file(g: &GenSpec, path: &str) -> Result<i32, String> {
    let mut f = crate::outfile::OutFile::create(std::path::Path::new(path)).map_err(|e| format!("--output {e}"))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, &mut f);
    trace::generate(g, &mut w).and_then(|_| w.flush()).map_err(|e| format!("trace-gen: writing {path}: {e}"))?;
    drop(w);
    f.commit().map(|_| 0).map_err(|e| format!("--output {e}"))
}
