//! The memory controller: banks, read/write latency, a bounded write queue, asynchronous
//! write-backs, all by timestamps.
//!
//! Each bank is busy until a cycle (`bank_free`). Requests are scheduled first-come first-served
//! per bank at the moment they are issued: a read issued at `t` to bank `b` starts at
//! `max(t, bank_free[b])` and completes `read_latency` later; a write the same with
//! `write_latency`, and is durable when it completes (or at acceptance when the persistence
//! domain covers the queue: `machine.persist_domain` other than `memory`). Blocks are
//! interleaved across banks by block number, so consecutive log blocks use different banks.
//!
//! The write queue holds accepted writes until they complete. When it is full, a new write is
//! accepted only when the earliest one completes; the writer stalls until then. It is kept as a
//! ring of completion cycles in increasing order: a new write is inserted from the back (where
//! it almost always belongs: writes issued later tend to complete later), a full queue's
//! earliest write is the front, and completed writes leave from the front when the ring holds
//! `queue_cap` entries (before that, the queue cannot be full whatever has completed; a
//! completed entry, earlier than any new write's completion, never moves a later one).
//!
//! Under `memory.attach = "cxl"` (docs/cxl.md) the device sits behind a CXL link: a read's data
//! reaches the core `link_read` cycles after its bank finishes (request and response cross the
//! link and its switches), and a write reaches the device `link_write` cycles after the
//! controller takes it, so its bank starts it no earlier than then. The link occupies no bank:
//! a bank's busy time is its device time alone. Under `ddr` both are 0 and nothing changes.
//!
//! Left out: row buffers, read-over-write priority, refresh. Reads and writes to one bank are
//! served in issue order, which is what lets the model say that two writes to the same block
//! become durable in the order they were issued.
//!
//! When the domain covers the queue a write is durable once accepted, so the same promise needs
//! acceptance in issue order per bank: with several cores a core whose clock is behind can
//! issue a write at a cycle before another core's write to the same bank, issued earlier (in
//! the order the simulator runs them, the order of the cores' operations). That write is
//! accepted no earlier than the bank's last acceptance (`bank_accepted`): without it the later
//! write of a block, carrying its newer bytes, could become durable first and be overwritten in
//! the durable image by the older one. With one core writes reach a bank in cycle order, and
//! the rule changes nothing.

use crate::config::Config;
use crate::types::{BlockId, Cycle};

/// Timing of one accepted write.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WriteTiming {
    /// When the controller took the write (the writer is stalled until then).
    pub accepted: Cycle,
    /// When the bank started programming it: from here until `done` the write is in flight,
    /// and under a torn-write crash model part of it may be durable (docs/faults.md).
    pub started: Cycle,
    /// When the bank finished the write.
    pub done: Cycle,
    /// When the write became durable: `done`, or `accepted` under ADR.
    pub durable: Cycle,
}

/// Bank and queue timing state.
pub struct MemCtl {
    bank_free: Vec<Cycle>,
    banks: u64,
    /// `banks - 1` when `banks` is a power of two (the common case: a mask, not a division).
    bank_mask: Option<u64>,
    read_cycles: Cycle,
    write_cycles: Cycle,
    /// Cycles the CXL path adds to a read, and before a write reaches its bank (0 under `ddr`).
    link_read: Cycle,
    link_write: Cycle,
    /// Completion cycles of the queued writes, increasing from `head` (a ring of a power of two
    /// at least `queue_cap` entries; `ring_mask` = its length - 1).
    ring: Vec<Cycle>,
    ring_mask: usize,
    head: usize,
    len: usize,
    queue_cap: usize,
    adr: bool,
    /// Under `adr`: per bank, the cycle of its last acceptance.
    bank_accepted: Vec<Cycle>,
    /// Reads served.
    pub reads: u64,
    /// Writes served.
    pub writes: u64,
    /// Cycles writers spent waiting for a free write-queue entry.
    pub queue_full_stall_cycles: Cycle,
}

impl MemCtl {
    pub fn new(cfg: &Config) -> MemCtl {
        let cap = cfg.memory.write_queue_entries as usize;
        let (link_read, link_write) = cfg.memory.cxl_cycles(cfg);
        MemCtl {
            link_read,
            link_write,
            bank_free: vec![Cycle::ZERO; cfg.memory.banks as usize],
            banks: cfg.memory.banks,
            bank_mask: cfg.memory.banks.is_power_of_two().then_some(cfg.memory.banks - 1),
            read_cycles: cfg.ns_to_cycles(cfg.memory.read_latency_ns),
            write_cycles: cfg.ns_to_cycles(cfg.memory.write_latency_ns),
            ring: vec![Cycle::ZERO; cap.next_power_of_two()],
            ring_mask: cap.next_power_of_two() - 1,
            head: 0,
            len: 0,
            queue_cap: cap,
            adr: cfg.machine.persist_domain.covers_queue(),
            bank_accepted: vec![Cycle::ZERO; cfg.memory.banks as usize],
            reads: 0,
            writes: 0,
            queue_full_stall_cycles: Cycle::ZERO,
        }
    }

    /// The bank a block maps to.
    #[inline]
    pub fn bank_of(&self, b: BlockId) -> usize {
        match self.bank_mask {
            Some(m) => (b.0 & m) as usize,
            None => (b.0 % self.banks) as usize,
        }
    }

    /// Issue a read of block `b` at cycle `now`; returns the cycle its data arrives.
    #[inline]
    pub fn read(&mut self, now: Cycle, b: BlockId) -> Cycle {
        let read_cycles = self.read_cycles;
        let bank = self.bank_mut(b);
        let done = now.max(*bank) + read_cycles;
        *bank = done;
        self.reads += 1;
        done + self.link_read
    }

    /// Issue a write of block `b` at cycle `now`.
    #[inline]
    pub fn write(&mut self, now: Cycle, b: BlockId) -> WriteTiming {
        self.write_after(now, b, Cycle::ZERO)
    }

    /// Issue a write that the controller starts no earlier than `min_start` (in-controller
    /// ordering, e.g. a block group's META after its data blocks: with equal write latency, a
    /// write started later on any bank completes later).
    #[inline]
    pub fn write_after(&mut self, now: Cycle, b: BlockId, min_start: Cycle) -> WriteTiming {
        self.write_timed(now, b, min_start, self.write_cycles)
    }

    /// [`MemCtl::write_after`] for a write whose device time is `cycles` (a PCM device decides
    /// it per write, from the cells it programs).
    #[inline(always)]
    pub fn write_timed(&mut self, now: Cycle, b: BlockId, min_start: Cycle, cycles: Cycle) -> WriteTiming {
        let mut accepted = now;
        if self.len >= self.queue_cap {
            // Writes complete by `now` leave (head and length kept in registers); if the queue
            // is still full, wait for the earliest completion, which frees its entry.
            let (mut head, mut len) = (self.head, self.len);
            while len > 0 && self.ring_at(head) <= now {
                head = (head + 1) & self.ring_mask;
                len -= 1;
            }
            if len >= self.queue_cap {
                accepted = self.ring_at(head);
                head = (head + 1) & self.ring_mask;
                len -= 1;
                self.queue_full_stall_cycles += accepted - now;
            }
            (self.head, self.len) = (head, len);
        }
        if self.adr {
            let i = self.bank_of(b);
            accepted = accepted.max(self.bank_accepted[i]);
            self.bank_accepted[i] = accepted;
        }
        let arrives = accepted + self.link_write;
        let bank = self.bank_mut(b);
        let start = arrives.max(*bank).max(min_start);
        let done = start + cycles;
        *bank = done;
        self.enqueue(done);
        self.writes += 1;
        WriteTiming { accepted, started: start, done, durable: if self.adr { accepted } else { done } }
    }

    /// Insert a completion cycle, keeping the ring in increasing order (from the back).
    #[inline]
    fn enqueue(&mut self, done: Cycle) {
        let mut pos = self.head + self.len;
        while pos > self.head && self.ring_at(pos - 1) > done {
            *self.ring_mut(pos) = self.ring_at(pos - 1);
            pos -= 1;
        }
        *self.ring_mut(pos) = done;
        self.len += 1;
    }

    /// Ring entry `i` (taken modulo the ring's length).
    #[inline(always)]
    fn ring_at(&self, i: usize) -> Cycle {
        // SAFETY: `ring.len() == ring_mask + 1` (both set in `new`, the ring is never resized),
        // so `i & ring_mask` is in bounds.
        unsafe { *self.ring.get_unchecked(i & self.ring_mask) }
    }

    #[inline(always)]
    fn ring_mut(&mut self, i: usize) -> &mut Cycle {
        // SAFETY: as in `ring_at`.
        unsafe { self.ring.get_unchecked_mut(i & self.ring_mask) }
    }

    /// The busy-until cycle of block `b`'s bank.
    #[inline(always)]
    fn bank_mut(&mut self, b: BlockId) -> &mut Cycle {
        let bank = self.bank_of(b);
        debug_assert!(bank < self.bank_free.len());
        // SAFETY: `bank_of` is below `banks` (a mask of `banks - 1` for a power of two, else a
        // remainder of `banks`), and `bank_free.len() == banks` (set in `new`, never resized).
        unsafe { self.bank_free.get_unchecked_mut(bank) }
    }

    /// A cycle by which every write issued so far has completed: the latest completion among
    /// those still in the ring (0 if none), which may lie in the past.
    pub fn all_writes_done(&self) -> Cycle {
        match self.len {
            0 => Cycle::ZERO,
            n => self.ring_at(self.head + n - 1),
        }
    }

    /// Writes accepted and not yet complete at cycle `t` (in the controller's queue or the
    /// device's buffers): what a power failure at `t` leaves to be drained (docs/cxl.md).
    pub fn queued_at(&self, t: Cycle) -> usize {
        (0..self.len).filter(|&i| self.ring_at(self.head + i) > t).count()
    }

    /// Read latency in cycles (no queueing).
    pub fn read_cycles(&self) -> Cycle {
        self.read_cycles
    }

    /// Write latency in cycles (no queueing).
    pub fn write_cycles(&self) -> Cycle {
        self.write_cycles
    }
}

#[cfg(test)]
mod tests;
