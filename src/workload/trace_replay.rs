//! A trace replayed as a workload (docs/formats/trace.md, docs/your-own-workload.md).
//!
//! [`TraceWorkload`] is the workload `trace` ([`crate::workload::Workload::Trace`]): its data
//! area is the trace's region, `populate` writes the `init` records, and each `run_tx` replays
//! the records of one transaction through [`Pm`], so the simulator's back end takes the oracle
//! from the trace's own stores exactly as from a built-in workload's. It streams: memory is the
//! decoder's buffer (bounded by the longest record), never the trace.
//!
//! Cores: the decoder checks every `core` record against the machine's core count (one line
//! naming the record's offset, the core and the allowed range). On one core the records run as
//! they stream. On N cores ([`TraceWorkload::open_cores`]) each core has its own replayer, a
//! decoder over its own reader of the same trace that skips the other cores' records; it reads
//! each of its transactions whole, then runs it. A transaction with `lock` records (version 3:
//! the program's own locks, as `trace-gen --cores N` records them) runs under exactly those,
//! each taken at its place among the transaction's records; one without runs under locks on
//! every line it loads or stores, taken in ascending order right after `begin` (conservative
//! two-phase locking; docs/formats/trace.md, "Replay on N cores", says why).
#![warn(missing_docs)]

use super::Pm;
use crate::rng::Rng;
use crate::types::{blocks_of, Addr};
use locsim_trace::{Decoder, Record, LINE_BYTES};
use std::io::Read;

/// A byte source a trace is read from (a file, standard input, one branch of a [`crate::trace::tee::tee`]).
pub type Source = Box<dyn Read + Send>;

/// Open `path` (`-` is standard input).
pub fn open(path: &str) -> Result<Source, String> {
    if path == "-" {
        return Ok(Box::new(std::io::stdin()));
    }
    let f = std::fs::File::open(path).map_err(|e| format!("--trace {path}: {e}"))?;
    Ok(Box::new(f))
}

/// A record decoded ahead of the transaction that replays it (the first body record, read
/// while `populate` looks for the end of the `init` records).
enum Ahead {
    Init(u64, Vec<u8>),
    Begin,
    Load(u64, u64),
    Compute(u64),
    /// A `core` record (checked by the decoder against the machine's cores).
    Core(u32),
    End,
}

impl Ahead {
    /// The record again (a body record; `base` is the region's first address).
    fn record(&self, base: u64) -> Record<'static> {
        match *self {
            Ahead::Begin => Record::Begin,
            Ahead::Load(a, len) => Record::Load { addr: a + base, len },
            Ahead::Compute(cycles) => Record::Compute { cycles },
            Ahead::Core(core) => Record::Core { core },
            Ahead::End => Record::End,
            Ahead::Init(..) => unreachable!("populate runs first"),
        }
    }
}

/// One operation of a transaction read ahead of running it (N cores): data-area offsets (a
/// lock: a data-area line); a store's bytes are `TxBuf::bytes[off..off + len]`.
#[derive(Copy, Clone)]
enum Op {
    Load(u64, u64),
    Store(u64, usize, usize),
    Compute(u64),
    Lock(u64),
}

/// The transaction a core reads whole before running it, and the lines it touches (reused).
#[derive(Default)]
struct TxBuf {
    ops: Vec<Op>,
    bytes: Vec<u8>,
    lines: Vec<u64>,
    /// Has it `lock` records (then it runs under those, not under `lines`)?
    locked: bool,
}

/// A trace replayed as a workload. `Default` is the empty trace (the structural verifier of a
/// trace run: a trace has no structure to check beyond the oracle's bytes).
#[derive(Default)]
pub struct TraceWorkload {
    dec: Option<Decoder<Source>>,
    base: u64,
    size: u64,
    warmup: u64,
    ahead: Option<Ahead>,
    /// Reused buffer of loads.
    load_buf: Vec<u8>,
    error: Option<String>,
    ended: bool,
    /// On N cores: the core whose records this replayer runs (it skips the others').
    core: Option<u32>,
    /// The core of the records being read (the last `core` record's; 0 before any).
    cur: u32,
    /// On N cores, how many of each core's transactions are among the stream's first
    /// `warmup` (the warm-up is the stream's first transactions, whatever their cores).
    warmup_cores: Vec<u64>,
    /// On N cores, core 0's replayer holds those of cores `1..N` until [`TraceWorkload::into_cores`].
    others: Vec<TraceWorkload>,
    tx: TxBuf,
}

impl TraceWorkload {
    /// Start replaying on a machine of `cores` cores (`machine.cores`; a `core` record naming
    /// another is an error): reads the file header and the `region` (and `warmup`) records.
    pub fn open(src: Source, cores: u32) -> Result<TraceWorkload, String> {
        let mut dec = Decoder::new(src).map_err(|e| e.to_string())?;
        dec.set_cores(cores);
        let (base, size) = match dec.next_record().map_err(|e| e.to_string())? {
            Some(Record::Region { base, size }) => (base, size),
            _ => unreachable!("the decoder requires `region` first"),
        };
        let mut t = TraceWorkload { base, size, ..Default::default() };
        match dec.next_record().map_err(|e| e.to_string())? {
            Some(Record::Warmup { txs }) => t.warmup = txs,
            Some(r) => t.ahead = Some(t.keep(r)),
            None => unreachable!("`end` is the last record"),
        }
        t.dec = Some(dec);
        Ok(t)
    }

    /// Start replaying on a machine of `cores` cores, one replayer per core: core 0's reads
    /// `src`, every other core's a source of its own from `reopen` (the same trace from its
    /// start; each core skips the records of the others). With one core, [`TraceWorkload::open`].
    pub fn open_cores(
        src: Source,
        cores: u32,
        reopen: &dyn Fn() -> Result<Source, String>,
    ) -> Result<TraceWorkload, String> {
        let mut t = TraceWorkload::open(src, cores)?;
        if cores > 1 {
            t.core = Some(0);
            t.warmup_cores = warmup_of_cores(reopen()?, cores, t.warmup)?;
            for c in 1..cores {
                let mut o = TraceWorkload::open(reopen()?, cores)?;
                o.core = Some(c);
                o.read_init(None);
                if let Some(e) = o.error.take() {
                    return Err(e);
                }
                t.others.push(o);
            }
        }
        Ok(t)
    }

    /// The replayers of cores `0..cores` (core 0's first): `None` unless opened by
    /// [`TraceWorkload::open_cores`] for that many cores.
    pub fn into_cores(mut self, cores: usize) -> Option<Vec<TraceWorkload>> {
        if self.others.len() + 1 != cores || self.core.is_none() {
            return None;
        }
        let others = std::mem::take(&mut self.others);
        Some(std::iter::once(self).chain(others).collect())
    }

    /// On N cores, each core's share of the warm-up: its transactions among the stream's first
    /// [`TraceWorkload::warmup_txs`] (`None` on one core).
    pub fn warmup_cores(&self) -> Option<&[u64]> {
        self.core.map(|_| &self.warmup_cores[..])
    }

    /// Transactions the trace declares as warm-up.
    pub fn warmup_txs(&self) -> u64 {
        self.warmup
    }

    /// Bytes of the data area: the trace's region.
    pub fn data_bytes(&self) -> u64 {
        self.size.max(1)
    }

    fn keep(&self, r: Record) -> Ahead {
        match r {
            Record::Init { addr, bytes } => Ahead::Init(addr - self.base, bytes.to_vec()),
            r => body_ahead(r, self.base),
        }
    }

    /// Write the `init` records into the data area.
    pub fn populate(&mut self, data: &mut [u8]) {
        self.read_init(Some(data));
    }

    /// Read past the `init` records, writing them into `data` if given.
    fn read_init(&mut self, mut data: Option<&mut [u8]>) {
        if let Some(Ahead::Init(a, bytes)) = &self.ahead {
            if let Some(data) = data.as_deref_mut() {
                data[*a as usize..*a as usize + bytes.len()].copy_from_slice(bytes);
            }
            self.ahead = None;
        }
        if self.ahead.is_some() {
            return;
        }
        let Some(dec) = &mut self.dec else { return };
        loop {
            match dec.next_record() {
                Ok(Some(Record::Init { addr, bytes })) => {
                    if let Some(data) = data.as_deref_mut() {
                        let a = (addr - self.base) as usize;
                        data[a..a + bytes.len()].copy_from_slice(bytes);
                    }
                }
                Ok(Some(r)) => {
                    self.ahead = Some(body_ahead(r, self.base));
                    return;
                }
                Ok(None) => return,
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
    }

    /// Replay the records up to and including the next `commit` or `abort` (or `end`).
    #[inline]
    pub fn run_tx<P: Pm>(&mut self, pm: &mut P, _rng: &mut Rng, _abort: bool) {
        if self.ended || self.error.is_some() {
            return;
        }
        if let Some(core) = self.core {
            return self.run_tx_on(pm, core);
        }
        match self.ahead.take() {
            Some(Ahead::Begin) => pm.begin(),
            Some(Ahead::Load(a, len)) => load(pm, &mut self.load_buf, a, len),
            Some(Ahead::Compute(c)) => pm.compute(c),
            Some(Ahead::Core(_)) => {}
            Some(Ahead::End) => {
                self.ended = true;
                return;
            }
            Some(Ahead::Init(..)) => unreachable!("populate runs first"),
            None => {}
        }
        let base = self.base;
        let Some(dec) = &mut self.dec else {
            self.ended = true;
            return;
        };
        loop {
            dec.look_ahead(|a| pm.will_access(Addr(a - base)));
            match dec.next_record() {
                Ok(Some(Record::Store { addr, bytes })) => pm.store(Addr(addr - base), bytes),
                Ok(Some(Record::Load { addr, len })) => load(pm, &mut self.load_buf, addr - base, len),
                Ok(Some(Record::Compute { cycles })) => pm.compute(cycles),
                // One core: a back end without other cores ignores it.
                Ok(Some(Record::Lock { addr })) => pm.lock((addr - base) / LINE_BYTES),
                Ok(Some(Record::Begin)) => pm.begin(),
                // Between transactions; the decoder has checked it names one of the machine's
                // cores, which is core 0 while the runner runs one.
                Ok(Some(Record::Core { .. })) => {}
                Ok(Some(Record::Commit)) => return pm.commit(),
                Ok(Some(Record::Abort)) => return pm.abort(),
                Ok(Some(Record::End)) | Ok(None) => {
                    self.ended = true;
                    return;
                }
                Ok(Some(Record::Region { .. } | Record::Warmup { .. } | Record::Init { .. })) => {
                    unreachable!("the decoder allows header records only in the header")
                }
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
    }

    /// [`TraceWorkload::run_tx`] on N cores, as core `core`: its records up to the end of its
    /// next transaction (skipping the other cores'); records outside a transaction run as they
    /// come, a transaction is read whole ([`TraceWorkload::read_tx`]), then run: `begin`, a
    /// lock on each line it loads or stores in ascending order unless it has `lock` records of
    /// its own, its operations (its own locks among them, in their places), `commit` or `abort`.
    fn run_tx_on<P: Pm>(&mut self, pm: &mut P, core: u32) {
        let Some(commit) = self.read_tx(pm, core) else { return };
        let tx = &mut self.tx;
        pm.begin();
        if !tx.locked {
            tx.lines.sort_unstable();
            tx.lines.dedup();
            for &l in &tx.lines {
                pm.lock(l);
            }
        }
        for &op in &tx.ops {
            match op {
                Op::Load(a, len) => load(pm, &mut self.load_buf, a, len),
                Op::Store(a, off, len) => pm.store(Addr(a), &tx.bytes[off..off + len]),
                Op::Compute(c) => pm.compute(c),
                Op::Lock(l) => pm.lock(l),
            }
        }
        if commit {
            pm.commit()
        } else {
            pm.abort()
        }
    }

    /// Core `core`'s records up to the end of its next transaction, into `self.tx` (records
    /// outside a transaction run as they come): `Some(true)` if it commits, `Some(false)` if it
    /// aborts, `None` at the end of the trace or on an error.
    fn read_tx<P: Pm>(&mut self, pm: &mut P, core: u32) -> Option<bool> {
        let base = self.base;
        let Some(dec) = &mut self.dec else {
            self.ended = true;
            return None;
        };
        let mut ahead = self.ahead.take();
        let tx = &mut self.tx;
        tx.ops.clear();
        tx.bytes.clear();
        tx.lines.clear();
        tx.locked = false;
        let mut in_tx = false;
        loop {
            let r = match ahead.take() {
                Some(a) => Ok(Some(a.record(base))),
                None => dec.next_record(),
            };
            let r = match r {
                Ok(Some(r)) => r,
                Ok(None) => Record::End,
                Err(e) => {
                    self.error = Some(e.to_string());
                    return None;
                }
            };
            if matches!(r, Record::End) {
                // The decoder refuses an `end` inside a transaction.
                self.ended = true;
                return None;
            }
            if let Record::Core { core } = r {
                self.cur = core;
            }
            if self.cur != core {
                continue;
            }
            match r {
                Record::Begin => in_tx = true,
                Record::Load { addr, len } if in_tx => {
                    tx.ops.push(Op::Load(addr - base, len));
                    tx.lines.extend(blocks_of(Addr(addr - base), len as usize).map(|b| b.0));
                }
                Record::Load { addr, len } => load(pm, &mut self.load_buf, addr - base, len),
                Record::Store { addr, bytes } => {
                    tx.ops.push(Op::Store(addr - base, tx.bytes.len(), bytes.len()));
                    tx.bytes.extend_from_slice(bytes);
                    tx.lines.extend(blocks_of(Addr(addr - base), bytes.len()).map(|b| b.0));
                }
                Record::Compute { cycles } if in_tx => tx.ops.push(Op::Compute(cycles)),
                Record::Compute { cycles } => pm.compute(cycles),
                // The decoder allows it only inside a transaction.
                Record::Lock { addr } => {
                    tx.ops.push(Op::Lock((addr - base) / LINE_BYTES));
                    tx.locked = true;
                }
                Record::Commit => return Some(true),
                Record::Abort => return Some(false),
                Record::Core { .. } => {}
                Record::End | Record::Region { .. } | Record::Warmup { .. } | Record::Init { .. } => {
                    unreachable!("the decoder allows header records only in the header")
                }
            }
        }
    }

    /// `Ok(true)` while records remain, `Ok(false)` after `end`, `Err` on a bad trace.
    pub fn more(&mut self) -> Result<bool, String> {
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(!self.ended),
        }
    }

    /// A trace has no structure to verify beyond the oracle's bytes.
    pub fn verify(&self, _data: &[u8]) -> Result<(), String> {
        Ok(())
    }
}

/// How many transactions of each of `cores` cores are among the first `warmup` of the trace
/// read from `src` (reads only that far).
fn warmup_of_cores(src: Source, cores: u32, warmup: u64) -> Result<Vec<u64>, String> {
    let mut counts = vec![0; cores as usize];
    let mut dec = Decoder::new(src).map_err(|e| e.to_string())?;
    dec.set_cores(cores);
    let mut seen = 0;
    while seen < warmup {
        match dec.next_record().map_err(|e| e.to_string())? {
            Some(Record::Commit | Record::Abort) => {
                counts[dec.core() as usize] += 1;
                seen += 1;
            }
            Some(Record::End) | None => break,
            Some(_) => {}
        }
    }
    Ok(counts)
}

/// The first body record, kept until the first transaction replays it.
fn body_ahead(r: Record, base: u64) -> Ahead {
    match r {
        Record::Begin => Ahead::Begin,
        Record::Load { addr, len } => Ahead::Load(addr - base, len),
        Record::Compute { cycles } => Ahead::Compute(cycles),
        Record::Core { core } => Ahead::Core(core),
        Record::End => Ahead::End,
        _ => unreachable!("the decoder allows only these after the header"),
    }
}

/// A load of `len` bytes at data-area offset `a` into the reused buffer `buf`.
#[inline]
fn load<P: Pm>(pm: &mut P, buf: &mut Vec<u8>, a: u64, len: u64) {
    if buf.len() < len as usize {
        buf.resize(len as usize, 0);
    }
    pm.load(Addr(a), &mut buf[..len as usize]);
}
