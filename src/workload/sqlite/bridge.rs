//! The SQLite bridge: real SQLite (compiled from the source `rusqlite` bundles) whose database
//! file lives in the simulated persistent data area and is read and written only through
//! `Pm`.
//!
//! # The file in persistent memory
//!
//! A database file occupies a fixed [`Region`] of the data area, little-endian:
//!
//! | bytes (from `region.base`) | content |
//! |---|---|
//! | 0..8 | file size in bytes, u64 |
//! | 8..64 | reserved, zero |
//! | 64..64 + capacity | the file's bytes; byte `i` of the file at `base + 64 + i` |
//!
//! The header is one 64-byte block, so the file starts block-aligned and a database page of
//! `P` bytes covers exactly `P / 64` blocks. Bytes past the file size are never returned by a
//! read (they may hold stale data after a truncation); a write past the size zero-fills the gap
//! first, so the file behaves as a POSIX file would. A write that would pass the capacity gets
//! `SQLITE_FULL`.
//!
//! # Which calls touch persistent memory
//!
//! `xRead`, `xWrite`, `xTruncate` and `xFileSize` become `Pm` loads and stores of the region.
//! `xSync` does nothing: durability comes from the protocol's commit, and the workload wraps each
//! SQLite transaction in exactly one storage transaction. Locks are no-ops (one connection per
//! file). Only the main database file can be opened: journals, statement journals and temporary
//! files are refused (`SQLITE_CANTOPEN`), so the caller runs with `journal_mode=OFF` and
//! `temp_store=MEMORY`, which keep SQLite's statement journal in volatile host memory. The
//! existence test for a journal always answers "absent", so SQLite never looks for a hot journal.
//! Randomness and the clock of this VFS are constants (determinism, docs/model.md section 7).
//!
//! # Reaching the back end
//!
//! SQLite calls the VFS from C, with no way to pass a Rust generic through. [`with_pm`] keeps a
//! thread-local raw pointer to the current `dyn Pm` for the duration of one closure, the only
//! place code may call into SQLite in a way that does I/O. See [`vfs`] for the safety argument.
//! A VFS call made outside [`with_pm`] gets an I/O error, never a dangling pointer.

pub mod vfs;

pub use vfs::with_pm;

use rusqlite::{Connection, OpenFlags};

/// Bytes of the header before the file's bytes (one block).
pub const HEADER_BYTES: u64 = 64;

/// Where one database file lives in the data area.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Byte address of the header.
    pub base: u64,
    /// Largest file size in bytes.
    pub capacity_bytes: u64,
}

impl Region {
    /// One past the last byte of the region.
    pub fn end(&self) -> u64 {
        self.base + HEADER_BYTES + self.capacity_bytes
    }

    /// Address of byte 0 of the file.
    pub fn file_start(&self) -> u64 {
        self.base + HEADER_BYTES
    }

    /// The file size recorded in a raw image of the data area (`None` if the image is too
    /// short to hold the header).
    pub fn recorded_size(&self, data: &[u8]) -> Option<u64> {
        let b = data.get(self.base as usize..self.base as usize + 8)?;
        Some(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// The file name the VFS parses back into this region.
    fn file_name(&self) -> String {
        format!("{}{}:{}", vfs::NAME_PREFIX, self.base, self.capacity_bytes)
    }
}

/// What runs before any connection of this process opens ([`before_open`]).
static BEFORE_OPEN: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Have `hook` run before every connection opens from now on (the first hook set stays).
///
/// The bundled SQLite keeps every connection's pages in one process-wide group
/// (`SQLITE_ENABLE_MEMORY_MANAGEMENT`): the pages a connection keeps cached, and so the reads it
/// makes, depend on the other connections open in the process. A module that keeps a connection
/// open between uses (a workload tape's recorder, `workload::tx_tape`) closes it here, so that a
/// connection opened next runs as it would alone.
pub fn set_before_open(hook: fn()) {
    let _ = BEFORE_OPEN.set(hook);
}

/// Run the hook of [`set_before_open`]: every opening of a connection calls this first.
pub fn before_open() {
    if let Some(hook) = BEFORE_OPEN.get() {
        hook();
    }
}

/// Open the database file in `region` through the persistent-memory VFS. Must run inside
/// [`with_pm`]: opening reads the file's header.
pub fn open(region: Region, read_only: bool) -> Result<Connection, String> {
    before_open();
    vfs::register()?;
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    Connection::open_with_flags_and_vfs(region.file_name(), flags, vfs::VFS_NAME)
        .map_err(|e| format!("sqlite: open: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::native::Native;
    use crate::workload::Pm;

    const R: Region = Region { base: 128, capacity_bytes: 64 * 1024 };

    fn fresh() -> Native {
        Native::new(vec![0u8; R.end() as usize])
    }

    #[test]
    fn a_table_written_through_the_vfs_lives_in_the_region_and_reopens() {
        let mut pm = fresh();
        pm.begin();
        with_pm(&mut pm, || {
            let c = open(R, false).unwrap();
            c.execute_batch(
                "PRAGMA page_size=1024; PRAGMA journal_mode=OFF; PRAGMA temp_store=MEMORY;
                 CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB);
                 INSERT INTO t VALUES (1, x'0102'), (2, zeroblob(3000));",
            )
            .unwrap();
        });
        pm.commit();
        let size = R.recorded_size(&pm.mem).unwrap();
        assert_eq!(size % 1024, 0, "whole pages");
        assert!(size >= 3 * 1024, "size {size}");
        assert_eq!(&pm.mem[R.file_start() as usize..][..16], b"SQLite format 3\0");
        assert!(pm.mem[..R.base as usize].iter().all(|&b| b == 0), "nothing below the region");
        let mut copy = Native::new(pm.mem.clone());
        let n: i64 = with_pm(&mut copy, || {
            let c = open(R, true).unwrap();
            c.query_row("SELECT sum(length(v)) FROM t", [], |r| r.get(0)).unwrap()
        });
        assert_eq!(n, 3002);
    }

    #[test]
    fn a_call_outside_with_pm_gets_an_io_error_not_a_crash() {
        let mut pm = fresh();
        let c = with_pm(&mut pm, || open(R, false).unwrap());
        let e = c.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY)").unwrap_err();
        assert!(e.to_string().contains("I/O"), "{e}");
    }

    #[test]
    fn a_file_larger_than_its_region_gets_sqlite_full() {
        let small = Region { base: 0, capacity_bytes: 8 * 1024 };
        let mut pm = Native::new(vec![0u8; small.end() as usize]);
        pm.begin();
        let e = with_pm(&mut pm, || {
            let c = open(small, false).unwrap();
            c.execute_batch(
                "PRAGMA page_size=1024; PRAGMA journal_mode=OFF;
                 CREATE TABLE t (v BLOB); INSERT INTO t VALUES (zeroblob(20000));",
            )
            .unwrap_err()
        });
        assert!(e.to_string().contains("full"), "{e}");
        assert!(R.recorded_size(&pm.mem).unwrap() <= small.capacity_bytes);
    }

    #[test]
    fn journals_and_temporary_files_are_refused() {
        let mut pm = fresh();
        pm.begin();
        let e = with_pm(&mut pm, || {
            let c = open(R, false).unwrap();
            c.execute_batch("PRAGMA journal_mode=DELETE; CREATE TABLE t (k INTEGER PRIMARY KEY);").unwrap_err()
        });
        assert!(e.to_string().contains("unable to open"), "{e}");
    }

    #[test]
    fn a_panic_in_the_back_end_reaches_the_caller_and_clears_the_pointer() {
        struct Exploding;
        impl Pm for Exploding {
            fn begin(&mut self) {}
            fn commit(&mut self) {}
            fn abort(&mut self) {}
            fn load(&mut self, _: crate::types::Addr, _: &mut [u8]) {
                panic!("boom in load")
            }
            fn store(&mut self, _: crate::types::Addr, _: &[u8]) {}
            fn compute(&mut self, _: u64) {}
            fn last_durable_tx(&self) -> u64 {
                0
            }
        }
        let r = std::panic::catch_unwind(|| {
            with_pm(&mut Exploding, || {
                // The error SQLite returns is dropped: the back end's panic is what surfaces.
                let _ = open(R, false).and_then(|c| {
                    c.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get::<_, i64>(0))
                        .map_err(|e| e.to_string())
                });
            })
        });
        let msg = r.unwrap_err();
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"boom in load"));
        assert!(!vfs::has_back_end(), "the pointer was cleared on unwind");
    }
}
