//! `pcmjournal`: a loadable SQLite extension whose VFS keeps each database's rollback journal
//! in locsim's simulated PCM journal (`locsim::journal`, the paper's design) and passes the
//! database file itself through to the default VFS. Docs: docs/your-sqlite-app.md; the PCM
//! image file: docs/formats/pcm-journal-image.md.
//!
//! The journal model is the one `locsim journal` runs: the journal stream is translated call by
//! call by the same functions ([`locsim::journal::vfs::journal_write`] and the rest) into the
//! same structures ([`Journal`], [`Media`]); this file only binds them to real files:
//!
//! - each database `D` opened with `vfs=pcmjournal` gets its own PCM journal area, kept in
//!   memory and mirrored block by block into the image file `D-pcm` before each VFS call
//!   returns, so the journal is as durable as PCM against a killed process: the next process
//!   rebuilds the DRAM metadata from the image ([`Journal::rebuild`]) and SQLite finds and rolls
//!   back a hot journal by itself;
//! - URI parameters choose the model: `pcm_config` (a Table IV name, default
//!   [`DEFAULT_CONFIG`]), `pcm_frames` (3..=64, default 32), `pcm_seed` (SQLite's generator is
//!   seeded with it when the database opens, as `locsim journal --seed` does; 0 leaves it
//!   alone; default 1), `pcm_bug` (an injected defect of `journal-crashtest --inject-bug`) and
//!   `pcm_kill_at` (the process kills itself with SIGKILL as it is about to make its N-th
//!   database file write, counted from 0: the crash test's mid-transaction kill);
//! - `SELECT pcm_journal_stats()` returns the figures of the connection's main database.
//!
//! Every call into SQLite goes through the host's `sqlite3_api_routines` (src/shim.c); the
//! bundled SQLite that the `locsim` crate links is never called from here (and the library
//! exports no symbol of it: tests/clients.rs checks).

use libsqlite3_sys as ffi;
use locsim::journal::alloc::Journal;
use locsim::journal::media::{Media, Snapshot, Timing};
use locsim::journal::replay;
use locsim::journal::vfs::{self, Bug, World};
use locsim::journal::{self as jr, format, Policy};
use serde::Serialize;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// The VFS name.
pub const VFS_NAME: &CStr = c"pcmjournal";
/// The configuration when the URI names none: the paper's full design.
pub const DEFAULT_CONFIG: &str = "RU20-S2X-WH64";
/// What the image file's name adds to the database file's.
pub const IMAGE_SUFFIX: &str = "-pcm";
/// Image file header (docs/formats/pcm-journal-image.md).
pub const IMAGE_MAGIC: &[u8; 8] = b"PCMJIMG1";
pub const IMAGE_HEADER: u64 = 64;
const CONFIG_FIELD: std::ops::Range<usize> = 16..48;

extern "C" {
    fn pcmx_init(
        db: *mut ffi::sqlite3,
        err: *mut *mut c_char,
        api: *const c_void,
        make_vfs: unsafe extern "C" fn(*mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs,
        stats: unsafe extern "C" fn(*const c_char) -> *mut c_char,
        free: unsafe extern "C" fn(*mut c_char),
        settings: *const c_char,
    ) -> c_int;
    fn pcmx_uri_parameter(file: *const c_char, param: *const c_char) -> *const c_char;
    fn pcmx_seed_prng(x: c_int) -> c_int;
    fn pcmx_libversion() -> *const c_char;
}

/// The entry point SQLite's `.load` / `sqlite3_load_extension` finds from the file name.
///
/// # Safety
/// Called by SQLite with a connection, an error-message out pointer and its API routines.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_pcmjournal_init(
    db: *mut ffi::sqlite3,
    err: *mut *mut c_char,
    api: *const c_void,
) -> c_int {
    static SETTINGS: OnceLock<CString> = OnceLock::new();
    let settings = SETTINGS.get_or_init(|| CString::new(replay::SETTINGS).expect("no NUL"));
    pcmx_init(db, err, api, make_vfs, stats_json, free_json, settings.as_ptr())
}

// ---- the PCM areas (plain Rust) ----

/// One database's PCM journal area and its image file.
struct Area {
    /// The database file's full path, as SQLite names it.
    db: String,
    /// The name the journal slot carries in PCM: the database file's name without directory.
    slot_name: String,
    world: World,
    image: File,
    image_path: String,
    seed: u64,
    frames: u64,
    recovered_hot_journal: bool,
    db_syncs: u64,
    /// Database file write calls so far, and the one the process dies at.
    db_writes: u64,
    kill_at: Option<u64>,
}

static AREAS: Mutex<Vec<Area>> = Mutex::new(Vec::new());

fn areas() -> MutexGuard<'static, Vec<Area>> {
    AREAS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The model's settings of one database, from its URI parameters.
#[derive(Debug)]
pub struct Params {
    pub policy: Policy,
    pub frames: u64,
    pub seed: u64,
    pub bug: Option<Bug>,
    pub kill_at: Option<u64>,
}

/// The URI parameters of a database (`get` looks one up); an error names the parameter and
/// what is allowed.
pub fn params(get: impl Fn(&str) -> Option<String>) -> Result<Params, String> {
    let policy = Policy::parse(get("pcm_config").as_deref().unwrap_or(DEFAULT_CONFIG))
        .map_err(|e| format!("pcm_config: {e}"))?;
    let frames = match get("pcm_frames") {
        None => jr::DEFAULT_FRAMES,
        Some(v) => v
            .parse()
            .ok()
            .filter(|f| (3..=format::MAX_FRAMES).contains(f))
            .ok_or_else(|| format!("pcm_frames={v}: allowed 3..={}", format::MAX_FRAMES))?,
    };
    let seed = match get("pcm_seed") {
        None => 1,
        Some(v) => v.parse().map_err(|_| format!("pcm_seed={v}: allowed 0..=18446744073709551615"))?,
    };
    let bug = get("pcm_bug").map(|b| Bug::parse(&b).map_err(|e| e.replace("--inject-bug", "pcm_bug"))).transpose()?;
    let kill_at = get("pcm_kill_at")
        .map(|v| v.parse().map_err(|_| format!("pcm_kill_at={v}: allowed 0..=18446744073709551615")))
        .transpose()?;
    Ok(Params { policy, frames, seed, bug, kill_at })
}

/// The image header: magic, format version, frames, configuration name.
pub fn image_header(frames: u64, config: &str) -> [u8; IMAGE_HEADER as usize] {
    let mut h = [0u8; IMAGE_HEADER as usize];
    h[..8].copy_from_slice(IMAGE_MAGIC);
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h[12..16].copy_from_slice(&(frames as u32).to_le_bytes());
    h[CONFIG_FIELD][..config.len()].copy_from_slice(config.as_bytes());
    h
}

/// A PCM image read back: frames, configuration name, the PCM bytes.
pub fn parse_image(b: &[u8]) -> Result<(u64, String, Vec<u8>), String> {
    if b.len() < IMAGE_HEADER as usize || &b[..8] != IMAGE_MAGIC {
        return Err("not a pcmjournal image (magic PCMJIMG1)".into());
    }
    let version = u32::from_le_bytes(b[8..12].try_into().expect("4"));
    let frames = u32::from_le_bytes(b[12..16].try_into().expect("4")) as u64;
    if version != 1 {
        return Err(format!("image format version {version}: allowed 1"));
    }
    if b.len() as u64 != IMAGE_HEADER + frames * format::FRAME_BYTES {
        return Err(format!(
            "image of {} bytes: {frames} frames need {}",
            b.len(),
            IMAGE_HEADER + frames * format::FRAME_BYTES
        ));
    }
    let cfg = &b[CONFIG_FIELD];
    let cfg = String::from_utf8_lossy(&cfg[..cfg.iter().position(|&c| c == 0).unwrap_or(cfg.len())]).into_owned();
    Ok((frames, cfg, b[IMAGE_HEADER as usize..].to_vec()))
}

/// Open (or create) the area of database `db`: an existing image is rebuilt (and keeps its
/// configuration while it holds a hot journal); otherwise the area is formatted afresh.
fn open_area(db: &str, p: Params) -> Result<Area, String> {
    let image_path = format!("{db}{IMAGE_SUFFIX}");
    let slot_name = db.rsplit('/').next().unwrap_or(db).to_string();
    if format::SlotRec::name_field(&slot_name).is_none() {
        return Err(format!("database file name {slot_name}: allowed at most {} bytes", format::NAME_BYTES));
    }
    let pcm = locsim::journal::Device::default().pcm;
    let mut rebuilt = None;
    if let Ok(bytes) = std::fs::read(&image_path) {
        let (frames, cfg, pcm_bytes) = parse_image(&bytes).map_err(|e| format!("{image_path}: {e}"))?;
        let policy = Policy::parse(&cfg).map_err(|e| format!("{image_path}: {e}"))?;
        let mut media = Media::from_snapshot(&pcm, &Snapshot { pcm: pcm_bytes, dbs: Vec::new() }, Timing::default());
        let journal = Journal::rebuild(&mut media, policy).map_err(|e| format!("{image_path}: rebuild: {e}"))?;
        let hot = journal.slots.iter().any(|s| s.hot);
        if hot || (cfg == p.policy.name && frames == p.frames) {
            rebuilt = Some((media, journal, frames, hot));
        }
    }
    let image = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&image_path)
        .map_err(|e| format!("{image_path}: {e}"))?;
    let (mut media, mut journal, frames, hot) = match rebuilt {
        Some(r) => r,
        None => {
            let mut media = Media::new(&pcm, p.frames, Timing::default());
            Journal::format(&mut media);
            let journal = Journal::new(p.policy.clone(), p.frames as usize);
            let mut all = image_header(p.frames, &p.policy.name).to_vec();
            all.extend_from_slice(&media.bytes);
            image.set_len(0).and_then(|_| image.write_all_at(&all, 0)).map_err(|e| format!("{image_path}: {e}"))?;
            (media, journal, p.frames, false)
        }
    };
    media.reset_stats();
    media.written = Some(Vec::new());
    journal.stats = Default::default();
    journal.bug = p.bug;
    if p.seed != 0 {
        // SAFETY: a documented test-control call through the host's API routines.
        unsafe { pcmx_seed_prng(vfs::prng_seed_value(p.seed)) };
    }
    Ok(Area {
        db: db.to_string(),
        slot_name,
        world: World::new(media, journal, p.bug),
        image,
        image_path,
        seed: p.seed,
        frames,
        recovered_hot_journal: hot,
        db_syncs: 0,
        db_writes: 0,
        kill_at: p.kill_at,
    })
}

impl Area {
    /// Copy the PCM blocks written since the last call into the image file (before the VFS call
    /// returns to SQLite: what PCM holds, the image holds).
    fn flush(&mut self) -> c_int {
        let written = self.world.media.written.replace(Vec::new()).unwrap_or_default();
        for b in written {
            let block = &self.world.media.bytes[b as usize..(b + 64) as usize];
            if self.image.write_all_at(block, IMAGE_HEADER + b).is_err() {
                return ffi::SQLITE_IOERR_WRITE;
            }
        }
        ffi::SQLITE_OK
    }

    /// Run a journal operation, then mirror what it wrote.
    fn journal_op(&mut self, f: impl FnOnce(&mut World) -> c_int) -> c_int {
        let rc = f(&mut self.world);
        let flushed = self.flush();
        if rc == ffi::SQLITE_OK {
            flushed
        } else {
            rc
        }
    }
}

/// The figures `pcm_journal_stats()` returns.
#[derive(Serialize)]
pub struct Stats {
    pub config: String,
    pub frames: u64,
    pub seed: u64,
    pub database: String,
    pub pcm_image: String,
    /// The SQLite library of the process (the host's, not locsim's).
    pub sqlite_version: String,
    /// Database page writes (1 KiB units) plus journal records, as `locsim journal`.
    pub page_writes: u64,
    pub db_page_writes: u64,
    pub journal_records: u64,
    pub journals: u64,
    pub db_syncs: u64,
    pub total_bit_updates: u64,
    pub max_bit_updates: u64,
    pub manager_total_bit_updates: u64,
    pub manager_max_bit_updates: u64,
    pub pcm_block_writes: u64,
    /// Device time of the journal's PCM accesses, ns, and the PCM's energy over it.
    pub journal_pcm_ns: u64,
    pub journal_energy_nj: f64,
    /// The image held a hot journal when this process opened the database (SQLite then rolled
    /// it back through this VFS).
    pub recovered_hot_journal: bool,
    /// First journal request the model refused, if any.
    pub error: Option<String>,
    pub allocator: locsim::journal::alloc::Stats,
    pub version: &'static str,
    pub git_rev: &'static str,
}

fn stats_of(a: &mut Area) -> Stats {
    let w = &mut a.world;
    let wear = jr::Wear::of(&mut w.media);
    // SAFETY: sqlite3_libversion returns a static NUL-terminated string.
    let sqlite_version = unsafe { CStr::from_ptr(pcmx_libversion()) }.to_string_lossy().into_owned();
    Stats {
        config: w.journal.pol.name.clone(),
        frames: a.frames,
        seed: a.seed,
        database: a.db.clone(),
        pcm_image: a.image_path.clone(),
        sqlite_version,
        page_writes: w.db_page_writes + w.journal.stats.records,
        db_page_writes: w.db_page_writes,
        journal_records: w.journal.stats.records,
        journals: w.journal.stats.journals,
        db_syncs: a.db_syncs,
        total_bit_updates: wear.total,
        max_bit_updates: wear.max,
        manager_total_bit_updates: wear.manager_total,
        manager_max_bit_updates: wear.manager_max,
        pcm_block_writes: w.media.pcm_block_writes,
        journal_pcm_ns: w.media.pcm_ns,
        journal_energy_nj: jr::journal_energy_nj(&w.media),
        recovered_hot_journal: a.recovered_hot_journal,
        error: w.error.clone(),
        allocator: w.journal.stats.clone(),
        version: locsim::runner::VERSION,
        git_rev: locsim::runner::GIT_REV,
    }
}

unsafe extern "C" fn stats_json(db_file: *const c_char) -> *mut c_char {
    let Ok(name) = CStr::from_ptr(db_file).to_str() else { return ptr::null_mut() };
    let json = catch_unwind(AssertUnwindSafe(|| {
        let mut all = areas();
        let a = all.iter_mut().find(|a| a.db == name)?;
        serde_json::to_string(&stats_of(a)).ok()
    }));
    match json.ok().flatten().and_then(|j| CString::new(j).ok()) {
        Some(c) => c.into_raw(),
        None => ptr::null_mut(),
    }
}

unsafe extern "C" fn free_json(p: *mut c_char) {
    if !p.is_null() {
        drop(CString::from_raw(p));
    }
}

/// Run `f` on area `i`; `err` if it panics.
fn on_area(i: usize, err: c_int, f: impl FnOnce(&mut Area) -> c_int) -> c_int {
    let mut all = areas();
    let Some(a) = all.get_mut(i) else { return err };
    catch_unwind(AssertUnwindSafe(|| f(a))).unwrap_or(err)
}

// ---- the C side: files ----

const KIND_DB: u32 = 1;
const KIND_JOURNAL: u32 = 2;

/// Our part of an open file; for a database file the default VFS's file follows it.
#[repr(C)]
struct PFile {
    base: ffi::sqlite3_file,
    kind: u32,
    area: usize,
    slot: usize,
}

/// Where the default VFS's file of a database file lives: right after our part.
unsafe fn real(f: *mut ffi::sqlite3_file) -> *mut ffi::sqlite3_file {
    (f as *mut u8).add(std::mem::size_of::<PFile>()) as *mut ffi::sqlite3_file
}

unsafe fn pf<'a>(f: *mut ffi::sqlite3_file) -> &'a PFile {
    &*(f as *const PFile)
}

/// Call method `$m` of the default VFS's file under database file `$f`.
macro_rules! pass {
    ($f:expr, $m:ident $(, $a:expr)*) => {{
        let r = real($f);
        match (*(*r).pMethods).$m {
            Some(m) => m(r $(, $a)*),
            None => ffi::SQLITE_IOERR,
        }
    }};
}

unsafe extern "C" fn db_close(f: *mut ffi::sqlite3_file) -> c_int {
    pass!(f, xClose)
}
unsafe extern "C" fn db_read(f: *mut ffi::sqlite3_file, b: *mut c_void, n: c_int, off: i64) -> c_int {
    pass!(f, xRead, b, n, off)
}
unsafe extern "C" fn db_write(f: *mut ffi::sqlite3_file, b: *const c_void, n: c_int, off: i64) -> c_int {
    let _ = on_area(pf(f).area, ffi::SQLITE_OK, |a| {
        if a.kill_at == Some(a.db_writes) {
            // SAFETY: signals this process; SIGKILL does not return.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        a.db_writes += 1;
        a.world.db_page_writes += (n.max(0) as u64).div_ceil(format::PAGE_BYTES);
        ffi::SQLITE_OK
    });
    pass!(f, xWrite, b, n, off)
}
unsafe extern "C" fn db_truncate(f: *mut ffi::sqlite3_file, size: i64) -> c_int {
    pass!(f, xTruncate, size)
}
unsafe extern "C" fn db_sync(f: *mut ffi::sqlite3_file, flags: c_int) -> c_int {
    let rc = on_area(pf(f).area, ffi::SQLITE_IOERR_FSYNC, |a| {
        a.db_syncs += 1;
        let name = a.slot_name.clone();
        a.journal_op(|w| vfs::before_db_sync(w, &name))
    });
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    pass!(f, xSync, flags)
}
unsafe extern "C" fn db_file_size(f: *mut ffi::sqlite3_file, out: *mut i64) -> c_int {
    pass!(f, xFileSize, out)
}
unsafe extern "C" fn db_lock(f: *mut ffi::sqlite3_file, l: c_int) -> c_int {
    pass!(f, xLock, l)
}
unsafe extern "C" fn db_unlock(f: *mut ffi::sqlite3_file, l: c_int) -> c_int {
    pass!(f, xUnlock, l)
}
unsafe extern "C" fn db_check_reserved(f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    pass!(f, xCheckReservedLock, out)
}
unsafe extern "C" fn db_file_control(f: *mut ffi::sqlite3_file, op: c_int, arg: *mut c_void) -> c_int {
    pass!(f, xFileControl, op, arg)
}
/// The journal model's sector (the journal header is padded to it) and no device
/// characteristics, as locsim's own VFS says: the journal SQLite writes is then the same.
unsafe extern "C" fn sector_size(_f: *mut ffi::sqlite3_file) -> c_int {
    format::HDR_SECTOR as c_int
}
unsafe extern "C" fn device_characteristics(_f: *mut ffi::sqlite3_file) -> c_int {
    0
}

static DB_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(db_close),
    xRead: Some(db_read),
    xWrite: Some(db_write),
    xTruncate: Some(db_truncate),
    xSync: Some(db_sync),
    xFileSize: Some(db_file_size),
    xLock: Some(db_lock),
    xUnlock: Some(db_unlock),
    xCheckReservedLock: Some(db_check_reserved),
    xFileControl: Some(db_file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

unsafe extern "C" fn j_close(_f: *mut ffi::sqlite3_file) -> c_int {
    ffi::SQLITE_OK
}
unsafe extern "C" fn j_read(f: *mut ffi::sqlite3_file, b: *mut c_void, n: c_int, off: i64) -> c_int {
    let (Ok(off), Ok(n)) = (u64::try_from(off), usize::try_from(n)) else { return ffi::SQLITE_IOERR_READ };
    let p = pf(f);
    // SAFETY: SQLite passes a buffer of `n` writable bytes.
    let buf = std::slice::from_raw_parts_mut(b as *mut u8, n);
    on_area(p.area, ffi::SQLITE_IOERR_READ, |a| a.journal_op(|w| vfs::journal_read(w, p.slot, off, buf)))
}
unsafe extern "C" fn j_write(f: *mut ffi::sqlite3_file, b: *const c_void, n: c_int, off: i64) -> c_int {
    let (Ok(off), Ok(n)) = (u64::try_from(off), usize::try_from(n)) else { return ffi::SQLITE_IOERR_WRITE };
    let p = pf(f);
    // SAFETY: SQLite passes a buffer of `n` readable bytes.
    let buf = std::slice::from_raw_parts(b as *const u8, n);
    on_area(p.area, ffi::SQLITE_IOERR_WRITE, |a| a.journal_op(|w| vfs::journal_write(w, p.slot, off, buf)))
}
unsafe extern "C" fn j_truncate(f: *mut ffi::sqlite3_file, size: i64) -> c_int {
    let Ok(size) = u64::try_from(size) else { return ffi::SQLITE_IOERR_TRUNCATE };
    let p = pf(f);
    on_area(p.area, ffi::SQLITE_IOERR_TRUNCATE, |a| a.journal_op(|w| vfs::journal_truncate(w, p.slot, size)))
}
unsafe extern "C" fn j_sync(_f: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    // Journal writes are uncached PCM writes, durable (and in the image) when they return.
    ffi::SQLITE_OK
}
unsafe extern "C" fn j_file_size(f: *mut ffi::sqlite3_file, out: *mut i64) -> c_int {
    let p = pf(f);
    on_area(p.area, ffi::SQLITE_IOERR_FSTAT, |a| {
        // SAFETY: SQLite passes a valid out pointer.
        unsafe { *out = a.world.journal.stream_size(p.slot) as i64 };
        ffi::SQLITE_OK
    })
}
unsafe extern "C" fn j_lock(_f: *mut ffi::sqlite3_file, _l: c_int) -> c_int {
    ffi::SQLITE_OK
}
unsafe extern "C" fn j_check_reserved(_f: *mut ffi::sqlite3_file, out: *mut c_int) -> c_int {
    *out = 0;
    ffi::SQLITE_OK
}
unsafe extern "C" fn j_file_control(_f: *mut ffi::sqlite3_file, _op: c_int, _arg: *mut c_void) -> c_int {
    ffi::SQLITE_NOTFOUND
}

static JOURNAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(j_close),
    xRead: Some(j_read),
    xWrite: Some(j_write),
    xTruncate: Some(j_truncate),
    xSync: Some(j_sync),
    xFileSize: Some(j_file_size),
    xLock: Some(j_lock),
    xUnlock: Some(j_lock),
    xCheckReservedLock: Some(j_check_reserved),
    xFileControl: Some(j_file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

// ---- the C side: the VFS ----

unsafe fn dflt(v: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    (*v).pAppData as *mut ffi::sqlite3_vfs
}

/// The area of the database a journal file name belongs to.
fn area_of_journal(all: &[Area], name: &str) -> Option<usize> {
    let base = name.strip_suffix(vfs::SUFFIX)?;
    all.iter().position(|a| a.db == base)
}

unsafe extern "C" fn x_open(
    v: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    f: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    let d = dflt(v);
    (*f).pMethods = ptr::null();
    let text = if name.is_null() { None } else { CStr::from_ptr(name).to_str().ok() };
    if flags & ffi::SQLITE_OPEN_MAIN_JOURNAL != 0 {
        let Some(text) = text else { return ffi::SQLITE_CANTOPEN };
        let opened = catch_unwind(AssertUnwindSafe(|| {
            let mut all = areas();
            let i = area_of_journal(&all, text)?;
            let a = &mut all[i];
            let slot = a.world.journal.slot_for(&a.slot_name)?;
            Some((i, slot))
        }));
        let Ok(Some((i, slot))) = opened else { return ffi::SQLITE_CANTOPEN };
        let p = f as *mut PFile;
        ptr::addr_of_mut!((*p).kind).write(KIND_JOURNAL);
        ptr::addr_of_mut!((*p).area).write(i);
        ptr::addr_of_mut!((*p).slot).write(slot);
        (*f).pMethods = &JOURNAL_METHODS;
        if !out_flags.is_null() {
            *out_flags = flags;
        }
        return ffi::SQLITE_OK;
    }
    let Some(open) = (*d).xOpen else { return ffi::SQLITE_CANTOPEN };
    if flags & ffi::SQLITE_OPEN_MAIN_DB == 0 {
        // Temporary files, statement journals and the like: the default VFS's own, in place.
        return open(d, name, f, flags, out_flags);
    }
    let Some(text) = text else { return ffi::SQLITE_CANTOPEN };
    let r = real(f);
    let rc = open(d, name, r, flags, out_flags);
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let area = catch_unwind(AssertUnwindSafe(|| {
        let mut all = areas();
        if let Some(i) = all.iter().position(|a| a.db == text) {
            return Ok::<usize, String>(i);
        }
        let get = |p: &str| {
            let c = CString::new(p).expect("no NUL");
            // SAFETY: `name` is the filename SQLite passed to xOpen; the result is NULL or a
            // string inside it.
            let s = unsafe { pcmx_uri_parameter(name, c.as_ptr()) };
            (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
        };
        let a = params(get).and_then(|p| open_area(text, p))?;
        all.push(a);
        Ok(all.len() - 1)
    }));
    let i = match area {
        Ok(Ok(i)) => i,
        Ok(Err(e)) => {
            eprintln!("pcmjournal: {text}: {e}");
            if let Some(close) = (*(*r).pMethods).xClose {
                close(r);
            }
            return ffi::SQLITE_CANTOPEN;
        }
        Err(_) => return ffi::SQLITE_CANTOPEN,
    };
    let p = f as *mut PFile;
    ptr::addr_of_mut!((*p).kind).write(KIND_DB);
    ptr::addr_of_mut!((*p).area).write(i);
    ptr::addr_of_mut!((*p).slot).write(0);
    (*f).pMethods = &DB_METHODS;
    ffi::SQLITE_OK
}

unsafe extern "C" fn x_delete(v: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    let text = CStr::from_ptr(name).to_str().unwrap_or("");
    let rc = catch_unwind(AssertUnwindSafe(|| {
        let mut all = areas();
        let i = area_of_journal(&all, text)?;
        let a = &mut all[i];
        let slot_name = a.slot_name.clone();
        Some(a.journal_op(|w| vfs::journal_delete(w, &slot_name)))
    }));
    match rc {
        Ok(Some(rc)) => rc,
        Ok(None) => match (*dflt(v)).xDelete {
            Some(del) => del(dflt(v), name, sync_dir),
            None => ffi::SQLITE_IOERR_DELETE,
        },
        Err(_) => ffi::SQLITE_IOERR_DELETE,
    }
}

unsafe extern "C" fn x_access(v: *mut ffi::sqlite3_vfs, name: *const c_char, flags: c_int, out: *mut c_int) -> c_int {
    let text = CStr::from_ptr(name).to_str().unwrap_or("");
    let hot = catch_unwind(AssertUnwindSafe(|| {
        let all = areas();
        let i = area_of_journal(&all, text)?;
        Some(vfs::journal_exists(&all[i].world, &all[i].slot_name))
    }));
    match hot {
        Ok(Some(h)) => {
            *out = h as c_int;
            ffi::SQLITE_OK
        }
        Ok(None) => match (*dflt(v)).xAccess {
            Some(acc) => acc(dflt(v), name, flags, out),
            None => ffi::SQLITE_IOERR_ACCESS,
        },
        Err(_) => ffi::SQLITE_IOERR_ACCESS,
    }
}

/// Pass a VFS method to the default VFS unchanged.
macro_rules! vfs_pass {
    ($name:ident, $m:ident, $ret:ty, $err:expr, ($($a:ident: $t:ty),*)) => {
        unsafe extern "C" fn $name(v: *mut ffi::sqlite3_vfs $(, $a: $t)*) -> $ret {
            match (*dflt(v)).$m {
                Some(m) => m(dflt(v) $(, $a)*),
                None => $err,
            }
        }
    };
}
vfs_pass!(x_full_pathname, xFullPathname, c_int, ffi::SQLITE_CANTOPEN, (n: *const c_char, len: c_int, out: *mut c_char));
vfs_pass!(x_dl_open, xDlOpen, *mut c_void, ptr::null_mut(), (f: *const c_char));
vfs_pass!(x_dl_error, xDlError, (), (), (n: c_int, out: *mut c_char));
vfs_pass!(x_dl_close, xDlClose, (), (), (h: *mut c_void));
vfs_pass!(x_randomness, xRandomness, c_int, 0, (n: c_int, out: *mut c_char));
vfs_pass!(x_sleep, xSleep, c_int, 0, (us: c_int));
vfs_pass!(x_current_time, xCurrentTime, c_int, ffi::SQLITE_ERROR, (out: *mut f64));
vfs_pass!(x_get_last_error, xGetLastError, c_int, 0, (n: c_int, out: *mut c_char));
vfs_pass!(x_current_time_i64, xCurrentTimeInt64, c_int, ffi::SQLITE_ERROR, (out: *mut i64));

/// What xDlSym returns, as libsqlite3-sys types it.
type DlSym = unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char);
unsafe extern "C" fn x_dl_sym(v: *mut ffi::sqlite3_vfs, h: *mut c_void, sym: *const c_char) -> Option<DlSym> {
    match (*dflt(v)).xDlSym {
        Some(m) => m(dflt(v), h, sym),
        None => None,
    }
}

/// Build the VFS over the host's default VFS `d` (called once, at the first load).
unsafe extern "C" fn make_vfs(d: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    let sz = std::mem::size_of::<PFile>() as c_int + (*d).szOsFile;
    let v = ffi::sqlite3_vfs {
        iVersion: 2,
        szOsFile: sz,
        mxPathname: (*d).mxPathname,
        pNext: ptr::null_mut(),
        zName: VFS_NAME.as_ptr(),
        pAppData: d as *mut c_void,
        xOpen: Some(x_open),
        xDelete: Some(x_delete),
        xAccess: Some(x_access),
        xFullPathname: Some(x_full_pathname),
        xDlOpen: Some(x_dl_open),
        xDlError: Some(x_dl_error),
        xDlSym: Some(x_dl_sym),
        xDlClose: Some(x_dl_close),
        xRandomness: Some(x_randomness),
        xSleep: Some(x_sleep),
        xCurrentTime: Some(x_current_time),
        xGetLastError: Some(x_get_last_error),
        xCurrentTimeInt64: Some(x_current_time_i64),
        xSetSystemCall: None,
        xGetSystemCall: None,
        xNextSystemCall: None,
    };
    // Leaked: SQLite keeps the pointer for the life of the process.
    Box::into_raw(Box::new(v))
}
