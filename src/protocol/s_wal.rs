//! `s-wal`: software redo logging (docs/protocols/s-wal.md).
//!
//! A persistence library, written against ordinary loads, stores, `clflush` and `mfence`:
//! - each transactional store appends a log entry (header + new bytes) to a software log in the
//!   log area: two copies of the data now live in the cache, the log's and (after commit) the
//!   home's; the home line is not written until commit, so no uncommitted byte reaches home;
//! - loads inside a transaction first look the address up in the write set (a cost in
//!   instructions) and then read;
//! - commit: flush the transaction's log lines, fence; append and flush the commit entry,
//!   fence; store the new values home, flush those lines, fence; store the log head
//!   (truncation), flush, fence; return.
//!
//! Log format: [`crate::log::swal`]; recovery: [`crate::recovery::swal`].
//!
//! On N cores (docs/multicore.md): one `Region` per core, each a whole single-core log in
//! `Layout::log_region(c)`. A commit returns only after its truncation is durable, so a region
//! holds at most its core's committing transaction and no cross-core order is needed.

use super::{Bug, Protocol};
use crate::config::SwalConfig;
use crate::log::head::{LogFormat, LogHead};
use crate::log::swal::{EntryHeader, HEADER_BYTES, KIND_COMMIT, KIND_DATA};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockId, Cycle};

/// What `s-wal` is and how it is built (its line in the table of `registry.rs`).
pub static S_WAL: super::Registration<SWal> = super::Registration {
    desc: super::Descriptor {
        name: "s-wal",
        log_format: Some(LogFormat::SWal),
        stores_persist: true,
        speculates: false,
        bugs: &[Bug::AckBeforeDurable, Bug::TruncateBeforeCheckpoint, Bug::LazyTruncate],
        reads: &[],
        layout: super::Descriptor::plain_layout,
    },
    build: |b| SWal::new(b.layout, &b.cfg.swal, b.bug),
};

pub struct SWal {
    bug: Option<Bug>,
    costs: SwalConfig,
    /// Per core: its log region and running transaction.
    regions: Vec<Region>,
    buf: Vec<u8>,
}

/// One core's log region and running transaction.
struct Region {
    head_block: BlockId,
    /// Byte address of log offset 0 and capacity in bytes of the entry area.
    area: u64,
    cap: u64,
    seq: u64,
    tail: u64,
    tx_start: u64,
    head_start: u64,
    entries: u64,
    ws: Vec<(Addr, u32)>,
    /// Injected bug `lazy-truncate`: the truncation past the last commit is still to be done.
    lazy: bool,
}

impl SWal {
    pub fn new(layout: &Layout, costs: &SwalConfig, bug: Option<Bug>) -> SWal {
        let regions = (0..layout.cores as usize)
            .map(|c| {
                let (head_block, blocks) = layout.log_region(c);
                Region {
                    head_block,
                    area: head_block.addr().0 + 64,
                    cap: blocks * 64 - 64,
                    seq: 1,
                    tail: 0,
                    tx_start: 0,
                    head_start: 0,
                    entries: 0,
                    ws: Vec::with_capacity(256),
                    lazy: false,
                }
            })
            .collect();
        SWal { bug, costs: costs.clone(), regions, buf: Vec::with_capacity(4096) }
    }
}

impl Region {
    /// The (up to two, when wrapping) address ranges of log offsets `[from, to)`.
    fn ranges(&self, from: u64, to: u64) -> [(Addr, usize); 2] {
        let len = to - from;
        let p = from % self.cap;
        let first = len.min(self.cap - p);
        [(Addr(self.area + p), first as usize), (Addr(self.area), (len - first) as usize)]
    }

    /// Append `buf` to the log with ordinary stores through the cache.
    fn append(&mut self, m: &mut Machine, buf: &[u8]) {
        let len = buf.len() as u64;
        if self.tail + len - self.head_start > self.cap {
            m.fatal.get_or_insert_with(|| {
                format!("log.size_bytes too small: one transaction's S-WAL log exceeds {} bytes", self.cap)
            });
        }
        let mut done = 0usize;
        for (a, n) in self.ranges(self.tail, self.tail + len) {
            if n == 0 {
                continue;
            }
            m.arch[a.0 as usize..a.0 as usize + n].copy_from_slice(&buf[done..done + n]);
            m.access_range(a, n, true);
            done += n;
        }
        self.tail += len;
    }

    fn flush_log(&mut self, m: &mut Machine, from: u64, to: u64, kind: WriteKind) {
        for (a, n) in self.ranges(from, to) {
            for b in blocks_of(a, n) {
                m.clflush(b, kind);
            }
        }
    }

    fn write_in_place(&mut self, m: &mut Machine, costs: &SwalConfig) {
        for i in 0..self.ws.len() {
            let (a, len) = self.ws[i];
            m.compute(Cycle::new(costs.apply_instructions));
            m.access_range(a, len as usize, true);
        }
        for i in 0..self.ws.len() {
            let (a, len) = self.ws[i];
            for b in blocks_of(a, len as usize) {
                m.clflush(b, WriteKind::Home);
            }
        }
        m.fence();
    }

    /// Store, flush and fence the head past the running transaction (seq `seq`, log ending at
    /// `tail`).
    fn truncate(&mut self, m: &mut Machine) {
        self.truncate_to(m, self.tail, self.seq + 1);
    }

    /// Store, flush and fence the head `{start, start_seq}`.
    fn truncate_to(&mut self, m: &mut Machine, start: u64, start_seq: u64) {
        let head = LogHead { format: LogFormat::SWal, start, start_seq };
        m.arch[self.head_block.range()].copy_from_slice(&head.encode());
        m.access_block(self.head_block, true);
        m.clflush(self.head_block, WriteKind::LogHead);
        m.fence();
        self.head_start = start;
        self.lazy = false;
    }
}

/// An entry header in the configured form (`swal.packed_headers`).
fn header(costs: &SwalConfig, h: &EntryHeader) -> [u8; HEADER_BYTES] {
    if costs.packed_headers {
        h.encode_packed()
    } else {
        h.encode()
    }
}

impl Protocol for SWal {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::SWal, start: 0, start_seq: 1 }.write_regions(layout, image);
    }

    fn begin(&mut self, m: &mut Machine) {
        m.begin_tx_order();
        let r = &mut self.regions[m.core()];
        r.tx_start = r.tail;
    }

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if !self.regions[m.core()].ws.is_empty() {
            m.compute(Cycle::new(self.costs.lookup_instructions));
        }
        m.access_range(addr, len, false);
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.compute(Cycle::new(self.costs.append_instructions));
        let r = &mut self.regions[m.core()];
        let h = EntryHeader { seq: r.seq, addr: addr.0, len: len as u32, kind: KIND_DATA };
        self.buf.clear();
        self.buf.extend_from_slice(&header(&self.costs, &h));
        self.buf.extend_from_slice(&m.arch[addr.0 as usize..addr.0 as usize + len]);
        self.buf.resize(h.entry_bytes() as usize, 0);
        r.append(m, &self.buf);
        r.ws.push((addr, len as u32));
        r.entries += 1;
    }

    fn commit(&mut self, m: &mut Machine) {
        let r = &mut self.regions[m.core()];
        // Every write-back of the commit in program order (`ordering.write_order`). The phase
        // barrier holds by construction: the library fences the truncation before returning.
        m.begin_ordered();
        if r.lazy {
            // Injected bug `lazy-truncate`: the previous commit's truncation, done now.
            r.truncate_to(m, r.tx_start, r.seq);
        }
        // 1. The log entries are durable before the commit entry is written.
        r.flush_log(m, r.tx_start, r.tail, WriteKind::LogData);
        m.fence();
        // 2. The commit entry.
        let c_start = r.tail;
        let h = EntryHeader { seq: r.seq, addr: r.entries, len: 0, kind: KIND_COMMIT };
        self.buf.clear();
        let bytes = header(&self.costs, &h);
        self.buf.extend_from_slice(&bytes[..HEADER_BYTES]);
        r.append(m, &self.buf);
        r.flush_log(m, c_start, r.tail, WriteKind::Commit);
        if self.bug == Some(Bug::AckBeforeDurable) {
            // The library reports the transaction durable before fencing its commit entry.
            m.ack_through(m.txs_committed);
        }
        m.fence();
        // 3-4. In-place updates, then truncation (the injected bugs swap them, or leave the
        // truncation to the core's next commit, which does it before its own).
        match self.bug {
            Some(Bug::TruncateBeforeCheckpoint) => {
                r.truncate(m);
                r.write_in_place(m, &self.costs);
            }
            Some(Bug::LazyTruncate) => {
                r.write_in_place(m, &self.costs);
                r.lazy = true;
            }
            _ => {
                r.write_in_place(m, &self.costs);
                r.truncate(m);
            }
        }
        m.end_ordered();
        m.ack_through(m.txs_committed);
        r.seq += 1;
        r.tx_start = r.tail;
        r.ws.clear();
        r.entries = 0;
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        let r = &mut self.regions[m.core()];
        r.tail = r.tx_start;
        r.ws.clear();
        r.entries = 0;
    }
}
