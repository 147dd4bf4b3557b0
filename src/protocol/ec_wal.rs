//! `ec-wal`: Eager Commit (docs/protocols/ec-wal.md): hardware redo logging without a commit
//! record, over the statically organised log of block groups ([`crate::log::ec`]).
//!
//! Log blocks are allocated when data leaves the cache: a tagged line evicted during the
//! transaction, and at commit the transaction's lines still cached, each take the next slot of
//! the open block group. A group's META is written when the group fills, and at commit for the
//! group holding the transaction's last block, whose tag carries TxCnt (the number of log blocks
//! of the transaction); the controller starts a META only after the group's data writes have
//! started, so it becomes durable after them. There is no commit record: the transaction is
//! durable, and acknowledged, once its data blocks and METAs are. Then, as in H-WAL, the
//! checkpoint writes the blocks home and the head moves past the transaction once they are
//! durable. Inter-transaction ordering stays strict (LOC with a speculation degree of 1): each
//! transaction closes its last group, so groups are not shared.
//!
//! Aborts rewind group allocation to the transaction's first group; TxIDs advance at every
//! begin, so a stale group of an aborted transaction can never be counted for another one.

use super::barrier::Barrier;
use super::group::{self, Group, GroupRing};
use super::redo::{redo_load_store, RedoProtocol, RedoSet};
use super::{Bug, Protocol};
use crate::log::ec::BlkTag;
use crate::log::head::{LogFormat, LogHead};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{Addr, BlockId, Cycle};

pub struct EcWal {
    bug: Option<Bug>,
    ring: GroupRing,
    write_cycles: Cycle,
    redo: RedoSet,
    open: Option<Group>,
    tx_start_sid: u64,
    tx_id: u8,
    tx_blocks: u16,
    tx_log_done: Cycle,
    trunc_issued: u64,
    /// Injected bug `meta-before-data`: data writes held back until after the acknowledgement.
    held: Vec<(BlockId, BlockId)>,
    committing: bool,
    /// Reused buffer of the blocks to log at commit.
    pending: Vec<BlockId>,
    /// The strict-ordering phase barrier, kept between transactions (`ordering.phase_barrier`).
    barrier: Barrier,
}

impl EcWal {
    pub fn new(layout: &Layout, write_cycles: Cycle, bug: Option<Bug>) -> EcWal {
        assert!(layout.data_bytes / 64 <= u32::MAX as u64, "ADDR is a 32-bit block number");
        EcWal {
            bug,
            ring: GroupRing::new(layout, "a transaction"),
            write_cycles,
            redo: RedoSet::default(),
            open: None,
            tx_start_sid: 0,
            tx_id: 0,
            tx_blocks: 0,
            tx_log_done: 0,
            trunc_issued: 0,
            held: Vec::new(),
            committing: false,
            pending: Vec::with_capacity(1024),
            barrier: Barrier::default(),
        }
    }

    /// Log block `b` into the next slot; `last` marks the transaction's final log block.
    fn log_block(&mut self, m: &mut Machine, b: BlockId, last: bool) -> BlockId {
        self.barrier.before_write(m);
        let mut g = match self.open.take() {
            Some(g) if !g.is_full() => g,
            _ => self.ring.open(m, self.trunc_issued, true),
        };
        self.tx_blocks += 1;
        let tx_cnt = if last { self.tx_blocks } else { 0 };
        let (_, at) = g.push(BlkTag { addr: b.0 as u32, tx_cnt, tx_id: self.tx_id, tid: 0, cid: 0, pair: false });
        if self.bug == Some(Bug::MetaBeforeData) && self.committing {
            self.held.push((at, b));
        } else {
            let t = group::write_data(m, at, b, None);
            self.tx_log_done = self.tx_log_done.max(t.durable);
            g.note_data(t.done);
        }
        if g.is_full() {
            self.write_meta(m, &mut g);
        }
        self.open = Some(g);
        at
    }

    fn write_meta(&mut self, m: &mut Machine, g: &mut Group) {
        let t = g.write_meta(m, 0, self.write_cycles, self.bug);
        self.tx_log_done = self.tx_log_done.max(t.durable);
    }

    /// Log the lines still cached, the last one carrying TxCnt, and close the last group.
    fn log_remaining(&mut self, m: &mut Machine) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        let redo = &self.redo;
        pending.extend((0..redo.ws.len()).filter(|&i| redo.take_tagged(m, i)).map(|i| redo.ws[i]));
        for (i, &b) in pending.iter().enumerate() {
            self.log_block(m, b, i + 1 == pending.len());
        }
        let none_left = pending.is_empty();
        self.pending = pending;
        let Some(mut g) = self.open.take() else { return };
        if none_left {
            // Every block was evicted earlier: the last one's tag takes the count now.
            let last = g.tags[g.n - 1].as_mut().expect("filled slot");
            last.tx_cnt = self.tx_blocks;
            g.stale = true;
        }
        if g.stale {
            self.write_meta(m, &mut g);
        }
    }
}

impl Protocol for EcWal {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::Ec, start: 0, start_seq: 0 }.write_initial(layout, image);
    }

    fn begin(&mut self, m: &mut Machine) {
        self.barrier.at_begin(m);
        self.tx_start_sid = self.ring.next_sid;
        self.tx_log_done = 0;
        self.tx_blocks = 0;
        self.tx_id = self.tx_id.wrapping_add(1);
    }

    redo_load_store!();

    fn commit(&mut self, m: &mut Machine) {
        self.drain_victims(m);
        self.committing = true;
        self.redo.flush_lines(m);
        self.log_remaining(m);
        self.committing = false;
        // No commit record: durable once the log blocks and METAs are.
        if self.bug != Some(Bug::AckBeforeDurable) {
            m.wait_until(self.tx_log_done);
        }
        super::assert_durable_at_ack(m.now, self.tx_log_done, self.bug);
        m.ack_through(m.txs_committed);
        for (at, b) in std::mem::take(&mut self.held) {
            // Injected bug: the data reaches the controller behind the META that counts it.
            let t = m.write_from_arch(at, WriteKind::LogData, b);
            m.wait_until(t.accepted);
        }
        // The in-place updates are ordered like H-WAL's (`ordering.write_order`); the log writes
        // are not: Eager Commit removed the intra-transaction ordering.
        m.begin_ordered();
        let at = self.redo.checkpoint(m, false);
        let head = LogHead { format: LogFormat::Ec, start: self.ring.next_sid, start_seq: 0 };
        m.defer_encoded(at, self.ring.log0, WriteKind::LogHead, || head.encode());
        super::assert_head_advances((self.trunc_issued, 0), (self.ring.next_sid, 0));
        self.trunc_issued = self.ring.next_sid;
        m.end_ordered();
        self.barrier.arm(m);
        self.redo.clear();
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.redo.counters()
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        self.redo.discard(m);
        self.open = None;
        self.ring.next_sid = self.tx_start_sid;
        self.held.clear();
    }
}

impl RedoProtocol for EcWal {
    fn log_victim(&mut self, m: &mut Machine, b: BlockId) -> BlockId {
        self.log_block(m, b, false)
    }

    fn redo(&mut self) -> &mut RedoSet {
        &mut self.redo
    }
}
