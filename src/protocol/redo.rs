//! What the hardware redo-logging protocols share (H-WAL, EC-WAL): the running transaction's
//! write set, tracked with the LLC's transaction tag (a single cached copy of each block); the
//! checkpoint that writes its blocks home once the transaction is durable; and the cycle after
//! which the log may be truncated past it.
//!
//! On more than one core each core has its own [`RedoSet`] and LLC tag ([`tag`]: core + 1), and
//! a tagged line another core's access evicts is placed on behalf of its owner
//! ([`RedoProtocol::drain_victims`]); truncations of all cores are issued in global commit
//! order ([`in_commit_order`]; docs/formats/wal-log.md, "Regions").

use crate::cache::Slot;
use crate::machine::Machine;
use crate::ordering::{CommitFlush, Conflict};
use crate::pmem::WriteKind;
use crate::types::{blocks_of, Addr, BlockId, Cycle};

/// A single-copy hardware redo protocol: it says where a tagged victim goes; the load and store
/// paths, the same for all of them, are provided.
pub trait RedoProtocol {
    /// Write block `b`, a tagged line of core `c`'s running transaction evicted from the LLC,
    /// into core `c`'s log; returns where.
    fn log_victim(&mut self, m: &mut Machine, c: usize, b: BlockId) -> BlockId;
    /// Core `c`'s running transaction.
    fn redo(&mut self, c: usize) -> &mut RedoSet;

    /// Place every tagged line the last access evicted from the LLC into its owner's log (the
    /// owner is the core whose tag it carries: the running core's access may evict a line of
    /// another core's running transaction). Under `ordering.conflict = transaction` the
    /// eviction forces every other line of the owner's transaction into the log and out of the
    /// cache. Called after every access: the common case, no tagged victim, is one inlined test.
    #[inline(always)]
    fn drain_victims(&mut self, m: &mut Machine) {
        if !m.tx_victims.is_empty() {
            self.place_victims(m);
        }
    }

    /// [`RedoProtocol::drain_victims`] when there is a tagged victim.
    #[inline(never)]
    fn place_victims(&mut self, m: &mut Machine) {
        let mut owners = 0u32;
        while let Some(v) = m.tx_victims.pop() {
            let c = owner(v.tag);
            let at = self.log_victim(m, c, v.block);
            self.redo(c).note_evicted(v.block, at);
            owners |= 1 << c;
        }
        if owners != 0 && m.ord.conflict() == Conflict::Transaction {
            while owners != 0 {
                let c = owners.trailing_zeros() as usize;
                owners &= owners - 1;
                self.force_out(m, c);
            }
        }
    }

    /// Core `c`'s transaction aborts: tagged lines of its own left in `m.tx_victims` (an access
    /// outside the protocol, a lock's, evicted them) are dropped, as its cached lines are, and
    /// the other cores' are placed now, while their owners still run. With one core the list is
    /// empty here (every protocol access drains it).
    fn drain_at_abort(&mut self, m: &mut Machine, c: usize) {
        if !m.tx_victims.is_empty() {
            m.tx_victims.retain(|v| owner(v.tag) != c);
            self.drain_victims(m);
        }
    }

    /// The conflict rule of strict ordering: every still-cached line of core `c`'s running
    /// transaction goes to the log and leaves the cache (its data is not written home).
    #[cold]
    fn force_out(&mut self, m: &mut Machine, c: usize) {
        let mut i = 0;
        while i < self.redo(c).ws.len() {
            if self.redo(c).take_tagged(m, i) {
                let b = self.redo(c).ws[i];
                m.hier.invalidate(b);
                let at = self.log_victim(m, c, b);
                self.redo(c).note_evicted(b, at);
                self.redo(c).forced_to_log += 1;
            }
            i += 1;
        }
    }

    /// A transactional load: cache accesses, then the victims they caused.
    #[inline(always)]
    fn redo_load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, false);
        self.drain_victims(m);
    }

    /// A transactional store: per block, the access, its victims, then the transaction's tag.
    #[inline(always)]
    fn redo_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let c = m.core();
        for b in blocks_of(addr, len) {
            let s = m.access_block(b, true).llc_slot;
            self.drain_victims(m);
            self.redo(c).note_store(m, s, b);
        }
    }
}

/// The [`super::Protocol`] load and store of a [`RedoProtocol`] (inside its `impl Protocol`):
/// the shared paths, so each protocol states only what differs.
macro_rules! redo_load_store {
    () => {
        // Inlined into the workload's access (`Sim::load`, `Sim::store`): the L1 hit without a
        // call; the miss path stays out of line (`Machine::access_block`).
        #[inline(always)]
        fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
            self.redo_load(m, addr, len);
        }

        #[inline(always)]
        fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
            self.redo_store(m, addr, len);
        }
    };
}
pub(crate) use redo_load_store;

/// LLC tag of lines written by core `c`'s running transaction (one runs per core): `c + 1`, so
/// that 0 stays "no transaction" and one core's tag is 1.
#[inline(always)]
pub const fn tag(c: usize) -> u32 {
    c as u32 + 1
}

/// The core whose running transaction wrote a line tagged `t` (`t` from [`tag`]).
#[inline(always)]
pub fn owner(t: u32) -> usize {
    debug_assert!(t >= 1, "an untagged line has no owner");
    (t - 1) as usize
}

/// The truncation point of a transaction whose own checkpoint allows truncating at `own`, given
/// `shared`, the point of the transaction committed just before it on any core (updated):
/// truncations of all cores are issued in global commit order, so a head that moves past
/// global sequence number `g` is issued only once every transaction numbered `g` or less is at
/// home (docs/formats/wal-log.md, "Regions"). `in_order = false` is the injected
/// `truncate-out-of-order`: the region waits for its own transactions only. With one core
/// `shared` is the region's own chain, which `own` already includes.
#[inline]
pub fn in_commit_order(shared: &mut Cycle, own: Cycle, in_order: bool) -> Cycle {
    let at = if in_order { own.max(*shared) } else { own };
    *shared = (*shared).max(at);
    at
}

/// Uncached blocks of a checkpoint looked up in `evicted` by a search before it is indexed.
const SEARCHES_BEFORE_INDEX: usize = 8;

/// `out` = the newest (last) entry of each block of `entries`, sorted by block.
fn last_per_home(entries: &[(BlockId, BlockId)], out: &mut Vec<(BlockId, BlockId)>) {
    out.clear();
    out.extend_from_slice(entries);
    // Stable: entries of one block stay in their order, newest last.
    out.sort_by_key(|e| e.0 .0);
    let mut n = 0;
    for i in 0..out.len() {
        if i + 1 == out.len() || out[i + 1].0 != out[i].0 {
            out[n] = out[i];
            n += 1;
        }
    }
    out.truncate(n);
}

/// The running transaction's blocks, and the checkpoint/truncation bookkeeping.
pub struct RedoSet {
    /// The LLC tag of this set's lines ([`tag`] of its core).
    tag: u32,
    /// Blocks first written by the running transaction, in order.
    pub ws: Vec<BlockId>,
    /// `slots[i]`: the LLC slot `ws[i]` was in when first written (a hint: it is checked, and
    /// the LLC searched when the line has moved or when `ws` was filled directly).
    slots: Vec<Slot>,
    /// Log positions of its lines evicted before commit (newest last).
    pub evicted: Vec<(BlockId, BlockId)>,
    /// The checkpoint's index of `evicted`: the newest entry of each block, by block.
    newest: Vec<(BlockId, BlockId)>,
    /// Cycle at which the latest truncation was issued: truncations are issued in order.
    trunc_at: Cycle,
    evicted_to_log: u64,
    /// Lines forced to the log by the conflict rule (`ordering.conflict = transaction`).
    forced_to_log: u64,
    checkpoint_log_reads: u64,
}

impl Default for RedoSet {
    fn default() -> RedoSet {
        RedoSet::of_core(0)
    }
}

impl RedoSet {
    /// The write set of core `c`'s transactions.
    pub fn of_core(c: usize) -> RedoSet {
        RedoSet {
            tag: tag(c),
            ws: Vec::new(),
            slots: Vec::new(),
            evicted: Vec::new(),
            newest: Vec::new(),
            trunc_at: Cycle::ZERO,
            evicted_to_log: 0,
            forced_to_log: 0,
            checkpoint_log_reads: 0,
        }
    }

    /// A transactional store to block `b`, now held in LLC slot `s`.
    #[inline]
    pub fn note_store(&mut self, m: &mut Machine, s: Slot, b: BlockId) {
        if m.hier.llc.aux(s) != self.tag {
            m.hier.llc.set_aux(s, self.tag);
            self.ws.push(b);
            self.slots.push(s);
        }
    }

    /// The LLC slot holding write-set block `ws[i]`, if it is cached.
    #[inline(always)]
    pub fn cached(&self, m: &Machine, i: usize) -> Option<Slot> {
        let b = self.ws[i];
        match self.slots.get(i) {
            Some(&s) if m.hier.llc.holds(s, b) => Some(s),
            _ => m.hier.llc.find(b),
        }
    }

    /// Is write-set block `ws[i]` still cached with the running transaction's tag? If so the
    /// tag is cleared (the caller logs the line now).
    #[inline]
    pub fn take_tagged(&self, m: &mut Machine, i: usize) -> bool {
        match self.cached(m, i) {
            Some(s) if m.hier.llc.aux(s) == self.tag => {
                m.hier.llc.set_aux(s, 0);
                true
            }
            _ => false,
        }
    }

    /// The commit-time flush (`ordering.commit_flush`) of every write-set line still cached.
    #[inline]
    pub fn flush_lines(&self, m: &mut Machine) {
        if m.ord.commit_flush() != CommitFlush::None {
            self.flush_cached(m);
        }
    }

    /// [`RedoSet::flush_lines`] under a commit-time flush.
    #[inline(never)]
    fn flush_cached(&self, m: &mut Machine) {
        for i in 0..self.ws.len() {
            if let Some(s) = self.cached(m, i) {
                m.commit_flush(s);
            }
        }
    }

    /// A tagged line evicted during the transaction was logged at `at`.
    pub fn note_evicted(&mut self, b: BlockId, at: BlockId) {
        self.evicted.push((b, at));
        self.evicted_to_log += 1;
    }

    /// Write every block of the write set home, without stalling the core; the lines become
    /// clean. A block evicted during the transaction is re-read from the log (a bank read that,
    /// as an approximation, does not delay its home write). Returns the cycle from which the
    /// truncation past this transaction may be issued: once every home write of this and all
    /// earlier transactions is durable (or at once, with `truncate_early`, the injected bug).
    pub fn checkpoint(&mut self, m: &mut Machine, truncate_early: bool) -> Cycle {
        let mut home_done = m.now;
        let mut searches = 0;
        for i in 0..self.ws.len() {
            let b = self.ws[i];
            let cached = self.cached(m, i);
            if cached.is_none() && !self.evicted.is_empty() {
                // The newest log copy of `b`: searched for the first few blocks, then from an
                // index (a window of LOC-WAL logs every block it writes, so a search for each
                // would be quadratic in a large write set).
                searches += 1;
                let at = if searches <= SEARCHES_BEFORE_INDEX {
                    self.evicted.iter().rev().find(|(x, _)| *x == b).map(|e| e.1)
                } else {
                    if searches == SEARCHES_BEFORE_INDEX + 1 {
                        last_per_home(&self.evicted, &mut self.newest);
                    }
                    self.newest.binary_search_by_key(&b, |e| e.0).ok().map(|k| self.newest[k].1)
                };
                if let Some(at) = at {
                    m.background_read(at);
                    self.checkpoint_log_reads += 1;
                }
            }
            let t = m.write_from_arch(b, WriteKind::Home, b);
            if let Some(s) = cached {
                m.hier.clean_slot(s);
            }
            home_done = home_done.max(t.durable);
        }
        if m.ord.commit_flush() == CommitFlush::Invalidate {
            for &b in &self.ws {
                m.commit_flush_done(b);
            }
        }
        self.trunc_at = if truncate_early { m.now } else { home_done.max(self.trunc_at) };
        self.trunc_at
    }

    /// Abort: drop the running transaction's cached lines (their data is not to reach memory).
    pub fn discard(&mut self, m: &mut Machine) {
        for &b in &self.ws {
            if m.hier.llc.find(b).is_some_and(|s| m.hier.llc.aux(s) == self.tag) {
                m.hier.invalidate(b);
            }
        }
        self.clear();
    }

    /// Forget the running transaction (after commit or abort).
    pub fn clear(&mut self) {
        self.ws.clear();
        self.slots.clear();
        self.evicted.clear();
    }

    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("evicted_to_log", self.evicted_to_log),
            ("checkpoint_log_reads", self.checkpoint_log_reads),
            ("forced_to_log", self.forced_to_log),
        ]
    }

    /// The counters of every core's set, summed.
    pub fn counters_of<'a>(sets: impl Iterator<Item = &'a RedoSet>) -> Vec<(&'static str, u64)> {
        let mut sum = RedoSet::default().counters();
        for s in sets {
            for (x, (_, v)) in sum.iter_mut().zip(s.counters()) {
                x.1 += v;
            }
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checkpoint's index gives, for every block, what a search from the newest entry
    /// finds: over random logs with repeated blocks, against that search.
    #[test]
    fn the_index_of_evicted_lines_finds_each_blocks_newest_copy() {
        let mut rng = crate::rng::Rng::new(7);
        let mut out = Vec::new();
        for round in 0..200 {
            let n = rng.below(60) as usize;
            let homes = 1 + rng.below(20);
            let entries: Vec<(BlockId, BlockId)> =
                (0..n).map(|i| (BlockId(rng.below(homes)), BlockId(1000 + i as u64))).collect();
            last_per_home(&entries, &mut out);
            assert!(out.windows(2).all(|w| w[0].0 < w[1].0), "round {round}: sorted, one per block");
            for b in (0..homes + 1).map(BlockId) {
                let want = entries.iter().rev().find(|e| e.0 == b).map(|e| e.1);
                let got = out.binary_search_by_key(&b, |e| e.0).ok().map(|k| out[k].1);
                assert_eq!(got, want, "round {round}, block {}", b.0);
            }
        }
    }
}
