//! The log head: block 0 of the memory log area. It says where the valid log starts and which
//! transaction sequence number is expected there. It is written only by truncation (after the
//! transactions before `start` are at home) and by recovery; a 64-byte write is atomic.
//!
//! | bytes  | field      | meaning                                                        |
//! |--------|------------|----------------------------------------------------------------|
//! | 0..8   | magic      | `LOCSIMLH`                                                     |
//! | 8..12  | format     | u32: 1 = H-WAL block log, 2 = S-WAL entry log, 3 = EC groups, 4 = LOC groups, 5 = Kiln fallback groups, 6 = Proteus spilled undo entries, 7 = ATOM undo groups, 8 = HOOP slices, 9 = S-Undo entries |
//! | 12..16 | reserved   | 0                                                              |
//! | 16..24 | start      | u64: first valid log position (blocks for H-WAL, bytes S-WAL)  |
//! | 24..32 | start_seq  | u64: sequence number of the transaction logged at `start`      |
//! | 32..40 | home_below | u64, H-WAL and EC-WAL on more than one core: every transaction of any core whose global sequence number is below it is at home (0 with one core) |
//! | 40..64 | reserved   | 0                                                              |
//!
//! What `start` and `start_seq` mean, per format:
//!
//! | format | `start` | `start_seq` |
//! |--------|---------|-------------|
//! | HWal, SWal | the first valid log block (H-WAL) or byte (S-WAL) | the sequence number of the transaction logged there |
//! | Ec | the SID of the first valid Eager Commit block group | as HWal |
//! | Loc | the SID of the first valid group (LOC-WAL's groups) | the transaction sequence number (its low 8 bits are the TxID) of the first transaction logged from there |
//! | Kiln | as Ec (Kiln's fallback log for lines that do not fit the NV-LLC) | the sequence number of the transaction logging from there |
//! | Proteus | 0 | 0: the finish registers in the LPQ state say what is live (docs/formats/proteus-log.md) |
//! | Atom | 0 | the sequence number of the region's transaction whose log is not freed (its groups carry it) |
//! | Hoop | the position of the first valid slice | the sequence number of the transaction there; `home_below` is the global commit order below which every transaction is at home (garbage-collected) |
//! | SUndo | 0 | the generation whose undo entries are valid; commit invalidates them by moving to the next (docs/formats/sundo-log.md) |
//!
//! **Two-slot form** (`loc.two_slot_head`, LOC-WAL; the torn-write fix of docs/faults.md, off by
//! default): bytes 12..16 hold 1, and `start`, `start_seq` live in two slots written
//! alternately, each two 8-byte units:
//!
//! | bytes  | slot | unit |
//! |--------|------|------|
//! | 16..24 | 0 | bits 0..40 `start`, bits 40..64 check |
//! | 24..32 | 0 | bits 0..48 `start_seq`, bits 48..64 version |
//! | 48..56 | 1 | as 16..24 |
//! | 56..64 | 1 | as 24..32 |
//!
//! **Two-slot form with `home_below`** (`hoop.two_slot_head`, HOOP; the same fix for a head
//! whose GC also moves `home_below`): bytes 12..16 hold 2, and each slot is three 8-byte units:
//!
//! | bytes  | slot | unit |
//! |--------|------|------|
//! | 16..24 | 0 | bits 0..40 `start`, bits 40..64 check |
//! | 24..32 | 0 | bits 0..48 `start_seq`, bits 48..64 version |
//! | 32..40 | 0 | `home_below` (u64; where the plain form has it) |
//! | 40..48 | 1 | as 16..24 |
//! | 48..56 | 1 | as 24..32 |
//! | 56..64 | 1 | as 32..40 |
//!
//! The check is 24 bits of FNV-1a over the format, the slot number, `start`, `start_seq` and the
//! version (and, in the form with `home_below`, `home_below`). A head write puts the new head in the slot that does not hold the newest one, with
//! the next version (16-bit serial arithmetic), and keeps the other slot's bytes; decoding takes
//! the valid slot with the newer version. A torn head write can damage only the slot being
//! written, so the previous head stays readable (docs/formats/wal-log.md).
//!
//! With more than one core the log area holds one region per core (`Layout::log_region`), each
//! with its own head in its first block (docs/formats/wal-log.md, "Regions").

use super::le;
use crate::types::{BlockData, BLOCK_BYTES};

pub const MAGIC: &[u8; 8] = b"LOCSIMLH";
/// Offset of the `home_below` field.
const HOME_BELOW_AT: usize = 32;

/// Defines [`LogFormat`] from the format lines of the registration table (`src/protocols.rs`).
macro_rules! log_formats {
    (formats { $($format:ident = $code:literal => $module:ident $($reads:ident)?,)* } protocols { $($protocols:tt)* }) => {
        /// Which log body follows the head: a format line of the registration table, whose code
        /// is bytes 8..12.
        #[derive(Copy, Clone, Debug, PartialEq, Eq)]
        pub enum LogFormat {
            $($format = $code,)*
        }

        impl LogFormat {
            /// The registered format whose code is `code`.
            pub fn from_code(code: u32) -> Option<LogFormat> {
                [$(LogFormat::$format,)*].into_iter().find(|f| *f as u32 == code)
            }
        }
    };
}

registration_table!(log_formats);

/// Bytes 12..16 of a two-slot head.
const TWO_SLOTS: u32 = 1;
/// Bytes 12..16 of a two-slot head whose slots also hold `home_below`.
const TWO_SLOTS_HOME: u32 = 2;
/// Offsets of the two slots, per form.
const SLOT_AT: [usize; 2] = [16, 48];
const SLOT_HOME_AT: [usize; 2] = [16, 40];

/// Where a two-slot form keeps its slots, and whether they hold `home_below`.
fn slots_of(form: u32) -> Option<([usize; 2], bool)> {
    match form {
        TWO_SLOTS => Some((SLOT_AT, false)),
        TWO_SLOTS_HOME => Some((SLOT_HOME_AT, true)),
        _ => None,
    }
}
const START_BITS: u64 = 40;
const SEQ_BITS: u64 = 48;

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

    /// A two-slot head block holding only `self` (both slots, version 0): a log's first head.
    pub fn encode_two_slot(&self) -> BlockData {
        self.first_two_slot(TWO_SLOTS, 0)
    }

    /// A two-slot head block whose slots also hold `home_below` (`hoop.two_slot_head`), holding
    /// only `self` with `home_below` in both slots, version 0: a region's first head.
    pub fn encode_two_slot_home(&self, home_below: u64) -> BlockData {
        self.first_two_slot(TWO_SLOTS_HOME, home_below)
    }

    fn first_two_slot(&self, form: u32, home_below: u64) -> BlockData {
        let mut b = self.encode();
        le::put_u32(&mut b, 12, form);
        self.put_slot(&mut b, form, 0, 0, home_below);
        self.put_slot(&mut b, form, 1, 0, home_below);
        b
    }

    /// The head block written after `prev` (the head block durable now): in the two-slot form
    /// when `prev` is one (`self` in the slot not holding the newest head, with the next
    /// version, the other slot's bytes kept; `prev` itself if its newest head is `self`), else
    /// [`LogHead::encode`].
    pub fn encode_next(&self, prev: &[u8]) -> BlockData {
        self.encode_next_home(prev, 0)
    }

    /// [`LogHead::encode_next`] with `home_below`: in the two-slot form with `home_below` it goes
    /// into the slot written; in the plain form it is [`LogHead::encode_home`]. (The two-slot
    /// form without it ignores `home_below`: it is one-core only, where it is 0.)
    pub fn encode_next_home(&self, prev: &[u8], home_below: u64) -> BlockData {
        let Some((newest, slot, version, prev_home)) = decode_two_slot(prev) else {
            return self.encode_home(home_below);
        };
        let form = le::u32_at(prev, 12);
        let with_home = form == TWO_SLOTS_HOME;
        let mut b: BlockData = prev.try_into().expect("a head block");
        if newest == *self && (!with_home || prev_home == home_below) {
            return b; // nothing moves: the block stays (recovery run twice writes the same)
        }
        b[8..12].copy_from_slice(&(self.format as u32).to_le_bytes());
        self.put_slot(&mut b, form, 1 - slot, version.wrapping_add(1), home_below);
        b
    }

    fn put_slot(&self, b: &mut [u8], form: u32, slot: usize, version: u16, home_below: u64) {
        assert!(self.start < 1 << START_BITS && self.start_seq < 1 << SEQ_BITS, "a head slot field overflows");
        let (at, with_home) = slots_of(form).expect("a two-slot form");
        let home = if with_home { Some(home_below) } else { None };
        let at = at[slot];
        le::put_u64(b, at, self.start | slot_check(self, slot, version, home) << START_BITS);
        le::put_u64(b, at + 8, self.start_seq | (version as u64) << SEQ_BITS);
        if let Some(h) = home {
            le::put_u64(b, at + 16, h);
        }
    }

    /// The `home_below` field of a head block (0 when unused); in the two-slot form with
    /// `home_below`, the newest valid slot's (0 if neither is valid: then the block is no head).
    pub fn home_below(b: &[u8]) -> u64 {
        if le::u32_at(b, 12) == TWO_SLOTS_HOME {
            return decode_two_slot(b).map_or(0, |d| d.3);
        }
        le::u64_at(b, HOME_BELOW_AT)
    }

    /// Decode; `None` if the block is not a head (wrong magic or format code).
    pub fn decode(b: &[u8]) -> Option<LogHead> {
        if &b[0..8] != MAGIC {
            return None;
        }
        let format = LogFormat::from_code(le::u32_at(b, 8))?;
        if slots_of(le::u32_at(b, 12)).is_some() {
            return decode_two_slot(b).map(|d| d.0).filter(|h| h.format == format);
        }
        Some(LogHead { format, start: le::u64_at(b, 16), start_seq: le::u64_at(b, 24) })
    }
}

/// 24-bit check of a head slot (over `home_below` too in the form that holds it).
fn slot_check(h: &LogHead, slot: usize, version: u16, home_below: Option<u64>) -> u64 {
    let mut x: u64 = 0xcbf2_9ce4_8422_2325;
    let words = [h.format as u64, slot as u64, h.start, h.start_seq, version as u64];
    for byte in words.iter().chain(home_below.as_ref()).flat_map(|w| w.to_le_bytes()) {
        x = (x ^ byte as u64).wrapping_mul(0x100_0000_01b3);
    }
    (x ^ x >> 24 ^ x >> 48) & 0xFF_FFFF
}

/// A two-slot head block's newest valid slot: (head, slot, version, home_below: 0 in the form
/// without it); `None` if the block is not in a two-slot form or neither slot is valid.
fn decode_two_slot(b: &[u8]) -> Option<(LogHead, usize, u16, u64)> {
    if &b[0..8] != MAGIC {
        return None;
    }
    let (at, with_home) = slots_of(le::u32_at(b, 12))?;
    let format = LogHead::decode(&{
        let mut plain = [0u8; BLOCK_BYTES];
        plain[..12].copy_from_slice(&b[..12]);
        plain
    })?
    .format;
    let slot = |i: usize| {
        let (x, y) = (le::u64_at(b, at[i]), le::u64_at(b, at[i] + 8));
        let home = with_home.then(|| le::u64_at(b, at[i] + 16));
        let h = LogHead { format, start: x & ((1 << START_BITS) - 1), start_seq: y & ((1 << SEQ_BITS) - 1) };
        let version = (y >> SEQ_BITS) as u16;
        (x >> START_BITS == slot_check(&h, i, version, home)).then_some((h, i, version, home.unwrap_or(0)))
    };
    match (slot(0), slot(1)) {
        (Some(a), Some(b)) => Some(if (b.2.wrapping_sub(a.2) as i16) > 0 { b } else { a }),
        (a, b) => a.or(b),
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
    fn a_two_slot_head_alternates_and_any_torn_write_reads_as_the_old_or_the_new_head() {
        let mut h = LogHead { format: LogFormat::Loc, start: 0, start_seq: 0 };
        let mut block = h.encode_two_slot();
        assert_eq!(LogHead::decode(&block), Some(h));
        for i in 1..40u64 {
            let next = LogHead { format: LogFormat::Loc, start: i * 3, start_seq: i * 7 };
            let new = next.encode_next(&block);
            assert_eq!(LogHead::decode(&new), Some(next));
            for mask in 0u32..256 {
                let mut torn = block;
                for u in (0..8).filter(|u| mask >> u & 1 == 1) {
                    torn[u * 8..u * 8 + 8].copy_from_slice(&new[u * 8..u * 8 + 8]);
                }
                let got = LogHead::decode(&torn);
                assert!(got == Some(h) || got == Some(next), "step {i} mask {mask:#x}: {got:?}");
            }
            (h, block) = (next, new);
        }
        // The papers' form is unchanged, and a plain head's successor is plain.
        let plain = LogHead { format: LogFormat::Loc, start: 5, start_seq: 9 };
        assert_eq!(plain.encode_next(&h.encode()), plain.encode());
    }

    #[test]
    fn a_two_slot_head_with_home_below_alternates_and_any_torn_write_reads_as_old_or_new() {
        let mut h = LogHead { format: LogFormat::Hoop, start: 0, start_seq: 1 };
        let mut home = 0;
        let mut block = h.encode_two_slot_home(home);
        assert_eq!(le::u32_at(&block, 12), 2, "form code at byte 12");
        assert_eq!((LogHead::decode(&block), LogHead::home_below(&block)), (Some(h), 0));
        for i in 1..40u64 {
            let next = LogHead { format: LogFormat::Hoop, start: i * 3, start_seq: i * 7 + 1 };
            let next_home = i * 5;
            let new = next.encode_next_home(&block, next_home);
            assert_eq!((LogHead::decode(&new), LogHead::home_below(&new)), (Some(next), next_home));
            let written = if i % 2 == 1 { 40..64 } else { 16..40 };
            assert_eq!(new[..16], block[..16], "step {i}: magic and format unchanged");
            assert!(new.iter().zip(&block).enumerate().all(|(k, (x, y))| x == y || written.contains(&k)), "step {i}");
            for mask in 0u32..256 {
                let mut torn = block;
                for u in (0..8).filter(|u| mask >> u & 1 == 1) {
                    torn[u * 8..u * 8 + 8].copy_from_slice(&new[u * 8..u * 8 + 8]);
                }
                let got = (LogHead::decode(&torn), LogHead::home_below(&torn));
                assert!(got == (Some(h), home) || got == (Some(next), next_home), "step {i} mask {mask:#x}: {got:?}");
            }
            (h, home, block) = (next, next_home, new);
        }
        assert_eq!(h.encode_next_home(&block, home), block, "the same head again: nothing moves");
        // The plain form's successor with home_below is the plain form.
        let plain = LogHead { format: LogFormat::Hoop, start: 5, start_seq: 9 };
        assert_eq!(plain.encode_next_home(&h.encode_home(3), 4), plain.encode_home(4));
    }

    #[test]
    fn zeroed_or_corrupt_block_is_not_a_head() {
        assert_eq!(LogHead::decode(&[0u8; 64]), None);
        let mut b = LogHead { format: LogFormat::HWal, start: 0, start_seq: 1 }.encode();
        b[8] = 99;
        assert_eq!(LogHead::decode(&b), None);
    }
}
