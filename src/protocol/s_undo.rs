//! `s-undo`: software undo logging as PMDK's libpmemobj does it (docs/protocols/s-undo.md).
//!
//! A persistence library, written against ordinary loads, stores, `clflush` and `mfence`, like
//! S-WAL (`s_wal.rs`), with the same instruction costs (`swal.*`):
//! - a transaction's first store to a line (PMDK: `pmemobj_tx_add_range` of a range not yet in
//!   the transaction's range tree) copies the line's old bytes into an undo entry in the log,
//!   flushes the entry's lines and fences; then the store is made in place. Every store first
//!   looks its range up among the lines already logged (`swal.lookup_instructions`); a logged
//!   line costs `swal.append_instructions`;
//! - loads read in place, with no look-up (the newest bytes are home);
//! - commit: flush every line the transaction stored to, fence; then invalidate the log with
//!   one write, the head's next generation (PMDK: `ULOG_INC_FIRST_GEN_NUM`), flush, fence; return;
//! - abort: copy the old bytes back from the log, flush those lines, fence, invalidate.
//!
//! Log format: [`crate::log::sundo`]; recovery: [`crate::recovery::sundo`].
//!
//! On N cores (docs/multicore.md): one `Region` per core, each a whole single-core log in
//! `Layout::log_region(c)`. A commit returns only after its log is invalidated, and a
//! transaction's lines are locked until then, so a region holds at most its core's running
//! transaction and no cross-core order is needed.

use super::{Bug, Protocol};
use crate::config::SwalConfig;
use crate::log::head::{LogFormat, LogHead};
use crate::log::sundo::{entries, entry_block, Entry, ENTRY_BYTES};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockId, Cycle};

/// What `s-undo` is and how it is built (its line in the table of `registry.rs`).
pub static S_UNDO: super::Registration<SUndo> = super::Registration {
    desc: super::Descriptor {
        name: "s-undo",
        log_format: Some(LogFormat::SUndo),
        stores_persist: true,
        speculates: false,
        bugs: &[Bug::UndoWithoutFence, Bug::InvalidateBeforeFlush, Bug::UncheckedUndoEntry],
        reads: &[],
        layout: super::Descriptor::plain_layout,
    },
    build: |b| SUndo::new(b.layout, &b.cfg.swal, b.bug),
};

counters!(Counters { undo_entries, invalidations, restored_lines });

/// Logged lines found by a scan of the write set below this many; from then on by marks.
const SCAN: usize = 16;

pub struct SUndo {
    bug: Option<Bug>,
    costs: SwalConfig,
    /// Per core: its log region and running transaction.
    regions: Vec<Region>,
    /// Blocks in the data area (the size of a region's marks, in bits).
    data_blocks: u64,
    n: Counters,
}

/// One core's log region and running transaction.
struct Region {
    log0: BlockId,
    /// Entries the region holds.
    cap: u64,
    /// The generation the head names: the running transaction's entries carry it.
    gen: u64,
    /// Lines the running transaction has logged, in log order: entry `i` is `ws[i]`'s.
    ws: Vec<BlockId>,
    /// One bit per data block, set for the lines of `ws` once it holds [`SCAN`] of them.
    marks: Vec<u64>,
}

impl Region {
    /// Has the running transaction logged `b`?
    #[inline]
    fn logged(&self, b: BlockId) -> bool {
        if self.ws.len() <= SCAN {
            return self.ws.contains(&b);
        }
        self.marks[(b.0 / 64) as usize] >> (b.0 % 64) & 1 == 1
    }

    /// Note `b` as logged.
    fn note(&mut self, b: BlockId, data_blocks: u64) {
        self.ws.push(b);
        if self.ws.len() == SCAN + 1 {
            if self.marks.is_empty() {
                self.marks = vec![0; data_blocks.div_ceil(64) as usize];
            }
            for x in &self.ws {
                self.marks[(x.0 / 64) as usize] |= 1 << (x.0 % 64);
            }
        } else if self.ws.len() > SCAN + 1 {
            self.marks[(b.0 / 64) as usize] |= 1 << (b.0 % 64);
        }
    }

    /// The transaction is over: no line is logged.
    fn clear(&mut self) {
        if self.ws.len() > SCAN {
            for x in &self.ws {
                self.marks[(x.0 / 64) as usize] = 0;
            }
        }
        self.ws.clear();
    }

    /// Flush every line of the write set (charging the loop's `apply` per line), fence.
    fn flush_lines(&mut self, m: &mut Machine, costs: &SwalConfig) {
        for &b in &self.ws {
            m.compute(Cycle::new(costs.apply_instructions));
            m.clflush(b, WriteKind::Home);
        }
        m.fence();
    }

    /// Invalidate the log: store the head's next generation, flush it, fence.
    fn invalidate(&mut self, m: &mut Machine) {
        self.gen += 1;
        let head = LogHead { format: LogFormat::SUndo, start: 0, start_seq: self.gen };
        m.arch[self.log0.range()].copy_from_slice(&head.encode());
        m.access_block(self.log0, true);
        m.clflush(self.log0, WriteKind::LogHead);
        m.fence();
    }
}

impl SUndo {
    pub fn new(layout: &Layout, costs: &SwalConfig, bug: Option<Bug>) -> SUndo {
        let regions = (0..layout.cores as usize)
            .map(|c| {
                let (log0, blocks) = layout.log_region(c);
                Region { log0, cap: entries(blocks), gen: 1, ws: Vec::with_capacity(256), marks: Vec::new() }
            })
            .collect();
        SUndo { bug, costs: costs.clone(), regions, data_blocks: layout.data_bytes / 64, n: Counters::default() }
    }

    /// Copy line `b`'s old bytes (the program view, not yet stored to) into the next entry of
    /// core `c`'s log with ordinary stores, and flush the entry's lines.
    fn log_line(&mut self, m: &mut Machine, c: usize, b: BlockId) {
        let r = &mut self.regions[c];
        let i = r.ws.len() as u64;
        if i >= r.cap {
            m.fatal.get_or_insert_with(|| {
                format!("log.size_bytes too small: a transaction logs more than {} lines per core", r.cap)
            });
            return;
        }
        // The copy's source: the line is read (it is stored to next).
        m.access_block(b, false);
        m.compute(Cycle::new(self.costs.append_instructions));
        let at = entry_block(r.log0, i);
        if m.keep_bytes {
            let checked = self.bug != Some(Bug::UncheckedUndoEntry);
            let e = Entry { home: b.addr().0, gen: r.gen, old: m.arch_block(b), checked };
            let from = at.addr().0 as usize;
            m.arch[from..from + ENTRY_BYTES].copy_from_slice(&e.encode());
        }
        let second = BlockId(at.0 + 1);
        m.access_block(at, true);
        m.access_block(second, true);
        m.clflush(at, WriteKind::LogData);
        m.clflush(second, WriteKind::LogData);
        r.note(b, self.data_blocks);
        self.n.undo_entries += 1;
    }
}

impl Protocol for SUndo {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::SUndo, start: 0, start_seq: 1 }.write_regions(layout, image);
    }

    fn begin(&mut self, _m: &mut Machine) {}

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, false);
    }

    fn before_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        // The range-tree look-up of `pmemobj_tx_add_range`.
        m.compute(Cycle::new(self.costs.lookup_instructions));
        let c = m.core();
        let before = self.regions[c].ws.len();
        for b in blocks_of(addr, len) {
            if !self.regions[c].logged(b) {
                self.log_line(m, c, b);
            }
        }
        // The entries are durable before the store that needs them (not under the injected
        // `undo-without-fence`).
        if self.regions[c].ws.len() > before && self.bug != Some(Bug::UndoWithoutFence) {
            m.fence();
        }
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, true);
    }

    fn commit(&mut self, m: &mut Machine) {
        let r = &mut self.regions[m.core()];
        if r.ws.is_empty() {
            // Nothing logged, nothing stored: the log stays as it is.
            m.ack_through(m.txs_committed);
            return;
        }
        // Every write-back of the commit in program order (`ordering.write_order`). The phase
        // barrier holds by construction: the library fences the invalidation before returning.
        m.begin_ordered();
        if self.bug == Some(Bug::InvalidateBeforeFlush) {
            r.invalidate(m);
            r.flush_lines(m, &self.costs);
        } else {
            r.flush_lines(m, &self.costs);
            r.invalidate(m);
        }
        m.end_ordered();
        m.ack_through(m.txs_committed);
        r.clear();
        self.n.invalidations += 1;
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        let r = &mut self.regions[m.core()];
        if r.ws.is_empty() {
            return;
        }
        // `m.arch` holds the old bytes again: the library copies each entry back (reads the
        // entry, stores the line), flushes the lines, fences, then invalidates the log.
        for i in 0..r.ws.len() {
            let at = entry_block(r.log0, i as u64);
            m.compute(Cycle::new(self.costs.apply_instructions));
            m.access_block(at, false);
            m.access_block(BlockId(at.0 + 1), false);
            m.access_block(r.ws[i], true);
        }
        self.n.restored_lines += r.ws.len() as u64;
        for &b in &r.ws {
            m.clflush(b, WriteKind::Home);
        }
        m.fence();
        r.invalidate(m);
        r.clear();
        self.n.invalidations += 1;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.n.list()
    }
}
