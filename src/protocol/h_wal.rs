//! `h-wal`: hardware redo logging from a single cached copy (docs/protocols/h-wal.md).
//!
//! During a transaction its stores dirty lines in the cache, tagged with the transaction; a
//! tagged line that is evicted goes to the log, never home. At commit the hardware:
//! 1. writes the log blocks of the tagged lines still cached, and the descriptors;
//! 2. waits until every log block of the transaction is durable;
//! 3. writes the commit record and waits until it is durable; then acknowledges;
//! 4. checkpoints: writes each block home (the lines become clean) without stalling the core;
//! 5. truncates: once every home write up to this transaction is durable, writes the log head.
//!
//! The next transaction starts only after the acknowledgement (strict inter-tx ordering).
//! Log format: [`crate::log::wal`]; recovery: [`crate::recovery::wal`].

use super::barrier::Barrier;
use super::redo::{redo_load_store, RedoProtocol, RedoSet};
use super::{Bug, Protocol};
use crate::log::head::{LogFormat, LogHead};
use crate::log::wal::{CommitRecord, Descriptor, ADDRS_PER_DESC};
use crate::machine::Machine;
use crate::memctl::WriteTiming;
use crate::pmem::{Layout, WriteKind};
use crate::types::{Addr, BlockId, Cycle};

pub struct HWal {
    bug: Option<Bug>,
    log0: BlockId,
    cap: u64,
    seq: u64,
    tail: u64,
    tx_start: u64,
    /// Record index (0..cap) of `tail` and of `tx_start`: advanced with them, so no log write
    /// needs a division.
    tail_pos: u64,
    tx_start_pos: u64,
    /// Log space before this position may be reused (its truncation is durable).
    safe_start: u64,
    /// Latest truncation scheduled.
    trunc_issued: u64,
    desc_pos: BlockId,
    desc_addrs: [u32; ADDRS_PER_DESC],
    desc_n: usize,
    tx_blocks: u32,
    tx_log_done: Cycle,
    /// The running transaction's blocks; checkpoint and truncation bookkeeping.
    redo: RedoSet,
    /// Injected bug `commit-before-log`: commit-time log writes held back until the commit
    /// record is durable and acknowledged (the worst case of a missing intra-tx ordering).
    held: Vec<(BlockId, WriteKind, Payload)>,
    holding: bool,
    /// The strict-ordering phase barrier to the next transaction (`ordering.phase_barrier`).
    barrier: Barrier,
}

/// The content of a log write: a data block's current bytes, or a descriptor (encoded only
/// when payloads are kept).
#[derive(Clone, Copy)]
enum Payload {
    Arch(BlockId),
    Desc { seq: u64, n: u8, addrs: [u32; ADDRS_PER_DESC] },
}

impl HWal {
    pub fn new(layout: &Layout, bug: Option<Bug>) -> HWal {
        assert!(layout.data_bytes / 64 <= u32::MAX as u64, "ADDR is a 32-bit block number");
        HWal {
            bug,
            log0: layout.log_block0(),
            cap: layout.log_blocks() - 1,
            seq: 1,
            tail: 0,
            tx_start: 0,
            tail_pos: 0,
            tx_start_pos: 0,
            safe_start: 0,
            trunc_issued: 0,
            desc_pos: BlockId(0),
            desc_addrs: [0; ADDRS_PER_DESC],
            desc_n: 0,
            tx_blocks: 0,
            tx_log_done: 0,
            redo: RedoSet::default(),
            held: Vec::new(),
            holding: false,
            barrier: Barrier::default(),
        }
    }

    /// Take the next log position; returns the log block that holds it.
    #[inline(always)]
    fn alloc(&mut self, m: &mut Machine) -> BlockId {
        if self.tail - self.safe_start >= self.cap {
            self.make_room(m);
        }
        let p = self.tail_pos;
        self.tail += 1;
        self.tail_pos = if p + 1 == self.cap { 0 } else { p + 1 };
        BlockId(self.log0.0 + 1 + p)
    }

    /// The log is full: wait until every write is done, which makes every truncation issued so
    /// far durable, and reuse the space they free.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, m: &mut Machine) {
        m.quiesce();
        self.safe_start = self.trunc_issued;
        if self.tail - self.safe_start >= self.cap {
            m.fatal.get_or_insert_with(|| {
                format!("log.size_bytes too small: a transaction needs more than {} log blocks", self.cap)
            });
        }
    }

    fn log_data(&mut self, m: &mut Machine, b: BlockId) -> BlockId {
        self.barrier.before_write(m);
        if self.desc_n == 0 {
            self.desc_pos = self.alloc(m);
        }
        let at = self.alloc(m);
        self.emit(m, at, WriteKind::LogData, Payload::Arch(b));
        self.desc_addrs[self.desc_n] = b.0 as u32;
        self.desc_n += 1;
        self.tx_blocks += 1;
        if self.desc_n == ADDRS_PER_DESC {
            self.write_desc(m);
        }
        at
    }

    fn write_desc(&mut self, m: &mut Machine) {
        if self.holding {
            let desc = Payload::Desc { seq: self.seq, n: self.desc_n as u8, addrs: self.desc_addrs };
            self.held.push((self.desc_pos, WriteKind::LogMeta, desc));
        } else {
            // Encoded from the descriptor in place (only when payloads are kept).
            let (seq, addrs) = (self.seq, &self.desc_addrs[..self.desc_n]);
            let t = m.write_encoded(self.desc_pos, WriteKind::LogMeta, || Descriptor::encode_parts(seq, addrs));
            self.wrote_log(m, t);
        }
        self.desc_n = 0;
    }

    /// After a log write: the core waits for its acceptance, and the commit record will wait
    /// for its durability (`tx_log_done`).
    #[inline(always)]
    fn wrote_log(&mut self, m: &mut Machine, t: WriteTiming) {
        m.wait_until(t.accepted);
        self.tx_log_done = self.tx_log_done.max(t.durable);
    }

    /// Issue one log write (the core waits for its acceptance), or hold it back.
    #[inline(always)]
    fn emit(&mut self, m: &mut Machine, at: BlockId, kind: WriteKind, p: Payload) {
        if self.holding {
            self.held.push((at, kind, p));
            return;
        }
        let t = match p {
            Payload::Arch(src) => m.write_from_arch(at, kind, src),
            Payload::Desc { seq, n, addrs } => {
                m.write_encoded(at, kind, || Descriptor::encode_parts(seq, &addrs[..n as usize]))
            }
        };
        self.wrote_log(m, t);
    }

    /// Steps 4 and 5: home writes, then the truncation once they are durable.
    fn checkpoint_and_truncate(&mut self, m: &mut Machine) {
        let early = self.bug == Some(Bug::TruncateBeforeCheckpoint);
        let at = self.redo.checkpoint(m, early);
        let head = LogHead { format: LogFormat::HWal, start: self.tail, start_seq: self.seq + 1 };
        m.defer_encoded(at, self.log0, WriteKind::LogHead, || head.encode());
        super::assert_head_advances((self.trunc_issued, 0), (self.tail, 0));
        self.trunc_issued = self.tail;
    }
}

impl RedoProtocol for HWal {
    fn log_victim(&mut self, m: &mut Machine, b: BlockId) -> BlockId {
        self.log_data(m, b)
    }

    fn redo(&mut self) -> &mut RedoSet {
        &mut self.redo
    }
}

impl Protocol for HWal {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::HWal, start: 0, start_seq: 1 }.write_initial(layout, image);
    }

    fn begin(&mut self, m: &mut Machine) {
        self.barrier.at_begin(m);
        self.tx_start = self.tail;
        self.tx_start_pos = self.tail_pos;
        self.tx_log_done = 0;
    }

    redo_load_store!();

    fn commit(&mut self, m: &mut Machine) {
        self.drain_victims(m);
        self.holding = self.bug == Some(Bug::CommitBeforeLog);
        m.begin_ordered();
        // 1. Flush the transaction's lines out of the inner levels (`ordering.commit_flush`)
        // and log those still in the cache.
        self.redo.flush_lines(m);
        for i in 0..self.redo.ws.len() {
            let b = self.redo.ws[i];
            if self.redo.take_tagged(m, i) {
                self.log_data(m, b);
            }
        }
        if self.desc_n > 0 {
            self.write_desc(m);
        }
        // 2. Intra-transaction ordering: the log must be durable before the commit record.
        if self.bug != Some(Bug::CommitBeforeLog) {
            m.wait_until(self.tx_log_done);
        }
        // 3. Commit record, then acknowledge.
        self.barrier.before_write(m);
        let at = self.alloc(m);
        let rec = CommitRecord { seq: self.seq, blocks: self.tx_blocks };
        let t = m.write_encoded(at, WriteKind::Commit, || rec.encode());
        match self.bug {
            Some(Bug::AckBeforeDurable) => m.wait_until(t.accepted),
            _ => m.wait_until(t.durable),
        }
        let log_durable = if self.holding { 0 } else { self.tx_log_done };
        super::assert_durable_at_ack(m.now, t.durable.max(log_durable), self.bug);
        m.ack_through(m.txs_committed);
        if self.holding {
            // Injected bug: the log blocks reach the controller only now, behind the commit
            // record that vouches for them.
            self.holding = false;
            for (at, kind, p) in std::mem::take(&mut self.held) {
                self.emit(m, at, kind, p);
            }
        }
        // 4-5. Checkpoint and truncation proceed in the background (the next transaction's
        // writes wait for them under the phase barrier).
        self.checkpoint_and_truncate(m);
        m.end_ordered();
        self.barrier.arm(m);
        self.seq += 1;
        self.redo.clear();
        self.tx_blocks = 0;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.redo.counters()
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        self.redo.discard(m);
        // Log blocks written for evicted lines lie past the valid log; reuse their space.
        self.tail = self.tx_start;
        self.tail_pos = self.tx_start_pos;
        self.desc_n = 0;
        self.tx_blocks = 0;
    }
}
