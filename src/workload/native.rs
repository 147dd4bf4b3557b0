//! Plain-memory back end of [`Pm`]: loads and stores on a byte vector, no timing. Used by
//! model-based tests and to measure the simulator's slowdown (docs/model.md section 6).

use super::Pm;
use crate::types::Addr;

/// Flat memory with an undo buffer so that aborts work.
pub struct Native {
    pub mem: Vec<u8>,
    /// The old bytes of each store of the open transaction, in store order: `(address,
    /// length)` here, the bytes one after the other in `undo_bytes` (no allocation per store
    /// once the buffers have grown: populating a workload stores millions of times).
    undo: Vec<(u64, u32)>,
    undo_bytes: Vec<u8>,
    committed: u64,
}

impl Native {
    pub fn new(mem: Vec<u8>) -> Native {
        Native { mem, undo: Vec::new(), undo_bytes: Vec::new(), committed: 0 }
    }

    fn forget_undo(&mut self) {
        self.undo.clear();
        self.undo_bytes.clear();
    }
}

impl Pm for Native {
    fn begin(&mut self) {
        self.forget_undo();
    }
    fn commit(&mut self) {
        self.committed += 1;
        self.forget_undo();
    }
    fn abort(&mut self) {
        while let Some((a, len)) = self.undo.pop() {
            let (a, from) = (a as usize, self.undo_bytes.len() - len as usize);
            self.mem[a..a + len as usize].copy_from_slice(&self.undo_bytes[from..]);
            self.undo_bytes.truncate(from);
        }
    }
    #[inline]
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        let a = addr.0 as usize;
        buf.copy_from_slice(&self.mem[a..a + buf.len()]);
    }
    #[inline]
    fn store(&mut self, addr: Addr, data: &[u8]) {
        let a = addr.0 as usize;
        let old = &self.mem[a..a + data.len()];
        self.undo.push((addr.0, u32::try_from(data.len()).expect("a store under 4 GiB")));
        self.undo_bytes.extend_from_slice(old);
        self.mem[a..a + data.len()].copy_from_slice(data);
    }
    fn compute(&mut self, _cycles: u64) {}
    #[inline]
    fn will_access(&mut self, addr: Addr) {
        if let Some(x) = self.mem.get(addr.0 as usize) {
            crate::hostmem::prefetch(x);
        }
    }
    fn last_durable_tx(&self) -> u64 {
        self.committed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random transactions of overlapping stores of 1 to 300 bytes, each committed or aborted,
    /// against a copy of the memory taken at `begin`: an abort restores it byte for byte, a
    /// commit keeps every store. Seeded; the seed is in the failure message.
    #[test]
    fn an_abort_restores_the_memory_of_begin_and_a_commit_keeps_the_stores() {
        for seed in 0..20u64 {
            let mut rng = crate::rng::Rng::new(seed);
            let mut n = Native::new((0..4096u32).map(|i| (i * 31) as u8).collect());
            let mut want = n.mem.clone();
            for tx in 0..50 {
                n.begin();
                let at_begin = n.mem.clone();
                for _ in 0..rng.below(12) {
                    let len = 1 + rng.below(300) as usize;
                    let a = rng.below((4096 - len) as u64) as usize;
                    let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                    n.store(Addr(a as u64), &data);
                    want[a..a + len].copy_from_slice(&data);
                }
                if rng.chance(0.5) {
                    n.abort();
                    want = at_begin;
                } else {
                    n.commit();
                }
                assert!(n.mem == want, "seed {seed}, transaction {tx}");
            }
        }
    }
}
