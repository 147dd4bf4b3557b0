//! Running one workload under one protocol: set-up (populate, format), warm-up, the measured
//! region, and the figures of docs/model.md section 6. With recording on, the run also returns what
//! the crash checker needs (initial image, durable writes, acknowledgements, oracle log).

use crate::config::Config;
use crate::machine::{Machine, MachineStats, Recorder};
use crate::pmem::{Layout, WriteKind};
use crate::protocol::{Bug, Build, Protocol, ProtocolKind, Visit};
use crate::recent::{at_most, Recent};
use crate::rng::{next_abort, run_streams};
use crate::sim::{DirtyProbe, OracleLog, Sim};
use crate::types::{Cycle, Ns, BLOCK_BYTES};
use crate::workload::tx_tape::{self, Tape, TapeReader};
use crate::workload::{native::Native, Workload, WorkloadConfig, WorkloadKind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Instant;

/// What to run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    pub cfg: Config,
    pub workload: WorkloadKind,
    pub protocol: ProtocolKind,
    /// Transactions in the measured region (attempted; aborted ones included).
    pub txs: u64,
    /// Transactions before it (caches warm up; excluded from the figures).
    pub warmup_txs: u64,
    pub seed: u64,
    /// Fraction of transactions the workload aborts.
    pub abort_rate: f64,
    pub bug: Option<Bug>,
    /// Keep what the crash checker needs.
    pub record: bool,
    /// A SQLite run on one core replays SQLite's calls from a recording shared by the runs of
    /// its configuration, seed and abort rate in this process ([`crate::workload::tx_tape`]): the
    /// same figures, less host time for a sweep (`reproduce` sets it). Its host seconds then
    /// leave out SQLite's own work. No effect on the other workloads.
    pub tape: bool,
    /// Commit the host memory of the device's byte image before the run, and under the PCM
    /// device that of a region's cell counters whole at the region's first write (a region of
    /// up to 64 MiB of device), so that the measured region's host time leaves out the host's
    /// first touch of that memory (`bench` sets it); otherwise both are committed as the run
    /// reaches them (the counters a host huge page at a time), which is less host work for a
    /// run that writes part of the device ([`crate::pcm::Wear::commit_regions_whole`]). The
    /// same figures either way.
    pub prefault: bool,
}

/// The figures of one run (one object of `locsim run --json`).
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub workload: String,
    pub protocol: String,
    /// Speculation degree, for protocols that speculate; null otherwise.
    pub sd: Option<u32>,
    pub mem_latency_ns: Ns,
    pub mem_write_latency_ns: Ns,
    pub seed: u64,
    pub txs_committed: u64,
    pub txs_aborted: u64,
    pub warmup_txs: u64,
    /// Warm-up transactions run after `warmup_txs` until the caches' dirty lines stopped growing
    /// (`workload.warmup_to_steady`; absent when not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_steady_txs: Option<u64>,
    pub cycles: Cycle,
    pub throughput_tx_per_mcycle: f64,
    /// Throughput over the baseline's (null unless `baseline` ran in the same invocation).
    pub normalized_throughput: Option<f64>,
    pub program_write_bytes: u64,
    pub mem_write_bytes: u64,
    pub write_traffic: f64,
    /// Write-traffic overhead over the baseline: memory bytes written per committed transaction
    /// over the baseline's, minus one (null unless `baseline` ran in the same invocation or its
    /// bytes are 0; docs/ordering.md).
    pub write_overhead: Option<f64>,
    pub mem_write_bytes_by_kind: BTreeMap<&'static str, u64>,
    /// Protocol-specific event counts over the measured region.
    pub protocol_counters: BTreeMap<&'static str, u64>,
    /// Under `machine.persist_domain = "gpf"` or `"gpf-no-writeback"` only: the drain work a
    /// power failure would leave to Global Persistent Flush (docs/cxl.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpf: Option<GpfFigures>,
    /// Endurance and energy of the PCM device (null unless `memory.device = "pcm"`).
    pub pcm: Option<PcmFigures>,
    pub pset_blocks_per_tx: f64,
    /// NVM bytes written to the log area (log data, metadata, commit records, head).
    pub log_write_bytes: u64,
    /// Cycles from a commit call to the transaction's acknowledgement (mean, 99th percentile).
    pub commit_to_ack_mean_cycles: f64,
    pub commit_to_ack_p99_cycles: Cycle,
    pub mem_reads: u64,
    pub llc_miss_rate: f64,
    pub flushes: u64,
    pub fence_stall_cycles: Cycle,
    /// The ordering the machine enforced (`[ordering]`) and what it cost the core.
    pub ordering: OrderingFigures,
    /// Core accesses (loads and stores, per block touched) in the measured region: the
    /// denominator of the speed figure.
    pub sim_mem_accesses: u64,
    /// Requests the memory controller served (NVM reads and writes) in the measured region.
    pub sim_mem_requests: u64,
    pub host_seconds: f64,
    pub sim_mem_accesses_per_second: f64,
    pub version: &'static str,
    pub git_rev: &'static str,
    pub config_hash: String,
    /// With more than one core (absent with one): the number of cores, and per core the cycles
    /// from the start of the measured region to when it finished its share (docs/multicore.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_end_cycles: Option<Vec<Cycle>>,
}

/// The ordering mechanisms of a run (docs/ordering.md).
#[derive(Clone, Debug, Serialize)]
pub struct OrderingFigures {
    /// `overlapped` or `paper`.
    pub preset: String,
    /// Knobs whose resolved value differs from `overlapped`, as `knob=value`.
    pub knobs: Vec<String>,
    /// Core cycles moving dirty lines out of L1/L2 at commit (`commit_flush`, `flush_cost`).
    pub commit_flush_cycles: Cycle,
    /// Core cycles waiting at the phase barrier.
    pub barrier_stall_cycles: Cycle,
}

/// Endurance and energy of a run on the PCM device, over the measured region.
#[derive(Clone, Debug, Serialize)]
pub struct PcmFigures {
    /// Cells programmed (data and flip cells).
    pub total_bit_updates: u64,
    /// Programs of the most programmed cell.
    pub max_bit_updates: u64,
    /// Per region: totals, maximum and a log2 histogram of programs per cell.
    pub regions: Vec<crate::pcm::RegionWear>,
    pub energy_nj: f64,
    /// Time until the most programmed cell reaches `pcm.cell_endurance_writes` at this rate.
    pub lifetime_years: Option<f64>,
    /// Host memory of the wear counters.
    pub counter_host_bytes: u64,
    /// With `pcm.retire_worn_cells`: retired cells and failed writes of the device, then of each
    /// region (the first retired cell and the first failed write: where, which write, when).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retire: Option<Vec<crate::pcm::RetireFigures>>,
}

/// What Global Persistent Flush would drain at a power failure, over the measured region
/// (docs/cxl.md "What GPF costs").
#[derive(Clone, Debug, Serialize)]
pub struct GpfFigures {
    /// Moments sampled (every `GPF_SAMPLE_CYCLES` of the clock).
    pub samples: u64,
    /// Dirty lines of the host's caches that phase 1 writes back (0 under `gpf-no-writeback`,
    /// which skips phase 1): mean and maximum over the samples.
    pub dirty_lines_mean: f64,
    pub dirty_lines_max: u64,
    /// Bytes of accepted writes not yet complete in the controller's queue and the device's
    /// buffers (phase 2): mean and maximum.
    pub device_buffer_bytes_mean: f64,
    pub device_buffer_bytes_max: u64,
    /// Time and energy to drain the mean and the largest sampled work: lines spread over the
    /// banks, each a device write (`memory.write_latency_ns`) after the link's write path;
    /// each line's media energy 512 bits x `pcm.program_energy_pj_per_bit`.
    pub drain_ns_mean: f64,
    pub drain_ns_max: f64,
    pub drain_energy_nj_mean: f64,
    pub drain_energy_nj_max: f64,
}

/// [`GpfFigures`] of the samples `g`.
pub fn gpf_figures(g: &crate::machine::GpfWork, cfg: &crate::config::Config) -> GpfFigures {
    let n = g.samples.max(1) as f64;
    let (dirty, queued) = (g.dirty_sum as f64 / n, g.queued_sum as f64 / n);
    let (_, link_write) = cfg.memory.cxl_cycles(cfg);
    let ns_per_cycle = 1000.0 / cfg.core.freq_mhz as f64;
    let banks = cfg.memory.banks as f64;
    let time = |lines: f64| {
        if lines == 0.0 {
            0.0
        } else {
            (lines / banks).ceil() * cfg.memory.write_latency_ns.get() as f64 + link_write.get() as f64 * ns_per_cycle
        }
    };
    let energy = |lines: f64| lines * 512.0 * cfg.pcm.program_energy_pj_per_bit / 1000.0;
    GpfFigures {
        samples: g.samples,
        dirty_lines_mean: dirty,
        dirty_lines_max: g.dirty_max,
        device_buffer_bytes_mean: queued * 64.0,
        device_buffer_bytes_max: g.queued_max * 64,
        drain_ns_mean: time(dirty + queued),
        drain_ns_max: time(g.drain_max as f64),
        drain_energy_nj_mean: energy(dirty + queued),
        drain_energy_nj_max: energy(g.drain_max as f64),
    }
}

fn pcm_figures(p: &mut crate::pcm::Pcm, spec: &RunSpec, cycles: Cycle) -> PcmFigures {
    let regions = p.wear.regions();
    let max = regions.iter().map(|r| r.max_bit_updates).max().unwrap_or(0);
    let seconds = spec.cfg.cycles_to_seconds(cycles);
    let lifetime_years =
        (max > 0).then(|| p.config().cell_endurance_writes / max as f64 * seconds / (365.25 * 24.0 * 3600.0));
    PcmFigures {
        total_bit_updates: p.wear.total_bit_updates,
        max_bit_updates: max,
        regions,
        energy_nj: p.energy_nj(seconds),
        lifetime_years,
        counter_host_bytes: p.wear.host_bytes(),
        retire: p.retire.as_ref().map(|r| r.figures.clone()),
    }
}

/// What the crash checker needs from a recorded run.
pub struct Recorded {
    pub layout: Layout,
    pub initial: Vec<u8>,
    pub record: Recorder,
    pub oracle: OracleLog,
    /// Cycle at which the last transaction's commit returned.
    pub end_cycle: Cycle,
}

pub struct RunOutput {
    pub result: RunResult,
    pub recorded: Option<Recorded>,
    /// The keys of [`tracked_words`] the run never read: it gives the same result whatever
    /// their values (the `[ordering]` knobs, [`crate::ordering::Knobs`]; what it may read of the
    /// persistence domain, [`crate::machine::DOMAIN_READS`]; the `[loc]` keys, [`LOC_READS`]).
    pub unread: Vec<String>,
}

/// The `[loc]` keys, read by a run only when it builds a protocol that takes them (LOC-WAL both,
/// LOC-Kiln the speculation degree).
pub const LOC_READS: [&str; 2] = ["loc.speculation_degree", "loc.two_slot_head"];

/// Every configuration word whose reads a run records ([`RunOutput::unread`]), with its value
/// in `cfg`, and `cfg` with each of them at its default: a run's identity is the rest of the
/// configuration plus these words, those the run never read as `*` (`reproduce` runs points of
/// equal identity once, docs/reproduce.md).
pub fn tracked_words(cfg: &mut Config) -> Vec<(String, String)> {
    let mut words: Vec<(String, String)> =
        cfg.ordering.resolve().words().into_iter().map(|(k, v)| (format!("ordering.{k}"), v)).collect();
    words.extend(crate::machine::domain_words(cfg).into_iter().map(|(k, v)| (k.to_string(), v)));
    words.push((LOC_READS[0].into(), cfg.loc.speculation_degree.to_string()));
    words.push((LOC_READS[1].into(), cfg.loc.two_slot_head.to_string()));
    let d = Config::default();
    (cfg.ordering, cfg.loc) = (d.ordering, d.loc);
    (cfg.machine.persist_domain, cfg.machine.bbpb_entries) = (d.machine.persist_domain, d.machine.bbpb_entries);
    words
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const GIT_REV: &str = env!("LOCSIM_GIT_REV");

/// Run `spec`. `Err` is a one-line message (e.g. the log area is too small).
pub fn execute(spec: &RunSpec) -> Result<RunOutput, String> {
    match populated(spec.workload, &spec.cfg.workload) {
        Some((wl, data)) => {
            let tapes =
                spec.tape && spec.cfg.machine.cores == 1 && spec.bug.is_none() && tx_tape::recordable(spec.workload);
            let tape = tapes.then(|| {
                let key = format!(
                    "{} seed={} abort_rate={:#x}",
                    populated_key(spec.workload, &spec.cfg.workload),
                    spec.seed,
                    spec.abort_rate.to_bits()
                );
                let wl = wl.try_clone().expect("a populated workload is copyable");
                tx_tape::shared(key, || Tape::new(wl, data.clone(), spec.seed, spec.abort_rate))
            });
            run_on(spec, wl, Some(Populated { data: &data, tape: tape.as_ref() }))
        }
        None => execute_with(spec, spec.workload.build(&spec.cfg.workload)),
    }
}

/// Run `spec` on an already built workload (a replayed trace: `spec.txs` bounds the measured
/// region, which also ends with the trace).
pub fn execute_with(spec: &RunSpec, wl: Workload) -> Result<RunOutput, String> {
    run_on(spec, wl, None)
}

/// A populated data area, with which of its pages hold a non-zero byte: a run's image is
/// fresh zeroed memory, into which only those pages are copied (the free space that a workload
/// keeps for its inserts is left to be provided by the host when, and if, the run writes it).
struct Data {
    bytes: Vec<u8>,
    pages: crate::hostmem::Sparse,
}

impl AsRef<[u8]> for Data {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Where a run of a populated workload starts: its data area and, with [`RunSpec::tape`], the
/// recording of its transactions that the run replays.
#[derive(Clone, Copy)]
struct Populated<'a> {
    data: &'a Data,
    tape: Option<&'a Arc<Tape>>,
}

/// The workload's driver state right after populating, and its data area.
struct Kept {
    wl: Workload,
    data: Arc<Data>,
}

/// One workload configuration's populated state: `None` until the first run of it has
/// populated it, then `Some(None)` for a workload whose driver state cannot be copied
/// ([`Workload::try_clone`]). Whoever populates holds the lock, so that runs of the same
/// configuration on other threads (`reproduce`'s workers) wait for it instead of populating
/// it again.
type Slot = Arc<Mutex<Option<Option<Kept>>>>;

/// Populated workloads kept per process, most recently used first (at most
/// [`POPULATED_KEPT`]). Populating (inserting a B+tree's or an SDG's initial contents) costs
/// more than a short measured region, and is the same for every run of one workload
/// configuration, whatever the protocol, machine, latency or seed: a sweep (`reproduce`, `run`
/// with several protocols, the crash checker) populates each configuration once and copies it.
static POPULATED: Recent<String, Slot> = Recent::new();
/// A quick `reproduce` populates 18 configurations, some visited again late in its order: with
/// eight kept it populated eight of them twice. Each kept one holds its pages written by the
/// populate (tens of MiB).
const POPULATED_KEPT: usize = 16;

/// The name of the workload configuration that a run of `kind` with `cfg` populates (or takes
/// populated) in `POPULATED`: runs with equal names share one populating.
pub fn populated_key(kind: WorkloadKind, cfg: &WorkloadConfig) -> String {
    format!("{}:{}", kind.name(), kind.build_key(cfg))
}

/// Whether a run in this process is populating the configuration named `key` right now (a run
/// of it started now would wait for that one): `reproduce`'s workers take another point first.
pub fn populating(key: &str) -> bool {
    POPULATED.peek(|k| k == key, |slot| matches!(slot.try_lock(), Err(TryLockError::WouldBlock))).unwrap_or(false)
}

/// The workload `kind` built from `cfg` and populated, with its data area; `None` for a
/// workload whose driver state cannot be copied ([`Workload::try_clone`]).
fn populated(kind: WorkloadKind, cfg: &WorkloadConfig) -> Option<(Workload, Arc<Data>)> {
    let key = populated_key(kind, cfg);
    let slot = POPULATED.get_or_insert(|k| *k == key, || (key.clone(), Slot::default()), at_most(POPULATED_KEPT));
    let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
    let kept = slot.get_or_insert_with(|| {
        let mut wl = kind.build(cfg);
        // Not copyable: populated by the run itself (checked before populating, while it is cheap).
        wl.try_clone()?;
        let mut bytes = crate::hostmem::zeroed::<u8>(wl.data_bytes() as usize);
        wl.populate(&mut bytes);
        let pages = crate::hostmem::Sparse::of(&bytes);
        Some(Kept { wl, data: Arc::new(Data { bytes, pages }) })
    });
    kept.as_ref().map(|k| (k.wl.try_clone().expect("copyable when kept"), k.data.clone()))
}

/// Run `spec` on `wl`, built and, when `data` is given, already populated with it.
fn run_on(spec: &RunSpec, wl: Workload, data: Option<Populated<'_>>) -> Result<RunOutput, String> {
    if let Some(b) = spec.bug.filter(|b| b.min_cores() > spec.cfg.machine.cores) {
        return Err(format!(
            "--inject-bug {}: a cross-core defect, needs machine.cores >= {} (--cores)",
            b.name(),
            b.min_cores()
        ));
    }
    if spec.cfg.workload.warmup_to_steady && !WorkloadKind::ALL.contains(&spec.workload) {
        return Err(format!(
            "workload.warmup_to_steady = true: applies to the built-in workloads ({}); a {} run's warm-up is its own",
            WorkloadKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
            spec.workload.name()
        ));
    }
    let cores = spec.cfg.machine.cores;
    let mut layout = Layout::new(wl.data_bytes(), spec.cfg.log.size_bytes);
    if cores > 1 {
        wl.multicore()?;
        if layout.log_blocks() / (cores as u64) < 2 {
            return Err(format!("log.size_bytes = {}: too small for a log region per core", layout.log_bytes));
        }
        layout = layout.with_cores(cores);
    }
    let layout =
        if spec.cfg.startgap.enabled { layout.with_startgap(crate::startgap::Geometry::EXTRA_BYTES) } else { layout };
    let desc = spec.protocol.desc();
    let layout = (desc.layout)(layout, &spec.cfg)?;
    let build = Build { cfg: &spec.cfg, layout: &layout, bug: spec.bug };
    let mut out = spec.protocol.build(&build, Drive { spec, wl, data, layout })?;
    // The `[loc]` keys are read only by the protocols built from them ([`LOC_READS`]).
    out.unread.extend(LOC_READS.iter().filter(|k| !desc.reads.contains(k)).map(|k| k.to_string()));
    Ok(out)
}

/// [`drive`] a protocol once built ([`ProtocolKind::build`]): monomorphised per protocol.
struct Drive<'a, 'd> {
    spec: &'a RunSpec,
    wl: Workload,
    data: Option<Populated<'d>>,
    layout: Layout,
}

impl Visit for Drive<'_, '_> {
    type Out = Result<RunOutput, String>;
    fn visit<P: Protocol + 'static>(self, p: P) -> Self::Out {
        drive(self.spec, self.wl, self.data, self.layout, p)
    }
}

/// The one-line error of a run whose simulated memory the host does not give.
fn host_refused(r: crate::hostmem::Refused, spec: &RunSpec, layout: &Layout) -> String {
    let pcm = match spec.cfg.memory.device {
        crate::config::Device::Pcm => "; memory.device = pcm adds 8 bytes of cell counters per device byte",
        _ => "",
    };
    format!(
        "the simulated memory of {} bytes (the workload's data {}, log.size_bytes = {}{}) needs more host memory \
         than this host gives ({r}{pcm}): lower log.size_bytes or the workload's size",
        layout.total_bytes(),
        layout.data_bytes,
        layout.log_bytes,
        if layout.nvllc_bytes > 0 { format!(", the NV-LLC's records {}", layout.nvllc_bytes) } else { String::new() },
    )
}

/// The machine a run starts from: the device's initial image (the workload's data, the
/// protocol's formatted log), the run's options and injected machine bugs; with it, a copy
/// of the device's initial content when the run is recorded.
fn build_machine<P: Protocol>(
    spec: &RunSpec,
    wl: &mut Workload,
    data: Option<&Data>,
    layout: Layout,
    p: &P,
) -> Result<(Machine, Option<Vec<u8>>), String> {
    let refused = |r| host_refused(r, spec, &layout);
    let mut image = crate::hostmem::try_zeroed::<u8>(layout.total_bytes() as usize).map_err(refused)?;
    match data {
        Some(d) => d.pages.copy_into(&d.bytes, &mut image),
        None => wl.populate(&mut image[..layout.data_bytes as usize]),
    }
    p.format(&layout, &mut image);
    if spec.cfg.log.meta_checksum && spec.protocol.log_format().is_some_and(crate::log::ec::in_groups) {
        crate::log::ec::format_checked(&layout, &mut image);
    }
    let mut m = Machine::try_new(&spec.cfg, layout, image, spec.record).map_err(refused)?;
    if spec.prefault {
        if let Some(pcm) = m.pcm.as_mut() {
            pcm.wear.commit_regions_whole();
        }
        crate::hostmem::commit(&mut m.nvm);
    }
    if spec.protocol.stores_persist() {
        m.persist_stores();
    }
    // The device's initial content (physical: Start-Gap places the log lines).
    let initial = match spec.record {
        true => Some(crate::hostmem::Sparse::of(&m.nvm).try_copy(&m.nvm).map_err(refused)?),
        false => None,
    };
    if spec.bug == Some(Bug::StartGapRegsBeforeCopy) {
        m.sg.as_mut()
            .ok_or("--inject-bug startgap-regs-before-copy: needs startgap.enabled = true")?
            .bug_regs_before_copy = true;
    }
    if spec.bug == Some(Bug::LostInvalidation) {
        m.inject_lost_invalidation();
    }
    Ok((m, initial))
}

fn drive<P: Protocol>(
    spec: &RunSpec,
    mut wl: Workload,
    data: Option<Populated<'_>>,
    layout: Layout,
    p: P,
) -> Result<RunOutput, String> {
    let (m, initial) = build_machine(spec, &mut wl, data.as_ref().map(|d| d.data), layout, &p)?;
    let mut sim = Sim::new(m, p, spec.record);
    if spec.record {
        sim.record_budget = crate::sim::RecordBudget::of_host(spec.warmup_txs.saturating_add(spec.txs))?;
    }
    let cores = sim.m.cores();
    if cores > 1 {
        return drive_cores(spec, wl, sim, layout, initial);
    }
    let (mut ops, mut aborts) = run_streams(spec.seed, 0);
    let mut tape = data.and_then(|d| d.tape).map(|t| TapeReader::new(t.clone()));
    // Up to `n` transactions, fewer once a replayed trace has ended (then `Ok(false)`). The loop
    // is inside, so that a transaction costs no call of its own.
    let mut run = |sim: &mut Sim<P>, wl: &mut Workload, n: u64| -> Result<bool, String> {
        for _ in 0..n {
            let abort = next_abort(&mut aborts, spec.abort_rate);
            match &mut tape {
                Some(t) => t.run_tx(sim, &mut ops, abort)?,
                None => wl.run_tx(sim, &mut ops, abort),
            }
            if let Some(e) = sim.m.fatal.take() {
                return Err(e);
            }
            if !wl.more()? {
                return Ok(false);
            }
        }
        Ok(true)
    };
    wl.more()?;
    probe_warmup(spec, &mut sim);
    run(&mut sim, &mut wl, spec.warmup_txs)?;
    // Only a built-in workload warms to steady state: it never ends.
    let filled = warm_to_steady(&mut sim, |sim| run(sim, &mut wl, STEADY_WINDOW_TXS).map(|_| ()))?;
    let start = Start::of(&mut sim, filled);
    let host = Instant::now();
    run(&mut sim, &mut wl, spec.txs)?;
    let end_cycle = sim.m.now;
    finish(spec, sim, layout, initial, start, host, end_cycle, &wl)
}

/// The counters at the start of the measured region.
struct Start {
    machine: MachineStats,
    front: crate::sim::FrontStats,
    cycle: Cycle,
    protocol: Vec<(&'static str, u64)>,
    /// Warm-up transactions run to reach the steady dirty population ([`warm_to_steady`]).
    filled: Option<u64>,
}

/// Transactions (over all cores) between two counts of the caches' dirty lines while the
/// warm-up goes on to steady state (`warm_to_steady`; `steady_growth` judges each window).
pub const STEADY_WINDOW_TXS: u64 = 1_000;

/// [`WorkloadConfig::warmup_to_steady`](crate::workload::WorkloadConfig::warmup_to_steady):
/// take the caches' dirty lines when the warm-up has [`STEADY_WINDOW_TXS`] transactions left
/// (at its start if it is shorter), for [`warm_to_steady`].
fn probe_warmup<P: Protocol>(spec: &RunSpec, sim: &mut Sim<P>) {
    if spec.cfg.workload.warmup_to_steady {
        let at = spec.warmup_txs.saturating_sub(STEADY_WINDOW_TXS);
        let seen = (at == 0).then(|| DirtyProbe::look(&sim.m));
        sim.probe = Some(DirtyProbe { at, ended: 0, seen });
    }
}

/// [`WorkloadConfig::warmup_to_steady`](crate::workload::WorkloadConfig::warmup_to_steady):
/// after the counted warm-up, run `window` ([`STEADY_WINDOW_TXS`] transactions) while the last
/// window (the last of the counted warm-up first: [`probe_warmup`]) grew the caches' dirty lines
/// by more than [`steady_growth`]. A write-back cache writes to memory only the dirty lines it
/// evicts: a measured region that starts with fewer dirty lines cached than the workload keeps
/// in steady state ends with more than it started with, and misses their write-backs
/// (docs/workloads.md, "Warm-up"). While the population is still growing it grows in every
/// window (SPS: two new dirty lines per transaction until the LLC is full of them); at its
/// steady level it moves up and down. A run whose counted warm-up already ended at steady state
/// runs nothing more, and its figures are those of the same run without the option. `None`
/// when not asked.
fn warm_to_steady<P: Protocol>(
    sim: &mut Sim<P>,
    mut window: impl FnMut(&mut Sim<P>) -> Result<(), String>,
) -> Result<Option<u64>, String> {
    let Some(probe) = sim.probe.take() else { return Ok(None) };
    // A workload step without a transaction leaves the count short: a window is then run.
    let mut before = probe.seen.unwrap_or((0, 0));
    let mut txs = 0;
    loop {
        let now = DirtyProbe::look(&sim.m);
        let lines_written = (now.1 - before.1) / BLOCK_BYTES as u64;
        if now.0 as u64 <= before.0 as u64 + steady_growth(sim.m.hier.llc.slots(), lines_written) {
            return Ok(Some(txs));
        }
        window(sim)?;
        txs += STEADY_WINDOW_TXS;
        before = now;
    }
}

/// The growth of the dirty population over a window that still counts as steady: 1/256 of the
/// LLC's frames (64 of the default 16 384; a steady population moves by about a hundred from
/// window to window), or 1/64 of the lines the window wrote to memory, whichever is larger (at
/// that growth a region of one window would miss under 2 % of its write traffic, and the rest of
/// a growing population's growth is a few dozen lines: docs/workloads.md, "Warm-up").
fn steady_growth(llc_slots: usize, lines_written: u64) -> u64 {
    (llc_slots as u64 / 256).max(lines_written / 64)
}

impl Start {
    /// Take the counters now, and reset those kept only for the measured region; `filled` is
    /// what [`warm_to_steady`] ran.
    fn of<P: Protocol>(sim: &mut Sim<P>, filled: Option<u64>) -> Start {
        let s = Start {
            machine: sim.m.stats(),
            front: sim.stats.clone(),
            cycle: sim.m.now,
            protocol: sim.p.counters(),
            filled,
        };
        if let Some(p) = &mut sim.m.pcm {
            p.reset_stats();
        }
        sim.m.commit_latency = Default::default();
        if let Some(g) = &mut sim.m.gpf {
            g.reset();
        }
        s
    }
}

/// `drive` with more than one core: each core runs its share of the warm-up and then of the
/// measured transactions ([`crate::sched::split`]; `--txs` and the warm-up are totals over the
/// cores) on its own copy of the workload's driver state and its own streams, interleaved by
/// [`crate::sched`]. The measured region starts when the last core has finished its warm-up
/// (the others wait for it) and ends when the last core has finished.
fn drive_cores<P: Protocol>(
    spec: &RunSpec,
    wl: Workload,
    mut sim: Sim<P>,
    layout: Layout,
    initial: Option<Vec<u8>>,
) -> Result<RunOutput, String> {
    use crate::sched;
    let cores = sim.m.cores();
    let warmup = wl.warmup_cores().unwrap_or_else(|| sched::split(spec.warmup_txs, cores));
    let mut wls = wl.into_cores(cores)?;
    let mut streams: Vec<_> = (0..cores).map(|c| run_streams(spec.seed, c)).collect();
    probe_warmup(spec, &mut sim);
    sched::run(&mut sim, &mut wls, &mut streams, &warmup, spec.abort_rate)?;
    let window = sched::split(STEADY_WINDOW_TXS, cores);
    let filled = warm_to_steady(&mut sim, |sim| sched::run(sim, &mut wls, &mut streams, &window, spec.abort_rate))?;
    sched::barrier(&mut sim);
    let start = Start::of(&mut sim, filled);
    let host = Instant::now();
    sched::run(&mut sim, &mut wls, &mut streams, &sched::split(spec.txs, cores), spec.abort_rate)?;
    let end_cycle = sched::last_clock(&sim.m);
    finish(spec, sim, layout, initial, start, host, end_cycle, &wls[0])
}

/// The figures of a run whose measured region ended at `end_cycle`, and what the crash checker
/// needs if recording.
#[allow(clippy::too_many_arguments)]
fn finish<P: Protocol>(
    spec: &RunSpec,
    mut sim: Sim<P>,
    layout: Layout,
    initial: Option<Vec<u8>>,
    start: Start,
    host: Instant,
    end_cycle: Cycle,
    wl: &Workload,
) -> Result<RunOutput, String> {
    let host_seconds = host.elapsed().as_secs_f64();
    check_after_run(wl, &sim.m.arch[..layout.data_bytes as usize])?;
    let (s0, f0, c0, p0) = (start.machine, start.front, start.cycle, start.protocol);
    let d = sim.m.stats().since(&s0);
    let mut f = sim.stats.clone();
    f.txs_committed -= f0.txs_committed;
    f.txs_aborted -= f0.txs_aborted;
    f.program_write_bytes -= f0.program_write_bytes;
    f.pset_blocks -= f0.pset_blocks;
    let mut result = figures(spec, &d, &f, end_cycle - c0, host_seconds);
    result.warmup_steady_txs = start.filled;
    if let Some(p) = &mut sim.m.pcm {
        result.pcm = Some(pcm_figures(p, spec, end_cycle - c0));
    }
    result.commit_to_ack_mean_cycles = sim.m.commit_latency.mean();
    result.commit_to_ack_p99_cycles = sim.m.commit_latency.quantile(0.99);
    for ((name, v), (_, v0)) in sim.p.counters().into_iter().zip(p0) {
        result.protocol_counters.insert(name, v - v0);
    }
    if sim.m.persist_buffers() {
        // The persist buffers' work (docs/machine.md "Persistence domains"), beside the protocol's.
        result.protocol_counters.insert("bbpb_drained", d.bbpb_drained);
        result.protocol_counters.insert("bbpb_superseded", d.bbpb_superseded);
    }
    if let Some(g) = &sim.m.gpf {
        result.gpf = Some(gpf_figures(g, &spec.cfg));
    }
    if sim.m.cores() > 1 {
        result.cores = Some(sim.m.cores() as u32);
        result.core_end_cycles = Some((0..sim.m.cores()).map(|c| sim.m.clock_of(c) - c0).collect());
    }
    let recorded = if spec.record {
        sim.m.quiesce();
        let mut record = sim.m.record.take().expect("recording");
        record.durable.finish();
        Some(Recorded {
            layout,
            initial: initial.expect("recording"),
            record,
            oracle: sim.take_oracle().expect("recording"),
            end_cycle,
        })
    } else {
        None
    };
    let mut unread: Vec<String> = sim.m.ord.read().unread().iter().map(|k| format!("ordering.{k}")).collect();
    unread.extend(sim.m.domain_unread().map(String::from));
    Ok(RunOutput { result, recorded, unread })
}

/// TPC-C's consistency conditions on the program's view of the data area after every run
/// (docs/tpcc.md, "Verifier"): a run that breaks them is an error. The other workloads are
/// checked by the crash checker only.
fn check_after_run(wl: &Workload, data: &[u8]) -> Result<(), String> {
    match wl {
        Workload::Tpcc(t) => t.verify(data).map_err(|e| format!("after the run: {e}")),
        _ => Ok(()),
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        0.0
    } else {
        a / b
    }
}

fn figures(
    spec: &RunSpec,
    d: &MachineStats,
    f: &crate::sim::FrontStats,
    cycles: Cycle,
    host_seconds: f64,
) -> RunResult {
    let by_kind = WriteKind::ALL.iter().map(|k| (k.name(), d.write_bytes_by_kind[*k as usize])).collect();
    let llc_refs = d.llc_hits + d.llc_misses;
    RunResult {
        workload: spec.workload.name().into(),
        protocol: spec.protocol.name().into(),
        sd: spec.protocol.speculates().then_some(spec.cfg.loc.speculation_degree),
        mem_latency_ns: spec.cfg.memory.read_latency_ns,
        mem_write_latency_ns: spec.cfg.memory.write_latency_ns,
        seed: spec.seed,
        txs_committed: f.txs_committed,
        txs_aborted: f.txs_aborted,
        warmup_txs: spec.warmup_txs,
        warmup_steady_txs: None,
        cycles,
        throughput_tx_per_mcycle: ratio(f.txs_committed as f64 * 1e6, cycles.get() as f64),
        normalized_throughput: None,
        program_write_bytes: f.program_write_bytes,
        mem_write_bytes: d.mem_write_bytes(),
        write_traffic: ratio(d.mem_write_bytes() as f64, f.program_write_bytes as f64),
        write_overhead: None,
        mem_write_bytes_by_kind: by_kind,
        protocol_counters: BTreeMap::new(),
        gpf: None,
        pcm: None,
        pset_blocks_per_tx: ratio(f.pset_blocks as f64, f.txs_committed as f64),
        log_write_bytes: d.mem_write_bytes() - d.write_bytes_by_kind[WriteKind::Home as usize],
        commit_to_ack_mean_cycles: 0.0,
        commit_to_ack_p99_cycles: Cycle::ZERO,
        mem_reads: d.mem_reads,
        llc_miss_rate: ratio(d.llc_misses as f64, llc_refs as f64),
        flushes: d.flushes,
        fence_stall_cycles: d.fence_stall_cycles,
        ordering: OrderingFigures {
            preset: crate::ordering::word(&spec.cfg.ordering.preset),
            knobs: spec.cfg.ordering.differences(),
            commit_flush_cycles: d.commit_flush_cycles,
            barrier_stall_cycles: d.barrier_stall_cycles,
        },
        sim_mem_accesses: d.mem_accesses,
        sim_mem_requests: d.mem_reads + d.mem_write_bytes() / 64,
        host_seconds,
        sim_mem_accesses_per_second: ratio(d.mem_accesses as f64, host_seconds),
        version: VERSION,
        git_rev: GIT_REV,
        config_hash: spec.cfg.hash_hex(),
        cores: None,
        core_end_cycles: None,
    }
}

/// Fill the figures relative to the baseline's run (normalized throughput, write overhead) in
/// every run of `rs`, if one of them is the baseline.
pub fn relate_to_baseline(rs: &mut [RunResult]) {
    let Some(base) = rs.iter().find(|r| r.protocol == "baseline") else { return };
    let (tput, bytes) = (base.throughput_tx_per_mcycle, per_tx_bytes(base));
    for r in rs {
        r.normalized_throughput = Some(if tput > 0.0 { r.throughput_tx_per_mcycle / tput } else { 0.0 });
        r.write_overhead = (bytes > 0.0).then(|| per_tx_bytes(r) / bytes - 1.0);
    }
}

fn per_tx_bytes(r: &RunResult) -> f64 {
    ratio(r.mem_write_bytes as f64, r.txs_committed as f64)
}

/// Host seconds for the same transactions on the plain native back end (for slowdown).
pub fn native_seconds(spec: &RunSpec) -> f64 {
    let mut wl = spec.workload.build(&spec.cfg.workload);
    let mut mem = vec![0u8; wl.data_bytes() as usize];
    wl.populate(&mut mem);
    let mut pm = Native::new(mem);
    let (mut ops, mut aborts) = run_streams(spec.seed, 0);
    for _ in 0..spec.warmup_txs {
        let abort = next_abort(&mut aborts, spec.abort_rate);
        wl.run_tx(&mut pm, &mut ops, abort);
    }
    let host = Instant::now();
    for _ in 0..spec.txs {
        let abort = next_abort(&mut aborts, spec.abort_rate);
        wl.run_tx(&mut pm, &mut ops, abort);
    }
    std::hint::black_box(&pm.mem);
    host.elapsed().as_secs_f64()
}

/// Test support: the simulated cycles of a seeded baseline run of `workload` (no aborts, seed
/// 5) under the configuration `sets`, for tests that compare machines by their timing.
#[cfg(test)]
pub(crate) fn baseline_cycles(workload: WorkloadKind, sets: &[String], txs: u64, warmup_txs: u64) -> Cycle {
    let spec = RunSpec {
        cfg: Config::build(None, sets).unwrap(),
        workload,
        protocol: ProtocolKind::Baseline,
        txs,
        warmup_txs,
        seed: 5,
        abort_rate: 0.0,
        bug: None,
        record: false,
        tape: false,
        prefault: false,
    };
    execute(&spec).unwrap().result.cycles
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs whose configurations differ only outside the workload's own section (another
    /// workload's, the warm-up) share one populating, and get the figures of a run that
    /// populates for itself; a change of the workload's own section populates anew.
    #[test]
    fn runs_differing_outside_the_workloads_section_share_its_populating_and_its_figures() {
        let a = RunSpec {
            cfg: Config::build(None, &["workload.btree.key_space=8192".to_string()]).unwrap(),
            workload: WorkloadKind::BTree,
            protocol: ProtocolKind::HWal,
            txs: 300,
            warmup_txs: 100,
            seed: 7,
            abort_rate: 0.05,
            bug: None,
            record: false,
            tape: true,
            prefault: false,
        };
        let mut b = a.clone();
        (b.cfg.workload.sdg.allocators, b.cfg.workload.warmup_to_steady) = (8, true);
        let key = |s: &RunSpec| populated_key(s.workload, &s.cfg.workload);
        assert_eq!(key(&a), key(&b));
        let mut c = a.clone();
        c.cfg.workload.btree.leaf_max_keys = 100;
        assert_ne!(key(&a), key(&c));
        let figures = |out: RunOutput| {
            let mut r = out.result;
            (r.host_seconds, r.sim_mem_accesses_per_second) = (0.0, 0.0);
            serde_json::to_string(&r).unwrap()
        };
        for s in [&a, &b, &c] {
            let shared = figures(execute(s).unwrap());
            let own = figures(execute_with(s, s.workload.build(&s.cfg.workload)).unwrap());
            assert_eq!(shared, own);
        }
    }
}
