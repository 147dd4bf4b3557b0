//! The machine: one in-order blocking core's clock, the cache hierarchy, the memory controller,
//! and persistent memory with real bytes.
//!
//! Two byte images cover the whole physical space (data area and log area):
//! - `arch`: the program's view (what loads return; the content of every cached line);
//! - `nvm`: what the device holds once every issued write has completed.
//!
//! Every write to NVM goes through [`Machine::write_block`] (explicit payload) or
//! [`Machine::write_from_arch`] (payload = the program's current bytes of a block), captured at
//! issue. With recording on, each is also logged with the cycle it became durable, which is
//! all the crash checker needs to rebuild the durable image at any cycle.
//!
//! Payload bytes are kept only when something reads them (`keep_bytes`: crash recording and
//! tests). A plain `run` reads no device bytes, and copying a random victim's 64 bytes costs two
//! host cache misses per write-back; timing does not depend on payloads (a test checks that
//! both modes give identical figures).
//!
//! Protocol hardware that must act later (a truncation after a checkpoint completes) uses
//! [`Machine::defer_write`]: the write is issued to the controller when simulated time reaches
//! its cycle, so the controller always sees requests in time order.

use crate::cache::{Access, Hierarchy, HitLevel, Slot, Victim};
use crate::config::{Config, PersistDomain};
use crate::memctl::{MemCtl, WriteTiming};
use crate::ordering::{CommitFlush, FlushCost, Knobs, WriteOrder};
use crate::pmem::{read_block, DurableRecord, DurableWrite, Layout, WriteKind};
use crate::startgap::{Geometry, StartGap};
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle, Ns};

/// Counters of one run (snapshot at the start of the measured region, subtract at the end).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct MachineStats {
    /// Block accesses issued by the core (loads and stores, split per block touched).
    pub mem_accesses: u64,
    /// NVM bytes written, by [`WriteKind`].
    pub write_bytes_by_kind: [u64; WriteKind::ALL.len()],
    pub mem_reads: u64,
    pub flushes: u64,
    pub fence_stall_cycles: Cycle,
    pub l1_hits: u64,
    pub l2_hits: u64,
    pub llc_hits: u64,
    pub llc_misses: u64,
    /// Core cycles spent moving dirty lines out of the inner levels at commit (`[ordering]`).
    pub commit_flush_cycles: Cycle,
    /// Core cycles waiting at the phase barrier for the previous transaction's writes.
    pub barrier_stall_cycles: Cycle,
    /// Coherence (more than one core; 0 with one): private copies invalidated by another core's
    /// store, owners downgraded by another core's load, dirty lines passed between cores.
    pub invalidations: u64,
    pub downgrades: u64,
    pub c2c_transfers: u64,
    /// `machine.persist_domain = "bbb"` only (absent from the report otherwise): persist-buffer
    /// entries drained to memory because the buffer was full, and entries dropped because
    /// another core's store superseded them.
    #[serde(skip_serializing_if = "is_zero")]
    pub bbpb_drained: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub bbpb_superseded: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl MachineStats {
    pub fn mem_write_bytes(&self) -> u64 {
        self.write_bytes_by_kind.iter().sum()
    }
    /// Counters accumulated since `start`.
    pub fn since(&self, start: &MachineStats) -> MachineStats {
        let mut d = self.clone();
        d.mem_accesses -= start.mem_accesses;
        for i in 0..WriteKind::ALL.len() {
            d.write_bytes_by_kind[i] -= start.write_bytes_by_kind[i];
        }
        d.mem_reads -= start.mem_reads;
        d.flushes -= start.flushes;
        d.fence_stall_cycles -= start.fence_stall_cycles;
        d.commit_flush_cycles -= start.commit_flush_cycles;
        d.barrier_stall_cycles -= start.barrier_stall_cycles;
        d.l1_hits -= start.l1_hits;
        d.l2_hits -= start.l2_hits;
        d.llc_hits -= start.llc_hits;
        d.llc_misses -= start.llc_misses;
        d.invalidations -= start.invalidations;
        d.downgrades -= start.downgrades;
        d.c2c_transfers -= start.c2c_transfers;
        d.bbpb_drained -= start.bbpb_drained;
        d.bbpb_superseded -= start.bbpb_superseded;
        d
    }
}

/// Commit-to-acknowledge latencies: 8-cycle buckets up to 65 536 cycles, then one overflow
/// bucket (whose values count at their maximum for the mean).
#[derive(Clone, Debug)]
pub struct LatencyHist {
    buckets: Vec<u64>,
    count: u64,
    sum: u64,
    max: u64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist { buckets: vec![0; 8193], count: 0, sum: 0, max: 0 }
    }
}

impl LatencyHist {
    pub fn add(&mut self, cycles: Cycle) {
        self.buckets[((cycles.get() / 8) as usize).min(8192)] += 1;
        (self.count, self.sum, self.max) = (self.count + 1, self.sum + cycles.get(), self.max.max(cycles.get()));
    }
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
    /// The smallest bucket bound below which at least `q` of the values lie (an upper bound,
    /// at most 7 cycles above the exact quantile; the maximum when in the overflow bucket).
    pub fn quantile(&self, q: f64) -> Cycle {
        let want = (q * self.count as f64).ceil() as u64;
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= want && n > 0 {
                return Cycle::new(if i == 8192 { self.max } else { (i as u64 * 8 + 7).min(self.max) });
            }
        }
        Cycle::new(self.max)
    }
}

/// What the crash checker needs from a run, recorded while it executes.
#[derive(Default)]
pub struct Recorder {
    pub durable: DurableRecord,
    /// Per transaction in commit order: cycle at which its commit was called.
    pub commit_called: Vec<Cycle>,
    /// (cycle, n): from this cycle on, the first n transactions (of core `ack_cores[i]`, in
    /// that core's commit order) are acknowledged durable.
    pub acks: Vec<(Cycle, u64)>,
    /// The core of each entry of `acks`.
    pub ack_cores: Vec<u8>,
    /// Under `gpf` with the core's stores in the domain only: every write that reached the
    /// controller, at its acceptance (what the device holds; `durable` holds the stores). The
    /// crash checker's cut-short Global Persistent Flush reverts the lines it did not write back
    /// to this image (`crate::crash::gpf`, docs/cxl.md).
    pub device: Vec<crate::pmem::DurableWrite>,
}

impl Recorder {
    /// Host bytes the record holds (its vectors' capacities).
    pub fn heap_bytes(&self) -> u64 {
        let w = self.durable.writes.capacity() * std::mem::size_of::<crate::pmem::DurableWrite>();
        let w = w + self.device.capacity() * std::mem::size_of::<crate::pmem::DurableWrite>();
        (w + self.commit_called.capacity() * 8 + self.acks.capacity() * 16 + self.ack_cores.capacity()) as u64
    }
}

/// The bytes of the private copies under the injected bug `lost-invalidation`, per (core,
/// block number).
type StaleCopies = std::collections::HashMap<(usize, u64), BlockData>;

/// How many blocks ahead of a log-area write the device state is prefetched (host hint).
const LOG_AHEAD: usize = 8;

/// A write the controller receives later. Its payload, kept only with `keep_bytes`, is in
/// `Machine::deferred_data` at the same position.
struct Deferred {
    at: Cycle,
    block: BlockId,
    kind: WriteKind,
}

/// Entries of [`Machine`]'s table of write-back durability (a power of two: 128 KiB).
const WRITTEN_BACK_ENTRIES: usize = 1 << 14;

/// A core's part of the machine while another core runs: its clock, its pending flushes and the
/// transaction counters of [`Machine`] (`now`, `flush_pending`, `txs_committed`, `acked`,
/// `unacked`). The running core's entry holds stale values and an empty queue:
/// [`Machine::switch_core`] moves the queue with two swaps through it (no allocation, no drop),
/// about a dozen host instructions, when either queue is not empty.
#[derive(Default)]
struct Parked {
    clock: Cycle,
    /// When the core's flushed writes are durable (what its next fence waits for).
    flush_pending: Cycle,
    txs_committed: u64,
    acked: u64,
    unacked: std::collections::VecDeque<Cycle>,
    /// Its transaction's ordered write stream (`log_order = program`), while it is parked.
    stream: Stream,
}

/// An ordered sequence of writes ([`Machine::begin_ordered`], [`Machine::begin_tx_order`]): the
/// acceptance and durability of its latest write, if a sequence is under way, and whether it is
/// a transaction's whole stream (`log_order = program`), which the commit-time sequences of the
/// protocols then join instead of starting their own.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    chain: Option<(Cycle, Cycle)>,
    whole: bool,
}

impl Stream {
    /// A transaction's stream before its first write.
    pub const FRESH: Stream = Stream { chain: Some((Cycle::ZERO, Cycle::ZERO)), whole: true };
}

/// The simulated machine (everything but the protocol and the workload).
pub struct Machine {
    /// The running core's clock (the other cores' clocks wait in `parked`).
    pub now: Cycle,
    /// The core whose operation the machine is executing ([`Machine::switch_core`]).
    core: usize,
    /// Per core, its registers while it is not the running core ([`Parked`]).
    parked: Vec<Parked>,
    pub layout: Layout,
    pub hier: Hierarchy,
    pub ctl: MemCtl,
    /// Program view of all persistent memory.
    pub arch: Vec<u8>,
    /// Device content after all issued writes complete (empty unless `keep_bytes`).
    pub nvm: Vec<u8>,
    /// Keep payloads: maintain `nvm` and record write data.
    pub keep_bytes: bool,
    /// The bit-accurate PCM device, when `memory.device = "pcm"` (it needs `keep_bytes`).
    pub pcm: Option<crate::pcm::Pcm>,
    /// Start-Gap translation of the log area (`startgap.enabled`): `nvm`, the device and the
    /// recorded writes use physical blocks; `arch` and the protocols logical ones.
    pub sg: Option<StartGap>,
    /// Core cycles of a PCM block write by its programmed chunks (the device's latency in ns,
    /// rounded up to whole cycles), looked up once per write rather than converted.
    pcm_write_cycles: [Cycle; 9],
    /// A PCM device or more than one core: [`Machine::access_block`] takes its out-of-line
    /// path.
    special: bool,
    /// No payloads, no Start-Gap, no PCM device: a write is only timing and a byte count (the
    /// short path of [`Machine::issue`]).
    plain: bool,
    pub record: Option<Recorder>,
    /// Dirty LLC victims carrying a transaction tag, for the protocol to place (log or home).
    pub tx_victims: Vec<Victim>,
    /// Transactions of the running core whose commit has been called.
    pub txs_committed: u64,
    /// Transactions of the running core acknowledged durable (what CheckMaxCommit answers).
    pub acked: u64,
    /// Commit-to-acknowledge latency of the transactions acknowledged so far.
    pub commit_latency: LatencyHist,
    /// Commit-call cycles of the running core's transactions not yet acknowledged, oldest first.
    unacked: std::collections::VecDeque<Cycle>,
    /// A run-ending condition found inside the model (e.g. log too small), reported as an error.
    pub fatal: Option<String>,
    stats: MachineStats,
    deferred: std::collections::VecDeque<Deferred>,
    deferred_data: std::collections::VecDeque<BlockData>,
    /// The cycle of the first deferred write (`Cycle::MAX` when there is none): checked before
    /// every controller request.
    deferred_next: Cycle,
    /// The running core's flushed writes are durable at this cycle (its next fence waits).
    flush_pending: Cycle,
    /// The ordering mechanisms enforced (`[ordering]`, resolved; each read recorded).
    pub ord: Knobs,
    /// The log hardware writes checksummed META blocks (`log.meta_checksum`).
    pub meta_checksum: bool,
    /// Under the injected bug `lost-invalidation` only: per (core, block), the bytes that core's
    /// private copy holds (taken when it fetched or wrote the block).
    stale: Option<Box<StaleCopies>>,
    /// An ordered sequence of writes under way ([`Machine::begin_ordered`]): the acceptance
    /// and durability of its latest write.
    chain: Option<(Cycle, Cycle)>,
    /// `chain` is the running transaction's whole stream ([`Machine::begin_tx_order`]).
    whole_stream: bool,
    /// With more than one core, per LLC slot: the cycle of the latest store to the line it holds
    /// (reset when a line is filled from memory; empty with one core). A write-back of the line
    /// carries the bytes of that store, so it starts no earlier ([`Machine::write_back`]), also
    /// when a core whose clock is behind pushes it out. Per slot, not per block, so that it
    /// stays as small as the LLC's tags and hot in the host's caches; a line's earlier
    /// write-back, which the slot no longer remembers, is ordered before a later one by its
    /// bank ([`crate::memctl`]).
    stored_at: Vec<Cycle>,
    /// With more than one core, [`WRITTEN_BACK_ENTRIES`] cycles indexed by the low bits of a
    /// block number: the latest durability of the write-backs ([`Machine::write_back`]) of the
    /// blocks that share the entry (empty with one core). A `clflush` that finds its line clean
    /// waits for its entry at the next fence: the write-back may have been issued by a core
    /// whose clock is ahead, so after the flush in simulated time, where the flush would have
    /// found the line dirty and written it itself. Shared entries make the wait conservative
    /// (never shorter than the line's own write-back, rarely longer: a write-back is in flight
    /// for a few hundred cycles) and keep the table in the host's caches: a table per block
    /// cost about 10 % of the 4-core simulation speed.
    written_back: Vec<Cycle>,
    /// First block of the volatile lock words (`u64::MAX` with one core: there are none), after
    /// the whole persistent layout ([`crate::sched`]): cached like any line, but a miss reads
    /// volatile DRAM and a dirty eviction writes it back there, never to the NVM device.
    pub volatile_block0: u64,
    /// Core cycles of a read of a volatile line from DRAM (`memory.read_latency_ns`).
    volatile_read_cycles: Cycle,
    /// `machine.persist_domain`, read only through [`Machine::persist_stores`] (which records it).
    domain: PersistDomain,
    /// Which of [`persist::DOMAIN_READS`] the run has read (bit `i` for entry `i`).
    domain_read: u8,
    /// `machine.bbpb_entries`.
    bbpb_entries: usize,
    /// The core's stores are durable once performed ([`Machine::persist_stores`]): set for a
    /// software-persistence protocol under `eadr` or `bbb`.
    stores: Option<Box<persist::StoreDomain>>,
    /// Under a Global Persistent Flush domain: the drain work a power failure would leave,
    /// sampled over the run ([`persist::GpfWork`]).
    pub gpf: Option<Box<persist::GpfWork>>,
}

impl Machine {
    /// A machine whose persistent memory starts as `initial` (data area then log area).
    pub fn new(cfg: &Config, layout: Layout, initial: Vec<u8>, record: bool) -> Machine {
        Machine::with_bytes(cfg, layout, initial, record, record)
    }

    /// [`Machine::new`], or [`Refused`](crate::hostmem::Refused) if the host does not give the
    /// memory of the device's byte image or of the PCM device's state.
    pub fn try_new(
        cfg: &Config,
        layout: Layout,
        initial: Vec<u8>,
        record: bool,
    ) -> Result<Machine, crate::hostmem::Refused> {
        Machine::try_with_bytes(cfg, layout, initial, record, record)
    }

    /// Like [`Machine::new`], choosing separately whether device bytes are kept.
    pub fn with_bytes(cfg: &Config, layout: Layout, initial: Vec<u8>, record: bool, keep_bytes: bool) -> Machine {
        Machine::try_with_bytes(cfg, layout, initial, record, keep_bytes).unwrap_or_else(|r| panic!("{r}"))
    }

    fn try_with_bytes(
        cfg: &Config,
        layout: Layout,
        initial: Vec<u8>,
        record: bool,
        keep_bytes: bool,
    ) -> Result<Machine, crate::hostmem::Refused> {
        assert_eq!(initial.len() as u64, layout.total_bytes());
        assert!(keep_bytes || !record, "recording needs the payloads");
        let sg = Geometry::of(&cfg.startgap, &layout).map(|g| StartGap::new(g, cfg.startgap.psi_writes));
        let pcm = match cfg.memory.device {
            crate::config::Device::Pcm => {
                // The log region includes Start-Gap's spare line and register block, if reserved.
                let log = layout.log_bytes + layout.startgap_bytes;
                let regions = [("data", 0, layout.data_bytes), ("log", layout.log_base, log)];
                Some(crate::pcm::Pcm::try_new(&cfg.pcm, layout.total_bytes(), &regions)?)
            }
            _ => None,
        };
        let keep_bytes = keep_bytes || pcm.is_some();
        let pcm_write_cycles =
            pcm.as_ref().map_or([Cycle::ZERO; 9], |p| p.block_latency_ns().map(|ns| cfg.ns_to_cycles(ns)));
        let nvm = match (&sg, keep_bytes) {
            (_, false) => Vec::new(),
            (Some(sg), true) => crate::startgap::physical_initial(&sg.geom, &initial),
            // Only the pages holding a non-zero byte are written: the rest (most of a log) is
            // provided by the host where the run writes it (`bench` commits it first).
            (None, true) => crate::hostmem::Sparse::of(&initial).try_copy(&initial)?,
        };
        let hier = Hierarchy::new(cfg);
        let multi = cfg.machine.cores > 1;
        let stored_at = if multi { vec![Cycle::ZERO; hier.llc.slots()] } else { Vec::new() };
        let written_back = if multi { vec![Cycle::ZERO; WRITTEN_BACK_ENTRIES] } else { Vec::new() };
        let gpf = persist::GpfWork::of(cfg);
        Ok(Machine {
            plain: !keep_bytes && sg.is_none() && pcm.is_none(),
            special: pcm.is_some() || multi || gpf.is_some(),
            pcm,
            sg,
            pcm_write_cycles,
            now: Cycle::ZERO,
            core: 0,
            parked: (0..cfg.machine.cores).map(|_| Parked::default()).collect(),
            layout,
            hier,
            ctl: MemCtl::new(cfg),
            nvm,
            keep_bytes,
            arch: initial,
            record: record.then(Recorder::default),
            tx_victims: Vec::with_capacity(16),
            txs_committed: 0,
            acked: 0,
            commit_latency: LatencyHist::default(),
            unacked: std::collections::VecDeque::new(),
            fatal: None,
            stats: MachineStats::default(),
            deferred: std::collections::VecDeque::new(),
            deferred_data: std::collections::VecDeque::new(),
            deferred_next: Cycle::MAX,
            flush_pending: Cycle::ZERO,
            ord: Knobs::new(cfg.ordering.resolve()),
            chain: None,
            whole_stream: false,
            meta_checksum: cfg.log.meta_checksum,
            stale: None,
            stored_at,
            written_back,
            volatile_block0: if multi { layout.total_bytes().div_ceil(64) } else { u64::MAX },
            volatile_read_cycles: cfg.ns_to_cycles(cfg.memory.read_latency_ns),
            domain: cfg.machine.persist_domain,
            // The drain work is reported under a GPF domain alone: the domain is read.
            domain_read: if gpf.is_some() { 2 } else { 0 },
            gpf,
            bbpb_entries: cfg.machine.bbpb_entries as usize,
            stores: None,
        })
    }

    /// Number of cores (`machine.cores`).
    #[inline]
    pub fn cores(&self) -> usize {
        self.parked.len()
    }

    /// The core whose operation is executing.
    #[inline]
    pub fn core(&self) -> usize {
        self.core
    }

    /// The clock of core `c`.
    pub fn clock_of(&self, c: usize) -> Cycle {
        if c == self.core {
            self.now
        } else {
            self.parked[c].clock
        }
    }

    /// Make core `c` the running core: `now` becomes its clock, and accesses go through its
    /// private caches ([`Hierarchy::switch_core`]). The scheduler calls it between two operations (docs/multicore.md).
    #[inline]
    pub fn switch_core(&mut self, c: usize) {
        let cur = self.core;
        if c != cur {
            let out = &mut self.parked[cur];
            out.clock = self.now;
            out.flush_pending = self.flush_pending;
            out.txs_committed = self.txs_committed;
            out.acked = self.acked;
            out.stream = Stream { chain: self.chain, whole: self.whole_stream };
            // Two empty queues are interchangeable, and most switches find both empty (a
            // synchronous commit fills and drains the queue at once): then nothing moves, and
            // the 32-byte queue headers the commit just wrote are not reloaded.
            let moves = !self.unacked.is_empty() || !self.parked[c].unacked.is_empty();
            if moves {
                // The running core's queue out, the empty placeholder in ...
                std::mem::swap(&mut self.parked[cur].unacked, &mut self.unacked);
            }
            let inn = &mut self.parked[c];
            self.now = inn.clock;
            self.flush_pending = inn.flush_pending;
            self.txs_committed = inn.txs_committed;
            self.acked = inn.acked;
            (self.chain, self.whole_stream) = (inn.stream.chain, inn.stream.whole);
            if moves {
                // ... and core `c`'s queue in, the placeholder out to its entry.
                std::mem::swap(&mut inn.unacked, &mut self.unacked);
            }
            self.core = c;
            self.hier.switch_core(c);
        }
    }

    /// Advance core `c`'s clock to at least `t` (a core blocked on a lock resumes at its release).
    pub fn advance_core_to(&mut self, c: usize, t: Cycle) {
        if c == self.core {
            self.wait_until(t);
        } else {
            let p = &mut self.parked[c];
            p.clock = p.clock.max(t);
        }
    }

    /// From now on the first `n` transactions of core `c` are acknowledged durable (hardware
    /// that acknowledges another core's transactions; the running core's use
    /// [`Machine::ack_through`]).
    pub fn ack_core_through(&mut self, c: usize, n: u64) {
        let (running, now, clock) = (self.core, self.now, self.parked[c].clock);
        if c == running {
            return self.ack_through(n);
        }
        self.switch_core(c);
        self.now = now;
        self.ack_through(n);
        self.switch_core(running);
        self.parked[c].clock = clock;
    }

    /// Inject the bug `lost-invalidation` ([`Hierarchy::lose_invalidations`]): from now on the
    /// bytes each core fetched are kept per (core, block), so that a load by a core holding a
    /// stale copy returns its stale bytes ([`Machine::load_bytes`]). No effect with one core.
    pub fn inject_lost_invalidation(&mut self) {
        if self.hier.shared() {
            self.hier.lose_invalidations();
            self.stale = Some(Box::default());
        }
    }

    /// The bytes a load of `[addr, addr + buf.len())` by the running core returns: the program's
    /// view `arch` (caches hold no data), except the stale copy the running core still holds
    /// under the injected bug `lost-invalidation`.
    #[inline(always)]
    pub fn load_bytes(&self, addr: Addr, buf: &mut [u8]) {
        let a = addr.0 as usize;
        match &self.stale {
            None => buf.copy_from_slice(&self.arch[a..a + buf.len()]),
            Some(st) => self.load_stale(st, addr, buf),
        }
    }

    /// [`Machine::load_bytes`] under the injected bug: block by block, the running core's kept
    /// copy if it still holds the block, else `arch`.
    #[inline(never)]
    fn load_stale(&self, st: &StaleCopies, addr: Addr, buf: &mut [u8]) {
        let (a, end) = (addr.0 as usize, addr.0 as usize + buf.len());
        buf.copy_from_slice(&self.arch[a..end]);
        for b in blocks_of(addr, buf.len()) {
            let held = self.hier.llc.find(b).is_some_and(|s| self.hier.directory(s).0 & 1 << self.core != 0);
            if let (true, Some(copy)) = (held, st.get(&(self.core, b.0))) {
                let r = b.range();
                let (lo, hi) = (r.start.max(a), r.end.min(end));
                buf[lo - a..hi - a].copy_from_slice(&copy[lo - r.start..hi - r.start]);
            }
        }
    }

    /// Snapshot of the counters.
    pub fn stats(&self) -> MachineStats {
        let mut s = self.stats.clone();
        let c = &self.hier.stats;
        (s.l1_hits, s.l2_hits, s.llc_hits, s.llc_misses) = (c.l1_hits, c.l2_hits, c.llc_hits, c.llc_misses);
        (s.invalidations, s.downgrades, s.c2c_transfers) = (c.invalidations, c.downgrades, c.c2c_transfers);
        s.mem_reads = self.ctl.reads;
        (s.bbpb_drained, s.bbpb_superseded) = self.bbpb_counters();
        s
    }

    /// Charge `cycles` of non-memory work.
    #[inline]
    pub fn compute(&mut self, cycles: Cycle) {
        self.now += cycles;
    }

    /// Advance the clock to at least `t` (a stall).
    #[inline]
    pub fn wait_until(&mut self, t: Cycle) {
        self.now = self.now.max(t);
    }

    /// Before a write that must become durable after a write the controller accepted at `t` (a
    /// log's metadata after the entry data it names): under a domain that covers the write
    /// queue, where a write is durable once accepted, wait until `t`; under `memory` the write's
    /// start (`min_start`) orders the completions. Binding only on N cores, for a core whose
    /// clock is behind the one that wrote the data.
    #[inline]
    pub fn durable_after_accepted(&mut self, t: Cycle) {
        if self.domain.covers_queue() {
            self.wait_until(t);
        }
    }

    /// One core access to block `b`; stalls for its latency. A dirty victim without a
    /// transaction tag is written back home (or to its log address) here; tagged victims are
    /// left in `tx_victims` for the protocol. Inlined into the protocols' access loops: the
    /// single-core L1 hit stays a few instructions with no call.
    #[inline(always)]
    pub fn access_block(&mut self, b: BlockId, write: bool) -> Access {
        self.stats.mem_accesses += 1;
        if self.special {
            return self.access_block_special(b, write);
        }
        if let Some(a) = self.hier.l1_hit(b, write) {
            self.now += a.lookup_cycles;
            return a;
        }
        self.access_below_l1_plain(b, write)
    }

    /// [`Machine::access_below_l1`] when the machine is not special: one core, the plain
    /// device, no GPF, stores outside the persistence domain. No lock line (volatile), no PCM
    /// read, no persist buffer and no store cycle of another core concern the access, so it is
    /// [`Machine::after_lookup`] and [`Machine::evicted`] without their tests for them.
    #[inline(never)]
    fn access_below_l1_plain(&mut self, b: BlockId, write: bool) -> Access {
        debug_assert!(!self.special && self.stored_at.is_empty() && b.0 < self.volatile_block0);
        let a = self.hier.access_below_l1(b, write);
        self.now += a.lookup_cycles;
        if a.level == HitLevel::Memory {
            self.issue_deferred(self.now);
            self.now = self.ctl.read(self.now, self.phys_block(b));
        }
        if let Some(v) = a.victim {
            if v.tag == 0 {
                // `write_back` with no store cycle to wait for.
                let kind = self.kind_of(v.block);
                let data = self.keep_bytes.then(|| self.arch_block(v.block));
                let t = self.write_encoded_after(v.block, kind, Cycle::ZERO, || data.expect("payloads kept"));
                self.now = self.now.max(t.accepted);
            } else {
                self.tx_victims.push(v);
            }
        }
        a
    }

    /// [`Machine::access_block`] with a PCM device (a store has the host prefetch its device
    /// state), more than one core, or stores inside the persistence domain (out of line: one
    /// test keeps the plain single-core path as short as it is).
    #[inline(never)]
    fn access_block_special(&mut self, b: BlockId, write: bool) -> Access {
        if self.gpf.as_ref().is_some_and(|g| self.now >= g.next) {
            self.sample_gpf();
        }
        let a = self.access_cached(b, write);
        if let Some(t) = self.stored_at.get_mut(a.llc_slot.0) {
            // After the victim's write-back (in `access_cached`), which read the slot's old value.
            if a.level == HitLevel::Memory {
                *t = Cycle::ZERO;
            }
            if write {
                *t = (*t).max(self.now);
            }
        }
        if write && self.stores.is_some() {
            self.store_persisted(b);
        }
        a
    }

    /// The cache side of [`Machine::access_block_special`].
    #[inline(always)]
    fn access_cached(&mut self, b: BlockId, write: bool) -> Access {
        if write && self.pcm.is_some() {
            self.prefetch_for_store(b);
        }
        if self.hier.shared() {
            return self.access_block_shared(b, write);
        }
        if let Some(a) = self.hier.l1_hit(b, write) {
            self.now += a.lookup_cycles;
            return a;
        }
        self.access_below_l1(b, write)
    }

    /// [`Machine::access_block`] after an L1 miss (out of line: the L1 hit path stays short).
    #[inline(never)]
    fn access_below_l1(&mut self, b: BlockId, write: bool) -> Access {
        let a = self.hier.access_below_l1(b, write);
        self.after_lookup(b, a)
    }

    /// [`Machine::access_block`] with more than one core: the running core's access through
    /// the coherent hierarchy (out of line: the single-core paths stay as they are).
    #[inline(always)]
    fn access_block_shared(&mut self, b: BlockId, write: bool) -> Access {
        let a = self.hier.access_shared_inline(b, write);
        if let Some(st) = self.stale.as_mut().filter(|_| b.0 < self.volatile_block0) {
            // The running core's copy now holds the program's bytes (it fetched them, or wrote);
            // lock lines (volatile, past `arch`) carry no program bytes.
            if write || matches!(a.level, HitLevel::Llc | HitLevel::Memory) {
                st.insert((self.core, b.0), read_block(&self.arch, b));
            }
        }
        if a.level == HitLevel::L1 {
            self.now += a.lookup_cycles;
            return a;
        }
        self.after_lookup(b, a)
    }

    /// The rest of an access that missed L1: the look-up cycles, the memory read on a miss, the
    /// LLC victim's write-back.
    #[inline(always)]
    fn after_lookup(&mut self, b: BlockId, a: Access) -> Access {
        self.now += a.lookup_cycles;
        if a.level == HitLevel::Memory && b.0 >= self.volatile_block0 {
            self.now += self.volatile_read_cycles;
        } else if a.level == HitLevel::Memory {
            self.issue_deferred(self.now);
            self.now = self.ctl.read(self.now, self.phys_block(b));
            if let Some(p) = &mut self.pcm {
                p.read(64);
                self.prefetch_next_victim(a.llc_slot);
            }
        }
        if let Some(v) = a.victim {
            self.evicted(v);
        }
        a
    }

    /// A dirty line left the LLC: without a transaction tag it is written back home (or to its
    /// log address) now; a tagged one is left in `tx_victims` for the protocol.
    #[inline]
    fn evicted(&mut self, v: Victim) {
        if v.block.0 >= self.volatile_block0 {
            // A lock line: written back to volatile DRAM by the write-back buffer, no core time.
        } else if v.tag == 0 {
            if self.stores.as_ref().is_some_and(|d| d.through_buffer()) {
                return; // `bbb`: the line reaches NVM through the persist buffer (persist.rs)
            }
            let kind = self.kind_of(v.block);
            let t = self.write_back(v.block, v.slot, kind);
            self.now = self.now.max(t.accepted);
        } else {
            self.tx_victims.push(v);
        }
    }

    /// Keep an older version of block `b`, cached in LLC slot `current`, in another way of its
    /// set, tagged `aux` (LOC's multi-versioned cache). The current line becomes the most
    /// recently used (an L1 hit does not refresh LLC recency, and the version must not displace
    /// it); the line the version displaces is handled as any LLC victim.
    pub fn keep_version(&mut self, b: BlockId, current: Slot, aux: u32) -> Slot {
        self.hier.llc.touch_slot(current);
        let (s, v) = self.hier.insert_version(b, aux);
        if let Some(v) = v {
            self.evicted(v);
        }
        s
    }

    /// A stored block is written back to the device later: have the host fetch the device's old
    /// content and flip states meanwhile (`Pcm::prefetch_block`) (a hint; no effect on results). Out of
    /// line, so that the path without the PCM device stays short. Lock lines (volatile, past
    /// the device) have no device state.
    #[inline(never)]
    fn prefetch_for_store(&self, b: BlockId) {
        if b.0 >= self.volatile_block0 {
            return;
        }
        if let Some(p) = &self.pcm {
            p.prefetch_block(b.addr().0, false);
            crate::hostmem::prefetch(&self.nvm[b.range().start]);
        }
    }

    /// An LLC fill into slot `s3` made another line of its set the least recently used: the
    /// set's next fill pushes it out, and if it is dirty its write-back reads the program's
    /// bytes of it, the device's old bytes and flip states, all cold in the host's
    /// caches by then (it was last used about an LLC's worth of lines ago). Have the host fetch
    /// them now, about a thousand LLC misses before they are needed (a hint; no effect on
    /// results). Only with the PCM device: the plain device reads none of them.
    #[inline(never)]
    fn prefetch_next_victim(&self, s3: Slot) {
        if let Some((v, true)) = self.hier.llc.next_victim(s3) {
            self.prefetch_write_back(v);
        }
    }

    /// The program announced an access to block `b` ([`Machine::will_access`]): if that access
    /// will miss the LLC and push out a line that may be dirty, have the host fetch the bytes
    /// that line's write-back will read (as [`Machine::prefetch_next_victim`]), now, a few
    /// simulated accesses before they are needed rather than a thousand LLC misses.
    #[inline(never)]
    fn prefetch_victim_for(&self, b: BlockId) {
        if let Some((v, true)) = self.hier.llc.victim_for(b) {
            self.prefetch_write_back(v);
        }
    }

    /// Have the host fetch what a write-back of block `v` to the PCM device reads: the
    /// program's bytes, the device's old bytes and flip states.
    #[inline(always)]
    fn prefetch_write_back(&self, v: BlockId) {
        if let (Some(p), Some(x)) = (&self.pcm, self.arch.get(v.range().start)) {
            crate::hostmem::prefetch(x);
            crate::hostmem::prefetch(&self.nvm[v.range().start]);
            p.prefetch_block(v.addr().0, false);
        }
    }

    /// The program announces that it will access `addr` soon (a hint; no effect on results): the
    /// host fetches the program's bytes there and, with the PCM device, the device state a
    /// later write of that block reads and what the write-back of the line its LLC fill pushes
    /// out reads.
    #[inline]
    pub fn will_access(&self, addr: Addr) {
        if let Some(x) = self.arch.get(addr.0 as usize) {
            crate::hostmem::prefetch(x);
            if self.pcm.is_some() {
                self.prefetch_for_store(addr.block());
                self.prefetch_victim_for(addr.block());
            }
        }
    }

    /// Core accesses to every block of `[addr, addr+len)`.
    #[inline]
    pub fn access_range(&mut self, addr: Addr, len: usize, write: bool) {
        for b in blocks_of(addr, len) {
            self.access_block(b, write);
        }
    }

    /// The write kind of a plain write-back of block `b`, from its address.
    pub fn kind_of(&self, b: BlockId) -> WriteKind {
        if self.layout.is_data(b) {
            WriteKind::Home
        } else if b == self.layout.log_block0() {
            WriteKind::LogHead
        } else {
            WriteKind::LogData
        }
    }

    /// The program's current content of block `b`.
    #[inline]
    pub fn arch_block(&self, b: BlockId) -> BlockData {
        read_block(&self.arch, b)
    }

    /// Issue a write of `data` to block `b` now. The caller decides whether the core waits
    /// (for acceptance or completion).
    #[inline]
    pub fn write_block(&mut self, b: BlockId, kind: WriteKind, data: BlockData) -> WriteTiming {
        self.issue_deferred(self.now);
        self.issue_write(self.now, b, kind, Some(&data))
    }

    /// Issue a write whose payload `encode` builds, called only when payloads are kept (metadata
    /// such as descriptors and commit records: nothing reads them in a plain run).
    #[inline]
    pub fn write_encoded(&mut self, b: BlockId, kind: WriteKind, encode: impl FnOnce() -> BlockData) -> WriteTiming {
        self.issue_deferred(self.now);
        if self.keep_bytes {
            let data = encode();
            self.issue_write(self.now, b, kind, Some(&data))
        } else {
            self.issue_write(self.now, b, kind, None)
        }
    }

    /// [`Machine::defer_write`] with a payload built only when payloads are kept.
    pub fn defer_encoded(&mut self, at: Cycle, b: BlockId, kind: WriteKind, encode: impl FnOnce() -> BlockData) {
        if at <= self.now {
            self.write_encoded(b, kind, encode);
            return;
        }
        let data = self.keep_bytes.then(encode);
        self.defer(at, b, kind, data);
    }

    /// Issue a write to block `dst` whose payload is the program's current content of `src`
    /// (a write-back when `dst == src`, a log copy otherwise).
    #[inline(always)]
    pub fn write_from_arch(&mut self, dst: BlockId, kind: WriteKind, src: BlockId) -> WriteTiming {
        self.issue_deferred(self.now);
        if self.keep_bytes {
            let data = self.arch_block(src);
            self.issue_write(self.now, dst, kind, Some(&data))
        } else {
            self.issue_write(self.now, dst, kind, None)
        }
    }

    /// Write a dirty line's program bytes back home (an eviction, a flush) from LLC slot `s3`.
    /// With more than one core the write starts no earlier than the line's latest store, and
    /// under a domain that covers the write queue it is not accepted before it: a core whose
    /// clock is behind the storing core's would otherwise make bytes durable before they were
    /// stored (before the undo entry a log-flush put ahead of the store, under Proteus).
    #[inline]
    fn write_back(&mut self, b: BlockId, s3: Slot, kind: WriteKind) -> WriteTiming {
        // One core: no entry, and the write is `write_from_arch`'s (a start bound at or before
        // `now` binds nothing).
        let stored = self.stored_at.get(s3.0).copied().unwrap_or(Cycle::ZERO);
        let data = self.keep_bytes.then(|| self.arch_block(b));
        let t = self.write_encoded_durable_after(b, kind, stored, || data.expect("payloads kept"));
        if !self.written_back.is_empty() {
            let d = &mut self.written_back[b.0 as usize % WRITTEN_BACK_ENTRIES];
            *d = (*d).max(t.durable);
        }
        t
    }

    /// A write that must become durable after another write durable at `after` (a log's
    /// metadata after the entries it names, a spilled header after its data, a home write held
    /// back behind its undo entry): the controller starts it no earlier than `after`, so under
    /// `memory` it completes later, and under a domain that covers the write queue (durable once
    /// accepted) the core first waits until `after` ([`Machine::durable_after_accepted`]). With
    /// one core that wait never binds: its writes are accepted in cycle order.
    #[inline]
    pub fn write_encoded_durable_after(
        &mut self,
        b: BlockId,
        kind: WriteKind,
        after: Cycle,
        encode: impl FnOnce() -> BlockData,
    ) -> WriteTiming {
        self.durable_after_accepted(after);
        self.write_encoded_after(b, kind, after, encode)
    }

    #[inline]
    /// A write the controller starts no earlier than `min_start` (see [`MemCtl::write_after`]);
    /// its payload is built only when payloads are kept.
    pub fn write_encoded_after(
        &mut self,
        b: BlockId,
        kind: WriteKind,
        min_start: Cycle,
        encode: impl FnOnce() -> BlockData,
    ) -> WriteTiming {
        self.issue_deferred(self.now);
        let data = self.keep_bytes.then(encode);
        self.issue(self.now, b, kind, data.as_ref(), min_start)
    }

    #[inline]
    fn issue_write(&mut self, at: Cycle, b: BlockId, kind: WriteKind, data: Option<&BlockData>) -> WriteTiming {
        self.issue(at, b, kind, data, Cycle::ZERO)
    }

    /// The block the device stores block `b` at (Start-Gap translation of log lines).
    #[inline]
    fn phys_block(&self, b: BlockId) -> BlockId {
        match &self.sg {
            Some(sg) if sg.geom.is_line(b) => sg.geom.physical(&sg.regs, b),
            _ => b,
        }
    }

    /// Issue a write of (logical) block `b`: translated by Start-Gap when it is a log line,
    /// held behind the last register write, and followed by a gap move every psi such writes.
    #[inline(always)]
    fn issue(
        &mut self,
        at: Cycle,
        b: BlockId,
        kind: WriteKind,
        data: Option<&BlockData>,
        min_start: Cycle,
    ) -> WriteTiming {
        if let Some((accepted, durable)) = self.chain {
            return self.issue_ordered(at, b, kind, data, min_start, accepted, durable);
        }
        if self.plain {
            self.stats.write_bytes_by_kind[kind as usize] += 64;
            return self.ctl.write_after(at, b, min_start);
        }
        if self.sg.is_none() {
            return self.issue_phys(at, b, kind, data, min_start);
        }
        self.issue_start_gap(at, b, kind, data, min_start)
    }

    /// [`Machine::issue`] inside an ordered sequence: the write is issued no earlier than the
    /// previous one's acceptance (`write_order = accepted`) or durability (`durable`).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn issue_ordered(
        &mut self,
        at: Cycle,
        b: BlockId,
        kind: WriteKind,
        data: Option<&BlockData>,
        min_start: Cycle,
        prev_accepted: Cycle,
        prev_durable: Cycle,
    ) -> WriteTiming {
        let at = match self.ord.write_order() {
            WriteOrder::Durable => at.max(prev_durable),
            _ => at.max(prev_accepted),
        };
        self.chain = None;
        let t = self.issue(at, b, kind, data, min_start);
        self.chain = Some((t.accepted, t.durable));
        t
    }

    /// From now until [`Machine::end_ordered`], the writes issued form one ordered sequence
    /// (a transaction's commit-time writes), if `ordering.write_order` asks for one. Inside a
    /// transaction's whole stream ([`Machine::begin_tx_order`]) they continue it.
    #[inline]
    pub fn begin_ordered(&mut self) {
        if matches!(self.ord.write_order(), WriteOrder::Accepted | WriteOrder::Durable) && !self.whole_stream {
            self.chain = Some((Cycle::ZERO, Cycle::ZERO));
        }
    }

    /// End of the ordered sequence (not of a transaction's whole stream).
    #[inline]
    pub fn end_ordered(&mut self) {
        if !self.whole_stream {
            self.chain = None;
        }
    }

    /// A transaction begins: under `log_order = program` (with `write_order` `accepted` or
    /// `durable`) every write issued from now until [`Machine::end_tx_order`] forms one ordered
    /// sequence, its program order, whatever the protocol's own commit-time sequence covers.
    /// Returns whether it does. Called by every protocol but the baseline (which has no
    /// persistent write of its own).
    #[inline]
    pub fn begin_tx_order(&mut self) -> bool {
        let on = self.ord.program_order();
        if on {
            (self.chain, self.whole_stream) = (Stream::FRESH.chain, true);
        }
        on
    }

    /// The transaction has issued its last write (its commit, or abort, is done).
    #[inline]
    pub fn end_tx_order(&mut self) {
        if self.whole_stream {
            (self.chain, self.whole_stream) = (None, false);
        }
    }

    /// Make `s` the ordered sequence the next writes join, returning the one they joined so
    /// far: Speculative Persistence keeps one stream per transaction of a window and issues
    /// each log write in its own transaction's.
    #[inline]
    pub fn swap_stream(&mut self, s: Stream) -> Stream {
        let old = Stream { chain: self.chain, whole: self.whole_stream };
        (self.chain, self.whole_stream) = (s.chain, s.whole);
        old
    }

    /// The phase barrier: stall until every write issued so far (deferred truncations
    /// included) is complete. The stall is counted in `barrier_stall_cycles`.
    pub fn phase_barrier(&mut self) {
        let before = self.now;
        self.quiesce();
        self.stats.barrier_stall_cycles += self.now - before;
    }

    /// Core cycles to move LLC slot `s3`'s dirty inner copies down to the LLC, by
    /// `ordering.flush_cost`: one LLC write, or the latency of each level the copy is written
    /// into (L2 if L1 holds it dirty, then the LLC).
    pub fn flush_cycles(&self, s3: Slot) -> Cycle {
        let (l1_dirty, l2_dirty) = self.hier.inner_dirty(s3);
        match self.ord.flush_cost() {
            FlushCost::PerLevel if l1_dirty => self.hier.l2.latency + self.hier.llc.latency,
            _ if l1_dirty || l2_dirty => self.hier.llc.latency,
            _ => Cycle::ZERO,
        }
    }

    /// Commit-time flush of a transaction's line in LLC slot `s3` (`ordering.commit_flush`
    /// other than `none`): the core pays [`Machine::flush_cycles`] and the inner copies become
    /// clean. The line leaves the cache later, with [`Machine::commit_flush_done`].
    #[inline]
    pub fn commit_flush(&mut self, s3: Slot) {
        if self.ord.commit_flush() == CommitFlush::None {
            return;
        }
        let c = self.flush_cycles(s3);
        self.now += c;
        self.stats.commit_flush_cycles += c;
        self.hier.flush_inner(s3);
    }

    /// After the flushed line `b` is written where it goes: under `commit_flush = invalidate`
    /// it leaves every level (it must be clean by then: nothing is written back).
    #[inline]
    pub fn commit_flush_done(&mut self, b: BlockId) {
        if self.ord.commit_flush() == CommitFlush::Invalidate {
            let (_, dirty) = self.hier.invalidate(b);
            debug_assert!(!dirty, "a flushed line is clean before it leaves the cache");
        }
    }

    /// [`Machine::issue`] with Start-Gap on (kept out of line: the path without it stays short).
    #[inline(never)]
    fn issue_start_gap(
        &mut self,
        at: Cycle,
        b: BlockId,
        kind: WriteKind,
        data: Option<&BlockData>,
        min_start: Cycle,
    ) -> WriteTiming {
        let (pb, min_start, due) = match &mut self.sg {
            Some(sg) if sg.geom.is_line(b) => {
                (sg.geom.physical(&sg.regs, b), min_start.max(sg.barrier), sg.count_write())
            }
            _ => (b, min_start, false),
        };
        let t = self.issue_phys(at, pb, kind, data, min_start);
        if due {
            self.gap_move(at);
        }
        t
    }

    /// One Start-Gap move at cycle `at`: the controller reads the line below the gap, writes it
    /// into the gap once read (and no earlier than the previous register write is durable),
    /// then writes the registers, started only once the copy is durable. Until those registers
    /// are durable, no log-area write starts (`StartGap::barrier`), so neither the moved line's
    /// new place nor its old place (the new gap) is written while the old registers may still
    /// be the durable ones. The core does not wait.
    fn gap_move(&mut self, at: Cycle) {
        let sg = self.sg.as_mut().expect("gap move with Start-Gap on");
        let (geom, barrier, bug) = (sg.geom, sg.barrier, sg.bug_regs_before_copy);
        let (src, dst, next) = geom.next_move(&sg.regs);
        let prev = std::mem::replace(&mut sg.regs, next);
        let (src, dst) = (BlockId(geom.line0 + src), BlockId(geom.line0 + dst));
        let read_done = self.ctl.read(at, src);
        if let Some(p) = &mut self.pcm {
            p.read(64);
        }
        let line = self.keep_bytes.then(|| read_block(&self.nvm, src));
        let copy = self.issue_phys(at, dst, WriteKind::WearLevel, line.as_ref(), read_done.max(barrier));
        let regs = self.keep_bytes.then(|| next.encode_after(&geom, &prev));
        let after = if bug { Cycle::ZERO } else { copy.durable };
        let r = self.issue_phys(at, geom.regs_block(), WriteKind::WearLevel, regs.as_ref(), after);
        self.sg.as_mut().expect("on").barrier = r.durable;
    }

    /// Issue a write of physical block `b` to the controller and the device (with payloads, a
    /// PCM device or Start-Gap; the plain case is handled in [`Machine::issue`]).
    #[inline(never)]
    fn issue_phys(
        &mut self,
        at: Cycle,
        b: BlockId,
        kind: WriteKind,
        data: Option<&BlockData>,
        min_start: Cycle,
    ) -> WriteTiming {
        let t = match (&mut self.pcm, data) {
            (Some(p), Some(d)) => {
                if !self.layout.is_data(b) {
                    // Logs are written block after block: have the host fetch the device state of
                    // the block `LOG_AHEAD` on (old content, flip states: `Pcm::prefetch_block`)
                    // while this and the next writes are simulated (a hint; no effect on results).
                    let next = b.range().start + LOG_AHEAD * 64;
                    if let Some(x) = self.nvm.get(next) {
                        crate::hostmem::prefetch(x);
                        p.prefetch_block(next as u64, true);
                    }
                }
                if let Some(r) = &mut p.retire {
                    r.cycle = at;
                }
                let old: &BlockData = self.nvm[b.range()].try_into().expect("a block");
                let cost = p.write_block_at(b.addr().0, old, d);
                debug_assert_eq!(Ns::new(cost.latency_ns), p.block_latency_ns()[cost.chunks as usize]);
                let cycles = self.pcm_write_cycles[cost.chunks as usize];
                self.ctl.write_timed(at, b, min_start, cycles)
            }
            _ => self.ctl.write_after(at, b, min_start),
        };
        self.stats.write_bytes_by_kind[kind as usize] += 64;
        if let (true, Some(data)) = (self.keep_bytes, data) {
            self.nvm[b.range()].copy_from_slice(data);
            // With the stores in the domain, a write carries a line whose content has been
            // durable since its last store (recorded then, `persist.rs`): no change to record.
            if let Some(r) = &mut self.record {
                let w = DurableWrite { started: t.started, durable: t.durable, block: b, kind, data: *data };
                match &self.stores {
                    None => r.durable.writes.push(w),
                    Some(_) if self.domain == PersistDomain::Gpf => r.device.push(w),
                    Some(_) => {}
                }
            }
        }
        t
    }

    /// Record a change of the non-volatile LLC's persistent state (Kiln; Proteus's log pending
    /// queue) that is durable at cycle `at` (its own SRAM-like write, outside the memory
    /// controller's write path; no traffic). Kept only when payloads are (crash test); a plain
    /// run skips it.
    pub fn nv_record(&mut self, b: BlockId, data: impl FnOnce(&[u8]) -> BlockData, at: Cycle) {
        if !self.keep_bytes {
            return;
        }
        debug_assert!(b.addr().0 >= self.layout.log_base + self.layout.log_bytes, "NV-LLC state only");
        let data = data(&self.nvm[b.range()]);
        self.nvm[b.range()].copy_from_slice(&data);
        if let Some(r) = &mut self.record {
            r.durable.writes.push(DurableWrite { started: at, durable: at, block: b, kind: WriteKind::NvCache, data });
        }
    }

    /// Have the controller receive this write at cycle `at` (now or later).
    pub fn defer_write(&mut self, at: Cycle, b: BlockId, kind: WriteKind, data: BlockData) {
        if at <= self.now {
            self.write_block(b, kind, data);
            return;
        }
        self.defer(at, b, kind, self.keep_bytes.then_some(data));
    }

    /// Queue a write for cycle `at` (after any queued for the same cycle); its payload is kept
    /// only with `keep_bytes`.
    fn defer(&mut self, at: Cycle, block: BlockId, kind: WriteKind, data: Option<BlockData>) {
        let d = Deferred { at, block, kind };
        self.deferred_next = self.deferred_next.min(at);
        if self.deferred.back().is_none_or(|last| last.at <= at) {
            self.deferred.push_back(d);
            if let Some(data) = data {
                self.deferred_data.push_back(data);
            }
        } else {
            let pos = self.deferred.partition_point(|d| d.at <= at);
            self.deferred.insert(pos, d);
            if let Some(data) = data {
                self.deferred_data.insert(pos, data);
            }
        }
    }

    #[inline(always)]
    fn issue_deferred(&mut self, upto: Cycle) {
        debug_assert_eq!(self.deferred_next, self.deferred.front().map_or(Cycle::MAX, |d| d.at));
        if self.deferred_next <= upto {
            self.issue_deferred_due(upto);
        }
    }

    /// Issue the deferred writes due by `upto` (out of line: most calls find none).
    #[inline(never)]
    fn issue_deferred_due(&mut self, upto: Cycle) {
        while self.deferred.front().is_some_and(|d| d.at <= upto) {
            let d = self.deferred.pop_front().expect("checked");
            let data = if self.keep_bytes { self.deferred_data.pop_front() } else { None };
            self.deferred_next = self.deferred.front().map_or(Cycle::MAX, |d| d.at);
            self.issue_write(d.at, d.block, d.kind, data.as_ref());
        }
    }

    /// A read issued by protocol hardware at the current cycle that the core does not wait for
    /// (e.g. a checkpoint re-reading a log block). Returns the cycle its data arrives.
    pub fn background_read(&mut self, b: BlockId) -> Cycle {
        self.issue_deferred(self.now);
        self.ctl.read(self.now, self.phys_block(b))
    }

    /// Let every pending write reach the device: issue deferred writes at their cycles and stall
    /// the core until all writes are complete.
    pub fn quiesce(&mut self) {
        if let Some(last) = self.deferred.back().map(|d| d.at) {
            self.issue_deferred(last);
        }
        self.now = self.now.max(self.ctl.all_writes_done());
    }

    /// `clflush`: write the line back if dirty (as `kind`) and drop it from every level. Costs
    /// an L1 look-up; the write-back is outstanding until the next [`Machine::fence`].
    ///
    /// When the core's stores are already durable ([`Machine::persist_stores`]: `eadr`, `bbb`)
    /// it is counted and does nothing: the line stays, no write, no cycle.
    pub fn clflush(&mut self, b: BlockId, kind: WriteKind) {
        self.stats.flushes += 1;
        if self.stores.is_some() {
            return;
        }
        self.now += self.hier.l1.latency;
        if self.ord.flush_cost() == FlushCost::PerLevel {
            if let Some(s3) = self.hier.llc.find(b) {
                // Beyond the L1 look-up: the dirty copy is written into each level below it.
                let c = self.flush_cycles(s3);
                self.now += c;
                self.stats.commit_flush_cycles += c;
            }
        }
        let s3 = if self.stored_at.is_empty() { Slot::NONE } else { self.hier.llc.find(b).unwrap_or(Slot::NONE) };
        let (_, dirty) = self.hier.invalidate(b);
        if dirty {
            let t = self.write_back(b, s3, kind);
            self.now = self.now.max(t.accepted);
            self.flush_pending = self.flush_pending.max(t.durable);
        } else if let Some(&d) = self.written_back.get(b.0 as usize % WRITTEN_BACK_ENTRIES) {
            // Clean here: another core may have written it back, from a clock ahead of this one.
            self.flush_pending = self.flush_pending.max(d);
        }
    }

    /// `mfence` after flushes: stall until every flushed write is durable.
    pub fn fence(&mut self) {
        if self.flush_pending > self.now {
            self.stats.fence_stall_cycles += self.flush_pending - self.now;
            self.now = self.flush_pending;
        }
    }

    /// Acknowledge the oldest unacknowledged transaction.
    #[inline(always)]
    fn ack_one(&mut self) {
        let called = self.unacked.pop_front().expect("an acknowledged transaction was issued");
        self.commit_latency.add(self.now - called);
        self.acked += 1;
    }

    /// The program calls commit (the transaction is issued).
    pub fn note_commit_called(&mut self) {
        self.unacked.push_back(self.now);
    }

    /// From now on the first `n` transactions are acknowledged durable.
    #[inline]
    pub fn ack_through(&mut self, n: u64) {
        // One transaction at a time (most protocols, most calls), not recorded: inline.
        if self.acked + 1 == n && self.record.is_none() {
            self.ack_one();
        } else {
            self.ack_through_any(n);
        }
    }

    /// [`Machine::ack_through`] of any number of transactions, recorded if recording.
    #[inline(never)]
    fn ack_through_any(&mut self, n: u64) {
        while self.acked < n {
            self.ack_one();
        }
        if let Some(r) = &mut self.record {
            r.acks.push((self.now, n));
            r.ack_cores.push(self.core as u8);
        }
    }
}

mod persist;
pub use persist::{domain_words, GpfWork, DOMAIN_READS, GPF_SAMPLE_CYCLES};
#[cfg(test)]
mod tests;
