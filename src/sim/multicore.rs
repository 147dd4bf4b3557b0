//! The multi-core front-end state of [`super::Sim`] (docs/multicore.md, "Scheduler, locks and
//! workloads"): the other cores' transactions, the lock words, the isolation check and the
//! oracle's multi-core record. The scheduler that interleaves the cores is [`crate::sched`].

use super::{OracleLog, TxState};
use crate::machine::Machine;
use crate::types::{blocks_of, Addr, BlockId, Cycle};

/// Bits of a scheduling key below the clock: the core id (at most 16 cores).
const CORE_BITS: u32 = 5;
/// No lock waited for.
const NONE: u64 = u64::MAX;
/// The order of core `c` at clock `t`: earlier clock first, then lower core id.
#[inline(always)]
pub(crate) fn key(t: Cycle, c: usize) -> u64 {
    (t.get() << CORE_BITS) | c as u64
}

/// The multi-core front-end state kept by [`super::Sim`] beside the running core's: the other cores'
/// transactions, the locks, the in-flight writers of each data line and the oracle's record.
pub(crate) struct Cores {
    /// The transaction states of the cores not running: core `c`'s is `parked[slot[c]]` (the
    /// running core's slot holds a stale one). A switch swaps one boxed state, not two: boxed,
    /// as `Sim::tx` is, so that the swap moves a pointer (see there).
    #[allow(clippy::vec_box)]
    parked: Vec<Box<TxState>>,
    parked_oracle: Vec<Option<OracleLog>>,
    slot: Vec<usize>,
    record: bool,
    /// Every committed transaction, in commit-call order (the running core's transaction in
    /// progress is in `Sim::oracle`).
    oracle: Option<OracleLog>,
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
    /// Cores waiting for a lock (entries of `waiting` other than `NONE`): a release looks for
    /// waiters only when there are some.
    blocked: usize,
    /// The earliest key of another runnable core: the running core yields once past it.
    next_key: u64,
    /// Per core not running, its key ([`key`]; `u64::MAX` when it is not runnable: finished or
    /// waiting for a lock), kept up to date so that the scheduler's choice is a minimum.
    keys: Vec<u64>,
    /// Per lock, the cycle of its last release: a core that takes it later in host order but at
    /// an earlier clock (it ran behind the releasing core's commit) first waits until then, so
    /// that no two holds of a lock overlap in simulated time.
    released_at: Vec<Cycle>,
    /// First block of the lock lines.
    lock_block0: u64,
}

impl Cores {
    pub(crate) fn new(m: &Machine, record: bool) -> Cores {
        let n = m.cores();
        let lines = m.layout.data_bytes.div_ceil(64) as usize;
        Cores {
            parked: (0..n).map(|_| Box::new(TxState::new())).collect(),
            parked_oracle: (0..n).map(|_| record.then(OracleLog::default)).collect(),
            slot: (0..n).collect(),
            record,
            oracle: record.then(OracleLog::default),
            reads: vec![Vec::new(); if record { n } else { 0 }],
            lines: vec![[0; 2]; lines],
            held: vec![Vec::new(); n],
            waiting: vec![NONE; n],
            blocked: 0,
            next_key: u64::MAX,
            keys: vec![u64::MAX; n],
            released_at: vec![Cycle::ZERO; lines],
            lock_block0: m.volatile_block0,
        }
    }

    /// The start of a phase of the scheduler: every core not waiting for a lock is runnable at
    /// its clock. Returns the key of the running core (`u64::MAX` if it waits).
    pub(crate) fn start_phase(&mut self, m: &Machine) -> u64 {
        for c in 0..self.keys.len() {
            self.keys[c] = if self.waiting[c] == NONE { key(m.clock_of(c), c) } else { u64::MAX };
        }
        self.keys[m.core()]
    }

    /// The earliest key of another runnable core: the running core yields once its own key is
    /// past it.
    #[inline(always)]
    pub(crate) fn next_key(&self) -> u64 {
        self.next_key
    }

    /// Core `c` stops running with key `k` (`u64::MAX`: not runnable, as it waits for a lock or
    /// has finished): the earliest runnable core, which will yield at the second earliest key
    /// ([`Cores::next_key`]); `None` if no core is runnable.
    #[inline(always)]
    pub(crate) fn earliest(&mut self, c: usize, k: u64) -> Option<usize> {
        // The keys as a slice held here: the store below then cannot change its length, which
        // the search would otherwise read again.
        let keys = &mut self.keys[..];
        keys[c] = k;
        // The two smallest keys, without a branch on the keys (conditional moves: which core is
        // earliest changes from switch to switch, and a branch on it mispredicted).
        let (mut first, mut second) = (u64::MAX, u64::MAX);
        for &k in keys.iter() {
            second = second.min(first.max(k));
            first = first.min(k);
        }
        if first == u64::MAX {
            return None;
        }
        self.next_key = second;
        Some((first & ((1 << CORE_BITS) - 1)) as usize)
    }

    /// The cores waiting for a lock, as `core C on lock L` (for the message when every core
    /// waits).
    pub(crate) fn waits(&self) -> Vec<String> {
        (0..self.waiting.len())
            .filter(|&c| self.waiting[c] != NONE)
            .map(|c| format!("core {c} on lock {}", self.waiting[c]))
            .collect()
    }

    /// The oracle's record of every committed transaction.
    pub(crate) fn take_oracle(&mut self) -> Option<OracleLog> {
        self.oracle.take()
    }

    /// Core `cur` stops running and core `c` starts: swap the transaction states.
    pub(crate) fn park(&mut self, cur: usize, c: usize, tx: &mut Box<TxState>, oracle: &mut Option<OracleLog>) {
        let s = self.slot[c];
        self.slot[cur] = s;
        std::mem::swap(tx, &mut self.parked[s]);
        if self.record {
            std::mem::swap(oracle, &mut self.parked_oracle[s]);
        }
    }

    /// The program will access `addr` soon (a host hint, [`Pm::will_access`]): fetch its line's
    /// lock and writer entry and its lock's last-release cycle into the host's caches meanwhile.
    #[inline]
    pub(crate) fn will_access(&self, addr: Addr) {
        let l = addr.block().0 as usize;
        if let (Some(x), Some(r)) = (self.lines.get(l), self.released_at.get(l)) {
            crate::hostmem::prefetch(x);
            crate::hostmem::prefetch(r);
        }
    }

    /// Host bytes of the oracle's record kept here (the committed transactions, and the parked
    /// cores' transactions in progress).
    pub(crate) fn oracle_heap_bytes(&self) -> u64 {
        self.oracle.iter().chain(self.parked_oracle.iter().flatten()).map(|o| o.heap_bytes()).sum()
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
        // The lock word reads free no earlier than its last release.
        m.wait_until(self.released_at[id as usize]);
        // The atomic read-modify-write of the lock word.
        m.access_block(BlockId(self.lock_block0 + id), true);
        let h = &mut self.lines[id as usize][1];
        if *h == 0 {
            *h = c as u8 + 1;
            self.held[c].push(id);
            true
        } else {
            self.waiting[c] = id;
            self.blocked += 1;
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
            self.released_at[id as usize] = m.now;
            if self.blocked > 0 {
                self.wake(m, id);
            }
        }
        held.clear();
        self.held[c] = held;
    }

    /// Lock `id` was just released: its waiters become runnable at the release cycle.
    fn wake(&mut self, m: &mut Machine, id: u64) {
        for w in 0..self.waiting.len() {
            if self.waiting[w] == id {
                self.waiting[w] = NONE;
                self.blocked -= 1;
                m.advance_core_to(w, m.now);
                self.keys[w] = key(m.clock_of(w), w);
                self.next_key = self.next_key.min(self.keys[w]);
            }
        }
    }
}

/// The other cores as [`super::Sim`] sees them: nothing with one core, where every hook below
/// is a no-op the compiler sees as one test of a pointer, and the [`Cores`] with several. The
/// one place that tells one core from several on the simulator's side.
pub(crate) struct OtherCores(Option<Box<Cores>>);

impl OtherCores {
    pub(crate) fn new(m: &Machine, record: bool) -> OtherCores {
        OtherCores((m.cores() > 1).then(|| Box::new(Cores::new(m, record))))
    }

    /// More than one core?
    #[inline(always)]
    pub(crate) fn any(&self) -> bool {
        self.0.is_some()
    }

    /// The cores' state (only with more than one core: the scheduler's and the locks' callers).
    #[inline(always)]
    pub(crate) fn get(&mut self) -> &mut Cores {
        self.0.as_deref_mut().expect("more than one core")
    }

    /// [`Cores::begun`].
    #[inline(always)]
    pub(crate) fn begun(&mut self, c: usize) {
        if let Some(cs) = &mut self.0 {
            cs.begun(c);
        }
    }

    /// [`Cores::read`].
    #[inline(always)]
    pub(crate) fn read(&mut self, c: usize, in_tx: bool, addr: Addr, len: usize) {
        if let Some(cs) = &mut self.0 {
            cs.read(c, in_tx, addr, len);
        }
    }

    /// [`Cores::wrote`].
    #[inline(always)]
    pub(crate) fn wrote(&mut self, m: &mut Machine, b: u64) {
        if let Some(cs) = &mut self.0 {
            cs.wrote(m, b);
        }
    }

    /// [`Cores::ended`].
    #[inline(always)]
    pub(crate) fn ended(&mut self, m: &mut Machine, tx_blocks: &[u64]) {
        if let Some(cs) = &mut self.0 {
            cs.ended(m, tx_blocks);
        }
    }

    /// [`Cores::committed_oracle`]; `false` with one core, whose record is `pending` itself.
    #[inline(always)]
    pub(crate) fn committed_oracle(&mut self, c: usize, pending: &mut OracleLog) -> bool {
        match &mut self.0 {
            Some(cs) => {
                cs.committed_oracle(c, pending);
                true
            }
            None => false,
        }
    }

    /// The earliest key of another runnable core (`u64::MAX` with one core: it never yields).
    #[inline(always)]
    pub(crate) fn next_key(&self) -> u64 {
        self.0.as_ref().map_or(u64::MAX, |cs| cs.next_key())
    }

    /// [`Cores::will_access`].
    #[inline(always)]
    pub(crate) fn will_access(&self, addr: Addr) {
        if let Some(cs) = &self.0 {
            cs.will_access(addr);
        }
    }

    /// Host bytes of the oracle's record kept by the other cores (0 with one core).
    pub(crate) fn oracle_heap_bytes(&self) -> u64 {
        self.0.as_ref().map_or(0, |cs| cs.oracle_heap_bytes())
    }
}
