//! The workload interface: the transactions on persistent memory every workload is written
//! against, implemented by the simulator ([`crate::sim::Sim`]), by `Native` (no timing) and, on
//! N cores, by each core's view of the scheduler ([`crate::sched`]).

use crate::types::Addr;

/// The workload interface (transactions on persistent memory).
pub trait Pm {
    /// TxBegin.
    fn begin(&mut self);
    /// TxCommit: returns when the protocol lets the program continue.
    fn commit(&mut self);
    /// TxAbort: the transaction's stores are undone.
    fn abort(&mut self);
    /// Load `buf.len()` bytes at `addr`.
    fn load(&mut self, addr: Addr, buf: &mut [u8]);
    /// Store `data` at `addr` (inside a transaction).
    fn store(&mut self, addr: Addr, data: &[u8]);
    /// Charge `cycles` of non-memory instructions.
    fn compute(&mut self, cycles: u64);
    /// CheckMaxCommit: how many transactions (in commit order) are guaranteed durable; with
    /// several cores, of the running core's transactions in its own commit order.
    fn last_durable_tx(&self) -> u64;
    /// Do other cores run transactions on the same memory meanwhile? Then the workload must
    /// lock every line it writes ([`Pm::lock`]); with one core locking is a no-op, and a
    /// workload may skip working out its locks.
    #[inline]
    fn concurrent(&self) -> bool {
        false
    }
    /// Inside a transaction: take lock `id` (strict two-phase locking; docs/multicore.md). The
    /// back end releases every lock of the transaction after its commit or abort returns.
    /// Within a transaction ids must ascend (taking the last one again is a no-op), which
    /// keeps any set of cores free of deadlock. Ids are line numbers: `0..` the data area's
    /// blocks. A back end without other cores ignores it.
    #[inline]
    fn lock(&mut self, id: u64) {
        let _ = id;
    }
    /// The program will access the bytes at `addr` soon (a transaction or two ahead): a hint
    /// that lets the back end start fetching them into the host's caches. It changes no result
    /// and no simulated cycle; back ends may ignore it.
    #[inline]
    fn will_access(&mut self, addr: Addr) {
        let _ = addr;
    }
    /// The core this call runs on, `0..machine.cores`: the program's thread id. On N cores
    /// each core runs its own stream of transactions through the one back end, which answers
    /// for the core it is running; a program that never asks runs the same code on every core,
    /// and with one core the answer is always 0.
    #[inline]
    fn core(&self) -> usize {
        0
    }

    // The fixed-size accesses are inlined into the workload with the back end's `load` and
    // `store`, so that the bytes move without a call.
    #[inline(always)]
    fn load_u64(&mut self, addr: Addr) -> u64 {
        let mut b = [0u8; 8];
        self.load(addr, &mut b);
        u64::from_le_bytes(b)
    }
    #[inline(always)]
    fn store_u64(&mut self, addr: Addr, v: u64) {
        self.store(addr, &v.to_le_bytes());
    }
    fn load_u32(&mut self, addr: Addr) -> u32 {
        let mut b = [0u8; 4];
        self.load(addr, &mut b);
        u32::from_le_bytes(b)
    }
    fn store_u32(&mut self, addr: Addr, v: u32) {
        self.store(addr, &v.to_le_bytes());
    }
}
