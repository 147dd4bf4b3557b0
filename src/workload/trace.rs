//! A trace replayed as a workload (docs/formats/trace.md, docs/your-own-workload.md).
//!
//! [`TraceWorkload`] is the workload `trace` ([`crate::workload::Workload::Trace`]): its data
//! area is the trace's region, `populate` writes the `init` records, and each `run_tx` replays
//! the records of one transaction through [`Pm`], so the simulator's back end takes the oracle
//! from the trace's own stores exactly as from a built-in workload's. It streams: memory is the
//! decoder's buffer (bounded by the longest record), never the trace.
//!
//! Cores: the decoder checks every `core` record against the machine's core count (one line
//! naming the record's offset, the core and the allowed range). A trace replays on one core
//! only so far (`Workload::multicore` refuses more), so every record this replayer executes is
//! core 0's; docs/multicore.md (Traces and programs on N cores) says how a trace will replay
//! on N cores.
#![warn(missing_docs)]

use super::Pm;
use crate::rng::Rng;
use crate::types::Addr;
use locsim_trace::{Decoder, Record};
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
    Core,
    End,
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
        if let Some(Ahead::Init(a, bytes)) = &self.ahead {
            data[*a as usize..*a as usize + bytes.len()].copy_from_slice(bytes);
            self.ahead = None;
        }
        if self.ahead.is_some() {
            return;
        }
        let Some(dec) = &mut self.dec else { return };
        loop {
            match dec.next_record() {
                Ok(Some(Record::Init { addr, bytes })) => {
                    let a = (addr - self.base) as usize;
                    data[a..a + bytes.len()].copy_from_slice(bytes);
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
        match self.ahead.take() {
            Some(Ahead::Begin) => pm.begin(),
            Some(Ahead::Load(a, len)) => load(pm, &mut self.load_buf, a, len),
            Some(Ahead::Compute(c)) => pm.compute(c),
            Some(Ahead::Core) => {}
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

/// The first body record, kept until the first transaction replays it.
fn body_ahead(r: Record, base: u64) -> Ahead {
    match r {
        Record::Begin => Ahead::Begin,
        Record::Load { addr, len } => Ahead::Load(addr - base, len),
        Record::Compute { cycles } => Ahead::Compute(cycles),
        Record::Core { .. } => Ahead::Core,
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
