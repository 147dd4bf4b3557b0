//! The differential-write-conscious SQLite rollback journal on PCM (Lee et al., "Differential
//! write-conscious software design on phase-change memory: an SQLite case study", sections 3
//! and 5), run with real SQLite, and its evaluation (section 6).
//!
//! Reading order: [`policy`] (the configurations of Table IV and their names),
//! [`format`](mod@format) (the byte layout in PCM, docs/journal-format.md), [`media`] (PCM area
//! and database files, what a crash keeps), [`alloc`] (frames, portions, reuse, GC, rebuild),
//! [`vfs`] (SQLite's journal byte stream to and from the structures), [`sql_trace`] and [`apps`]
//! (workloads; [`script`]: a user's SQL script as a trace), [`replay`], [`crash`] (the crash
//! checker), and [`run`] here (one measured run).
//!
//! Modelled: the PCM area as bytes with per-cell wear through [`crate::pcm::Pcm`] (Flip-N-Write
//! by default), uncached, through a 64-byte software write buffer; database files as page-cache
//! files whose unsynced sectors may be lost at a crash; SQLite's CPU time from the ARM
//! instructions it executes per command ([`cpu`]). Left out: the file system's own journal, page sizes other than
//! 1 KiB.

pub mod alloc;
pub mod apps;
pub mod bug;
pub mod call_record;
pub mod cpu;
pub mod crash;
pub mod format;
pub mod media;
pub mod policy;
pub mod replay;
pub mod script;
pub mod sql_trace;
pub mod vfs;
pub mod vfs_call;
pub mod vfs_tape;

pub use apps::App;
pub use policy::Policy;

use crate::pcm::PcmConfig;
use cpu::CpuClock;
use media::Timing;
use replay::Setup;
use serde::Serialize;
use sql_trace::Trace;

/// Frames of the journal area by default: the paper's 2 MB of PCM (section 6.1).
pub const DEFAULT_FRAMES: u64 = 32;

/// The devices of a run: the PCM's parameters and the rest of the timing.
#[derive(Clone, Debug)]
pub struct Device {
    pub pcm: PcmConfig,
    pub timing: Timing,
}

impl Default for Device {
    /// The board's devices: the PCM device's defaults with the cited chip's program time per
    /// chunk ([`media::CHUNK_PROGRAM_NS`]), and [`Timing::default`].
    fn default() -> Self {
        let pcm = PcmConfig { chunk_program_ns: media::CHUNK_PROGRAM_NS, ..PcmConfig::default() };
        Device { pcm, timing: Timing::default() }
    }
}

impl Device {
    /// The devices from `pcm.*` settings (`KEY=VALUE`) and SQLite's CPU time per command, each
    /// checked once; an error names what is allowed.
    pub fn build(set: &[String], cpu_ns_per_command: Option<u64>) -> Result<Device, String> {
        if let Some(bad) = set.iter().find(|s| !s.starts_with("pcm.")) {
            return Err(format!("--set {bad}: allowed pcm.* keys (the journal model's PCM device)"));
        }
        if let Some(n) = cpu_ns_per_command.filter(|&n| n > 100_000_000) {
            return Err(format!("cpu_ns_per_command {n}: allowed 0..=100000000"));
        }
        // The journal's chip programs a chunk in `CHUNK_PROGRAM_NS` unless a setting says
        // otherwise (the LOC machine's PCM device keeps its own default).
        let chip = format!("pcm.chunk_program_ns={}", media::CHUNK_PROGRAM_NS);
        let sets: Vec<String> = std::iter::once(chip).chain(set.iter().cloned()).collect();
        let cfg = crate::config::Config::build(None, &sets).map_err(|e| e.0)?;
        Ok(Device { pcm: cfg.pcm, timing: Timing { cpu_ns_per_command, ..Timing::default() } })
    }
}

/// Figures of one measured run (one application trace under one configuration).
#[derive(Clone, Debug, Serialize)]
pub struct JournalResult {
    pub app: String,
    pub trace: String,
    pub config: String,
    pub seed: u64,
    /// Database page writes plus journal records (the paper's trace size measure).
    pub page_writes: u64,
    pub db_page_writes: u64,
    pub journal_records: u64,
    pub transactions: u64,
    pub commands: u64,
    /// SQLite virtual-machine instructions per command (`SQLITE_STMTSTATUS_VM_STEP`): mean,
    /// 10th and 90th percentile over the measured commands.
    pub vm_steps_per_command: f64,
    pub vm_steps_per_command_p10: u32,
    pub vm_steps_per_command_p90: u32,
    /// SQLite's CPU time per command on the board: by default its ARM instructions (measured
    /// on the board's ISA, [`cpu`]) x the Cortex-A9's cycles per instruction / 667 MHz.
    pub avg_cmd_cpu_ns: f64,
    /// What `avg_cmd_cpu_ns` comes from: `arm-a9` (the table's row of this application and
    /// trace), `arm-a9-pooled` (a trace the table has no row for: all rows' ratio),
    /// `host-calibrated` (the named variant, `--cpu-time host-calibrated`) or `constant`
    /// (`--cpu-ns-per-command`).
    pub cpu_time_source: &'static str,
    /// The ARM instructions per command behind `avg_cmd_cpu_ns` (0 unless the source is
    /// `arm-a9` or `arm-a9-pooled`).
    pub arm_instructions_per_command: f64,
    /// Mean writes per database page written (the paper, Fig. 5: 5.2 on average).
    pub db_writes_per_page: f64,
    /// Fraction of page overwrites that change at most 64 bytes (the paper, Fig. 6: 72.8 %).
    pub db_small_overwrite_fraction: f64,
    /// PCM cells programmed, data and flip cells.
    pub total_bit_updates: u64,
    /// Total bit updates / RR's on the same trace (when RR is among the configurations run).
    pub total_bit_updates_vs_rr: Option<f64>,
    /// Maximum bit updates / RR-S2X's on the same trace (when RR-S2X is run).
    pub max_bit_updates_vs_rr_s2x: Option<f64>,
    /// Energy / RR-S2X's on the same trace (the paper's Fig. 18 normalisation).
    pub energy_vs_rr_s2x: Option<f64>,
    /// Programs of the most programmed cell.
    pub max_bit_updates: u64,
    /// The same split by region: the manager frame and the other frames.
    /// Where the most programmed cell is, e.g. `header frame: descriptor CkSum` (the frame's
    /// role at the end of the run).
    pub hottest_cell: String,
    pub manager_total_bit_updates: u64,
    pub manager_max_bit_updates: u64,
    pub pcm_block_writes: u64,
    /// PCM energy: programming, reads, and background power over every nanosecond of the
    /// commands (CPU, PCM and database file time): the whole-command variant.
    pub energy_nj: f64,
    /// The same with background power over the counted time only (`avg_cmd_counted_ns`): the
    /// paper's estimate from "the measured execution cycles per memory power mode".
    pub energy_counted_nj: f64,
    pub energy_counted_vs_rr_s2x: Option<f64>,
    /// Whole time per command: SQLite's CPU time, journal PCM accesses, database file writes
    /// and syncs.
    pub avg_cmd_latency_ns: f64,
    /// The journal's PCM part of it.
    pub avg_cmd_journal_ns: f64,
    /// Time per command as the board's performance monitor counts execution cycles: SQLite's
    /// CPU time, its stalls on non-cacheable PCM loads and stores, and the copies of database
    /// pages into the page cache; not the time blocked in the kernel on the flash syncs.
    pub avg_cmd_counted_ns: f64,
    /// The same trace with `journal_mode=OFF` (no journal at all): whole and counted time.
    pub avg_cmd_latency_nojournal_ns: f64,
    pub avg_cmd_counted_nojournal_ns: f64,
    /// The timing the run used (PCM writes: `pcm_chunk_program_ns` per step).
    pub timing: Timing,
    pub pcm_chunk_program_ns: u64,
    /// Bytes of the over-provisioned journal header copies (WHm: (m - 1) x 32 per file).
    pub area_overhead_bytes: u64,
    pub area_overhead_percent: f64,
    /// Simulated time to rebuild the DRAM metadata from the final PCM image (PCM reads).
    pub rebuild_ns: u64,
    pub allocator: alloc::Stats,
    pub frames: u64,
    /// Device time of every journal PCM access over the run, ns (`avg_cmd_journal_ns` x
    /// `commands`), and the PCM's energy over that time alone (programming, reads, background):
    /// the figures the loadable extension reports too, since it does not know the commands.
    pub journal_pcm_ns: u64,
    pub journal_energy_nj: f64,
    /// Statements SQLite rejected (`--on-error continue`), and the first 10 of them with line.
    pub statement_errors: u64,
    pub statement_error_details: Vec<String>,
    pub version: &'static str,
    pub git_rev: &'static str,
}

/// Replay `trace` under `policy` and measure.
pub fn measure(
    label: (&str, &str),
    tr: &std::sync::Arc<Trace>,
    policy: &Policy,
    seed: u64,
    frames: u64,
    dev: &Device,
    on_error: replay::OnError,
) -> Result<JournalResult, String> {
    let setup = Setup {
        policy: policy.clone(),
        pcm: dev.pcm.clone(),
        timing: dev.timing.clone(),
        frames,
        seed,
        journal: true,
        bug: None,
        on_error,
    };
    let r = vfs_tape::replay_measured(tr, &setup)?;
    let reference = vfs_tape::replay_measured(tr, &Setup { journal: false, ..setup.clone() })?;
    result_of(label, tr, &setup, dev, r, &reference)
}

/// The figures of replay `r` of `tr` under `setup` beside its no-journal `reference`.
fn result_of(
    label: (&str, &str),
    tr: &Trace,
    setup: &Setup,
    dev: &Device,
    mut r: replay::Replay,
    reference: &replay::Replay,
) -> Result<JournalResult, String> {
    let (policy, seed, frames) = (&setup.policy, setup.seed, setup.frames);
    let clock = dev.timing.cpu_clock(label.0, label.1, true);
    let times = CommandTimes::of(&r, &clock);
    let nref = CommandTimes::of(reference, &dev.timing.cpu_clock(label.0, label.1, false));
    let cpu_ns = cpu_time_ns(&r, &clock);
    let arm_per_command = clock.arm_per_command(r.commands, vm_steps_of(&r));
    let spread = vm_step_spread(&r.vm_steps);
    let w = &mut r.world;
    let m = &mut w.media;
    let wear = Wear::of(m);
    let cmds = r.commands.max(1) as f64;
    let copies = policy.header_copies as u64 - 1;
    let area = frames * format::FRAME_BYTES;
    let mut rebuilt = media::Media::from_snapshot(
        &setup.pcm,
        &media::Snapshot { pcm: m.bytes.clone(), dbs: Vec::new() },
        dev.timing.clone(),
    );
    alloc::Journal::rebuild(&mut rebuilt, policy.clone()).map_err(|e| format!("rebuild after the run: {e}"))?;
    Ok(JournalResult {
        app: label.0.into(),
        trace: label.1.into(),
        config: policy.name.clone(),
        seed,
        page_writes: w.db_page_writes + w.journal.stats.records,
        db_page_writes: w.db_page_writes,
        journal_records: w.journal.stats.records,
        transactions: r.ended.iter().sum(),
        commands: r.commands,
        vm_steps_per_command: spread.0,
        vm_steps_per_command_p10: spread.1,
        vm_steps_per_command_p90: spread.2,
        avg_cmd_cpu_ns: cpu_ns as f64 / cmds,
        cpu_time_source: clock.source,
        arm_instructions_per_command: arm_per_command,
        db_writes_per_page: m.writes_per_page(),
        db_small_overwrite_fraction: m.db_small_overwrites as f64 / m.db_overwrites.max(1) as f64,
        total_bit_updates: wear.total,
        total_bit_updates_vs_rr: None,
        max_bit_updates_vs_rr_s2x: None,
        energy_vs_rr_s2x: None,
        max_bit_updates: wear.max,
        hottest_cell: hottest(m, &w.journal),
        manager_total_bit_updates: wear.manager_total,
        manager_max_bit_updates: wear.manager_max,
        pcm_block_writes: m.pcm_block_writes,
        energy_nj: times.energy_nj(m),
        energy_counted_nj: times.energy_counted_nj(m),
        energy_counted_vs_rr_s2x: None,
        avg_cmd_latency_ns: times.latency_ns,
        avg_cmd_journal_ns: m.pcm_ns as f64 / cmds,
        avg_cmd_counted_ns: times.counted_ns,
        avg_cmd_latency_nojournal_ns: nref.latency_ns,
        avg_cmd_counted_nojournal_ns: nref.counted_ns,
        timing: dev.timing.clone(),
        pcm_chunk_program_ns: dev.pcm.chunk_program_ns,
        area_overhead_bytes: copies * format::COPY_BYTES * tr.dbs.len() as u64,
        area_overhead_percent: (copies * format::COPY_BYTES * tr.dbs.len() as u64) as f64 * 100.0 / area as f64,
        rebuild_ns: rebuilt.pcm_ns,
        allocator: w.journal.stats.clone(),
        frames,
        journal_pcm_ns: m.pcm_ns,
        journal_energy_nj: journal_energy_nj(m),
        statement_errors: r.errors.len() as u64,
        statement_error_details: r.errors.iter().take(10).cloned().collect(),
        version: crate::runner::VERSION,
        git_rev: crate::runner::GIT_REV,
    })
}

/// The time of a replay's measured part: per command, and in total (ns).
pub struct CommandTimes {
    /// SQLite's CPU time, journal PCM accesses, database file writes and syncs, per command
    /// ([`JournalResult::avg_cmd_latency_ns`]).
    pub latency_ns: f64,
    /// The same without the database syncs' wait ([`JournalResult::avg_cmd_counted_ns`]).
    pub counted_ns: f64,
    /// The same two over the whole measured part.
    total_ns: u64,
    total_counted_ns: u64,
}

impl CommandTimes {
    pub fn of(r: &replay::Replay, clock: &CpuClock) -> CommandTimes {
        let m = &r.world.media;
        let cmds = r.commands.max(1) as f64;
        let total_ns = cpu_time_ns(r, clock) + m.pcm_ns + m.db_ns;
        let total_counted_ns = total_ns - m.db_sync_ns;
        CommandTimes {
            latency_ns: total_ns as f64 / cmds,
            counted_ns: total_counted_ns as f64 / cmds,
            total_ns,
            total_counted_ns,
        }
    }

    /// The PCM's energy over the whole measured part.
    pub fn energy_nj(&self, m: &media::Media) -> f64 {
        m.pcm.energy_nj(self.total_ns as f64 * 1e-9)
    }

    /// The same over the time without the database syncs' wait.
    pub fn energy_counted_nj(&self, m: &media::Media) -> f64 {
        m.pcm.energy_nj(self.total_counted_ns as f64 * 1e-9)
    }
}

/// The figures of one replay of a trace that a sweep point needs (`reproduce`), without what
/// [`measure`] adds: the no-journal reference replay, the hottest cell, the rebuild.
pub struct PointFigures {
    pub wear: Wear,
    pub times: CommandTimes,
    pub energy_nj: f64,
    pub energy_counted_nj: f64,
}

/// Replay `app`'s trace under `config` (`journal`) or with `journal_mode=OFF` (not `journal`:
/// the no-journal reference of [`JournalResult::avg_cmd_latency_nojournal_ns`]), and give the
/// figures of that one replay; the same values as the corresponding fields of [`run_on`]'s result.
pub fn measure_point(
    app: App,
    trace: u32,
    config: &str,
    seed: u64,
    dev: &Device,
    journal: bool,
) -> Result<PointFigures, String> {
    if !(1..=4).contains(&trace) {
        return Err(format!("--trace {trace}: allowed 1..=4"));
    }
    let setup = Setup {
        policy: Policy::parse(config)?,
        pcm: dev.pcm.clone(),
        timing: dev.timing.clone(),
        frames: DEFAULT_FRAMES,
        seed,
        journal,
        bug: None,
        on_error: Default::default(),
    };
    let tr = apps::generated(app, trace, seed);
    let mut r = vfs_tape::replay_measured(&tr, &setup)?;
    let times = CommandTimes::of(&r, &dev.timing.cpu_clock(app.code(), &trace.to_string(), journal));
    let m = &mut r.world.media;
    Ok(PointFigures {
        wear: Wear::of(m),
        energy_nj: times.energy_nj(m),
        energy_counted_nj: times.energy_counted_nj(m),
        times,
    })
}

/// Bit updates of a run: all cells, the most programmed cell, and the same for the manager
/// frame alone.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Wear {
    pub total: u64,
    pub max: u64,
    pub manager_total: u64,
    pub manager_max: u64,
}

impl Wear {
    pub fn of(m: &mut media::Media) -> Wear {
        let regions = m.pcm.wear.regions();
        let mgr = regions.iter().find(|x| x.name == "manager").cloned().unwrap_or_default();
        Wear {
            total: m.pcm.wear.total_bit_updates,
            max: regions.iter().map(|x| x.max_bit_updates).max().unwrap_or(0),
            manager_total: mgr.total_bit_updates,
            manager_max: mgr.max_bit_updates,
        }
    }
}

/// The PCM's energy over the journal's own device time (programming, reads, background).
pub fn journal_energy_nj(m: &media::Media) -> f64 {
    m.pcm.energy_nj(m.pcm_ns as f64 * 1e-9)
}

/// The structure holding the most programmed cell (data cells and flip cells).
fn hottest(m: &mut media::Media, j: &alloc::Journal) -> String {
    let bits = m.bytes.len() as u64 * 8;
    let wear = &mut m.pcm.wear;
    let mut best = (0u64, 0u64, false);
    for bit in 0..bits {
        let c = wear.count(bit, false);
        if c > best.0 {
            best = (c, bit, false);
        }
        if bit % 64 == 0 {
            let c = wear.count(bit, true);
            if c > best.0 {
                best = (c, bit, true);
            }
        }
    }
    let byte = best.1 / 8;
    let (f, off) = ((byte / format::FRAME_BYTES) as usize, byte % format::FRAME_BYTES);
    let what = if f == 0 {
        match off {
            o if o < format::MGR_PRESENCE => "magic",
            o if o < format::MGR_REUSABLE => "presence bits",
            o if o < format::MGR_COUNTS => "reusable bits",
            o if o < format::MGR_SLOTS => "reuse counters",
            o if (o - format::MGR_SLOTS).is_multiple_of(format::SLOT_BYTES) => "header frame descriptor V",
            _ => "header frame descriptor",
        }
        .to_string()
    } else if j.frames[f].header {
        match off {
            o if o < format::HDR_REUSE_COUNT => "hot-journal flag".to_string(),
            o if o < format::HDR_COPIES => "header counters".to_string(),
            o if o < format::HDR_DESCS => "journal header copy".to_string(),
            o => {
                let field = match (o - format::HDR_DESCS) % format::DESC_BYTES {
                    0..4 => "PgNo",
                    4..8 => "CkSum",
                    8 => "V",
                    10..12 => "PTR",
                    12..14 => "ord",
                    _ => "reserved",
                };
                format!("descriptor {field}")
            }
        }
    } else {
        "data portion".to_string()
    };
    let role = if f == 0 {
        "manager"
    } else if j.frames[f].header {
        "header frame"
    } else {
        "data frame"
    };
    format!("{role}: {what}{}", if best.2 { " (flip cell)" } else { "" })
}

/// SQLite's CPU time over a replay's commands: the constant per command if one is set, else
/// from the virtual-machine instructions it executed ([`CpuClock`]).
fn cpu_time_ns(r: &replay::Replay, clock: &CpuClock) -> u64 {
    clock.ns(r.commands, vm_steps_of(r))
}

/// The virtual-machine instructions a replay's commands executed in all.
fn vm_steps_of(r: &replay::Replay) -> u64 {
    r.vm_steps.iter().map(|&s| s as u64).sum()
}

/// The mean and the 10th and 90th percentiles of the virtual-machine instructions per command.
fn vm_step_spread(steps: &[u32]) -> (f64, u32, u32) {
    if steps.is_empty() {
        return (0.0, 0, 0);
    }
    let mut v = steps.to_vec();
    v.sort_unstable();
    let mean = v.iter().map(|&s| s as f64).sum::<f64>() / v.len() as f64;
    (mean, v[v.len() / 10], v[(v.len() * 9) / 10])
}

/// Fill the normalised figures of results of one trace (RR for totals, RR-S2X for maxima and
/// energy, as in the paper's Figs. 9, 13 and 18).
pub fn normalize(rs: &mut [JournalResult]) {
    let find = |rs: &[JournalResult], name: &str| rs.iter().find(|r| r.config == name).cloned();
    let (rr, rrs2x) = (find(rs, "RR"), find(rs, "RR-S2X"));
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    for r in rs.iter_mut() {
        r.total_bit_updates_vs_rr = rr.as_ref().map(|b| ratio(r.total_bit_updates as f64, b.total_bit_updates as f64));
        if let Some(b) = &rrs2x {
            r.max_bit_updates_vs_rr_s2x = Some(ratio(r.max_bit_updates as f64, b.max_bit_updates as f64));
            r.energy_vs_rr_s2x = Some(ratio(r.energy_nj, b.energy_nj));
            r.energy_counted_vs_rr_s2x = Some(ratio(r.energy_counted_nj, b.energy_counted_nj));
        }
    }
}

/// One measured run of application trace `trace` (1..=4) under `config` (a Table IV name).
pub fn run(app: App, trace: u32, config: &str, seed: u64) -> Result<JournalResult, String> {
    run_on(app, trace, config, seed, &Device::default())
}

/// [`run`] on other devices.
pub fn run_on(app: App, trace: u32, config: &str, seed: u64, dev: &Device) -> Result<JournalResult, String> {
    if !(1..=4).contains(&trace) {
        return Err(format!("--trace {trace}: allowed 1..=4"));
    }
    let policy = Policy::parse(config)?;
    let tr = apps::generated(app, trace, seed);
    measure((app.code(), &trace.to_string()), &tr, &policy, seed, DEFAULT_FRAMES, dev, Default::default())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_alloc;

#[cfg(test)]
mod tests_damage;
