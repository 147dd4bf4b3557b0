//! `locsim._native`: the Rust half of the Python package `locsim` (docs/python.md).
//!
//! Two things live here. [`call`] runs a locsim command through [`locsim::api::command_json`],
//! the command line's own parsing, checks and code paths, and returns what `locsim ... --json`
//! prints; the Python half (`locsim/__init__.py`) turns keyword arguments into the command's
//! arguments and the JSON into DataFrames and report objects. [`Trace`] writes a trace
//! (docs/formats/trace.md) with the `locsim-trace` encoder, keeping the region's bytes so a
//! program written in Python can read what it stored.
//!
//! The simulator runs with the GIL released (`Python::detach`), so threads of one process run
//! several simulations at once. A panic inside locsim becomes a `RuntimeError` naming it; a bad
//! input becomes a `ValueError` (`FileNotFoundError` for a missing file) whose message is the
//! exact line the command line prints on standard error.

/// The simulator's host allocator (`locsim::hostmem::HostAlloc`: its large arrays aligned to
/// host huge pages), as in the `locsim` binary.
#[global_allocator]
static HOST_ALLOC: locsim::hostmem::HostAlloc = locsim::hostmem::HostAlloc;

use locsim::api::{command_help, command_json, format as tf, UserVerify};
use pyo3::exceptions::{PyFileNotFoundError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::io::BufWriter;
use std::sync::{Arc, Mutex};

/// The exception for a line the command line would print on standard error: `FileNotFoundError`
/// when the line reports a missing file, else `ValueError`.
fn input_error(line: String) -> PyErr {
    if line.contains("(os error 2)") {
        PyFileNotFoundError::new_err(line)
    } else {
        PyValueError::new_err(line)
    }
}

/// A panic's message, for the exception that replaces it.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "a panic without a message".into(),
    }
}

/// A Python callable `f(image: bytes) -> None | str` as the crash checker's [`UserVerify`]: a
/// string is a `structure` violation; an exception is kept (the first one) and raised when the
/// check ends, and is a violation meanwhile.
fn user_verify(f: Py<PyAny>, raised: Arc<Mutex<Option<PyErr>>>) -> UserVerify {
    UserVerify(Arc::new(move |data: &[u8]| {
        Python::attach(|py| {
            let out = f.call1(py, (PyBytes::new(py, data),));
            match out {
                Ok(v) if v.is_none(py) => Ok(()),
                Ok(v) => match v.extract::<String>(py) {
                    Ok(msg) => Err(msg),
                    Err(_) => Err(format!(
                        "verify returned {}, not None or a str",
                        v.bind(py).repr().map_or("?".into(), |r| r.to_string())
                    )),
                },
                Err(e) => {
                    let msg = format!("verify raised {e}");
                    raised.lock().expect("not poisoned").get_or_insert(e);
                    Err(msg)
                }
            }
        })
    }))
}

/// Run `locsim ARGS...` and return what it prints with `--json`, as JSON text. `verify`:
/// with `crashtest`, a structural check `f(image: bytes) -> None | str` of each recovered
/// data area. Raises ValueError (FileNotFoundError) with the command line's error line.
#[pyfunction]
#[pyo3(signature = (args, verify=None))]
fn call(py: Python<'_>, args: Vec<String>, verify: Option<Py<PyAny>>) -> PyResult<String> {
    let raised = Arc::new(Mutex::new(None));
    let verify = verify.map(|f| user_verify(f, raised.clone()));
    let out = py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| command_json(&args, verify))));
    if let Some(e) = raised.lock().expect("not poisoned").take() {
        return Err(e);
    }
    match out {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(line)) => Err(input_error(line)),
        Err(p) => Err(PyRuntimeError::new_err(format!("locsim panicked: {}", panic_message(p.as_ref())))),
    }
}

/// The `--help` text of a locsim command (`run`, `crashtest`, ...), as the command line prints it.
#[pyfunction]
fn help(command: &str) -> PyResult<String> {
    command_help(command).ok_or_else(|| PyValueError::new_err(format!("{command}: not a locsim command")))
}

/// A trace writer: the documented trace format (docs/formats/trace.md) written by the
/// `locsim-trace` encoder, with the region's current bytes kept so `load` returns them.
#[pyclass(module = "locsim._native")]
struct Trace {
    enc: Option<tf::Encoder<BufWriter<std::fs::File>>>,
    path: String,
    base: u64,
    /// The region's bytes as the program's stores left them (an abort undoes its stores).
    mem: Vec<u8>,
    /// Within a transaction: the bytes each store replaced, to undo on `abort`.
    undo: Option<Vec<(u64, Vec<u8>)>>,
    /// Within a transaction: its core.
    tx_core: u32,
    /// A body record was written (no more `init`).
    body: bool,
}

impl Trace {
    fn write(&mut self, r: &tf::Record) -> PyResult<()> {
        let enc =
            self.enc.as_mut().ok_or_else(|| PyValueError::new_err(format!("trace {}: already closed", self.path)))?;
        enc.write(r).map_err(|e| PyValueError::new_err(format!("trace {}: {e}", self.path)))
    }

    /// The region's byte range of `len` bytes at `addr`, or a ValueError naming the region.
    fn range(&self, what: &str, addr: u64, len: u64) -> PyResult<std::ops::Range<usize>> {
        let size = self.mem.len() as u64;
        match addr.checked_sub(self.base) {
            Some(off) if off.checked_add(len).is_some_and(|end| end <= size) => Ok(off as usize..(off + len) as usize),
            _ => Err(PyValueError::new_err(format!(
                "{what} of {len} bytes at {addr:#x}: outside the region {:#x}..{:#x}",
                self.base,
                self.base + size
            ))),
        }
    }

    /// The core of a `load` or `compute`: inside a transaction the transaction's (a `core`
    /// naming another is an error), outside one `core` (default 0), written as a `core`
    /// record when it changes.
    fn core_of(&mut self, what: &str, core: Option<u32>) -> PyResult<()> {
        if self.undo.is_some() {
            return match core {
                Some(c) if c != self.tx_core => Err(PyValueError::new_err(format!(
                    "{what} on core {c} inside a transaction of core {}: a transaction runs on one core",
                    self.tx_core
                ))),
                _ => Ok(()),
            };
        }
        self.set_core(core.unwrap_or(0))
    }

    /// Make `core` the core of the records that follow (between transactions).
    fn set_core(&mut self, core: u32) -> PyResult<()> {
        if u64::from(core) >= tf::MAX_CORES {
            return Err(PyValueError::new_err(format!("core {core}: allowed 0..={}", tf::MAX_CORES - 1)));
        }
        let enc =
            self.enc.as_mut().ok_or_else(|| PyValueError::new_err(format!("trace {}: already closed", self.path)))?;
        enc.set_core(core).map_err(|e| PyValueError::new_err(format!("trace {}: {e}", self.path)))
    }

    fn in_tx(&self, what: &str) -> PyResult<()> {
        if self.undo.is_none() {
            return Err(PyValueError::new_err(format!("{what} outside a transaction (call begin() first)")));
        }
        Ok(())
    }
}

#[pymethods]
impl Trace {
    /// Start a trace at `path`: a region of `size` bytes from `base`, the first `warmup`
    /// transactions left out of the figures; `text` writes the text encoding.
    #[new]
    #[pyo3(signature = (path, size, base=0, warmup=0, text=false))]
    fn new(path: String, size: u64, base: u64, warmup: u64, text: bool) -> PyResult<Trace> {
        if !(1..=tf::MAX_REGION_BYTES).contains(&size) {
            return Err(PyValueError::new_err(format!("size {size}: allowed 1..={}", tf::MAX_REGION_BYTES)));
        }
        let file = std::fs::File::create(&path).map_err(|e| input_error(format!("trace {path}: {e}")))?;
        let enc = if text { tf::Encoding::Text } else { tf::Encoding::Binary };
        let io = |e: std::io::Error| PyValueError::new_err(format!("trace {path}: {e}"));
        let mut enc = tf::Encoder::new(BufWriter::new(file), enc).map_err(io)?;
        enc.write(&tf::Record::Region { base, size }).map_err(io)?;
        if warmup > 0 {
            enc.write(&tf::Record::Warmup { txs: warmup }).map_err(io)?;
        }
        Ok(Trace { enc: Some(enc), path, base, mem: vec![0; size as usize], undo: None, tx_core: 0, body: false })
    }

    /// The file the trace is written to.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Whether `close` has ended the trace.
    #[getter]
    fn closed(&self) -> bool {
        self.enc.is_none()
    }

    /// Initial content at `addr` (before the first transaction; not a store).
    fn init(&mut self, addr: u64, data: &[u8]) -> PyResult<()> {
        if self.body {
            return Err(PyValueError::new_err("init after the first transaction, load or compute"));
        }
        let r = self.range("init", addr, data.len() as u64)?;
        self.write(&tf::Record::Init { addr, bytes: data })?;
        self.mem[r].copy_from_slice(data);
        Ok(())
    }

    /// TxBegin of a transaction of core `core` (its loads, stores and computes are that core's).
    #[pyo3(signature = (core=0))]
    fn begin(&mut self, core: u32) -> PyResult<()> {
        if self.undo.is_some() {
            return Err(PyValueError::new_err("begin inside a transaction (transactions do not nest)"));
        }
        self.set_core(core)?;
        self.tx_core = core;
        self.write(&tf::Record::Begin)?;
        self.body = true;
        self.undo = Some(Vec::new());
        Ok(())
    }

    /// A load of `n` bytes at `addr`: returns the region's current bytes there.
    #[pyo3(signature = (addr, n, core=None))]
    fn load<'py>(&mut self, py: Python<'py>, addr: u64, n: u64, core: Option<u32>) -> PyResult<Bound<'py, PyBytes>> {
        let r = self.range("load", addr, n)?;
        self.core_of("load", core)?;
        self.write(&tf::Record::Load { addr, len: n })?;
        self.body = true;
        Ok(PyBytes::new(py, &self.mem[r]))
    }

    /// A load of the little-endian u64 at `addr`.
    #[pyo3(signature = (addr, core=None))]
    fn load_u64(&mut self, addr: u64, core: Option<u32>) -> PyResult<u64> {
        let r = self.range("load", addr, 8)?;
        self.core_of("load", core)?;
        self.write(&tf::Record::Load { addr, len: 8 })?;
        self.body = true;
        Ok(u64::from_le_bytes(self.mem[r].try_into().expect("8 bytes")))
    }

    /// A store of `data` at `addr` (inside a transaction).
    fn store(&mut self, addr: u64, data: &[u8]) -> PyResult<()> {
        self.in_tx("store")?;
        if data.is_empty() {
            return Err(PyValueError::new_err("store of 0 bytes: allowed 1 or more"));
        }
        let r = self.range("store", addr, data.len() as u64)?;
        self.write(&tf::Record::Store { addr, bytes: data })?;
        let old = self.mem[r.clone()].to_vec();
        self.undo.as_mut().expect("in a transaction").push((r.start as u64, old));
        self.mem[r].copy_from_slice(data);
        Ok(())
    }

    /// A store of `value` as a little-endian u64 at `addr` (inside a transaction).
    fn store_u64(&mut self, addr: u64, value: u64) -> PyResult<()> {
        self.store(addr, &value.to_le_bytes())
    }

    /// `cycles` core cycles of non-memory work.
    #[pyo3(signature = (cycles, core=None))]
    fn compute(&mut self, cycles: u64, core: Option<u32>) -> PyResult<()> {
        self.core_of("compute", core)?;
        self.write(&tf::Record::Compute { cycles })?;
        self.body = true;
        Ok(())
    }

    /// TxCommit.
    fn commit(&mut self) -> PyResult<()> {
        self.in_tx("commit")?;
        self.write(&tf::Record::Commit)?;
        self.undo = None;
        Ok(())
    }

    /// TxAbort: the transaction's stores are undone (in the trace's replay and here).
    fn abort(&mut self) -> PyResult<()> {
        self.in_tx("abort")?;
        self.write(&tf::Record::Abort)?;
        for (off, old) in self.undo.take().expect("in a transaction").into_iter().rev() {
            self.mem[off as usize..off as usize + old.len()].copy_from_slice(&old);
        }
        Ok(())
    }

    /// The region's current bytes (what the committed and current stores left).
    fn image<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.mem)
    }

    /// End the trace (`end` record) and close the file; a second call does nothing.
    fn close(&mut self) -> PyResult<()> {
        if self.undo.is_some() {
            return Err(PyValueError::new_err("close inside a transaction (commit or abort it first)"));
        }
        if let Some(mut enc) = self.enc.take() {
            let io = |e: std::io::Error| PyValueError::new_err(format!("trace {}: {e}", self.path));
            enc.write(&tf::Record::End).map_err(io)?;
            let mut w = enc.finish().map_err(io)?;
            std::io::Write::flush(&mut w).map_err(io)?;
        }
        Ok(())
    }
}

/// The version of locsim the package was built from.
#[pyfunction]
fn version() -> (&'static str, &'static str) {
    (locsim::runner::VERSION, locsim::runner::GIT_REV)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(call, m)?)?;
    m.add_function(wrap_pyfunction!(help, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_class::<Trace>()?;
    Ok(())
}
