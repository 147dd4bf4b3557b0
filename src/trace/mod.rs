//! Bring your own workload: replay a trace (docs/formats/trace.md) as a workload, and write any
//! built-in workload as a trace (`locsim trace-gen`).
//!
//! The format itself (records, binary and text encodings, every rule a trace must keep) is the
//! crate `locsim-trace`, re-exported here as [`format`](mod@format): one module encodes and decodes it, and
//! the C recorder (`crates/recorder`) writes through the same encoder.
//!
//! The replayer is a workload, [`crate::workload::trace_replay::TraceWorkload`] (the workload `trace`).
#![warn(missing_docs)]

pub mod tee;

pub use locsim_trace as format;

use crate::config::Config;
use crate::pmem::Layout;
use crate::types::Addr;
use crate::workload::Pm;
use crate::workload::{native::Native, WorkloadKind};
use format::{Encoder, Encoding, Record};
use std::io::Write;

pub use crate::workload::trace_replay::{open, Source};

/// The [`Pm`] back end of `trace-gen`: plain memory ([`Native`]) whose every call is also
/// written as a trace record, a lock ([`Pm::lock`], taken only when other cores run) as a
/// `lock` record naming its line.
pub struct Recording<W: Write> {
    inner: Native,
    enc: Encoder<W>,
    error: Option<std::io::Error>,
    /// The core whose transaction runs (the thread id the workload sees).
    core: usize,
    /// Are there other cores (the workload then takes its locks, as on the simulator's N cores)?
    concurrent: bool,
}

impl<W: Write> Recording<W> {
    fn put(&mut self, r: &Record) {
        if self.error.is_none() {
            if let Err(e) = self.enc.write(r) {
                self.error = Some(e);
            }
        }
    }
}

impl<W: Write> Pm for Recording<W> {
    fn begin(&mut self) {
        self.inner.begin();
        self.put(&Record::Begin);
    }
    fn commit(&mut self) {
        self.inner.commit();
        self.put(&Record::Commit);
    }
    fn abort(&mut self) {
        self.inner.abort();
        self.put(&Record::Abort);
    }
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        self.inner.load(addr, buf);
        self.put(&Record::Load { addr: addr.0, len: buf.len() as u64 });
    }
    fn store(&mut self, addr: Addr, data: &[u8]) {
        self.inner.store(addr, data);
        // The simulator ignores an empty store; the format has none.
        if !data.is_empty() {
            self.put(&Record::Store { addr: addr.0, bytes: data });
        }
    }
    fn compute(&mut self, cycles: u64) {
        self.put(&Record::Compute { cycles });
    }
    fn last_durable_tx(&self) -> u64 {
        self.inner.last_durable_tx()
    }
    fn concurrent(&self) -> bool {
        self.concurrent
    }
    /// Lock ids are lines of the data area, which is the region from address 0.
    fn lock(&mut self, id: u64) {
        self.put(&Record::Lock { addr: id * format::LINE_BYTES });
    }
    fn core(&self) -> usize {
        self.core
    }
}

/// What `trace-gen` writes.
#[derive(Clone, Debug)]
pub struct GenSpec {
    /// The configuration (the workload's parameters; the machine's do not change the trace).
    pub cfg: Config,
    /// The built-in workload.
    pub workload: WorkloadKind,
    /// Transactions after the warm-up.
    pub txs: u64,
    /// Warm-up transactions (the `warmup` record).
    pub warmup_txs: u64,
    /// Seed of the operation and abort streams (as `run --seed`).
    pub seed: u64,
    /// Fraction of transactions aborted (as `run --abort-rate`).
    pub abort_rate: f64,
    /// Binary or text.
    pub encoding: Encoding,
}

/// Chunk of the populated data area per `init` record (all-zero chunks are left out).
const INIT_CHUNK: usize = 4096;

/// Write the trace of a built-in workload: the operations `locsim run` would simulate with the
/// same configuration, seed and abort rate (the same populate, the same random streams), so
/// that replaying it gives the same cycles and bytes. Returns the records written; `Err` is the
/// writer's.
///
/// With `machine.cores = N > 1`, each core runs its own driver state and streams, and its
/// share of the warm-up and of the transactions, as `locsim run --cores N` splits them
/// ([`crate::sched`]), taking its locks, which are written as `lock` records (format version
/// 3), so that the replay takes them as the built-in run does; the cores' transactions are
/// written whole, in rounds (core 0's next transaction, core 1's, ...), each core's preceded
/// by a `core` record: one serial order of the program, the same for every machine and protocol
/// (docs/multicore.md, "Traces and programs on N cores"). On one core a workload takes no lock
/// and the trace is of version 2, as before the `lock` record existed.
pub fn generate<W: Write>(g: &GenSpec, out: W) -> std::io::Result<u64> {
    let cores = g.cfg.machine.cores as usize;
    let mut wl = g.workload.build(&g.cfg.workload);
    // The data area `runner` populates: the workload's bytes rounded up as the layout does.
    let size = Layout::new(wl.data_bytes(), g.cfg.log.size_bytes).data_bytes;
    let mut mem = vec![0u8; size as usize];
    wl.populate(&mut mem);
    let version = if cores > 1 { format::LOCK_VERSION } else { format::DEFAULT_VERSION };
    let mut enc = Encoder::with_version(out, g.encoding, version)?;
    enc.write(&Record::Region { base: 0, size })?;
    enc.write(&Record::Warmup { txs: g.warmup_txs })?;
    for (i, chunk) in mem.chunks(INIT_CHUNK).enumerate() {
        if chunk.iter().any(|&b| b != 0) {
            enc.write(&Record::Init { addr: (i * INIT_CHUNK) as u64, bytes: chunk })?;
        }
    }
    let mut pm = Recording { inner: Native::new(mem), enc, error: None, core: 0, concurrent: cores > 1 };
    if cores > 1 {
        let mut wls = (0..cores)
            .map(|c| wl.for_core(c, cores).ok_or_else(|| not_multicore(&wl)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut streams: Vec<_> = (0..cores).map(|c| crate::rng::run_streams(g.seed, c)).collect();
        for total in [g.warmup_txs, g.txs] {
            let mut left = crate::sched::split(total, cores);
            while left.iter().any(|&n| n > 0) {
                for c in 0..cores {
                    if left[c] == 0 {
                        continue;
                    }
                    left[c] -= 1;
                    pm.enc.set_core(c as u32)?;
                    pm.core = c;
                    let (ops, aborts) = &mut streams[c];
                    let abort = crate::rng::next_abort(aborts, g.abort_rate);
                    wls[c].run_tx(&mut pm, ops, abort);
                    if let Some(e) = pm.error.take() {
                        return Err(e);
                    }
                }
            }
        }
    } else {
        let (mut ops, mut aborts) = crate::rng::run_streams(g.seed, 0);
        for _ in 0..g.warmup_txs.saturating_add(g.txs) {
            let abort = crate::rng::next_abort(&mut aborts, g.abort_rate);
            wl.run_tx(&mut pm, &mut ops, abort);
            if let Some(e) = pm.error.take() {
                return Err(e);
            }
        }
    }
    pm.enc.write(&Record::End)?;
    let n = pm.enc.records();
    pm.enc.finish()?;
    Ok(n)
}

fn not_multicore(wl: &crate::workload::Workload) -> std::io::Error {
    std::io::Error::other(wl.multicore().err().unwrap_or_else(|| format!("workload {}: runs on one core", wl.name())))
}
