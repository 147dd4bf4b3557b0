//! SPS: random swaps of entries of a persistent array (Table II; from the NV-Heaps suite).
//!
//! The array holds `entries` u64 values, initially `a[i] = i`. A transaction performs
//! `swaps_per_tx` swaps of two uniformly chosen entries: load both, store both. Each swap also
//! charges `compute_cycles_per_swap` non-memory instructions (docs/workloads.md counts them).
//!
//! Structural invariant (checked on every recovered image): the array is a permutation of
//! `0..entries`, i.e. every value appears exactly once.

use super::follow::{le64, Follow};
use super::Pm;
use crate::rng::Rng;
use crate::types::{Addr, BlockData};
use serde::{Deserialize, Serialize};

/// SPS: random swaps of entries of a persistent array of u64.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SpsConfig {
    /// Number of 8-byte array entries (default 2^21 = 16 MiB, 16x the LLC).
    pub entries: u64,
    /// Swaps per transaction.
    pub swaps_per_tx: u64,
    /// Non-memory instructions per swap (see docs/workloads.md for the count).
    pub compute_cycles_per_swap: u64,
}

impl Default for SpsConfig {
    fn default() -> Self {
        SpsConfig { entries: 1 << 21, swaps_per_tx: 1, compute_cycles_per_swap: 24 }
    }
}

impl SpsConfig {
    /// Range checks; one-line errors naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        if !(16..=(1 << 28)).contains(&self.entries) {
            return Err(format!("workload.sps.entries = {}: allowed 16..=268435456", self.entries));
        }
        if !(1..=4096).contains(&self.swaps_per_tx) {
            return Err(format!("workload.sps.swaps_per_tx = {}: allowed 1..=4096", self.swaps_per_tx));
        }
        if self.compute_cycles_per_swap > 1_000_000 {
            let v = self.compute_cycles_per_swap;
            return Err(format!("workload.sps.compute_cycles_per_swap = {v}: allowed 0..=1000000"));
        }
        Ok(())
    }
}

#[derive(Clone)]
pub struct Sps {
    entries: u64,
    swaps: u64,
    compute: u64,
    /// The entries of the next `AHEAD` transactions, `2 * swaps` each, transaction `k` in block
    /// `k % AHEAD` (see [`Sps::run_tx`]); empty until the first transaction.
    drawn: Vec<u64>,
    /// Block of the next transaction.
    cur: usize,
    /// The lines a transaction locks, ascending (with several cores; scratch).
    locks: Vec<u64>,
}

/// A transaction's entries are drawn, and announced with [`Pm::will_access`], this many
/// transactions before it runs: the host then fetches their bytes (random places in a large
/// array, often from host DRAM) while it simulates the transactions before it.
const AHEAD: usize = 2;

impl Sps {
    pub fn new(cfg: &SpsConfig) -> Sps {
        Sps {
            entries: cfg.entries,
            swaps: cfg.swaps_per_tx,
            compute: cfg.compute_cycles_per_swap,
            drawn: Vec::new(),
            cur: 0,
            locks: Vec::new(),
        }
    }

    pub fn data_bytes(&self) -> u64 {
        self.entries * 8
    }

    pub fn populate(&mut self, data: &mut [u8]) {
        for i in 0..self.entries {
            data[i as usize * 8..i as usize * 8 + 8].copy_from_slice(&i.to_le_bytes());
        }
    }

    /// One transaction: `swaps` swaps of two random entries. The entries are drawn from `rng`
    /// in the same order as if each swap drew its two when it ran, but `AHEAD` transactions
    /// early, so that the program announces them ([`Pm::will_access`]) before it needs them:
    /// the same transactions, results and cycles, with the host's wait for the bytes hidden.
    #[inline]
    pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
        let n = 2 * self.swaps as usize;
        if self.drawn.is_empty() {
            // The first transaction: draw the first `AHEAD` transactions' entries.
            self.drawn = (0..n * AHEAD).map(|_| Sps::draw(self.entries, pm, rng)).collect();
        }
        let block = self.cur * n;
        self.cur = (self.cur + 1) % AHEAD;
        pm.begin();
        if pm.concurrent() {
            // Strict two-phase locking: the lines of every entry it swaps, in ascending order.
            self.locks.clear();
            self.locks.extend(self.drawn[block..block + n].iter().map(|e| e * 8 / 64));
            self.locks.sort_unstable();
            for &l in &self.locks {
                pm.lock(l);
            }
        }
        for t in 0..self.swaps as usize {
            let k = block + 2 * t;
            let (i, j) = (self.drawn[k], self.drawn[k + 1]);
            // In their place, the entries of the transaction `AHEAD` after this one.
            self.drawn[k] = Sps::draw(self.entries, pm, rng);
            self.drawn[k + 1] = Sps::draw(self.entries, pm, rng);
            pm.compute(self.compute);
            let (ai, aj) = (Addr(i * 8), Addr(j * 8));
            let vi = pm.load_u64(ai);
            let vj = pm.load_u64(aj);
            pm.store_u64(ai, vj);
            pm.store_u64(aj, vi);
        }
        if abort {
            pm.abort();
        } else {
            pm.commit();
        }
    }

    /// A random entry, announced to the back end.
    #[inline(always)]
    fn draw<P: Pm>(entries: u64, pm: &mut P, rng: &mut Rng) -> u64 {
        let e = rng.below(entries);
        pm.will_access(Addr(e * 8));
        e
    }

    pub fn verify(&self, data: &[u8]) -> Result<(), String> {
        let mut seen: Vec<bool> = crate::hostmem::committed(self.entries as usize);
        for i in 0..self.entries as usize {
            let v = u64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().unwrap());
            if v >= self.entries || seen[v as usize] {
                return Err(format!("sps: entry {i} holds {v}, not a permutation of 0..{}", self.entries));
            }
            seen[v as usize] = true;
        }
        Ok(())
    }
}

/// The incremental form of [`Sps::verify`] ([`Follow`]): how many entries hold each value, how
/// many values are held more than once (`dups`, the excess) and how many entries are out of
/// range. The area is a permutation exactly when both are 0 (n entries, all below n, none
/// repeated).
pub struct SpsFollow {
    entries: u64,
    count: Vec<u32>,
    dups: u64,
    out: u64,
}

impl Sps {
    pub fn follower(&self) -> SpsFollow {
        SpsFollow { entries: self.entries, count: Vec::new(), dups: 0, out: 0 }
    }
}

impl SpsFollow {
    fn add(&mut self, v: u64) {
        if v >= self.entries {
            self.out += 1;
        } else {
            let c = &mut self.count[v as usize];
            self.dups += u64::from(*c >= 1);
            *c += 1;
        }
    }
    fn remove(&mut self, v: u64) {
        if v >= self.entries {
            self.out -= 1;
        } else {
            let c = &mut self.count[v as usize];
            *c -= 1;
            self.dups -= u64::from(*c >= 1);
        }
    }
    fn sound(&self) -> bool {
        self.dups == 0 && self.out == 0
    }
}

impl Follow for SpsFollow {
    fn reset(&mut self, data: &[u8]) -> bool {
        (self.count, self.dups, self.out) = (crate::hostmem::committed(self.entries as usize), 0, 0);
        for i in 0..self.entries as usize {
            self.add(le64(data, i * 8));
        }
        self.sound()
    }
    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool {
        for (b, before) in old {
            for j in 0..8 {
                let i = b * 8 + j;
                if i as u64 >= self.entries {
                    break;
                }
                let (was, now) = (le64(before, j * 8), le64(data, i * 8));
                if was != now {
                    self.remove(was);
                    self.add(now);
                }
            }
        }
        self.sound()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::native::Native;

    fn small() -> Sps {
        Sps::new(&SpsConfig { entries: 64, swaps_per_tx: 2, compute_cycles_per_swap: 1 })
    }

    #[test]
    fn swaps_match_a_std_vec_model_and_keep_a_permutation() {
        let mut w = small();
        let mut mem = vec![0u8; 64 * 8];
        w.populate(&mut mem);
        let mut pm = Native::new(mem);
        let mut model: Vec<u64> = (0..64).collect();
        let (mut r1, mut r2) = (Rng::new(5), Rng::new(5));
        for t in 0..500 {
            let abort = t % 7 == 3;
            w.run_tx(&mut pm, &mut r1, abort);
            let mut pairs = Vec::new();
            for _ in 0..2 {
                pairs.push((r2.below(64) as usize, r2.below(64) as usize));
            }
            if !abort {
                for (i, j) in pairs {
                    model.swap(i, j);
                }
            }
            let got: Vec<u64> =
                (0..64).map(|i| u64::from_le_bytes(pm.mem[i * 8..i * 8 + 8].try_into().unwrap())).collect();
            assert_eq!(got, model, "after tx {t}");
        }
        w.verify(&pm.mem).unwrap();
    }

    #[test]
    fn verifier_rejects_a_duplicated_value() {
        let w = small();
        let mut mem = vec![0u8; 64 * 8];
        let mut w2 = small();
        w2.populate(&mut mem);
        mem[8..16].copy_from_slice(&0u64.to_le_bytes());
        assert!(w.verify(&mem).unwrap_err().contains("entry 1 holds 0"));
    }

    #[test]
    fn the_follower_agrees_with_the_verifier_on_a_run_and_on_damage() {
        let mut cfg = crate::workload::WorkloadConfig::default();
        (cfg.sps.entries, cfg.sps.swaps_per_tx) = (300, 3);
        let rejected = crate::workload::follow::check::agrees(crate::workload::WorkloadKind::Sps, &cfg, 400, 5);
        assert!(rejected > 100, "the damage must matter: {rejected} of 400 damaged states rejected");
    }
}
