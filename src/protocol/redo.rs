//! What the hardware redo-logging protocols share (H-WAL, EC-WAL): the running transaction's
//! write set, tracked with the LLC's transaction tag (a single cached copy of each block); the
//! checkpoint that writes its blocks home once the transaction is durable; and the cycle after
//! which the log may be truncated past it.

use crate::cache::Slot;
use crate::machine::Machine;
use crate::ordering::{CommitFlush, Conflict};
use crate::pmem::WriteKind;
use crate::types::{blocks_of, Addr, BlockId, Cycle};

/// A single-copy hardware redo protocol: it says where a tagged victim goes; the load and store
/// paths, the same for all of them, are provided.
pub trait RedoProtocol {
    /// Write block `b`, a tagged line evicted from the LLC, into the log; returns where.
    fn log_victim(&mut self, m: &mut Machine, b: BlockId) -> BlockId;
    fn redo(&mut self) -> &mut RedoSet;

    /// Place every tagged line the last access evicted from the LLC (into the log). Under
    /// `ordering.conflict = transaction` the eviction forces every other line of the running
    /// transaction into the log and out of the cache.
    fn drain_victims(&mut self, m: &mut Machine) {
        let mut evicted = false;
        while let Some(v) = m.tx_victims.pop() {
            let at = self.log_victim(m, v.block);
            self.redo().note_evicted(v.block, at);
            evicted = true;
        }
        if evicted && m.ord.conflict == Conflict::Transaction {
            self.force_out(m);
        }
    }

    /// The conflict rule of strict ordering: every still-cached line of the running
    /// transaction goes to the log and leaves the cache (its data is not written home).
    #[cold]
    fn force_out(&mut self, m: &mut Machine) {
        let mut i = 0;
        while i < self.redo().ws.len() {
            if self.redo().take_tagged(m, i) {
                let b = self.redo().ws[i];
                m.hier.invalidate(b);
                let at = self.log_victim(m, b);
                self.redo().note_evicted(b, at);
                self.redo().forced_to_log += 1;
            }
            i += 1;
        }
    }

    /// A transactional load: cache accesses, then the victims they caused.
    fn redo_load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, false);
        self.drain_victims(m);
    }

    /// A transactional store: per block, the access, its victims, then the transaction's tag.
    fn redo_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        for b in blocks_of(addr, len) {
            let s = m.access_block(b, true).llc_slot;
            self.drain_victims(m);
            self.redo().note_store(m, s, b);
        }
    }
}

/// The [`super::Protocol`] load and store of a [`RedoProtocol`] (inside its `impl Protocol`):
/// the shared paths, so each protocol states only what differs.
macro_rules! redo_load_store {
    () => {
        fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
            self.redo_load(m, addr, len);
        }

        fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
            self.redo_store(m, addr, len);
        }
    };
}
pub(crate) use redo_load_store;

/// LLC tag of lines written by the running transaction (one runs at a time).
pub const TAG: u32 = 1;

/// The running transaction's blocks, and the checkpoint/truncation bookkeeping.
#[derive(Default)]
pub struct RedoSet {
    /// Blocks first written by the running transaction, in order.
    pub ws: Vec<BlockId>,
    /// `slots[i]`: the LLC slot `ws[i]` was in when first written (a hint: it is checked, and
    /// the LLC searched when the line has moved or when `ws` was filled directly).
    slots: Vec<Slot>,
    /// Log positions of its lines evicted before commit (newest last).
    pub evicted: Vec<(BlockId, BlockId)>,
    /// Cycle at which the latest truncation was issued: truncations are issued in order.
    trunc_at: Cycle,
    evicted_to_log: u64,
    /// Lines forced to the log by the conflict rule (`ordering.conflict = transaction`).
    forced_to_log: u64,
    checkpoint_log_reads: u64,
}

impl RedoSet {
    /// A transactional store to block `b`, now held in LLC slot `s`.
    #[inline]
    pub fn note_store(&mut self, m: &mut Machine, s: Slot, b: BlockId) {
        if m.hier.llc.aux(s) != TAG {
            m.hier.llc.set_aux(s, TAG);
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
            Some(s) if m.hier.llc.aux(s) == TAG => {
                m.hier.llc.set_aux(s, 0);
                true
            }
            _ => false,
        }
    }

    /// The commit-time flush (`ordering.commit_flush`) of every write-set line still cached.
    pub fn flush_lines(&self, m: &mut Machine) {
        if m.ord.commit_flush == CommitFlush::None {
            return;
        }
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
        for i in 0..self.ws.len() {
            let b = self.ws[i];
            let cached = self.cached(m, i);
            if cached.is_none() {
                if let Some(&(_, at)) = self.evicted.iter().rev().find(|(x, _)| *x == b) {
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
        if m.ord.commit_flush == CommitFlush::Invalidate {
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
            if m.hier.llc.find(b).is_some_and(|s| m.hier.llc.aux(s) == TAG) {
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
}
