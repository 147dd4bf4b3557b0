//! Byte formats of the memory log area. Each format has one module that encodes and decodes
//! it, little-endian throughout, and a page in `docs/formats/` with its layout and the
//! argument of why every crash point recovers.
//!
//! - [`head`]: the log head, block 0 of the log area (start of the valid log).
//! - [`wal`]: H-WAL's block-granular redo log (descriptors, data blocks, commit records).
//! - [`swal`]: S-WAL's software redo log (byte-granular entries written through the cache).
//! - [`ec`]: Eager Commit's block groups with META blocks (EC-WAL; LOC).
//! - [`loc`]: LOC-WAL's Tx Dependency Pair blocks, kept in the same block groups.
//! - [`nvllc`]: Kiln's non-volatile LLC state (commit register, committed lines).
//! - [`proteus`]: Proteus's undo entries, in its log pending queue and spilled to memory.
//! - [`atom`]: ATOM's hardware undo log (metadata lines and old-data entries).
//! - [`hoop`]: HOOP's out-of-place region of memory slices.
//! - [`sundo`]: S-Undo's software undo log (old lines written through the cache, PMDK's form).

pub mod atom;
pub mod ec;
pub mod head;
pub mod hoop;
pub mod loc;
pub mod nvllc;
pub mod proteus;
pub mod sundo;
pub mod swal;
pub mod wal;

/// Little-endian field access on a byte slice, used by every format module.
pub(crate) mod le {
    #[inline]
    pub fn u32_at(b: &[u8], off: usize) -> u32 {
        u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
    }
    #[inline]
    pub fn u64_at(b: &[u8], off: usize) -> u64 {
        u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
    }
    #[inline]
    pub fn put_u32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }
    #[inline]
    pub fn put_u64(b: &mut [u8], off: usize, v: u64) {
        b[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }
}
