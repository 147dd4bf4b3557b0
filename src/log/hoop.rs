//! HOOP's out-of-place (OOP) region: memory slices (docs/formats/hoop-log.md).
//!
//! Each core's log region (`Layout::log_region`) is a [`crate::log::head::LogHead`] block
//! (format 6) followed by a ring of slices. A slice is two consecutive 64-byte blocks: a data
//! block of up to [`WORDS`] 8-byte words, then its metadata block naming each word's home
//! address, the transaction (per-region sequence number and global commit order), the slice's
//! index in the transaction and a COMMIT flag on the transaction's last slice, and a checksum
//! over both blocks. Little-endian throughout.
//!
//! Metadata block:
//!
//! | bytes  | field  | meaning                                                           |
//! |--------|--------|-------------------------------------------------------------------|
//! | 0..8   | seq    | u64: the transaction's sequence number in its region (from 1)     |
//! | 8..16  | order  | u64: the transaction's global commit order (from 1, any core)     |
//! | 16..20 | index  | u32: this slice's position in its transaction (from 0)            |
//! | 20     | count  | u8: words used, 1..=8 (data words `count..8` are zero)            |
//! | 21     | flags  | u8: bit 0 COMMIT (the transaction's last slice); other bits 0      |
//! | 22..24 | -      | 0                                                                 |
//! | 24..56 | addrs  | 8 x u32: home word numbers (byte address / 8) of data words 0..8  |
//! | 56..60 | -      | 0                                                                 |
//! | 60..64 | check  | u32: FNV-1a (32-bit) over the data block, then metadata bytes 0..60 |

use super::le;
use crate::types::{BlockData, BLOCK_BYTES};

/// Data words per slice.
pub const WORDS: usize = 8;
/// Blocks per slice (data, then metadata).
pub const SLICE_BLOCKS: u64 = 2;
/// The COMMIT flag: the last slice of a committed transaction.
pub const COMMIT: u8 = 1;

/// One slice's metadata, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct SliceMeta {
    pub seq: u64,
    pub order: u64,
    pub index: u32,
    pub count: u8,
    pub flags: u8,
    pub addrs: [u32; WORDS],
}

impl SliceMeta {
    /// Is this the transaction's last slice (its commit mark)?
    pub fn commits(&self) -> bool {
        self.flags & COMMIT != 0
    }

    /// The metadata block for this slice, whose data block is `data`.
    pub fn encode(&self, data: &BlockData) -> BlockData {
        let mut b = [0u8; BLOCK_BYTES];
        le::put_u64(&mut b, 0, self.seq);
        le::put_u64(&mut b, 8, self.order);
        le::put_u32(&mut b, 16, self.index);
        b[20] = self.count;
        b[21] = self.flags;
        for (i, a) in self.addrs.iter().enumerate() {
            le::put_u32(&mut b, 24 + 4 * i, *a);
        }
        let c = check(data, &b);
        le::put_u32(&mut b, 60, c);
        b
    }

    /// Decode a metadata block with its data block; `None` if the checksum does not match or a
    /// field is out of its range (a torn, stale or never-written slice).
    pub fn decode(meta: &[u8], data: &[u8]) -> Option<SliceMeta> {
        if le::u32_at(meta, 60) != check(data, meta) {
            return None;
        }
        let (count, flags) = (meta[20], meta[21]);
        if count == 0 || count as usize > WORDS || flags & !COMMIT != 0 || le::u64_at(meta, 0) == 0 {
            return None;
        }
        let mut addrs = [0u32; WORDS];
        for (i, a) in addrs.iter_mut().enumerate() {
            *a = le::u32_at(meta, 24 + 4 * i);
        }
        Some(SliceMeta {
            seq: le::u64_at(meta, 0),
            order: le::u64_at(meta, 8),
            index: le::u32_at(meta, 16),
            count,
            flags,
            addrs,
        })
    }
}

/// The data block of a slice: `words` in order, the rest zero.
pub fn encode_data(words: &[u64]) -> BlockData {
    assert!(words.len() <= WORDS);
    let mut b = [0u8; BLOCK_BYTES];
    for (i, w) in words.iter().enumerate() {
        le::put_u64(&mut b, 8 * i, *w);
    }
    b
}

/// Data word `i` of a slice's data block.
pub fn data_word(data: &[u8], i: usize) -> u64 {
    le::u64_at(data, 8 * i)
}

/// FNV-1a (32-bit) over the data block, then metadata bytes 0..60.
fn check(data: &[u8], meta: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &x in data[..BLOCK_BYTES].iter().chain(&meta[..60]) {
        h = (h ^ x as u32).wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_round_trips_with_the_documented_bytes() {
        let data = encode_data(&[0x1122_3344_5566_7788, 5]);
        let m =
            SliceMeta { seq: 3, order: 0x0102, index: 1, count: 2, flags: COMMIT, addrs: [9, 10, 0, 0, 0, 0, 0, 0] };
        let b = m.encode(&data);
        assert_eq!((b[0], b[8], b[9], b[16], b[20], b[21], b[24], b[28]), (3, 2, 1, 1, 2, 1, 9, 10));
        assert_eq!(data[0], 0x88, "data words little-endian");
        assert_eq!(data_word(&data, 1), 5);
        assert_eq!(SliceMeta::decode(&b, &data), Some(m));
        assert!(m.commits());
    }

    #[test]
    fn a_torn_stale_or_zeroed_slice_does_not_decode() {
        let data = encode_data(&[7]);
        let m = SliceMeta { seq: 1, order: 1, index: 0, count: 1, flags: 0, addrs: [4; WORDS] };
        let b = m.encode(&data);
        let mut other = data;
        other[3] ^= 1;
        assert_eq!(SliceMeta::decode(&b, &other), None, "the data block is not the one the metadata vouches for");
        let mut torn = b;
        torn[8..16].copy_from_slice(&[0; 8]);
        assert_eq!(SliceMeta::decode(&torn, &data), None, "an 8-byte unit of the metadata is stale");
        assert_eq!(SliceMeta::decode(&[0; 64], &[0; 64]), None, "never written");
    }
}
