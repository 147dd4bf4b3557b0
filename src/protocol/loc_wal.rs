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
//! (program-initiated aborts), so "succeeding transactions abort" never has work to do; the
//! rescue writes happen at the abort, as in the paper.
//!
//! On N cores (docs/multicore.md, "LOC-WAL"): one `Win` per core, each with its own window
//! and its own ring of groups in `Layout::log_region(c)`; tags carry the core (CID), the LLC
//! `aux` names core and transaction ([`window::aux_of_core`]). A window ends with an order tag
//! ([`loc::order_tag`]) giving its global order number, and the heads carry `home_below`. A
//! load or store of a line tagged by another core's window is a cross-core dependency
//! ([`CrossDeps`]): that window is made durable first (a forced close; a transaction running on
//! its core is carried over into the core's next window).

use super::barrier::Barrier;
use super::group::{self, Group, GroupRing};
use super::redo::{in_commit_order, RedoSet};
use super::window::{self, aux_of_core, core_of_aux, CrossDeps, Version, Versions, MAX_WINDOW_TXS};
use super::{Bug, Protocol};
use crate::cache::Victim;
use crate::log::ec::{BlkTag, DATA_SLOTS};
use crate::log::head::{LogFormat, LogHead};
use crate::log::loc::{self, Pair, MAX_LIVE_TXS, PAIRS_PER_BLOCK};
use crate::machine::{Machine, Stream};
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};

/// What `loc-wal` is and how it is built (its line in the table of `registry.rs`).
pub static LOC_WAL: super::Registration<LocWal> = super::Registration {
    desc: super::Descriptor {
        name: "loc-wal",
        log_format: Some(LogFormat::Loc),
        stores_persist: false,
        speculates: true,
        bugs: &[Bug::AckBeforeDurable, Bug::MetaBeforeData, Bug::IgnoreDependencyPairs, Bug::DependentBeforeSource],
        reads: &["loc.speculation_degree", "loc.two_slot_head"],
        layout: |layout, cfg| window::needs_two_ways(cfg, "loc-wal").map(|()| layout),
    },
    build: |b| {
        let p = LocWal::new(b.layout, b.cfg.loc.speculation_degree, b.cfg.min_write_cycles(), b.bug);
        p.with_two_slot_head(b.cfg.loc.two_slot_head)
    },
};

/// A Tx State Table entry (its CID is the [`Win`]'s core).
#[derive(Clone, Debug)]
struct TxSt {
    seq: u64,
    aborted: bool,
    /// Blocks logged for it so far (in the current window).
    logged: u16,
    /// Its versions dropped in favour of a later committed transaction's.
    coalesced: u16,
    /// Group (index in the window) and slot of its last logged block.
    last: Option<(usize, usize)>,
    /// Its blocks in the window's write list: `ws[ws_start..ws_end]`.
    ws_start: usize,
    ws_end: usize,
    /// Its ordered write stream under `ordering.log_order = program`: each of its log writes
    /// after the previous one, whichever transaction of the window is running (Speculative
    /// Persistence keeps the streams of a window's transactions apart, each in its program
    /// order).
    stream: Stream,
}

counters! {
    Counters {
        coalesced_blocks,
        version_overflows,
        rescued_blocks,
        dependency_pairs_written,
        pair_blocks_written,
        window_stall_cycles,
        windows,
        evicted_to_log,
    }
}

counters! {
    CrossCounters {
        cross_core_deps,
        forced_closes,
        forced_closes_mid_tx,
        relogged_blocks,
    }
}

/// What the cores' windows share on N cores: the global window order and the truncation
/// chain that follows it.
#[derive(Default)]
struct Order {
    /// Order number of the latest window closed (any core).
    last: u64,
    /// Cycle of the latest truncation issued (any core).
    trunc_at: Cycle,
}

pub struct LocWal {
    /// Per core: its window, log region and Commit/Recovery Logic state.
    w: Vec<Win>,
    multi: bool,
    bug: Option<Bug>,
    deps: CrossDeps,
    order: Order,
    x: CrossCounters,
}

/// One core's speculation window, Tx State Table, log region and CRL.
struct Win {
    core: usize,
    multi: bool,
    bug: Option<Bug>,
    sd: usize,
    ring: GroupRing,
    write_cycles: Cycle,
    win: Vec<TxSt>,
    committed_in_win: usize,
    /// Blocks first written by each transaction of the window (see `TxSt::ws_start`).
    ws: Vec<BlockId>,
    /// Where blocks of the window were logged (home, log block), for the checkpoint.
    logged_at: Vec<(BlockId, BlockId)>,
    /// The window's block groups; the last one is open unless `open` is false.
    wgroups: Vec<Group>,
    open: bool,
    next_seq: u64,
    safe_seq: u64,
    trunc_sid: u64,
    trunc_seq: u64,
    /// Latest durable and latest completion cycle of the window's log writes.
    log_durable: Cycle,
    /// Cycle at which the core's latest closed window was acknowledged. On N cores a window
    /// closed for another core (a forced close) is acknowledged on that core's clock, which
    /// may be ahead of this core's: the core's next window is acknowledged no earlier (its
    /// windows become durable in order, and an acknowledgement covers every earlier one).
    acked_at: Cycle,
    log_done: Cycle,
    /// The CRL's pair buffer: (Tx, Ty, n) by window index.
    deps: Vec<(usize, usize, u16)>,
    versions: Versions,
    /// Injected `meta-before-data`: data writes of the window's close held past the ack.
    held: Vec<(BlockId, BlockId)>,
    closing: bool,
    checkpoint: RedoSet,
    pending: Vec<BlockId>,
    /// The strict-ordering phase barrier, kept only between windows (`ordering.phase_barrier`).
    barrier: Barrier,
    /// Transactions committed on this core (acknowledged when their window is durable).
    committed: u64,
    /// `ordering.log_order = program` orders every write ([`Machine::begin_tx_order`]): each
    /// transaction's log writes go in its own stream, the close's in one more.
    program: bool,
    /// Number of the open window (from 1); every earlier window of the core is durable.
    number: u64,
    /// A transaction is running (begun, not yet committed or aborted).
    in_tx: bool,
    /// Signature of the homes in `logged_at` (N cores: [`Win::logged_in_window`]).
    logged_sig: [u64; 64],
    c: Counters,
    /// The head block last written (`loc.two_slot_head`: the next write keeps its newest slot).
    head_block: crate::types::BlockData,
}

impl LocWal {
    /// The log head in the two-slot form (`loc.two_slot_head`, docs/formats/wal-log.md): on one
    /// core the form without `home_below`, on N cores each region's head in the form with it.
    pub fn with_two_slot_head(mut self, on: bool) -> LocWal {
        if on {
            let head = LogHead { format: LogFormat::Loc, start: 0, start_seq: 0 };
            let first = if self.multi { head.encode_two_slot_home(0) } else { head.encode_two_slot() };
            for w in &mut self.w {
                w.head_block = first;
            }
        }
        self
    }

    pub fn new(layout: &Layout, sd: u32, write_cycles: Cycle, bug: Option<Bug>) -> LocWal {
        assert!(window::SD_RANGE.contains(&sd), "checked by Config::validate");
        assert!(layout.total_bytes() / 64 < (1 << 31) - 1, "versioned LLC tags hold 31-bit block numbers");
        let cores = layout.cores as usize;
        LocWal {
            w: (0..cores).map(|c| Win::new(layout, c, sd, write_cycles, bug)).collect(),
            multi: cores > 1,
            bug,
            deps: CrossDeps::new(cores),
            order: Order::default(),
            x: CrossCounters::default(),
        }
    }

    /// Place the lines the last access pushed out of the LLC, each by the core whose tag it
    /// carries (an access of one core may evict another core's window lines).
    fn drain(&mut self, m: &mut Machine) {
        while let Some(v) = m.tx_victims.pop() {
            let c = if self.multi { core_of_aux(v.tag) } else { 0 };
            self.w[c].place_victim(m, v);
        }
    }

    /// Cross-core dependency detection before a load, or before a store changes the bytes
    /// (`before_store`), of the running core `c`: a line
    /// tagged by another core's window transaction makes `c`'s window depend on that window,
    /// which is closed (made durable) now, before the access. Under the injected
    /// `dependent-before-source` it is not; a store then logs the other core's version for it
    /// first, as an eviction would, so that no line holds two cores' versions.
    #[cold]
    fn cross(&mut self, m: &mut Machine, addr: Addr, len: usize, store: bool) {
        let c = m.core();
        // Lines left by an access outside the protocol (a lock's) go to their logs first.
        self.drain(m);
        for b in blocks_of(addr, len) {
            let aux = m.hier.llc.find(b).map_or(0, |s| m.hier.llc.aux(s));
            if aux == 0 || core_of_aux(aux) == c {
                // Not tagged: a version of another core's open window may have left the LLC
                // for the log (its window is still not durable).
                if let Some(i) = (0..self.w.len()).find(|&i| i != c && self.w[i].logged_in_window(b)) {
                    self.x.cross_core_deps += 1;
                    self.deps.note(c, i, self.w[i].number);
                    if self.bug != Some(Bug::DependentBeforeSource) {
                        self.force(m, i);
                    }
                }
                continue;
            }
            let s = m.hier.llc.find(b).expect("a tagged line");
            let i = core_of_aux(aux);
            self.x.cross_core_deps += 1;
            self.deps.note(c, i, self.w[i].number);
            if self.bug != Some(Bug::DependentBeforeSource) {
                self.force(m, i);
            } else if store {
                let data = if m.keep_bytes { m.arch_block(b) } else { [0; 64] };
                let w = &mut self.w[i];
                let owner = w.owner_of(aux);
                w.log_block(m, owner, b, Some(&data), false);
                m.hier.llc.set_aux(s, 0);
            }
        }
    }

    /// Close core `i`'s open window now, for a dependent on another core.
    fn force(&mut self, m: &mut Machine, i: usize) {
        self.x.forced_closes += 1;
        if self.w[i].in_tx {
            self.x.forced_closes_mid_tx += 1;
        }
        self.x.relogged_blocks += self.w[i].force_close(m, &mut self.order);
    }

    /// Core `c`'s window is complete: every window it depends on is made durable first (they
    /// are, unless the injected `dependent-before-source` skipped that), then it closes.
    fn close(&mut self, m: &mut Machine, c: usize) {
        if self.multi {
            for (i, w) in self.deps.sources(c) {
                if self.w[i].number <= w && self.bug != Some(Bug::DependentBeforeSource) {
                    self.force(m, i);
                }
            }
        }
        self.w[c].close_window(m, &mut self.order, &[]);
        if self.multi {
            self.deps.clear(c);
        }
    }
}

impl Win {
    fn new(layout: &Layout, core: usize, sd: u32, write_cycles: Cycle, bug: Option<Bug>) -> Win {
        Win {
            core,
            multi: layout.cores > 1,
            bug,
            sd: sd as usize,
            ring: GroupRing::region(layout, core, "a speculation window"),
            write_cycles,
            win: Vec::with_capacity(MAX_WINDOW_TXS),
            committed_in_win: 0,
            ws: Vec::with_capacity(4096),
            logged_at: Vec::with_capacity(1024),
            wgroups: Vec::with_capacity(64),
            open: false,
            next_seq: 0,
            safe_seq: 0,
            trunc_sid: 0,
            trunc_seq: 0,
            log_durable: Cycle::ZERO,
            acked_at: Cycle::ZERO,
            log_done: Cycle::ZERO,
            deps: Vec::new(),
            versions: Versions::default(),
            held: Vec::new(),
            closing: false,
            checkpoint: RedoSet::default(),
            head_block: LogHead { format: LogFormat::Loc, start: 0, start_seq: 0 }.encode(),
            pending: Vec::with_capacity(1024),
            barrier: Barrier::default(),
            committed: 0,
            program: false,
            number: 1,
            in_tx: false,
            logged_sig: [0; 64],
            c: Counters::default(),
        }
    }

    /// Was a version of `b` logged in the open window (evicted, rescued, overflowed)? A
    /// signature of 4096 bits filters, the window's log list confirms.
    #[inline]
    fn logged_in_window(&self, b: BlockId) -> bool {
        let h = (b.0 & 4095) as usize;
        self.logged_sig[h / 64] >> (h % 64) & 1 == 1 && self.logged_at.iter().any(|&(x, _)| x == b)
    }

    /// LLC `aux` of this core's window transaction `seq`.
    #[inline(always)]
    fn aux(&self, seq: u64) -> u32 {
        aux_of_core(self.core, seq)
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
    /// Put `tag` into the next free slot of the open group (opening one if needed):
    /// (group index, slot, block).
    fn next_slot(&mut self, m: &mut Machine, tag: BlkTag) -> (usize, usize, BlockId) {
        if !self.open || self.wgroups.last().is_none_or(|g| g.is_full()) {
            let g = self.ring.open(m, self.trunc_sid, true);
            self.wgroups.push(g);
            self.open = true;
        }
        let gi = self.wgroups.len() - 1;
        let (slot, at) = self.wgroups[gi].push(tag);
        (gi, slot, at)
    }

    /// Log a version of `home` for window transaction `owner`: its bytes are `data`, or the
    /// program's current bytes. `last` gives the block its transaction's TxCnt.
    fn log_block(&mut self, m: &mut Machine, owner: usize, home: BlockId, data: Option<&BlockData>, last: bool) {
        self.barrier.before_write(m);
        let outer = self.program.then(|| m.swap_stream(self.win[owner].stream));
        self.log_block_in_stream(m, owner, home, data, last);
        if let Some(outer) = outer {
            self.win[owner].stream = m.swap_stream(outer);
        }
    }

    /// [`Win::log_block`] once the write's stream is chosen.
    fn log_block_in_stream(&mut self, m: &mut Machine, owner: usize, home: BlockId, data: Option<&BlockData>, last: bool) {
        self.win[owner].logged += 1;
        let tx_cnt = if last { self.tx_cnt(owner) } else { 0 };
        let tag = BlkTag {
            addr: home.0 as u32,
            tx_cnt,
            tx_id: self.win[owner].seq as u8,
            cid: self.core as u8,
            ..Default::default()
        };
        let (gi, slot, at) = self.next_slot(m, tag);
        self.win[owner].last = Some((gi, slot));
        if self.bug == Some(Bug::MetaBeforeData) && self.closing && data.is_none() {
            self.held.push((at, home));
        } else {
            // Under `log_order = program` the core does not wait for the write: it joins its
            // transaction's stream, which the controller accepts write by write.
            let t = if self.program { group::issue_data(m, at, home, data) } else { group::write_data(m, at, home, data) };
            self.note_write(gi, t.done, t.durable);
        }
        self.logged_at.push((home, at));
        if self.multi {
            let h = (home.0 & 4095) as usize;
            self.logged_sig[h / 64] |= 1 << (h % 64);
        }
        if slot + 1 == DATA_SLOTS {
            self.write_meta(m, gi);
        }
    }

    fn note_write(&mut self, gi: usize, done: Cycle, durable: Cycle) {
        self.wgroups[gi].note_data(done, durable);
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

    /// Write group `gi`'s META, completing after the writes noted in the group.
    fn write_meta(&mut self, m: &mut Machine, gi: usize) {
        let t = self.wgroups[gi].write_meta(m, self.write_cycles, self.bug);
        self.log_done = self.log_done.max(t.done);
        self.log_durable = self.log_durable.max(t.durable);
    }

    /// Place one line pushed out of the LLC: a transaction's latest version goes to the log as
    /// its block; an older version (overflow) likewise, from its copy.
    fn place_victim(&mut self, m: &mut Machine, v: Victim) {
        let owner = self.owner_of(v.tag);
        if v.version {
            let kept = &mut self.versions.kept;
            let i = kept.iter().position(|x| x.block == v.block && x.aux == v.tag);
            let x = kept.swap_remove(i.expect("an evicted version is kept"));
            self.c.version_overflows += 1;
            self.log_block(m, owner, v.block, Some(&x.data), false);
        } else {
            self.c.evicted_to_log += 1;
            self.log_block(m, owner, v.block, None, false);
        }
    }

    /// The window is complete: its named phases, in order. Windows of a core are strictly
    /// ordered: the next one begins only after this one is durable. `carried`: blocks written
    /// by a running transaction carried over into the next window (a forced close), whose home
    /// copies take the window's bytes copied before that transaction's first store.
    fn close_window(&mut self, m: &mut Machine, ord: &mut Order, carried: &[BlockId]) {
        // Under `log_order = program` the close's own writes (pairs, METAs, checkpoint, head)
        // form one stream, apart from the running transaction's (on N cores another core's).
        let outer = self.program.then(|| m.swap_stream(Stream::FRESH));
        self.closing = true;
        let mut records = self.log_rest(m);
        self.add_pairs(&mut records);
        let mut first_pair_group = self.write_pair_blocks(m, &records);
        let mut order = 0;
        if self.multi {
            ord.last += 1;
            order = ord.last;
            self.barrier.before_write(m);
            let (gi, _, _) = self.next_slot(m, loc::order_tag(order, self.core as u8));
            first_pair_group = first_pair_group.min(gi);
        }
        self.write_metas(m, first_pair_group);
        self.closing = false;
        self.acknowledge(m);
        self.checkpoint_and_truncate(m, ord, order, carried);
        self.reset_window();
        if let Some(outer) = outer {
            m.swap_stream(outer);
        }
    }

    /// A dependent on another core needs this core's open window durable now. Between
    /// transactions the window closes as if complete. Inside transaction `r` the window's
    /// other transactions close: the older versions `r` keeps are logged for their
    /// transactions (as at an abort), the window closes without `r`, and `r` goes on as the
    /// first transaction of the next window, its blocks logged so far logged again there (the
    /// old ones lie in the closed window, where recovery never counts `r` committed: it has no
    /// TxCnt there). Returns the blocks logged again.
    fn force_close(&mut self, m: &mut Machine, ord: &mut Order) -> u64 {
        if !self.in_tx {
            self.close_window(m, ord, &[]);
            return 0;
        }
        self.rescue(m);
        let mut r = self.win.pop().expect("a running transaction");
        let carried = self.ws.split_off(r.ws_start);
        if !self.win.is_empty() {
            self.close_window(m, ord, &carried);
        }
        self.ws = carried;
        let aux = self.aux(r.seq);
        (r.logged, r.coalesced, r.last, r.ws_start, r.ws_end) = (0, 0, None, 0, 0);
        self.win.push(r);
        let mut relogged = 0;
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        for &b in &self.ws {
            let tagged = m.hier.llc.find(b).is_some_and(|s| m.hier.llc.aux(s) == aux);
            if !tagged && !pending.contains(&b) {
                pending.push(b);
            }
        }
        for &b in &pending {
            self.log_block(m, 0, b, None, false);
            relogged += 1;
        }
        self.pending = pending;
        relogged
    }

    /// The running transaction's older versions (of earlier transactions' blocks) go to the
    /// log as their transactions' blocks (an abort, or a forced close).
    fn rescue(&mut self, m: &mut Machine) {
        for x in std::mem::take(&mut self.versions.kept) {
            if x.present(m) {
                m.hier.llc.invalidate_slot(x.slot);
                self.c.rescued_blocks += 1;
                let owner = self.owner_of(x.aux);
                self.log_block(m, owner, x.block, Some(&x.data), false);
            }
        }
    }

    /// Phase 1: log every still-cached latest version, the last block of each transaction
    /// carrying its TxCnt. Returns the per-transaction records (aborted; TxCnt of a
    /// transaction with no logged block to carry it).
    fn log_rest(&mut self, m: &mut Machine) -> Vec<Pair> {
        let mut records: Vec<Pair> = Vec::new();
        let mut pending = std::mem::take(&mut self.pending);
        for i in 0..self.win.len() {
            let t = &self.win[i];
            let tx_id = t.seq as u8;
            if t.aborted {
                records.push(Pair::aborted(tx_id));
                continue;
            }
            let aux = self.aux(t.seq);
            pending.clear();
            for &b in &self.ws[t.ws_start..t.ws_end] {
                if let Some(s) = m.hier.llc.find(b) {
                    if m.hier.llc.aux(s) == aux {
                        m.hier.llc.set_aux(s, 0);
                        m.commit_flush(s);
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
                        let g = &mut self.wgroups[gi];
                        g.tags[slot].as_mut().expect("a logged slot").tx_cnt = cnt;
                        g.stale = true;
                    }
                    None => records.push(Pair::count(tx_id, self.tx_cnt(i))),
                }
            }
        }
        self.pending = pending;
        records
    }

    /// Phase 2: the CRL's dependency pairs join the records.
    fn add_pairs(&mut self, records: &mut Vec<Pair>) {
        if self.bug == Some(Bug::IgnoreDependencyPairs) {
            return;
        }
        for &(x, y, n) in &self.deps {
            records.push(Pair { tx: self.win[x].seq as u8, ty: self.win[y].seq as u8, n });
            self.c.dependency_pairs_written += 1;
        }
    }

    /// Phase 3: the records go into pair blocks of the window's last groups. Returns the index
    /// of the first group holding one (`usize::MAX` when there are none).
    fn write_pair_blocks(&mut self, m: &mut Machine, records: &[Pair]) -> usize {
        let mut first_pair_group = usize::MAX;
        for chunk in records.chunks(PAIRS_PER_BLOCK) {
            self.barrier.before_write(m);
            let tag = BlkTag { addr: chunk.len() as u32, pair: true, ..Default::default() };
            let (gi, _, at) = self.next_slot(m, tag);
            first_pair_group = first_pair_group.min(gi);
            let t = m.write_encoded(at, WriteKind::LogMeta, || loc::encode(chunk));
            m.wait_until(t.accepted);
            self.note_write(gi, t.done, t.durable);
            self.c.pair_blocks_written += 1;
        }
        first_pair_group
    }

    /// Phase 4: the METAs still to write (a TxCnt set late, the open group), each after its
    /// group's data; then the pair groups' METAs after every other log write of the window,
    /// so that recovery sees pairs only once everything they vouch for is durable.
    fn write_metas(&mut self, m: &mut Machine, first_pair_group: usize) {
        for gi in 0..self.wgroups.len().min(first_pair_group) {
            if self.wgroups[gi].stale {
                self.write_meta(m, gi);
            }
        }
        for gi in first_pair_group..self.wgroups.len() {
            // After every other log write of the window (each META written so far included).
            let (done, durable) = (self.log_done, self.log_durable);
            self.wgroups[gi].note_data(done, durable);
            self.write_meta(m, gi);
        }
    }

    /// Phase 5: the core stalls until the window is durable; LastCommittedTxID moves to its
    /// last transaction.
    fn acknowledge(&mut self, m: &mut Machine) {
        let before = m.now;
        self.log_durable = self.log_durable.max(self.acked_at);
        if self.bug != Some(Bug::AckBeforeDurable) {
            m.wait_until(self.log_durable);
        }
        self.acked_at = m.now;
        self.c.window_stall_cycles += (m.now - before).get();
        super::assert_durable_at_ack(m.now, self.log_durable, self.bug);
        m.ack_core_through(self.core, self.committed);
        for (at, b) in std::mem::take(&mut self.held) {
            let t = m.write_from_arch(at, WriteKind::LogData, b);
            m.wait_until(t.accepted);
        }
    }

    /// Phase 6: every block of the window home, once; the head moves past the window once
    /// those writes are durable (on N cores, and once every window of a lower order number is
    /// at home: the head then carries `home_below`). The `carried` blocks (see
    /// [`Win::close_window`]) go home with the bytes copied before the running transaction's
    /// first store to them.
    fn checkpoint_and_truncate(&mut self, m: &mut Machine, ord: &mut Order, order: u64, carried: &[BlockId]) {
        let cp = &mut self.checkpoint;
        cp.ws.clear();
        for t in self.win.iter().filter(|t| !t.aborted) {
            cp.ws.extend_from_slice(&self.ws[t.ws_start..t.ws_end]);
        }
        cp.ws.sort_unstable_by_key(|b| b.0);
        cp.ws.dedup();
        let mut own_bytes = Vec::new();
        if !carried.is_empty() {
            cp.ws.retain(|b| {
                let mine = carried.contains(b);
                if mine {
                    own_bytes.push(*b);
                }
                !mine
            });
        }
        cp.evicted.clear();
        cp.evicted.extend_from_slice(&self.logged_at);
        m.begin_ordered();
        let mut trunc_at = cp.checkpoint(m, false);
        for b in own_bytes {
            let data = self.versions.snapped(b);
            let t = m.write_encoded(b, WriteKind::Home, || data);
            trunc_at = trunc_at.max(t.durable);
        }
        m.end_ordered();
        // A transaction carried over (running) stays in the log: the head starts at it.
        let start_seq = if self.in_tx { self.next_seq - 1 } else { self.next_seq };
        let head = LogHead { format: LogFormat::Loc, start: self.ring.next_sid, start_seq };
        // On N cores the head carries `home_below`: every window below the next order number is
        // at home once this write is durable, as the head writes are in window order.
        let (at, home_below) =
            if self.multi { (in_commit_order(&mut ord.trunc_at, trunc_at, true), order + 1) } else { (trunc_at, 0) };
        let block = head.encode_next_home(&self.head_block, home_below);
        self.head_block = block;
        m.defer_encoded(at, self.ring.log0, WriteKind::LogHead, || block);
        self.barrier.arm(m);
        super::assert_head_advances((self.trunc_sid, self.trunc_seq), (self.ring.next_sid, start_seq));
        (self.trunc_sid, self.trunc_seq) = (self.ring.next_sid, start_seq);
    }

    fn reset_window(&mut self) {
        self.c.windows += 1;
        self.number += 1;
        self.win.clear();
        self.ws.clear();
        self.logged_at.clear();
        if self.multi {
            self.logged_sig = [0; 64];
        }
        self.wgroups.clear();
        self.deps.clear();
        self.open = false;
        self.committed_in_win = 0;
        self.log_done = Cycle::ZERO;
        self.log_durable = Cycle::ZERO;
    }

    fn end_tx(&mut self) {
        let r = self.running();
        self.win[r].ws_end = self.ws.len();
        self.versions.clear();
    }

    fn begin(&mut self, m: &mut Machine) {
        self.barrier.at_begin(m);
        self.program = m.begin_tx_order();
        if self.next_seq - self.safe_seq >= MAX_LIVE_TXS - 1 {
            m.quiesce();
            self.safe_seq = self.trunc_seq;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let n = self.ws.len();
        // Window sizes: at most SD committed transactions, and the aborted ones, in a window.
        assert!(self.win.len() < MAX_WINDOW_TXS, "a speculation window holds at most {MAX_WINDOW_TXS} transactions");
        assert!(self.committed_in_win < self.sd, "a full window was not closed");
        let stream = if self.program { Stream::FRESH } else { Stream::default() };
        self.win.push(TxSt { seq, aborted: false, logged: 0, coalesced: 0, last: None, ws_start: n, ws_end: n, stream });
        self.in_tx = true;
    }

    fn before_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if !m.keep_bytes {
            return;
        }
        let mine = self.aux(self.win[self.running()].seq);
        for b in blocks_of(addr, len) {
            match m.hier.llc.find(b).map(|s| m.hier.llc.aux(s)) {
                Some(aux) if aux != 0 && aux != mine => self.versions.snapshot(m, b),
                // On N cores a forced close may carry this transaction over: its home copy
                // then needs the bytes of a block of the window logged (evicted) earlier.
                Some(0) | None if self.multi && self.logged_at.iter().any(|&(h, _)| h == b) => {
                    self.versions.snapshot(m, b)
                }
                _ => {}
            }
        }
    }

    /// The running transaction commits: the older versions it overwrote are dead, coalesced
    /// into it. Returns whether the window is complete.
    fn commit_tx(&mut self) -> bool {
        self.end_tx();
        self.in_tx = false;
        self.committed += 1;
        self.committed_in_win += 1;
        window::is_complete(self.committed_in_win, self.win.len(), self.sd)
    }
}

impl Protocol for LocWal {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        for (c, w) in self.w.iter().enumerate() {
            image[layout.log_region(c).0.range()].copy_from_slice(&w.head_block);
        }
    }

    fn begin(&mut self, m: &mut Machine) {
        if self.multi {
            // Victims an access outside the protocol (a lock's) left for their owners.
            self.drain(m);
        }
        self.w[m.core()].begin(m);
    }

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if self.multi {
            self.cross(m, addr, len, false);
        }
        m.access_range(addr, len, false);
        self.drain(m);
    }

    fn before_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if self.multi {
            // Before the store changes the bytes: a forced close logs the other core's version.
            self.cross(m, addr, len, true);
        }
        self.w[m.core()].before_store(m, addr, len);
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let c = m.core();
        let r = self.w[c].running();
        let mine = self.w[c].aux(self.w[c].win[r].seq);
        for b in blocks_of(addr, len) {
            let s = m.access_block(b, true).llc_slot;
            self.drain(m);
            match m.hier.llc.aux(s) {
                aux if aux == mine => continue,
                0 => {}
                aux => {
                    // An earlier transaction's unlogged version: keep it in another way.
                    let w = &mut self.w[c];
                    let data = w.versions.snapped(b);
                    let slot = m.keep_version(b, s, aux);
                    w.versions.kept.push(Version { block: b, aux, slot, data });
                    self.drain(m);
                }
            }
            m.hier.llc.set_aux(s, mine);
            self.w[c].ws.push(b);
        }
    }

    fn commit(&mut self, m: &mut Machine) {
        self.drain(m);
        let c = m.core();
        let w = &mut self.w[c];
        let r = w.running();
        // The older versions this transaction overwrote are dead: coalesced into it.
        for k in 0..w.versions.kept.len() {
            let x = &w.versions.kept[k];
            if !x.present(m) {
                continue;
            }
            m.hier.llc.invalidate_slot(x.slot);
            let owner = w.owner_of(x.aux);
            w.win[owner].coalesced += 1;
            w.c.coalesced_blocks += 1;
            match w.deps.iter_mut().find(|d| d.0 == owner && d.1 == r) {
                Some(d) => d.2 += 1,
                None => w.deps.push((owner, r, 1)),
            }
        }
        let complete = w.commit_tx();
        debug_assert_eq!(w.committed, m.txs_committed, "the core's commits");
        if complete {
            self.close(m, c);
        }
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        self.drain(m);
        let c = m.core();
        let w = &mut self.w[c];
        let r = w.running();
        // Rescue: earlier transactions' versions of the blocks this one wrote go to the log.
        w.rescue(m);
        let mine = w.aux(w.win[r].seq);
        for i in w.win[r].ws_start..w.ws.len() {
            let b = w.ws[i];
            if m.hier.llc.find(b).is_some_and(|s| m.hier.llc.aux(s) == mine) {
                m.hier.invalidate(b);
            }
        }
        w.win[r].aborted = true;
        w.end_tx();
        w.in_tx = false;
        if window::is_complete(w.committed_in_win, w.win.len(), w.sd) {
            self.close(m, c);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut list = self.w[0].c.list();
        for w in &self.w[1..] {
            for (e, (_, v)) in list.iter_mut().zip(w.c.list()) {
                e.1 += v;
            }
        }
        if self.multi {
            list.extend(self.x.list());
        }
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::protocol::ec_wal::tests::log_writes_of_one_transaction;

    /// A window of two transactions (speculation degree 2), four blocks each, all logged when
    /// the window closes. Under the strictest reading each transaction's four log blocks go one
    /// after another, each started when its previous one is durable, the two transactions'
    /// streams in flight together; the close's META follows. With LOC's log writes exempt all
    /// eight overlap across the banks.
    #[test]
    fn a_speculation_windows_log_writes_are_serialised_per_transaction_under_strictest() {
        let loc = |layout: &Layout, cfg: &Config| LocWal::new(layout, 2, cfg.min_write_cycles(), None);
        use WriteKind::{LogData as D, LogMeta as M};
        let offsets = |w: &[(Cycle, Cycle, WriteKind)]| -> Vec<(u64, u64, WriteKind)> {
            w.iter().map(|x| ((x.0 - w[0].0).get(), (x.1 - w[0].0).get(), x.2)).collect()
        };
        // In issue order: the first transaction's four blocks (slots 0-3 of the first group),
        // the second's first three (slots 4-6; its lines' commit flush, 4 x 29 cycles, comes
        // first), the full group's META in the second transaction's stream, its last block in
        // the next group, whose META the close writes after that block's data started.
        let w = log_writes_of_one_transaction(&["ordering.preset=strictest"], loc, 2);
        let tx1 = [(0, 168, D), (168, 336, D), (336, 504, D), (504, 672, D)];
        let tx2 = [(116, 284, D), (284, 452, D), (452, 620, D), (620, 788, M), (788, 956, D)];
        let close = [(789, 957, M)];
        let want: Vec<(u64, u64, WriteKind)> = tx1.into_iter().chain(tx2).chain(close).collect();
        assert_eq!(offsets(&w), want, "strictest: {w:?}");
        // Exempt: the first four together, the next three once the core has flushed their
        // lines, the fourth of the second transaction when its bank is free.
        let e = log_writes_of_one_transaction(&["ordering.preset=strictest", "ordering.log_order=exempt-ec-loc"], loc, 2);
        let want = [
            (0, 168, D),
            (0, 168, D),
            (0, 168, D),
            (0, 168, D),
            (116, 284, D),
            (116, 284, D),
            (116, 284, D),
            (117, 285, M),
            (168, 336, D),
            (285, 453, M),
        ];
        assert_eq!(offsets(&e), want, "exempt: {e:?}");
        assert_eq!(e[0].0, w[0].0, "the same first log write");
    }
}
