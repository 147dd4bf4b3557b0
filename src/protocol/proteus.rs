//! `proteus` (docs/protocols/proteus.md): software-supported hardware undo logging (Shin,
//! Tirukkovalluri, Tuck, Solihin, "Proteus: A Flexible and Fast Software Supported Hardware
//! Logging approach for NVM", MICRO 2017).
//!
//! - Before a transactional store, the library issues a *log-load* of the line's old data (a
//!   cache access) and a *log-flush* of it: the undo entry bypasses the caches into the *log
//!   pending queue* (LPQ) at the memory controller, which is inside the persistence domain.
//!   The log-flush does not stall the core; it is ahead of the store on the core's in-order path
//!   to the controller, so no write-back of the stored line reaches the controller before it
//!   (the model counts the entry durable at the log-flush's cycle).
//! - A per-core *log lookup table* (LLT) of `proteus.llt_entries` lines drops a log-load/flush
//!   pair for a line the running transaction has already logged; when the LLT forgets a line
//!   (FIFO replacement), the line is logged again (recovery keeps the oldest entry).
//! - Commit flushes the transaction's lines home (clflush, fence), then writes the core's
//!   finish register in the LPQ (the commit marker; one LLC latency on the way) and waits for
//!   it: the transaction's entries are now dead and the LPQ drops them. They never reach memory.
//! - When the LPQ (`proteus.lpq_entries`) is full, its oldest live entry spills to its core's
//!   log region in memory (data block, then header once the data is durable); its slot is free
//!   once the header is durable and every earlier spill of the core is.
//! - Abort: the library rewrites the logged lines with their old values, flushes them, fences,
//!   and writes the finish register (so every sequence number is used once).
//!
//! Format: [`crate::log::proteus`]; recovery: [`crate::recovery::proteus`]. On N cores each
//! core has its LLT, its running transaction's entries and its log region; the LPQ is shared.

use std::collections::VecDeque;

use super::{Bug, Protocol};
use crate::log::head::{LogFormat, LogHead};
use crate::log::proteus::{self as fmt, EntryHeader};
use crate::machine::Machine;
use crate::pmem::{Layout, WriteKind};
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};

/// What `proteus` is and how it is built (its line in the table of `registry.rs`).
pub static PROTEUS: super::Registration<Proteus> = super::Registration {
    desc: super::Descriptor {
        name: "proteus",
        log_format: Some(LogFormat::Proteus),
        // Its stores come before their log-flushes: a store durable once performed would
        // reach the domain ahead of its undo entry, so its lines stay out of the drain.
        stores_persist: false,
        speculates: false,
        bugs: &[Bug::AckBeforeDurable, Bug::DropUncommittedEntry, Bug::StoreBeforeLogFlush, Bug::CommitDropsOtherCores],
        reads: &[],
        layout: |layout, cfg| Ok(layout.with_nvllc(fmt::bytes(cfg.proteus.lpq_entries as usize))),
    },
    build: |b| Proteus::new(b.layout, &b.cfg.proteus, b.cfg.llc.latency_cycles, b.bug),
};

counters! {
    Counters {
        log_entries,
        llt_hits,
        entries_dropped,
        lpq_spills,
        lpq_stall_cycles,
    }
}

/// One LPQ slot: the entry it holds (for a spill) and whose it is.
#[derive(Clone)]
struct Slot {
    owner: Option<usize>,
    /// The slot may take a new entry from this cycle (its old entry is dead or in memory).
    free_at: Cycle,
    /// When the entry it holds was inserted.
    inserted: Cycle,
    header: EntryHeader,
    data: BlockData,
}

/// One core's log state.
struct CoreLog {
    /// Sequence number of the running (or next) transaction; the finish register holds one less.
    seq: u64,
    llt: Vec<BlockId>,
    llt_next: usize,
    /// Lines logged by the running transaction (a line twice if the LLT forgot it).
    logged: Vec<BlockId>,
    /// The running transaction's entries in the LPQ, oldest first.
    live: VecDeque<usize>,
    next_index: u64,
    /// Spill positions used by the running transaction, and when its last spill is durable.
    spilled: u64,
    spill_durable: Cycle,
    region: (BlockId, u64),
    /// Injected bug `store-before-log-flush`: entries held back until commit.
    held: Vec<(BlockId, BlockData)>,
}

pub struct Proteus {
    bug: Option<Bug>,
    lpq0: BlockId,
    llt_entries: usize,
    /// Cycles from the core to the LPQ for the commit marker (the LLC latency).
    trip: Cycle,
    cores: Vec<CoreLog>,
    slots: Vec<Slot>,
    /// Slots that hold no live entry (`owner` is `None`): with none, a new entry must spill one
    /// and the search for a free slot is skipped. SQLite's transactions log more lines than the
    /// LPQ holds, and a search of every slot at each log-flush had been a third of a SQLite
    /// run's host time.
    unowned: usize,
    cursor: usize,
    c: Counters,
}

impl Proteus {
    pub fn new(layout: &Layout, cfg: &crate::config::ProteusConfig, trip: Cycle, bug: Option<Bug>) -> Proteus {
        let lpq = cfg.lpq_entries as usize;
        assert!(layout.nvllc_bytes >= fmt::bytes(lpq), "layout built with with_nvllc");
        let empty = EntryHeader { core: 0, seq: 0, index: 0, home: 0 };
        let cores = (0..layout.cores as usize)
            .map(|c| CoreLog {
                seq: 1,
                llt: Vec::with_capacity(cfg.llt_entries as usize),
                llt_next: 0,
                logged: Vec::with_capacity(256),
                live: VecDeque::with_capacity(lpq),
                next_index: 0,
                spilled: 0,
                spill_durable: Cycle::ZERO,
                region: layout.log_region(c),
                held: Vec::new(),
            })
            .collect();
        Proteus {
            bug,
            lpq0: layout.nvllc_block0(),
            llt_entries: cfg.llt_entries as usize,
            trip,
            cores,
            slots: vec![
                Slot { owner: None, free_at: Cycle::ZERO, inserted: Cycle::ZERO, header: empty, data: [0; 64] };
                lpq
            ],
            unowned: lpq,
            cursor: 0,
            c: Counters::default(),
        }
    }

    fn nv(&self, off: u64) -> BlockId {
        BlockId(self.lpq0.0 + off)
    }

    /// The LLT of core `c` has line `b`; if not, it takes it (FIFO replacement).
    fn llt_hit(&mut self, c: usize, b: BlockId) -> bool {
        let cl = &mut self.cores[c];
        if cl.llt.contains(&b) {
            return true;
        }
        if cl.llt.len() < self.llt_entries {
            cl.llt.push(b);
        } else {
            cl.llt[cl.llt_next] = b;
            cl.llt_next = (cl.llt_next + 1) % self.llt_entries;
        }
        false
    }

    /// A free slot, waiting for one (spilling the oldest live entry if none is free).
    fn alloc(&mut self, m: &mut Machine) -> usize {
        let n = self.slots.len();
        let mut best: Option<usize> = None;
        // From the cursor round; with every slot owned the search could find nothing.
        let searched = if self.unowned == 0 { 0 } else { n };
        for i in (self.cursor..n).chain(0..self.cursor).take(searched) {
            let s = &self.slots[i];
            if s.owner.is_none() {
                if s.free_at <= m.now {
                    self.cursor = (i + 1) % n;
                    return i;
                }
                if best.is_none_or(|b| s.free_at < self.slots[b].free_at) {
                    best = Some(i);
                }
            }
        }
        let before = m.now;
        let i = match best {
            Some(i) => i,
            None => self.spill_oldest(m),
        };
        m.wait_until(self.slots[i].free_at);
        self.c.lpq_stall_cycles += (m.now - before).get();
        i
    }

    /// Spill the oldest entry of the core with the most live entries to its log region; returns
    /// its slot, free once the spill (and every earlier one of that core) is durable.
    fn spill_oldest(&mut self, m: &mut Machine) -> usize {
        let v = (0..self.cores.len()).max_by_key(|&c| (self.cores[c].live.len(), usize::MAX - c)).expect("a core");
        let cl = &mut self.cores[v];
        let i = cl.live.pop_front().expect("a full LPQ holds live entries");
        let p = cl.spilled;
        if p >= fmt::spill_capacity(cl.region.1) {
            m.fatal.get_or_insert_with(|| {
                format!("log.size_bytes too small: one transaction spills more than {p} Proteus entries")
            });
            self.slots[i].owner = None;
            self.slots[i].free_at = m.now;
            self.unowned += 1;
            return i;
        }
        let (log0, _) = cl.region;
        let s = &self.slots[i];
        // On N cores the entry may have been inserted by a core whose clock is ahead: the LPQ
        // is full, and the spill can happen, only from its insertion on. Spilled earlier, the
        // slot would take this core's entry before the spilled one was inserted, and the
        // spilled one, recorded later, would overwrite it in the persistent LPQ.
        m.wait_until(s.inserted);
        debug_assert!(s.header.index == p || self.bug.is_some(), "spills are in entry order");
        let (header, data) = (s.header, s.data);
        let d = m.write_block(BlockId(log0.0 + fmt::spill_data_block(p)), WriteKind::LogData, data);
        // The header is durable after the data, also when the data's bank holds it behind another
        // core's writes (this core's clock behind theirs).
        let h = m.write_encoded_durable_after(
            BlockId(log0.0 + fmt::spill_header_block(p)),
            WriteKind::LogMeta,
            d.durable,
            || header.encode(&data),
        );
        cl.spilled += 1;
        cl.spill_durable = cl.spill_durable.max(h.durable);
        let s = &mut self.slots[i];
        s.owner = None;
        s.free_at = cl.spill_durable;
        self.unowned += 1;
        self.c.lpq_spills += 1;
        i
    }

    /// Log-flush: put core `c`'s undo entry for `home` (old content `data`) into the LPQ.
    fn insert(&mut self, m: &mut Machine, c: usize, home: BlockId, data: BlockData) {
        let i = self.alloc(m);
        let cl = &mut self.cores[c];
        let header = EntryHeader { core: c as u32, seq: cl.seq, index: cl.next_index, home: home.0 };
        cl.next_index += 1;
        cl.live.push_back(i);
        debug_assert!(self.slots[i].owner.is_none());
        let now = m.now;
        self.slots[i] = Slot { owner: Some(c), free_at: Cycle::ZERO, inserted: now, header, data };
        self.unowned -= 1;
        m.nv_record(self.nv(fmt::slot_data_block(i)), |_| data, now);
        m.nv_record(self.nv(fmt::slot_header_block(i)), |_| header.encode(&data), now);
        self.c.log_entries += 1;
    }

    /// Drop core `c`'s live entries from the LPQ at cycle `at`; `erase`: also clear their
    /// headers (an injected bug drops entries that recovery still needs).
    fn drop_entries(&mut self, m: &mut Machine, c: usize, at: Cycle, erase: bool) {
        while let Some(i) = self.cores[c].live.pop_front() {
            if erase {
                m.nv_record(self.nv(fmt::slot_header_block(i)), |_| [0; 64], at);
            }
            let s = &mut self.slots[i];
            s.owner = None;
            s.free_at = at;
            self.unowned += 1;
            self.c.entries_dropped += 1;
        }
    }

    /// Write core `c`'s finish register (its running transaction's entries die) and wait for it;
    /// returns the cycle it is durable. Starts the core's next transaction.
    fn finish(&mut self, m: &mut Machine, c: usize, ack: bool) -> Cycle {
        let seq = self.cores[c].seq;
        let t = m.now + self.trip;
        m.nv_record(self.nv(fmt::register_block(c)), |_| fmt::encode_register(seq), t);
        if ack && self.bug == Some(Bug::AckBeforeDurable) {
            m.ack_through(m.txs_committed);
        }
        m.wait_until(t);
        if ack {
            m.ack_through(m.txs_committed);
        }
        if self.bug == Some(Bug::CommitDropsOtherCores) {
            for o in (0..self.cores.len()).filter(|&o| o != c) {
                self.drop_entries(m, o, t, true);
            }
        }
        self.drop_entries(m, c, t, false);
        let cl = &mut self.cores[c];
        cl.seq += 1;
        cl.next_index = 0;
        cl.spilled = 0;
        cl.spill_durable = Cycle::ZERO;
        cl.logged.clear();
        cl.llt.clear();
        cl.llt_next = 0;
        t
    }

    /// The entries held back by `store-before-log-flush`, flushed now.
    fn flush_held(&mut self, m: &mut Machine, c: usize) {
        let held = std::mem::take(&mut self.cores[c].held);
        for &(b, d) in &held {
            self.insert(m, c, b, d);
        }
        self.cores[c].held = held;
        self.cores[c].held.clear();
    }
}

impl Protocol for Proteus {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        LogHead { format: LogFormat::Proteus, start: 0, start_seq: 0 }.write_regions(layout, image);
        for c in 0..fmt::REGISTERS {
            image[self.nv(fmt::register_block(c as usize)).range()].copy_from_slice(&fmt::encode_register(0));
        }
    }

    fn begin(&mut self, m: &mut Machine) {
        m.begin_tx_order();
    }

    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, false);
    }

    fn before_store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        let c = m.core();
        for b in blocks_of(addr, len) {
            if self.llt_hit(c, b) {
                self.c.llt_hits += 1;
                continue;
            }
            // Log-load (a load of the line), then the log-flush instruction.
            m.access_block(b, false);
            m.compute(Cycle::new(1));
            let data = if m.keep_bytes { m.arch_block(b) } else { [0; 64] };
            self.cores[c].logged.push(b);
            if self.bug == Some(Bug::StoreBeforeLogFlush) {
                self.cores[c].held.push((b, data));
            } else {
                self.insert(m, c, b, data);
            }
        }
    }

    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        m.access_range(addr, len, true);
    }

    fn commit(&mut self, m: &mut Machine) {
        let c = m.core();
        if self.bug == Some(Bug::DropUncommittedEntry) {
            let now = m.now;
            self.drop_entries(m, c, now, true);
        }
        for k in 0..self.cores[c].logged.len() {
            m.clflush(self.cores[c].logged[k], WriteKind::Home);
        }
        m.fence();
        self.flush_held(m, c);
        self.finish(m, c, true);
    }

    fn abort(&mut self, m: &mut Machine, _written: &[(Addr, u32)]) {
        let c = m.core();
        self.flush_held(m, c);
        // The library's rollback: the old values (already in `m.arch`) stored over each logged
        // line, flushed home, fenced; then the transaction is finished.
        for k in 0..self.cores[c].logged.len() {
            m.access_block(self.cores[c].logged[k], true);
        }
        for k in 0..self.cores[c].logged.len() {
            m.clflush(self.cores[c].logged[k], WriteKind::Home);
        }
        m.fence();
        self.finish(m, c, false);
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.c.list()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::rng::Rng;

    /// The count of slots without a live entry, which lets a full LPQ skip the search for a free
    /// slot, stays the number of such slots through seeded log-flushes (filling the LPQ and
    /// spilling), transactions' ends and cores' turns.
    #[test]
    fn the_unowned_count_follows_the_slots() {
        let cfg = Config::build(None, &["machine.cores=2".into(), "proteus.lpq_entries=8".into()]).unwrap();
        let layout = crate::pmem::Layout::new(1 << 16, 1 << 20).with_cores(2).with_nvllc(fmt::bytes(8));
        let mut m = Machine::new(&cfg, layout, vec![0; layout.total_bytes() as usize], false);
        let mut p = Proteus::new(&layout, &cfg.proteus, Cycle::new(20), None);
        let mut rng = Rng::new(5);
        let (mut spills, mut drops) = (0, 0);
        for step in 0..3000 {
            let c = rng.below(2) as usize;
            if rng.below(10) == 0 {
                let (at, live) = (m.now, p.cores[c].live.len());
                p.drop_entries(&mut m, c, at, false);
                p.cores[c].spilled = 0;
                drops += live;
            } else {
                let before = p.c.lpq_spills;
                p.insert(&mut m, c, BlockId(rng.below(1024)), [step as u8; 64]);
                spills += p.c.lpq_spills - before;
            }
            m.now += Cycle::new(rng.below(400));
            let unowned = p.slots.iter().filter(|s| s.owner.is_none()).count();
            assert_eq!(p.unowned, unowned, "seed 5, step {step}");
        }
        assert!(spills > 100 && drops > 100, "both paths taken: {spills} spills, {drops} entries dropped");
    }
}
