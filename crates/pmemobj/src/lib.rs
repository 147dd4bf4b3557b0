//! locsim-pmemobj: a libpmemobj-compatible library (`include/libpmemobj.h`) that runs a PMDK
//! program unmodified on a pool file and records its persistent accesses as a locsim trace,
//! written through [`locsim_trace::Encoder`] (the one module of the format). docs/pmdk.md says
//! what is recorded at each level and how PMDK's semantics map onto locsim's transactions.
//!
//! State: the open pools behind one mutex ([`POOLS`]), with a lock-free table of their ids and
//! mappings for `pmemobj_direct` and the exact level's hooks; each thread's transaction in a
//! thread-local. Each pool keeps a shadow: its bytes as the trace has them so far. A
//! transaction's stores are the bytes where the ranges it touched (added, allocated, reached
//! through `pmemobj_direct`, written by the allocator) differ from the shadow at its end; at
//! close every remaining difference becomes one last transaction, so the trace's stores,
//! applied to its `init` image, give the pool's bytes at close.
//!
//! Threads: each thread is a core, and the trace's transactions are written whole, each when
//! it ends, under the pools' lock. The ranges one thread's open transaction has added or
//! allocated are its own until it ends ([`Owned`], registered with the pool): another
//! thread's transaction that ends meanwhile leaves them out of its differences, whatever its
//! own ranges cover (at the plain level, a whole shared object reached through
//! `pmemobj_direct`), so no transaction carries another's uncommitted bytes. The allocator's
//! metadata is shared by all transactions and never rolled back byte by byte (src/heap.rs).
//!
//! The rollback of an aborted transaction uses a volatile undo log (of the program's objects:
//! the allocator's metadata is shared by the threads, and an aborted transaction's objects are
//! freed instead): the pool file is made consistent by a normal close, not after a crash of
//! the process (the crash checking is the simulator's, on the trace).

// The entry points are libpmemobj's C functions: C calls them with the pointers their manual
// pages describe (`pmemobj_free(PMEMoid *)`, ...), as it would PMDK's; marking them `unsafe`
// would change nothing for their callers.
#![allow(clippy::not_unsafe_ptr_arg_deref, clippy::missing_safety_doc, clippy::too_many_arguments)]

mod heap;
mod hooks;

use heap::*;
use locsim_trace::{Encoder, Encoding, Record, MAX_ACCESS_BYTES};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

type Oid = PMEMoid;

/// `PMEMoid`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PMEMoid {
    pub pool_uuid_lo: u64,
    pub off: u64,
}

const NULL: Oid = PMEMoid { pool_uuid_lo: 0, off: 0 };
const MIN_POOL: u64 = 8 << 20;
/// The granularity of a plain-level load: the object's first bytes, up to one cache line.
const PLAIN_LOAD: u64 = 64;
const SLOTS: usize = 16;
/// `POBJ_XALLOC_CLASS_MASK`: an allocation class's id in the flags.
const CLASS_MASK: u64 = 0xffff << 48;

// Transaction stages (enum pobj_tx_stage).
const STAGE_NONE: c_int = 0;
const STAGE_WORK: c_int = 1;
const STAGE_ONCOMMIT: c_int = 2;
const STAGE_ONABORT: c_int = 3;
const STAGE_FINALLY: c_int = 4;

extern "C" {
    fn locsim_longjmp(env: *mut c_void, val: c_int) -> !;
}

/// The lock-free view of the open pools: id, mapping, size per slot (0: free).
static SLOT_UUID: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static SLOT_BASE: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static SLOT_SIZE: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
/// Compiled at the exact level (a translation unit's constructor said so).
static EXACT: AtomicBool = AtomicBool::new(false);
static NEXT_CORE: AtomicU32 = AtomicU32::new(0);
static STRICT: AtomicBool = AtomicBool::new(false);

/// An open pool.
struct Pool {
    base: usize,
    size: u64,
    trace_path: String,
    enc: Option<Encoder<Shared>>,
    /// The encoder's file, to flush the trace's start at open (a program killed later leaves
    /// a trace without its `end` record, which a replay reports as truncated).
    file: Shared,
    /// The pool's bytes as the trace has them so far.
    shadow: Vec<u8>,
    /// The furthest heap end seen (at open, then at each transaction): the bytes beyond it
    /// are zero in the pool and in the trace.
    extent: usize,
    user_data: usize,
    /// The volatile locks of the pool's PMEMmutex/PMEMrwlock/PMEMcond, by offset.
    locks: HashMap<u64, Box<Lock>>,
    next_class: u32,
    /// Transactions written (the number a bug report names).
    txs: u64,
    /// Bug reports: per (kind, site) the count and the first pool offset.
    bugs: BTreeMap<(u8, usize), (u64, u64, u64)>,
    /// The ranges of the transactions open on the pool, one entry per thread.
    open: Vec<Owned>,
}

/// The ranges (start, end) an open transaction has added or allocated: its thread writes them
/// (under this lock, before it stores to them), the transactions of other threads that end
/// meanwhile read them (holding the lock through their differences) and leave them out.
type Owned = Arc<Mutex<Vec<(u64, u64)>>>;

fn lock_owned(o: &Owned) -> std::sync::MutexGuard<'_, Vec<(u64, u64)>> {
    o.lock().unwrap_or_else(|e| e.into_inner())
}

/// A pool lock's volatile state (reinitialised at each open: a new map).
struct Lock {
    mutex: std::cell::UnsafeCell<libc::pthread_mutex_t>,
    rwlock: std::cell::UnsafeCell<libc::pthread_rwlock_t>,
    cond: std::cell::UnsafeCell<libc::pthread_cond_t>,
}

static POOLS: Mutex<Vec<Option<Pool>>> = Mutex::new(Vec::new());

/// The trace file, buffered, shared by the encoder and the pool.
#[derive(Clone)]
struct Shared(std::sync::Arc<Mutex<BufWriter<File>>>);

impl std::io::Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).flush()
    }
}

fn pools() -> std::sync::MutexGuard<'static, Vec<Option<Pool>>> {
    POOLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A recorded operation of an open transaction.
#[derive(Clone, Copy)]
enum Op {
    Load(u64, u64),
    /// An exact-level store: offset, and its bytes at `bytes[at..at + len]`.
    Store(u64, usize, usize),
}

/// One level of a (possibly nested) transaction.
struct Frame {
    env: usize,
    stage: c_int,
    errnum: c_int,
    aborted: bool,
    locks: Vec<(c_int, usize)>,
    cbs: Vec<(usize, usize)>,
}

/// The calling thread's state.
#[derive(Default)]
struct Th {
    core: Option<u32>,
    frames: Vec<Frame>,
    /// The outermost transaction's pool slot and records.
    slot: usize,
    ops: Vec<Op>,
    bytes: Vec<u8>,
    touched: Vec<(u64, u64)>,
    undo: Vec<(u64, Vec<u8>)>,
    /// Ranges added or allocated in the open transaction, merged (start -> end).
    added: BTreeMap<u64, u64>,
    /// The same, as the pool's other threads see them.
    owned: Owned,
    /// Objects the open transaction allocated (an abort frees them) and freed (its commit
    /// frees them).
    allocs: Vec<u64>,
    frees: Vec<u64>,
    last_errno: c_int,
    /// Loads outside a transaction not yet written: (slot, offset, length).
    loads: Vec<(usize, u64, u64)>,
    /// An exact-level store whose bytes are read at the thread's next access: slot, offset,
    /// length, site.
    pending: Option<(usize, u64, usize, usize)>,
    /// Exact-level stores outside a transaction not yet persisted: slot, offset, length, site.
    unpersisted: Vec<(usize, u64, u64, usize)>,
    /// Inside an atomic operation's constructor: a persist there is the operation's.
    atomic: u32,
    /// Ranges reserved (pmemobj_reserve) and written since, published with the next publish.
    reserved: Vec<(usize, u64, u64)>,
    msg: CString,
}

thread_local! {
    static TH: RefCell<Th> = RefCell::new(Th::default());
}

fn th<R>(f: impl FnOnce(&mut Th) -> R) -> R {
    TH.with(|t| f(&mut t.borrow_mut()))
}

fn set_errno(e: c_int) {
    // SAFETY: the calling thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// Set the thread's error message and errno.
fn fail(e: c_int, msg: String) {
    th(|t| t.msg = CString::new(msg).unwrap_or_default());
    set_errno(e);
}

fn core_of(t: &mut Th) -> u32 {
    *t.core.get_or_insert_with(|| NEXT_CORE.fetch_add(1, Relaxed))
}

/// The slot of the pool holding `len` bytes at address `a`.
fn slot_of_addr(a: usize, len: u64) -> Option<(usize, u64)> {
    (0..SLOTS).find_map(|s| {
        let base = SLOT_BASE[s].load(Relaxed);
        let size = SLOT_SIZE[s].load(Relaxed);
        (base != 0 && a >= base && (a - base) as u64 + len <= size).then(|| (s, (a - base) as u64))
    })
}

fn slot_of_uuid(uuid: u64) -> Option<usize> {
    (uuid != 0).then(|| (0..SLOTS).find(|&s| SLOT_UUID[s].load(Relaxed) == uuid)).flatten()
}

fn slot_of_pop(pop: *const c_void) -> Option<usize> {
    let a = pop as usize;
    (a != 0).then(|| (0..SLOTS).find(|&s| SLOT_BASE[s].load(Relaxed) == a)).flatten()
}

fn update_span() {
    let (mut lo, mut hi) = (usize::MAX, 0);
    for s in 0..SLOTS {
        let b = SLOT_BASE[s].load(Relaxed);
        if b != 0 {
            lo = lo.min(b);
            hi = hi.max(b + SLOT_SIZE[s].load(Relaxed) as usize);
        }
    }
    if hi == 0 {
        lo = 0;
    }
    // Read racily by the hooks: a stale span only makes a hook take the slow path or miss an
    // access of a pool being opened or closed.
    hooks::LO.store(lo, Relaxed);
    hooks::HI.store(hi, Relaxed);
}

// ---------------------------------------------------------------------------------------------
// Writing the trace.

impl Pool {
    fn put(&mut self, r: &Record) {
        if let Some(enc) = self.enc.as_mut() {
            if let Err(e) = enc.write(r) {
                eprintln!("locsim-pmemobj: {}: {e}; recording stopped", self.trace_path);
                self.enc = None;
            }
        }
    }

    fn set_core(&mut self, core: u32) {
        if let Some(enc) = self.enc.as_mut() {
            if let Err(e) = enc.set_core(core) {
                eprintln!("locsim-pmemobj: {}: {e}; recording stopped", self.trace_path);
                self.enc = None;
            }
        }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `size` bytes while the pool is open.
        unsafe { std::slice::from_raw_parts(self.base as *const u8, self.size as usize) }
    }

    /// Write `off..off + len` where the pool differs from the shadow as stores, and update
    /// the shadow (its old bytes pushed on `saved` when given).
    fn diff(&mut self, off: u64, len: u64, mut saved: Option<&mut Vec<(u64, Vec<u8>)>>) {
        let (s, e) = (off as usize, (off + len).min(self.size) as usize);
        let mut i = s;
        while i < e {
            // Skip equal 64-byte stretches at once.
            let n = (e - i).min(64);
            if self.bytes()[i..i + n] == self.shadow[i..i + n] {
                i += n;
                continue;
            }
            while self.bytes()[i] == self.shadow[i] {
                i += 1;
            }
            // A run of differences, joined across gaps of fewer than 16 equal bytes.
            let start = i;
            let (mut end, mut same) = (i, 0);
            while i < e && same < 16 && (i - start) < MAX_ACCESS_BYTES as usize {
                if self.bytes()[i] != self.shadow[i] {
                    end = i + 1;
                    same = 0;
                } else {
                    same += 1;
                }
                i += 1;
            }
            i = end;
            if let Some(sv) = saved.as_deref_mut() {
                sv.push((start as u64, self.shadow[start..end].to_vec()));
            }
            let bytes = self.bytes()[start..end].to_vec();
            self.shadow[start..end].copy_from_slice(&bytes);
            self.put(&Record::Store { addr: start as u64, bytes: &bytes });
        }
    }

    /// The bytes in use: the header and the heap up to its end (the rest of a pool is never
    /// written: the allocator hands out no byte beyond the heap's end).
    fn used(&self) -> usize {
        // SAFETY: the header of the open pool.
        let bump = unsafe { ((self.base + H_BUMP as usize) as *const u64).read_unaligned() };
        (bump.clamp(HEADER, self.size) as usize).max(self.extent)
    }

    /// Write one transaction of `core`: its loads and exact stores in order, then the
    /// differences in the ranges it touched but those of the transactions open on other
    /// threads (all but `me`, the writer's own); an abort leaves the shadow as it was.
    fn emit(
        &mut self,
        core: u32,
        ops: &[Op],
        bytes: &[u8],
        touched: &mut Vec<(u64, u64)>,
        abort: bool,
        me: Option<&Owned>,
    ) {
        // Held until the transaction is written: the other threads add no range meanwhile.
        let others: Vec<Owned> = self.open.iter().filter(|o| me.is_none_or(|m| !Arc::ptr_eq(o, m))).cloned().collect();
        let held: Vec<_> = others.iter().map(lock_owned).collect();
        let theirs: Vec<(u64, u64)> = held.iter().flat_map(|g| g.iter().copied()).collect();
        self.set_core(core);
        self.put(&Record::Begin);
        let mut saved = Vec::new();
        for op in ops {
            match *op {
                Op::Load(addr, len) => self.put(&Record::Load { addr, len }),
                Op::Store(addr, at, len) => {
                    let (s, e) = (addr as usize, addr as usize + len);
                    if abort {
                        saved.push((addr, self.shadow[s..e].to_vec()));
                    }
                    self.shadow[s..e].copy_from_slice(&bytes[at..at + len]);
                    self.put(&Record::Store { addr, bytes: &bytes[at..at + len] });
                }
            }
        }
        for (off, len) in without(merged(touched), theirs) {
            self.diff(off, len, abort.then_some(&mut saved));
        }
        if abort {
            for (off, old) in saved.into_iter().rev() {
                self.shadow[off as usize..off as usize + old.len()].copy_from_slice(&old);
            }
        }
        self.put(if abort { &Record::Abort } else { &Record::Commit });
        self.txs += 1;
        // The heap's furthest end so far.
        self.extent = self.used();
        drop(held);
    }

    /// The thread's transaction (its ranges `me`) has ended.
    fn end_tx(&mut self, me: &Owned) {
        self.open.retain(|o| !Arc::ptr_eq(o, me));
        lock_owned(me).clear();
    }

    /// Record a bug once per (kind, site); the count at close.
    fn bug(&mut self, kind: u8, site: usize, off: u64, len: u64) {
        let tx = self.txs;
        let e = self.bugs.entry((kind, site)).or_insert((0, off, tx));
        e.0 += 1;
        if e.0 == 1 {
            let what = match kind {
                0 => format!(
                    "store of {len} bytes at pool offset {off:#x} in transaction {tx} to memory the transaction neither added (TX_ADD) nor allocated"
                ),
                _ => format!(
                    "store of {len} bytes at pool offset {off:#x} outside a transaction not made persistent before transaction {tx} or the close"
                ),
            };
            eprintln!("locsim-pmemobj: bug: {what}, at {}", site_name(site));
            if STRICT.load(Relaxed) {
                eprintln!("locsim-pmemobj: LOCSIM_PMEMOBJ_STRICT=1: aborting at the first bug");
                std::process::abort();
            }
        }
    }
}

/// The ranges sorted and merged.
fn merged(r: &mut Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(o, l) in r.iter() {
        match out.last_mut() {
            Some((lo, ll)) if o <= *lo + *ll => *ll = (*ll).max(o + l - *lo),
            _ => out.push((o, l)),
        }
    }
    r.clear();
    out
}

/// The ranges (offset, length), sorted and disjoint, without the bytes of `skip`'s ranges
/// (start, end).
fn without(ranges: Vec<(u64, u64)>, mut skip: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    if skip.is_empty() {
        return ranges;
    }
    skip.sort_unstable();
    let mut out = Vec::new();
    let mut k = 0;
    for (off, len) in ranges {
        let (mut pos, end) = (off, off + len);
        // Skip ranges that end before this one starts (the ranges come in ascending order).
        while k < skip.len() && skip[k].1 <= pos {
            k += 1;
        }
        let mut j = k;
        while pos < end && j < skip.len() && skip[j].0 < end {
            let (s, e) = skip[j];
            if s > pos {
                out.push((pos, s - pos));
            }
            pos = pos.max(e);
            j += 1;
        }
        if pos < end {
            out.push((pos, end - pos));
        }
    }
    out
}

/// `file+0xOFFSET` of a code address (the instruction before the return address: the call).
fn site_name(site: usize) -> String {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads its argument's mapping.
    if site != 0 && unsafe { libc::dladdr((site - 1) as *const c_void, &mut info) } != 0 && !info.dli_fname.is_null() {
        // SAFETY: a NUL-terminated name from the loader.
        let f = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
        format!("{f}+{:#x}", site - 1 - info.dli_fbase as usize)
    } else {
        format!("{site:#x}")
    }
}

/// Write the thread's pending exact store into its transaction (or the unpersisted list).
fn settle(t: &mut Th) {
    let Some((slot, off, len, site)) = t.pending.take() else { return };
    let base = SLOT_BASE[slot].load(Relaxed);
    if base == 0 {
        return;
    }
    if !t.frames.is_empty() && t.slot == slot {
        let at = t.bytes.len();
        // SAFETY: the store lay in the open pool.
        t.bytes.extend_from_slice(unsafe { std::slice::from_raw_parts((base + off as usize) as *const u8, len) });
        t.ops.push(Op::Store(off, at, len));
    } else {
        t.unpersisted.push((slot, off, len as u64, site));
    }
}

/// The exact level's hook (src/hooks.rs): an access of `len` bytes at `addr` in some pool.
pub(crate) extern "C" fn locsim_access(addr: usize, len: usize, store: c_int, site: *const c_void) {
    let Some((slot, off)) = slot_of_addr(addr, len as u64) else { return };
    let bug = TH.with(|t| {
        let Ok(mut t) = t.try_borrow_mut() else { return None };
        settle(&mut t);
        let in_tx = !t.frames.is_empty() && t.slot == slot;
        if store == 0 {
            if in_tx {
                t.ops.push(Op::Load(off, len as u64));
            } else {
                t.loads.push((slot, off, len as u64));
            }
            return None;
        }
        t.pending = Some((slot, off, len, site as usize));
        if in_tx && t.frames.last().is_some_and(|f| f.stage == STAGE_WORK) {
            // Covered by the ranges added or allocated?
            let (mut pos, end) = (off, off + len as u64);
            while pos < end {
                match t.added.range(..=pos).next_back() {
                    Some((_, &e)) if e > pos => pos = e,
                    _ => return Some((slot, off, len as u64, site as usize)),
                }
            }
        }
        None
    });
    if let Some((slot, off, len, site)) = bug {
        if let Some(p) = pools().get_mut(slot).and_then(Option::as_mut) {
            p.bug(0, site, off, len);
        }
    }
}

/// Called by the header's constructor in every translation unit built at the exact level.
#[no_mangle]
pub extern "C" fn locsim_pmemobj_exact_level() {
    EXACT.store(true, Relaxed);
}

/// Write the thread's loads outside transactions into their pools' traces.
fn flush_loads(t: &mut Th, ps: &mut [Option<Pool>]) {
    if t.loads.is_empty() {
        return;
    }
    let core = core_of(t);
    for &(slot, off, len) in &t.loads {
        if let Some(p) = ps.get_mut(slot).and_then(Option::as_mut) {
            p.set_core(core);
            p.put(&Record::Load { addr: off, len });
        }
    }
    t.loads.clear();
}

/// Report the thread's unpersisted exact stores of `slot` (all when None), then write their
/// bytes as a transaction of their own so that the trace keeps the pool's bytes.
fn report_unpersisted(t: &mut Th, ps: &mut [Option<Pool>], slot: Option<usize>) {
    settle(t);
    if t.unpersisted.is_empty() {
        return;
    }
    let core = core_of(t);
    let list = std::mem::take(&mut t.unpersisted);
    let (mine, rest): (Vec<_>, Vec<_>) = list.into_iter().partition(|u| slot.is_none_or(|s| s == u.0));
    t.unpersisted = rest;
    let mut by_slot: BTreeMap<usize, Vec<(u64, u64)>> = BTreeMap::new();
    for (s, off, len, site) in mine {
        if let Some(p) = ps.get_mut(s).and_then(Option::as_mut) {
            // Only if the bytes still differ from what the trace has (a later persist of an
            // enclosing range, or a transaction, may have taken them).
            let (a, b) = (off as usize, (off + len) as usize);
            if p.bytes()[a..b] != p.shadow[a..b] {
                p.bug(1, site, off, len);
                by_slot.entry(s).or_default().push((off, len));
            }
        }
    }
    for (s, mut r) in by_slot {
        if let Some(p) = ps.get_mut(s).and_then(Option::as_mut) {
            p.emit(core, &[], &[], &mut r, false, None);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Pools.

fn cstr(p: *const c_char) -> Option<String> {
    // SAFETY: the caller passes a NUL-terminated string or NULL.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The header word at `at` of the pool mapped at `b`.
fn word_at(b: *const u8, at: u64) -> u64 {
    // SAFETY: the header lies in the mapping.
    unsafe { (b.add(at as usize) as *const u64).read_unaligned() }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// An error of a pool call: its errno and `pmemobj_errormsg`'s text.
type PoolError = (c_int, String);

/// The last system call's error, as `WHAT "PATH": why`.
fn os_error(what: &str, path: &str) -> PoolError {
    let e = std::io::Error::last_os_error();
    (e.raw_os_error().unwrap_or(libc::EIO), format!("{what} \"{path}\": {e}"))
}

/// Map the pool file and start its trace.
fn open_pool(path: &str, layout: Option<&str>, create: Option<(u64, u32)>) -> *mut c_void {
    STRICT.store(std::env::var("LOCSIM_PMEMOBJ_STRICT").is_ok_and(|v| v == "1"), Relaxed);
    match try_open_pool(path, layout, create) {
        Ok(base) => base,
        Err((e, msg)) => {
            fail(e, msg);
            std::ptr::null_mut()
        }
    }
}

fn try_open_pool(path: &str, layout: Option<&str>, create: Option<(u64, u32)>) -> Result<*mut c_void, PoolError> {
    if layout.is_some_and(|l| l.len() >= LAYOUT_MAX) {
        return Err((libc::ENAMETOOLONG, "Layout too long".to_string()));
    }
    let fd = open_file(path, create)?;
    let (b, size) = map_file(fd, path)?;
    let opened = (|| {
        let uuid = header(b, size, path, layout, create.is_some())?;
        if slot_of_uuid(uuid).is_some() {
            return Err((libc::EINVAL, format!("\"{path}\": the pool is already open in this process")));
        }
        let pool = start_trace(b, size, create.is_some(), trace_writer(path)?)?;
        install(pool, uuid)
    })();
    if opened.is_err() {
        // SAFETY: the mapping made by map_file, not installed.
        unsafe { libc::munmap(b as *mut c_void, size as usize) };
    }
    opened.map(|()| b as *mut c_void)
}

/// The pool file opened read-write; created exclusively and sized when `create` gives a size.
fn open_file(path: &str, create: Option<(u64, u32)>) -> Result<c_int, PoolError> {
    let cpath = CString::new(path).unwrap_or_default();
    let Some((size, mode)) = create.filter(|&(size, _)| size != 0) else {
        // SAFETY: a NUL-terminated path.
        let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR) };
        return if fd < 0 { Err(os_error("open", path)) } else { Ok(fd) };
    };
    if size < MIN_POOL {
        return Err((libc::EINVAL, format!("size {size} smaller than {MIN_POOL}")));
    }
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL, mode) };
    if fd < 0 {
        let (code, msg) = os_error("open", path);
        return Err(if code == libc::EEXIST { (code, format!("file {path} already exists")) } else { (code, msg) });
    }
    // SAFETY: an open descriptor.
    if unsafe { libc::ftruncate(fd, size as libc::off_t) } != 0 {
        let e = os_error("ftruncate", path);
        // SAFETY: an open descriptor.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    Ok(fd)
}

/// The whole file under `fd` mapped shared, read-write, and the descriptor closed: the
/// mapping's base and size (at least `PMEMOBJ_MIN_POOL`).
fn map_file(fd: c_int, path: &str) -> Result<(*mut u8, u64), PoolError> {
    // SAFETY: an open descriptor and a stat buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    unsafe { libc::fstat(fd, &mut st) };
    let size = st.st_size as u64;
    let mapped = if size < MIN_POOL {
        Err((libc::EINVAL, format!("size {size} smaller than {MIN_POOL}")))
    } else {
        // SAFETY: mapping the whole file shared, read-write.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), size as usize, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if base == libc::MAP_FAILED {
            Err(os_error("mmap", path))
        } else {
            Ok((base as *mut u8, size))
        }
    };
    // SAFETY: an open descriptor (the mapping keeps the file).
    unsafe { libc::close(fd) };
    mapped
}

/// Writes a new pool's header (`create`) or checks an opened one's (magic, version, size,
/// layout): the pool id.
fn header(b: *mut u8, size: u64, path: &str, layout: Option<&str>, create: bool) -> Result<u64, PoolError> {
    // SAFETY: the mapping is `size` >= 8 MiB bytes.
    let hdr = unsafe { std::slice::from_raw_parts_mut(b, HEADER as usize) };
    if create {
        if hdr[..8] == MAGIC[..] || hdr.iter().any(|&x| x != 0) {
            return Err((libc::EINVAL, format!("file {path} is not an empty file")));
        }
        let abs = std::fs::canonicalize(path).map_or_else(|_| path.to_string(), |p| p.display().to_string());
        let uuid = fnv(&abs) | 1;
        let mut put = |at: u64, b: &[u8]| hdr[at as usize..at as usize + b.len()].copy_from_slice(b);
        put(H_MAGIC, MAGIC);
        put(H_VERSION, &VERSION.to_le_bytes());
        put(H_SIZE, &size.to_le_bytes());
        put(H_UUID, &uuid.to_le_bytes());
        put(H_BUMP, &HEADER.to_le_bytes());
        let l = layout.unwrap_or("");
        hdr[LAYOUT_AT as usize..LAYOUT_AT as usize + l.len()].copy_from_slice(l.as_bytes());
        return Ok(uuid);
    }
    let word = |at: u64| u64::from_le_bytes(hdr[at as usize..at as usize + 8].try_into().unwrap());
    if hdr[..8] != MAGIC[..] || word(H_VERSION) != VERSION || word(H_SIZE) != size {
        return Err((libc::EINVAL, format!("\"{path}\" is not a locsim-pmemobj pool (or its size changed)")));
    }
    let stored = hdr[LAYOUT_AT as usize..LAYOUT_AT as usize + LAYOUT_MAX].split(|&c| c == 0).next().unwrap_or(&[]);
    let stored = String::from_utf8_lossy(stored).into_owned();
    match layout {
        Some(l) if l != stored => {
            Err((libc::EINVAL, format!("wrong layout (\"{l}\"), pool created with layout \"{stored}\"")))
        }
        _ => Ok(word(H_UUID)),
    }
}

/// The trace's file, at `$LOCSIM_TRACE` or the pool's path plus `.trace`, and its encoder; an
/// unwritable path gets one line on stderr naming it.
fn trace_writer(path: &str) -> Result<(Encoder<Shared>, Shared, String), PoolError> {
    let trace_path = std::env::var("LOCSIM_TRACE").unwrap_or_else(|_| format!("{path}.trace"));
    let file = File::create(&trace_path)
        .map(|f| Shared(std::sync::Arc::new(Mutex::new(BufWriter::with_capacity(1 << 20, f)))));
    match file.and_then(|f| Ok((Encoder::new(f.clone(), Encoding::Binary)?, f))) {
        Ok((enc, file)) => Ok((enc, file, trace_path)),
        Err(e) => {
            eprintln!("locsim-pmemobj: LOCSIM_TRACE {trace_path}: {e}");
            Err((e.raw_os_error().unwrap_or(libc::EIO), format!("trace {trace_path}: {e}")))
        }
    }
}

/// The pool mapped at `b` with its trace begun and flushed: the region, then the `init`
/// records of an opened pool's non-zero pages, or a created pool's header as its first
/// transaction.
fn start_trace(
    b: *mut u8,
    size: u64,
    create: bool,
    (enc, file, trace_path): (Encoder<Shared>, Shared, String),
) -> Result<Pool, PoolError> {
    // The shadow starts as zero pages the system hands out lazily; the pool's non-zero pages
    // are copied in. A new pool is zero but for its header; an opened one is read up to its
    // heap's end.
    let extent = if create { HEADER as usize } else { (word_at(b, H_BUMP).clamp(HEADER, size)) as usize };
    // SAFETY: the mapping is `size` >= `extent` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(b, extent) };
    let mut shadow = vec![0u8; size as usize];
    for (i, c) in bytes.chunks(4096).enumerate() {
        if c.iter().any(|&x| x != 0) {
            shadow[i * 4096..i * 4096 + c.len()].copy_from_slice(c);
        }
    }
    let mut pool = Pool {
        base: b as usize,
        size,
        trace_path,
        enc: Some(enc),
        file,
        shadow,
        extent,
        user_data: 0,
        locks: HashMap::new(),
        next_class: 128,
        txs: 0,
        bugs: BTreeMap::new(),
        open: Vec::new(),
    };
    pool.put(&Record::Region { base: 0, size });
    if create {
        pool.shadow[..HEADER as usize].fill(0);
        let core = th(core_of);
        pool.emit(core, &[], &[], &mut vec![(0, HEADER)], false, None);
    } else {
        let init: Vec<(usize, Vec<u8>)> = pool
            .shadow
            .chunks(4096)
            .enumerate()
            .filter(|(_, c)| c.iter().any(|&x| x != 0))
            .map(|(i, c)| (i, c.to_vec()))
            .collect();
        for (i, c) in init {
            pool.put(&Record::Init { addr: (i * 4096) as u64, bytes: &c });
        }
    }
    if let Err(e) = std::io::Write::flush(&mut pool.file) {
        eprintln!("locsim-pmemobj: LOCSIM_TRACE {}: {e}", pool.trace_path);
        return Err((e.raw_os_error().unwrap_or(libc::EIO), format!("trace {}: {e}", pool.trace_path)));
    }
    Ok(pool)
}

/// Gives the pool a free slot, where the calls and the exact level's hooks find it.
fn install(pool: Pool, uuid: u64) -> Result<(), PoolError> {
    let (base, size) = (pool.base, pool.size);
    let mut ps = pools();
    let Some(slot) = (0..SLOTS).find(|&s| SLOT_BASE[s].load(Relaxed) == 0) else {
        return Err((libc::EMFILE, format!("more than {SLOTS} pools open")));
    };
    if ps.len() <= slot {
        ps.resize_with(slot + 1, || None);
    }
    ps[slot] = Some(pool);
    SLOT_SIZE[slot].store(size, Relaxed);
    SLOT_UUID[slot].store(uuid, Relaxed);
    SLOT_BASE[slot].store(base, Relaxed);
    update_span();
    Ok(())
}

#[no_mangle]
pub extern "C" fn pmemobj_create(
    path: *const c_char,
    layout: *const c_char,
    poolsize: usize,
    mode: libc::mode_t,
) -> *mut c_void {
    let Some(p) = cstr(path) else {
        fail(libc::EINVAL, "NULL path".into());
        return std::ptr::null_mut();
    };
    open_pool(&p, cstr(layout).as_deref(), Some((poolsize as u64, mode)))
}

#[no_mangle]
pub extern "C" fn pmemobj_open(path: *const c_char, layout: *const c_char) -> *mut c_void {
    let Some(p) = cstr(path) else {
        fail(libc::EINVAL, "NULL path".into());
        return std::ptr::null_mut();
    };
    open_pool(&p, cstr(layout).as_deref(), None)
}

/// Checked by opening it for reading: 1 when it is a pool of this layout, -1 otherwise.
#[no_mangle]
pub extern "C" fn pmemobj_check(path: *const c_char, layout: *const c_char) -> c_int {
    let Some(p) = cstr(path) else { return -1 };
    let Ok(b) = std::fs::read(&p) else {
        fail(libc::ENOENT, format!("open \"{p}\": No such file or directory"));
        return -1;
    };
    if b.len() < HEADER as usize || b[..8] != MAGIC[..] {
        return 0;
    }
    let stored = b[LAYOUT_AT as usize..].split(|&c| c == 0).next().unwrap_or(&[]);
    match cstr(layout) {
        Some(l) if l.as_bytes() != stored => {
            fail(libc::EINVAL, format!("wrong layout (\"{l}\")"));
            -1
        }
        _ => 1,
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_close(pop: *mut c_void) {
    let Some(slot) = slot_of_pop(pop) else { return };
    let mut t = TH.with(|t| std::mem::take(&mut *t.borrow_mut()));
    let mut ps = pools();
    flush_loads(&mut t, &mut ps);
    report_unpersisted(&mut t, &mut ps, Some(slot));
    let core = core_of(&mut t);
    TH.with(|x| *x.borrow_mut() = t);
    let Some(mut p) = ps[slot].take() else { return };
    SLOT_BASE[slot].store(0, Relaxed);
    SLOT_UUID[slot].store(0, Relaxed);
    SLOT_SIZE[slot].store(0, Relaxed);
    update_span();
    drop(ps);
    // Whatever the transactions and persists did not name: one last transaction (all of
    // it: a transaction still open on another thread is the program's error).
    p.open.clear();
    let used = p.used();
    if p.bytes()[..used] != p.shadow[..used] {
        p.emit(core, &[], &[], &mut vec![(0, used as u64)], false, None);
    }
    let n: u64 = p.bugs.values().map(|b| b.0).sum();
    if n > 0 {
        eprintln!(
            "locsim-pmemobj: {n} bug{} at {} site{} in {}",
            if n == 1 { "" } else { "s" },
            p.bugs.len(),
            if p.bugs.len() == 1 { "" } else { "s" },
            p.trace_path
        );
    }
    p.put(&Record::End);
    if let Some(enc) = p.enc.take() {
        if let Err(e) = enc.finish().and_then(|mut w| std::io::Write::flush(&mut w)) {
            eprintln!("locsim-pmemobj: {}: {e}", p.trace_path);
        }
    }
    // SAFETY: the pool's mapping, no longer reachable through the slot table.
    unsafe {
        libc::msync(p.base as *mut c_void, p.size as usize, libc::MS_SYNC);
        libc::munmap(p.base as *mut c_void, p.size as usize);
    }
    for (_, l) in p.locks.drain() {
        // SAFETY: no thread holds a lock of a closed pool.
        unsafe {
            libc::pthread_mutex_destroy(l.mutex.get());
            libc::pthread_rwlock_destroy(l.rwlock.get());
            libc::pthread_cond_destroy(l.cond.get());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Objects.

#[no_mangle]
pub extern "C" fn pmemobj_pool_by_oid(oid: Oid) -> *mut c_void {
    slot_of_uuid(oid.pool_uuid_lo).map_or(std::ptr::null_mut(), |s| SLOT_BASE[s].load(Relaxed) as *mut c_void)
}

#[no_mangle]
pub extern "C" fn pmemobj_pool_by_ptr(addr: *const c_void) -> *mut c_void {
    slot_of_addr(addr as usize, 0).map_or(std::ptr::null_mut(), |(s, _)| SLOT_BASE[s].load(Relaxed) as *mut c_void)
}

#[no_mangle]
pub extern "C" fn pmemobj_oid(addr: *const c_void) -> Oid {
    match slot_of_addr(addr as usize, 0) {
        Some((s, off)) => PMEMoid { pool_uuid_lo: SLOT_UUID[s].load(Relaxed), off },
        None => NULL,
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_direct(oid: Oid) -> *mut c_void {
    if oid.off == 0 {
        return std::ptr::null_mut();
    }
    let Some(slot) = slot_of_uuid(oid.pool_uuid_lo) else { return std::ptr::null_mut() };
    let base = SLOT_BASE[slot].load(Relaxed);
    let size = SLOT_SIZE[slot].load(Relaxed);
    if oid.off >= size {
        return std::ptr::null_mut();
    }
    let exact = EXACT.load(Relaxed);
    TH.with(|t| {
        let Ok(mut t) = t.try_borrow_mut() else { return };
        let in_tx = !t.frames.is_empty() && t.slot == slot;
        if in_tx || !exact {
            let n = usable(base as *const u8, size, oid.off);
            if in_tx {
                t.touched.push((oid.off, n.max(1)));
            }
            if !exact {
                let len = n.clamp(1, PLAIN_LOAD).min(size - oid.off);
                if in_tx {
                    t.ops.push(Op::Load(oid.off, len));
                } else {
                    t.loads.push((slot, oid.off, len));
                }
            }
        }
    });
    (base + oid.off as usize) as *mut c_void
}

#[no_mangle]
pub extern "C" fn pmemobj_alloc_usable_size(oid: Oid) -> usize {
    slot_of_uuid(oid.pool_uuid_lo)
        .map_or(0, |s| usable(SLOT_BASE[s].load(Relaxed) as *const u8, SLOT_SIZE[s].load(Relaxed), oid.off) as usize)
}

#[no_mangle]
pub extern "C" fn pmemobj_type_num(oid: Oid) -> u64 {
    slot_of_uuid(oid.pool_uuid_lo)
        .and_then(|s| type_num(SLOT_BASE[s].load(Relaxed) as *const u8, SLOT_SIZE[s].load(Relaxed), oid.off))
        .unwrap_or(u64::MAX)
}

#[no_mangle]
pub extern "C" fn pmemobj_first(pop: *mut c_void) -> Oid {
    let Some(s) = slot_of_pop(pop) else { return NULL };
    let (b, size) = (SLOT_BASE[s].load(Relaxed) as *const u8, SLOT_SIZE[s].load(Relaxed));
    next_object(b, size, HEADER).map_or(NULL, |off| PMEMoid { pool_uuid_lo: SLOT_UUID[s].load(Relaxed), off })
}

#[no_mangle]
pub extern "C" fn pmemobj_next(oid: Oid) -> Oid {
    let Some(s) = slot_of_uuid(oid.pool_uuid_lo) else { return NULL };
    let (b, size) = (SLOT_BASE[s].load(Relaxed) as *const u8, SLOT_SIZE[s].load(Relaxed));
    let Some(w) = size_word(b, size, oid.off) else { return NULL };
    let next = oid.off - OBJ_HDR + bs_of(w);
    next_object(b, size, next).map_or(NULL, |off| PMEMoid { pool_uuid_lo: oid.pool_uuid_lo, off })
}

/// Run `f` on the pool of `slot` with a writer: inside the thread's transaction on that pool
/// its writes are logged for rollback (but the allocator's metadata: src/heap.rs) and touched
/// by the transaction, its allocations and frees are the transaction's; otherwise they are one
/// atomic operation, written as a transaction of its own.
fn with_writer<R>(slot: usize, f: impl FnOnce(&mut Writer) -> R) -> R {
    let mut t = TH.with(|t| std::mem::take(&mut *t.borrow_mut()));
    settle(&mut t);
    let in_tx = !t.frames.is_empty() && t.slot == slot;
    let mut ps = pools();
    let p = ps[slot].as_mut().expect("an open pool");
    let r = if in_tx {
        let known = t.allocs.len();
        let tx = TxLog { undo: &mut t.undo, allocs: &mut t.allocs, frees: &mut t.frees };
        let mut w = Writer { base: p.base as *mut u8, size: p.size, tx: Some(tx), touched: &mut t.touched };
        let r = f(&mut w);
        // The new objects are the transaction's before another thread's can end.
        let mut owned = lock_owned(&t.owned);
        for &off in &t.allocs[known..] {
            owned.push((off - OBJ_HDR, off + usable(p.base as *const u8, p.size, off)));
        }
        r
    } else {
        let mut touched = Vec::new();
        let mut w = Writer { base: p.base as *mut u8, size: p.size, tx: None, touched: &mut touched };
        let r = f(&mut w);
        // Outside a transaction: written by the caller when the operation ends.
        t.reserved.extend(touched.iter().map(|&(o, l)| (slot, o, l)));
        r
    };
    drop(ps);
    TH.with(|x| *x.borrow_mut() = t);
    r
}

/// End an atomic operation on `slot`: its touched ranges (collected in `reserved`) become one
/// transaction.
fn end_atomic(slot: usize) {
    let mut t = TH.with(|t| std::mem::take(&mut *t.borrow_mut()));
    settle(&mut t);
    if t.frames.is_empty() || t.slot != slot {
        let mut ps = pools();
        flush_loads(&mut t, &mut ps);
        // The constructor's stores had to be persisted before the operation's transaction.
        report_unpersisted(&mut t, &mut ps, Some(slot));
        let core = core_of(&mut t);
        let mut r: Vec<(u64, u64)> = t.reserved.iter().filter(|x| x.0 == slot).map(|x| (x.1, x.2)).collect();
        t.reserved.retain(|x| x.0 != slot);
        if let Some(p) = ps[slot].as_mut() {
            p.emit(core, &[], &[], &mut r, false, None);
        }
    } else {
        // Inside the transaction: the operation is part of it.
        let r: Vec<(u64, u64)> = t.reserved.iter().filter(|x| x.0 == slot).map(|x| (x.1, x.2)).collect();
        t.touched.extend(r);
        t.reserved.retain(|x| x.0 != slot);
    }
    TH.with(|x| *x.borrow_mut() = t);
}

type Constr = Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_void) -> c_int>;

/// An atomic allocation: the block, zeroed (`POBJ_XALLOC_ZERO`) or constructed, then `*oidp`
/// set, as one transaction. `pmemobj_alloc`, `_zalloc`, `_realloc` and `_strdup` are this with
/// their flags.
#[no_mangle]
pub extern "C" fn pmemobj_xalloc(
    pop: *mut c_void,
    oidp: *mut Oid,
    size: usize,
    type_num: u64,
    flags: u64,
    constr: Constr,
    arg: *mut c_void,
) -> c_int {
    let (zero, class) = (flags & 1 != 0, flags & CLASS_MASK != 0);
    let Some(slot) = slot_of_pop(pop) else {
        fail(libc::EINVAL, "invalid pool".into());
        return -1;
    };
    if size == 0 {
        fail(libc::EINVAL, "allocation with size 0".into());
        return -1;
    }
    if size as u64 > 0x3_FFDF_FFC0 {
        fail(libc::ENOMEM, "requested size too large".to_string());
        return -1;
    }
    let uuid = SLOT_UUID[slot].load(Relaxed);
    let Some(off) = with_writer(slot, |w| {
        let off = w.alloc(size as u64, type_num, 0, class)?;
        if zero {
            w.zero(off, usable(w.base, w.size, off));
        }
        Some(off)
    }) else {
        fail(libc::ENOMEM, "out of memory".into());
        end_atomic(slot);
        return -1;
    };
    let base = SLOT_BASE[slot].load(Relaxed);
    if let Some(c) = constr {
        th(|t| t.atomic += 1);
        // SAFETY: the program's constructor on the new object.
        let r = unsafe { c(pop, (base + off as usize) as *mut c_void, arg) };
        th(|t| {
            settle(t);
            t.atomic -= 1
        });
        if r != 0 {
            with_writer(slot, |w| w.free(off));
            end_atomic(slot);
            fail(libc::ECANCELED, "constructor failed".into());
            return -1;
        }
    }
    if !oidp.is_null() {
        let oid = PMEMoid { pool_uuid_lo: uuid, off };
        set_oid(slot, oidp, oid);
    }
    end_atomic(slot);
    0
}

/// Write `*oidp = oid` as part of the current atomic operation (when `oidp` is in the pool).
fn set_oid(slot: usize, oidp: *mut Oid, oid: Oid) {
    match slot_of_addr(oidp as usize, 16) {
        Some((s, at)) if s == slot => with_writer(slot, |w| {
            w.write(at, oid.pool_uuid_lo);
            w.write(at + 8, oid.off);
        }),
        // SAFETY: the caller's PMEMoid.
        _ => unsafe { oidp.write_unaligned(oid) },
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_alloc(
    pop: *mut c_void,
    oidp: *mut Oid,
    size: usize,
    type_num: u64,
    constr: Constr,
    arg: *mut c_void,
) -> c_int {
    pmemobj_xalloc(pop, oidp, size, type_num, 0, constr, arg)
}

#[no_mangle]
pub extern "C" fn pmemobj_zalloc(pop: *mut c_void, oidp: *mut Oid, size: usize, type_num: u64) -> c_int {
    pmemobj_xalloc(pop, oidp, size, type_num, 1, None, std::ptr::null_mut())
}

fn atomic_realloc(pop: *mut c_void, oidp: *mut Oid, size: usize, type_num: u64, zero: bool) -> c_int {
    let Some(slot) = slot_of_pop(pop) else { return -1 };
    // SAFETY: the caller's PMEMoid.
    let old = unsafe { oidp.read_unaligned() };
    if old.off == 0 {
        return pmemobj_xalloc(pop, oidp, size, type_num, zero as u64, None, std::ptr::null_mut());
    }
    if size == 0 {
        pmemobj_free(oidp);
        return 0;
    }
    let base = SLOT_BASE[slot].load(Relaxed);
    let r = with_writer(slot, |w| {
        let old_n = usable(w.base, w.size, old.off);
        let off = w.alloc(size as u64, type_num, 0, false)?;
        let n = usable(w.base, w.size, off);
        // SAFETY: both objects lie in the pool.
        let keep = unsafe { std::slice::from_raw_parts((base + old.off as usize) as *const u8, old_n.min(n) as usize) }
            .to_vec();
        w.bytes(off, &keep);
        if zero && n > old_n {
            w.zero(off + old_n, n - old_n);
        }
        w.free(old.off);
        Some(off)
    });
    match r {
        Some(off) => {
            set_oid(slot, oidp, PMEMoid { pool_uuid_lo: old.pool_uuid_lo, off });
            end_atomic(slot);
            0
        }
        None => {
            end_atomic(slot);
            fail(libc::ENOMEM, "out of memory".into());
            -1
        }
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_realloc(pop: *mut c_void, oidp: *mut Oid, size: usize, type_num: u64) -> c_int {
    atomic_realloc(pop, oidp, size, type_num, false)
}

#[no_mangle]
pub extern "C" fn pmemobj_zrealloc(pop: *mut c_void, oidp: *mut Oid, size: usize, type_num: u64) -> c_int {
    atomic_realloc(pop, oidp, size, type_num, true)
}

unsafe extern "C" fn strdup_constr(_pop: *mut c_void, ptr: *mut c_void, arg: *mut c_void) -> c_int {
    let s = CStr::from_ptr(arg as *const c_char).to_bytes_with_nul();
    std::ptr::copy_nonoverlapping(s.as_ptr(), ptr as *mut u8, s.len());
    0
}

#[no_mangle]
pub extern "C" fn pmemobj_strdup(pop: *mut c_void, oidp: *mut Oid, s: *const c_char, type_num: u64) -> c_int {
    if s.is_null() {
        fail(libc::EINVAL, "NULL string".into());
        return -1;
    }
    // SAFETY: a NUL-terminated string.
    let n = unsafe { CStr::from_ptr(s) }.to_bytes_with_nul().len();
    pmemobj_xalloc(pop, oidp, n, type_num, 0, Some(strdup_constr), s as *mut c_void)
}

#[no_mangle]
pub extern "C" fn pmemobj_free(oidp: *mut Oid) {
    if oidp.is_null() {
        return;
    }
    // SAFETY: the caller's PMEMoid.
    let oid = unsafe { oidp.read_unaligned() };
    if oid.off == 0 {
        return;
    }
    let Some(slot) = slot_of_uuid(oid.pool_uuid_lo) else { return };
    with_writer(slot, |w| w.free(oid.off));
    set_oid(slot, oidp, NULL);
    end_atomic(slot);
}

#[no_mangle]
pub extern "C" fn pmemobj_root_size(pop: *mut c_void) -> usize {
    let Some(s) = slot_of_pop(pop) else { return 0 };
    // SAFETY: the header of an open pool.
    unsafe { ((SLOT_BASE[s].load(Relaxed) + H_ROOT_SIZE as usize) as *const u64).read_unaligned() as usize }
}

#[no_mangle]
pub extern "C" fn pmemobj_root_construct(pop: *mut c_void, size: usize, constr: Constr, arg: *mut c_void) -> Oid {
    let Some(slot) = slot_of_pop(pop) else {
        fail(libc::EINVAL, "invalid pool".into());
        return NULL;
    };
    let uuid = SLOT_UUID[slot].load(Relaxed);
    let base = SLOT_BASE[slot].load(Relaxed);
    // SAFETY: the header of an open pool.
    let (root, root_size) = unsafe {
        (
            ((base + H_ROOT as usize) as *const u64).read_unaligned(),
            ((base + H_ROOT_SIZE as usize) as *const u64).read_unaligned(),
        )
    };
    if size == 0 && root == 0 {
        fail(libc::EINVAL, "requested size cannot equals zero".into());
        return NULL;
    }
    if root != 0 && size as u64 <= root_size {
        return PMEMoid { pool_uuid_lo: uuid, off: root };
    }
    // A new root (or a larger one: the old bytes kept, the rest zeroed).
    let off = with_writer(slot, |w| {
        let off = w.alloc(size as u64, 0, ROOT, false)?;
        let n = usable(w.base, w.size, off);
        w.zero(off, n);
        if root != 0 {
            // SAFETY: the old root lies in the pool.
            let keep =
                unsafe { std::slice::from_raw_parts((base + root as usize) as *const u8, root_size as usize) }.to_vec();
            w.bytes(off, &keep);
            w.free(root);
        }
        w.write(H_ROOT, off);
        w.write(H_ROOT_SIZE, size as u64);
        Some(off)
    });
    let Some(off) = off else {
        end_atomic(slot);
        fail(libc::ENOMEM, "out of memory".into());
        return NULL;
    };
    if let Some(c) = constr {
        th(|t| t.atomic += 1);
        // SAFETY: the program's constructor on the root.
        unsafe { c(pop, (base + off as usize) as *mut c_void, arg) };
        th(|t| {
            settle(t);
            t.atomic -= 1
        });
    }
    end_atomic(slot);
    PMEMoid { pool_uuid_lo: uuid, off }
}

#[no_mangle]
pub extern "C" fn pmemobj_root(pop: *mut c_void, size: usize) -> Oid {
    pmemobj_root_construct(pop, size, None, std::ptr::null_mut())
}

#[no_mangle]
pub extern "C" fn pmemobj_set_user_data(pop: *mut c_void, data: *mut c_void) {
    if let Some(s) = slot_of_pop(pop) {
        if let Some(p) = pools()[s].as_mut() {
            p.user_data = data as usize;
        }
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_get_user_data(pop: *mut c_void) -> *mut c_void {
    slot_of_pop(pop)
        .and_then(|s| pools()[s].as_ref().map(|p| p.user_data as *mut c_void))
        .unwrap_or(std::ptr::null_mut())
}

// ---------------------------------------------------------------------------------------------
// Persistence.

/// `len` bytes at `addr` made persistent: inside the thread's transaction on the pool they are
/// the transaction's; outside, a transaction of their own.
fn persist(addr: *const c_void, len: usize) {
    let Some((slot, off)) = slot_of_addr(addr as usize, len as u64) else { return };
    let mut t = TH.with(|t| std::mem::take(&mut *t.borrow_mut()));
    settle(&mut t);
    if !t.frames.is_empty() && t.slot == slot {
        t.touched.push((off, len as u64));
    } else if t.atomic > 0 {
        // In an atomic operation's constructor: part of the operation's transaction.
        let end = off + len as u64;
        t.unpersisted.retain(|u| !(u.0 == slot && u.1 >= off && u.1 + u.2 <= end));
        t.reserved.push((slot, off, len as u64));
    } else {
        let end = off + len as u64;
        t.unpersisted.retain(|u| !(u.0 == slot && u.1 >= off && u.1 + u.2 <= end));
        let mut ps = pools();
        flush_loads(&mut t, &mut ps);
        let core = core_of(&mut t);
        let mut r: Vec<(u64, u64)> = vec![(off, len as u64)];
        r.extend(t.reserved.iter().filter(|x| x.0 == slot).map(|x| (x.1, x.2)));
        t.reserved.retain(|x| x.0 != slot);
        if let Some(p) = ps[slot].as_mut() {
            p.emit(core, &[], &[], &mut r, false, None);
        }
    }
    TH.with(|x| *x.borrow_mut() = t);
}

#[no_mangle]
pub extern "C" fn pmemobj_persist(_pop: *mut c_void, addr: *const c_void, len: usize) {
    persist(addr, len);
}

#[no_mangle]
pub extern "C" fn pmemobj_xpersist(_pop: *mut c_void, addr: *const c_void, len: usize, _flags: u32) -> c_int {
    persist(addr, len);
    0
}

/// A flush is taken as a persist (locsim's transactions have no separate drain).
#[no_mangle]
pub extern "C" fn pmemobj_flush(_pop: *mut c_void, addr: *const c_void, len: usize) {
    persist(addr, len);
}

#[no_mangle]
pub extern "C" fn pmemobj_xflush(_pop: *mut c_void, addr: *const c_void, len: usize, _flags: u32) -> c_int {
    persist(addr, len);
    0
}

#[no_mangle]
pub extern "C" fn pmemobj_drain(_pop: *mut c_void) {}

#[no_mangle]
pub extern "C" fn pmemobj_memcpy_persist(
    _pop: *mut c_void,
    dest: *mut c_void,
    src: *const c_void,
    len: usize,
) -> *mut c_void {
    th(settle);
    // SAFETY: the caller's buffers.
    unsafe { std::ptr::copy(src as *const u8, dest as *mut u8, len) };
    persist(dest, len);
    dest
}

#[no_mangle]
pub extern "C" fn pmemobj_memset_persist(_pop: *mut c_void, dest: *mut c_void, c: c_int, len: usize) -> *mut c_void {
    th(settle);
    // SAFETY: the caller's buffer.
    unsafe { std::ptr::write_bytes(dest as *mut u8, c as u8, len) };
    persist(dest, len);
    dest
}

#[no_mangle]
pub extern "C" fn pmemobj_memcpy(
    _pop: *mut c_void,
    dest: *mut c_void,
    src: *const c_void,
    len: usize,
    flags: u32,
) -> *mut c_void {
    th(settle);
    // SAFETY: the caller's buffers.
    unsafe { std::ptr::copy(src as *const u8, dest as *mut u8, len) };
    if flags & (1 << 5) == 0 {
        persist(dest, len);
    }
    dest
}

#[no_mangle]
pub extern "C" fn pmemobj_memmove(
    pop: *mut c_void,
    dest: *mut c_void,
    src: *const c_void,
    len: usize,
    flags: u32,
) -> *mut c_void {
    pmemobj_memcpy(pop, dest, src, len, flags)
}

#[no_mangle]
pub extern "C" fn pmemobj_memset(
    _pop: *mut c_void,
    dest: *mut c_void,
    c: c_int,
    len: usize,
    flags: u32,
) -> *mut c_void {
    th(settle);
    // SAFETY: the caller's buffer.
    unsafe { std::ptr::write_bytes(dest as *mut u8, c as u8, len) };
    if flags & (1 << 5) == 0 {
        persist(dest, len);
    }
    dest
}

// ---------------------------------------------------------------------------------------------
// Transactions.

#[no_mangle]
pub extern "C" fn pmemobj_tx_stage() -> c_int {
    th(|t| t.frames.last().map_or(STAGE_NONE, |f| f.stage))
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_errno() -> c_int {
    th(|t| t.last_errno)
}

/// Called by `pmemobj_tx_begin` (src/hooks.rs) with its parameters.
///
/// # Safety
/// `kinds`, `a` and `b` hold `n` entries.
#[no_mangle]
pub unsafe extern "C" fn locsim_tx_begin(
    pop: *mut c_void,
    env: *mut c_void,
    n: usize,
    kinds: *const c_int,
    a: *const *mut c_void,
    b: *const *mut c_void,
) -> c_int {
    let slot = slot_of_pop(pop);
    let mut t = TH.with(|t| std::mem::take(&mut *t.borrow_mut()));
    settle(&mut t);
    let mut frame =
        Frame { env: env as usize, stage: STAGE_WORK, errnum: 0, aborted: false, locks: Vec::new(), cbs: Vec::new() };
    let err = match (slot, t.frames.last()) {
        (None, _) => libc::EINVAL,
        (Some(_), Some(f)) if f.stage != STAGE_WORK => libc::EINVAL,
        (Some(s), Some(_)) if s != t.slot => libc::EINVAL,
        (Some(s), None) => {
            let mut ps = pools();
            flush_loads(&mut t, &mut ps);
            report_unpersisted(&mut t, &mut ps, None);
            if !t.reserved.is_empty() {
                // Reservations written outside a transaction: theirs, written before it.
                let core = core_of(&mut t);
                let mut r: Vec<(u64, u64)> = t.reserved.iter().filter(|x| x.0 == s).map(|x| (x.1, x.2)).collect();
                if let (false, Some(p)) = (r.is_empty(), ps[s].as_mut()) {
                    p.emit(core, &[], &[], &mut r, false, None);
                }
                t.reserved.retain(|x| x.0 != s);
            }
            // The transaction's ranges are its own from here (other threads' transactions
            // leave them out).
            lock_owned(&t.owned).clear();
            if let Some(p) = ps[s].as_mut() {
                p.open.push(t.owned.clone());
            }
            drop(ps);
            t.slot = s;
            t.ops.clear();
            t.bytes.clear();
            t.touched.clear();
            t.undo.clear();
            t.added.clear();
            t.allocs.clear();
            t.frees.clear();
            0
        }
        _ => 0,
    };
    TH.with(|x| *x.borrow_mut() = t);
    if err != 0 {
        frame.stage = STAGE_ONABORT;
        frame.errnum = err;
        frame.aborted = true;
        th(|t| {
            t.frames.push(frame);
            t.last_errno = err;
        });
        fail(err, "pmemobj_tx_begin: invalid pool or transaction stage".into());
        return err;
    }
    for i in 0..n {
        let (k, x, y) = (*kinds.add(i), *a.add(i), *b.add(i));
        match k {
            1 | 2 => {
                let r = if k == 1 { pmemobj_mutex_lock(pop, x) } else { pmemobj_rwlock_wrlock(pop, x) };
                if r == 0 {
                    frame.locks.push((k, x as usize));
                }
            }
            3 => frame.cbs.push((x as usize, y as usize)),
            _ => {}
        }
    }
    th(|t| t.frames.push(frame));
    0
}

type TxCb = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void);

/// Call the top frame's callbacks with its stage.
fn callbacks() {
    let (cbs, stage, slot) = th(|t| t.frames.last().map(|f| (f.cbs.clone(), f.stage, t.slot)).unwrap_or_default());
    let pop = SLOT_BASE.get(slot).map_or(0, |b| b.load(Relaxed)) as *mut c_void;
    for (cb, arg) in cbs {
        // SAFETY: the program's callback, as given to pmemobj_tx_begin.
        unsafe { std::mem::transmute::<usize, TxCb>(cb)(pop, stage, arg as *mut c_void) };
    }
}

/// Commit the outermost transaction: the deferred frees, then the trace's transaction.
fn commit_outermost() {
    let mut t = TH.with(|t| std::mem::take(&mut *t.borrow_mut()));
    settle(&mut t);
    let slot = t.slot;
    let frees = std::mem::take(&mut t.frees);
    let mut ps = pools();
    if let Some(p) = ps[slot].as_mut() {
        let mut w = Writer { base: p.base as *mut u8, size: p.size, tx: None, touched: &mut t.touched };
        for off in frees {
            w.free(off);
        }
        let core = core_of(&mut t);
        let (ops, bytes) = (std::mem::take(&mut t.ops), std::mem::take(&mut t.bytes));
        p.emit(core, &ops, &bytes, &mut t.touched, false, Some(&t.owned));
        p.end_tx(&t.owned);
        t.ops = ops;
        t.bytes = bytes;
    }
    drop(ps);
    t.ops.clear();
    t.bytes.clear();
    t.undo.clear();
    t.added.clear();
    t.allocs.clear();
    TH.with(|x| *x.borrow_mut() = t);
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_commit() {
    let (stage, depth) = th(|t| (t.frames.last().map_or(STAGE_NONE, |f| f.stage), t.frames.len()));
    if stage != STAGE_WORK {
        return;
    }
    if depth == 1 {
        commit_outermost();
    }
    th(|t| t.frames.last_mut().unwrap().stage = STAGE_ONCOMMIT);
    callbacks();
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_process() {
    let stage = pmemobj_tx_stage();
    match stage {
        STAGE_WORK => pmemobj_tx_commit(),
        STAGE_ONCOMMIT | STAGE_ONABORT => {
            th(|t| t.frames.last_mut().unwrap().stage = STAGE_FINALLY);
            callbacks();
        }
        STAGE_FINALLY => {
            th(|t| t.frames.last_mut().unwrap().stage = STAGE_NONE);
            callbacks();
        }
        _ => {}
    }
}

/// Roll the whole transaction back and write it as aborted; its allocations are freed, a
/// transaction of their own.
fn rollback() {
    let mut t = TH.with(|t| std::mem::take(&mut *t.borrow_mut()));
    settle(&mut t);
    let slot = t.slot;
    let mut ps = pools();
    if let Some(p) = ps[slot].as_mut() {
        let core = core_of(&mut t);
        let (ops, bytes) = (std::mem::take(&mut t.ops), std::mem::take(&mut t.bytes));
        // The stores as they were made, then the abort (the simulator undoes them too).
        let mut touched = t.touched.clone();
        touched.extend(t.undo.iter().map(|(o, b)| (*o, b.len() as u64)));
        let mut again = touched.clone();
        p.emit(core, &ops, &bytes, &mut touched, true, Some(&t.owned));
        for (off, old) in t.undo.drain(..).rev() {
            // SAFETY: logged ranges of the pool.
            unsafe { std::ptr::copy_nonoverlapping(old.as_ptr(), (p.base + off as usize) as *mut u8, old.len()) };
        }
        if !t.allocs.is_empty() {
            // The allocator's metadata was not rolled back (other threads' transactions may
            // have allocated and freed since): the objects go back to the free lists, and the
            // trace gets the heap as it is now (its end, the lists, the freed headers).
            let mut w = Writer { base: p.base as *mut u8, size: p.size, tx: None, touched: &mut again };
            for off in t.allocs.drain(..).rev() {
                w.free(off);
            }
            p.emit(core, &[], &[], &mut again, false, Some(&t.owned));
        }
        p.end_tx(&t.owned);
    }
    drop(ps);
    t.ops.clear();
    t.bytes.clear();
    t.touched.clear();
    t.added.clear();
    t.allocs.clear();
    t.frees.clear();
    TH.with(|x| *x.borrow_mut() = t);
}

/// Abort the thread's transaction with `errnum` and jump back to its TX_BEGIN block.
fn abort_tx(errnum: c_int) {
    let (stage, env, first) = th(|t| {
        let first = !t.frames.iter().any(|f| f.aborted);
        t.frames.last().map_or((STAGE_NONE, 0, first), |f| (f.stage, f.env, first))
    });
    if stage != STAGE_WORK {
        return;
    }
    if first {
        rollback();
    }
    let errnum = if errnum == 0 { libc::ECANCELED } else { errnum };
    th(|t| {
        let f = t.frames.last_mut().unwrap();
        f.stage = STAGE_ONABORT;
        f.errnum = errnum;
        f.aborted = true;
        t.last_errno = errnum;
    });
    callbacks();
    set_errno(errnum);
    if env != 0 {
        // SAFETY: the jmp_buf of the TX_BEGIN block still running (its frame is open); no
        // value with a destructor is live here.
        unsafe { locsim_longjmp(env as *mut c_void, errnum) };
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_abort(errnum: c_int) {
    abort_tx(errnum);
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_end() -> c_int {
    let Some(f) = th(|t| {
        settle(t);
        t.frames.pop()
    }) else {
        return 0;
    };
    if f.stage == STAGE_WORK && !f.aborted {
        // Ended without commit: PMDK aborts it.
        th(|t| t.frames.push(f));
        abort_tx(libc::ECANCELED);
        return pmemobj_tx_end();
    }
    let pop = th(|t| SLOT_BASE.get(t.slot).map_or(0, |b| b.load(Relaxed))) as *mut c_void;
    for &(k, l) in f.locks.iter().rev() {
        if k == 1 {
            pmemobj_mutex_unlock(pop, l as *mut c_void);
        } else {
            pmemobj_rwlock_unlock(pop, l as *mut c_void);
        }
    }
    let outer = th(|t| t.frames.last().map(|o| (o.stage, o.env)));
    if f.aborted {
        if let Some((STAGE_WORK, env)) = outer {
            // An inner abort aborts the outer transaction too.
            th(|t| {
                let o = t.frames.last_mut().unwrap();
                o.stage = STAGE_ONABORT;
                o.errnum = f.errnum;
                o.aborted = true;
                t.last_errno = f.errnum;
            });
            set_errno(f.errnum);
            if env != 0 {
                // SAFETY: the outer TX_BEGIN block's jmp_buf; nothing with a destructor lives.
                unsafe { locsim_longjmp(env as *mut c_void, f.errnum) };
            }
        }
        set_errno(f.errnum);
        return f.errnum;
    }
    0
}

/// Add `len` bytes at pool offset `off` to the thread's transaction (snapshot for rollback).
fn add_range(slot: usize, off: u64, len: u64, snapshot: bool) -> c_int {
    let bad = th(|t| {
        settle(t);
        if t.frames.last().map(|f| f.stage) != Some(STAGE_WORK) || t.slot != slot {
            return Some((libc::EINVAL, "adding a range outside a transaction of its pool"));
        }
        let size = SLOT_SIZE[slot].load(Relaxed);
        if len == 0 || off < HEADER || off + len > size {
            return Some((libc::EINVAL, "object outside of heap"));
        }
        if snapshot {
            let base = SLOT_BASE[slot].load(Relaxed);
            // SAFETY: checked inside the pool.
            let old = unsafe { std::slice::from_raw_parts((base + off as usize) as *const u8, len as usize) };
            t.undo.push((off, old.to_vec()));
        }
        t.touched.push((off, len));
        add_interval(&mut t.added, off, off + len);
        lock_owned(&t.owned).push((off, off + len));
        None
    });
    match bad {
        Some((e, msg)) => {
            fail(e, msg.into());
            abort_tx(e);
            e
        }
        None => 0,
    }
}

fn add_interval(m: &mut BTreeMap<u64, u64>, mut s: u64, mut e: u64) {
    let over: Vec<(u64, u64)> = m.range(..=e).rev().take_while(|(_, &x)| x >= s).map(|(&a, &b)| (a, b)).collect();
    for (a, b) in over {
        m.remove(&a);
        s = s.min(a);
        e = e.max(b);
    }
    m.insert(s, e);
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_add_range(oid: Oid, off: u64, size: usize) -> c_int {
    match slot_of_uuid(oid.pool_uuid_lo) {
        Some(s) => add_range(s, oid.off + off, size as u64, true),
        None => {
            fail(libc::EINVAL, "invalid pool".into());
            abort_tx(libc::EINVAL);
            libc::EINVAL
        }
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_xadd_range(oid: Oid, off: u64, size: usize, flags: u64) -> c_int {
    match slot_of_uuid(oid.pool_uuid_lo) {
        Some(s) => add_range(s, oid.off + off, size as u64, flags & (1 << 2) == 0),
        None => libc::EINVAL,
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_add_range_direct(ptr: *const c_void, size: usize) -> c_int {
    pmemobj_tx_xadd_range_direct(ptr, size, 0)
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_xadd_range_direct(ptr: *const c_void, size: usize, flags: u64) -> c_int {
    match slot_of_addr(ptr as usize, size as u64) {
        Some((s, off)) => add_range(s, off, size as u64, flags & (1 << 2) == 0),
        None => {
            fail(libc::EINVAL, "object outside of pool".into());
            abort_tx(libc::EINVAL);
            libc::EINVAL
        }
    }
}

/// The thread's transaction's pool, or an abort (EINVAL) when it has none in the work stage.
fn tx_slot() -> Option<usize> {
    let s = th(|t| (t.frames.last().map(|f| f.stage) == Some(STAGE_WORK)).then_some(t.slot));
    if s.is_none() {
        fail(libc::EINVAL, "not in a transaction".into());
    }
    s
}

fn tx_alloc(size: usize, type_num: u64, flags: u64) -> Oid {
    let (zero, class) = (flags & 1 != 0, flags & CLASS_MASK != 0);
    let Some(slot) = tx_slot() else { return NULL };
    if size == 0 {
        fail(libc::EINVAL, "allocation with size 0".into());
        abort_tx(libc::EINVAL);
        return NULL;
    }
    let r = with_writer(slot, |w| {
        let off = w.alloc(size as u64, type_num, 0, class)?;
        if zero {
            w.zero(off, usable(w.base, w.size, off));
        }
        Some(off)
    });
    match r {
        Some(off) => {
            let n = usable(SLOT_BASE[slot].load(Relaxed) as *const u8, SLOT_SIZE[slot].load(Relaxed), off);
            th(|t| add_interval(&mut t.added, off - OBJ_HDR, off + n));
            PMEMoid { pool_uuid_lo: SLOT_UUID[slot].load(Relaxed), off }
        }
        None => {
            fail(libc::ENOMEM, "out of memory".into());
            abort_tx(libc::ENOMEM);
            NULL
        }
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_alloc(size: usize, type_num: u64) -> Oid {
    tx_alloc(size, type_num, 0)
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_zalloc(size: usize, type_num: u64) -> Oid {
    tx_alloc(size, type_num, 1)
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_xalloc(size: usize, type_num: u64, flags: u64) -> Oid {
    tx_alloc(size, type_num, flags)
}

fn tx_realloc(oid: Oid, size: usize, type_num: u64, zero: bool) -> Oid {
    if oid.off == 0 {
        return tx_alloc(size, type_num, zero as u64);
    }
    if size == 0 {
        pmemobj_tx_free(oid);
        return NULL;
    }
    let Some(slot) = slot_of_uuid(oid.pool_uuid_lo) else { return NULL };
    let base = SLOT_BASE[slot].load(Relaxed);
    let old_n = usable(base as *const u8, SLOT_SIZE[slot].load(Relaxed), oid.off);
    let new = tx_alloc(size, type_num, zero as u64);
    if new.off != 0 {
        let n = usable(base as *const u8, SLOT_SIZE[slot].load(Relaxed), new.off);
        // SAFETY: both objects lie in the pool; the new one is the transaction's.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (base + oid.off as usize) as *const u8,
                (base + new.off as usize) as *mut u8,
                old_n.min(n) as usize,
            )
        };
        pmemobj_tx_free(oid);
    }
    new
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_realloc(oid: Oid, size: usize, type_num: u64) -> Oid {
    tx_realloc(oid, size, type_num, false)
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_zrealloc(oid: Oid, size: usize, type_num: u64) -> Oid {
    tx_realloc(oid, size, type_num, true)
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_strdup(s: *const c_char, type_num: u64) -> Oid {
    if s.is_null() {
        fail(libc::EINVAL, "NULL string".into());
        abort_tx(libc::EINVAL);
        return NULL;
    }
    // SAFETY: a NUL-terminated string.
    let b = unsafe { CStr::from_ptr(s) }.to_bytes_with_nul();
    let o = tx_alloc(b.len(), type_num, 0);
    if let Some(slot) = slot_of_uuid(o.pool_uuid_lo) {
        let base = SLOT_BASE[slot].load(Relaxed);
        // SAFETY: the new object holds the string.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), (base + o.off as usize) as *mut u8, b.len()) };
    }
    o
}

/// Freed when the transaction commits (PMDK's deferred free): an abort keeps the object.
#[no_mangle]
pub extern "C" fn pmemobj_tx_free(oid: Oid) -> c_int {
    pmemobj_tx_xfree(oid, 0)
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_xfree(oid: Oid, _flags: u64) -> c_int {
    let Some(slot) = tx_slot() else { return libc::EINVAL };
    if oid.off == 0 {
        return 0;
    }
    if slot_of_uuid(oid.pool_uuid_lo) != Some(slot) {
        fail(libc::EINVAL, "invalid pool".into());
        abort_tx(libc::EINVAL);
        return libc::EINVAL;
    }
    th(|t| t.frees.push(oid.off));
    0
}

#[no_mangle]
pub extern "C" fn pmemobj_tx_lock(kind: c_int, lockp: *mut c_void) -> c_int {
    let slot = th(|t| t.slot);
    let pop = SLOT_BASE.get(slot).map_or(0, |b| b.load(Relaxed)) as *mut c_void;
    let r = if kind == 1 { pmemobj_mutex_lock(pop, lockp) } else { pmemobj_rwlock_wrlock(pop, lockp) };
    if r == 0 {
        th(|t| {
            if let Some(f) = t.frames.last_mut() {
                f.locks.push((kind, lockp as usize));
            }
        });
    }
    r
}

// ---------------------------------------------------------------------------------------------
// Reservations and actions (struct pobj_action: type, data[3], then 14 words).

#[repr(C)]
pub struct PobjAction {
    kind: c_int,
    data: [u32; 3],
    words: [u64; 14],
}

const ACT_HEAP: c_int = 0;
const ACT_MEM: c_int = 1;

#[no_mangle]
pub extern "C" fn pmemobj_xreserve(
    pop: *mut c_void,
    act: *mut PobjAction,
    size: usize,
    type_num: u64,
    flags: u64,
) -> Oid {
    let Some(slot) = slot_of_pop(pop) else { return NULL };
    if size == 0 {
        fail(libc::EINVAL, "allocation with size 0".into());
        return NULL;
    }
    let r = with_writer(slot, |w| {
        let off = w.alloc(size as u64, type_num, 0, false)?;
        if flags & 1 != 0 {
            w.zero(off, usable(w.base, w.size, off));
        }
        Some(off)
    });
    let Some(off) = r else {
        fail(libc::ENOMEM, "out of memory".into());
        return NULL;
    };
    // SAFETY: the caller's action.
    unsafe {
        (*act).kind = ACT_HEAP;
        (*act).data = [0, 0, 0];
        (*act).words[0] = off;
        (*act).words[1] = usable(SLOT_BASE[slot].load(Relaxed) as *const u8, SLOT_SIZE[slot].load(Relaxed), off);
    }
    PMEMoid { pool_uuid_lo: SLOT_UUID[slot].load(Relaxed), off }
}

#[no_mangle]
pub extern "C" fn pmemobj_reserve(pop: *mut c_void, act: *mut PobjAction, size: usize, type_num: u64) -> Oid {
    pmemobj_xreserve(pop, act, size, type_num, 0)
}

#[no_mangle]
pub extern "C" fn pmemobj_set_value(_pop: *mut c_void, act: *mut PobjAction, ptr: *mut u64, value: u64) {
    // SAFETY: the caller's action.
    unsafe {
        (*act).kind = ACT_MEM;
        (*act).words[0] = ptr as u64;
        (*act).words[1] = value;
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_defer_free(_pop: *mut c_void, oid: Oid, act: *mut PobjAction) {
    // SAFETY: the caller's action.
    unsafe {
        (*act).kind = ACT_HEAP;
        (*act).data = [1, 0, 0];
        (*act).words[0] = oid.off;
    }
}

/// Apply the actions as one atomic operation.
#[no_mangle]
pub extern "C" fn pmemobj_publish(pop: *mut c_void, actv: *mut PobjAction, n: usize) -> c_int {
    let Some(slot) = slot_of_pop(pop) else { return -1 };
    let base = SLOT_BASE[slot].load(Relaxed);
    with_writer(slot, |w| {
        for i in 0..n {
            // SAFETY: the caller's `n` actions.
            let a = unsafe { &*actv.add(i) };
            match (a.kind, a.data[0]) {
                (ACT_MEM, _) => {
                    let at = a.words[0] as usize;
                    if at >= base && ((at - base) as u64) + 8 <= w.size {
                        w.write((at - base) as u64, a.words[1]);
                    } else {
                        // SAFETY: a volatile word of the caller's.
                        unsafe { (at as *mut u64).write_unaligned(a.words[1]) };
                    }
                }
                (ACT_HEAP, 1) => w.free(a.words[0]),
                _ => {}
            }
        }
    });
    end_atomic(slot);
    0
}

#[no_mangle]
pub extern "C" fn pmemobj_cancel(pop: *mut c_void, actv: *mut PobjAction, n: usize) {
    let Some(slot) = slot_of_pop(pop) else { return };
    with_writer(slot, |w| {
        for i in 0..n {
            // SAFETY: the caller's `n` actions.
            let a = unsafe { &*actv.add(i) };
            if a.kind == ACT_HEAP && a.data[0] == 0 {
                w.free(a.words[0]);
            }
        }
    });
    end_atomic(slot);
}

// ---------------------------------------------------------------------------------------------
// Lists: circular, doubly linked through (next, prev) entries at `pe` in each element.

/// Read the PMEMoid at pool offset `at`.
fn oid_at(w: &Writer, at: u64) -> Oid {
    PMEMoid { pool_uuid_lo: w.read(at), off: w.read(at + 8) }
}

fn put_oid(w: &mut Writer, at: u64, o: Oid) {
    w.write(at, o.pool_uuid_lo);
    w.write(at + 8, o.off);
}

/// Link `oid` into the list at `head` (pool offset), before or after `dest` (OID_NULL: head or
/// tail).
fn link(w: &mut Writer, pe: u64, head: u64, dest: Oid, before: bool, oid: Oid) {
    let first = oid_at(w, head);
    if first.off == 0 {
        put_oid(w, oid.off + pe, oid);
        put_oid(w, oid.off + pe + 16, oid);
        put_oid(w, head, oid);
        return;
    }
    let (anchor, to_head) = if dest.off == 0 { (first, before) } else { (dest, false) };
    // Insert before `anchor` (when before, or at the tail: before the first) or after it.
    let before_anchor = if dest.off == 0 { true } else { before };
    let (prev, next) =
        if before_anchor { (oid_at(w, anchor.off + pe + 16), anchor) } else { (anchor, oid_at(w, anchor.off + pe)) };
    put_oid(w, oid.off + pe, next);
    put_oid(w, oid.off + pe + 16, prev);
    put_oid(w, prev.off + pe, oid);
    put_oid(w, next.off + pe + 16, oid);
    if to_head || (dest.off != 0 && before && dest.off == first.off) {
        put_oid(w, head, oid);
    }
}

fn unlink(w: &mut Writer, pe: u64, head: u64, oid: Oid) {
    let first = oid_at(w, head);
    let next = oid_at(w, oid.off + pe);
    let prev = oid_at(w, oid.off + pe + 16);
    if next.off == oid.off {
        put_oid(w, head, NULL);
    } else {
        put_oid(w, prev.off + pe, next);
        put_oid(w, next.off + pe + 16, prev);
        if first.off == oid.off {
            put_oid(w, head, next);
        }
    }
    put_oid(w, oid.off + pe, NULL);
    put_oid(w, oid.off + pe + 16, NULL);
}

fn head_off(slot: usize, head: *mut c_void) -> Option<u64> {
    slot_of_addr(head as usize, 16).filter(|x| x.0 == slot).map(|x| x.1)
}

#[no_mangle]
pub extern "C" fn pmemobj_list_insert(
    pop: *mut c_void,
    pe: usize,
    head: *mut c_void,
    dest: Oid,
    before: c_int,
    oid: Oid,
) -> c_int {
    let Some(slot) = slot_of_pop(pop) else { return -1 };
    let Some(h) = head_off(slot, head) else { return -1 };
    with_writer(slot, |w| link(w, pe as u64, h, dest, before != 0, oid));
    end_atomic(slot);
    0
}

#[no_mangle]
pub extern "C" fn pmemobj_list_insert_new(
    pop: *mut c_void,
    pe: usize,
    head: *mut c_void,
    dest: Oid,
    before: c_int,
    size: usize,
    type_num: u64,
    constr: Constr,
    arg: *mut c_void,
) -> Oid {
    let Some(slot) = slot_of_pop(pop) else { return NULL };
    let Some(h) = head_off(slot, head) else { return NULL };
    let mut oid = NULL;
    // The allocation, the constructor and the link: one atomic operation (end_atomic writes
    // it after the link).
    let Some(off) = with_writer(slot, |w| w.alloc(size as u64, type_num, 0, false)) else {
        fail(libc::ENOMEM, "out of memory".into());
        end_atomic(slot);
        return NULL;
    };
    oid.pool_uuid_lo = SLOT_UUID[slot].load(Relaxed);
    oid.off = off;
    if let Some(c) = constr {
        th(|t| t.atomic += 1);
        // SAFETY: the program's constructor on the new element.
        unsafe { c(pop, (SLOT_BASE[slot].load(Relaxed) + off as usize) as *mut c_void, arg) };
        th(|t| {
            settle(t);
            t.atomic -= 1
        });
    }
    with_writer(slot, |w| link(w, pe as u64, h, dest, before != 0, oid));
    end_atomic(slot);
    oid
}

#[no_mangle]
pub extern "C" fn pmemobj_list_remove(pop: *mut c_void, pe: usize, head: *mut c_void, oid: Oid, free: c_int) -> c_int {
    let Some(slot) = slot_of_pop(pop) else { return -1 };
    let Some(h) = head_off(slot, head) else { return -1 };
    with_writer(slot, |w| {
        unlink(w, pe as u64, h, oid);
        if free != 0 {
            w.free(oid.off);
        }
    });
    end_atomic(slot);
    0
}

#[no_mangle]
pub extern "C" fn pmemobj_list_move(
    pop: *mut c_void,
    pe_old: usize,
    head_old: *mut c_void,
    pe_new: usize,
    head_new: *mut c_void,
    dest: Oid,
    before: c_int,
    oid: Oid,
) -> c_int {
    let Some(slot) = slot_of_pop(pop) else { return -1 };
    let (Some(ho), Some(hn)) = (head_off(slot, head_old), head_off(slot, head_new)) else { return -1 };
    with_writer(slot, |w| {
        unlink(w, pe_old as u64, ho, oid);
        link(w, pe_new as u64, hn, dest, before != 0, oid);
    });
    end_atomic(slot);
    0
}

// ---------------------------------------------------------------------------------------------
// Locks.

/// The volatile lock of the PMEMmutex/rwlock/cond at `p` (created on first use after open).
fn lock_of(p: *mut c_void) -> Option<*const Lock> {
    let (slot, off) = slot_of_addr(p as usize, 1)?;
    let mut ps = pools();
    let pool = ps[slot].as_mut()?;
    let l = pool.locks.entry(off).or_insert_with(|| {
        Box::new(Lock {
            mutex: std::cell::UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            rwlock: std::cell::UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER),
            cond: std::cell::UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
        })
    });
    Some(&**l as *const Lock)
}

// Each lock call first reads the thread's pending exact-level store (`settle`): the lock
// orders it before another thread's access to its bytes.
macro_rules! lock_fn {
    ($name:ident, $field:ident, $f:path) => {
        #[no_mangle]
        pub extern "C" fn $name(_pop: *mut c_void, p: *mut c_void) -> c_int {
            th(settle);
            match lock_of(p) {
                // SAFETY: the lock lives until the pool closes.
                Some(l) => unsafe { $f((*l).$field.get()) },
                None => libc::EINVAL,
            }
        }
    };
}
lock_fn!(pmemobj_mutex_lock, mutex, libc::pthread_mutex_lock);
lock_fn!(pmemobj_mutex_trylock, mutex, libc::pthread_mutex_trylock);
lock_fn!(pmemobj_mutex_unlock, mutex, libc::pthread_mutex_unlock);
lock_fn!(pmemobj_rwlock_rdlock, rwlock, libc::pthread_rwlock_rdlock);
lock_fn!(pmemobj_rwlock_wrlock, rwlock, libc::pthread_rwlock_wrlock);
lock_fn!(pmemobj_rwlock_tryrdlock, rwlock, libc::pthread_rwlock_tryrdlock);
lock_fn!(pmemobj_rwlock_trywrlock, rwlock, libc::pthread_rwlock_trywrlock);
lock_fn!(pmemobj_rwlock_unlock, rwlock, libc::pthread_rwlock_unlock);
lock_fn!(pmemobj_cond_broadcast, cond, libc::pthread_cond_broadcast);
lock_fn!(pmemobj_cond_signal, cond, libc::pthread_cond_signal);

#[no_mangle]
pub extern "C" fn pmemobj_mutex_timedlock(_pop: *mut c_void, p: *mut c_void, t: *const libc::timespec) -> c_int {
    th(settle);
    match lock_of(p) {
        // SAFETY: the lock lives until the pool closes.
        Some(l) => unsafe { libc::pthread_mutex_timedlock((*l).mutex.get(), t) },
        None => libc::EINVAL,
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_cond_wait(_pop: *mut c_void, c: *mut c_void, m: *mut c_void) -> c_int {
    th(settle);
    match (lock_of(c), lock_of(m)) {
        // SAFETY: both live until the pool closes.
        (Some(c), Some(m)) => unsafe { libc::pthread_cond_wait((*c).cond.get(), (*m).mutex.get()) },
        _ => libc::EINVAL,
    }
}

#[no_mangle]
pub extern "C" fn pmemobj_cond_timedwait(
    _pop: *mut c_void,
    c: *mut c_void,
    m: *mut c_void,
    t: *const libc::timespec,
) -> c_int {
    th(settle);
    match (lock_of(c), lock_of(m)) {
        // SAFETY: both live until the pool closes.
        (Some(c), Some(m)) => unsafe { libc::pthread_cond_timedwait((*c).cond.get(), (*m).mutex.get(), t) },
        _ => libc::EINVAL,
    }
}

/// Zero the lock in the pool (a persist of its 64 bytes) and forget its volatile state.
fn zero_lock(p: *mut c_void) {
    if let Some((slot, off)) = slot_of_addr(p as usize, 64) {
        if let Some(pool) = pools()[slot].as_mut() {
            pool.locks.remove(&off);
        }
    }
    pmemobj_memset_persist(std::ptr::null_mut(), p, 0, 64);
}

#[no_mangle]
pub extern "C" fn pmemobj_mutex_zero(_pop: *mut c_void, p: *mut c_void) {
    zero_lock(p)
}

#[no_mangle]
pub extern "C" fn pmemobj_rwlock_zero(_pop: *mut c_void, p: *mut c_void) {
    zero_lock(p)
}

#[no_mangle]
pub extern "C" fn pmemobj_cond_zero(_pop: *mut c_void, p: *mut c_void) {
    zero_lock(p)
}

// ---------------------------------------------------------------------------------------------
// The rest.

#[no_mangle]
pub extern "C" fn pmemobj_errormsg() -> *const c_char {
    TH.with(|t| t.borrow().msg.as_ptr())
}

#[no_mangle]
pub extern "C" fn pmemobj_check_version(major: u32, _minor: u32) -> *const c_char {
    if major == 2 {
        std::ptr::null()
    } else {
        c"libpmemobj major version mismatch (need 2)".as_ptr()
    }
}

#[no_mangle]
pub extern "C" fn _pobj_debug_notice(_f: *const c_char, _file: *const c_char, _line: c_int) {}

/// `struct pobj_alloc_class_desc`.
#[repr(C)]
pub struct AllocClassDesc {
    unit_size: usize,
    alignment: usize,
    units_per_block: u32,
    header_type: c_int,
    class_id: u32,
}

#[no_mangle]
pub extern "C" fn pmemobj_ctl_set(pop: *mut c_void, name: *const c_char, arg: *mut c_void) -> c_int {
    let name = cstr(name).unwrap_or_default();
    let Some(slot) = slot_of_pop(pop) else { return -1 };
    if name == "heap.alloc_class.new.desc" && !arg.is_null() {
        let mut ps = pools();
        let p = ps[slot].as_mut().expect("an open pool");
        // SAFETY: the caller's descriptor.
        unsafe { (*(arg as *mut AllocClassDesc)).class_id = p.next_class };
        p.next_class += 1;
        return 0;
    }
    fail(libc::EINVAL, format!("{name}: not supported by locsim-pmemobj"));
    -1
}

#[cfg(test)]
mod tests {
    use super::without;

    #[test]
    fn without_cuts_the_skipped_bytes_out_of_the_ranges() {
        // Ranges (offset, length), skips (start, end), unsorted and overlapping.
        let r = vec![(0, 100), (200, 50), (300, 10)];
        assert_eq!(without(r.clone(), vec![]), r);
        assert_eq!(without(r.clone(), vec![(90, 210), (10, 20), (15, 30)]), [(0, 10), (30, 60), (210, 40), (300, 10)]);
        assert_eq!(without(r.clone(), vec![(0, 1000)]), []);
        assert_eq!(without(r, vec![(305, 306), (0, 100)]), [(200, 50), (300, 5), (306, 4)]);
    }
}
