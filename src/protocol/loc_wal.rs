//! `loc-wal`: Loose-Ordering Consistency, Eager Commit plus Speculative Persistence
//! (docs/protocols/loc-wal.md; `loc-extended.txt` 3.3-3.4 and 4.2).
//!
//! Transactions run in speculation windows of `sd` committed transactions. Inside a window
//! the program does not wait at commit: a committed transaction's lines stay in the cache,
//! tagged with it (the Tx Dirty Block Table: the LLC `aux`), and reach the log out of order,
//! when the cache evicts them (in block groups shared by the window's transactions) or when
//! the window completes. A later transaction that writes a block whose line still holds an
//! earlier transaction's unlogged version keeps that version in another way of the set (the
//! multi-versioned LLC). When the later transaction commits, the older version is dropped:
//! only the latest version reaches the log (write coalescing), and the Commit/Recovery Logic
//! (CRL) notes the dependency pair `<Tx, Ty, n>`. If the later transaction aborts instead,
//! the older version is rescued: written to the log as its own transaction's block. A version
//! pushed out of its set (version overflow) is logged as well.
//!
//! When the window completes, the CRL logs every still-cached latest version (the last block
//! of each transaction carrying its TxCnt = its logged plus coalesced blocks), writes the
//! window's pairs and per-transaction records (aborted; TxCnt of a transaction with no logged
//! block carrying it) into pair blocks of the window's last group, and orders that group's
//! META after every other log write of the window. The core stalls until the window is
//! durable (the CRL "stalls new transactions until the current speculation window
//! completes"); then LastCommittedTxID moves to the window's last transaction, the checkpoint
//! writes the window's blocks home and the head moves past the window once they are durable.
//! Windows are strictly ordered: the next one begins only after this one is durable.
//!
//! Acknowledgement and durability agree by construction: nothing is acknowledged before the
//! window's last META (after all its writes) is durable, and recovery finds every transaction
//! of a window whose writes are all durable committed.
//!
//! Modelling choices (docs/protocols/loc-wal.md): aborts come only to the running transaction
//! (one core, program-initiated aborts), so "succeeding transactions abort" never has work to
//! do; the rescue writes happen at the abort, as in the paper.

use super::redo::RedoSet;
use super::{Bug, Protocol};
use crate::cache::Slot;
use crate::log::ec::{BlkTag, Meta, DATA_SLOTS, GROUP_BLOCKS};
use crate::log::head::{LogFormat, LogHead};
use crate::log::loc::{self, Pair, PAIRS_PER_BLOCK};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::recovery::loc::MAX_LIVE_TXS;
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};

/// A window closes after this many transactions even if fewer than `sd` committed (aborts),
/// so that the live TxIDs stay within [`MAX_LIVE_TXS`].
const MAX_WINDOW_TXS: usize = 64;

/// A Tx State Table entry.
#[derive(Clone, Debug)]
struct TxSt {
    seq: u64,
    aborted: bool,
    /// Blocks logged for it so far.
    logged: u16,
    /// Its versions dropped in favour of a later committed transaction's.
    coalesced: u16,
    /// Group (index in the window) and slot of its last logged block.
    last: Option<(usize, usize)>,
    /// Its blocks in the window's write list: `ws[ws_start..ws_end]`.
    ws_start: usize,
    ws_end: usize,
}

/// A block group of the current window.
struct Group {
    sid: u64,
    at: BlockId,
    tags: [Option<BlkTag>; DATA_SLOTS],
    n: usize,
    data_done: Cycle,
    /// The META has been written at least once (a TxCnt set later needs a rewrite).
    written: bool,
    stale: bool,
}

/// An older version kept for the running transaction's first store to a block.
struct Version {
    block: BlockId,
    /// Window index of the transaction that wrote it.
    owner: usize,
    slot: Slot,
    data: BlockData,
}

#[derive(Default, Clone, Copy)]
struct Counters {
    coalesced_blocks: u64,
    version_overflows: u64,
    rescued_blocks: u64,
    dependency_pairs_written: u64,
    pair_blocks_written: u64,
    window_stall_cycles: u64,
    windows: u64,
    evicted_to_log: u64,
}

pub struct LocWal {
    bug: Option<Bug>,
    sd: usize,
    log0: BlockId,
    groups: u64,
    write_cycles: Cycle,
    win: Vec<TxSt>,
    committed_in_win: usize,
    /// Blocks first written by each transaction of the window (see `TxSt::ws_start`).
    ws: Vec<BlockId>,
    /// Where blocks of the window were logged (home, log block), for the checkpoint.
    logged_at: Vec<(BlockId, BlockId)>,
    wgroups: Vec<Group>,
    open: bool,
    next_sid: u64,
    next_seq: u64,
    safe_sid: u64,
    safe_seq: u64,
    trunc_sid: u64,
    trunc_seq: u64,
    /// Latest durable and latest completion cycle of the window's log writes.
    log_durable: Cycle,
    log_done: Cycle,
    /// The CRL's pair buffer: (Tx, Ty, n) by window index.
    deps: Vec<(usize, usize, u16)>,
    versions: Vec<Version>,
    /// Payloads of older versions copied before the running store changed them.
    snaps: Vec<(BlockId, BlockData)>,
    /// Injected `meta-before-data`: data writes of the window's close held past the ack.
    held: Vec<(BlockId, BlockId)>,
    closing: bool,
    checkpoint: RedoSet,
    pending: Vec<BlockId>,
    c: Counters,
}

/// LLC `aux` of a transaction's lines (non-zero; unique among the live transactions).
#[inline(always)]
fn aux_of(seq: u64) -> u32 {
    (seq & 0xFFFF) as u32 + 1
}

impl LocWal {
    pub fn new(layout: &Layout, sd: u32, write_cycles: Cycle, bug: Option<Bug>) -> LocWal {
        assert!((1..=32).contains(&sd), "validated by the CLI");
        assert!(layout.total_bytes() / 64 < (1 << 31) - 1, "versioned LLC tags hold 31-bit block numbers");
        LocWal {
            bug,
            sd: sd as usize,
            log0: layout.log_block0(),
            groups: (layout.log_blocks() - 1) / GROUP_BLOCKS,
            write_cycles,
            win: Vec::with_capacity(MAX_WINDOW_TXS),
            committed_in_win: 0,
            ws: Vec::with_capacity(4096),
            logged_at: Vec::with_capacity(1024),
            wgroups: Vec::with_capacity(64),
            open: false,
            next_sid: 0,
            next_seq: 0,
            safe_sid: 0,
            safe_seq: 0,
            trunc_sid: 0,
            trunc_seq: 0,
            log_durable: 0,
            log_done: 0,
            deps: Vec::new(),
            versions: Vec::with_capacity(64),
            snaps: Vec::with_capacity(64),
            held: Vec::new(),
            closing: false,
            checkpoint: RedoSet::default(),
            pending: Vec::with_capacity(1024),
            c: Counters::default(),
        }
    }

    /// Window index of the transaction whose lines carry `aux`.
    #[inline(always)]
    fn owner_of(&self, aux: u32) -> usize {
        let first = self.win[0].seq;
        let i = ((aux - 1) as u64).wrapping_sub(first) & 0xFFFF;
        debug_assert!((i as usize) < self.win.len(), "a tagged line outlived its window");
        i as usize
    }

    fn running(&self) -> usize {
        self.win.len() - 1
    }

    fn open_group(&mut self, m: &mut Machine) {
        if self.next_sid - self.safe_sid >= self.groups {
            m.quiesce();
            self.safe_sid = self.trunc_sid;
            if self.next_sid - self.safe_sid >= self.groups {
                m.fatal.get_or_insert_with(|| {
                    format!(
                        "log.size_bytes too small: a speculation window needs more than {} block groups",
                        self.groups
                    )
                });
            }
        }
        let sid = self.next_sid;
        self.next_sid += 1;
        let at = BlockId(self.log0.0 + 1 + GROUP_BLOCKS * (sid % self.groups));
        self.wgroups.push(Group {
            sid,
            at,
            tags: [None; DATA_SLOTS],
            n: 0,
            data_done: 0,
            written: false,
            stale: false,
        });
        self.open = true;
    }

    /// The next free slot of the open group (opening one if needed): (group index, slot, block).
    fn next_slot(&mut self, m: &mut Machine) -> (usize, usize, BlockId) {
        if !self.open || self.wgroups.last().is_none_or(|g| g.n == DATA_SLOTS) {
            self.open_group(m);
        }
        let gi = self.wgroups.len() - 1;
        let g = &mut self.wgroups[gi];
        let slot = g.n;
        g.n += 1;
        (gi, slot, BlockId(g.at.0 + slot as u64))
    }

    /// Log a version of `home` for window transaction `owner`: its bytes are `data`, or the
    /// program's current bytes. `last` gives the block its transaction's TxCnt.
    fn log_block(&mut self, m: &mut Machine, owner: usize, home: BlockId, data: Option<&BlockData>, last: bool) {
        let (gi, slot, at) = self.next_slot(m);
        let t = &mut self.win[owner];
        t.logged += 1;
        t.last = Some((gi, slot));
        let tx_cnt = if last { self.tx_cnt(owner) } else { 0 };
        let tag = BlkTag { addr: home.0 as u32, tx_cnt, tx_id: self.win[owner].seq as u8, ..Default::default() };
        self.wgroups[gi].tags[slot] = Some(tag);
        self.wgroups[gi].stale = true;
        if self.bug == Some(Bug::MetaBeforeData) && self.closing && data.is_none() {
            self.held.push((at, home));
        } else {
            let t = match data {
                Some(d) => m.write_encoded(at, WriteKind::LogData, || *d),
                None => m.write_from_arch(at, WriteKind::LogData, home),
            };
            m.wait_until(t.accepted);
            self.note_write(gi, t.done, t.durable);
        }
        self.logged_at.push((home, at));
        if slot + 1 == DATA_SLOTS {
            self.write_meta(m, gi, 0);
        }
    }

    fn note_write(&mut self, gi: usize, done: Cycle, durable: Cycle) {
        let g = &mut self.wgroups[gi];
        g.data_done = g.data_done.max(done);
        self.log_done = self.log_done.max(done);
        self.log_durable = self.log_durable.max(durable);
    }

    /// TxCnt of a window transaction: its log blocks plus its coalesced versions (only the
    /// former under the injected `ignore-dependency-pairs`).
    fn tx_cnt(&self, i: usize) -> u16 {
        let t = &self.win[i];
        if self.bug == Some(Bug::IgnoreDependencyPairs) {
            t.logged
        } else {
            t.logged + t.coalesced
        }
    }

    /// Write group `gi`'s META, started so that it completes after the group's data writes
    /// and after `also_after` (the window's other writes, for its last group).
    fn write_meta(&mut self, m: &mut Machine, gi: usize, also_after: Cycle) {
        let g = &self.wgroups[gi];
        let meta = Meta { sid: g.sid, tags: g.tags };
        let after = match self.bug {
            Some(Bug::MetaBeforeData) => 0,
            _ => (g.data_done.max(also_after) + 1).saturating_sub(self.write_cycles),
        };
        let t = m.write_encoded_after(BlockId(g.at.0 + DATA_SLOTS as u64), WriteKind::LogMeta, after, || meta.encode());
        m.wait_until(t.accepted);
        self.log_done = self.log_done.max(t.done);
        self.log_durable = self.log_durable.max(t.durable);
        let g = &mut self.wgroups[gi];
        g.written = true;
        g.stale = false;
    }

    /// Place the lines the last access pushed out of the LLC: a transaction's latest version
    /// goes to the log as its block; an older version (overflow) likewise, from its copy.
    fn drain_victims(&mut self, m: &mut Machine) {
        while let Some(v) = m.tx_victims.pop() {
            let owner = self.owner_of(v.tag);
            if v.version {
                let i = self.versions.iter().position(|x| x.block == v.block && x.owner == owner);
                let x = self.versions.swap_remove(i.expect("an evicted version is kept"));
                self.c.version_overflows += 1;
                self.log_block(m, owner, v.block, Some(&x.data), false);
            } else {
                self.c.evicted_to_log += 1;
                self.log_block(m, owner, v.block, None, false);
            }
        }
    }

    /// Is the version still in its slot (not pushed out)?
    fn version_present(m: &Machine, x: &Version, aux: u32) -> bool {
        m.hier.llc.is_version_of(x.slot, x.block) && m.hier.llc.aux(x.slot) == aux
    }

    /// The window is complete: log what remains, write its pairs, wait until it is durable,
    /// acknowledge, checkpoint, truncate.
    fn close_window(&mut self, m: &mut Machine) {
        self.closing = true;
        let mut records: Vec<Pair> = Vec::new();
        let mut pending = std::mem::take(&mut self.pending);
        for i in 0..self.win.len() {
            let t = &self.win[i];
            let tx_id = t.seq as u8;
            if t.aborted {
                records.push(Pair::aborted(tx_id));
                continue;
            }
            let aux = aux_of(t.seq);
            pending.clear();
            for &b in &self.ws[t.ws_start..t.ws_end] {
                if let Some(s) = m.hier.llc.find(b) {
                    if m.hier.llc.aux(s) == aux {
                        m.hier.llc.set_aux(s, 0);
                        pending.push(b);
                    }
                }
            }
            for (j, &b) in pending.iter().enumerate() {
                self.log_block(m, i, b, None, j + 1 == pending.len());
            }
            if pending.is_empty() {
                match self.win[i].last {
                    Some((gi, slot)) => {
                        let cnt = self.tx_cnt(i);
                        let tag = self.wgroups[gi].tags[slot].as_mut().expect("a logged slot");
                        tag.tx_cnt = cnt;
                        self.wgroups[gi].stale = true;
                    }
                    None => records.push(Pair::count(tx_id, self.tx_cnt(i))),
                }
            }
        }
        self.pending = pending;
        if self.bug != Some(Bug::IgnoreDependencyPairs) {
            for &(x, y, n) in &self.deps {
                records.push(Pair { tx: self.win[x].seq as u8, ty: self.win[y].seq as u8, n });
                self.c.dependency_pairs_written += 1;
            }
        }
        // Pair blocks; the METAs of their groups are written last.
        let mut first_pair_group = usize::MAX;
        for chunk in records.chunks(PAIRS_PER_BLOCK) {
            let (gi, slot, at) = self.next_slot(m);
            first_pair_group = first_pair_group.min(gi);
            let tag = BlkTag { addr: chunk.len() as u32, pair: true, ..Default::default() };
            self.wgroups[gi].tags[slot] = Some(tag);
            self.wgroups[gi].stale = true;
            let t = m.write_encoded(at, WriteKind::LogMeta, || loc::encode(chunk));
            m.wait_until(t.accepted);
            self.note_write(gi, t.done, t.durable);
            self.c.pair_blocks_written += 1;
        }
        // The other METAs still to write (a TxCnt set late, the open group), each after its
        // group's data; then the pair groups' METAs after every other log write of the window,
        // so that recovery sees pairs only once everything they vouch for is durable.
        for gi in 0..self.wgroups.len().min(first_pair_group) {
            if self.wgroups[gi].stale {
                self.write_meta(m, gi, 0);
            }
        }
        for gi in first_pair_group..self.wgroups.len() {
            let after = self.log_done;
            self.write_meta(m, gi, after);
        }
        self.closing = false;
        let before = m.now;
        if self.bug != Some(Bug::AckBeforeDurable) {
            m.wait_until(self.log_durable);
        }
        self.c.window_stall_cycles += m.now - before;
        m.ack_through(m.txs_committed);
        for (at, b) in std::mem::take(&mut self.held) {
            let t = m.write_from_arch(at, WriteKind::LogData, b);
            m.wait_until(t.accepted);
        }
        // Checkpoint: every block of the window home, once.
        let cp = &mut self.checkpoint;
        cp.ws.clear();
        for t in self.win.iter().filter(|t| !t.aborted) {
            cp.ws.extend_from_slice(&self.ws[t.ws_start..t.ws_end]);
        }
        cp.ws.sort_unstable_by_key(|b| b.0);
        cp.ws.dedup();
        cp.evicted.clear();
        cp.evicted.extend_from_slice(&self.logged_at);
        let trunc_at = cp.checkpoint(m, false);
        let head = LogHead { format: LogFormat::Loc, start: self.next_sid, start_seq: self.next_seq };
        m.defer_encoded(trunc_at, self.log0, WriteKind::LogHead, || head.encode());
        (self.trunc_sid, self.trunc_seq) = (self.next_sid, self.next_seq);
        self.c.windows += 1;
        self.win.clear();
        self.ws.clear();
        self.logged_at.clear();
        self.wgroups.clear();
        self.deps.clear();
        self.open = false;
        self.committed_in_win = 0;
        self.log_done = 0;
        self.log_durable = 0;
    }

    fn end_tx(&mut self) {
        let r = self.running();
        self.win[r].ws_end = self.ws.len();
        self.versions.clear();
        self.snaps.clear();
    }
}

impl Protocol for LocWal {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        let head = LogHead { format: LogFormat::Loc, start: 0, start_seq: 0 };
        image[layout.log_block0().range()].copy_from_slice(&head.encode());
    }

    fn begin(&mut self, m: &mut Machine) {
        if self.next_seq - self.safe_seq >= MAX_LIVE_TXS - 1 {
            m.quiesce();
            self.safe_seq = self.trunc_seq;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let n = self.ws.len();
        self.win.push(TxSt { seq, aborted: false, logged: 0, coalesced: 0, last: None, ws_start: n, ws_end: n });
    }

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, false);
        self.drain_victims(m);
    }

    fn before_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if !m.keep_bytes {
            return;
        }
        let mine = aux_of(self.win[self.running()].seq);
        for b in blocks_of(addr, len) {
            if let Some(s) = m.hier.llc.find(b) {
                let aux = m.hier.llc.aux(s);
                if aux != 0 && aux != mine && !self.snaps.iter().any(|&(x, _)| x == b) {
                    self.snaps.push((b, m.arch_block(b)));
                }
            }
        }
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let r = self.running();
        let mine = aux_of(self.win[r].seq);
        for b in blocks_of(addr, len) {
            let s = m.access_block(b, true).llc_slot;
            self.drain_victims(m);
            let aux = m.hier.llc.aux(s);
            if aux == mine {
                continue;
            }
            if aux != 0 {
                // An earlier transaction's unlogged version: keep it in another way.
                let owner = self.owner_of(aux);
                let data = self.snaps.iter().find(|&&(x, _)| x == b).map_or([0; 64], |&(_, d)| d);
                let slot = m.keep_version(b, s, aux);
                self.versions.push(Version { block: b, owner, slot, data });
                self.drain_victims(m);
            }
            m.hier.llc.set_aux(s, mine);
            self.ws.push(b);
        }
    }

    fn commit(&mut self, m: &mut Machine) {
        self.drain_victims(m);
        let r = self.running();
        // The older versions this transaction overwrote are dead: coalesced into it.
        for k in 0..self.versions.len() {
            let x = &self.versions[k];
            if !LocWal::version_present(m, x, aux_of(self.win[x.owner].seq)) {
                continue;
            }
            m.hier.llc.invalidate_slot(x.slot);
            let owner = x.owner;
            self.win[owner].coalesced += 1;
            self.c.coalesced_blocks += 1;
            match self.deps.iter_mut().find(|d| d.0 == owner && d.1 == r) {
                Some(d) => d.2 += 1,
                None => self.deps.push((owner, r, 1)),
            }
        }
        self.end_tx();
        self.committed_in_win += 1;
        if self.committed_in_win >= self.sd || self.win.len() >= MAX_WINDOW_TXS {
            self.close_window(m);
        }
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        self.drain_victims(m);
        let r = self.running();
        // Rescue: earlier transactions' versions of the blocks this one wrote go to the log.
        for x in std::mem::take(&mut self.versions) {
            if LocWal::version_present(m, &x, aux_of(self.win[x.owner].seq)) {
                m.hier.llc.invalidate_slot(x.slot);
                self.c.rescued_blocks += 1;
                self.log_block(m, x.owner, x.block, Some(&x.data), false);
            }
        }
        let mine = aux_of(self.win[r].seq);
        for i in self.win[r].ws_start..self.ws.len() {
            let b = self.ws[i];
            if m.hier.llc.find(b).is_some_and(|s| m.hier.llc.aux(s) == mine) {
                m.hier.invalidate(b);
            }
        }
        self.win[r].aborted = true;
        self.end_tx();
        if self.win.len() >= MAX_WINDOW_TXS {
            self.close_window(m);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.c;
        vec![
            ("coalesced_blocks", c.coalesced_blocks),
            ("version_overflows", c.version_overflows),
            ("rescued_blocks", c.rescued_blocks),
            ("dependency_pairs_written", c.dependency_pairs_written),
            ("pair_blocks_written", c.pair_blocks_written),
            ("window_stall_cycles", c.window_stall_cycles),
            ("windows", c.windows),
            ("evicted_to_log", c.evicted_to_log),
        ]
    }
}
