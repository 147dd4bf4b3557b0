//! Plain-memory back end of [`Pm`]: loads and stores on a byte vector, no timing. Used by
//! model-based tests and to measure the simulator's slowdown (docs/model.md section 6).

use super::Pm;
use crate::types::Addr;

/// Flat memory with an undo buffer so that aborts work: an owned byte vector, or (`M = &mut
/// [u8]`) bytes borrowed from the caller, written in place (populating a workload writes
/// straight into the image it is given: no copy in or out, and only the host pages it writes
/// are touched).
pub struct Native<M = Vec<u8>> {
    pub mem: M,
    /// The old bytes of each store of the open transaction, in store order: `(address,
    /// length)` here, the bytes one after the other in `undo_bytes` (no allocation per store
    /// once the buffers have grown: populating a workload stores millions of times).
    undo: Vec<(u64, u32)>,
    undo_bytes: Vec<u8>,
    committed: u64,
}

impl<M: AsRef<[u8]> + AsMut<[u8]>> Native<M> {
    pub fn new(mem: M) -> Native<M> {
        Native { mem, undo: Vec::new(), undo_bytes: Vec::new(), committed: 0 }
    }

    fn forget_undo(&mut self) {
        self.undo.clear();
        self.undo_bytes.clear();
    }
}

impl<M: AsRef<[u8]> + AsMut<[u8]>> Pm for Native<M> {
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
            self.mem.as_mut()[a..a + len as usize].copy_from_slice(&self.undo_bytes[from..]);
            self.undo_bytes.truncate(from);
        }
    }
    #[inline]
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        let a = addr.0 as usize;
        buf.copy_from_slice(&self.mem.as_ref()[a..a + buf.len()]);
    }
    #[inline]
    fn store(&mut self, addr: Addr, data: &[u8]) {
        let a = addr.0 as usize;
        let mem = self.mem.as_mut();
        self.undo.push((addr.0, u32::try_from(data.len()).expect("a store under 4 GiB")));
        self.undo_bytes.extend_from_slice(&mem[a..a + data.len()]);
        mem[a..a + data.len()].copy_from_slice(data);
    }
    fn compute(&mut self, _cycles: u64) {}
    #[inline]
    fn will_access(&mut self, addr: Addr) {
        if let Some(x) = self.mem.as_ref().get(addr.0 as usize) {
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
    /// commit keeps every store; loads read what the copy holds. On owned memory and on
    /// borrowed memory (written in place: the caller's bytes are the result). Seeded; the seed
    /// is in the failure message.
    #[test]
    fn an_abort_restores_the_memory_of_begin_and_a_commit_keeps_the_stores() {
        fn check<M: AsRef<[u8]> + AsMut<[u8]>>(n: &mut Native<M>, seed: u64) {
            let mut rng = crate::rng::Rng::new(seed);
            let mut want = n.mem.as_ref().to_vec();
            for tx in 0..50 {
                n.begin();
                let at_begin = want.clone();
                for _ in 0..rng.below(12) {
                    let len = 1 + rng.below(300) as usize;
                    let a = rng.below((4096 - len) as u64) as usize;
                    let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                    n.store(Addr(a as u64), &data);
                    want[a..a + len].copy_from_slice(&data);
                    let mut got = vec![0u8; len];
                    n.load(Addr(a as u64), &mut got);
                    assert!(got == data, "seed {seed}, transaction {tx}: load after store");
                }
                if rng.chance(0.5) {
                    n.abort();
                    want = at_begin;
                } else {
                    n.commit();
                }
                assert!(n.mem.as_ref() == want, "seed {seed}, transaction {tx}");
            }
        }
        let initial: Vec<u8> = (0..4096u32).map(|i| (i * 31) as u8).collect();
        for seed in 0..20u64 {
            check(&mut Native::new(initial.clone()), seed);
            let mut borrowed = initial.clone();
            let mut n = Native::new(&mut borrowed[..]);
            check(&mut n, seed);
            let end = n.mem.to_vec();
            assert!(borrowed == end, "seed {seed}: the borrowed bytes are the memory");
        }
    }
}
