//! The log head: block 0 of the memory log area. It says where the valid log starts and which
//! transaction sequence number is expected there. It is written only by truncation (after the
//! transactions before `start` are at home) and by recovery; a 64-byte write is atomic.
//!
//! | bytes  | field      | meaning                                                        |
//! |--------|------------|----------------------------------------------------------------|
//! | 0..8   | magic      | `LOCSIMLH`                                                     |
//! | 8..12  | format     | u32: 1 = H-WAL block log, 2 = S-WAL entry log, 3 = EC groups, 4 = LOC groups, 5 = Kiln fallback groups, 6 = HOOP slices |
//! | 12..16 | reserved   | 0                                                              |
//! | 16..24 | start      | u64: first valid log position (blocks for H-WAL, bytes S-WAL)  |
//! | 24..32 | start_seq  | u64: sequence number of the transaction logged at `start`      |
//! | 32..40 | home_below | u64, H-WAL and EC-WAL on more than one core: every transaction of any core whose global sequence number is below it is at home (0 with one core) |
//! | 40..64 | reserved   | 0                                                              |
//!
//! With more than one core the log area holds one region per core (`Layout::log_region`), each
//! with its own head in its first block (docs/formats/wal-log.md, "Regions").

use super::le;
use crate::types::{BlockData, BLOCK_BYTES};

pub const MAGIC: &[u8; 8] = b"LOCSIMLH";
/// Offset of the `home_below` field.
const HOME_BELOW_AT: usize = 32;

/// Which log body follows the head.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LogFormat {
    HWal = 1,
    SWal = 2,
    /// Eager Commit block groups; `start` is the SID of the first valid group.
    Ec = 3,
    /// LOC-WAL: the same block groups; `start` is the SID of the first valid group and
    /// `start_seq` the transaction sequence number (its low 8 bits are the TxID) of the first
    /// transaction logged from there.
    Loc = 4,
    /// Kiln's fallback log for lines that do not fit the NV-LLC: block groups; `start` as for
    /// Ec, `start_seq` the sequence number of the transaction logging from there.
    Kiln = 5,
    /// HOOP's out-of-place region ([`crate::log::hoop`]): `start` is the position of the first
    /// valid slice, `start_seq` the sequence number of the transaction there, `home_below` the
    /// global commit order below which every transaction is at home (garbage-collected).
    Hoop = 6,
}

/// Decoded log head.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LogHead {
    pub format: LogFormat,
    pub start: u64,
    pub start_seq: u64,
}

impl LogHead {
    /// Write this head into the log head block of an image (a protocol's `format`).
    pub fn write_initial(&self, layout: &crate::pmem::Layout, image: &mut [u8]) {
        image[layout.log_block0().range()].copy_from_slice(&self.encode());
    }

    /// Write this head into the head block of every core's log region (`Layout::log_region`;
    /// with one core, the log head block).
    pub fn write_regions(&self, layout: &crate::pmem::Layout, image: &mut [u8]) {
        for c in 0..layout.cores as usize {
            image[layout.log_region(c).0.range()].copy_from_slice(&self.encode());
        }
    }

    pub fn encode(&self) -> BlockData {
        let mut b = [0u8; BLOCK_BYTES];
        b[0..8].copy_from_slice(MAGIC);
        le::put_u32(&mut b, 8, self.format as u32);
        le::put_u64(&mut b, 16, self.start);
        le::put_u64(&mut b, 24, self.start_seq);
        b
    }

    /// [`LogHead::encode`] with `home_below` (bytes 32..40): every transaction of any core whose
    /// global sequence number is below it is at home. 0 with one core, whose single region
    /// needs no cross-region order (so its head bytes are the single-core format's).
    pub fn encode_home(&self, home_below: u64) -> BlockData {
        let mut b = self.encode();
        le::put_u64(&mut b, HOME_BELOW_AT, home_below);
        b
    }

    /// The `home_below` field of a head block (0 when unused).
    pub fn home_below(b: &[u8]) -> u64 {
        le::u64_at(b, HOME_BELOW_AT)
    }

    /// Decode; `None` if the block is not a head (wrong magic or format code).
    pub fn decode(b: &[u8]) -> Option<LogHead> {
        if &b[0..8] != MAGIC {
            return None;
        }
        let format = match le::u32_at(b, 8) {
            1 => LogFormat::HWal,
            2 => LogFormat::SWal,
            3 => LogFormat::Ec,
            4 => LogFormat::Loc,
            5 => LogFormat::Kiln,
            6 => LogFormat::Hoop,
            _ => return None,
        };
        Some(LogHead { format, start: le::u64_at(b, 16), start_seq: le::u64_at(b, 24) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trips_and_has_the_documented_bytes() {
        let h = LogHead { format: LogFormat::SWal, start: 0x0102_0304_0506_0708, start_seq: 9 };
        let b = h.encode();
        assert_eq!(&b[0..8], b"LOCSIMLH");
        assert_eq!(b[8], 2);
        assert_eq!(b[16], 0x08); // little-endian start
        assert_eq!(b[24], 9);
        assert_eq!(LogHead::decode(&b), Some(h));
        assert_eq!(LogHead::home_below(&b), 0, "unused with one core");
        let m = h.encode_home(0x1122);
        assert_eq!((m[32], m[33]), (0x22, 0x11), "home_below little-endian at byte 32");
        assert_eq!(LogHead::decode(&m), Some(h));
        assert_eq!(LogHead::home_below(&m), 0x1122);
        assert_eq!(h.encode_home(0), b, "0 is the single-core head, byte for byte");
    }

    #[test]
    fn zeroed_or_corrupt_block_is_not_a_head() {
        assert_eq!(LogHead::decode(&[0u8; 64]), None);
        let mut b = LogHead { format: LogFormat::HWal, start: 0, start_seq: 1 }.encode();
        b[8] = 7;
        assert_eq!(LogHead::decode(&b), None);
    }
}
