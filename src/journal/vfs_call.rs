//! The calls SQLite makes into the journal VFS and what each returns to it: the vocabulary the
//! VFS ([`super::vfs`]) carries out and a recording ([`super::call_record`]) keeps.

use rusqlite::ffi;
use std::ffi::c_int;

/// What SQLite appends to a database file name to name its rollback journal.
pub const SUFFIX: &str = "-journal";

/// One call of SQLite into the VFS that reads or changes the world ([`super::vfs::World`]):
/// the file callbacks' arguments (`journal`: the file is a journal slot, else a database file;
/// `idx`: the slot or the database file's index). The calls that touch neither (close, locks,
/// sector size) are not calls here.
pub enum Call<'a> {
    /// Open `name` with SQLite's `flags`: [`Outcome::value`] is the file's code (the index,
    /// plus `1 << 20` for a journal slot), or -1 when it cannot be opened.
    Open {
        name: &'a str,
        flags: c_int,
    },
    Read {
        journal: bool,
        idx: usize,
        off: u64,
        buf: &'a mut [u8],
    },
    Write {
        journal: bool,
        idx: usize,
        off: u64,
        data: &'a [u8],
    },
    Truncate {
        journal: bool,
        idx: usize,
        size: u64,
    },
    Sync {
        journal: bool,
        idx: usize,
    },
    /// [`Outcome::value`]: the file's size.
    FileSize {
        journal: bool,
        idx: usize,
    },
    Delete {
        name: &'a str,
    },
    /// [`Outcome::value`]: 1 if the file exists.
    Access {
        name: &'a str,
    },
}

impl Call<'_> {
    /// What SQLite is told when the call cannot be carried out.
    pub fn io_error(&self) -> c_int {
        match self {
            Call::Open { .. } => ffi::SQLITE_CANTOPEN,
            Call::Read { .. } => ffi::SQLITE_IOERR_READ,
            Call::Write { .. } => ffi::SQLITE_IOERR_WRITE,
            Call::Truncate { .. } => ffi::SQLITE_IOERR_TRUNCATE,
            Call::Sync { .. } => ffi::SQLITE_IOERR_FSYNC,
            Call::FileSize { .. } => ffi::SQLITE_IOERR_FSTAT,
            Call::Delete { .. } => ffi::SQLITE_IOERR_DELETE,
            Call::Access { .. } => ffi::SQLITE_IOERR_ACCESS,
        }
    }
}

/// What a [`Call`] returns to SQLite: its result code, and the value of the calls that have one.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub rc: c_int,
    pub value: i64,
}

impl Outcome {
    pub(super) fn rc(rc: c_int) -> Outcome {
        Outcome { rc, value: 0 }
    }
}
