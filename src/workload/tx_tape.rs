//! A built-in workload's transactions recorded once and replayed on every simulated machine.
//!
//! A single-core workload's operations depend only on its seed, its abort decisions and the
//! bytes it loads, and the bytes it loads are the program's view of memory, which no protocol,
//! machine, latency or device changes. So the stream of [`Pm`] calls a transaction makes (each
//! `begin`, load, store with its bytes, compute, hint, lock, `commit` / `abort`) is the same on
//! every machine, and a sweep that runs one workload configuration under many protocols can run
//! the workload's own code (a B+tree's search, SQLite's virtual machine) once: a [`Tape`] runs
//! it on the [`Native`] back end, records the calls, and every run replays them into its
//! simulator ([`TapeReader`]) with the same arguments in the same order, so every figure is
//! the same as the run's own execution would give.
//!
//! Recording goes [`CHUNK_TXS`] transactions at a time, as far as the furthest reader needs;
//! readers on other threads share the finished chunks. The recording draws the transactions'
//! operation and abort streams as the runner does ([`crate::rng::run_streams`],
//! [`crate::rng::next_abort`]), and each reader checks, transaction by transaction, that its
//! own streams agree with the recording before it replays (a disagreement is a defect of the
//! runner, and stops the run with a message rather than giving other figures).
//!
//! Only SQLite is recorded ([`recordable`]): its virtual machine's work (b-tree searches in
//! cached pages, record comparisons, its allocator) is a third of a SQLite point's host time,
//! and the replay leaves it out. The other workloads' own work is mostly their loads, which the
//! replay makes all the same: replayed, they ran no faster (docs/performance.md, "reproduce").
//!
//! The bundled SQLite keeps every connection's pages in one process-wide group, so a
//! connection's reads depend on the other connections open in the process
//! ([`crate::workload::sqlite::bridge::set_before_open`]). A recorder keeps its connection open between chunks;
//! it closes it whenever another connection of the process opens, and before a recorder
//! records, every other recorder's is closed: at most one connection is open while a tape
//! records, as in a run of its own. A closed recorder that must record further first runs the
//! transactions recorded so far again, natively, from the populated state.

use super::native::Native;
use super::{Pm, Workload, WorkloadKind};
use crate::recent::Recent;
use crate::rng::Rng;
use crate::types::Addr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Whether runs of `kind` replay a tape when asked: SQLite (module doc).
pub fn recordable(kind: WorkloadKind) -> bool {
    kind == WorkloadKind::Sqlite
}

/// Transactions recorded at a time.
pub const CHUNK_TXS: u64 = 64;

/// Bytes of recordings a process keeps for later runs (operations and stored bytes); a tape
/// in use stays alive for its readers whatever its size.
pub const KEPT_BYTES: usize = 1 << 30;

/// One [`Pm`] call. Stores' bytes are kept in the chunk's byte buffer, in call order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Begin,
    Commit,
    Abort,
    Load { addr: u64, len: u32 },
    Store { addr: u64, len: u32 },
    Compute(u64),
    WillAccess(u64),
    Lock(u64),
}

/// One recorded transaction: where its calls end in the chunk, its inputs and the operation
/// stream after it.
#[derive(Clone, Debug)]
struct Tx {
    ops_end: usize,
    bytes_end: usize,
    rng_before: Rng,
    abort: bool,
    rng_after: Rng,
}

/// [`CHUNK_TXS`] consecutive transactions, immutable once recorded.
#[derive(Default)]
struct Chunk {
    ops: Vec<Op>,
    bytes: Vec<u8>,
    txs: Vec<Tx>,
}

impl Chunk {
    fn host_bytes(&self) -> usize {
        self.ops.len() * std::mem::size_of::<Op>() + self.bytes.len() + self.txs.len() * std::mem::size_of::<Tx>()
    }
}

/// The recorder's state.
struct Recorder {
    /// The workload's driver right after populating, and its data area: where a closed
    /// recorder starts again.
    origin: Workload,
    data: Arc<dyn AsRef<[u8]> + Send + Sync>,
    seed: u64,
    abort_rate: f64,
    /// The driver, its memory and the runner's streams at the end of the recording; `None`
    /// before the first chunk and once closed ([`close_recorders`]).
    live: Option<Live>,
    chunks: Vec<Arc<Chunk>>,
}

/// A recorder's workload as it runs.
struct Live {
    wl: Workload,
    native: Native,
    ops: Rng,
    aborts: Rng,
}

/// A workload's transactions from its populated state, recorded as far as read so far.
pub struct Tape {
    rec: Mutex<Recorder>,
    /// Host bytes of the chunks (read without the lock: [`shared`] sums them).
    bytes: AtomicUsize,
}

impl Tape {
    /// A tape of `wl` (populated, its data area `data`, shared with whoever keeps it) under the
    /// seed and abort rate of a run.
    pub fn new(wl: Workload, data: Arc<dyn AsRef<[u8]> + Send + Sync>, seed: u64, abort_rate: f64) -> Tape {
        crate::workload::sqlite::bridge::set_before_open(close_recorders);
        let rec = Recorder { origin: wl, data, seed, abort_rate, live: None, chunks: Vec::new() };
        Tape { rec: Mutex::new(rec), bytes: AtomicUsize::new(0) }
    }

    fn lock(&self) -> MutexGuard<'_, Recorder> {
        self.rec.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Chunk `i`, recorded first (with every chunk before it) if need be.
    fn chunk(&self, i: usize) -> Arc<Chunk> {
        let mut r = self.lock();
        if r.chunks.len() <= i {
            // Alone while recording: this tape's lock is held, so its own recorder stays.
            close_recorders();
        }
        while r.chunks.len() <= i {
            let c = r.record_chunk();
            self.bytes.fetch_add(c.host_bytes(), Ordering::Relaxed);
            r.chunks.push(Arc::new(c));
        }
        r.chunks[i].clone()
    }

    /// Host bytes of the recording so far.
    pub fn host_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }
}

impl Recorder {
    /// The running workload, started again from the populated state (and run natively through
    /// the transactions recorded so far) if it is not running.
    fn live(&mut self) -> &mut Live {
        if self.live.is_none() {
            let mut wl = self.origin.try_clone().expect("a populated workload is copyable");
            let mut native = Native::new((*self.data).as_ref().to_vec());
            let (mut ops, mut aborts) = crate::rng::run_streams(self.seed, 0);
            for _ in 0..self.chunks.len() as u64 * CHUNK_TXS {
                let abort = crate::rng::next_abort(&mut aborts, self.abort_rate);
                wl.run_tx(&mut native, &mut ops, abort);
            }
            self.live = Some(Live { wl, native, ops, aborts });
        }
        self.live.as_mut().expect("started above")
    }

    fn record_chunk(&mut self) -> Chunk {
        let rate = self.abort_rate;
        let l = self.live();
        let mut c = Chunk::default();
        for _ in 0..CHUNK_TXS {
            let rng_before = l.ops.clone();
            let abort = crate::rng::next_abort(&mut l.aborts, rate);
            let mut pm = Recording { native: &mut l.native, ops: &mut c.ops, bytes: &mut c.bytes };
            l.wl.run_tx(&mut pm, &mut l.ops, abort);
            c.txs.push(Tx {
                ops_end: c.ops.len(),
                bytes_end: c.bytes.len(),
                rng_before,
                abort,
                rng_after: l.ops.clone(),
            });
        }
        c
    }
}

/// Close the connection of every recorder not recording now (a recorder records holding its
/// tape's lock): the hook [`crate::workload::sqlite::bridge::set_before_open`] runs before each connection of
/// the process opens, and [`Tape::chunk`] before it records.
fn close_recorders() {
    for t in TAPES.values() {
        if let Ok(mut r) = t.rec.try_lock() {
            r.live = None;
        }
    }
}

/// The native back end, recording each call.
struct Recording<'a> {
    native: &'a mut Native,
    ops: &'a mut Vec<Op>,
    bytes: &'a mut Vec<u8>,
}

impl Pm for Recording<'_> {
    fn begin(&mut self) {
        self.ops.push(Op::Begin);
        self.native.begin();
    }
    fn commit(&mut self) {
        self.ops.push(Op::Commit);
        self.native.commit();
    }
    fn abort(&mut self) {
        self.ops.push(Op::Abort);
        self.native.abort();
    }
    #[inline]
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        let len = u32::try_from(buf.len()).expect("a load under 4 GiB");
        self.ops.push(Op::Load { addr: addr.0, len });
        self.native.load(addr, buf);
    }
    #[inline]
    fn store(&mut self, addr: Addr, data: &[u8]) {
        let len = u32::try_from(data.len()).expect("a store under 4 GiB");
        self.ops.push(Op::Store { addr: addr.0, len });
        self.bytes.extend_from_slice(data);
        self.native.store(addr, data);
    }
    fn compute(&mut self, cycles: u64) {
        self.ops.push(Op::Compute(cycles));
    }
    fn will_access(&mut self, addr: Addr) {
        self.ops.push(Op::WillAccess(addr.0));
    }
    fn lock(&mut self, id: u64) {
        self.ops.push(Op::Lock(id));
    }
    /// No built-in workload asks; a recording cannot answer for the machine it will be
    /// replayed on, so a workload that asked could not be recorded.
    fn last_durable_tx(&self) -> u64 {
        unreachable!("a recorded workload asked for the last durable transaction")
    }
}

/// One run's position in a [`Tape`].
pub struct TapeReader {
    tape: Arc<Tape>,
    chunk: Option<Arc<Chunk>>,
    /// The next transaction.
    next: u64,
    /// Where the loads' bytes go (the simulator copies them out of the program's image).
    scratch: Vec<u8>,
}

impl TapeReader {
    pub fn new(tape: Arc<Tape>) -> TapeReader {
        TapeReader { tape, chunk: None, next: 0, scratch: Vec::new() }
    }

    /// Replay the next transaction into `pm`, whose run draws its operation stream `rng` and
    /// its abort decision `abort` as the recording did; `rng` then stands where the workload
    /// would have left it. `Err` if they disagree.
    pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) -> Result<(), String> {
        let (ci, ti) = ((self.next / CHUNK_TXS) as usize, (self.next % CHUNK_TXS) as usize);
        if ti == 0 || self.chunk.is_none() {
            self.chunk = Some(self.tape.chunk(ci));
        }
        let c = self.chunk.as_deref().expect("fetched above");
        let tx = &c.txs[ti];
        if tx.rng_before != *rng || tx.abort != abort {
            return Err(format!("workload tape: transaction {} was recorded with other inputs", self.next));
        }
        let (ops0, bytes0) = if ti == 0 { (0, 0) } else { (c.txs[ti - 1].ops_end, c.txs[ti - 1].bytes_end) };
        let mut at = bytes0;
        for op in &c.ops[ops0..tx.ops_end] {
            match *op {
                Op::Begin => pm.begin(),
                Op::Commit => pm.commit(),
                Op::Abort => pm.abort(),
                Op::Load { addr, len } => {
                    let len = len as usize;
                    if self.scratch.len() < len {
                        self.scratch.resize(len, 0);
                    }
                    pm.load(Addr(addr), &mut self.scratch[..len]);
                }
                Op::Store { addr, len } => {
                    let end = at + len as usize;
                    pm.store(Addr(addr), &c.bytes[at..end]);
                    at = end;
                }
                Op::Compute(cycles) => pm.compute(cycles),
                Op::WillAccess(addr) => pm.will_access(Addr(addr)),
                Op::Lock(id) => pm.lock(id),
            }
        }
        debug_assert_eq!(at, tx.bytes_end);
        *rng = tx.rng_after.clone();
        self.next += 1;
        Ok(())
    }
}

/// Tapes kept by this process, most recently used first, by name.
static TAPES: Recent<String, Arc<Tape>> = Recent::new();

/// The tape named `key` (a workload configuration, seed and abort rate), made with `make` if
/// this process keeps none. Tapes beyond [`KEPT_BYTES`], least recently used first, are
/// dropped from the list (their readers keep them).
pub fn shared(key: String, make: impl FnOnce() -> Tape) -> Arc<Tape> {
    let mut total = 0;
    let within = |_: &String, t: &Arc<Tape>| {
        total += t.host_bytes();
        total <= KEPT_BYTES
    };
    TAPES.get_or_insert(|k| *k == key, || (key.clone(), Arc::new(make())), within)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every call of a back end, as text, to compare a replay with the workload's own run.
    #[derive(Default)]
    struct Log {
        native: Option<Native>,
        calls: Vec<String>,
    }

    impl Pm for Log {
        fn begin(&mut self) {
            self.calls.push("begin".into());
            self.native.as_mut().unwrap().begin();
        }
        fn commit(&mut self) {
            self.calls.push("commit".into());
            self.native.as_mut().unwrap().commit();
        }
        fn abort(&mut self) {
            self.calls.push("abort".into());
            self.native.as_mut().unwrap().abort();
        }
        fn load(&mut self, addr: Addr, buf: &mut [u8]) {
            self.native.as_mut().unwrap().load(addr, buf);
            self.calls.push(format!("load {} {:?}", addr.0, buf));
        }
        fn store(&mut self, addr: Addr, data: &[u8]) {
            self.calls.push(format!("store {} {data:?}", addr.0));
            self.native.as_mut().unwrap().store(addr, data);
        }
        fn compute(&mut self, cycles: u64) {
            self.calls.push(format!("compute {cycles}"));
        }
        fn will_access(&mut self, addr: Addr) {
            self.calls.push(format!("hint {}", addr.0));
        }
        fn lock(&mut self, id: u64) {
            self.calls.push(format!("lock {id}"));
        }
        fn last_durable_tx(&self) -> u64 {
            0
        }
    }

    /// Every built-in workload but SQLite (whose loads depend on the other connections of
    /// the test process, `tests/determinism.rs` checks it alone), with aborts: the replay makes
    /// exactly the calls of the workload's own run (loads answered from the same memory, and
    /// the same bytes loaded), leaves the operation stream where the run leaves it, and two
    /// readers of one tape agree, also when its recorder was closed and starts again.
    #[test]
    fn a_replay_makes_the_calls_of_the_workloads_own_run() {
        use crate::workload::WorkloadConfig;
        let cfg = WorkloadConfig::default();
        let txs = 3 * CHUNK_TXS + 5;
        for &kind in WorkloadKind::ALL.iter().filter(|&&k| k != WorkloadKind::Sqlite) {
            let mut wl = kind.build(&cfg);
            let mut data = vec![0u8; wl.data_bytes() as usize];
            wl.populate(&mut data);
            let (origin, copy) = (wl.try_clone().unwrap(), data.clone());
            let tape = shared(format!("test {}", kind.name()), || Tape::new(origin, Arc::new(copy), 7, 0.3));
            let (mut ops, mut aborts) = crate::rng::run_streams(7, 0);
            let mut own = Log { native: Some(Native::new(data.clone())), ..Default::default() };
            let mut readers = [TapeReader::new(tape.clone()), TapeReader::new(tape.clone())];
            let mut replays = [(); 2].map(|_| Log { native: Some(Native::new(data.clone())), ..Default::default() });
            let mut rngs = [(); 2].map(|_| crate::rng::run_streams(7, 0).0);
            for t in 0..txs {
                let abort = crate::rng::next_abort(&mut aborts, 0.3);
                wl.run_tx(&mut own, &mut ops, abort);
                if t == CHUNK_TXS + 3 {
                    close_recorders();
                    assert!(tape.lock().live.is_none(), "{}: the recorder was not closed", kind.name());
                }
                for i in 0..2 {
                    readers[i].run_tx(&mut replays[i], &mut rngs[i], abort).unwrap();
                    assert!(rngs[i] == ops, "{} transaction {t}: the operation stream", kind.name());
                }
            }
            assert!(own.calls.iter().any(|c| c == "abort"), "{}: no abort exercised", kind.name());
            for r in &replays {
                if let Some(i) = (0..r.calls.len().min(own.calls.len())).find(|&i| r.calls[i] != own.calls[i]) {
                    panic!("{}: call {i} differs: {} against {}", kind.name(), r.calls[i], own.calls[i]);
                }
                assert!(r.calls == own.calls, "{}: the replay's calls differ", kind.name());
                assert!(r.native.as_ref().unwrap().mem == own.native.as_ref().unwrap().mem);
            }
            // A reader whose run draws another abort decision is stopped, not replayed.
            let mut r = TapeReader::new(tape.clone());
            let mut rng = crate::rng::run_streams(7, 0).0;
            let first = crate::rng::next_abort(&mut crate::rng::run_streams(7, 0).1, 0.3);
            let e =
                r.run_tx(&mut Log { native: Some(Native::new(data.clone())), ..Default::default() }, &mut rng, !first);
            assert!(e.unwrap_err().contains("other inputs"));
        }
    }
}
