//! Simulator speed (docs/model.md section 6): simulated core accesses per host second and slowdown
//! against the plain native back end, per workload and protocol. Used by `locsim bench` and by
//! the report of `locsim reproduce`. Host timings: these figures vary from run to run.

use crate::config::Config;
use crate::protocol::ProtocolKind;
use crate::runner::{self, RunSpec};
use crate::workload::WorkloadKind;

/// One measured point (medians of `repeat` runs).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct BenchRow {
    pub workload: String,
    pub protocol: String,
    pub txs: u64,
    pub sim_mem_accesses: u64,
    pub host_seconds: f64,
    pub sim_mem_accesses_per_second: f64,
    pub sim_mem_requests: u64,
    pub sim_mem_requests_per_second: f64,
    pub native_seconds: f64,
    pub slowdown_vs_native: f64,
    pub repeat: u32,
    /// Host core clock while this point ran (mean of [`host_clock_ghz`] before and after its
    /// runs); `None` where it cannot be estimated.
    #[serde(default)]
    pub host_clock_ghz: Option<f64>,
    /// `host_seconds` x the host clock / accesses: host cycles per simulated core access, the
    /// figure to compare across hosts and moments (the clock of a shared machine moves).
    #[serde(default)]
    pub host_cycles_per_access: Option<f64>,
    /// With `bench --pcm`: the same point with the bit-level PCM device (`memory.device =
    /// "pcm"`), simulated core accesses per host second (median; its runs alternate with the
    /// plain ones, so that the host's load moves both alike).
    #[serde(default)]
    pub pcm_sim_mem_accesses_per_second: Option<f64>,
    /// PCM mode's speed over the plain device's: the median over the repeats of each PCM run's
    /// speed over that of the plain run just before it (a pair of runs back to back shares the
    /// host's state, which on a shared host can move the speed of whole runs by more than the
    /// ratio measured).
    #[serde(default)]
    pub pcm_vs_plain: Option<f64>,
    /// The PCM block path's instructions (`avx512`, `avx2` or `portable`; `LOCSIM_PCM_SIMD`).
    #[serde(default)]
    pub pcm_simd: Option<String>,
    /// With `--cores N` (N > 1): the same point on one core, simulated core accesses per host
    /// second (median; its runs alternate with the N-core ones), and the N-core host time per
    /// simulated access over the one-core one (docs/multicore.md; the median over the repeats
    /// of each pair of runs back to back, as `pcm_vs_plain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_core_sim_mem_accesses_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_per_access_vs_one_core: Option<f64>,
    pub version: String,
    pub git_rev: String,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The median over the repeats of `other[i] / base[i]`: each pair of runs made back to back, so
/// that a change of the host's speed between repeats cancels within each ratio.
fn paired_ratio(base: &[f64], other: &[f64]) -> f64 {
    median(base.iter().zip(other).map(|(b, o)| o / b).collect())
}

/// One crash-checking point of `locsim bench --crash` (median of `repeat` checks).
#[derive(Clone, Debug, serde::Serialize)]
pub struct CrashBenchRow {
    pub workload: String,
    pub protocol: String,
    pub txs: u64,
    pub crash_points: u64,
    pub candidate_crash_cycles: u64,
    pub threads: usize,
    pub violations: u64,
    /// Median over the repeats: crash states checked per host second (the recorded run before
    /// the sweep is not counted).
    pub states_per_second: f64,
    pub check_seconds: f64,
    pub repeat: u32,
    pub cpu: String,
    pub version: String,
    pub git_rev: String,
}

/// Crash-check every workload under every protocol as `crashtest` does by default (`txs`
/// transactions, no warm-up), `crashes` points,
/// `threads` workers, `repeat` (>= 1) times each, seed 1.
pub fn measure_crash(
    cfg: &Config,
    workloads: &[WorkloadKind],
    protocols: &[ProtocolKind],
    (txs, crashes, threads, repeat): (u64, u64, usize, u32),
) -> Result<Vec<CrashBenchRow>, String> {
    let mut rows = Vec::new();
    for &w in workloads {
        for &p in protocols {
            let run = RunSpec {
                cfg: cfg.clone(),
                workload: w,
                protocol: p,
                txs,
                // What `crashtest` runs by default: no warm-up (every transaction is checked).
                warmup_txs: 0,
                seed: 1,
                abort_rate: 0.0,
                bug: None,
                record: true,
                tape: false,
                prefault: false,
            };
            let spec = crate::crash::CrashSpec { threads, ..crate::crash::CrashSpec::new(run, crashes) };
            let reports = (0..repeat).map(|_| crate::crash::check(&spec)).collect::<Result<Vec<_>, _>>()?;
            let r = &reports[0];
            rows.push(CrashBenchRow {
                workload: w.name().into(),
                protocol: p.name().into(),
                txs,
                crash_points: r.crash_points,
                candidate_crash_cycles: r.candidate_crash_cycles,
                threads,
                violations: r.violations,
                states_per_second: median(reports.iter().map(|r| r.states_per_second).collect()),
                check_seconds: median(reports.iter().map(|r| r.check_seconds).collect()),
                repeat,
                cpu: cpu_model(),
                version: runner::VERSION.into(),
                git_rev: runner::GIT_REV.into(),
            });
        }
    }
    Ok(rows)
}

/// The host CPU's model name (from /proc/cpuinfo on Linux), to quote beside a speed figure.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// Measure every workload under every protocol: `txs` transactions after the configured
/// warm-up, `repeat` (>= 1) times each, seed 1.
pub fn measure(
    cfg: &Config,
    workloads: &[WorkloadKind],
    protocols: &[ProtocolKind],
    txs: u64,
    repeat: u32,
) -> Result<Vec<BenchRow>, String> {
    measure_devices(cfg, workloads, protocols, (txs, repeat), false)
}

/// The runs of one point: its accesses and memory requests, and per repeat its host seconds
/// and, when asked, the speed of its runs on the PCM device and on one core.
struct Repeats {
    accesses: u64,
    requests: u64,
    secs: Vec<f64>,
    pcm_rates: Vec<f64>,
    one_rates: Vec<f64>,
}

/// Run `spec` `repeat` times, each run followed by one under `pcm` and one under `one_core`
/// (configurations) if given: alternated, so that a drift of the host's speed moves both.
fn repeats(spec: &RunSpec, repeat: u32, pcm: Option<&Config>, one_core: Option<&Config>) -> Result<Repeats, String> {
    let mut out = Repeats { accesses: 0, requests: 0, secs: Vec::new(), pcm_rates: Vec::new(), one_rates: Vec::new() };
    for _ in 0..repeat {
        let r = runner::execute(spec)?.result;
        (out.accesses, out.requests) = (r.sim_mem_accesses, r.sim_mem_requests);
        out.secs.push(r.host_seconds);
        if let Some(cfg) = pcm {
            let r = runner::execute(&RunSpec { cfg: cfg.clone(), ..spec.clone() })?.result;
            out.pcm_rates.push(r.sim_mem_accesses_per_second);
        }
        if let Some(cfg) = one_core {
            let r = runner::execute(&RunSpec { cfg: cfg.clone(), ..spec.clone() })?.result;
            out.one_rates.push(r.sim_mem_accesses_per_second);
        }
    }
    Ok(out)
}

/// [`measure`]; with `pcm`, each point also with the bit-level PCM device, its runs alternating
/// with the plain device's (`cfg` must leave `memory.device` plain).
pub fn measure_devices(
    cfg: &Config,
    workloads: &[WorkloadKind],
    protocols: &[ProtocolKind],
    (txs, repeat): (u64, u32),
    pcm: bool,
) -> Result<Vec<BenchRow>, String> {
    use crate::config::Device;
    if pcm && cfg.memory.device != Device::Ideal {
        return Err("bench --pcm compares the PCM device with the plain one: leave memory.device = ideal".into());
    }
    let mut pcm_cfg = cfg.clone();
    pcm_cfg.memory.device = Device::Pcm;
    let mut one_core = cfg.clone();
    one_core.machine.cores = 1;
    let multi = cfg.machine.cores > 1;
    let mut rows = Vec::new();
    for &w in workloads {
        let base = RunSpec {
            cfg: cfg.clone(),
            workload: w,
            protocol: ProtocolKind::Baseline,
            txs,
            warmup_txs: cfg.workload.warmup_txs,
            seed: 1,
            abort_rate: 0.0,
            bug: None,
            record: false,
            tape: false,
            prefault: true,
        };
        let native = median((0..repeat).map(|_| runner::native_seconds(&base)).collect());
        // The clock measured after one protocol's runs is the next one's clock before.
        let mut clock_after = host_clock_ghz();
        for &p in protocols {
            let spec = RunSpec { protocol: p, ..base.clone() };
            let clock_before = clock_after;
            let Repeats { accesses, requests, secs, pcm_rates, one_rates } =
                repeats(&spec, repeat, pcm.then_some(&pcm_cfg), multi.then_some(&one_core))?;
            // Each repeat's plain speed, the reference of the PCM and one-core runs beside it.
            let plain_rates: Vec<f64> = secs.iter().map(|&t| accesses.max(1) as f64 / t).collect();
            let pcm_vs_plain = pcm.then(|| paired_ratio(&plain_rates, &pcm_rates));
            // Host time per access at N cores over one core: the one-core speed over the N-core one.
            let vs_one_core = multi.then(|| paired_ratio(&plain_rates, &one_rates));
            let s = median(secs);
            let pcm_rate = pcm.then(|| median(pcm_rates));
            let one_rate = multi.then(|| median(one_rates));
            clock_after = host_clock_ghz();
            let clock = clock_before.zip(clock_after).map(|(a, b)| (a + b) / 2.0);
            rows.push(BenchRow {
                workload: w.name().into(),
                protocol: p.name().into(),
                txs,
                sim_mem_accesses: accesses,
                host_seconds: s,
                sim_mem_accesses_per_second: accesses as f64 / s,
                sim_mem_requests: requests,
                sim_mem_requests_per_second: requests as f64 / s,
                native_seconds: native,
                slowdown_vs_native: s / native.max(1e-12),
                repeat,
                host_clock_ghz: clock,
                host_cycles_per_access: clock.map(|ghz| s * ghz * 1e9 / accesses.max(1) as f64),
                pcm_sim_mem_accesses_per_second: pcm_rate,
                pcm_vs_plain,
                pcm_simd: pcm
                    .then(|| crate::pcm::Simd::from_env().unwrap_or_else(|_| crate::pcm::Simd::detect()).name().into()),
                one_core_sim_mem_accesses_per_second: one_rate,
                time_per_access_vs_one_core: vs_one_core,
                version: runner::VERSION.into(),
                git_rev: runner::GIT_REV.into(),
            });
        }
    }
    Ok(rows)
}

/// An optional host figure with `digits` decimals, or `-` (tables).
pub fn show(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".to_string(), |v| format!("{v:.digits$}"))
}

/// The host core's clock now, in GHz, from a chain of dependent register-to-register integer
/// additions: each waits for the one before, and an x86-64 core retires one such addition per
/// cycle, whatever its width or memory. The addend is a register, not an immediate: cores
/// from Intel's Golden Cove on fold chains of immediate additions in the renamer (they ran
/// about 5 per cycle here, which gave a "clock" of 19 GHz). The best of a few short samples
/// (about 1.3 ms each at 3 GHz), so that a sample the thread spent descheduled does not count.
/// Samples of 4 M additions instead of 16 M read the same clock on a Zen 5 EPYC (two series of
/// 60 probes each: medians 4.23 and 4.24 GHz with 16 M, 4.25 and 4.24 with 4 M, every probe
/// within 4.10 - 4.29), and the report's speed sample, which probes between every two
/// protocols, spends 0.3 s of CPU on them instead of 1.3 s.
/// `None` on other architectures.
///
/// On a shared machine the clock moves with the load of the other tenants; dividing a host time
/// by it gives host cycles, which move much less (as long as the core itself is not shared).
pub fn host_clock_ghz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        const ITERS: u64 = 500_000;
        const ADDS_PER_ITER: u64 = 8;
        best_rate(|| {
            let (mut x, mut n, one) = (0u64, ITERS, 1u64);
            let t = std::time::Instant::now();
            // SAFETY: registers only (no memory, no stack); the loop ends when `n` reaches 0.
            unsafe {
                std::arch::asm!(
                    "2:",
                    "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
                    "add {x}, {one}", "add {x}, {one}", "add {x}, {one}", "add {x}, {one}",
                    "dec {n}",
                    "jnz 2b",
                    x = inout(reg) x,
                    n = inout(reg) n,
                    one = in(reg) one,
                    options(nomem, nostack),
                );
            }
            let secs = t.elapsed().as_secs_f64();
            assert_eq!((x, n), (ITERS * ADDS_PER_ITER, 0), "the clock probe's chain ran whole");
            (ITERS * ADDS_PER_ITER, secs)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

/// The best of five samples of `sample` (cycles it took, seconds), in GHz.
#[cfg(target_arch = "x86_64")]
fn best_rate(mut sample: impl FnMut() -> (u64, f64)) -> Option<f64> {
    let mut best: f64 = 0.0;
    for _ in 0..5 {
        let (cycles, secs) = sample();
        if secs > 0.0 {
            best = best.max(cycles as f64 / secs / 1e9);
        }
    }
    (best > 0.0).then_some(best)
}

/// A second clock estimate for the probe's test, from a different unit: a chain of dependent
/// 64-bit multiplications, 3 cycles each on every x86-64 core since 2008 (Intel Nehalem, AMD
/// Zen and later).
#[cfg(all(test, target_arch = "x86_64"))]
fn multiply_clock_ghz() -> Option<f64> {
    const ITERS: u64 = 1_000_000;
    const MULS_PER_ITER: u64 = 8;
    best_rate(|| {
        let (mut x, mut n, k) = (1u64, ITERS, 3u64);
        let t = std::time::Instant::now();
        // SAFETY: registers only (no memory, no stack); the loop ends when `n` reaches 0.
        unsafe {
            std::arch::asm!(
                "2:",
                "imul {x}, {k}", "imul {x}, {k}", "imul {x}, {k}", "imul {x}, {k}",
                "imul {x}, {k}", "imul {x}, {k}", "imul {x}, {k}", "imul {x}, {k}",
                "dec {n}",
                "jnz 2b",
                x = inout(reg) x,
                n = inout(reg) n,
                k = in(reg) k,
                options(nomem, nostack),
            );
        }
        let secs = t.elapsed().as_secs_f64();
        assert_eq!((x, n), (3u64.wrapping_pow((ITERS * MULS_PER_ITER) as u32), 0), "the multiply chain ran whole");
        (3 * ITERS * MULS_PER_ITER, secs)
    })
}

#[cfg(test)]
mod tests {
    use super::{host_clock_ghz, median, paired_ratio};

    #[test]
    fn a_ratio_pairs_the_runs_made_back_to_back() {
        // The host's speed doubles between repeats; the device under test is 0.5x the plain one
        // in every pair but one (0.6x). The ratio of medians (9 / 20) reads 0.45, below every pair.
        let (plain, pcm) = ([10.0, 20.0, 30.0], [6.0, 9.0, 15.0]);
        assert_eq!(paired_ratio(&plain, &pcm), 0.5);
        assert_eq!(median(pcm.to_vec()) / median(plain.to_vec()), 0.45);
        assert_eq!(paired_ratio(&[8.0], &[2.0]), 0.25);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_clock_probe_runs_its_whole_chain_and_gives_a_clock_a_core_can_have() {
        // A loop that did not run whole fails the probe's own check; one too fast to be real
        // would give an absurd clock. A loaded host only lowers the figure, and the lower
        // bound is far under any x86-64 core of this century.
        let ghz = host_clock_ghz().expect("x86-64");
        assert!((0.05..8.0).contains(&ghz), "host clock estimate {ghz} GHz");
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_clock_probe_agrees_with_a_chain_of_multiplications() {
        // Two execution units, two latencies: a core that shortcut one chain (as Golden Cove
        // does with immediate additions, which made the probe read 19 GHz) would make them
        // disagree in every pair. A busy host slows one chain of a pair at times (seven pairs
        // disagreed at load 7-9), so pairs are measured, interleaved, until the best of each
        // agree, for up to 200 pairs: a shortcut never agrees, load only delays agreement.
        let (mut add, mut mul): (f64, f64) = (0.0, 0.0);
        for _ in 0..200 {
            add = add.max(host_clock_ghz().expect("x86-64"));
            mul = mul.max(super::multiply_clock_ghz().expect("x86-64"));
            if (0.75..1.33).contains(&(add / mul)) {
                return;
            }
        }
        panic!("addition chain {add:.2} GHz, multiplication chain {mul:.2} GHz, over 200 pairs");
    }
}
