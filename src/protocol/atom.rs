//! `atom`: hardware undo logging at cache-line granularity (Joshi et al., "ATOM: Atomic
//! Durability in Non-volatile Memory through Hardware Logging", HPCA 2017;
//! docs/protocols/atom.md).
//!
//! - A transaction's first store to a line makes the hardware write the line's old content
//!   as an undo entry into the core's log at the memory controller: from the cache when the
//!   line is cached, or, on a miss, from the controller's own read of the line ("source
//!   logging": the old line never travels to the cache and back). The store waits only until
//!   the controller accepts the entry, not until it is durable.
//! - Entries are grouped twelve to a metadata line (their home addresses and the
//!   transaction's sequence number). The metadata line is written once the entries it names
//!   are durable: when its group fills, or when a line of the group is to be written in place.
//! - The controller holds back a line's in-place write until its undo entry, a metadata
//!   line naming it and the metadata lines of the full groups before it are durable (a tagged line evicted during the transaction goes home, held
//!   back; it is never redirected to the log).
//! - Commit writes every line of the transaction still cached home (held back as above),
//!   waits until all its in-place data is durable, then frees the log: the region's head
//!   moves past the transaction. The head write is the commit point; the transaction is
//!   acknowledged once it is durable.
//! - Abort: the program's bytes are already the old ones; lines written home during the
//!   transaction are written again (now with the old bytes), then the log is freed.
//!
//! Log format: [`crate::log::atom`]; recovery: [`crate::recovery::atom`]. With
//! `atom.checked_meta` (the torn-write fix of docs/faults.md, off by default) metadata lines are
//! in the checked form and a group is closed when its line is written: a partial group's line
//! is never rewritten in place, later entries start the next group.
//!
//! On N cores (docs/multicore.md): one region per core (`Layout::log_region`), the LLC tag
//! of a core's transaction is core + 1 ([`tag`]), and a tagged line another core's access
//! evicts goes home held behind its owner's undo entry. A commit returns only after its data
//! is durable and its log freed, so each region holds at most its core's running
//! transaction, and running transactions of different cores hold different lines: no order
//! across regions is needed.

use super::barrier::Barrier;
use super::redo::{owner, tag};
use super::{Bug, Protocol};
use crate::cache::{HitLevel, Slot};
use crate::log::atom::{entry_block, groups, meta_block, Meta, CHECKED_GROUPS, ENTRIES};
use crate::log::head::{LogFormat, LogHead};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};

/// What `atom` is and how it is built (its line in the table of `registry.rs`).
pub static ATOM: super::Registration<Atom> = super::Registration {
    desc: super::Descriptor {
        name: "atom",
        log_format: Some(LogFormat::Atom),
        stores_persist: false,
        speculates: false,
        bugs: &[Bug::AckBeforeDurable, Bug::InPlaceBeforeUndo, Bug::FreeLogBeforeData],
        reads: &[],
        layout: super::Descriptor::plain_layout,
    },
    build: |b| Atom::new(b.layout, &b.cfg.atom, b.bug),
};

counters!(Counters {
    undo_entries,
    entries_from_cache,
    entries_from_memory,
    meta_writes,
    evicted_home,
    held_back_cycles,
    relogged_avoided,
});

pub struct Atom {
    bug: Option<Bug>,
    /// `atom.checked_meta`.
    checked: bool,
    cores: Vec<CoreLog>,
    /// Old content of the blocks of the store under way (kept only with payloads).
    stash: Vec<(BlockId, BlockData)>,
    n: Counters,
}

/// Entries of `ws` from which `at_slot` is kept.
const SLOT_INDEX_FROM: usize = 64;

impl CoreLog {
    /// `ws[i]` is tagged in LLC slot `s`. Noted only past the first entries: a victim among
    /// those is found by a search (bounded by their number), so a small transaction touches
    /// no extra host line.
    #[inline]
    fn note_slot(&mut self, s: Slot, i: usize) {
        if i < SLOT_INDEX_FROM {
            return;
        }
        if s.0 >= self.at_slot.len() {
            self.at_slot.resize(s.0 + 1, u32::MAX);
        }
        self.at_slot[s.0] = i as u32;
    }
}

/// One core's log region and running transaction.
struct CoreLog {
    log0: BlockId,
    groups: u64,
    /// Sequence number of the running transaction (the one the head names).
    seq: u64,
    tag: u32,
    /// Lines the running transaction has stored to, in first-store order: entry `i` of its
    /// log is `ws[i]`'s old content.
    ws: Vec<BlockId>,
    /// LLC slot hint of `ws[i]`.
    slots: Vec<Slot>,
    /// Cycle from which `ws[i]` may be written in place (its entry and a metadata line naming
    /// it durable); `Cycle::MAX` until a metadata line covers it.
    ready: Vec<Cycle>,
    /// `ws[i]` has left the cache during the transaction (it was written home).
    evicted: Vec<bool>,
    n_evicted: usize,
    /// The index in `ws` of each evicted block: a transaction larger than the cache finds a
    /// block it stores to again here, not by a search of `ws`.
    evicted_index: std::collections::BTreeMap<BlockId, usize>,
    /// By LLC slot: the index in `ws` of the tagged line there (when it was tagged, from entry
    /// [`SLOT_INDEX_FROM`] on; checked against `ws`), so that a tagged victim of a large
    /// transaction is found without a search of `ws`.
    at_slot: Vec<u32>,
    /// Entries covered by the latest metadata line written.
    covered: usize,
    /// The open group (the one the next entry goes to) and the index in `ws` of its first
    /// entry. In the paper's form a group closes when full (`open_first = 12 * open_g`); in the
    /// checked form, whenever its metadata line is written.
    open_g: u64,
    open_first: usize,
    /// Latest durability of the entries of the last group.
    group_durable: Cycle,
    /// Latest durability of the metadata lines of the full groups: recovery reads a group only
    /// past full groups, so an entry is undoable once its own metadata line and those are
    /// durable.
    full_durable: Cycle,
    /// Latest durability of the transaction's in-place writes.
    home_done: Cycle,
    barrier: Barrier,
}

impl Atom {
    pub fn new(layout: &Layout, cfg: &crate::config::AtomConfig, bug: Option<Bug>) -> Atom {
        let checked = cfg.checked_meta;
        assert!(layout.data_bytes / 64 <= u32::MAX as u64, "a home is a 32-bit block number");
        let cores = (0..layout.cores as usize)
            .map(|c| {
                let (log0, blocks) = layout.log_region(c);
                CoreLog {
                    log0,
                    groups: if checked { groups(blocks).min(CHECKED_GROUPS) } else { groups(blocks) },
                    seq: 1,
                    tag: tag(c),
                    ws: Vec::new(),
                    slots: Vec::new(),
                    ready: Vec::new(),
                    evicted: Vec::new(),
                    n_evicted: 0,
                    evicted_index: std::collections::BTreeMap::new(),
                    at_slot: Vec::new(),
                    covered: 0,
                    open_g: 0,
                    open_first: 0,
                    group_durable: Cycle::ZERO,
                    full_durable: Cycle::ZERO,
                    home_done: Cycle::ZERO,
                    barrier: Barrier::default(),
                }
            })
            .collect();
        Atom { bug, checked, cores, stash: Vec::new(), n: Counters::default() }
    }

    /// Append the undo entry of `b` (old content `old`, present with payloads) to core `c`'s log.
    /// The line is cached in LLC slot `s`, tagged.
    fn log_entry(&mut self, m: &mut Machine, c: usize, b: BlockId, s: Slot, old: Option<BlockData>) {
        let r = &mut self.cores[c];
        let (g, j) = (r.open_g, r.ws.len() - r.open_first);
        if g >= r.groups {
            m.fatal.get_or_insert_with(|| {
                let most = r.groups;
                format!("log.size_bytes too small: a transaction needs more than {most} undo groups per core")
            });
            m.hier.llc.set_aux(s, 0);
            return;
        }
        r.barrier.before_write(m);
        let t = m.write_encoded(entry_block(r.log0, g, j), WriteKind::LogData, || old.expect("payloads kept"));
        m.wait_until(t.accepted);
        r.group_durable = if j == 0 { t.durable } else { r.group_durable.max(t.durable) };
        r.ws.push(b);
        r.slots.push(s);
        r.note_slot(s, r.ws.len() - 1);
        r.ready.push(Cycle::MAX);
        r.evicted.push(false);
        self.n.undo_entries += 1;
        if j + 1 == ENTRIES {
            self.write_meta(m, c);
        }
    }

    /// Write the metadata line of core `c`'s open group, naming every entry logged to it so
    /// far, once those entries are durable. The group closes if full or in the checked form.
    fn write_meta(&mut self, m: &mut Machine, c: usize) {
        let checked = self.checked;
        let r = &mut self.cores[c];
        let len = r.ws.len();
        debug_assert!(len > r.covered, "a metadata line names a new entry");
        let (g, first) = (r.open_g as usize, r.open_first);
        let (seq, ws) = (r.seq, &r.ws[first..]);
        // Durable after the entries it names, also when written from behind their writer.
        let t =
            m.write_encoded_durable_after(meta_block(r.log0, g as u64), WriteKind::LogMeta, r.group_durable, || {
                let mut homes = [0u32; ENTRIES];
                for (h, b) in homes.iter_mut().zip(ws) {
                    *h = b.0 as u32;
                }
                if checked {
                    Meta::encode_checked(seq, g as u32, &homes[..ws.len()])
                } else {
                    Meta::encode_parts(seq, g as u32, &homes[..ws.len()])
                }
            });
        m.wait_until(t.accepted);
        let ready = t.durable.max(r.full_durable);
        for x in &mut r.ready[first..] {
            *x = ready;
        }
        if len - first == ENTRIES || checked {
            // Closed: recovery reads the next group only past this line.
            r.full_durable = ready;
            r.open_g += 1;
            r.open_first = len;
        }
        r.covered = len;
        self.n.meta_writes += 1;
    }

    /// Write `ws[i]` of core `c` home from the program's bytes, held back until its undo entry
    /// is durable (not held back under the injected `in-place-before-undo`).
    fn write_home(&mut self, m: &mut Machine, c: usize, i: usize) {
        if i >= self.cores[c].covered {
            self.write_meta(m, c);
        }
        let r = &mut self.cores[c];
        let b = r.ws[i];
        let hold = if self.bug == Some(Bug::InPlaceBeforeUndo) { Cycle::ZERO } else { r.ready[i] };
        self.n.held_back_cycles += hold.saturating_sub(m.now).get();
        let data = m.keep_bytes.then(|| m.arch_block(b));
        // Held back also when written from behind the metadata line's writer.
        let t = m.write_encoded_durable_after(b, WriteKind::Home, hold, || data.expect("payloads kept"));
        m.wait_until(t.accepted);
        r.home_done = r.home_done.max(t.durable);
    }

    /// Place every tagged line the last access evicted from the LLC: home, held back behind its
    /// owner's undo entry (the owner is the core whose tag it carries).
    #[inline(always)]
    fn drain_victims(&mut self, m: &mut Machine) {
        if !m.tx_victims.is_empty() {
            self.place_victims(m);
        }
    }

    /// [`Atom::drain_victims`] when there is a tagged victim.
    #[inline(never)]
    fn place_victims(&mut self, m: &mut Machine) {
        while let Some(v) = m.tx_victims.pop() {
            let c = owner(v.tag);
            let r = &mut self.cores[c];
            let i = match r.at_slot.get(v.slot.0).map(|&i| i as usize) {
                Some(i) if r.ws.get(i) == Some(&v.block) => i,
                _ => r.ws.iter().rposition(|&b| b == v.block).expect("a tagged line is in its owner's write set"),
            };
            if !r.evicted[i] {
                r.evicted[i] = true;
                r.n_evicted += 1;
                r.evicted_index.insert(v.block, i);
            }
            self.write_home(m, c, i);
            self.n.evicted_home += 1;
        }
    }

    /// The LLC slot of `ws[i]` of core `c` if it is cached with the running transaction's tag.
    fn tagged(&self, m: &Machine, c: usize, i: usize) -> Option<Slot> {
        let r = &self.cores[c];
        let b = r.ws[i];
        let s = match r.slots[i] {
            s if m.hier.llc.holds(s, b) => Some(s),
            _ => m.hier.llc.find(b),
        }?;
        (m.hier.llc.aux(s) == r.tag).then_some(s)
    }

    /// Wait until core `c`'s in-place writes are durable (not under `free-log-before-data`),
    /// then free its log: the head moves past the transaction. Returns the head write's timing.
    fn free_log(&mut self, m: &mut Machine, c: usize) -> crate::memctl::WriteTiming {
        let r = &mut self.cores[c];
        if self.bug != Some(Bug::FreeLogBeforeData) {
            m.wait_until(r.home_done);
        }
        let head = LogHead { format: LogFormat::Atom, start: 0, start_seq: r.seq + 1 };
        let t = m.write_encoded(r.log0, WriteKind::LogHead, || head.encode());
        r.seq += 1;
        t
    }

    fn clear(&mut self, c: usize) {
        let r = &mut self.cores[c];
        r.ws.clear();
        r.slots.clear();
        r.ready.clear();
        r.evicted.clear();
        r.n_evicted = 0;
        r.evicted_index.clear();
        r.covered = 0;
        r.open_g = 0;
        r.open_first = 0;
        r.full_durable = Cycle::ZERO;
        r.home_done = Cycle::ZERO;
    }
}

impl Protocol for Atom {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::Atom, start: 0, start_seq: 1 }.write_regions(layout, image);
    }

    fn begin(&mut self, m: &mut Machine) {
        // Victims an access outside the protocol (a lock's) left for their owners.
        self.drain_victims(m);
        self.cores[m.core()].barrier.at_begin(m);
        m.begin_tx_order();
    }

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, false);
        self.drain_victims(m);
    }

    fn before_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        if m.keep_bytes {
            self.stash.clear();
            for b in blocks_of(addr, len) {
                self.stash.push((b, m.arch_block(b)));
            }
        }
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let c = m.core();
        for b in blocks_of(addr, len) {
            let a = m.access_block(b, true);
            self.drain_victims(m);
            let s = a.llc_slot;
            let r = &mut self.cores[c];
            if m.hier.llc.aux(s) == r.tag {
                continue;
            }
            m.hier.llc.set_aux(s, r.tag);
            if r.n_evicted > 0 {
                // Within a transaction a line of `ws` loses its tag only by eviction.
                if let Some(&i) = r.evicted_index.get(&b) {
                    // Back in the cache after an eviction: its entry is logged already.
                    r.slots[i] = s;
                    r.note_slot(s, i);
                    self.n.relogged_avoided += 1;
                    continue;
                }
            }
            if a.level == HitLevel::Memory {
                self.n.entries_from_memory += 1;
            } else {
                self.n.entries_from_cache += 1;
            }
            let old = self.stash.iter().find(|(x, _)| *x == b).map(|(_, d)| *d);
            self.log_entry(m, c, b, s, old);
        }
    }

    fn commit(&mut self, m: &mut Machine) {
        let c = m.core();
        self.drain_victims(m);
        if self.cores[c].ws.is_empty() {
            // Nothing logged, nothing written: the log stays as it is.
            m.ack_through(m.txs_committed);
            return;
        }
        m.begin_ordered();
        if self.cores[c].covered < self.cores[c].ws.len() {
            self.write_meta(m, c);
        }
        // The transaction's cached lines go home, each held back behind its undo entry.
        for i in 0..self.cores[c].ws.len() {
            if let Some(s) = self.tagged(m, c, i) {
                m.commit_flush(s);
                m.hier.llc.set_aux(s, 0);
                self.write_home(m, c, i);
                m.hier.clean_slot(s);
                m.commit_flush_done(self.cores[c].ws[i]);
            }
        }
        let data_durable = self.cores[c].home_done;
        let t = self.free_log(m, c);
        match self.bug {
            Some(Bug::AckBeforeDurable) => m.wait_until(t.accepted),
            _ => m.wait_until(t.durable),
        }
        let vouched = if self.bug == Some(Bug::FreeLogBeforeData) { t.durable } else { t.durable.max(data_durable) };
        super::assert_durable_at_ack(m.now, vouched, self.bug);
        m.ack_through(m.txs_committed);
        m.end_ordered();
        self.cores[c].barrier.arm(m);
        self.clear(c);
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        let c = m.core();
        self.drain_victims(m);
        // `m.arch` holds the old bytes again: cached lines are dropped (home never saw their
        // new bytes), lines that went home during the transaction are written again.
        for i in 0..self.cores[c].ws.len() {
            if let Some(s) = self.tagged(m, c, i) {
                m.hier.llc.set_aux(s, 0);
                m.hier.invalidate(self.cores[c].ws[i]);
            }
            if self.cores[c].evicted[i] {
                self.write_home(m, c, i);
            }
        }
        if !self.cores[c].ws.is_empty() {
            let t = self.free_log(m, c);
            m.wait_until(t.durable);
            self.cores[c].barrier.arm(m);
        }
        self.clear(c);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.n.list()
    }
}
