//! The SQLite VFS `locsim-journal`: database files are ordinary files with modelled sync
//! semantics ([`Media`]), and the rollback journal `<db>-journal` is translated, call by call,
//! into the PCM structures of [`Journal`] and back.
//!
//! SQLite (DELETE journal mode, `synchronous=FULL`, `cache_spill=OFF`) writes a journal as:
//! the header at offset 0 (28 bytes padded to the 512-byte sector), then per record the page
//! number (4 bytes, big-endian) at `512 + k * 1032`, the page image (1024 bytes) after it,
//! the checksum (4 bytes) after that; after syncing the journal it rewrites the first 12 bytes
//! (magic and record count); it commits by deleting the journal. These calls become: journal
//! start; descriptor allocation (with reuse); a portion write; checksum and valid flag; header
//! copy update; hot flag clear. Reads rebuild the same byte stream from PCM, so SQLite's own
//! hot-journal rollback runs unchanged after a crash. Any other write shape is refused with an
//! I/O error and the reason kept in [`World::error`] (no such write occurs with these settings).
//!
//! The world is a thread-local installed by [`install`] for the duration of a run; callbacks
//! borrow it for the length of one call (SQLite never re-enters the VFS from a callback), and a
//! panic inside a callback becomes an I/O error rather than unwinding through C.

use super::alloc::{JErr, Journal};
use super::media::Media;
use crate::workload::sqlite::bridge::vfs::{deterministic_vfs, io_methods, register_once};
use rusqlite::ffi;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::OnceLock;

/// Name under which the VFS is registered (not as the default VFS).
pub const VFS_NAME: &str = "locsim-journal";
const VFS_NAME_C: &CStr = c"locsim-journal";
use super::format::{HDR_SECTOR, RECORD_BYTES};

pub use super::bug::Bug;
pub use super::call_record::Recording;
pub use super::vfs_call::{Call, Outcome, SUFFIX};

/// Everything the VFS works on.
pub struct World {
    pub media: Media,
    pub journal: Journal,
    pub bug: Option<Bug>,
    /// First unsupported request seen, if any.
    pub error: Option<String>,
    /// Database pages written (1 KiB units).
    pub db_page_writes: u64,
    /// While SQLite's calls are recorded ([`super::vfs_tape`]): every [`Call`] and its outcome.
    pub recording: Option<Recording>,
}

impl World {
    pub fn new(media: Media, journal: Journal, bug: Option<Bug>) -> World {
        World { media, journal, bug, error: None, db_page_writes: 0, recording: None }
    }

    /// Carry out one call of SQLite into the VFS (recorded while a recording is on). A panic
    /// inside becomes the call's I/O error rather than unwinding through C.
    pub fn call(&mut self, mut c: Call<'_>) -> Outcome {
        let err = Outcome { rc: c.io_error(), value: 0 };
        let mut rec = self.recording.take();
        let written = rec
            .as_mut()
            .and_then(|r| r.before(&c, &self.media.dbs, |s, off, len| self.journal_page_source(s, off, len)));
        let out = catch_unwind(AssertUnwindSafe(|| apply(self, &mut c))).unwrap_or(err);
        if let Some(r) = &mut rec {
            r.push(&c, out, written);
        }
        self.recording = rec;
        out
    }

    /// Where in the database files the bytes of a journal write at `off` of slot `s` were
    /// likely read from: a record's page image is the page of its database that the record's
    /// page number names (file index and offset), as the database file holds it before SQLite
    /// changes it.
    pub fn journal_page_source(&self, s: usize, off: u64, len: usize) -> Option<(usize, u64)> {
        let rel = off.checked_sub(HDR_SECTOR)?;
        let (k, within) = ((rel / RECORD_BYTES) as usize, rel % RECORD_BYTES);
        if within != 4 || len as u64 != super::format::PAGE_BYTES {
            return None;
        }
        let slot = self.journal.slots.get(s)?;
        let pgno = slot.descs.get(*slot.records.get(k)? as usize)?.pgno as u64;
        Some((db_index(self, &slot.name)?, pgno.checked_sub(1)? * super::format::PAGE_BYTES))
    }
}

fn apply(w: &mut World, c: &mut Call<'_>) -> Outcome {
    match c {
        Call::Open { name, flags } => Outcome { rc: ffi::SQLITE_OK, value: open(w, name, *flags) },
        Call::Read { journal: true, idx, off, buf } => Outcome::rc(journal_read(w, *idx, *off, buf)),
        Call::Read { journal: false, idx, off, buf } => {
            let cur = &w.media.dbs[*idx].cur;
            let off = *off;
            let n = (cur.len() as u64).saturating_sub(off).min(buf.len() as u64) as usize;
            if n > 0 {
                buf[..n].copy_from_slice(&cur[off as usize..off as usize + n]);
            }
            buf[n..].fill(0);
            Outcome::rc(if n < buf.len() { ffi::SQLITE_IOERR_SHORT_READ } else { ffi::SQLITE_OK })
        }
        Call::Write { journal: true, idx, off, data } => Outcome::rc(journal_write(w, *idx, *off, data)),
        Call::Write { journal: false, idx, off, data } => {
            w.db_page_writes += (data.len() as u64).div_ceil(super::format::PAGE_BYTES);
            Outcome::rc(if w.media.db_write(*idx, *off, data) { ffi::SQLITE_OK } else { ffi::SQLITE_IOERR_WRITE })
        }
        Call::Truncate { journal: true, idx, size } => Outcome::rc(journal_truncate(w, *idx, *size)),
        Call::Truncate { journal: false, idx, size } => {
            Outcome::rc(if w.media.db_truncate(*idx, *size) { ffi::SQLITE_OK } else { ffi::SQLITE_IOERR_TRUNCATE })
        }
        // Journal writes are uncached PCM writes, durable when they return.
        Call::Sync { journal: true, .. } => Outcome::rc(ffi::SQLITE_OK),
        Call::Sync { journal: false, idx } => Outcome::rc(db_sync(w, *idx)),
        Call::FileSize { journal, idx } => {
            let n = if *journal { w.journal.stream_size(*idx) } else { w.media.dbs[*idx].cur.len() as u64 };
            Outcome { rc: ffi::SQLITE_OK, value: n as i64 }
        }
        Call::Delete { name } => {
            Outcome::rc(name.strip_suffix(SUFFIX).map_or(ffi::SQLITE_OK, |base| journal_delete(w, base)))
        }
        Call::Access { name } => {
            let exists = match name.strip_suffix(SUFFIX) {
                Some(base) => journal_exists(w, base),
                None => db_index(w, name).is_some(),
            };
            Outcome { rc: ffi::SQLITE_OK, value: exists as i64 }
        }
    }
}

/// [`Call::Open`]: the file's code, or -1.
fn open(w: &mut World, name: &str, flags: c_int) -> i64 {
    if flags & ffi::SQLITE_OPEN_MAIN_JOURNAL != 0 {
        let Some(base) = name.strip_suffix(SUFFIX) else { return -1 };
        return w.journal.slot_for(base).map_or(-1, |s| s as i64 + (1 << 20));
    }
    if flags & ffi::SQLITE_OPEN_MAIN_DB == 0 {
        return -1;
    }
    match db_index(w, name) {
        Some(i) => i as i64,
        None if flags & ffi::SQLITE_OPEN_CREATE != 0 => {
            w.media.dbs.push(super::media::DbFile::new(name, Vec::new()));
            (w.media.dbs.len() - 1) as i64
        }
        None => -1,
    }
}

thread_local! {
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
}

/// Make `w` the world of every VFS call on this thread.
pub fn install(w: World) {
    WORLD.with(|c| *c.borrow_mut() = Some(w));
}

/// Remove and return the world.
pub fn take() -> World {
    WORLD.with(|c| c.borrow_mut().take()).expect("a world is installed")
}

/// Run `f` on the installed world (outside any SQLite call).
pub fn with<R>(f: impl FnOnce(&mut World) -> R) -> R {
    WORLD.with(|c| f(c.borrow_mut().as_mut().expect("a world is installed")))
}

/// Carry out `c` on this thread's world: its outcome, or `c`'s I/O error when no world is
/// installed or the media have crashed.
fn on_world(c: Call<'_>) -> Outcome {
    let err = Outcome::rc(c.io_error());
    WORLD.with(|cell| {
        let Ok(mut g) = cell.try_borrow_mut() else { return err };
        let Some(w) = g.as_mut() else { return err };
        if w.media.crashed() {
            return err;
        }
        w.call(c)
    })
}

fn jerr(w: &mut World, e: JErr, io: c_int) -> c_int {
    match e {
        JErr::Full => ffi::SQLITE_FULL,
        JErr::Crashed => io,
        JErr::Protocol(msg) => {
            w.error.get_or_insert(msg);
            io
        }
    }
}

// ---- journal stream <-> structures (plain Rust; the loadable extension, crates/pcmjournal-ext,
// runs the same functions on its own world) ----

/// SQLite writes `data` at `off` of the journal of slot `s`: an SQLite result code.
pub fn journal_write(w: &mut World, s: usize, off: u64, data: &[u8]) -> c_int {
    match stream_write(w, s, off, data) {
        Ok(()) => ffi::SQLITE_OK,
        Err(e) => jerr(w, e, ffi::SQLITE_IOERR_WRITE),
    }
}

/// SQLite reads the journal of slot `s` from `off`: an SQLite result code (a short read is
/// zero-filled, as SQLite requires).
pub fn journal_read(w: &mut World, s: usize, off: u64, buf: &mut [u8]) -> c_int {
    if stream_read(w, s, off, buf) < buf.len() {
        ffi::SQLITE_IOERR_SHORT_READ
    } else {
        ffi::SQLITE_OK
    }
}

/// SQLite truncates the journal of slot `s` (to 0: the journal ends).
pub fn journal_truncate(w: &mut World, s: usize, size: u64) -> c_int {
    if size == 0 && w.journal.slots[s].open {
        if let Err(e) = w.journal.end(&mut w.media, s) {
            return jerr(w, e, ffi::SQLITE_IOERR_TRUNCATE);
        }
    }
    ffi::SQLITE_OK
}

/// SQLite deletes the journal of database `base` (commit in DELETE mode).
pub fn journal_delete(w: &mut World, base: &str) -> c_int {
    let Some(s) = w.journal.slot_for(base) else { return ffi::SQLITE_OK };
    let sl = &w.journal.slots[s];
    if sl.open || !sl.records.is_empty() {
        if let Err(e) = w.journal.end(&mut w.media, s) {
            return jerr(w, e, ffi::SQLITE_IOERR_DELETE);
        }
    }
    ffi::SQLITE_OK
}

/// Whether the journal of database `base` exists for SQLite (it is hot).
pub fn journal_exists(w: &World, base: &str) -> bool {
    w.journal.slots.iter().any(|s| s.name == base && s.hot)
}

/// What a sync of database `name` does to the journal before the file is synced: nothing,
/// except under the injected [`Bug::HotClearBeforeDbSync`]. An SQLite result code.
pub fn before_db_sync(w: &mut World, name: &str) -> c_int {
    if w.bug == Some(Bug::HotClearBeforeDbSync) {
        if let Some(s) = w.journal.slot_for(name) {
            if w.journal.slots[s].hot && w.journal.slots[s].hdr.fields[0] > 0 {
                if let Err(e) = w.journal.clear_hot(&mut w.media, s) {
                    return jerr(w, e, ffi::SQLITE_IOERR_FSYNC);
                }
            }
        }
    }
    ffi::SQLITE_OK
}

fn stream_write(w: &mut World, s: usize, off: u64, data: &[u8]) -> Result<(), JErr> {
    let (m, j) = (&mut w.media, &mut w.journal);
    if off < HDR_SECTOR {
        if off + data.len() as u64 > HDR_SECTOR {
            return Err(JErr::Protocol(format!("journal write {off}+{} crosses the header sector", data.len())));
        }
        let hdr = super::format::STREAM_HDR as u64;
        if off + (data.len() as u64) > hdr && data[(hdr.saturating_sub(off)) as usize..].iter().any(|&b| b != 0) {
            return Err(JErr::Protocol("journal header padding not zero (super-journal?)".into()));
        }
        if !j.slots[s].open {
            if off != 0 || data.len() < super::format::STREAM_HDR {
                return Err(JErr::Protocol(format!("journal starts with a write at {off}+{}", data.len())));
            }
            return j.start(m, s, data[..super::format::STREAM_HDR].try_into().expect("28"));
        }
        return j.update_header(m, s, off as usize, data);
    }
    let rel = off - HDR_SECTOR;
    let (k, within) = ((rel / RECORD_BYTES) as usize, rel % RECORD_BYTES);
    let be = |d: &[u8]| u32::from_be_bytes(d.try_into().expect("4 bytes"));
    match (within, data.len() as u64) {
        (0, 4) => {
            j.record_pgno(m, s, k, be(data))?;
            if w.bug == Some(Bug::ReuseLivePortion) && k >= 1 {
                // The defect: record k shares record k-1's portion.
                let prev = j.slots[s].descs[j.slots[s].records[k - 1] as usize].ptr;
                let d = j.slots[s].records[k] as usize;
                j.slots[s].descs[d].ptr = prev;
            }
            Ok(())
        }
        (4, n) if n == super::format::PAGE_BYTES => j.record_data(m, s, k, data),
        (w4, 4) if w4 == RECORD_BYTES - 4 => j.record_cksum(m, s, k, be(data)),
        _ => Err(JErr::Protocol(format!("journal write at {off}+{} is not a record field", data.len()))),
    }
}

/// Fill `buf` with the journal stream from `off`; returns bytes that exist.
fn stream_read(w: &mut World, s: usize, off: u64, buf: &mut [u8]) -> usize {
    let size = w.journal.stream_size(s);
    let n = size.saturating_sub(off).min(buf.len() as u64) as usize;
    let hdr = w.journal.header_stream(s);
    let mut pos = off;
    let end = off + n as u64;
    let m = &mut w.media;
    while pos < end {
        let i = (pos - off) as usize;
        if pos < HDR_SECTOR {
            let stop = end.min(HDR_SECTOR);
            for (b, p) in buf[i..(stop - off) as usize].iter_mut().zip(pos..) {
                *b = hdr.get(p as usize).copied().unwrap_or(0);
            }
            m.pcm.read(64);
            m.pcm_ns += m.timing.pcm_read_ns_per_block;
            pos = stop;
            continue;
        }
        let rel = pos - HDR_SECTOR;
        let (k, within) = ((rel / RECORD_BYTES) as usize, rel % RECORD_BYTES);
        let rec_start = pos - within;
        let d = w.journal.slots[s].descs[w.journal.slots[s].records[k] as usize];
        let (lo, hi, field): (u64, u64, Option<[u8; 4]>) = if within < 4 {
            (0, 4, Some(d.pgno.to_be_bytes()))
        } else if within < RECORD_BYTES - 4 {
            (4, RECORD_BYTES - 4, None)
        } else {
            (RECORD_BYTES - 4, RECORD_BYTES, Some(d.cksum.to_be_bytes()))
        };
        let stop = end.min(rec_start + hi);
        let out = &mut buf[i..(stop - off) as usize];
        match field {
            Some(f) => {
                out.copy_from_slice(&f[(within - lo) as usize..(stop - rec_start - lo) as usize]);
                m.pcm.read(64);
                m.pcm_ns += m.timing.pcm_read_ns_per_block;
            }
            None => m.pcm_read(super::format::portion_addr(d.ptr) + (within - lo), out),
        }
        pos = stop;
    }
    buf[n..].fill(0);
    n
}

fn db_sync(w: &mut World, i: usize) -> c_int {
    let name = w.media.dbs[i].name.clone();
    let rc = before_db_sync(w, &name);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    if w.media.db_sync(i) {
        ffi::SQLITE_OK
    } else {
        ffi::SQLITE_IOERR_FSYNC
    }
}

// ---- the C side ----

#[repr(C)]
struct JFile {
    base: ffi::sqlite3_file,
    journal: bool,
    /// Database file index, or journal slot.
    idx: usize,
}

unsafe fn file_of(f: *mut ffi::sqlite3_file) -> (bool, usize) {
    let jf = &*(f as *const JFile);
    (jf.journal, jf.idx)
}

unsafe extern "C" fn x_close(_f: *mut ffi::sqlite3_file) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_read(f: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, off: ffi::sqlite3_int64) -> c_int {
    let (journal, idx) = file_of(f);
    let (Ok(off), Ok(amt)) = (u64::try_from(off), usize::try_from(amt)) else { return ffi::SQLITE_IOERR_READ };
    // SAFETY: SQLite passes a buffer of `amt` writable bytes.
    let buf = std::slice::from_raw_parts_mut(buf as *mut u8, amt);
    on_world(Call::Read { journal, idx, off, buf }).rc
}

unsafe extern "C" fn x_write(
    f: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    let (journal, idx) = file_of(f);
    let (Ok(off), Ok(amt)) = (u64::try_from(off), usize::try_from(amt)) else { return ffi::SQLITE_IOERR_WRITE };
    // SAFETY: SQLite passes a buffer of `amt` readable bytes.
    let data = std::slice::from_raw_parts(buf as *const u8, amt);
    on_world(Call::Write { journal, idx, off, data }).rc
}

unsafe extern "C" fn x_truncate(f: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    let (journal, idx) = file_of(f);
    let Ok(size) = u64::try_from(size) else { return ffi::SQLITE_IOERR_TRUNCATE };
    on_world(Call::Truncate { journal, idx, size }).rc
}

unsafe extern "C" fn x_sync(f: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    let (journal, idx) = file_of(f);
    on_world(Call::Sync { journal, idx }).rc
}

unsafe extern "C" fn x_file_size(f: *mut ffi::sqlite3_file, out: *mut ffi::sqlite3_int64) -> c_int {
    let (journal, idx) = file_of(f);
    let o = on_world(Call::FileSize { journal, idx });
    if o.rc == ffi::SQLITE_OK {
        // SAFETY: SQLite passes a valid out pointer.
        *out = o.value;
    }
    o.rc
}

unsafe extern "C" fn x_sector_size(_f: *mut ffi::sqlite3_file) -> c_int {
    HDR_SECTOR as c_int
}

unsafe extern "C" fn x_device_characteristics(_f: *mut ffi::sqlite3_file) -> c_int {
    0
}

static IO_METHODS: ffi::sqlite3_io_methods = io_methods!();

fn db_index(w: &World, name: &str) -> Option<usize> {
    w.media.dbs.iter().position(|d| d.name == name)
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    f: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    (*f).pMethods = ptr::null();
    if name.is_null() {
        return ffi::SQLITE_CANTOPEN;
    }
    let Ok(name) = CStr::from_ptr(name).to_str() else { return ffi::SQLITE_CANTOPEN };
    let o = on_world(Call::Open { name, flags });
    if o.rc != ffi::SQLITE_OK || o.value < 0 {
        return ffi::SQLITE_CANTOPEN;
    }
    let jf = f as *mut JFile;
    ptr::addr_of_mut!((*jf).journal).write(o.value >= 1 << 20);
    ptr::addr_of_mut!((*jf).idx).write((o.value & ((1 << 20) - 1)) as usize);
    (*f).pMethods = &IO_METHODS;
    if !out_flags.is_null() {
        *out_flags = flags;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_delete(_vfs: *mut ffi::sqlite3_vfs, name: *const c_char, _sync_dir: c_int) -> c_int {
    let Ok(name) = CStr::from_ptr(name).to_str() else { return ffi::SQLITE_IOERR_DELETE };
    on_world(Call::Delete { name }).rc
}

unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    _flags: c_int,
    out: *mut c_int,
) -> c_int {
    let Ok(name) = CStr::from_ptr(name).to_str() else { return ffi::SQLITE_IOERR_ACCESS };
    let o = on_world(Call::Access { name });
    if o.rc == ffi::SQLITE_OK {
        // SAFETY: SQLite passes a valid out pointer.
        *out = o.value as c_int;
    }
    o.rc
}

/// Register the VFS once per process.
pub fn register() -> Result<(), String> {
    static DONE: OnceLock<c_int> = OnceLock::new();
    let make = || ffi::sqlite3_vfs {
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        ..deterministic_vfs(VFS_NAME_C.as_ptr(), std::mem::size_of::<JFile>(), 512)
    };
    register_once(&DONE, make, "the journal VFS")
}

/// The value given to `SQLITE_TESTCTRL_PRNG_SEED` for `seed` (here and by the loadable
/// extension, so both draw the same journal nonces).
pub fn prng_seed_value(seed: u64) -> c_int {
    ((seed as u32 ^ (seed >> 32) as u32) | 1) as c_int
}

/// Run `f` with SQLite's process-wide generator saved before and restored after, so that
/// whatever `f` draws (other threads' replays, reseeding it) leaves a replay paused around it
/// drawing as it would have.
pub fn keeping_sqlite_prng<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: documented test-control operations without arguments.
    unsafe { ffi::sqlite3_test_control(ffi::SQLITE_TESTCTRL_PRNG_SAVE) };
    let r = f();
    unsafe { ffi::sqlite3_test_control(ffi::SQLITE_TESTCTRL_PRNG_RESTORE) };
    r
}

/// Seed SQLite's process-wide generator (the journal nonce comes from it).
pub fn seed_sqlite_prng(seed: u64) {
    let x = prng_seed_value(seed);
    // SAFETY: a documented test-control operation taking (int, sqlite3*); a null db is allowed.
    unsafe {
        ffi::sqlite3_test_control(ffi::SQLITE_TESTCTRL_PRNG_SEED, x, ptr::null_mut::<ffi::sqlite3>());
    }
}
