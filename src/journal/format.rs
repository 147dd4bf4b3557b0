//! The byte layout of the journal in PCM (docs/journal-format.md), little-endian throughout,
//! and the XOR flag. This module is the only one that knows offsets; the allocator and the
//! recovery scan go through these functions.
//!
//! The PCM journal area is `frames` page frames of 64 KiB. Frame 0 is the manager frame; every
//! other frame is, at any time, a header frame, a data frame (64 portions of one 1 KiB database
//! page each), or free.

/// Bytes of a page frame.
pub const FRAME_BYTES: u64 = 65_536;
/// Bytes of a database page and of a portion (the paper's 1 KB pages).
pub const PAGE_BYTES: u64 = 1024;

/// Bytes of the header sector that starts the journal byte stream SQLite writes through the
/// VFS (the sector size the VFS reports); records follow it.
pub const HDR_SECTOR: u64 = 512;
/// Bytes of one journal record: page number, page, checksum.
pub const RECORD_BYTES: u64 = 4 + PAGE_BYTES + 4;
/// Portions per data frame.
pub const PORTIONS: u64 = FRAME_BYTES / PAGE_BYTES;
/// Most frames an area may have (presence and reusable bits are one u64 each).
pub const MAX_FRAMES: u64 = 64;
/// Header frame descriptors in the manager frame (database files with a journal).
pub const SLOTS: usize = 64;
/// Bytes of the database file name kept in a header frame descriptor.
pub const NAME_BYTES: usize = 56;
/// Most journal header copies (WH128).
pub const MAX_COPIES: u64 = 128;
/// Data frame descriptors per header frame.
pub const DESCS: u64 = 2048;
/// Page numbers a descriptor may hold: below 2^22 (a 4 GiB database of 1 KiB pages, beyond any
/// database the model replays). The rebuild refuses a larger one as corrupt instead of sizing
/// its page index by it.
pub const MAX_PGNO: u32 = 1 << 22;

// Manager frame.
pub const MGR_MAGIC: &[u8; 8] = b"LOCJMGR1";
pub const MGR_PRESENCE: u64 = 64;
pub const MGR_REUSABLE: u64 = 128;
pub const MGR_COUNTS: u64 = 192;
pub const MGR_SLOTS: u64 = 1024;
pub const SLOT_BYTES: u64 = 64;
/// Per-portion reuse counters, u16 each, frame-major (without S2; one row of 64 per frame).
pub const MGR_PORTION_COUNTS: u64 = 8192;
/// End of what the manager frame holds.
pub const MGR_END: u64 = MGR_PORTION_COUNTS + 2 * MAX_FRAMES * PORTIONS;

// Header frame.
pub const HDR_HOT: u64 = 0;
pub const HDR_REUSE_COUNT: u64 = 64;
pub const HDR_DESC_COUNT: u64 = 68;
pub const HDR_FIRST_FREE: u64 = 72;
pub const HDR_COPIES: u64 = 128;
pub const COPY_BYTES: u64 = 32;
pub const HDR_DESCS: u64 = HDR_COPIES + MAX_COPIES * COPY_BYTES;
pub const DESC_BYTES: u64 = 16;

const _: () = assert!(HDR_DESCS + DESCS * DESC_BYTES <= FRAME_BYTES);
const _: () = assert!(MGR_SLOTS + SLOTS as u64 * SLOT_BYTES <= FRAME_BYTES);
const _: () = assert!(MGR_COUNTS + 2 * MAX_FRAMES <= MGR_SLOTS);
const _: () = assert!(MGR_SLOTS + SLOTS as u64 * SLOT_BYTES <= MGR_PORTION_COUNTS && MGR_END <= FRAME_BYTES);

/// Byte address of frame `f`.
pub fn frame_addr(f: usize) -> u64 {
    f as u64 * FRAME_BYTES
}

/// Byte address of the header frame descriptor `s` in the manager frame.
pub fn slot_addr(s: usize) -> u64 {
    MGR_SLOTS + s as u64 * SLOT_BYTES
}

/// Byte address of the reuse counter of portion `q` of data frame `f` (manager frame).
pub fn portion_count_addr(f: usize, q: usize) -> u64 {
    MGR_PORTION_COUNTS + 2 * (f as u64 * PORTIONS + q as u64)
}

/// Byte address of journal header copy `i` of header frame `h`.
pub fn copy_addr(h: usize, i: usize) -> u64 {
    frame_addr(h) + HDR_COPIES + i as u64 * COPY_BYTES
}

/// Byte address of data frame descriptor `d` of header frame `h`.
pub fn desc_addr(h: usize, d: usize) -> u64 {
    frame_addr(h) + HDR_DESCS + d as u64 * DESC_BYTES
}

/// Byte address of the portion a PTR names.
pub fn portion_addr(ptr: u16) -> u64 {
    ptr as u64 * PAGE_BYTES
}

/// PTR of portion `q` of frame `f` (never 0: frame 0 is the manager).
pub fn ptr_of(f: usize, q: usize) -> u16 {
    debug_assert!(f > 0 && (q as u64) < PORTIONS);
    (f as u64 * PORTIONS + q as u64) as u16
}

/// (frame, portion) of a non-zero PTR.
pub fn split_ptr(ptr: u16) -> (usize, usize) {
    ((ptr as u64 / PORTIONS) as usize, (ptr as u64 % PORTIONS) as usize)
}

/// A one-bit flag kept in one byte: plain (bit 0) or XOR flag (parity of the byte).
pub mod flag {
    /// The flag's value.
    pub fn get(b: u8, xor: bool) -> bool {
        if xor {
            b.count_ones() % 2 == 1
        } else {
            b & 1 == 1
        }
    }

    /// The byte that stores `v`, written over `b`. An XOR flag steps like a Johnson counter:
    /// shift left and put the inverse of the old top bit in the bottom bit. From 0, every step
    /// changes exactly one bit and each of the 8 bits changes once every 8 steps.
    pub fn set(b: u8, v: bool, xor: bool) -> u8 {
        if get(b, xor) == v {
            b
        } else if xor {
            (b << 1) | (!b >> 7 & 1)
        } else {
            v as u8
        }
    }
}

/// A header frame descriptor (manager frame): which header frame holds the journal of a
/// database file. 64 bytes: V flag, frame, reserved, name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRec {
    pub v: u8,
    pub frame: u8,
    pub name: [u8; NAME_BYTES],
}

impl SlotRec {
    pub fn encode(&self) -> [u8; SLOT_BYTES as usize] {
        let mut b = [0u8; SLOT_BYTES as usize];
        b[0] = self.v;
        b[1] = self.frame;
        b[8..].copy_from_slice(&self.name);
        b
    }

    pub fn decode(b: &[u8]) -> SlotRec {
        SlotRec { v: b[0], frame: b[1], name: b[8..8 + NAME_BYTES].try_into().expect("name bytes") }
    }

    /// The name field of a database file name (refused when longer than the field).
    pub fn name_field(name: &str) -> Option<[u8; NAME_BYTES]> {
        let bytes = name.as_bytes();
        if bytes.is_empty() || bytes.len() > NAME_BYTES || bytes.contains(&0) {
            return None;
        }
        let mut f = [0u8; NAME_BYTES];
        f[..bytes.len()].copy_from_slice(bytes);
        Some(f)
    }

    pub fn name_str(&self) -> String {
        let n = self.name.iter().position(|&c| c == 0).unwrap_or(NAME_BYTES);
        String::from_utf8_lossy(&self.name[..n]).into_owned()
    }
}

/// A data frame descriptor {PgNo, CkSum, V, PTR} plus the record's position in the journal
/// (`ord`). 16 bytes: PgNo u32, CkSum u32, V, reserved, PTR u16, ord u16, reserved u16.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    pub pgno: u32,
    pub cksum: u32,
    pub v: u8,
    pub ptr: u16,
    pub ord: u16,
}

impl Desc {
    pub fn encode(&self) -> [u8; DESC_BYTES as usize] {
        let mut b = [0u8; DESC_BYTES as usize];
        b[0..4].copy_from_slice(&self.pgno.to_le_bytes());
        b[4..8].copy_from_slice(&self.cksum.to_le_bytes());
        b[8] = self.v;
        b[10..12].copy_from_slice(&self.ptr.to_le_bytes());
        b[12..14].copy_from_slice(&self.ord.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Desc {
        Desc {
            pgno: u32::from_le_bytes(b[0..4].try_into().expect("4")),
            cksum: u32::from_le_bytes(b[4..8].try_into().expect("4")),
            v: b[8],
            ptr: u16::from_le_bytes(b[10..12].try_into().expect("2")),
            ord: u16::from_le_bytes(b[12..14].try_into().expect("2")),
        }
    }
}

/// SQLite's rollback-journal header as it appears at offset 0 of the journal byte stream:
/// magic (8 bytes), then nRec, nonce, initial database size in pages, sector size and page
/// size, each a big-endian u32.
pub const STREAM_HDR: usize = 28;

/// One copy of the journal header in PCM (32 bytes, 32-byte aligned, so one block write):
/// magic (8 bytes as SQLite writes them), nRec, nonce, initial database size (u32 each), the
/// sector size and page size as one byte each (log2 + 1; 0 for 0), two zero bytes, a
/// generation number (u32) and a checksum (u32, FNV-1a over bytes 0..28). A copy is valid iff
/// its checksum matches; the current copy is the valid one with the largest generation. A
/// header frame's copies are never zeroed: a fresh header frame starts its generations above
/// every valid copy left in it (`first_generation`), so no leftover can be taken as current.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeaderCopy {
    pub magic: [u8; 8],
    pub fields: [u32; 5],
    pub generation: u32,
}

/// FNV-1a, 32 bits: the header copy's checksum (never 0 over 28 zero bytes, so a zeroed copy
/// is invalid).
fn fnv1a(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5u32, |h, &x| (h ^ x as u32).wrapping_mul(0x0100_0193))
}

/// A power of two (or 0) as one byte: log2 + 1.
fn log_byte(v: u32) -> Option<u8> {
    match v {
        0 => Some(0),
        v if v.is_power_of_two() => Some(v.trailing_zeros() as u8 + 1),
        _ => None,
    }
}

impl HeaderCopy {
    pub fn encode(&self) -> [u8; COPY_BYTES as usize] {
        let mut b = [0u8; COPY_BYTES as usize];
        b[..8].copy_from_slice(&self.magic);
        for (i, f) in self.fields[..3].iter().enumerate() {
            b[8 + 4 * i..12 + 4 * i].copy_from_slice(&f.to_le_bytes());
        }
        b[20] = log_byte(self.fields[3]).expect("checked by from_stream");
        b[21] = log_byte(self.fields[4]).expect("checked by from_stream");
        b[24..28].copy_from_slice(&self.generation.to_le_bytes());
        let c = fnv1a(&b[..28]);
        b[28..32].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// The copy in `b`, or None if its checksum does not match.
    pub fn decode(b: &[u8]) -> Option<HeaderCopy> {
        if u32::from_le_bytes(b[28..32].try_into().expect("4")) != fnv1a(&b[..28]) {
            return None;
        }
        let mut fields = [0u32; 5];
        for (i, f) in fields[..3].iter_mut().enumerate() {
            *f = u32::from_le_bytes(b[8 + 4 * i..12 + 4 * i].try_into().expect("4"));
        }
        let unlog = |x: u8| if x == 0 { 0 } else { 1u32.checked_shl(x as u32 - 1).unwrap_or(0) };
        (fields[3], fields[4]) = (unlog(b[20]), unlog(b[21]));
        Some(HeaderCopy {
            magic: b[..8].try_into().expect("8"),
            fields,
            generation: u32::from_le_bytes(b[24..28].try_into().expect("4")),
        })
    }

    /// SQLite's 28 stream bytes.
    pub fn to_stream(&self) -> [u8; STREAM_HDR] {
        let mut s = [0u8; STREAM_HDR];
        s[..8].copy_from_slice(&self.magic);
        for (i, f) in self.fields.iter().enumerate() {
            s[8 + 4 * i..12 + 4 * i].copy_from_slice(&f.to_be_bytes());
        }
        s
    }

    /// The copy holding SQLite's 28 stream bytes, with `generation`; None if the sector or
    /// page size is not 0 or a power of two (SQLite writes only those).
    pub fn from_stream(s: &[u8; STREAM_HDR], generation: u32) -> Option<HeaderCopy> {
        let mut fields = [0u32; 5];
        for (i, f) in fields.iter_mut().enumerate() {
            *f = u32::from_be_bytes(s[8 + 4 * i..12 + 4 * i].try_into().expect("4"));
        }
        log_byte(fields[3])?;
        log_byte(fields[4])?;
        Some(HeaderCopy { magic: s[..8].try_into().expect("8"), fields, generation })
    }
}

/// The current copy among a header frame's `copies` (bytes of m consecutive copies): the valid
/// one with the largest generation (the lowest index on a tie), if any.
pub fn current_copy(copies: &[u8]) -> Option<(usize, HeaderCopy)> {
    copies
        .chunks(COPY_BYTES as usize)
        .enumerate()
        .filter_map(|(i, b)| Some((i, HeaderCopy::decode(b)?)))
        .max_by_key(|(i, c)| (c.generation, usize::MAX - i))
}

/// The generation a fresh header frame starts from, given the copies left in it: above every
/// valid leftover. None when that would come near wrapping (the caller zeroes the copies).
pub fn first_generation(copies: &[u8]) -> Option<u32> {
    match current_copy(copies) {
        None => Some(0),
        Some((_, c)) if c.generation < u32::MAX / 2 => Some(c.generation),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_copy_is_valid_only_with_its_checksum_and_the_newest_valid_one_is_current() {
        let c = |g: u32| HeaderCopy { magic: [7; 8], fields: [1, 2, 3, 512, 1024], generation: g }.encode();
        assert_eq!(HeaderCopy::decode(&[0u8; 32]), None, "a zeroed copy is invalid");
        let mut copies = [c(4), c(9), c(7), [0xA5; 32]].concat();
        assert_eq!(current_copy(&copies).map(|(i, h)| (i, h.generation)), Some((1, 9)));
        assert_eq!(first_generation(&copies), Some(9));
        copies[32 + 3] ^= 1;
        assert_eq!(current_copy(&copies).map(|(i, h)| (i, h.generation)), Some((2, 7)), "copy 1 damaged");
        assert_eq!(first_generation(&[0u8; 64]), Some(0));
        assert_eq!(first_generation(&c(u32::MAX - 3)), None, "near wrapping: zero the copies");
    }

    #[test]
    fn xor_flag_set_and_reset_change_exactly_one_bit_and_wear_all_bits_evenly() {
        let mut b = 0u8;
        let mut per_bit = [0u32; 8];
        for step in 0..64 {
            let want = step % 2 == 0;
            let n = flag::set(b, want, true);
            assert_eq!((b ^ n).count_ones(), 1, "step {step}: {b:08b} -> {n:08b}");
            assert!(flag::get(n, true) == want);
            for (i, c) in per_bit.iter_mut().enumerate() {
                *c += ((b ^ n) >> i & 1) as u32;
            }
            b = n;
        }
        assert_eq!(per_bit, [8; 8], "64 steps program each of the 8 cells 8 times");
        assert_eq!(flag::set(0b0000_0111, true, true), 0b0000_0111, "already 1: no write");
    }

    #[test]
    fn xor_flag_walks_the_johnson_sequence_of_figure_8() {
        let seq: Vec<u8> =
            std::iter::successors(Some(0u8), |&b| Some(flag::set(b, !flag::get(b, true), true))).take(17).collect();
        assert_eq!(&seq[..4], &[0b0, 0b1, 0b11, 0b111]);
        assert_eq!(seq[8], 0xFF);
        assert_eq!(seq[9], 0xFE);
        assert_eq!(seq[16], 0, "period 16");
    }

    #[test]
    fn a_plain_flag_always_programs_bit_0() {
        assert_eq!(flag::set(0, true, false), 1);
        assert_eq!(flag::set(1, false, false), 0);
        assert!(!flag::get(0b10, false));
    }

    #[test]
    fn descriptors_and_headers_round_trip_little_endian() {
        let d = Desc { pgno: 0x0102_0304, cksum: 0xA0B0_C0D0, v: 3, ptr: 0x0405, ord: 7 };
        let b = d.encode();
        assert_eq!(&b[..4], &[4, 3, 2, 1]);
        assert_eq!(&b[10..12], &[5, 4]);
        assert_eq!(Desc::decode(&b), d);
        let mut s = [0u8; STREAM_HDR];
        s[..8].copy_from_slice(&[0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7]);
        s[8..12].copy_from_slice(&5u32.to_be_bytes());
        s[24..28].copy_from_slice(&1024u32.to_be_bytes());
        s[20..24].copy_from_slice(&512u32.to_be_bytes());
        let c = HeaderCopy::from_stream(&s, 9).unwrap();
        assert_eq!(c.fields[0], 5);
        assert_eq!(c.fields[4], 1024);
        assert_eq!(&c.encode()[8..12], &[5, 0, 0, 0]);
        assert_eq!((c.encode()[20], c.encode()[21]), (10, 11), "log2 + 1 of 512 and 1024");
        assert_eq!(HeaderCopy::decode(&c.encode()), Some(c));
        assert_eq!(c.to_stream(), s);
        s[24..28].copy_from_slice(&1000u32.to_be_bytes());
        assert_eq!(HeaderCopy::from_stream(&s, 1), None, "page size not a power of two");
        assert_eq!(split_ptr(ptr_of(3, 17)), (3, 17));
        assert_eq!(portion_addr(ptr_of(3, 17)), 3 * FRAME_BYTES + 17 * 1024);
    }
}
