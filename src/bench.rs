//! Simulator speed (MODEL.md section 6): simulated core accesses per host second and slowdown
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
    pub version: String,
    pub git_rev: String,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
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
        };
        let native = median((0..repeat).map(|_| runner::native_seconds(&base)).collect());
        for &p in protocols {
            let spec = RunSpec { protocol: p, ..base.clone() };
            let mut secs = Vec::new();
            let (mut accesses, mut requests) = (0, 0);
            for _ in 0..repeat {
                let r = runner::execute(&spec)?.result;
                (accesses, requests) = (r.sim_mem_accesses, r.sim_mem_requests);
                secs.push(r.host_seconds);
            }
            let s = median(secs);
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
                version: runner::VERSION.into(),
                git_rev: runner::GIT_REV.into(),
            });
        }
    }
    Ok(rows)
}
