//! Stores inside the persistence domain (`machine.persist_domain = "eadr"`, `"bbb"` or `"gpf"`;
//! docs/machine.md "Persistence domains", docs/cxl.md), and the drain work a Global Persistent
//! Flush would have at each moment ([`GpfWork`]).
//!
//! Under `eadr` and `gpf` (whose first phase writes the host's caches back) every cache level is
//! in the domain: a store is durable once performed (at a
//! power failure the caches are written back). Under `bbb` each core has a battery-backed
//! persist buffer (bbPB) beside its L1 (Alshboul et al., "BBB: Simplifying Persistent
//! Programming using Battery-Backed Buffers", HPCA 2021, section III): a store is allocated in
//! it as it is written to the cache and is durable from then on; at a power failure the battery
//! drains the buffer to memory. This module keeps the buffers and records each store as a
//! durable change of its block, so the crash checker's durable image holds what the caches or
//! the buffers would drain.
//!
//! Which stores: those of a protocol that persists through the core's own stores, flushes and
//! fences (`ProtocolKind::stores_persist`: baseline, S-WAL). The hardware protocols keep their
//! transactional lines under their own hardware, which writes them to NVM itself (log, home,
//! NV-LLC): the power-fail drain discards those lines, since draining a redo protocol's
//! uncommitted in-place lines would persist uncommitted data. For them the domain covers the
//! controller's write queue (a write is durable once accepted, as under `adr`).
//!
//! The bbPB, as modelled: `machine.bbpb_entries` 64-byte entries per core, oldest first. A
//! store to a block the buffer holds coalesces into its entry; any other store allocates an
//! entry, and when the buffer is full its oldest entry first drains to the memory controller
//! (the core waits until the controller accepts that write: the store cannot retire into a full
//! buffer). When to drain is a design parameter; draining only when full is our choice: it
//! coalesces the most. A store by one core supersedes another core's entry for
//! the same block (the newer line is in the storing core's buffer, durable), so that entry is
//! dropped rather than drained over the newer value. Every store of such a protocol goes
//! through the buffer, so the buffer's drains are how its lines reach NVM: a dirty line that
//! leaves the LLC is dropped without a write-back (its content is in NVM or in a buffer
//! entry). This is what keeps BBB's NVM writes close to eADR's (the paper's claim); without
//! it each line would be written twice, once drained and once evicted.
//!
//! A memory write of such a protocol (a write-back, a bbPB drain) carries a line whose content
//! has been durable since its last store, so it is not recorded again: the durable image is
//! the initial image plus every store at the cycle it was performed. (The program view `arch`
//! can hold a running S-WAL transaction's bytes in a home line that the library has not stored
//! yet, `src/protocol/s_wal.rs`; a write-back of that line must not make them durable, and the
//! stores' record never does.)

use super::Machine;
use crate::config::{Config, PersistDomain};
use crate::pmem::{read_block, DurableWrite};
use crate::types::{BlockData, BlockId};
use std::collections::VecDeque;

/// The core's stores are durable once performed; under `bbb`, with the persist buffers.
pub(crate) struct StoreDomain {
    /// Per core, its persist buffer's blocks oldest first, each with the bytes it holds (zeros
    /// unless payloads are kept). Empty under `eadr`.
    bbpb: Vec<VecDeque<(BlockId, BlockData)>>,
    /// bbPB entries drained to memory because the buffer was full.
    pub drained: u64,
    /// bbPB entries dropped because another core's store superseded them.
    pub superseded: u64,
}

impl StoreDomain {
    /// `bbb`: the lines reach NVM through the persist buffers, not through write-backs.
    #[inline]
    pub fn through_buffer(&self) -> bool {
        !self.bbpb.is_empty()
    }
}

/// What a run may read of the persistence domain beyond whether it covers the controller's
/// queue (which the controller reads in every run): whether it covers the core's stores, which
/// domain it is, and the persist buffers' size, in the order of the bits of
/// [`Machine::domain_unread`]. A run that never read one of them gives the same figures for
/// any configuration that agrees on the others (docs/machine.md, "Persistence domains"):
/// `reproduce` runs such points once, as it does for the `[ordering]` knobs.
pub const DOMAIN_READS: [&str; 3] = ["machine.persist_domain:stores", "machine.persist_domain", "machine.bbpb_entries"];

/// The configuration's value of each of [`DOMAIN_READS`], after the one every run reads (the
/// queue's cover), as `(name, value)` words.
pub fn domain_words(cfg: &Config) -> [(&'static str, String); 4] {
    let d = cfg.machine.persist_domain;
    [
        ("machine.persist_domain:queue", d.covers_queue().to_string()),
        (DOMAIN_READS[0], d.covers_stores().to_string()),
        (DOMAIN_READS[1], format!("{d:?}")),
        (DOMAIN_READS[2], cfg.machine.bbpb_entries.to_string()),
    ]
}

impl Machine {
    /// The running protocol persists through the core's own stores: if the persistence domain
    /// covers them (`eadr`, `bbb`), make every store durable once performed (and, under `bbb`,
    /// go through the persist buffers), and `clflush` a no-op. The only reader of the domain
    /// beyond the controller's queue: it records what it reads ([`DOMAIN_READS`]).
    pub fn persist_stores(&mut self) {
        self.domain_read |= 1;
        if !self.domain.covers_stores() {
            return;
        }
        self.domain_read |= 2;
        let bbpb = match self.domain {
            PersistDomain::Bbb => {
                self.domain_read |= 4;
                (0..self.cores()).map(|_| VecDeque::with_capacity(self.bbpb_entries)).collect()
            }
            _ => Vec::new(),
        };
        self.stores = Some(Box::new(StoreDomain { bbpb, drained: 0, superseded: 0 }));
        self.special = true;
    }

    /// The names of [`DOMAIN_READS`] the run has not read.
    pub fn domain_unread(&self) -> impl Iterator<Item = &'static str> + '_ {
        DOMAIN_READS.iter().enumerate().filter(|&(i, _)| self.domain_read & 1 << i == 0).map(|(_, k)| *k)
    }

    /// Stores go through the persist buffers (`bbb`, a protocol that persists through its stores).
    pub fn persist_buffers(&self) -> bool {
        self.stores.as_ref().is_some_and(|d| d.through_buffer())
    }

    /// bbPB counters (drained when full, superseded by another core), zero outside `bbb`.
    pub fn bbpb_counters(&self) -> (u64, u64) {
        self.stores.as_ref().map_or((0, 0), |d| (d.drained, d.superseded))
    }

    /// The running core has performed a store to block `b`, which is now durable: through its
    /// persist buffer under `bbb`; and, when recording, a durable change of `b` now.
    #[inline(never)]
    pub(super) fn store_persisted(&mut self, b: BlockId) {
        if b.0 >= self.volatile_block0 {
            return; // a lock line: volatile
        }
        let data = if self.keep_bytes { read_block(&self.arch, b) } else { [0; 64] };
        let (core, cap) = (self.core, self.bbpb_entries);
        let d = self.stores.as_mut().expect("stores in the domain");
        if !d.bbpb.is_empty() {
            for (c, q) in d.bbpb.iter_mut().enumerate() {
                if c != core {
                    let before = q.len();
                    q.retain(|e| e.0 != b);
                    d.superseded += (before - q.len()) as u64;
                }
            }
            let q = &mut d.bbpb[core];
            if let Some(e) = q.iter_mut().find(|e| e.0 == b) {
                e.1 = data;
            } else {
                let oldest = (q.len() >= cap).then(|| q.pop_front().expect("a full buffer"));
                q.push_back((b, data));
                if let Some((ob, od)) = oldest {
                    d.drained += 1;
                    let kind = self.kind_of(ob);
                    let t = self.write_block(ob, kind, od);
                    self.now = self.now.max(t.accepted);
                }
            }
        }
        let kind = self.kind_of(b);
        if let Some(r) = &mut self.record {
            r.durable.writes.push(DurableWrite { started: self.now, durable: self.now, block: b, kind, data });
        }
    }
}

/// Cycles between two samples of the drain work (a constant: a sample scans the LLC's tags).
pub const GPF_SAMPLE_CYCLES: u64 = 10_000;

/// Under `gpf` and `gpf-no-writeback`: what a power failure at each sampled moment would leave
/// to Global Persistent Flush (docs/cxl.md "What GPF costs"): the dirty lines of the host's
/// caches (phase 1, written back under `gpf` only) and the writes accepted but not yet
/// complete in the controller's queue and the device's buffers (phase 2). Sampled every
/// [`GPF_SAMPLE_CYCLES`] of the running core's clock, at its next memory access; reset at the
/// start of the measured region.
#[derive(Clone, Debug, Default)]
pub struct GpfWork {
    /// The cycle of the next sample.
    pub next: crate::types::Cycle,
    /// Phase 1 runs (`gpf`; not `gpf-no-writeback`).
    pub writeback: bool,
    pub samples: u64,
    pub dirty_sum: u64,
    pub dirty_max: u64,
    pub queued_sum: u64,
    pub queued_max: u64,
    /// The most lines one power failure would have drained (both phases together).
    pub drain_max: u64,
}

impl GpfWork {
    /// A sampler under a GPF domain, else `None`.
    pub fn of(cfg: &Config) -> Option<Box<GpfWork>> {
        let d = cfg.machine.persist_domain;
        d.is_gpf().then(|| Box::new(GpfWork { writeback: d == PersistDomain::Gpf, ..Default::default() }))
    }

    /// Forget the samples taken so far (the warm-up's).
    pub fn reset(&mut self) {
        *self = GpfWork { next: self.next, writeback: self.writeback, ..Default::default() };
    }

    /// Take one sample: `dirty` lines in the caches, `queued` writes in flight.
    pub fn add(&mut self, dirty: u64, queued: u64) {
        let dirty = if self.writeback { dirty } else { 0 };
        self.samples += 1;
        (self.dirty_sum, self.dirty_max) = (self.dirty_sum + dirty, self.dirty_max.max(dirty));
        (self.queued_sum, self.queued_max) = (self.queued_sum + queued, self.queued_max.max(queued));
        self.drain_max = self.drain_max.max(dirty + queued);
    }
}

impl Machine {
    /// Sample the drain work now ([`GpfWork`]): the dirty lines of every core's caches (a block
    /// counted once however many levels hold it dirty; lock lines, volatile, left out) and the
    /// writes in flight below the controller.
    #[inline(never)]
    pub(super) fn sample_gpf(&mut self) {
        let h = &self.hier;
        let dirty = (0..h.llc.slots())
            .filter_map(|s| h.llc.block_at(crate::cache::Slot(s)))
            .filter(|&b| b.0 < self.volatile_block0 && h.is_dirty(b))
            .count() as u64;
        let queued = self.ctl.queued_at(self.now) as u64;
        let now = self.now;
        let g = self.gpf.as_mut().expect("sampling under gpf");
        g.add(dirty, queued);
        g.next = crate::types::Cycle::new(now.get() - now.get() % GPF_SAMPLE_CYCLES + GPF_SAMPLE_CYCLES);
    }
}
