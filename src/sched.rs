//! Concurrent transactions: N cores, each running its own transaction stream in a stackful
//! coroutine, interleaved in simulated-time order, with volatile locks in simulated memory
//! (docs/multicore.md, "Scheduler, locks and workloads").
//!
//! **Order.** The core with the earliest clock runs (ties: the lowest core id). A core runs
//! until, at the start of one of its [`Pm`] operations (load, store, begin, commit, abort,
//! compute, lock), its `(clock, id)` has passed another runnable core's; then it yields and the
//! scheduler resumes the earliest one. An operation is never split (a whole commit is one), so
//! every operation runs at a clock no later than any other runnable core's. With one core none
//! of this runs: the runner keeps its plain loop.
//!
//! **Why coroutines.** A workload's transaction is straight-line Rust code over [`Pm`]; a
//! stackful coroutine (crate `corosensei`) suspends it in the middle of its call stack at an
//! operation and resumes it there, so every workload runs unchanged on N cores, and a switch
//! costs a register save and restore (no host thread, no lock, no channel).
//!
//! **Locks** ([`Pm::lock`]) are words in volatile memory after the whole persistent layout
//! (`Machine::volatile_block0`), one 64-byte line per lock id (no false sharing), accessed
//! through the cache model: taking one is an atomic read-modify-write (a write access to its
//! line), releasing one a store to it. A waiter is blocked (not runnable) until the holder
//! releases; it then resumes at the release cycle (or its own clock, if later) and retries,
//! paying the retry's access. The model of the wait: a spin on a line held in the waiter's own
//! cache costs nothing until the release invalidates it, so a blocked core's clock only jumps
//! to the release. Strict two-phase locking: the front end releases a transaction's locks after
//! its commit or abort returns, in acquisition order; ids ascend within a transaction (checked),
//! so no cycle of waiters can form. A lock line's LLC miss reads DRAM
//! (`memory.read_latency_ns`, without occupying the NVM banks); a dirty lock line evicted from
//! the LLC is written back to DRAM by the write-back buffer: no core time, no NVM traffic, not
//! in the durable image, not checked after a crash.
//!
//! **Isolation check.** Hardware logs, flushes and persists whole lines, so two transactions in
//! flight must never write one line: a store to a line written by another core's transaction
//! in flight stops the run with one line naming the line and both cores.

use crate::machine::Machine;
use crate::pmem::Pm;
use crate::protocol::Protocol;
use crate::rng::Rng;
use crate::sim::{OracleLog, Sim, TxState};
use crate::types::{blocks_of, Addr, BlockId};
use crate::workload::Workload;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

/// Bits of a scheduling key below the clock: the core id (at most 16 cores).
const CORE_BITS: u32 = 5;
/// No lock waited for.
const NONE: u64 = u64::MAX;
/// Stack of each core's coroutine (reserved, touched only as deep as the workload goes).
const STACK_BYTES: usize = 1 << 20;

/// The order of core `c` at clock `t`: earlier clock first, then lower core id.
#[inline(always)]
fn key(t: u64, c: usize) -> u64 {
    (t << CORE_BITS) | c as u64
}

/// The operation streams of core `c` (its workload operations, its abort decisions): core 0's
/// are the single-core run's ([`crate::runner::rngs`]), the others' independent streams
/// derived from the seed and the core id.
pub fn core_rngs(seed: u64, c: usize) -> (Rng, Rng) {
    if c == 0 {
        crate::runner::rngs(seed)
    } else {
        (Rng::derive(seed, 1 + 2 * c as u64), Rng::derive(seed, 2 + 2 * c as u64))
    }
}

/// `total` transactions split over `cores` cores: the first `total % cores` one more.
pub fn split(total: u64, cores: usize) -> Vec<u64> {
    let n = cores as u64;
    (0..n).map(|c| total / n + u64::from(c < total % n)).collect()
}

/// The multi-core front-end state kept by [`Sim`] beside the running core's: the other cores'
/// transactions, the locks, the in-flight writers of each data line and the oracle's record.
pub(crate) struct Cores {
    /// The transaction states of the cores not running: core `c`'s is `parked[slot[c]]` (the
    /// running core's slot holds a stale one). A switch swaps one state, not two.
    parked: Vec<TxState>,
    parked_oracle: Vec<Option<OracleLog>>,
    slot: Vec<usize>,
    record: bool,
    /// Every committed transaction, in commit-call order (the running core's transaction in
    /// progress is in `Sim::oracle`).
    pub(crate) oracle: Option<OracleLog>,
    /// Per core, the lines its transaction in progress read (only while recording).
    reads: Vec<Vec<u64>>,
    /// Per data line `l`: `[1 +` the core whose transaction in flight wrote it, `1 +` the core
    /// holding lock `l]` (0: none). One table, so that a workload locking the lines it writes
    /// finds both in one host cache line.
    lines: Vec<[u8; 2]>,
    /// Per core, the locks its transaction holds, in acquisition order.
    held: Vec<Vec<u64>>,
    /// Per core, the lock it waits for (`NONE`: runnable).
    waiting: Vec<u64>,
    /// The earliest key of another runnable core: the running core yields once past it.
    next_key: u64,
    /// Per core not running, its key ([`key`]; `u64::MAX` when it is not runnable: finished or
    /// waiting for a lock), kept up to date so that the scheduler's choice is a minimum.
    keys: Vec<u64>,
    /// First block of the lock lines.
    lock_block0: u64,
}

impl Cores {
    pub(crate) fn new(m: &Machine, record: bool) -> Cores {
        let n = m.cores();
        let lines = m.layout.data_bytes.div_ceil(64) as usize;
        Cores {
            parked: (0..n).map(|_| TxState::new()).collect(),
            parked_oracle: (0..n).map(|_| record.then(OracleLog::default)).collect(),
            slot: (0..n).collect(),
            record,
            oracle: record.then(OracleLog::default),
            reads: vec![Vec::new(); if record { n } else { 0 }],
            lines: vec![[0; 2]; lines],
            held: vec![Vec::new(); n],
            waiting: vec![NONE; n],
            next_key: u64::MAX,
            keys: vec![u64::MAX; n],
            lock_block0: m.volatile_block0,
        }
    }

    /// Core `cur` stops running and core `c` starts: swap the transaction states.
    pub(crate) fn park(&mut self, cur: usize, c: usize, tx: &mut TxState, oracle: &mut Option<OracleLog>) {
        let s = self.slot[c];
        self.slot[cur] = s;
        std::mem::swap(tx, &mut self.parked[s]);
        if self.record {
            std::mem::swap(oracle, &mut self.parked_oracle[s]);
        }
    }

    /// The program will access `addr` soon (a host hint, [`Pm::will_access`]): fetch its line's
    /// lock and writer entry into the host's caches meanwhile.
    #[inline]
    pub(crate) fn will_access(&self, addr: Addr) {
        if let Some(x) = self.lines.get(addr.block().0 as usize) {
            crate::hostmem::prefetch(x);
        }
    }

    /// Core `c` began a transaction.
    pub(crate) fn begun(&mut self, c: usize) {
        if let Some(r) = self.reads.get_mut(c) {
            r.clear();
        }
    }

    /// Core `c` loaded `[addr, addr+len)`.
    #[inline]
    pub(crate) fn read(&mut self, c: usize, in_tx: bool, addr: Addr, len: usize) {
        if let (Some(r), true) = (self.reads.get_mut(c), in_tx) {
            r.extend(blocks_of(addr, len).map(|b| b.0));
        }
    }

    /// The running core's transaction wrote data line `b` (first time): the isolation check.
    pub(crate) fn wrote(&mut self, m: &mut Machine, b: u64) {
        let me = m.core() as u8 + 1;
        let w = &mut self.lines[b as usize][0];
        if *w != 0 && *w != me {
            let msg = format!(
                "isolation: core {} stores to line {b} (address {:#x}), written by core {}'s transaction in flight: \
                 the workload must lock every line it writes (docs/multicore.md)",
                me - 1,
                b * 64,
                *w - 1
            );
            m.fatal.get_or_insert(msg);
        } else {
            *w = me;
        }
    }

    /// Core `c` committed the transaction recorded in `pending`: append it to the record.
    pub(crate) fn committed_oracle(&mut self, c: usize, pending: &mut OracleLog) {
        let o = self.oracle.as_mut().expect("recording");
        let base = o.bytes.len() as u64;
        o.stores.extend(pending.stores.iter().map(|&(a, len, off)| (a, len, off + base)));
        o.bytes.extend_from_slice(&pending.bytes);
        o.tx_end.push(o.stores.len());
        o.tx_core.push(c as u8);
        let r = &mut self.reads[c];
        r.sort_unstable();
        r.dedup();
        o.reads.extend_from_slice(r);
        o.tx_read_end.push(o.reads.len());
        pending.stores.clear();
        pending.bytes.clear();
    }

    /// Take lock `id` for the running core: `false` if another core holds it (the running core
    /// then waits for it). A misuse stops the run (`m.fatal`) and returns `true`.
    pub(crate) fn try_lock(&mut self, m: &mut Machine, in_tx: bool, id: u64) -> bool {
        let c = m.core();
        let bad = if !in_tx {
            Some(format!("core {c} takes lock {id} outside a transaction"))
        } else if id >= self.lines.len() as u64 {
            Some(format!("core {c} takes lock {id}: allowed 0..{} (the data area's lines)", self.lines.len()))
        } else {
            match self.held[c].last() {
                Some(&l) if l == id => return true,
                Some(&l) if l > id => {
                    Some(format!("core {c} takes lock {id} after lock {l}: locks must be taken in ascending order"))
                }
                _ => None,
            }
        };
        if let Some(e) = bad {
            m.fatal.get_or_insert(e);
            return true;
        }
        // The atomic read-modify-write of the lock word.
        m.access_block(BlockId(self.lock_block0 + id), true);
        let h = &mut self.lines[id as usize][1];
        if *h == 0 {
            *h = c as u8 + 1;
            self.held[c].push(id);
            true
        } else {
            self.waiting[c] = id;
            false
        }
    }

    /// The running core's transaction has ended (its commit or abort returned): its lines are
    /// no longer in flight, and its locks are released in acquisition order (a store to each
    /// lock line), waking their waiters at the release cycle.
    pub(crate) fn ended(&mut self, m: &mut Machine, tx_blocks: &[u64]) {
        let c = m.core();
        let me = c as u8 + 1;
        for &b in tx_blocks {
            if self.lines[b as usize][0] == me {
                self.lines[b as usize][0] = 0;
            }
        }
        let mut held = std::mem::take(&mut self.held[c]);
        for &id in &held {
            m.access_block(BlockId(self.lock_block0 + id), true);
            self.lines[id as usize][1] = 0;
            for w in 0..self.waiting.len() {
                if self.waiting[w] == id {
                    self.waiting[w] = NONE;
                    m.advance_core_to(w, m.now);
                    self.keys[w] = key(m.clock_of(w), w);
                    self.next_key = self.next_key.min(self.keys[w]);
                }
            }
        }
        held.clear();
        self.held[c] = held;
    }
}

/// The [`Pm`] a core's workload runs against: the shared [`Sim`], yielding to the scheduler
/// before an operation once the core is no longer the earliest.
struct CorePm<'y, P: Protocol> {
    /// The one simulator, shared by every core's coroutine and the scheduler; only the running
    /// one touches it, and no reference to it lives across a suspension.
    sim: *mut Sim<P>,
    y: &'y Yielder<(), ()>,
    core: usize,
}

impl<P: Protocol> CorePm<'_, P> {
    #[inline(always)]
    fn sim(&mut self) -> &mut Sim<P> {
        // SAFETY: see the field; the scheduler holds no reference while a coroutine runs.
        unsafe { &mut *self.sim }
    }

    /// Yield to the scheduler if another runnable core is now earlier than this one.
    #[inline(always)]
    fn turn(&mut self) {
        let core = self.core;
        let s = self.sim();
        let next = s.cores.as_ref().map_or(u64::MAX, |c| c.next_key);
        if key(s.m.now, core) > next {
            self.y.suspend(());
        }
    }
}

impl<P: Protocol> Pm for CorePm<'_, P> {
    fn begin(&mut self) {
        self.turn();
        self.sim().begin();
    }
    fn commit(&mut self) {
        self.turn();
        self.sim().commit();
    }
    fn abort(&mut self) {
        self.turn();
        self.sim().abort();
    }
    #[inline]
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        self.turn();
        self.sim().load(addr, buf);
    }
    #[inline]
    fn store(&mut self, addr: Addr, data: &[u8]) {
        self.turn();
        self.sim().store(addr, data);
    }
    #[inline]
    fn compute(&mut self, cycles: u64) {
        self.turn();
        self.sim().compute(cycles);
    }
    fn last_durable_tx(&self) -> u64 {
        // SAFETY: as in `sim`.
        unsafe { &*self.sim }.m.acked
    }
    #[inline]
    fn concurrent(&self) -> bool {
        true
    }
    fn lock(&mut self, id: u64) {
        loop {
            self.turn();
            if self.sim().try_lock(id) {
                return;
            }
            // Blocked: not runnable until the holder releases the lock.
            self.y.suspend(());
        }
    }
    #[inline]
    fn will_access(&mut self, addr: Addr) {
        let s = self.sim();
        s.will_access(addr);
        if let Some(cs) = &s.cores {
            cs.will_access(addr);
        }
    }
}

/// Run `txs[c]` transactions on each core `c` (its workload driver `wls[c]`, its streams
/// `rngs[c]`), interleaved in simulated-time order, until every core has run its share. `Err`
/// is a one-line message (a fatal condition of the model or an isolation or locking error).
pub fn run<P: Protocol>(
    sim: &mut Sim<P>,
    wls: &mut [Workload],
    rngs: &mut [(Rng, Rng)],
    txs: &[u64],
    abort_rate: f64,
) -> Result<(), String> {
    let n = sim.m.cores();
    assert!(n > 1 && wls.len() == n && rngs.len() == n && txs.len() == n);
    // Every core is runnable at the start of a phase.
    {
        let cs = sim.cores.as_mut().expect("several cores");
        for c in 0..n {
            cs.keys[c] = if cs.waiting[c] == NONE { key(sim.m.clock_of(c), c) } else { u64::MAX };
        }
    }
    let ptr: *mut Sim<P> = sim;
    // Declared after the borrowed driver state, so dropped (unwound, if unfinished) before it.
    let mut coros = Vec::with_capacity(n);
    for (c, (wl, (ops, aborts))) in wls.iter_mut().zip(rngs.iter_mut()).enumerate() {
        let count = txs[c];
        let body = move |y: &Yielder<(), ()>, ()| {
            let mut pm = CorePm { sim: ptr, y, core: c };
            for _ in 0..count {
                let abort = abort_rate > 0.0 && aborts.chance(abort_rate);
                wl.run_tx(&mut pm, ops, abort);
            }
        };
        let stack = DefaultStack::new(STACK_BYTES).map_err(|e| format!("a core's coroutine stack: {e}"))?;
        // SAFETY: `body` borrows `wls`, `rngs` and `*sim`, which outlive `coros` (dropped at the
        // end of this function, before them; never forgotten).
        coros.push(unsafe { Coroutine::with_stack_unchecked(stack, body) });
    }
    let mut done = vec![false; n];
    loop {
        // SAFETY: no coroutine is running; the reference ends before the next resume.
        let s = unsafe { &mut *ptr };
        let cs = s.cores.as_mut().expect("several cores");
        let (mut first, mut second) = (u64::MAX, u64::MAX);
        for &k in &cs.keys {
            if k < first {
                (first, second) = (k, first);
            } else if k < second {
                second = k;
            }
        }
        if first == u64::MAX {
            if done.iter().all(|&d| d) {
                return Ok(());
            }
            let waits: Vec<String> =
                (0..n).filter(|&c| !done[c]).map(|c| format!("core {c} on lock {}", cs.waiting[c])).collect();
            return Err(format!("every core waits for a lock: {} (a lock not released)", waits.join(", ")));
        }
        let c = (first & ((1 << CORE_BITS) - 1)) as usize;
        cs.next_key = second;
        s.switch_core(c);
        let finished = matches!(coros[c].resume(()), CoroutineResult::Return(()));
        done[c] |= finished;
        // SAFETY: as above.
        let s = unsafe { &mut *ptr };
        if let Some(e) = s.m.fatal.take() {
            return Err(e);
        }
        let cs = s.cores.as_mut().expect("several cores");
        cs.keys[c] = if finished || cs.waiting[c] != NONE { u64::MAX } else { key(s.m.now, c) };
    }
}

/// Bring every core's clock to the latest one (the end of a phase, e.g. the warm-up) and make
/// core 0 the running core; returns that cycle.
pub fn barrier<P: Protocol>(sim: &mut Sim<P>) -> u64 {
    let end = last_clock(&sim.m);
    for c in 0..sim.m.cores() {
        sim.m.advance_core_to(c, end);
    }
    sim.switch_core(0);
    end
}

/// The latest clock of any core (when the last core finished).
pub fn last_clock(m: &Machine) -> u64 {
    (0..m.cores()).map(|c| m.clock_of(c)).max().unwrap_or(0)
}

#[cfg(test)]
mod tests;
