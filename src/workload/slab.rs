//! A persistent allocator of fixed-size slots, for workloads' nodes, entries and edges.
//!
//! Its metadata lives in persistent memory and is changed only through [`Pm`] stores, inside
//! the caller's transaction, so an allocation or a free is atomic with the transaction that
//! makes it: a crash never leaks or double-allocates a slot (a rolled-back transaction rolls
//! back its allocations too).
//!
//! Layout at `meta` (16 bytes, little-endian): `free_head` u64 (address of the first free slot,
//! 0 = none), `bump` u64 (slots handed out from the untouched region so far). A free slot holds
//! the address of the next free slot in its first 8 bytes.

use super::Pm;
use crate::types::Addr;

/// Metadata bytes at `meta`.
pub const META_BYTES: u64 = 16;

/// A slab of `capacity` slots of `slot_bytes` each, starting at `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slab {
    pub meta: Addr,
    pub base: Addr,
    pub slot_bytes: u64,
    pub capacity: u64,
}

impl Slab {
    /// A slab whose metadata is at `meta` and whose slots follow at `base`.
    pub fn new(meta: Addr, base: Addr, slot_bytes: u64, capacity: u64) -> Slab {
        assert!(slot_bytes >= 8, "a free slot stores an 8-byte link");
        Slab { meta, base, slot_bytes, capacity }
    }

    /// Bytes from `base` to the end of the last slot.
    pub fn bytes(&self) -> u64 {
        self.slot_bytes * self.capacity
    }

    /// Take a slot; `None` when the slab is full.
    pub fn alloc<P: Pm>(&self, pm: &mut P) -> Option<Addr> {
        let head = pm.load_u64(self.meta);
        if head != 0 {
            let next = pm.load_u64(Addr(head));
            pm.store_u64(self.meta, next);
            return Some(Addr(head));
        }
        let bump = pm.load_u64(self.meta + 8);
        if bump == self.capacity {
            return None;
        }
        pm.store_u64(self.meta + 8, bump + 1);
        Some(self.base + bump * self.slot_bytes)
    }

    /// Return a slot taken by [`Slab::alloc`].
    pub fn free<P: Pm>(&self, pm: &mut P, slot: Addr) {
        debug_assert!(self.contains(slot));
        self.free_foreign(pm, slot);
    }

    /// Put `slot`, a slot of this slab or of another one of the same slot size, on this slab's
    /// free list (per-core allocators: a core frees into its own list whichever region the
    /// slot came from, and its allocations pop it from there).
    pub fn free_foreign<P: Pm>(&self, pm: &mut P, slot: Addr) {
        let head = pm.load_u64(self.meta);
        pm.store_u64(slot, head);
        pm.store_u64(self.meta, slot.0);
    }

    /// Is `a` the first byte of one of this slab's slots?
    pub fn contains(&self, a: Addr) -> bool {
        a.0 >= self.base.0 && a.0 < self.base.0 + self.bytes() && (a.0 - self.base.0).is_multiple_of(self.slot_bytes)
    }

    /// Slots in use, read from a data area (for verifiers): handed out minus free-list length.
    /// `Err` if the free list is malformed (a cycle, or a link outside the slab).
    pub fn used_in(&self, data: &[u8]) -> Result<u64, String> {
        let rd = |a: u64| u64::from_le_bytes(data[a as usize..a as usize + 8].try_into().unwrap());
        let bump = rd(self.meta.0 + 8);
        if bump > self.capacity {
            return Err(format!("slab at {:#x}: bump {bump} beyond capacity {}", self.meta.0, self.capacity));
        }
        let (mut free, mut at) = (0u64, rd(self.meta.0));
        while at != 0 {
            if !self.contains(Addr(at)) || (at - self.base.0) / self.slot_bytes >= bump {
                return Err(format!("slab at {:#x}: free link {at:#x} outside the handed-out slots", self.meta.0));
            }
            free += 1;
            if free > bump {
                return Err(format!("slab at {:#x}: free list longer than the slots handed out", self.meta.0));
            }
            at = rd(at);
        }
        Ok(bump - free)
    }
}

/// Slabs side by side as a data area holds them: region `a` (of [`Regions::bumps`]`.len()`)
/// has allocator `a`'s slots, right after region `a - 1`, from the first slab's `base`. The
/// structural verifiers of the workloads with one allocator per core read them here.
pub struct Regions {
    /// Per allocator, the slots its bump pointer has handed out.
    pub bumps: Vec<u64>,
    /// Per slot over all regions, whether a free list holds it.
    pub free: Vec<bool>,
    /// Slots handed out and not on a free list.
    pub used: u64,
}

impl Regions {
    /// Read and check the metadata of `slabs` (region order) in `data`: each bump within its
    /// capacity, the free lists well formed and disjoint (a list may hold slots of any region).
    /// `Err` is one line that names the workload `what` and its slots `unit` ("slot", "chunk").
    pub fn read(data: &[u8], slabs: &[Slab], what: &str, unit: &str) -> Result<Regions, String> {
        let rd = |a: u64| u64::from_le_bytes(data[a as usize..a as usize + 8].try_into().unwrap());
        let mut bumps = Vec::with_capacity(slabs.len());
        for s in slabs {
            let bump = rd(s.meta.0 + 8);
            if bump > s.capacity {
                return Err(format!("{what}: slab at {:#x}: bump {bump} beyond capacity {}", s.meta.0, s.capacity));
            }
            bumps.push(bump);
        }
        let slots = slabs.iter().map(|s| s.capacity).sum::<u64>() as usize;
        let mut r = Regions { bumps, free: crate::hostmem::committed::<bool>(slots), used: 0 };
        let mut nfree = 0u64;
        for s in slabs {
            let meta = s.meta.0;
            let mut at = rd(meta);
            while at != 0 {
                let Some(i) = r.handed_out(&slabs[0], at) else {
                    return Err(format!("{what}: slab at {meta:#x}: free link {at:#x} outside the handed-out {unit}s"));
                };
                if std::mem::replace(&mut r.free[i], true) {
                    return Err(format!("{what}: slab at {meta:#x}: free {unit} {at:#x} listed twice (a cycle)"));
                }
                nfree += 1;
                at = rd(at);
            }
        }
        r.used = r.bumps.iter().sum::<u64>() - nfree;
        Ok(r)
    }

    /// The slot index (over all regions) of the slot at `at`, if `at` is the first byte of a
    /// slot its region's allocator has handed out; `first` is region 0's slab (every region
    /// has its slot size and capacity).
    pub fn handed_out(&self, first: &Slab, at: u64) -> Option<usize> {
        handed_out(first, &self.bumps, at)
    }
}

/// [`Regions::handed_out`] over the bump pointers `bumps` alone.
pub fn handed_out(first: &Slab, bumps: &[u64], at: u64) -> Option<usize> {
    let off = at.checked_sub(first.base.0)?;
    let s = off / first.slot_bytes;
    let (a, i) = (s / first.capacity, s % first.capacity);
    (off.is_multiple_of(first.slot_bytes) && a < bumps.len() as u64 && i < bumps[a as usize]).then_some(s as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::workload::native::Native;
    use std::collections::BTreeSet;

    #[test]
    fn alloc_and_free_match_a_set_model_and_abort_rolls_back_allocations() {
        let slab = Slab::new(Addr(0), Addr(64), 32, 50);
        let mut pm = Native::new(vec![0u8; 64 + 32 * 50]);
        let mut live: BTreeSet<u64> = BTreeSet::new();
        let mut rng = Rng::new(3);
        for step in 0..2000 {
            pm.begin();
            let abort = rng.chance(0.2);
            let mut got = Vec::new();
            let mut freed = Vec::new();
            for _ in 0..3 {
                if rng.chance(0.55) {
                    if let Some(a) = slab.alloc(&mut pm) {
                        let in_use = live.contains(&a.0) && !freed.contains(&a.0);
                        assert!(!in_use && !got.contains(&a.0), "step {step}: slot handed out twice");
                        got.push(a.0);
                    } else {
                        assert_eq!(live.len() + got.len() - freed.len(), 50, "step {step}: full only when all used");
                    }
                } else if let Some(&a) = live.iter().find(|a| !freed.contains(*a)) {
                    slab.free(&mut pm, Addr(a));
                    freed.push(a);
                }
            }
            if abort {
                pm.abort();
            } else {
                pm.commit();
                for a in freed {
                    live.remove(&a);
                }
                live.extend(got);
            }
            assert_eq!(slab.used_in(&pm.mem).unwrap(), live.len() as u64, "step {step} (seed 3)");
        }
    }

    #[test]
    fn a_free_list_cycle_is_reported() {
        let slab = Slab::new(Addr(0), Addr(64), 32, 4);
        let mut pm = Native::new(vec![0u8; 64 + 128]);
        pm.begin();
        let a = slab.alloc(&mut pm).unwrap();
        let b = slab.alloc(&mut pm).unwrap();
        slab.free(&mut pm, a);
        slab.free(&mut pm, b);
        pm.store_u64(a, b.0); // a -> b -> a
        pm.commit();
        assert!(slab.used_in(&pm.mem).is_err());
    }
}
