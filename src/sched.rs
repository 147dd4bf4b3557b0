//! Concurrent transactions: N cores, each running its own transaction stream in a stackful
//! coroutine, interleaved in simulated-time order, with volatile locks in simulated memory
//! (docs/multicore.md, "Scheduler, locks and workloads").
//!
//! **Order.** The core with the earliest clock runs (ties: the lowest core id). A core runs
//! until, at the start of one of its [`Pm`] operations (load, store, begin, commit, abort,
//! lock), its `(clock, id)` has passed another runnable core's; then it yields and the
//! earliest one resumes. An operation is never split (a whole commit is one), so every
//! operation runs at a clock no later than any other runnable core's. A compute is the
//! exception: it only advances the core's own clock, which no other core reads while this one
//! is runnable (a clock is read across cores only to wake a lock's waiter), so it commutes with
//! every other core's operation and runs at once; the order of every other operation, and so
//! every result, is the same as if it had waited its turn, and a switch that would have come
//! back to this core only to compute is saved. With one core none of this runs: the runner
//! keeps its plain loop.
//!
//! **Hand-over.** The yielding core itself chooses its successor and makes it the running core
//! (`hand_over`: its key, the earliest-core search, the state switch), then suspends naming
//! it; the scheduler loop only resumes the core named. A switch thus costs one search over the
//! cores' keys, one state switch and two coroutine switches (corosensei coroutines are
//! asymmetric: a coroutine resumes only from the loop), with no state re-read in the loop.
//!
//! **Balanced returns.** A resume is a call from the scheduler loop into the coroutine and a
//! suspension a return to the loop, so the host's return-address predictor stays right only if
//! the resumed core returns from no frame it was suspended in: a suspension inside a called
//! `CorePm` operation made both the return out of that operation after the resume and the
//! next suspension's return to the loop mispredict, two flushes per switch. So the operations'
//! turn and suspension are inlined into the workload's code, and the workload's transaction
//! into the coroutine body ([`Workload::run_tx_inline`]); the simulator's work is an
//! out-of-line call that returns before any suspension (a workload whose operations lie in
//! its own nested functions, the trees', still returns across some).
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
//! The lock table, the isolation check and the oracle's multi-core record live with the front
//! end, in [`crate::sim`] (`sim/multicore.rs`).
//!
//! **Isolation check.** Hardware logs, flushes and persists whole lines, so two transactions in
//! flight must never write one line: a store to a line written by another core's transaction
//! in flight stops the run with one line naming the line and both cores.

use crate::machine::Machine;
use crate::protocol::Protocol;
use crate::rng::Rng;
use crate::sim::multicore::key;
use crate::sim::Sim;
use crate::types::{Addr, Cycle};
use crate::workload::Pm;
use crate::workload::Workload;
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

/// Stack of each core's coroutine (reserved, touched only as deep as the workload goes).
const STACK_BYTES: usize = 1 << 20;

/// `total` transactions split over `cores` cores: the first `total % cores` one more.
pub fn split(total: u64, cores: usize) -> Vec<u64> {
    let n = cores as u64;
    (0..n).map(|c| total / n + u64::from(c < total % n)).collect()
}

/// The [`Pm`] a core's workload runs against: the shared [`Sim`], yielding to the scheduler
/// before an operation once the core is no longer the earliest.
struct CorePm<'y, P: Protocol> {
    /// The one simulator, shared by every core's coroutine and the scheduler; only the running
    /// one touches it, and no reference to it lives across a suspension.
    sim: *mut Sim<P>,
    y: &'y Yielder<(), usize>,
    core: usize,
}

impl<P: Protocol> CorePm<'_, P> {
    #[inline(always)]
    fn sim(&mut self) -> &mut Sim<P> {
        // SAFETY: see the field; the scheduler holds no reference while a coroutine runs.
        unsafe { &mut *self.sim }
    }

    /// Hand over to the earliest core if another runnable core is now earlier than this one.
    /// Inlined into the workload's code with its suspension (module docs, "Balanced returns").
    #[inline(always)]
    fn turn(&mut self) {
        let core = self.core;
        let s = self.sim();
        let next = s.next_key();
        let k = key(s.m.now, core);
        if k > next {
            let c = hand_over(s, core, k);
            self.y.suspend(c);
        }
    }

    /// Hand the scheduler a fault of the access just made ([`crate::sim::PROGRAM_FAULT`]) at
    /// once: the workload must not go on with the bytes it did not get. The scheduler stops the
    /// run and never resumes this core.
    #[inline(always)]
    fn stop_on_fault(&mut self) {
        if self.sim().m.fatal.is_some() {
            self.y.suspend(STOP);
        }
    }
}

// The operations of `Sim`, out of line: `CorePm`'s operations are inlined into the workload's
// code (so that every suspension lies in the workload's own frame, module docs) and call these.

#[inline(never)]
fn sim_begin<P: Protocol>(s: &mut Sim<P>) {
    s.begin();
}
#[inline(never)]
fn sim_commit<P: Protocol>(s: &mut Sim<P>) {
    s.commit();
}
#[inline(never)]
fn sim_abort<P: Protocol>(s: &mut Sim<P>) {
    s.abort();
}
#[inline(never)]
fn sim_load<P: Protocol>(s: &mut Sim<P>, addr: Addr, buf: &mut [u8]) {
    s.load(addr, buf);
}
#[inline(never)]
fn sim_store<P: Protocol>(s: &mut Sim<P>, addr: Addr, data: &[u8]) {
    s.store(addr, data);
}

impl<P: Protocol> Pm for CorePm<'_, P> {
    #[inline(always)]
    fn begin(&mut self) {
        self.turn();
        sim_begin(self.sim());
    }
    #[inline(always)]
    fn commit(&mut self) {
        self.turn();
        sim_commit(self.sim());
    }
    #[inline(always)]
    fn abort(&mut self) {
        self.turn();
        sim_abort(self.sim());
    }
    #[inline(always)]
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        self.turn();
        sim_load(self.sim(), addr, buf);
        self.stop_on_fault();
    }
    #[inline(always)]
    fn store(&mut self, addr: Addr, data: &[u8]) {
        self.turn();
        sim_store(self.sim(), addr, data);
        self.stop_on_fault();
    }
    /// No turn: a compute only advances this core's own clock, which no other core reads while
    /// this one is runnable, so it commutes with every other core's operation (module docs).
    /// Out of line: inlined, it shifted the single-core hot code, whose wall time then measured
    /// about 10 % lower at identical instruction counts.
    #[inline(never)]
    fn compute(&mut self, cycles: u64) {
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
    #[inline]
    fn core(&self) -> usize {
        self.core
    }
    #[inline(always)]
    fn lock(&mut self, id: u64) {
        loop {
            self.turn();
            if self.sim().try_lock(id) {
                return;
            }
            // Blocked: not runnable until the holder releases the lock.
            let core = self.core;
            let c = hand_over(self.sim(), core, u64::MAX);
            self.y.suspend(c);
        }
    }
    #[inline]
    fn will_access(&mut self, addr: Addr) {
        self.sim().will_access_shared(addr);
    }
    // The 32-bit forms inlined like the operations they call (module docs); the 64-bit forms
    // are the trait's, inlined already.
    #[inline(always)]
    fn load_u32(&mut self, addr: Addr) -> u32 {
        let mut b = [0u8; 4];
        self.load(addr, &mut b);
        u32::from_le_bytes(b)
    }
    #[inline(always)]
    fn store_u32(&mut self, addr: Addr, v: u32) {
        self.store(addr, &v.to_le_bytes());
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
    // Every core is runnable at the start of a phase; the earliest runs first.
    let k = sim.start_phase();
    let running = sim.m.core();
    let first = hand_over(sim, running, k);
    let ptr: *mut Sim<P> = sim;
    // Declared after the borrowed driver state, so dropped (unwound, if unfinished) before it.
    let mut coros = Vec::with_capacity(n);
    for (c, (wl, (ops, aborts))) in wls.iter_mut().zip(rngs.iter_mut()).enumerate() {
        let count = txs[c];
        let body = move |y: &Yielder<(), usize>, ()| {
            let mut pm = CorePm { sim: ptr, y, core: c };
            for _ in 0..count {
                let abort = crate::rng::next_abort(aborts, abort_rate);
                wl.run_tx_inline(&mut pm, ops, abort);
                // A replayed trace: this core's records have ended, or are bad.
                match wl.more() {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        pm.sim().m.fatal.get_or_insert(e);
                        break;
                    }
                }
            }
        };
        let stack = DefaultStack::new(STACK_BYTES).map_err(|e| format!("a core's coroutine stack: {e}"))?;
        // SAFETY: `body` borrows `wls`, `rngs` and `*sim`, which outlive `coros` (dropped at the
        // end of this function, before them; never forgotten).
        coros.push(unsafe { Coroutine::with_stack_unchecked(stack, body) });
    }
    // Cores whose coroutine has not returned.
    let mut left = n;
    let mut c = first;
    loop {
        if c == STOP {
            // SAFETY: no coroutine is running; the reference ends before the next resume.
            let s = unsafe { &mut *ptr };
            if let Some(e) = s.m.fatal.take() {
                return Err(e);
            }
            if left == 0 {
                return Ok(());
            }
            // No core runnable, some not finished: each of those waits for a lock.
            let waits = s.waits();
            return Err(format!("every core waits for a lock: {} (a lock not released)", waits.join(", ")));
        }
        c = match coros[c].resume(()) {
            CoroutineResult::Yield(next) => next,
            CoroutineResult::Return(()) => {
                left -= 1;
                // SAFETY: as above.
                let s = unsafe { &mut *ptr };
                if s.m.fatal.is_some() {
                    STOP
                } else {
                    hand_over(s, c, u64::MAX)
                }
            }
        };
    }
}

/// No core to resume: the run stops (a fault, every core finished, or every core waiting).
const STOP: usize = usize::MAX;

/// Core `c` stops running with key `k` (`u64::MAX`: not runnable, as it waits for a lock or has
/// finished): make the earliest runnable core the running one, tell it the key at which it
/// yields (`Cores::next_key`, the second earliest), and return it; [`STOP`] if no core is
/// runnable or the run has failed (`Machine::fatal`). Out of line: it is called from every
/// operation's site in the workload's code, and the call returns before the suspension.
#[inline(never)]
fn hand_over<P: Protocol>(s: &mut Sim<P>, c: usize, k: u64) -> usize {
    match s.earliest(c, k) {
        Some(next) if s.m.fatal.is_none() => {
            s.switch_core(next);
            next
        }
        _ => STOP,
    }
}

/// Bring every core's clock to the latest one (the end of a phase, e.g. the warm-up) and make
/// core 0 the running core; returns that cycle.
pub fn barrier<P: Protocol>(sim: &mut Sim<P>) -> Cycle {
    let end = last_clock(&sim.m);
    for c in 0..sim.m.cores() {
        sim.m.advance_core_to(c, end);
    }
    sim.switch_core(0);
    end
}

/// The latest clock of any core (when the last core finished).
pub fn last_clock(m: &Machine) -> Cycle {
    (0..m.cores()).map(|c| m.clock_of(c)).max().unwrap_or(Cycle::ZERO)
}

#[cfg(test)]
mod tests;
