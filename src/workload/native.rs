//! Plain-memory back end of [`Pm`]: loads and stores on a byte vector, no timing. Used by
//! model-based tests and to measure the simulator's slowdown (docs/model.md section 6).

use super::Pm;
use crate::types::Addr;

/// Flat memory with an undo buffer so that aborts work.
pub struct Native {
    pub mem: Vec<u8>,
    undo: Vec<(u64, Vec<u8>)>,
    committed: u64,
}

impl Native {
    pub fn new(mem: Vec<u8>) -> Native {
        Native { mem, undo: Vec::new(), committed: 0 }
    }
}

impl Pm for Native {
    fn begin(&mut self) {
        self.undo.clear();
    }
    fn commit(&mut self) {
        self.committed += 1;
        self.undo.clear();
    }
    fn abort(&mut self) {
        while let Some((a, old)) = self.undo.pop() {
            self.mem[a as usize..a as usize + old.len()].copy_from_slice(&old);
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
        self.undo.push((addr.0, self.mem[a..a + data.len()].to_vec()));
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
