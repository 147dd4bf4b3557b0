//! Experiment kinds: what runs one point of a spec. `sim` runs [`runner::execute`] on a
//! [`RunSpec`] built from the point; `journal` is the SQLite-journal-on-PCM evaluation, whose
//! engine is plugged in at [`JournalExec::run`].
//!
//! An executor names its metrics (the CSV columns, with units), checks axis values and
//! configuration overrides when a spec is parsed, and runs one point. Its result is a vector of
//! metric values in the order of [`Executor::metrics`] (`None` where a metric does not apply,
//! e.g. PCM wear on the ideal device). It must be a pure function of the point, the spec's
//! overrides and the run lengths: no host timings, so that results are identical across runs,
//! `--jobs` values and shards.

use super::point::{Point, Values};
use crate::config::Config;
use crate::protocol::ProtocolKind;
use crate::runner::{self, RunResult, RunSpec};
use crate::workload::WorkloadKind;

/// A metric column: name and unit.
#[derive(Copy, Clone, Debug)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
}

const fn m(name: &'static str, unit: &'static str) -> Metric {
    Metric { name, unit }
}

/// What an axis value is, once checked.
#[derive(Debug, PartialEq)]
pub enum Check {
    Ok,
    /// Known, but not runnable in this build (the reason): an executor may say so for an
    /// axis value whose model is not built in (every value of this build is runnable; the
    /// report lists such specs under "Not run in this build").
    Pending(String),
}

/// Everything one point needs besides its coordinates.
pub struct Job<'a> {
    pub point: &'a Point,
    /// Fixed `key=value` configuration overrides of the spec.
    pub set: &'a [String],
    pub txs: u64,
    pub warmup_txs: u64,
}

/// One experiment kind.
pub trait Executor: Sync {
    /// The metric columns, in result order.
    fn metrics(&self) -> &'static [Metric];
    /// Check one axis value (an unknown axis or value is an error naming the allowed ones).
    fn check(&self, axis: &str, value: &str) -> Result<Check, String>;
    /// Check one fixed `key=value` override.
    fn check_set(&self, kv: &str) -> Result<(), String>;
    /// Run one point.
    fn run(&self, job: &Job) -> Result<Vec<Option<f64>>, String>;
    /// What the point computes, resolved (e.g. the full configuration), when that can say that
    /// two points with different coordinates compute the same: such points run once. `None`:
    /// the point's text is its identity.
    fn identity(&self, job: &Job) -> Option<String>;
    /// Run one point, and say which of the configuration keys that [`Executor::base_identity`]
    /// leaves out the run never read: any point whose [`Executor::identity_without`] those keys
    /// is this one's computes the same values (`reproduce` runs it once). By default every key
    /// counts as read.
    fn run_reads(&self, job: &Job) -> Result<(Values, Vec<String>), String> {
        self.run(job).map(|v| (v, Vec::new()))
    }
    /// The point's identity with the configuration keys `unread` left out (`None`: the executor
    /// does not track the keys its runs read).
    fn identity_without(&self, _job: &Job, _unread: &[String]) -> Option<String> {
        None
    }
    /// The point's identity with every key a run may leave unread left out: only points with
    /// equal base identities may compute the same through [`Executor::run_reads`].
    fn base_identity(&self, _job: &Job) -> Option<String> {
        None
    }
    /// Whether the point must not run beside another exclusive point in the same process
    /// (its [`Executor::run`] then waits for the other to finish): the engine runs these one
    /// after the other and the free points beside them.
    fn exclusive(&self, job: &Job) -> bool;
    /// The point's host cost relative to the other points' (only its order among them counts):
    /// the workers take the costliest points first so that they finish together.
    fn cost(&self, job: &Job) -> f64;
    /// The populated workload configuration that the point's run shares with other points
    /// ([`runner::populated_key`]), if any: while a run of it is populating it, a worker takes
    /// another point instead of waiting.
    fn populates(&self, job: &Job) -> Option<String>;
}

/// The experiment kinds a spec's `kind` may name.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Sim,
    Journal,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Sim, Kind::Journal];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Sim => "sim",
            Kind::Journal => "journal",
        }
    }

    pub fn parse(s: &str) -> Result<Kind, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown kind `{s}`: allowed {}", Kind::ALL.map(|k| k.name()).join(", ")))
    }

    pub fn executor(self) -> &'static dyn Executor {
        match self {
            Kind::Sim => &SimExec,
            Kind::Journal => &JournalExec,
        }
    }
}

/// Axes of `sim` specs besides configuration keys (any `section.key` that `locsim config` prints).
const SIM_AXES: &[&str] = &["workload", "protocol", "mem_latency_ns", "sd", "ordering"];

/// Runs the cycle-level simulator.
pub struct SimExec;

/// SQLite simulations run one at a time. SQLite keeps process-wide state, and two SQLite
/// simulations running at once in one process give different cycle counts than each alone
/// (measured: 0.1% to 0.3% on `tiny-sqlite.toml` with `--jobs 3`; one after the other in one
/// process, or in separate processes, they agree). The other workloads still run beside them.
static SQLITE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Hold while running SQLite in this process (a point, or the speed measurement, which runs
/// the `sqlite` workload too).
pub fn sqlite_alone() -> std::sync::MutexGuard<'static, ()> {
    SQLITE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Host microseconds per simulated transaction on one core and the ideal device, by workload:
/// the order of the points' costs for [`Executor::cost`] (medians over the points of
/// `reproduce --quick --timings`, Zen 5 EPYC; only their order matters).
fn host_us_per_tx(w: WorkloadKind) -> f64 {
    match w {
        WorkloadKind::Sps => 1.2,
        WorkloadKind::Hash => 5.5,
        WorkloadKind::Sdg => 17.5,
        WorkloadKind::BTree => 25.0,
        WorkloadKind::RbTree => 32.5,
        WorkloadKind::Sqlite => 54.0,
        _ => host_us_per_tx(WorkloadKind::BTree),
    }
}

/// The same, factors for the bit-level PCM device and for more than one core (measured alike).
const PCM_COST: f64 = 4.0;
const CORES_COST: f64 = 1.5;

/// Host microseconds of a journal point (the median over the journal points, measured alike).
const JOURNAL_COST_US: f64 = 45_000.0;

const SIM_METRICS: &[Metric] = &[
    m("throughput_tx_per_mcycle", "transactions per million cycles"),
    m("write_traffic", "NVM bytes written per program byte"),
    m("mem_write_bytes", "bytes"),
    m("program_write_bytes", "bytes"),
    m("log_write_bytes", "bytes"),
    m("pset_blocks_per_tx", "64-byte blocks per transaction"),
    m("cycles", "cycles"),
    m("txs_committed", "transactions"),
    m("commit_to_ack_mean_cycles", "cycles"),
    m("llc_miss_rate", "fraction"),
    m("total_bit_updates", "cells programmed"),
    m("max_bit_updates", "programs of the most-written cell"),
    m("lifetime_years", "years"),
    m("energy_nj", "nJ"),
    m("commit_to_ack_p99_cycles", "cycles"),
    m("txs_aborted", "transactions"),
];

fn sim_values(r: &RunResult) -> Vec<Option<f64>> {
    let pcm = r.pcm.as_ref();
    vec![
        Some(r.throughput_tx_per_mcycle),
        Some(r.write_traffic),
        Some(r.mem_write_bytes as f64),
        Some(r.program_write_bytes as f64),
        Some(r.log_write_bytes as f64),
        Some(r.pset_blocks_per_tx),
        Some(r.cycles.get() as f64),
        Some(r.txs_committed as f64),
        Some(r.commit_to_ack_mean_cycles),
        Some(r.llc_miss_rate),
        pcm.map(|p| p.total_bit_updates as f64),
        pcm.map(|p| p.max_bit_updates as f64),
        pcm.and_then(|p| p.lifetime_years),
        pcm.map(|p| p.energy_nj),
        Some(r.commit_to_ack_p99_cycles.get() as f64),
        Some(r.txs_aborted as f64),
    ]
}

impl SimExec {
    /// The run a point stands for.
    pub fn run_spec(&self, job: &Job) -> Result<RunSpec, String> {
        let p = job.point;
        let mut sets = job.set.to_vec();
        for (axis, v) in &p.coords {
            match axis.as_str() {
                "workload" | "protocol" => {}
                "sd" => sets.push(format!("loc.speculation_degree={v}")),
                "ordering" => sets.extend(crate::ordering::step_sets(v)?),
                "mem_latency_ns" => {
                    sets.push(format!("memory.read_latency_ns={v}"));
                    sets.push(format!("memory.write_latency_ns={v}"));
                }
                key => sets.push(format!("{key}={v}")),
            }
        }
        let cfg = Config::build(None, &sets).map_err(|e| e.0)?;
        let workload = WorkloadKind::parse(p.get("workload").unwrap_or("sps"))?;
        let protocol = ProtocolKind::parse(p.get("protocol").unwrap_or("baseline"))?;
        Ok(RunSpec {
            cfg,
            workload,
            protocol,
            txs: job.txs,
            warmup_txs: job.warmup_txs,
            seed: p.seed,
            abort_rate: 0.0,
            bug: None,
            record: false,
            tape: true,
            prefault: false,
        })
    }
}

impl Executor for SimExec {
    fn metrics(&self) -> &'static [Metric] {
        SIM_METRICS
    }

    fn check(&self, axis: &str, value: &str) -> Result<Check, String> {
        match axis {
            "workload" => WorkloadKind::parse(value).map(|_| Check::Ok),
            "protocol" => ProtocolKind::parse(value).map(|_| Check::Ok),
            "sd" => self.check_set(&format!("loc.speculation_degree={value}")).map(|_| Check::Ok),
            "mem_latency_ns" => self.check_set(&format!("memory.read_latency_ns={value}")).map(|_| Check::Ok),
            "ordering" => crate::ordering::step_sets(value).map(|_| Check::Ok),
            key if key.contains('.') => self.check_set(&format!("{key}={value}")).map(|_| Check::Ok),
            other => Err(format!(
                "unknown axis `{other}`: allowed {} or a configuration key (section.key)",
                SIM_AXES.join(", ")
            )),
        }
    }

    fn check_set(&self, kv: &str) -> Result<(), String> {
        Config::build(None, &[kv.to_string()]).map(|_| ()).map_err(|e| e.0)
    }

    fn exclusive(&self, job: &Job) -> bool {
        job.point.get("workload") == Some(WorkloadKind::Sqlite.name())
    }

    /// Every input of [`runner::execute`]: the configuration in full, workload, protocol, seed
    /// and run lengths (a point that does not resolve has no identity but its text).
    fn identity(&self, job: &Job) -> Option<String> {
        self.run_spec(job).ok().map(|r| run_identity(&r))
    }

    /// The configuration keys a run never read ([`runner::RunOutput::unread`]).
    fn run_reads(&self, job: &Job) -> Result<(Values, Vec<String>), String> {
        let spec = self.run_spec(job)?;
        let _one_at_a_time = (spec.workload == WorkloadKind::Sqlite).then(sqlite_alone);
        let out = runner::execute(&spec)?;
        Ok((sim_values(&out.result), out.unread))
    }

    /// The identity with the words whose reads a run records ([`runner::tracked_words`]: the
    /// resolved `[ordering]` knobs, what a run reads of the persistence domain, the `[loc]`
    /// keys) apart, those in `unread` as `*` (the ordering preset itself is read by nothing but
    /// the run's own label).
    fn identity_without(&self, job: &Job, unread: &[String]) -> Option<String> {
        let mut r = self.run_spec(job).ok()?;
        let words: Vec<String> = runner::tracked_words(&mut r.cfg)
            .into_iter()
            .map(|(k, v)| if unread.contains(&k) { format!("{k}=*") } else { format!("{k}={v}") })
            .collect();
        Some(format!("{}\nread: {}", run_identity(&r), words.join(" ")))
    }

    fn base_identity(&self, job: &Job) -> Option<String> {
        let mut cfg = self.run_spec(job).ok()?.cfg;
        let all: Vec<String> = runner::tracked_words(&mut cfg).into_iter().map(|(k, _)| k).collect();
        self.identity_without(job, &all)
    }

    /// Simulated transactions (warm-up included) times the workload's host cost per
    /// transaction, times the PCM device's and the cores' factors.
    fn cost(&self, job: &Job) -> f64 {
        let Ok(r) = self.run_spec(job) else { return 0.0 };
        let pcm = if r.cfg.memory.device == crate::config::Device::Pcm { PCM_COST } else { 1.0 };
        let cores = if r.cfg.machine.cores > 1 { CORES_COST } else { 1.0 };
        (r.txs + r.warmup_txs) as f64 * host_us_per_tx(r.workload) * pcm * cores
    }

    fn populates(&self, job: &Job) -> Option<String> {
        let r = self.run_spec(job).ok()?;
        Some(runner::populated_key(r.workload, &r.cfg.workload))
    }

    fn run(&self, job: &Job) -> Result<Vec<Option<f64>>, String> {
        self.run_reads(job).map(|(v, _)| v)
    }
}

/// Every input of a run, as text.
fn run_identity(r: &RunSpec) -> String {
    // `tape` and `prefault` change host time only: runs with and without them are one identity.
    let RunSpec { cfg, workload, protocol, txs, warmup_txs, seed, abort_rate, bug, record, tape: _, prefault: _ } = r;
    format!(
        "workload={} protocol={} txs={txs} warmup_txs={warmup_txs} seed={seed} abort_rate={abort_rate} bug={bug:?} record={record}\n{}",
        workload.name(),
        protocol.name(),
        cfg.to_toml()
    )
}

/// The SQLite-journal-on-PCM evaluation (axes `app`, `trace`, `config`).
pub struct JournalExec;

/// The `config` value standing for SQLite without a rollback journal.
const NO_JOURNAL: &str = "no-journal";

/// The applications whose traces the journal paper uses (Table III): Facebook, Gmail,
/// KakaoTalk, Twitter.
pub const JOURNAL_APPS: &[&str] = &["fb", "gm", "kt", "tw"];

const JOURNAL_METRICS: &[Metric] = &[
    m("total_bit_updates", "cells programmed"),
    m("max_bit_updates", "programs of the most-written cell"),
    m("energy_nj", "nJ"),
    m("mean_command_ns", "ns per SQLite command"),
    m("mean_command_counted_ns", "ns per SQLite command, as the performance monitor counts (no flash wait)"),
    m("energy_counted_nj", "nJ, background power over the counted time"),
];

impl Executor for JournalExec {
    fn metrics(&self) -> &'static [Metric] {
        JOURNAL_METRICS
    }

    fn check(&self, axis: &str, value: &str) -> Result<Check, String> {
        let ok = match axis {
            "app" => JOURNAL_APPS.contains(&value),
            "trace" => value.parse::<u32>().is_ok_and(|t| (1..=4).contains(&t)),
            "config" if value == NO_JOURNAL => true,
            "config" => return crate::journal::policy::Policy::parse(value).map(|_| Check::Ok),
            "cpu_ns_per_command" => {
                let n =
                    value.parse::<u64>().map_err(|_| format!("cpu_ns_per_command = {value}: allowed 0..=100000000"))?;
                return crate::journal::Device::build(&[], Some(n)).map(|_| Check::Ok);
            }
            key if key.contains('.') => {
                return crate::journal::Device::build(&[format!("{key}={value}")], None).map(|_| Check::Ok);
            }
            other => {
                return Err(format!(
                    "unknown axis `{other}`: allowed app, trace, config, cpu_ns_per_command or a pcm.* key"
                ))
            }
        };
        if !ok {
            return Err(format!(
                "{axis} = {value}: allowed app {}, trace 1..=4, config a Table IV name (e.g. RR, RU20-S2X-WH64) or {NO_JOURNAL}",
                JOURNAL_APPS.join(", ")
            ));
        }
        Ok(Check::Ok)
    }

    fn check_set(&self, kv: &str) -> Result<(), String> {
        crate::journal::Device::build(&[kv.to_string()], None).map(|_| ())
    }

    fn exclusive(&self, _job: &Job) -> bool {
        true
    }

    fn identity(&self, _job: &Job) -> Option<String> {
        None
    }

    fn cost(&self, _job: &Job) -> f64 {
        JOURNAL_COST_US
    }

    fn populates(&self, _job: &Job) -> Option<String> {
        None
    }

    /// One replay per point (`app`, `trace`, `config`: `journal::measure_point`, the figures
    /// `journal::run_on` gives without its extra replays and scans); `no-journal` is SQLite with
    /// `journal_mode=OFF` on the same trace (its command time; it programs no journal cell).
    fn run(&self, job: &Job) -> Result<Vec<Option<f64>>, String> {
        let p = job.point;
        let app = crate::journal::apps::App::parse(p.get("app").unwrap_or("fb"))?;
        let trace: u32 = p.get("trace").unwrap_or("1").parse().map_err(|_| "trace: allowed 1..=4".to_string())?;
        let config = p.get("config").unwrap_or("RR");
        let mut sets = job.set.to_vec();
        sets.extend(p.coords.iter().filter(|(a, _)| a.contains('.')).map(|(a, v)| format!("{a}={v}")));
        let cpu = match p.get("cpu_ns_per_command") {
            Some(v) => Some(v.parse().map_err(|_| format!("cpu_ns_per_command = {v}: allowed 0..=100000000"))?),
            None => None,
        };
        let dev = crate::journal::Device::build(&sets, cpu)?;
        let _one_at_a_time = sqlite_alone();
        if config == NO_JOURNAL {
            // The no-journal reference replay of an RR-S2X measurement (its command time).
            let r = crate::journal::measure_point(app, trace, "RR-S2X", p.seed, &dev, false)?;
            return Ok(vec![
                Some(0.0),
                Some(0.0),
                Some(0.0),
                Some(r.times.latency_ns),
                Some(r.times.counted_ns),
                Some(0.0),
            ]);
        }
        let r = crate::journal::measure_point(app, trace, config, p.seed, &dev, true)?;
        Ok(vec![
            Some(r.wear.total as f64),
            Some(r.wear.max as f64),
            Some(r.energy_nj),
            Some(r.times.latency_ns),
            Some(r.times.counted_ns),
            Some(r.energy_counted_nj),
        ])
    }
}
