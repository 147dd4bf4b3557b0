//! A C-ABI recorder of locsim traces: the functions of `include/locsim_pm.h`, writing the
//! binary encoding through [`locsim_trace::Encoder`] (the one module of the format).
//!
//! State is one global recorder behind a mutex. A misuse (a store outside a transaction or
//! outside the heap, a call before `pm_open`) or an I/O error prints one line on stderr, stops
//! recording, and makes every later call return -1; the trace is then left without its `end`
//! record, so a replay reports it truncated instead of running half a program.

use locsim_trace::{Encoder, Encoding, Record, MAX_ACCESS_BYTES};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fs::File;
use std::io::BufWriter;
use std::sync::Mutex;

struct Recorder {
    enc: Encoder<BufWriter<File>>,
    base: usize,
    size: usize,
    in_tx: bool,
    /// Undo of the running transaction: (address, offset into `undo_bytes`, length).
    undo: Vec<(usize, usize, usize)>,
    undo_bytes: Vec<u8>,
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
        let mut r = Recorder { enc, base: base as usize, size, in_tx: false, undo: Vec::new(), undo_bytes: Vec::new() };
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

/// TxBegin.
#[no_mangle]
pub extern "C" fn pm_tx_begin() -> c_int {
    with("pm_tx_begin", |r| {
        if r.in_tx {
            return Err("transactions do not nest".into());
        }
        r.in_tx = true;
        r.undo.clear();
        r.undo_bytes.clear();
        r.put(&Record::Begin)
    })
}

/// Store `len` bytes from `src` at `dst` and record them.
///
/// # Safety
/// `dst` and `src` point to `len` valid bytes; `dst` lies in the heap.
#[no_mangle]
pub unsafe extern "C" fn pm_store(dst: *mut c_void, src: *const c_void, len: usize) -> c_int {
    with("pm_store", |r| {
        if !r.in_tx {
            return Err("store outside a transaction".into());
        }
        r.check(dst as usize, len)?;
        let (d, s) = (dst as *mut u8, src as *const u8);
        r.undo.push((dst as usize, r.undo_bytes.len(), len));
        r.undo_bytes.extend_from_slice(std::slice::from_raw_parts(d, len));
        std::ptr::copy(s, d, len);
        r.put(&Record::Store { addr: dst as u64, bytes: std::slice::from_raw_parts(d, len) })
    })
}

/// Record a load of `len` bytes at `src`.
#[no_mangle]
pub extern "C" fn pm_load(src: *const c_void, len: usize) -> c_int {
    with("pm_load", |r| {
        r.check(src as usize, len)?;
        r.put(&Record::Load { addr: src as u64, len: len as u64 })
    })
}

/// Charge `cycles` of non-memory work.
#[no_mangle]
pub extern "C" fn pm_compute(cycles: u64) -> c_int {
    with("pm_compute", |r| r.put(&Record::Compute { cycles }))
}

/// TxCommit.
#[no_mangle]
pub extern "C" fn pm_tx_commit() -> c_int {
    with("pm_tx_commit", |r| {
        if !r.in_tx {
            return Err("commit outside a transaction".into());
        }
        r.in_tx = false;
        r.put(&Record::Commit)
    })
}

/// TxAbort: undo the transaction's stores in the heap, newest first.
#[no_mangle]
pub extern "C" fn pm_tx_abort() -> c_int {
    with("pm_tx_abort", |r| {
        if !r.in_tx {
            return Err("abort outside a transaction".into());
        }
        r.in_tx = false;
        for &(addr, off, len) in r.undo.iter().rev() {
            // SAFETY: each entry was a checked heap range written by pm_store.
            unsafe { std::ptr::copy_nonoverlapping(r.undo_bytes[off..].as_ptr(), addr as *mut u8, len) };
        }
        r.put(&Record::Abort)
    })
}

/// Write the `end` record and close the trace.
#[no_mangle]
pub extern "C" fn pm_close() -> c_int {
    let mut st = STATE.lock().unwrap_or_else(|e| e.into_inner());
    match std::mem::replace(&mut *st, State::Closed) {
        State::Open(mut r) => {
            let done = if r.in_tx { Err("a transaction is open".to_string()) } else { Ok(()) }
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
