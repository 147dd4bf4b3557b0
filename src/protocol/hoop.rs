//! `hoop`: hardware-assisted out-of-place updates (Cai, Coats and Huang, ISCA 2020;
//! docs/protocols/hoop.md).
//!
//! A transaction's stores go to the cache as usual and, word by word, into the running core's
//! OOP buffer at the memory controller, which packs them with their home addresses into
//! memory slices of the core's out-of-place (OOP) region. At commit the buffer is flushed and
//! the transaction's last slice carries the COMMIT mark, written once every other slice of the
//! transaction is durable; there is no cache flush and no fence: the cached lines are already
//! persistent out of place, so they become clean and are dropped, never written home, when the
//! cache evicts them. A mapping table at the controller names each line whose newest version is
//! out of place; a read that misses the cache for such a line also reads the slice that holds
//! it. Garbage collection (GC), after a commit that leaves a region or the mapping table full
//! enough (`hoop.gc_threshold_percent`, `hoop.mapping_entries`), writes the newest committed
//! version of every mapped line home, then, once those writes are durable, moves every region's
//! head past its slices (freeing them) with `home_below`, the global commit order below which
//! every transaction is home.
//!
//! The OOP buffer is not in the persistence domain in this model (the commit waits until the
//! slices are durable in NVM; docs/protocols/hoop.md says why). The mapping table is volatile:
//! recovery rebuilds the data from the durable slices alone ([`crate::recovery::hoop`]).
//!
//! On N cores each core has its own buffer and region; commits take a global order number
//! (in every slice), GC covers every region at once (the newest version of a line may be in
//! another core's region), and recovery replays all regions in global order.
//! Log format: [`crate::log::hoop`]; with `hoop.two_slot_head` (the torn-write fix of
//! docs/faults.md, off by default) each region's head is in the two-slot form with
//! `home_below` ([`crate::log::head`]).

use super::redo::{owner, tag};
use super::{Bug, Protocol};
use crate::cache::HitLevel;
use crate::config::HoopConfig;
use crate::log::head::{LogFormat, LogHead};
use crate::log::hoop::{encode_data, SliceMeta, COMMIT, SLICE_BLOCKS, WORDS};
use crate::machine::Machine;
use crate::memctl::WriteTiming;
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};

/// What `hoop` is and how it is built (its line in the table of `registry.rs`).
pub static HOOP: super::Registration<Hoop> = super::Registration {
    desc: super::Descriptor {
        name: "hoop",
        log_format: Some(LogFormat::Hoop),
        stores_persist: false,
        speculates: false,
        bugs: &[Bug::AckBeforeDurable, Bug::CommitBeforeLog, Bug::TruncateBeforeCheckpoint, Bug::GcOwnRegion],
        reads: &[],
        layout: super::Descriptor::plain_layout,
    },
    build: |b| Hoop::new(b.layout, &b.cfg.hoop, b.bug),
};

counters!(Counters {
    slices_written,
    words_packed,
    dropped_evictions,
    redirected_reads,
    gc_runs,
    gc_home_writes,
    gc_forced,
});

pub struct Hoop {
    bug: Option<Bug>,
    regions: Vec<Region>,
    /// Per data block: the mask of its words the running transaction of some core has stored
    /// to (two running transactions never write one line: docs/multicore.md).
    word_mask: Vec<u8>,
    /// The mapping table, per data block: 0, or 1 + the index in `entries` of the line whose
    /// newest committed version is out of place.
    map: Vec<u32>,
    entries: Vec<Entry>,
    /// Global commit order of the latest commit that wrote slices (any core).
    order: u64,
    /// Cycle of the latest head write scheduled (head writes are issued in order).
    head_at: Cycle,
    gc_percent: u64,
    mapping_entries: usize,
    /// `hoop.two_slot_head`: heads in the two-slot form with `home_below`.
    two_slot: bool,
    /// The running commit's words (home word number, value), in the order they are packed.
    words: Vec<(u32, u64)>,
    /// Per block of the running commit's write set: the slice holding its last word.
    block_slice: Vec<usize>,
    n: Counters,
}

/// A mapping-table entry.
struct Entry {
    block: BlockId,
    /// The data block of the newest slice holding one of its words (what a redirected read
    /// and GC read).
    slice: BlockId,
    /// The line's newest committed bytes (kept only with payloads): what GC writes home.
    data: BlockData,
}

/// One core's OOP region and running transaction.
struct Region {
    log0: BlockId,
    /// Slices in the region.
    cap: u64,
    /// Sequence number of the region's next committed transaction.
    seq: u64,
    /// Position (counted from 0, never wrapping) of the next slice.
    tail: u64,
    /// Slices before this position may be reused (the head past them is durable).
    safe_start: u64,
    /// Start of the latest head write scheduled.
    head_issued: u64,
    /// The head block of the latest head write scheduled (`hoop.two_slot_head`: the next one
    /// keeps its newest slot).
    head_block: BlockData,
    /// Blocks the running transaction stored to, in first-store order.
    ws: Vec<BlockId>,
    /// Durability of the running commit's slice writes so far.
    log_done: Cycle,
}

impl Region {
    /// The data block of slice position `p`.
    fn slice_block(&self, p: u64) -> BlockId {
        BlockId(self.log0.0 + 1 + SLICE_BLOCKS * (p % self.cap))
    }
}

/// A region's head block before any GC: the plain head, or the two-slot form with
/// `home_below` (`hoop.two_slot_head`; docs/formats/hoop-log.md).
fn first_head(two_slot: bool) -> BlockData {
    let head = LogHead { format: LogFormat::Hoop, start: 0, start_seq: 1 };
    if two_slot {
        head.encode_two_slot_home(0)
    } else {
        head.encode()
    }
}

impl Hoop {
    pub fn new(layout: &Layout, cfg: &HoopConfig, bug: Option<Bug>) -> Hoop {
        assert!(layout.data_bytes / 8 <= u32::MAX as u64, "home word numbers are 32-bit");
        let blocks = (layout.data_bytes / 64) as usize;
        let regions = (0..layout.cores as usize)
            .map(|c| {
                let (log0, n) = layout.log_region(c);
                Region {
                    log0,
                    cap: (n - 1) / SLICE_BLOCKS,
                    seq: 1,
                    tail: 0,
                    safe_start: 0,
                    head_issued: 0,
                    head_block: first_head(cfg.two_slot_head),
                    ws: Vec::new(),
                    log_done: Cycle::ZERO,
                }
            })
            .collect();
        Hoop {
            bug,
            regions,
            word_mask: vec![0; blocks],
            map: vec![0; blocks],
            entries: Vec::new(),
            order: 0,
            head_at: Cycle::ZERO,
            gc_percent: cfg.gc_threshold_percent as u64,
            mapping_entries: cfg.mapping_entries as usize,
            two_slot: cfg.two_slot_head,
            words: Vec::new(),
            block_slice: Vec::new(),
            n: Counters::default(),
        }
    }

    /// Tagged dirty lines the last access evicted: their words are in their owner's OOP buffer
    /// (persisted out of place at its commit, or discarded at its abort), so the controller
    /// drops the write-back; home keeps its old version.
    #[inline]
    fn drop_victims(&mut self, m: &mut Machine) {
        while let Some(v) = m.tx_victims.pop() {
            debug_assert!(owner(v.tag) < self.regions.len());
            self.n.dropped_evictions += 1;
        }
    }

    /// One cache access of a transactional load or store; a miss on a line whose newest
    /// version is out of place also reads its slice (the mapping table's redirection).
    #[inline]
    fn access(&mut self, m: &mut Machine, b: BlockId, write: bool) -> crate::cache::Slot {
        let a = m.access_block(b, write);
        if a.level == HitLevel::Memory {
            if let Some(&e) = self.map.get(b.0 as usize).filter(|&&e| e != 0) {
                let t = m.background_read(self.entries[e as usize - 1].slice);
                m.wait_until(t);
                self.n.redirected_reads += 1;
            }
        }
        self.drop_victims(m);
        a.llc_slot
    }

    /// Take `n` slice positions of core `c`'s region (contiguous, wrapping); returns the first.
    fn alloc(&mut self, m: &mut Machine, c: usize, n: u64) -> u64 {
        if self.regions[c].tail + n - self.regions[c].safe_start > self.regions[c].cap {
            self.make_room(m, c, n);
        }
        let r = &mut self.regions[c];
        let p = r.tail;
        r.tail += n;
        p
    }

    /// The region is full: wait until the heads scheduled so far are durable; if that frees too
    /// little, collect now and wait for that.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, m: &mut Machine, c: usize, n: u64) {
        m.quiesce();
        let r = &mut self.regions[c];
        r.safe_start = r.head_issued;
        if r.tail + n - r.safe_start > r.cap {
            self.n.gc_forced += 1;
            self.gc(m, c);
            m.quiesce();
            let r = &mut self.regions[c];
            r.safe_start = r.head_issued;
        }
        let r = &self.regions[c];
        if r.tail + n - r.safe_start > r.cap {
            m.fatal.get_or_insert_with(|| {
                format!("log.size_bytes too small: a transaction needs more than {} HOOP slices per core", r.cap)
            });
        }
    }

    /// Write block `k` (data or metadata) of slice `s` of the running commit on core `c`.
    fn write_slice(&mut self, m: &mut Machine, c: usize, first: u64, s: usize, meta: bool) -> WriteTiming {
        let r = &self.regions[c];
        let data_at = r.slice_block(first + s as u64);
        let words = &self.words[s * WORDS..self.words.len().min((s + 1) * WORDS)];
        let last = (s + 1) * WORDS >= self.words.len();
        let data = || encode_data(&words.iter().map(|w| w.1).collect::<Vec<_>>());
        let t = if meta {
            let mut addrs = [0u32; WORDS];
            for (a, w) in addrs.iter_mut().zip(words) {
                *a = w.0;
            }
            let sm = SliceMeta {
                seq: r.seq,
                order: self.order,
                index: s as u32,
                count: words.len() as u8,
                flags: if last { COMMIT } else { 0 },
                addrs,
            };
            let kind = if last { WriteKind::Commit } else { WriteKind::LogMeta };
            m.write_encoded(BlockId(data_at.0 + 1), kind, || sm.encode(&data()))
        } else {
            self.n.slices_written += 1;
            m.write_encoded(data_at, WriteKind::LogData, data)
        };
        m.wait_until(t.accepted);
        let r = &mut self.regions[c];
        r.log_done = r.log_done.max(t.durable);
        t
    }

    /// Garbage collection after (or, when a region is full, during) a commit of core `c`: the
    /// newest committed version of every mapped line goes home, and once those writes are
    /// durable every region's head moves past its slices with `home_below` = the next global
    /// order. The core does not wait. Injected bugs: `truncate-before-checkpoint` schedules the
    /// heads at once; `gc-own-region` collects only the lines whose newest version is in core
    /// `c`'s region and moves only its head.
    fn gc(&mut self, m: &mut Machine, c: usize) {
        self.n.gc_runs += 1;
        let own_only = self.bug == Some(Bug::GcOwnRegion);
        let (lo, hi) = (self.regions[c].log0.0, self.regions[c].log0.0 + 1 + SLICE_BLOCKS * self.regions[c].cap);
        let mut home_done = m.now;
        let mut kept = 0;
        for i in 0..self.entries.len() {
            let e = &self.entries[i];
            if own_only && !(lo..hi).contains(&e.slice.0) {
                self.map[e.block.0 as usize] = kept as u32 + 1;
                self.entries.swap(kept, i);
                kept += 1;
                continue;
            }
            m.background_read(e.slice);
            let data = e.data;
            let t = m.write_encoded(e.block, WriteKind::Home, || data);
            home_done = home_done.max(t.durable);
            self.map[e.block.0 as usize] = 0;
            self.n.gc_home_writes += 1;
        }
        self.entries.truncate(kept);
        let at = if self.bug == Some(Bug::TruncateBeforeCheckpoint) { m.now } else { home_done };
        let at = at.max(self.head_at);
        self.head_at = at;
        let home_below = self.order + 1;
        for (i, r) in self.regions.iter_mut().enumerate() {
            if own_only && i != c {
                continue;
            }
            let head = LogHead { format: LogFormat::Hoop, start: r.tail, start_seq: r.seq };
            // Plain form: `encode_home`. Two slots: the slot not holding the newest head.
            let block = head.encode_next_home(&r.head_block, home_below);
            r.head_block = block;
            m.defer_encoded(at, r.log0, WriteKind::LogHead, || block);
            super::assert_head_advances((r.head_issued, 0), (r.tail, 0));
            r.head_issued = r.tail;
        }
    }

    /// After a commit of core `c`: collect if its region or the mapping table is full enough.
    fn maybe_gc(&mut self, m: &mut Machine, c: usize) {
        let r = &self.regions[c];
        if (r.tail - r.head_issued) * 100 >= r.cap * self.gc_percent || self.entries.len() >= self.mapping_entries {
            self.gc(m, c);
        }
    }

    /// The OOP buffer's content (`words`, `block_slice`): the transaction's written words, each
    /// once, with their current (final) values. Its lines become clean: persistent out of
    /// place, dropped on eviction.
    fn pack_words(&mut self, m: &mut Machine, c: usize, ws: &[BlockId]) {
        self.words.clear();
        self.block_slice.clear();
        for &b in ws {
            let mask = std::mem::take(&mut self.word_mask[b.0 as usize]);
            for i in 0..8 {
                if mask >> i & 1 == 1 {
                    let at = b.0 as usize * 64 + i * 8;
                    let v = u64::from_le_bytes(m.arch[at..at + 8].try_into().expect("a word"));
                    self.words.push(((b.0 * 8) as u32 + i as u32, v));
                }
            }
            self.block_slice.push((self.words.len() - 1) / WORDS);
            if let Some(s) = m.hier.llc.find(b) {
                if m.hier.llc.aux(s) == tag(c) {
                    m.hier.llc.set_aux(s, 0);
                    m.hier.clean_slot(s);
                }
            }
        }
    }

    /// Writes the buffer's slices but the commit mark: each slice's body, and the mark word of
    /// every slice before the last.
    fn flush_body(&mut self, m: &mut Machine, c: usize, first: u64, slices: usize) {
        let last = slices - 1;
        for s in 0..slices {
            self.write_slice(m, c, first, s, false);
            if s != last {
                self.write_slice(m, c, first, s, true);
            }
        }
    }

    /// The mapping table after a commit: each line's newest version is now in this
    /// transaction's slices, from `first`.
    fn map_committed(&mut self, m: &Machine, c: usize, ws: &[BlockId], first: u64) {
        for (&b, &s) in ws.iter().zip(&self.block_slice) {
            let slice = self.regions[c].slice_block(first + s as u64);
            let data = if m.keep_bytes { m.arch_block(b) } else { [0; 64] };
            match self.map[b.0 as usize] {
                0 => {
                    self.entries.push(Entry { block: b, slice, data });
                    self.map[b.0 as usize] = self.entries.len() as u32;
                }
                e => {
                    let e = &mut self.entries[e as usize - 1];
                    e.slice = slice;
                    e.data = data;
                }
            }
        }
    }
}

impl Protocol for Hoop {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        for c in 0..layout.cores as usize {
            image[layout.log_region(c).0.range()].copy_from_slice(&first_head(self.two_slot));
        }
    }

    fn begin(&mut self, m: &mut Machine) {
        self.drop_victims(m);
        let r = &mut self.regions[m.core()];
        debug_assert!(r.ws.is_empty());
        r.log_done = Cycle::ZERO;
        m.begin_tx_order();
    }

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        for b in blocks_of(addr, len) {
            self.access(m, b, false);
        }
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let c = m.core();
        let end = addr.0 + len as u64;
        for b in blocks_of(addr, len) {
            let s = self.access(m, b, true);
            // The line is the running transaction's (its write-back is dropped).
            m.hier.llc.set_aux(s, tag(c));
            let start = b.addr().0;
            let (lo, hi) = (addr.0.max(start) - start, end.min(start + 64) - start);
            let mask = (((1u32 << hi.div_ceil(8)) - 1) & !((1u32 << (lo / 8)) - 1)) as u8;
            let w = &mut self.word_mask[b.0 as usize];
            if *w == 0 {
                self.regions[c].ws.push(b);
            }
            *w |= mask;
        }
    }

    fn commit(&mut self, m: &mut Machine) {
        let c = m.core();
        self.drop_victims(m);
        let ws = std::mem::take(&mut self.regions[c].ws);
        self.pack_words(m, c, &ws);
        if self.words.is_empty() {
            // Nothing to persist (a read-only transaction).
            self.regions[c].ws = ws;
            self.regions[c].ws.clear();
            m.ack_through(m.txs_committed);
            return;
        }
        self.n.words_packed += self.words.len() as u64;
        let slices = self.words.len().div_ceil(WORDS);
        // Space first: a GC that room needs covers the transactions committed before this one
        // (its heads' `home_below` is the next order, this transaction's).
        let first = self.alloc(m, c, slices as u64);
        self.order += 1;
        m.begin_ordered();
        let held = self.bug == Some(Bug::CommitBeforeLog);
        let last = slices - 1;
        if !held {
            // Flush the buffer: every slice but the commit mark, then (intra-transaction
            // ordering) the mark once they are durable.
            self.flush_body(m, c, first, slices);
            m.wait_until(self.regions[c].log_done);
        }
        let log_done = self.regions[c].log_done;
        let t = self.write_slice(m, c, first, last, true);
        match self.bug {
            Some(Bug::AckBeforeDurable) => m.wait_until(t.accepted),
            _ => m.wait_until(t.durable),
        }
        super::assert_durable_at_ack(m.now, t.durable.max(log_done), self.bug);
        m.ack_through(m.txs_committed);
        if held {
            // Injected bug: the rest of the buffer reaches NVM only behind the mark.
            self.flush_body(m, c, first, slices);
        }
        m.end_ordered();
        self.map_committed(m, c, &ws, first);
        let r = &mut self.regions[c];
        r.seq += 1;
        r.ws = ws;
        r.ws.clear();
        self.maybe_gc(m, c);
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        let c = m.core();
        // The buffer's words are discarded; the lines' dirty copies are dropped.
        self.drop_victims(m);
        let ws = std::mem::take(&mut self.regions[c].ws);
        for &b in &ws {
            self.word_mask[b.0 as usize] = 0;
            if m.hier.llc.find(b).is_some_and(|s| m.hier.llc.aux(s) == tag(c)) {
                m.hier.invalidate(b);
            }
        }
        self.regions[c].ws = ws;
        self.regions[c].ws.clear();
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.n.list()
    }
}
