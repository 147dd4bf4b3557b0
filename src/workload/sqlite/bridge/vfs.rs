//! The SQLite VFS over [`Pm`]: registration, the C callbacks, and the thread-local pointer to
//! the current back end.
//!
//! # Safety argument for the back-end pointer
//!
//! [`with_pm`] turns its `&'a mut dyn Pm` into a raw pointer with the lifetime erased and puts
//! it in the thread-local `CURRENT` for the duration of its closure only:
//!
//! - The pointer comes from a live exclusive borrow that [`with_pm`] holds until it returns, so
//!   the referent outlives every use, and no other code can reach the back end meanwhile.
//! - A guard restores the previous value (normally `None`) when [`with_pm`] returns *or unwinds*,
//!   so the pointer never outlives the borrow.
//! - SQLite calls the VFS synchronously, on the thread that called into it (locsim starts no
//!   SQLite worker threads), so a callback sees the pointer of its own thread's [`with_pm`].
//! - A callback takes the pointer *out* of the cell while it holds the `&mut dyn Pm` made from
//!   it, and puts it back after: a nested callback cannot make a second `&mut`.
//! - A callback made with no back end set (e.g. SQLite closing a connection outside
//!   [`with_pm`]) returns an I/O error instead of dereferencing anything.
//!
//! A panic inside the back end (e.g. the simulator's "store outside a transaction" assertion)
//! cannot unwind through SQLite's C frames: the callback catches it, returns an I/O error to
//! SQLite, and [`with_pm`] resumes the panic once SQLite has returned.

use super::Region;
use crate::types::Addr;
use crate::workload::Pm;
use rusqlite::ffi;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::OnceLock;

/// Name under which the VFS is registered (not as the default VFS).
pub const VFS_NAME: &str = "locsim-pm";
const VFS_NAME_C: &CStr = c"locsim-pm";
/// File names are `locsim-pm:<base>:<capacity_bytes>` (see [`Region`]).
pub const NAME_PREFIX: &str = "locsim-pm:";
const MAX_PATHNAME: c_int = 512;
/// Largest chunk of zeros stored at once when a write or truncate extends the file.
const ZERO_CHUNK: usize = 4096;

type PmPtr = NonNull<dyn Pm + 'static>;

thread_local! {
    static CURRENT: Cell<Option<PmPtr>> = const { Cell::new(None) };
    static PANICKED: RefCell<Option<Box<dyn Any + Send>>> = const { RefCell::new(None) };
}

/// Run `f` with `pm` as the back end of every VFS call SQLite makes on this thread. Calls
/// nest (the previous back end is restored). A panic raised by the back end inside a VFS call
/// is resumed here after `f` returns.
pub fn with_pm<'a, R>(pm: &'a mut (dyn Pm + 'a), f: impl FnOnce() -> R) -> R {
    let ptr: NonNull<dyn Pm + 'a> = NonNull::from(pm);
    // SAFETY: only the lifetime is erased; see the module doc: the guard removes the pointer
    // before the borrow `'a` ends, on every exit path.
    let ptr: PmPtr = unsafe { std::mem::transmute::<NonNull<dyn Pm + 'a>, PmPtr>(ptr) };
    let _guard = Guard { prev: CURRENT.with(|c| c.replace(Some(ptr))) };
    let r = f();
    if let Some(payload) = PANICKED.with(|p| p.borrow_mut().take()) {
        std::panic::resume_unwind(payload);
    }
    r
}

/// Whether a back end is set on this thread (for tests of the clean-up).
pub fn has_back_end() -> bool {
    CURRENT.with(|c| c.get().is_some())
}

struct Guard {
    prev: Option<PmPtr>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
        if std::thread::panicking() {
            if let Some(p) = PANICKED.with(|p| p.borrow_mut().take()) {
                eprintln!("sqlite vfs: back end panicked: {}", panic_text(&p));
            }
        }
    }
}

fn panic_text(p: &Box<dyn Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(non-string payload)".into())
}

/// Run `f` on the current back end; `err` if there is none or if `f` panics.
fn on_pm(err: c_int, f: impl FnOnce(&mut dyn Pm) -> c_int) -> c_int {
    let Some(mut ptr) = CURRENT.with(|c| c.take()) else {
        return err;
    };
    // SAFETY: `ptr` came from the `&mut` that `with_pm` holds (module doc); it was taken out of
    // the cell, so this is the only reference made from it until it is put back below.
    let result = catch_unwind(AssertUnwindSafe(|| f(unsafe { ptr.as_mut() })));
    CURRENT.with(|c| c.set(Some(ptr)));
    result.unwrap_or_else(|payload| {
        PANICKED.with(|p| *p.borrow_mut() = Some(payload));
        err
    })
}

// ---- file operations on a region (plain Rust, no FFI) ----

fn file_size(pm: &mut dyn Pm, r: Region) -> u64 {
    pm.load_u64(Addr(r.base)).min(r.capacity_bytes)
}

fn zero_fill(pm: &mut dyn Pm, r: Region, from: u64, to: u64) {
    let zeros = [0u8; ZERO_CHUNK];
    let mut at = from;
    while at < to {
        let n = (to - at).min(ZERO_CHUNK as u64);
        pm.store(Addr(r.file_start() + at), &zeros[..n as usize]);
        at += n;
    }
}

fn read(pm: &mut dyn Pm, r: Region, buf: &mut [u8], off: u64) -> c_int {
    let size = file_size(pm, r);
    let n = size.saturating_sub(off).min(buf.len() as u64) as usize;
    if n > 0 {
        pm.load(Addr(r.file_start() + off), &mut buf[..n]);
    }
    buf[n..].fill(0);
    if n < buf.len() {
        ffi::SQLITE_IOERR_SHORT_READ
    } else {
        ffi::SQLITE_OK
    }
}

fn write(pm: &mut dyn Pm, r: Region, buf: &[u8], off: u64) -> c_int {
    let end = off + buf.len() as u64;
    if end > r.capacity_bytes {
        return ffi::SQLITE_FULL;
    }
    let size = file_size(pm, r);
    if off > size {
        zero_fill(pm, r, size, off);
    }
    pm.store(Addr(r.file_start() + off), buf);
    if end > size {
        pm.store_u64(Addr(r.base), end);
    }
    ffi::SQLITE_OK
}

fn truncate(pm: &mut dyn Pm, r: Region, new_size: u64) -> c_int {
    if new_size > r.capacity_bytes {
        return ffi::SQLITE_FULL;
    }
    let size = file_size(pm, r);
    if new_size > size {
        zero_fill(pm, r, size, new_size);
    }
    if new_size != size {
        pm.store_u64(Addr(r.base), new_size);
    }
    ffi::SQLITE_OK
}

// ---- the C side ----

/// SQLite's file object for one open database file: the method table, then the region.
#[repr(C)]
struct PmFile {
    base: ffi::sqlite3_file,
    region: Region,
}

/// # Safety
/// `f` must be a file opened by `x_open` (SQLite only calls these methods on such files).
unsafe fn region_of(f: *mut ffi::sqlite3_file) -> Region {
    (*(f as *const PmFile)).region
}

fn offset(off: ffi::sqlite3_int64) -> Option<u64> {
    u64::try_from(off).ok()
}

unsafe extern "C" fn x_close(_f: *mut ffi::sqlite3_file) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_read(f: *mut ffi::sqlite3_file, buf: *mut c_void, amt: c_int, off: ffi::sqlite3_int64) -> c_int {
    let (Some(off), Ok(amt)) = (offset(off), usize::try_from(amt)) else {
        return ffi::SQLITE_IOERR_READ;
    };
    let r = region_of(f);
    // SAFETY: SQLite passes a buffer of `amt` writable bytes.
    let buf = std::slice::from_raw_parts_mut(buf as *mut u8, amt);
    on_pm(ffi::SQLITE_IOERR_READ, |pm| read(pm, r, buf, off))
}

unsafe extern "C" fn x_write(
    f: *mut ffi::sqlite3_file,
    buf: *const c_void,
    amt: c_int,
    off: ffi::sqlite3_int64,
) -> c_int {
    let (Some(off), Ok(amt)) = (offset(off), usize::try_from(amt)) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    let r = region_of(f);
    // SAFETY: SQLite passes a buffer of `amt` readable bytes.
    let buf = std::slice::from_raw_parts(buf as *const u8, amt);
    on_pm(ffi::SQLITE_IOERR_WRITE, |pm| write(pm, r, buf, off))
}

unsafe extern "C" fn x_truncate(f: *mut ffi::sqlite3_file, size: ffi::sqlite3_int64) -> c_int {
    let Some(size) = offset(size) else {
        return ffi::SQLITE_IOERR_TRUNCATE;
    };
    let r = region_of(f);
    on_pm(ffi::SQLITE_IOERR_TRUNCATE, |pm| truncate(pm, r, size))
}

unsafe extern "C" fn x_sync(_f: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_file_size(f: *mut ffi::sqlite3_file, out: *mut ffi::sqlite3_int64) -> c_int {
    let r = region_of(f);
    on_pm(ffi::SQLITE_IOERR_FSTAT, |pm| {
        // SAFETY: SQLite passes a valid out pointer.
        unsafe { *out = file_size(pm, r) as ffi::sqlite3_int64 };
        ffi::SQLITE_OK
    })
}

/// Locks always succeed: one connection at a time uses a file (shared by both VFSes, as the two
/// functions after it).
pub(crate) unsafe extern "C" fn x_lock(_f: *mut ffi::sqlite3_file, _level: c_int) -> c_int {
    ffi::SQLITE_OK
}

pub(crate) unsafe extern "C" fn x_check_reserved_lock(_f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    *out = 0;
    ffi::SQLITE_OK
}

pub(crate) unsafe extern "C" fn x_file_control(_f: *mut ffi::sqlite3_file, _op: c_int, _arg: *mut c_void) -> c_int {
    ffi::SQLITE_NOTFOUND
}

/// The atomic write unit of the persistent memory is a 64-byte block. SQLite raises anything
/// below 512 to 512 when the device reports power-safe overwrite, below every page size.
unsafe extern "C" fn x_sector_size(_f: *mut ffi::sqlite3_file) -> c_int {
    64
}

/// Power-safe overwrite: writing a range never damages bytes outside it.
unsafe extern "C" fn x_device_characteristics(_f: *mut ffi::sqlite3_file) -> c_int {
    ffi::SQLITE_IOCAP_POWERSAFE_OVERWRITE
}

/// The io-methods table (version 1: no shared memory, no memory mapping) of a VFS whose file
/// functions are `x_close`, `x_read`, `x_write`, `x_truncate`, `x_sync`, `x_file_size`,
/// `x_sector_size` and `x_device_characteristics` in the module that expands it (this VFS and
/// the journal's); locking and file control are this module's for both.
macro_rules! io_methods {
    () => {
        ffi::sqlite3_io_methods {
            iVersion: 1,
            xClose: Some(x_close),
            xRead: Some(x_read),
            xWrite: Some(x_write),
            xTruncate: Some(x_truncate),
            xSync: Some(x_sync),
            xFileSize: Some(x_file_size),
            xLock: Some($crate::workload::sqlite::bridge::vfs::x_lock),
            xUnlock: Some($crate::workload::sqlite::bridge::vfs::x_lock),
            xCheckReservedLock: Some($crate::workload::sqlite::bridge::vfs::x_check_reserved_lock),
            xFileControl: Some($crate::workload::sqlite::bridge::vfs::x_file_control),
            xSectorSize: Some(x_sector_size),
            xDeviceCharacteristics: Some(x_device_characteristics),
            xShmMap: None,
            xShmLock: None,
            xShmBarrier: None,
            xShmUnmap: None,
            xFetch: None,
            xUnfetch: None,
        }
    };
}
pub(crate) use io_methods;

/// Turn off SQLite's memory statistics, before SQLite initializes (registering a VFS does): they
/// take one process-wide mutex at every allocation, which the journal crash checker's workers
/// contend for (`journal-crashtest --crashes 1000`: 4.8 -> 4.5 s on one worker, 4.7 -> 4.3 s on
/// two). Nothing here reads them. Too late if the process opened a database before; then it
/// changes nothing. (The workers still share one page-cache mutex: the bundled SQLite is built
/// with `SQLITE_ENABLE_MEMORY_MANAGEMENT`, under which every connection's pages are in one
/// process-wide group.)
fn no_memory_statistics() {
    static DONE: std::sync::Once = std::sync::Once::new();
    // SAFETY: a documented configuration call taking one int; before initialization it takes
    // effect, after it returns SQLITE_MISUSE and changes nothing.
    DONE.call_once(|| unsafe {
        ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int);
    });
}

/// Register a VFS once per process: `make` builds it the first time; it is leaked, so it stays
/// valid for the life of the process as SQLite requires. `what` names it in the error.
pub fn register_once(
    done: &'static OnceLock<c_int>,
    make: impl FnOnce() -> ffi::sqlite3_vfs,
    what: &str,
) -> Result<(), String> {
    no_memory_statistics();
    // SAFETY: the struct is leaked and registered at most once (OnceLock).
    let rc = *done.get_or_init(|| unsafe { ffi::sqlite3_vfs_register(Box::into_raw(Box::new(make())), 0) });
    if rc == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(format!("sqlite: registering {what} failed with code {rc}"))
    }
}

static IO_METHODS: ffi::sqlite3_io_methods = io_methods!();

/// Parse `locsim-pm:<base>:<capacity_bytes>`.
fn parse_name(name: &CStr) -> Option<Region> {
    let rest = name.to_str().ok()?.strip_prefix(NAME_PREFIX)?;
    let (base, cap) = rest.split_once(':')?;
    Some(Region { base: base.parse().ok()?, capacity_bytes: cap.parse().ok()? })
}

unsafe extern "C" fn x_open(
    _vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    f: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    (*f).pMethods = ptr::null();
    if flags & ffi::SQLITE_OPEN_MAIN_DB == 0 || name.is_null() {
        return ffi::SQLITE_CANTOPEN;
    }
    let Some(region) = parse_name(CStr::from_ptr(name)) else {
        return ffi::SQLITE_CANTOPEN;
    };
    let pf = f as *mut PmFile;
    ptr::addr_of_mut!((*pf).region).write(region);
    (*f).pMethods = &IO_METHODS;
    if !out_flags.is_null() {
        *out_flags = flags;
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_delete(_vfs: *mut ffi::sqlite3_vfs, _name: *const c_char, _sync_dir: c_int) -> c_int {
    ffi::SQLITE_OK
}

/// Every name is reported absent: there are no journals to find.
unsafe extern "C" fn x_access(
    _vfs: *mut ffi::sqlite3_vfs,
    _name: *const c_char,
    _flags: c_int,
    out: *mut c_int,
) -> c_int {
    *out = 0;
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_full_pathname(
    _vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    n_out: c_int,
    out: *mut c_char,
) -> c_int {
    let bytes = CStr::from_ptr(name).to_bytes_with_nul();
    if bytes.len() > n_out.max(0) as usize {
        return ffi::SQLITE_CANTOPEN;
    }
    ptr::copy_nonoverlapping(bytes.as_ptr() as *const c_char, out, bytes.len());
    ffi::SQLITE_OK
}

/// Constant "randomness" (zeros): results never depend on the host; shared by the PCM journal's
/// VFS, which seeds SQLite's generator through `SQLITE_TESTCTRL_PRNG_SEED` instead.
unsafe extern "C" fn x_randomness(_vfs: *mut ffi::sqlite3_vfs, n: c_int, out: *mut c_char) -> c_int {
    ptr::write_bytes(out, 0, n.max(0) as usize);
    n
}

unsafe extern "C" fn x_sleep(_vfs: *mut ffi::sqlite3_vfs, us: c_int) -> c_int {
    us
}

/// A constant clock (the Unix epoch as a Julian day number).
unsafe extern "C" fn x_current_time(_vfs: *mut ffi::sqlite3_vfs, out: *mut f64) -> c_int {
    *out = 2_440_587.5;
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_get_last_error(_vfs: *mut ffi::sqlite3_vfs, _n: c_int, _out: *mut c_char) -> c_int {
    0
}

/// A VFS named `name` whose host-facing callbacks are deterministic (constant clock, zero
/// randomness, no sleeping, no dynamic libraries); the caller adds xOpen, xDelete, xAccess. Shared
/// with the PCM journal's VFS.
pub(crate) fn deterministic_vfs(name: *const c_char, os_file_bytes: usize, max_pathname: c_int) -> ffi::sqlite3_vfs {
    ffi::sqlite3_vfs {
        iVersion: 1,
        szOsFile: os_file_bytes as c_int,
        mxPathname: max_pathname,
        pNext: ptr::null_mut(),
        zName: name,
        pAppData: ptr::null_mut(),
        xOpen: None,
        xDelete: None,
        xAccess: None,
        xFullPathname: Some(x_full_pathname),
        xDlOpen: None,
        xDlError: None,
        xDlSym: None,
        xDlClose: None,
        xRandomness: Some(x_randomness),
        xSleep: Some(x_sleep),
        xCurrentTime: Some(x_current_time),
        xGetLastError: Some(x_get_last_error),
        xCurrentTimeInt64: None,
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    }
}

/// Register the VFS once per process (SQLite keeps the pointer for the life of the process).
pub fn register() -> Result<(), String> {
    static DONE: OnceLock<c_int> = OnceLock::new();
    let make = || ffi::sqlite3_vfs {
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        ..deterministic_vfs(VFS_NAME_C.as_ptr(), std::mem::size_of::<PmFile>(), MAX_PATHNAME)
    };
    register_once(&DONE, make, "the VFS")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::native::Native;

    const R: Region = Region { base: 64, capacity_bytes: 4096 };

    fn mem() -> Native {
        Native::new(vec![0xEE; R.end() as usize])
    }

    #[test]
    fn a_write_past_the_end_zero_fills_the_gap_and_grows_the_size() {
        let mut pm = mem();
        pm.store_u64(Addr(R.base), 0);
        assert_eq!(write(&mut pm, R, &[7; 10], 100), ffi::SQLITE_OK);
        assert_eq!(file_size(&mut pm, R), 110);
        let mut buf = [1u8; 120];
        assert_eq!(read(&mut pm, R, &mut buf, 0), ffi::SQLITE_IOERR_SHORT_READ);
        assert!(buf[..100].iter().all(|&b| b == 0));
        assert!(buf[100..110].iter().all(|&b| b == 7));
        assert!(buf[110..].iter().all(|&b| b == 0), "past the end reads zeros");
    }

    #[test]
    fn truncate_shrinks_and_capacity_is_enforced() {
        let mut pm = mem();
        pm.store_u64(Addr(R.base), 0);
        assert_eq!(write(&mut pm, R, &[7; 100], 0), ffi::SQLITE_OK);
        assert_eq!(truncate(&mut pm, R, 40), ffi::SQLITE_OK);
        assert_eq!(file_size(&mut pm, R), 40);
        assert_eq!(write(&mut pm, R, &[1; 2], 4095), ffi::SQLITE_FULL);
        assert_eq!(truncate(&mut pm, R, 4097), ffi::SQLITE_FULL);
        pm.store_u64(Addr(R.base), u64::MAX);
        assert_eq!(file_size(&mut pm, R), 4096, "a garbage size is clamped");
    }

    #[test]
    fn file_names_round_trip_to_regions() {
        let name = std::ffi::CString::new(R.file_name()).unwrap();
        assert_eq!(parse_name(&name), Some(R));
        assert_eq!(parse_name(c"locsim-pm:1:x"), None);
        assert_eq!(parse_name(c"other"), None);
    }
}
