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
//!
//! On N cores (docs/multicore.md): one `Region` per core, each a whole single-core log in
//! `Layout::log_region(c)`, holding that core's running transaction; a commit takes the next
//! global sequence number (the commit record's `order`), and truncations of all cores are
//! issued in that order ([`in_commit_order`]), the head carrying `home_below`.

use super::barrier::Barrier;
use super::redo::{in_commit_order, redo_load_store, RedoProtocol, RedoSet};
use super::{Bug, Protocol};
use crate::log::head::{LogFormat, LogHead};
use crate::log::wal::{CommitRecord, Descriptor, ADDRS_PER_DESC};
use crate::machine::Machine;
use crate::memctl::WriteTiming;
use crate::pmem::{Layout, WriteKind};
use crate::types::{Addr, BlockId, Cycle};

/// What `h-wal` is and how it is built (its line in the table of `registry.rs`).
pub static H_WAL: super::Registration<HWal> = super::Registration {
    desc: super::Descriptor {
        name: "h-wal",
        log_format: Some(LogFormat::HWal),
        stores_persist: false,
        speculates: false,
        bugs: &[Bug::AckBeforeDurable, Bug::CommitBeforeLog, Bug::TruncateBeforeCheckpoint, Bug::TruncateOutOfOrder],
        reads: &[],
        layout: super::Descriptor::plain_layout,
    },
    build: |b| HWal::new(b.layout, b.bug),
};

pub struct HWal {
    bug: Option<Bug>,
    /// Per core: its log region and running transaction.
    regions: Vec<Region>,
    /// More than one core: commit records carry the global order and heads `home_below`.
    multi: bool,
    /// Global commit sequence number of the latest commit (any core).
    order: u64,
    /// Cycle of the latest truncation issued (any core): truncations follow commit order.
    trunc_at: Cycle,
    /// Injected bug `commit-before-log`: commit-time log writes held back.
    held: Held,
}

/// Injected bug `commit-before-log`: while `on`, a transaction's commit-time log writes are
/// held back until its commit record is durable and acknowledged (the worst case of a missing
/// intra-tx ordering).
#[derive(Default)]
struct Held {
    on: bool,
    writes: Vec<(BlockId, WriteKind, Payload)>,
}

/// One core's log region (its head block first) and its running transaction.
struct Region {
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
    /// The strict-ordering phase barrier to the core's next transaction
    /// (`ordering.phase_barrier`).
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
        let regions = (0..layout.cores as usize)
            .map(|c| {
                let (log0, blocks) = layout.log_region(c);
                Region {
                    log0,
                    cap: blocks - 1,
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
                    tx_log_done: Cycle::ZERO,
                    redo: RedoSet::of_core(c),
                    barrier: Barrier::default(),
                }
            })
            .collect();
        HWal {
            bug,
            regions,
            multi: layout.cores > 1,
            order: 0,
            trunc_at: Cycle::ZERO,
            held: Held::default(),
        }
    }

    /// Steps 4 and 5: home writes, then the truncation once they, and those of every
    /// transaction committed before on any core, are durable.
    fn checkpoint_and_truncate(&mut self, m: &mut Machine, c: usize) {
        let early = self.bug == Some(Bug::TruncateBeforeCheckpoint);
        // One core: the region's own chain is the commit order.
        let in_order = self.multi && !early && self.bug != Some(Bug::TruncateOutOfOrder);
        let r = &mut self.regions[c];
        let own = r.redo.checkpoint(m, early);
        let at = in_commit_order(&mut self.trunc_at, own, in_order);
        let head = LogHead { format: LogFormat::HWal, start: r.tail, start_seq: r.seq + 1 };
        let home_below = if self.multi { self.order + 1 } else { 0 };
        m.defer_encoded(at, r.log0, WriteKind::LogHead, || head.encode_home(home_below));
        super::assert_head_advances((r.trunc_issued, 0), (r.tail, 0));
        r.trunc_issued = r.tail;
    }
}

impl Region {
    /// Log data block `b` (its current bytes) and its address in the open descriptor; returns
    /// the log block written. Inlined into the commit's loop over the write set.
    #[inline(always)]
    fn log_data(&mut self, m: &mut Machine, held: &mut Held, b: BlockId) -> BlockId {
        self.barrier.before_write(m);
        if self.desc_n == 0 {
            self.desc_pos = self.alloc(m);
        }
        let at = self.alloc(m);
        self.emit(m, held, at, WriteKind::LogData, Payload::Arch(b));
        self.desc_addrs[self.desc_n] = b.0 as u32;
        self.desc_n += 1;
        self.tx_blocks += 1;
        if self.desc_n == ADDRS_PER_DESC {
            self.write_desc(m, held);
        }
        at
    }

    /// Write the open descriptor (to the position taken for it before its first address).
    fn write_desc(&mut self, m: &mut Machine, held: &mut Held) {
        if held.on {
            let desc = Payload::Desc { seq: self.seq, n: self.desc_n as u8, addrs: self.desc_addrs };
            held.writes.push((self.desc_pos, WriteKind::LogMeta, desc));
        } else {
            // Encoded from the descriptor in place (only when payloads are kept).
            let (seq, addrs) = (self.seq, &self.desc_addrs[..self.desc_n]);
            let t = m.write_encoded(self.desc_pos, WriteKind::LogMeta, || Descriptor::encode_parts(seq, addrs));
            self.wrote_log(m, t);
        }
        self.desc_n = 0;
    }

    /// Issue one log write of this core's transaction (the running core waits for its
    /// acceptance), or hold it back.
    #[inline(always)]
    fn emit(&mut self, m: &mut Machine, held: &mut Held, at: BlockId, kind: WriteKind, p: Payload) {
        if held.on {
            held.writes.push((at, kind, p));
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

    /// The region is full: wait until every write is done, which makes every truncation
    /// issued so far durable, and reuse the space they free.
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

    /// After a log write: the running core waits for its acceptance, and the commit record
    /// will wait for its durability (`tx_log_done`).
    #[inline(always)]
    fn wrote_log(&mut self, m: &mut Machine, t: WriteTiming) {
        m.wait_until(t.accepted);
        self.tx_log_done = self.tx_log_done.max(t.durable);
    }
}

impl RedoProtocol for HWal {
    fn log_victim(&mut self, m: &mut Machine, c: usize, b: BlockId) -> BlockId {
        self.regions[c].log_data(m, &mut self.held, b)
    }

    fn redo(&mut self, c: usize) -> &mut RedoSet {
        &mut self.regions[c].redo
    }
}

impl Protocol for HWal {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::HWal, start: 0, start_seq: 1 }.write_regions(layout, image);
    }

    fn begin(&mut self, m: &mut Machine) {
        // Victims an access outside the protocol (a lock's) left for their owners.
        self.drain_victims(m);
        let r = &mut self.regions[m.core()];
        r.barrier.at_begin(m);
        m.begin_tx_order();
        r.tx_start = r.tail;
        r.tx_start_pos = r.tail_pos;
        r.tx_log_done = Cycle::ZERO;
    }

    redo_load_store!();

    fn commit(&mut self, m: &mut Machine) {
        let c = m.core();
        self.drain_victims(m);
        let held = &mut self.held;
        held.on = self.bug == Some(Bug::CommitBeforeLog);
        m.begin_ordered();
        // 1. Flush the transaction's lines out of the inner levels (`ordering.commit_flush`)
        // and log those still in the cache.
        let r = &mut self.regions[c];
        r.redo.flush_lines(m);
        for i in 0..r.redo.ws.len() {
            let b = r.redo.ws[i];
            if r.redo.take_tagged(m, i) {
                r.log_data(m, held, b);
            }
        }
        if r.desc_n > 0 {
            r.write_desc(m, held);
        }
        // 2. Intra-transaction ordering: the log must be durable before the commit record.
        if self.bug != Some(Bug::CommitBeforeLog) {
            m.wait_until(r.tx_log_done);
        }
        // 3. Commit record, with the next global sequence number, then acknowledge.
        self.order += 1;
        r.barrier.before_write(m);
        let at = r.alloc(m);
        let order = if self.multi { self.order } else { 0 };
        let rec = CommitRecord { seq: r.seq, blocks: r.tx_blocks, order };
        let t = m.write_encoded(at, WriteKind::Commit, || rec.encode());
        match self.bug {
            Some(Bug::AckBeforeDurable) => m.wait_until(t.accepted),
            _ => m.wait_until(t.durable),
        }
        let log_durable = if held.on { Cycle::ZERO } else { r.tx_log_done };
        super::assert_durable_at_ack(m.now, t.durable.max(log_durable), self.bug);
        m.ack_through(m.txs_committed);
        if held.on {
            // Injected bug: the log blocks reach the controller only now, behind the commit
            // record that vouches for them.
            held.on = false;
            for (at, kind, p) in std::mem::take(&mut held.writes) {
                r.emit(m, held, at, kind, p);
            }
        }
        // 4-5. Checkpoint and truncation proceed in the background (the next transaction's
        // writes wait for them under the phase barrier).
        self.checkpoint_and_truncate(m, c);
        m.end_ordered();
        let r = &mut self.regions[c];
        r.barrier.arm(m);
        r.seq += 1;
        r.redo.clear();
        r.tx_blocks = 0;
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        RedoSet::counters_of(self.regions.iter().map(|r| &r.redo))
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        self.drain_at_abort(m, m.core());
        let r = &mut self.regions[m.core()];
        r.redo.discard(m);
        // Log blocks written for evicted lines lie past the valid log; reuse their space.
        r.tail = r.tx_start;
        r.tail_pos = r.tx_start_pos;
        r.desc_n = 0;
        r.tx_blocks = 0;
    }
}
