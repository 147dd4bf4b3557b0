//! The simulator back end of the workload interface: [`Sim`] implements [`Pm`] over a
//! [`Machine`] and a [`Protocol`].
//!
//! It owns what is protocol-independent: the program's view of memory (stores update
//! `m.arch` at once), undo for aborts, the P-Set count, and the oracle's record of each
//! transaction's stores. That record is taken here, from the workload's own writes, before any
//! protocol sees them: the crash checker's oracle never depends on the protocol under test.

pub(crate) mod multicore;

use crate::machine::Machine;
use crate::protocol::Protocol;
use crate::types::{blocks_of, Addr, Cycle};
use crate::workload::Pm;

/// How the one-line error starts when the simulated program loads or stores outside the data
/// area: a pointer it followed was bad. A correct machine never gives a workload such a pointer;
/// a broken coherence protocol does (`--inject-bug lost-invalidation`: a core reads a stale
/// pointer to a node since freed or moved and walks off the data area), and the crash checker
/// counts the fault as that bug caught ([`crate::crash::check`]).
pub const PROGRAM_FAULT: &str = "the simulated program accessed memory outside the data area";

/// Stop the run: the running core accessed `n` bytes at `addr`, outside the data area.
#[cold]
#[inline(never)]
fn program_fault(m: &mut Machine, what: &str, addr: Addr, n: usize) {
    let (core, data) = (m.core(), m.layout.data_bytes);
    m.fatal.get_or_insert_with(|| {
        format!("{PROGRAM_FAULT}: core {core} {what} {n} bytes at {:#x}, past the {data}-byte data area", addr.0)
    });
}

/// The stores of every committed transaction, in commit order (the oracle's input).
#[derive(Default, Clone)]
pub struct OracleLog {
    /// (address, length, offset into `bytes`) per store.
    pub stores: Vec<(u64, u32, u64)>,
    pub bytes: Vec<u8>,
    /// `tx_end[k]` = number of stores of the first `k+1` committed transactions.
    pub tx_end: Vec<usize>,
    /// With more than one core (empty with one): per committed transaction, its core.
    pub tx_core: Vec<u8>,
    /// With more than one core: the lines (block numbers) each committed transaction read, for
    /// dependence (docs/multicore.md); `tx_read_end[k]` = number of entries of the first `k+1`.
    pub reads: Vec<u64>,
    pub tx_read_end: Vec<usize>,
}

impl OracleLog {
    /// Number of committed transactions recorded.
    pub fn txs(&self) -> usize {
        self.tx_end.len()
    }

    /// The stores of committed transaction `k` (0-based).
    pub fn tx_stores(&self, k: usize) -> impl Iterator<Item = (u64, &[u8])> {
        let start = if k == 0 { 0 } else { self.tx_end[k - 1] };
        self.stores[start..self.tx_end[k]]
            .iter()
            .map(|&(a, len, off)| (a, &self.bytes[off as usize..off as usize + len as usize]))
    }

    /// The data blocks transaction `k` stores to (a block once per store that touches it).
    pub fn tx_blocks(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        self.tx_stores(k).flat_map(|(a, bytes)| blocks_of(Addr(a), bytes.len()).map(|b| b.0 as usize))
    }

    /// Host bytes the record holds (its vectors' capacities).
    pub fn heap_bytes(&self) -> u64 {
        fn of<T>(v: &Vec<T>) -> u64 {
            (v.capacity() * std::mem::size_of::<T>()) as u64
        }
        of(&self.stores)
            + of(&self.bytes)
            + of(&self.tx_end)
            + of(&self.tx_core)
            + of(&self.reads)
            + of(&self.tx_read_end)
    }

    /// Apply transaction `k` to a data area.
    pub fn apply_tx(&self, k: usize, data: &mut [u8]) {
        for (a, bytes) in self.tx_stores(k) {
            data[a as usize..a as usize + bytes.len()].copy_from_slice(bytes);
        }
    }
}

/// How much host memory a recorded run (`crashtest`) may hold in its record for the crash
/// checker: the whole run is kept (every durable write, every committed transaction's stores),
/// about a kilobyte to tens of kilobytes per transaction, so a long enough run would exhaust the
/// host and be killed without a word. Checked every [`RecordBudget::EVERY_TXS`] commits: the
/// record so far, and its projection to the planned length at the rate so far.
#[derive(Copy, Clone, Debug)]
pub struct RecordBudget {
    /// Bytes the record may hold.
    pub limit: u64,
    /// Transactions the run will attempt (warm-up included; `u64::MAX` if unknown).
    pub planned_txs: u64,
}

impl RecordBudget {
    pub const EVERY_TXS: u64 = 4096;

    /// Environment variable that sets [`RecordBudget::limit`] in bytes (by default half of the
    /// memory the host has available when the run starts: the checker needs room of its own).
    pub const ENV: &'static str = "LOCSIM_RECORD_MEMORY";

    /// The budget of a run of `planned_txs` transactions on this host; `None` if the host does
    /// not say how much memory it has and no limit is set.
    pub fn of_host(planned_txs: u64) -> Result<Option<RecordBudget>, String> {
        let limit = match std::env::var(Self::ENV) {
            Ok(v) => Some(
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("{}={v}: expected a number of bytes, 1 to {}", Self::ENV, u64::MAX))?,
            ),
            Err(_) => crate::hostmem::available_bytes().map(|a| a / 2),
        };
        Ok(limit.map(|limit| RecordBudget { limit, planned_txs }))
    }

    /// The error that stops a run whose record holds `held` bytes after `done` committed
    /// transactions, if it is over the limit now or would be by the planned end.
    pub fn check(&self, held: u64, done: u64) -> Option<String> {
        let per_tx = held / done.max(1);
        let projected = per_tx.saturating_mul(self.planned_txs);
        if held <= self.limit && (self.planned_txs == u64::MAX || projected <= self.limit) {
            return None;
        }
        let need = match self.planned_txs {
            u64::MAX => format!("holds {} after {done} transactions", gb(held)),
            n => format!("would hold about {} for {n} transactions", gb(projected)),
        };
        Some(format!(
            "the crash checker's record of this run {need} ({per_tx} bytes per transaction), more than the {} \
             this host allows it ({} = bytes; default: half the host's available memory): lower --txs to about \
             {} transactions in all, warm-up included",
            gb(self.limit),
            Self::ENV,
            self.limit / per_tx.max(1)
        ))
    }
}

/// `bytes` in MB below a gigabyte, else in GB.
fn gb(bytes: u64) -> String {
    match bytes < 1_000_000_000 {
        true => format!("{:.1} MB", bytes as f64 / 1e6),
        false => format!("{:.1} GB", bytes as f64 / 1e9),
    }
}

/// Counters kept by the front end.
#[derive(Clone, Debug, Default)]
pub struct FrontStats {
    pub txs_committed: u64,
    pub txs_aborted: u64,
    pub program_write_bytes: u64,
    /// Sum over committed transactions of distinct blocks written.
    pub pset_blocks: u64,
}

/// Simulated persistent memory under protocol `P`.
pub struct Sim<P: Protocol> {
    pub m: Machine,
    pub p: P,
    /// The oracle's record; with several cores, the running core's transaction in progress
    /// (the committed ones are in `multicore::Cores`; [`Sim::take_oracle`] gives them).
    pub oracle: Option<OracleLog>,
    pub stats: FrontStats,
    /// The running core's transaction state (the other cores' wait in `cores`). Boxed, so that
    /// a core switch exchanges one pointer ([`multicore::Cores::park`]) rather than the 104-byte
    /// state: that exchange, in 16-byte moves whose first loads overlap the 8-byte stores the
    /// transaction had just made to the same fields (a `Vec`'s length; a store the host cannot
    /// forward to a wider load), was 4 % of a 4-core SPS run's host time. The single-core path
    /// reaches the state through the pointer (host instructions per access within 0.3 %).
    pub(crate) tx: Box<TxState>,
    /// With more than one core: the other cores' transaction state, the locks and the
    /// isolation check ([`crate::sched`]); nothing with one core.
    others: multicore::OtherCores,
    /// While the warm-up looks for steady state: the count of the LLC's dirty lines taken
    /// partway through it ([`DirtyProbe`]; `crate::runner`).
    pub probe: Option<DirtyProbe>,
    /// A recorded run's host-memory guard ([`RecordBudget`]), if the runner set one.
    pub record_budget: Option<RecordBudget>,
}

/// Counts the transactions that end (on every core) and, when the `at`-th ends, takes the dirty
/// lines of the caches and the bytes written to memory so far: where the warm-up stood one
/// window before its end, without splitting it (with several cores a phase boundary would
/// change the interleaving).
pub struct DirtyProbe {
    pub at: u64,
    pub ended: u64,
    /// Dirty line frames ([`crate::cache::Hierarchy::dirty_lines`]) and memory bytes written.
    pub seen: Option<(usize, u64)>,
}

impl DirtyProbe {
    /// Dirty line frames and memory bytes written of `m` now.
    pub fn look(m: &Machine) -> (usize, u64) {
        (m.hier.dirty_lines(), m.stats().mem_write_bytes())
    }
}

/// One core's transaction in progress.
#[derive(Default)]
pub(crate) struct TxState {
    pub(crate) in_tx: bool,
    written: Vec<(Addr, u32)>,
    undo_bytes: Vec<u8>,
    oracle_tx_start: (usize, usize),
    /// Distinct blocks written by the running transaction (for the P-Set), in the order first
    /// written. A linear scan is cheaper than any host-memory structure for the few blocks most
    /// transactions write; past `PSET_SCAN` blocks they are marked in `tx_marks`.
    pub(crate) tx_blocks: Vec<u64>,
    /// A bit per block of the data area, set for the blocks of `tx_blocks` from the first store
    /// made when it already holds `PSET_SCAN` (allocated at the first such transaction; cleared
    /// through `tx_blocks` at the next `begin`). A transaction of B+tree writes about 90 blocks, and a sorted list searched
    /// in halves and re-sorted every `PSET_SCAN` new blocks had taken a tenth of its host time.
    tx_marks: Vec<u64>,
}

impl TxState {
    pub(crate) fn new() -> TxState {
        TxState {
            in_tx: false,
            written: Vec::with_capacity(256),
            undo_bytes: Vec::with_capacity(4096),
            oracle_tx_start: (0, 0),
            tx_blocks: Vec::with_capacity(1024),
            tx_marks: Vec::new(),
        }
    }
}

const PSET_SCAN: usize = 32;

impl<P: Protocol> Sim<P> {
    pub fn new(m: Machine, p: P, record_oracle: bool) -> Sim<P> {
        // `load` relies on it: an address inside the data area is inside `arch`.
        assert!(m.layout.data_bytes as usize <= m.arch.len(), "the data area lies in the image");
        let others = multicore::OtherCores::new(&m, record_oracle);
        Sim {
            m,
            p,
            oracle: record_oracle.then(OracleLog::default),
            stats: FrontStats::default(),
            tx: Box::new(TxState::new()),
            others,
            probe: None,
            record_budget: None,
        }
    }

    /// The oracle's record of every committed transaction (`None` unless recording).
    pub fn take_oracle(&mut self) -> Option<OracleLog> {
        match self.others.any() {
            true => self.others.get().take_oracle(),
            false => self.oracle.take(),
        }
    }

    /// Stop the run (`m.fatal`) if its record for the crash checker holds, or at its present
    /// rate per transaction will hold, more host memory than the budget allows.
    #[cold]
    fn check_record_budget(&mut self) {
        let Some(b) = self.record_budget else { return };
        let mut held = self.m.record.as_ref().map_or(0, |r| r.heap_bytes());
        held += self.oracle.as_ref().map_or(0, |o| o.heap_bytes());
        held += self.others.oracle_heap_bytes();
        if let Some(e) = b.check(held, self.stats.txs_committed) {
            self.m.fatal.get_or_insert(e);
        }
    }

    /// Make core `c` the running one: its clock, caches and transaction state
    /// ([`Machine::switch_core`]). Only with more than one core.
    pub(crate) fn switch_core(&mut self, c: usize) {
        let cur = self.m.core();
        if c == cur {
            return;
        }
        self.others.get().park(cur, c, &mut self.tx, &mut self.oracle);
        self.m.switch_core(c);
    }

    /// Note that the running transaction wrote block `b`.
    #[inline(always)]
    fn note_block(&mut self, b: u64) {
        // Few blocks (most transactions): a scan.
        if self.tx.tx_blocks.len() < PSET_SCAN {
            if !self.tx.tx_blocks.contains(&b) {
                self.tx.tx_blocks.push(b);
                self.others.wrote(&mut self.m, b);
            }
            return;
        }
        self.note_block_marked(b);
    }

    /// [`Sim::note_block`] past the first `PSET_SCAN` blocks: the blocks' marks.
    #[inline(never)]
    fn note_block_marked(&mut self, b: u64) {
        let t = &mut self.tx;
        if t.tx_blocks.len() == PSET_SCAN {
            if t.tx_marks.is_empty() {
                t.tx_marks = vec![0; (self.m.layout.data_bytes / 64).div_ceil(64) as usize];
            }
            for &x in &t.tx_blocks {
                t.tx_marks[(x / 64) as usize] |= 1 << (x % 64);
            }
        }
        let (w, bit) = ((b / 64) as usize, 1u64 << (b % 64));
        if t.tx_marks[w] & bit != 0 {
            return;
        }
        t.tx_marks[w] |= bit;
        t.tx_blocks.push(b);
        self.others.wrote(&mut self.m, b);
    }

    /// Try to take lock `id` for the running core's transaction (several cores only): `false`
    /// when another core holds it (the running core is then waiting for it).
    pub(crate) fn try_lock(&mut self, id: u64) -> bool {
        self.others.get().try_lock(&mut self.m, self.tx.in_tx, id)
    }

    /// The running core's transaction has ended (commit or abort returned): its lines are no
    /// longer in flight and its locks are released.
    fn tx_ended(&mut self) {
        self.others.ended(&mut self.m, &self.tx.tx_blocks);
        if let Some(p) = &mut self.probe {
            p.ended += 1;
            if p.ended == p.at {
                p.seen = Some(DirtyProbe::look(&self.m));
            }
        }
    }
}

/// What the scheduler ([`crate::sched`]) asks of the other cores (only with more than one).
impl<P: Protocol> Sim<P> {
    /// The start of a scheduler phase ([`multicore::Cores::start_phase`]): the running core's key.
    pub(crate) fn start_phase(&mut self) -> u64 {
        self.others.get().start_phase(&self.m)
    }

    /// The key past which the running core yields ([`multicore::Cores::next_key`]; never with
    /// one core).
    #[inline(always)]
    pub(crate) fn next_key(&self) -> u64 {
        self.others.next_key()
    }

    /// The earliest runnable core once core `c` stops at key `k` ([`multicore::Cores::earliest`]).
    #[inline(always)]
    pub(crate) fn earliest(&mut self, c: usize, k: u64) -> Option<usize> {
        self.others.get().earliest(c, k)
    }

    /// The cores waiting for a lock ([`multicore::Cores::waits`]).
    pub(crate) fn waits(&mut self) -> Vec<String> {
        self.others.get().waits()
    }

    /// [`Pm::will_access`] with the lock table's and writers' entries of the line fetched too.
    #[inline]
    pub(crate) fn will_access_shared(&mut self, addr: Addr) {
        self.will_access(addr);
        self.others.will_access(addr);
    }
}

impl<P: Protocol> Pm for Sim<P> {
    fn begin(&mut self) {
        let t = &mut self.tx;
        assert!(!t.in_tx, "nested transaction");
        t.in_tx = true;
        t.written.clear();
        t.undo_bytes.clear();
        // Marks are set only once the list has `PSET_SCAN` blocks (and the words hold no other
        // transaction's bits): zero the words of its blocks.
        if t.tx_blocks.len() >= PSET_SCAN && !t.tx_marks.is_empty() {
            for &x in &t.tx_blocks {
                t.tx_marks[(x / 64) as usize] = 0;
            }
        }
        t.tx_blocks.clear();
        if let Some(o) = &self.oracle {
            t.oracle_tx_start = (o.stores.len(), o.bytes.len());
        }
        self.others.begun(self.m.core());
        self.p.begin(&mut self.m);
    }

    fn commit(&mut self) {
        assert!(self.tx.in_tx, "commit outside a transaction");
        self.tx.in_tx = false;
        self.m.txs_committed += 1;
        self.m.note_commit_called();
        let now = self.m.now;
        if let Some(r) = &mut self.m.record {
            r.commit_called.push(now);
        }
        if let Some(o) = &mut self.oracle {
            if !self.others.committed_oracle(self.m.core(), o) {
                o.tx_end.push(o.stores.len());
            }
        }
        self.stats.txs_committed += 1;
        if self.record_budget.is_some() && self.stats.txs_committed.is_multiple_of(RecordBudget::EVERY_TXS) {
            self.check_record_budget();
        }
        self.stats.pset_blocks += self.tx.tx_blocks.len() as u64;
        self.p.commit(&mut self.m);
        // The transaction's ordered stream (`ordering.log_order = program`) ends with it.
        self.m.end_tx_order();
        self.tx_ended();
    }

    fn abort(&mut self) {
        let t = &mut self.tx;
        assert!(t.in_tx, "abort outside a transaction");
        t.in_tx = false;
        let mut end = t.undo_bytes.len();
        for &(a, len) in t.written.iter().rev() {
            let start = end - len as usize;
            self.m.arch[a.0 as usize..a.0 as usize + len as usize].copy_from_slice(&t.undo_bytes[start..end]);
            end = start;
        }
        if let Some(o) = &mut self.oracle {
            o.stores.truncate(t.oracle_tx_start.0);
            o.bytes.truncate(t.oracle_tx_start.1);
        }
        self.stats.txs_aborted += 1;
        self.p.abort(&mut self.m, &self.tx.written);
        self.m.end_tx_order();
        self.tx_ended();
    }

    // Inlined into the workload, as `store` is: a fixed-size load copies its bytes without a
    // call.
    #[inline(always)]
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        let a = addr.0 as usize;
        let data = self.m.layout.data_bytes as usize;
        if a >= data || buf.len() > data - a {
            // Zeros stand for the bytes until the run stops (at once on N cores, see `sched`).
            buf.fill(0);
            return program_fault(&mut self.m, "loaded", addr, buf.len());
        }
        // The program bytes are read after the cache model has done its work: have the host
        // fetch them meanwhile.
        // SAFETY: `a` is below the data area's end, which `Sim::new` checked lies in `arch`
        // (never resized): the check above is the one bounds check of this path.
        crate::hostmem::prefetch(unsafe { self.m.arch.get_unchecked(a) });
        self.p.load(&mut self.m, addr, buf.len());
        self.m.load_bytes(addr, buf);
        self.others.read(self.m.core(), self.tx.in_tx, addr, buf.len());
    }

    // Inlined into the workload, so that a fixed-size store copies its bytes without a call.
    #[inline(always)]
    fn store(&mut self, addr: Addr, data: &[u8]) {
        assert!(self.tx.in_tx, "store outside a transaction");
        let (a, n) = (addr.0 as usize, data.len());
        if a.saturating_add(n) > self.m.layout.data_bytes as usize {
            return program_fault(&mut self.m, "stored", addr, n);
        }
        if n == 0 {
            return;
        }
        self.p.before_store(&mut self.m, addr, n);
        self.tx.undo_bytes.extend_from_slice(&self.m.arch[a..a + n]);
        self.tx.written.push((addr, n as u32));
        self.m.arch[a..a + n].copy_from_slice(data);
        if let Some(o) = &mut self.oracle {
            o.stores.push((addr.0, n as u32, o.bytes.len() as u64));
            o.bytes.extend_from_slice(data);
        }
        self.stats.program_write_bytes += n as u64;
        for b in blocks_of(addr, n) {
            self.note_block(b.0);
        }
        self.p.store(&mut self.m, addr, n);
    }

    #[inline]
    fn compute(&mut self, cycles: u64) {
        self.m.compute(Cycle::new(cycles));
    }

    #[inline]
    fn core(&self) -> usize {
        self.m.core()
    }

    #[inline]
    fn will_access(&mut self, addr: Addr) {
        self.m.will_access(addr);
    }

    fn last_durable_tx(&self) -> u64 {
        // The protocol's acknowledgements are the only source (CheckMaxCommit); the running
        // core's (`Machine::switch_core` swaps them).
        self.m.acked
    }

    #[inline]
    fn concurrent(&self) -> bool {
        self.others.any()
    }

    /// Without the scheduler ([`crate::sched::run`], which waits for a held lock) a lock held by
    /// another core cannot be waited for: the run stops.
    fn lock(&mut self, id: u64) {
        if self.others.any() && !self.try_lock(id) {
            let c = self.m.core();
            self.m.fatal.get_or_insert(format!("core {c} waits for lock {id} outside the scheduler"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pmem::Layout;
    use crate::protocol::baseline::Baseline;
    use crate::rng::Rng;
    use std::collections::HashSet;

    #[test]
    fn the_record_budget_stops_a_run_over_it_now_or_by_its_planned_end() {
        let b = RecordBudget { limit: 1_000_000, planned_txs: 10_000 };
        // 100 bytes per transaction: 1 MB at the end, exactly the limit.
        assert_eq!(b.check(409_600, 4096), None);
        // 101 bytes per transaction: over by the end, stopped now, with the length that fits.
        let e = b.check(413_696, 4096).expect("projected over");
        assert!(e.contains("would hold about 1.0 MB for 10000 transactions (101 bytes per transaction)"), "{e}");
        assert!(e.ends_with("lower --txs to about 9900 transactions in all, warm-up included"), "{e}");
        // A run of unknown length: only what the record holds now.
        let open = RecordBudget { limit: 1_000_000, planned_txs: u64::MAX };
        assert_eq!(open.check(1_000_000, 4096), None);
        let e = open.check(1_000_001, 8192).expect("over now");
        assert!(e.contains("holds 1.0 MB after 8192 transactions (122 bytes per transaction)"), "{e}");
    }

    #[test]
    fn pset_counts_distinct_blocks_like_a_hash_set_for_small_and_large_transactions() {
        let layout = Layout::new(1 << 20, 64 << 10);
        let m = Machine::new(&Config::default(), layout, vec![0; layout.total_bytes() as usize], false);
        let mut sim = Sim::new(m, Baseline, false);
        let mut rng = Rng::new(3);
        let mut expected = 0;
        for tx in 0..400 {
            // Up to 200 stores over a few or many blocks: both the scan and the marks, with
            // repeats, unaligned stores spanning two blocks, and stores of many blocks; every
            // fourth transaction writes exactly `PSET_SCAN` blocks (some blocks of the span
            // before it), then repeats one of them or adds one more.
            let (stores, span) = (rng.below(200) + 1, [4, 40, 4000, 4000][tx % 4]);
            let mut model = HashSet::new();
            sim.begin();
            if tx % 4 == 3 {
                let first = rng.below(8);
                for k in 0..PSET_SCAN as u64 {
                    sim.store(Addr((first + k) * 64), &[1]);
                    model.insert(first + k);
                }
                let again = first + rng.below(PSET_SCAN as u64 + 1);
                sim.store(Addr(again * 64 + 8), &[2]);
                model.insert(again);
            }
            for _ in 0..stores * (tx % 4 != 3) as u64 {
                let addr = rng.below(span) * 64 + rng.below(64);
                let long = rng.below(8) == 0;
                let len = rng.below(if long { 300 } else { 16 }) + 1;
                sim.store(Addr(addr), &vec![7; len as usize]);
                model.extend(blocks_of(Addr(addr), len as usize).map(|b| b.0));
            }
            sim.commit();
            expected += model.len() as u64;
            assert_eq!(sim.stats.pset_blocks, expected, "seed 3, transaction {tx}");
        }
    }

    #[test]
    fn a_program_sees_the_running_core_as_its_thread_id() {
        let cfg = Config::build(None, &["machine.cores=3".into()]).unwrap();
        let layout = Layout::new(1 << 16, 64 << 10).with_cores(3);
        let m = Machine::new(&cfg, layout, vec![0; layout.total_bytes() as usize], false);
        let mut sim = Sim::new(m, Baseline, false);
        let seen: Vec<usize> = [0, 2, 1, 2, 0]
            .into_iter()
            .map(|c| {
                sim.m.switch_core(c);
                let pm: &mut dyn Pm = &mut sim;
                pm.core()
            })
            .collect();
        assert_eq!(seen, [0, 2, 1, 2, 0]);
    }
}
