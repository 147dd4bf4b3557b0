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

use super::{Bug, Protocol};
use crate::config::SwalConfig;
use crate::log::head::{LogFormat, LogHead};
use crate::log::swal::{EntryHeader, HEADER_BYTES, KIND_COMMIT, KIND_DATA};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockId};

pub struct SWal {
    bug: Option<Bug>,
    costs: SwalConfig,
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
    buf: Vec<u8>,
}

impl SWal {
    pub fn new(layout: &Layout, costs: &SwalConfig, bug: Option<Bug>) -> SWal {
        SWal {
            bug,
            costs: costs.clone(),
            head_block: layout.log_block0(),
            area: layout.log_base + 64,
            cap: layout.log_bytes - 64,
            seq: 1,
            tail: 0,
            tx_start: 0,
            head_start: 0,
            entries: 0,
            ws: Vec::with_capacity(256),
            buf: Vec::with_capacity(4096),
        }
    }

    /// The (up to two, when wrapping) address ranges of log offsets `[from, to)`.
    fn ranges(&self, from: u64, to: u64) -> [(Addr, usize); 2] {
        let len = to - from;
        let p = from % self.cap;
        let first = len.min(self.cap - p);
        [(Addr(self.area + p), first as usize), (Addr(self.area), (len - first) as usize)]
    }

    /// Append `self.buf` to the log with ordinary stores through the cache.
    fn append_buf(&mut self, m: &mut Machine) {
        let len = self.buf.len() as u64;
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
            m.arch[a.0 as usize..a.0 as usize + n].copy_from_slice(&self.buf[done..done + n]);
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

    fn fence(&self, m: &mut Machine) {
        m.fence();
    }

    fn write_in_place(&mut self, m: &mut Machine) {
        for i in 0..self.ws.len() {
            let (a, len) = self.ws[i];
            m.compute(self.costs.apply_instructions);
            m.access_range(a, len as usize, true);
        }
        for i in 0..self.ws.len() {
            let (a, len) = self.ws[i];
            for b in blocks_of(a, len as usize) {
                m.clflush(b, WriteKind::Home);
            }
        }
        self.fence(m);
    }

    fn truncate(&mut self, m: &mut Machine) {
        let head = LogHead { format: LogFormat::SWal, start: self.tail, start_seq: self.seq + 1 };
        m.arch[self.head_block.range()].copy_from_slice(&head.encode());
        m.access_block(self.head_block, true);
        m.clflush(self.head_block, WriteKind::LogHead);
        self.fence(m);
        self.head_start = self.tail;
    }
}

impl Protocol for SWal {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::SWal, start: 0, start_seq: 1 }.write_initial(layout, image);
    }

    fn begin(&mut self, _m: &mut Machine) {
        self.tx_start = self.tail;
    }

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if !self.ws.is_empty() {
            m.compute(self.costs.lookup_instructions);
        }
        m.access_range(addr, len, false);
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.compute(self.costs.append_instructions);
        let h = EntryHeader { seq: self.seq, addr: addr.0, len: len as u32, kind: KIND_DATA };
        self.buf.clear();
        self.buf.extend_from_slice(&h.encode());
        self.buf.extend_from_slice(&m.arch[addr.0 as usize..addr.0 as usize + len]);
        self.buf.resize(h.entry_bytes() as usize, 0);
        self.append_buf(m);
        self.ws.push((addr, len as u32));
        self.entries += 1;
    }

    fn commit(&mut self, m: &mut Machine) {
        // Every write-back of the commit in program order (`ordering.write_order`). The phase
        // barrier holds by construction: the library fences the truncation before returning.
        m.begin_ordered();
        // 1. The log entries are durable before the commit entry is written.
        self.flush_log(m, self.tx_start, self.tail, WriteKind::LogData);
        self.fence(m);
        // 2. The commit entry.
        let c_start = self.tail;
        let h = EntryHeader { seq: self.seq, addr: self.entries, len: 0, kind: KIND_COMMIT };
        self.buf.clear();
        self.buf.extend_from_slice(&h.encode()[..HEADER_BYTES]);
        self.append_buf(m);
        self.flush_log(m, c_start, self.tail, WriteKind::Commit);
        if self.bug == Some(Bug::AckBeforeDurable) {
            // The library reports the transaction durable before fencing its commit entry.
            m.ack_through(m.txs_committed);
        }
        self.fence(m);
        // 3-4. In-place updates, then truncation (the injected bug swaps them).
        if self.bug == Some(Bug::TruncateBeforeCheckpoint) {
            self.truncate(m);
            self.write_in_place(m);
        } else {
            self.write_in_place(m);
            self.truncate(m);
        }
        m.end_ordered();
        m.ack_through(m.txs_committed);
        self.seq += 1;
        self.tx_start = self.tail;
        self.ws.clear();
        self.entries = 0;
    }

    fn abort(&mut self, _m: &mut Machine, _written: &[(Addr, u32)]) {
        self.tail = self.tx_start;
        self.ws.clear();
        self.entries = 0;
    }
}
