//! The simulator back end of the workload interface: [`Sim`] implements [`Pm`] over a
//! [`Machine`] and a [`Protocol`].
//!
//! It owns what is protocol-independent: the program's view of memory (stores update
//! `m.arch` at once), undo for aborts, the P-Set count, and the oracle's record of each
//! transaction's stores. That record is taken here, from the workload's own writes, before any
//! protocol sees them: the crash checker's oracle never depends on the protocol under test.

use crate::machine::Machine;
use crate::pmem::Pm;
use crate::protocol::Protocol;
use crate::types::{blocks_of, Addr};

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

    /// Apply transaction `k` to a data area.
    pub fn apply_tx(&self, k: usize, data: &mut [u8]) {
        for (a, bytes) in self.tx_stores(k) {
            data[a as usize..a as usize + bytes.len()].copy_from_slice(bytes);
        }
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
    pub oracle: Option<OracleLog>,
    pub stats: FrontStats,
    in_tx: bool,
    written: Vec<(Addr, u32)>,
    undo_bytes: Vec<u8>,
    oracle_tx_start: (usize, usize),
    /// Distinct blocks written by the running transaction (for the P-Set). A linear scan is
    /// cheaper than any host-memory structure for the few blocks most transactions write;
    /// past `PSET_SCAN` blocks the list is sorted and searched in halves.
    tx_blocks: Vec<u64>,
    tx_sorted: usize,
}

const PSET_SCAN: usize = 32;

impl<P: Protocol> Sim<P> {
    pub fn new(m: Machine, p: P, record_oracle: bool) -> Sim<P> {
        Sim {
            m,
            p,
            oracle: record_oracle.then(OracleLog::default),
            stats: FrontStats::default(),
            in_tx: false,
            written: Vec::with_capacity(256),
            undo_bytes: Vec::with_capacity(4096),
            oracle_tx_start: (0, 0),
            tx_blocks: Vec::with_capacity(1024),
            tx_sorted: 0,
        }
    }

    /// Note that the running transaction wrote block `b`.
    #[inline(always)]
    fn note_block(&mut self, b: u64) {
        // Few blocks, none sorted yet (most transactions): a scan, and no sort can be due.
        if self.tx_sorted == 0 && self.tx_blocks.len() < PSET_SCAN {
            if !self.tx_blocks.contains(&b) {
                self.tx_blocks.push(b);
            }
            return;
        }
        self.note_block_sorted(b);
    }

    /// [`Sim::note_block`] past the first `PSET_SCAN` blocks.
    #[inline(never)]
    fn note_block_sorted(&mut self, b: u64) {
        let (sorted, tail) = self.tx_blocks.split_at(self.tx_sorted);
        if tail.contains(&b) || sorted.binary_search(&b).is_ok() {
            return;
        }
        self.tx_blocks.push(b);
        if self.tx_blocks.len() - self.tx_sorted > PSET_SCAN {
            self.tx_blocks.sort_unstable();
            self.tx_sorted = self.tx_blocks.len();
        }
    }
}

impl<P: Protocol> Pm for Sim<P> {
    fn begin(&mut self) {
        assert!(!self.in_tx, "nested transaction");
        self.in_tx = true;
        self.written.clear();
        self.undo_bytes.clear();
        self.tx_blocks.clear();
        self.tx_sorted = 0;
        if let Some(o) = &self.oracle {
            self.oracle_tx_start = (o.stores.len(), o.bytes.len());
        }
        self.p.begin(&mut self.m);
    }

    fn commit(&mut self) {
        assert!(self.in_tx, "commit outside a transaction");
        self.in_tx = false;
        self.m.txs_committed += 1;
        self.m.note_commit_called();
        let now = self.m.now;
        if let Some(r) = &mut self.m.record {
            r.commit_called.push(now);
        }
        if let Some(o) = &mut self.oracle {
            o.tx_end.push(o.stores.len());
        }
        self.stats.txs_committed += 1;
        self.stats.pset_blocks += self.tx_blocks.len() as u64;
        self.p.commit(&mut self.m);
    }

    fn abort(&mut self) {
        assert!(self.in_tx, "abort outside a transaction");
        self.in_tx = false;
        let mut end = self.undo_bytes.len();
        for &(a, len) in self.written.iter().rev() {
            let start = end - len as usize;
            self.m.arch[a.0 as usize..a.0 as usize + len as usize].copy_from_slice(&self.undo_bytes[start..end]);
            end = start;
        }
        if let Some(o) = &mut self.oracle {
            o.stores.truncate(self.oracle_tx_start.0);
            o.bytes.truncate(self.oracle_tx_start.1);
        }
        self.stats.txs_aborted += 1;
        self.p.abort(&mut self.m, &self.written);
    }

    #[inline]
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        let a = addr.0 as usize;
        // The program bytes are read after the cache model has done its work: have the host
        // fetch them meanwhile.
        crate::hostmem::prefetch(&self.m.arch[a]);
        self.p.load(&mut self.m, addr, buf.len());
        buf.copy_from_slice(&self.m.arch[a..a + buf.len()]);
    }

    // Inlined into the workload, so that a fixed-size store copies its bytes without a call.
    #[inline(always)]
    fn store(&mut self, addr: Addr, data: &[u8]) {
        assert!(self.in_tx, "store outside a transaction");
        let (a, n) = (addr.0 as usize, data.len());
        assert!(a + n <= self.m.layout.data_bytes as usize, "store past the data area");
        if n == 0 {
            return;
        }
        self.p.before_store(&mut self.m, addr, n);
        self.undo_bytes.extend_from_slice(&self.m.arch[a..a + n]);
        self.written.push((addr, n as u32));
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
        self.m.compute(cycles);
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
        // The protocol's acknowledgements are the only source (CheckMaxCommit).
        self.m.acked
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
    fn pset_counts_distinct_blocks_like_a_hash_set_for_small_and_large_transactions() {
        let layout = Layout::new(1 << 20, 64 << 10);
        let m = Machine::new(&Config::default(), layout, vec![0; layout.total_bytes() as usize], false);
        let mut sim = Sim::new(m, Baseline, false);
        let mut rng = Rng::new(3);
        let mut expected = 0;
        for tx in 0..300 {
            // Up to 200 stores over a few or many blocks: both the scan and the sorted halves,
            // with repeats, unaligned stores spanning two blocks, and stores of many blocks.
            let (stores, span) = (rng.below(200) + 1, [4, 40, 4000][tx % 3]);
            let mut model = HashSet::new();
            sim.begin();
            for _ in 0..stores {
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
