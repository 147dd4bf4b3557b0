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
//!
//! On N cores (docs/multicore.md): one `Core` per core, each with its own ring of groups in
//! `Layout::log_region(c)`; a commit takes the next global sequence number and writes it in an
//! order tag after the tag carrying TxCnt ([`BlkTag::order_tag`]); truncations of all cores are
//! issued in that order ([`in_commit_order`]), the head carrying `home_below`.

use super::barrier::Barrier;
use super::group::{self, Group, GroupRing};
use super::redo::{in_commit_order, redo_load_store, RedoProtocol, RedoSet};
use super::{Bug, Protocol};
use crate::log::ec::BlkTag;
use crate::log::head::{LogFormat, LogHead};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{Addr, BlockId, Cycle};

/// What `ec-wal` is and how it is built (its line in the table of `registry.rs`).
pub static EC_WAL: super::Registration<EcWal> = super::Registration {
    desc: super::Descriptor {
        name: "ec-wal",
        log_format: Some(LogFormat::Ec),
        stores_persist: false,
        speculates: false,
        bugs: &[Bug::AckBeforeDurable, Bug::MetaBeforeData, Bug::TruncateOutOfOrder],
        reads: &[],
        layout: super::Descriptor::plain_layout,
    },
    build: |b| EcWal::new(b.layout, b.cfg.min_write_cycles(), b.bug),
};

pub struct EcWal {
    bug: Option<Bug>,
    write_cycles: Cycle,
    /// Per core: its ring of groups and running transaction.
    cores: Vec<Core>,
    /// More than one core: transactions end with an order tag and heads carry `home_below`.
    multi: bool,
    /// Global commit sequence number of the latest commit (any core).
    order: u64,
    /// Cycle of the latest truncation issued (any core): truncations follow commit order.
    trunc_at: Cycle,
    /// Injected bug `meta-before-data`: data writes held back until after the acknowledgement.
    held: Vec<(BlockId, BlockId)>,
    committing: bool,
    /// Reused buffer of the blocks to log at commit.
    pending: Vec<BlockId>,
}

/// One core's log region (a ring of groups) and its running transaction.
struct Core {
    ring: GroupRing,
    redo: RedoSet,
    open: Option<Group>,
    tx_start_sid: u64,
    tx_id: u8,
    tx_blocks: u16,
    tx_log_done: Cycle,
    trunc_issued: u64,
    /// The strict-ordering phase barrier, kept between transactions (`ordering.phase_barrier`).
    barrier: Barrier,
}

impl EcWal {
    pub fn new(layout: &Layout, write_cycles: Cycle, bug: Option<Bug>) -> EcWal {
        assert!(layout.data_bytes / 64 <= u32::MAX as u64, "ADDR is a 32-bit block number");
        let cores = (0..layout.cores as usize)
            .map(|c| Core {
                ring: GroupRing::region(layout, c, "a transaction"),
                redo: RedoSet::of_core(c),
                open: None,
                tx_start_sid: 0,
                tx_id: 0,
                tx_blocks: 0,
                tx_log_done: Cycle::ZERO,
                trunc_issued: 0,
                barrier: Barrier::default(),
            })
            .collect();
        EcWal {
            bug,
            write_cycles,
            cores,
            multi: layout.cores > 1,
            order: 0,
            trunc_at: Cycle::ZERO,
            held: Vec::new(),
            committing: false,
            pending: Vec::with_capacity(1024),
        }
    }

    /// Log block `b` of core `c`'s transaction into the next slot of its region; `last` marks
    /// the transaction's final log block.
    fn log_block(&mut self, m: &mut Machine, c: usize, b: BlockId, last: bool) -> BlockId {
        let k = &mut self.cores[c];
        k.barrier.before_write(m);
        k.tx_blocks += 1;
        let tx_cnt = if last { k.tx_blocks } else { 0 };
        let tag = BlkTag { addr: b.0 as u32, tx_cnt, tx_id: k.tx_id, tid: 0, cid: 0, pair: false };
        let (mut g, at) = self.push(m, c, tag);
        if self.bug == Some(Bug::MetaBeforeData) && self.committing {
            self.held.push((at, b));
        } else {
            let t = group::write_data(m, at, b, None);
            let k = &mut self.cores[c];
            k.tx_log_done = k.tx_log_done.max(t.durable);
            g.note_data(t.done, t.durable);
        }
        if g.is_full() {
            self.write_meta(m, c, &mut g);
        }
        self.cores[c].open = Some(g);
        at
    }

    /// Take the next slot of core `c`'s open group (a new group when it is full) for `tag`:
    /// the group (taken out of `open`) and the slot's log block.
    fn push(&mut self, m: &mut Machine, c: usize, tag: BlkTag) -> (Group, BlockId) {
        let k = &mut self.cores[c];
        let mut g = match k.open.take() {
            Some(g) if !g.is_full() => g,
            _ => {
                let truncated = k.trunc_issued;
                k.ring.open(m, truncated, true)
            }
        };
        let (_, at) = g.push(tag);
        (g, at)
    }

    fn write_meta(&mut self, m: &mut Machine, c: usize, g: &mut Group) {
        let t = g.write_meta(m, self.write_cycles, self.bug);
        let k = &mut self.cores[c];
        k.tx_log_done = k.tx_log_done.max(t.durable);
    }

    /// Log the lines of core `c`'s transaction still cached, the last one carrying TxCnt, then
    /// on more than one core its order tag (global sequence number `order`), and close the
    /// last group.
    fn log_remaining(&mut self, m: &mut Machine, c: usize, order: u64) {
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        let redo = &self.cores[c].redo;
        pending.extend((0..redo.ws.len()).filter(|&i| redo.take_tagged(m, i)).map(|i| redo.ws[i]));
        for (i, &b) in pending.iter().enumerate() {
            self.log_block(m, c, b, i + 1 == pending.len());
        }
        let none_left = pending.is_empty();
        self.pending = pending;
        let Some(mut g) = self.cores[c].open.take() else { return };
        if none_left {
            // Every block was evicted earlier: the last one's tag takes the count now.
            let last = g.tags[g.n - 1].as_mut().expect("filled slot");
            last.tx_cnt = self.cores[c].tx_blocks;
            g.stale = true;
        }
        if self.multi {
            if g.is_full() {
                self.write_meta(m, c, &mut g);
            }
            self.cores[c].open = Some(g);
            let tx_id = self.cores[c].tx_id;
            (g, _) = self.push(m, c, BlkTag::order_tag(order, tx_id));
        }
        if g.stale {
            self.write_meta(m, c, &mut g);
        }
    }
}

impl Protocol for EcWal {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::Ec, start: 0, start_seq: 0 }.write_regions(layout, image);
    }

    fn begin(&mut self, m: &mut Machine) {
        // Victims an access outside the protocol (a lock's) left for their owners.
        self.drain_victims(m);
        let k = &mut self.cores[m.core()];
        k.barrier.at_begin(m);
        m.begin_tx_order();
        k.tx_start_sid = k.ring.next_sid;
        k.tx_log_done = Cycle::ZERO;
        k.tx_blocks = 0;
        k.tx_id = k.tx_id.wrapping_add(1);
    }

    redo_load_store!();

    fn commit(&mut self, m: &mut Machine) {
        let c = m.core();
        self.drain_victims(m);
        self.committing = true;
        self.cores[c].redo.flush_lines(m);
        self.order += 1;
        self.log_remaining(m, c, self.order);
        self.committing = false;
        // No commit record: durable once the log blocks and METAs are.
        let log_done = self.cores[c].tx_log_done;
        if self.bug != Some(Bug::AckBeforeDurable) {
            m.wait_until(log_done);
        }
        super::assert_durable_at_ack(m.now, log_done, self.bug);
        m.ack_through(m.txs_committed);
        for (at, b) in std::mem::take(&mut self.held) {
            // Injected bug: the data reaches the controller behind the META that counts it.
            let t = m.write_from_arch(at, WriteKind::LogData, b);
            m.wait_until(t.accepted);
        }
        // The in-place updates are ordered like H-WAL's (`ordering.write_order`); the log writes
        // only under `log_order = program` (the transaction's whole stream, from its begin):
        // Eager Commit removed the commit record and its wait, not their program order.
        m.begin_ordered();
        let k = &mut self.cores[c];
        let own = k.redo.checkpoint(m, false);
        // One core: the region's own chain is the commit order.
        let in_order = self.multi && self.bug != Some(Bug::TruncateOutOfOrder);
        let at = in_commit_order(&mut self.trunc_at, own, in_order);
        let head = LogHead { format: LogFormat::Ec, start: k.ring.next_sid, start_seq: 0 };
        let home_below = if self.multi { self.order + 1 } else { 0 };
        m.defer_encoded(at, k.ring.log0, WriteKind::LogHead, || head.encode_home(home_below));
        super::assert_head_advances((k.trunc_issued, 0), (k.ring.next_sid, 0));
        k.trunc_issued = k.ring.next_sid;
        m.end_ordered();
        k.barrier.arm(m);
        k.redo.clear();
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        RedoSet::counters_of(self.cores.iter().map(|k| &k.redo))
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        self.drain_at_abort(m, m.core());
        let k = &mut self.cores[m.core()];
        k.redo.discard(m);
        k.open = None;
        k.ring.next_sid = k.tx_start_sid;
        self.held.clear();
    }
}

impl RedoProtocol for EcWal {
    fn log_victim(&mut self, m: &mut Machine, c: usize, b: BlockId) -> BlockId {
        self.log_block(m, c, b, false)
    }

    fn redo(&mut self, c: usize) -> &mut RedoSet {
        &mut self.cores[c].redo
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pmem::DurableWrite;
    use crate::sim::Sim;
    use crate::workload::Pm;

    /// One EC-WAL transaction storing into four blocks (four banks) on `sets`' machine: the
    /// (start, durable) cycles of its commit's log writes, data and META, in issue order.
    pub(crate) fn log_writes_of_one_transaction<P: Protocol>(
        sets: &[&str],
        build: impl FnOnce(&Layout, &Config) -> P,
        txs: u64,
    ) -> Vec<(Cycle, Cycle, WriteKind)> {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let cfg = Config::build(None, &sets).unwrap();
        let layout = Layout::new(1 << 16, 1 << 20);
        let p = build(&layout, &cfg);
        let mut image = vec![0; layout.total_bytes() as usize];
        p.format(&layout, &mut image);
        let m = Machine::new(&cfg, layout, image, true);
        let mut sim = Sim::new(m, p, false);
        for t in 0..txs {
            sim.begin();
            for b in 0..4u64 {
                sim.store(Addr((4 * t + b) * 64), &[t as u8 + 1; 8]);
            }
            sim.commit();
        }
        let r = sim.m.record.as_ref().expect("recorded");
        let log = |w: &&DurableWrite| matches!(w.kind, WriteKind::LogData | WriteKind::LogMeta);
        r.durable.writes.iter().filter(log).map(|w| (w.started, w.durable, w.kind)).collect()
    }

    const STRICTEST: &str = "ordering.preset=strictest";
    const EXEMPT: &str = "ordering.log_order=exempt-ec-loc";

    fn ec(layout: &Layout, cfg: &Config) -> EcWal {
        EcWal::new(layout, cfg.min_write_cycles(), None)
    }

    /// Under the strictest reading (`log_order = program`) the commit's four log blocks and
    /// their META go one after another, each started when the previous one is durable (168
    /// cycles a write, Table I); with Eager Commit's log writes exempt they overlap across the
    /// banks, and the META starts after the data have started (its group's rule), not after
    /// they are durable.
    #[test]
    fn an_eager_commit_transactions_log_writes_are_serialised_under_strictest_and_overlap_when_exempt() {
        let w = log_writes_of_one_transaction(&[STRICTEST], ec, 1);
        let kinds: Vec<WriteKind> = w.iter().map(|x| x.2).collect();
        assert_eq!(kinds, [WriteKind::LogData, WriteKind::LogData, WriteKind::LogData, WriteKind::LogData, WriteKind::LogMeta]);
        let s0 = w[0].0;
        let expected: Vec<(Cycle, Cycle)> = (0..5).map(|i| (s0 + Cycle::new(168 * i), s0 + Cycle::new(168 * (i + 1)))).collect();
        assert_eq!(w.iter().map(|x| (x.0, x.1)).collect::<Vec<_>>(), expected, "strictest: {w:?}");
        let e = log_writes_of_one_transaction(&[STRICTEST, EXEMPT], ec, 1);
        let (s0, last) = (e[0].0, e[4].1);
        assert_eq!(e[0].0, w[0].0, "the same first log write");
        // The data writes start together on four banks and the META one cycle later (after its
        // group's data have started): the whole log phase in one write latency and a cycle,
        // where the strictest reading takes five.
        assert_eq!(e.iter().map(|x| x.0 - s0).collect::<Vec<_>>(), [0, 0, 0, 0, 1].map(Cycle::new), "exempt: {e:?}");
        assert_eq!(last - s0, Cycle::new(168 + 1), "exempt: {e:?}");
    }
}
