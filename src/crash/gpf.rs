//! The cut-short Global Persistent Flush (`crashtest --gpf-budget-lines N`; docs/cxl.md).
//!
//! Under `machine.persist_domain = "gpf"` a protocol that persists through the core's own
//! stores (`baseline`, `s-wal`) has every store durable once performed: the power failure's
//! first phase writes the host's dirty lines back. This fault gives that phase the energy for
//! `N` lines only. At crash cycle `t` the device holds every write the controller accepted by
//! `t` (the recorded `device` stream); a line whose content in the clean durable image (the
//! stores by `t`) differs from the device's is dirty in the caches. Phase 1 writes the dirty
//! lines back in ascending block order (a walk over the cache's sets visits lines in an order
//! unrelated to program order; ascending address is one such order, and deterministic) and
//! stops after `N`: every later dirty line keeps the device's content. The crash state is the
//! clean image with those lines reverted, checked as the torn states are.
//!
//! Other protocols and domains: the hardware protocols keep their transactional lines out of
//! the drain under every domain (their clean image is what reached the controller), and under
//! `gpf-no-writeback` no line is written back at all, so the clean image already is the
//! device's: no state differs, none is checked.
//!
//! The state of a point depends on the point alone: the streams are walked forward from the
//! last point, or from the start when a point is earlier.

use crate::pmem::DurableWrite;
use crate::types::{BlockData, BlockId, Cycle};
use std::collections::{BTreeSet, HashMap};

use super::torn::TornState;

/// The dirty lines at a crash point, from the recorded streams.
pub struct GpfCut<'a> {
    budget: u64,
    initial: &'a [u8],
    /// The clean record (the stores), sorted by durable cycle.
    stores: &'a [DurableWrite],
    /// The device stream, in durable order (indices into `device`).
    device: &'a [DurableWrite],
    order: Vec<usize>,
    next_store: usize,
    next_device: usize,
    clean: HashMap<u64, BlockData>,
    dev: HashMap<u64, BlockData>,
    /// Blocks whose clean content differs from the device's: the dirty lines.
    dirty: BTreeSet<u64>,
    at: Cycle,
}

impl<'a> GpfCut<'a> {
    /// The fault with a budget of `budget` lines (at least 1) over a run's record.
    pub fn new(budget: u64, initial: &'a [u8], stores: &'a [DurableWrite], device: &'a [DurableWrite]) -> GpfCut<'a> {
        assert!(budget >= 1, "a GPF budget of at least one line");
        let mut order: Vec<usize> = (0..device.len()).collect();
        order.sort_by_key(|&i| (device[i].durable, i));
        GpfCut {
            budget,
            initial,
            stores,
            device,
            order,
            next_store: 0,
            next_device: 0,
            clean: HashMap::new(),
            dev: HashMap::new(),
            dirty: BTreeSet::new(),
            at: Cycle::ZERO,
        }
    }

    fn device_block(&self, b: u64) -> BlockData {
        match self.dev.get(&b) {
            Some(d) => *d,
            None => self.initial[b as usize * 64..b as usize * 64 + 64].try_into().expect("a block"),
        }
    }

    fn refresh(&mut self, b: u64) {
        let differs = self.clean.get(&b).is_some_and(|c| *c != self.device_block(b));
        if differs {
            self.dirty.insert(b);
        } else {
            self.dirty.remove(&b);
        }
    }

    /// The dirty lines at `t` in drain order, with the device's content of each.
    pub fn dirty_at(&mut self, t: Cycle) -> Vec<(BlockId, BlockData)> {
        if t < self.at {
            *self = GpfCut::new(self.budget, self.initial, self.stores, self.device);
        }
        self.at = t;
        while self.next_store < self.stores.len() && self.stores[self.next_store].durable <= t {
            let w = &self.stores[self.next_store];
            self.clean.insert(w.block.0, w.data);
            self.next_store += 1;
            self.refresh(w.block.0);
        }
        while self.next_device < self.order.len() && self.device[self.order[self.next_device]].durable <= t {
            let w = &self.device[self.order[self.next_device]];
            self.dev.insert(w.block.0, w.data);
            self.next_device += 1;
            self.refresh(w.block.0);
        }
        self.dirty.iter().map(|&b| (BlockId(b), self.device_block(b))).collect()
    }

    /// The cut-short state of crash point `t`: the dirty lines past the budget keep the
    /// device's content. `None` when the budget covers every dirty line (the clean state).
    pub fn state(&mut self, t: Cycle) -> Option<TornState> {
        let dirty = self.dirty_at(t);
        let n = dirty.len() as u64;
        if n <= self.budget {
            return None;
        }
        let lost: Vec<(BlockId, BlockData)> = dirty.into_iter().skip(self.budget as usize).collect();
        let describe = format!(
            "GPF cut short: {} of {n} dirty lines written back (ascending block order), {} lost from block {}",
            self.budget,
            lost.len(),
            lost[0].0 .0
        );
        Some(TornState { blocks: lost, describe })
    }
}

/// The fault for a crash check, when asked (`spec.gpf_budget_lines`) and the run has stores
/// in the domain under `gpf` (otherwise no line is lost: see the module documentation).
pub(super) fn for_run<'a>(spec: &super::CrashSpec, rec: &'a crate::runner::Recorded) -> Option<GpfCut<'a>> {
    let budget = spec.gpf_budget_lines?;
    let gpf = spec.run.cfg.machine.persist_domain == crate::config::PersistDomain::Gpf;
    (gpf && spec.run.protocol.stores_persist())
        .then(|| GpfCut::new(budget, &rec.initial, &rec.record.durable.writes, &rec.record.device))
}

/// Check a `--gpf-budget-lines` value: 1 or more.
pub fn parse_budget(n: u64) -> Result<u64, String> {
    if n == 0 {
        Err("--gpf-budget-lines 0: allowed 1 or more (dirty lines GPF phase 1 writes back before its energy runs out)"
            .into())
    } else {
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::WriteKind;

    fn w(t: u64, b: u64, v: u8) -> DurableWrite {
        DurableWrite {
            started: Cycle::new(t),
            durable: Cycle::new(t),
            block: BlockId(b),
            kind: WriteKind::Home,
            data: [v; 64],
        }
    }

    #[test]
    fn lines_past_the_budget_keep_the_device_content_in_ascending_block_order() {
        let initial = vec![0u8; 64 * 8];
        let stores = [w(10, 5, 1), w(20, 2, 2), w(30, 7, 3), w(40, 5, 4)];
        let device = [w(35, 5, 1), w(50, 2, 2)];
        let mut cut = GpfCut::new(1, &initial, &stores, &device);
        assert!(cut.state(Cycle::new(5)).is_none(), "nothing dirty");
        assert!(cut.state(Cycle::new(15)).is_none(), "one dirty line, within the budget");
        let s = cut.state(Cycle::new(30)).expect("three dirty, one written back");
        assert_eq!(s.blocks.iter().map(|(b, d)| (b.0, d[0])).collect::<Vec<_>>(), vec![(5, 0), (7, 0)]);
        // Block 5 reached the device at 35: clean there until the store of 40.
        let s = cut.state(Cycle::new(36)).expect("2 and 7 dirty");
        assert_eq!(s.blocks.iter().map(|(b, _)| b.0).collect::<Vec<_>>(), vec![7]);
        let s = cut.state(Cycle::new(45)).expect("2, 5 and 7 dirty");
        assert_eq!(s.blocks.iter().map(|(b, d)| (b.0, d[0])).collect::<Vec<_>>(), vec![(5, 1), (7, 0)]);
        // An earlier point starts over and gives the same state as before.
        let s = cut.state(Cycle::new(30)).expect("again");
        assert_eq!(s.blocks.len(), 2);
        assert!(parse_budget(0).unwrap_err().contains("allowed 1 or more"));
    }
}
