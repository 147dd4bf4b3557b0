//! A C-ABI recorder of locsim traces: the functions of `include/locsim_pm.h`, writing the
//! binary encoding through [`locsim_trace::Encoder`] (the one module of the format).
//!
//! State is one global recorder behind a mutex. A misuse (a store outside a transaction or
//! outside the heap, a call before `pm_open`) or an I/O error prints one line on stderr, stops
//! recording, and makes every later call return -1; the trace is then left without its `end`
//! record, so a replay reports it truncated instead of running half a program.
//!
//! Threads: each OS thread records as the core `pm_thread` gave it (thread-local, 0 by
//! default), and each core has at most one transaction open. A transaction's records are kept
//! until it commits or aborts and are then written whole, after a `core` record when the core
//! differs from the previous record's: the trace lists transactions in the order they ended,
//! which is a serial order of a program whose threads isolate their transactions (two-phase
//! locking, locks released after the commit). Records outside a transaction are written at
//! once. A single-threaded program's trace is what it was before threads: no `core` record.

use locsim_trace::{Encoder, Encoding, Record, MAX_ACCESS_BYTES, MAX_CORES};
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs::File;
use std::io::BufWriter;
use std::sync::Mutex;

struct Recorder {
    enc: Encoder<BufWriter<File>>,
    base: usize,
    size: usize,
    /// Per core, its transaction (open or not: the buffers are reused).
    txs: Vec<Tx>,
}

/// One core's transaction: its records until it ends, and the undo of its stores.
#[derive(Default)]
struct Tx {
    open: bool,
    ops: Vec<Op>,
    /// The bytes of the stores of `ops`.
    bytes: Vec<u8>,
    /// Undo: (address, offset into `undo_bytes`, length).
    undo: Vec<(usize, usize, usize)>,
    undo_bytes: Vec<u8>,
}

/// A record of an open transaction, kept until it ends.
enum Op {
    Load {
        addr: u64,
        len: u64,
    },
    /// `len` bytes at `off` in [`Tx::bytes`].
    Store {
        addr: u64,
        off: usize,
        len: usize,
    },
    Compute {
        cycles: u64,
    },
}

thread_local! {
    /// The calling thread's core (`pm_thread`) and whether it has a transaction open.
    static THREAD: Cell<(u32, bool)> = const { Cell::new((0, false)) };
}

fn core() -> u32 {
    THREAD.with(|t| t.get().0)
}

fn set_open(open: bool) {
    THREAD.with(|t| t.set((t.get().0, open)));
}

enum State {
    Closed,
    Open(Recorder),
    Failed,
}

static STATE: Mutex<State> = Mutex::new(State::Closed);

/// Run `f` on the open recorder; a failure is reported once and ends recording.
fn with(what: &str, f: impl FnOnce(&mut Recorder) -> Result<(), String>) -> c_int {
    let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
    let r = match &mut *st {
        State::Open(r) => f(r),
        State::Closed => Err("no trace open: call pm_open first".into()),
        State::Failed => return -1,
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("locsim recorder: {what}: {e}");
            *st = State::Failed;
            -1
        }
    }
}

impl Recorder {
    fn put(&mut self, r: &Record) -> Result<(), String> {
        self.enc.write(r).map_err(|e| e.to_string())
    }

    /// The transaction of `core` (created on first use).
    fn tx(&mut self, core: u32) -> &mut Tx {
        let c = core as usize;
        if self.txs.len() <= c {
            self.txs.resize_with(c + 1, Tx::default);
        }
        &mut self.txs[c]
    }

    /// The open transaction of `core`, if any.
    fn open_tx(&mut self, core: u32) -> Option<&mut Tx> {
        self.txs.get_mut(core as usize).filter(|t| t.open)
    }

    /// A record outside a transaction: written at once, as `core`'s.
    fn put_on(&mut self, core: u32, r: &Record) -> Result<(), String> {
        self.enc.set_core(core).map_err(|e| e.to_string())?;
        self.put(r)
    }

    /// End `core`'s transaction: write it whole (`begin`, its records, then `end`).
    fn flush(&mut self, core: u32, end: Record) -> Result<(), String> {
        let c = core as usize;
        self.enc.set_core(core).map_err(|e| e.to_string())?;
        let (enc, tx) = (&mut self.enc, &mut self.txs[c]);
        tx.open = false;
        let io = |e: std::io::Error| e.to_string();
        enc.write(&Record::Begin).map_err(io)?;
        for op in &tx.ops {
            let r = match *op {
                Op::Load { addr, len } => Record::Load { addr, len },
                Op::Store { addr, off, len } => Record::Store { addr, bytes: &tx.bytes[off..off + len] },
                Op::Compute { cycles } => Record::Compute { cycles },
            };
            enc.write(&r).map_err(io)?;
        }
        enc.write(&end).map_err(io)
    }

    /// The heap offset of `len` bytes at `p`, checked.
    fn check(&self, p: usize, len: usize) -> Result<(), String> {
        if len == 0 || len as u64 > MAX_ACCESS_BYTES {
            return Err(format!("{len} bytes: allowed 1..={MAX_ACCESS_BYTES} per call"));
        }
        if p < self.base || p - self.base > self.size || len > self.size - (p - self.base) {
            return Err(format!("{len} bytes at {p:#x} outside the heap {:#x}+{}", self.base, self.size));
        }
        Ok(())
    }
}

/// Start a trace (see the header).
///
/// # Safety
/// `path` is a NUL-terminated string; `base` points to `size` readable bytes that stay valid
/// until `pm_close`.
#[no_mangle]
pub unsafe extern "C" fn pm_open(path: *const c_char, base: *mut c_void, size: usize) -> c_int {
    let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if !matches!(*st, State::Closed) {
        eprintln!("locsim recorder: pm_open: a trace is already open");
        return -1;
    }
    let open = || -> Result<Recorder, String> {
        if path.is_null() || base.is_null() || size == 0 {
            return Err("null path, null heap or empty heap".into());
        }
        let path = CStr::from_ptr(path).to_string_lossy().into_owned();
        let file = File::create(&path).map_err(|e| format!("{path}: {e}"))?;
        let enc = Encoder::new(BufWriter::with_capacity(1 << 20, file), Encoding::Binary).map_err(|e| e.to_string())?;
        let mut r = Recorder { enc, base: base as usize, size, txs: Vec::new() };
        r.put(&Record::Region { base: base as u64, size: size as u64 })?;
        // The heap's current content, in chunks, leaving out all-zero ones.
        let heap = std::slice::from_raw_parts(base as *const u8, size);
        for (i, chunk) in heap.chunks(4096).enumerate() {
            if chunk.iter().any(|&b| b != 0) {
                r.put(&Record::Init { addr: (r.base + i * 4096) as u64, bytes: chunk })?;
            }
        }
        Ok(r)
    };
    match open() {
        Ok(r) => {
            *st = State::Open(r);
            0
        }
        Err(e) => {
            eprintln!("locsim recorder: pm_open: {e}");
            -1
        }
    }
}

/// Record the calling thread's transactions and accesses as core `thread`'s (0 until called).
#[no_mangle]
pub extern "C" fn pm_thread(thread: c_uint) -> c_int {
    let (_, open) = THREAD.with(Cell::get);
    let err = if u64::from(thread) >= MAX_CORES {
        Some(format!("thread {thread}: allowed 0..={}", MAX_CORES - 1))
    } else if open {
        Some("inside a transaction: a transaction runs on one core".into())
    } else {
        None
    };
    if let Some(e) = err {
        eprintln!("locsim recorder: pm_thread: {e}");
        return -1;
    }
    THREAD.with(|t| t.set((thread, false)));
    0
}

/// TxBegin.
#[no_mangle]
pub extern "C" fn pm_tx_begin() -> c_int {
    let c = core();
    with("pm_tx_begin", |r| {
        let tx = r.tx(c);
        if tx.open {
            return Err(format!("transactions do not nest (thread {c} has one open)"));
        }
        tx.open = true;
        tx.ops.clear();
        tx.bytes.clear();
        tx.undo.clear();
        tx.undo_bytes.clear();
        set_open(true);
        Ok(())
    })
}

/// Store `len` bytes from `src` at `dst` and record them.
///
/// # Safety
/// `dst` and `src` point to `len` valid bytes; `dst` lies in the heap.
#[no_mangle]
pub unsafe extern "C" fn pm_store(dst: *mut c_void, src: *const c_void, len: usize) -> c_int {
    let c = core();
    with("pm_store", |r| {
        if r.open_tx(c).is_none() {
            return Err("store outside a transaction".into());
        }
        r.check(dst as usize, len)?;
        let tx = r.open_tx(c).expect("checked above");
        let (d, s) = (dst as *mut u8, src as *const u8);
        tx.undo.push((dst as usize, tx.undo_bytes.len(), len));
        tx.undo_bytes.extend_from_slice(std::slice::from_raw_parts(d, len));
        std::ptr::copy(s, d, len);
        tx.ops.push(Op::Store { addr: dst as u64, off: tx.bytes.len(), len });
        tx.bytes.extend_from_slice(std::slice::from_raw_parts(d, len));
        Ok(())
    })
}

/// Record a load of `len` bytes at `src`.
#[no_mangle]
pub extern "C" fn pm_load(src: *const c_void, len: usize) -> c_int {
    let c = core();
    with("pm_load", |r| {
        r.check(src as usize, len)?;
        let (addr, len) = (src as u64, len as u64);
        match r.open_tx(c) {
            Some(tx) => {
                tx.ops.push(Op::Load { addr, len });
                Ok(())
            }
            None => r.put_on(c, &Record::Load { addr, len }),
        }
    })
}

/// Charge `cycles` of non-memory work.
#[no_mangle]
pub extern "C" fn pm_compute(cycles: u64) -> c_int {
    let c = core();
    with("pm_compute", |r| match r.open_tx(c) {
        Some(tx) => {
            tx.ops.push(Op::Compute { cycles });
            Ok(())
        }
        None => r.put_on(c, &Record::Compute { cycles }),
    })
}

/// TxCommit.
#[no_mangle]
pub extern "C" fn pm_tx_commit() -> c_int {
    let c = core();
    with("pm_tx_commit", |r| {
        if r.open_tx(c).is_none() {
            return Err("commit outside a transaction".into());
        }
        set_open(false);
        r.flush(c, Record::Commit)
    })
}

/// TxAbort: undo the transaction's stores in the heap, newest first.
#[no_mangle]
pub extern "C" fn pm_tx_abort() -> c_int {
    let c = core();
    with("pm_tx_abort", |r| {
        let Some(tx) = r.open_tx(c) else { return Err("abort outside a transaction".into()) };
        for &(addr, off, len) in tx.undo.iter().rev() {
            // SAFETY: each entry was a checked heap range written by pm_store.
            unsafe { std::ptr::copy_nonoverlapping(tx.undo_bytes[off..].as_ptr(), addr as *mut u8, len) };
        }
        set_open(false);
        r.flush(c, Record::Abort)
    })
}

/// Write the `end` record and close the trace.
#[no_mangle]
pub extern "C" fn pm_close() -> c_int {
    let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
    match std::mem::replace(&mut *st, State::Closed) {
        State::Open(mut r) => {
            let open = r.txs.iter().position(|t| t.open);
            let done = match open {
                Some(c) => Err(format!("a transaction of thread {c} is open")),
                None => Ok(()),
            }
            .and_then(|()| r.put(&Record::End))
            .and_then(|()| r.enc.finish().map(drop).map_err(|e| e.to_string()));
            match done {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("locsim recorder: pm_close: {e}");
                    -1
                }
            }
        }
        State::Closed => {
            eprintln!("locsim recorder: pm_close: no trace open");
            -1
        }
        State::Failed => -1,
    }
}
