//! ATOM's hardware undo log (docs/formats/atom-log.md): per core region, after its head, a
//! sequence of groups, each one metadata line followed by up to [`ENTRIES`] entry lines. An
//! entry line is the whole 64-byte old content of one data line; the group's metadata line
//! names, in entry order, the home block of each entry and the transaction the group belongs
//! to. Every transaction logs from group 0 of its region (its log is freed at commit, so a
//! region holds one transaction's log at a time).
//!
//! Metadata line (64 bytes, little-endian):
//!
//! | bytes  | field | meaning                                                     |
//! |--------|-------|-------------------------------------------------------------|
//! | 0..8   | seq   | u64: the transaction's sequence number (its region's, from 1) |
//! | 8..12  | group | u32: this group's index in the region (0, 1, ...)          |
//! | 12..16 | n     | u32: entries of the group that are valid, 1..=12           |
//! | 16..64 | homes | 12 x u32: home block number of entry 0..n (rest 0)        |
//!
//! A metadata line is written only once the entries it names are durable, so a durable
//! metadata line of the transaction the head names vouches for every entry it names.
//!
//! **Checked form** (`atom.checked_meta`, the torn-write fix of docs/faults.md; off by default):
//! bytes 8..16 are one 8-byte unit holding `group`, `n` and a check over the whole line:
//!
//! | bytes  | field | meaning                                                     |
//! |--------|-------|-------------------------------------------------------------|
//! | 0..8   | seq   | u64, as above                                               |
//! | 8..10  | group | u16: this group's index in the region                       |
//! | 10..12 | n     | u16: bit 15 set (the checked form), bits 0..15 entries 1..=12 |
//! | 12..16 | check | u32: FNV-1a (32-bit) over bytes 0..12 and 16..64            |
//! | 16..64 | homes | as above                                                    |
//!
//! A line whose check fails decodes to none. In the paper's form bytes 10..12 are the high half
//! of `group` (0 for any region this model lays out), so bit 15 tells the forms apart. In the
//! checked form a group is closed when its line is written, full or not: its line is never
//! rewritten, and the next entry starts the next group.

use super::le;
use crate::types::{BlockData, BlockId, BLOCK_BYTES};

/// Entries per group (one metadata line names at most this many).
pub const ENTRIES: usize = 12;
/// Blocks a group occupies: its metadata line and its entries.
pub const GROUP_BLOCKS: u64 = 1 + ENTRIES as u64;
const HOMES_AT: usize = 16;
/// Bit 15 of bytes 10..12: the checked form.
const CHECKED: u16 = 0x8000;
/// Groups a region can name in the checked form (`group` is a u16).
pub const CHECKED_GROUPS: u64 = 1 << 16;

/// A decoded metadata line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub seq: u64,
    pub group: u32,
    pub n: u32,
    pub homes: [u32; ENTRIES],
    /// In the checked form (its check held).
    pub checked: bool,
}

impl Meta {
    /// Encode a metadata line naming `homes` (at most [`ENTRIES`]).
    pub fn encode_parts(seq: u64, group: u32, homes: &[u32]) -> BlockData {
        assert!(!homes.is_empty() && homes.len() <= ENTRIES, "a group holds 1..={ENTRIES} entries");
        let mut b = [0u8; BLOCK_BYTES];
        le::put_u64(&mut b, 0, seq);
        le::put_u32(&mut b, 8, group);
        le::put_u32(&mut b, 12, homes.len() as u32);
        for (i, h) in homes.iter().enumerate() {
            le::put_u32(&mut b, HOMES_AT + 4 * i, *h);
        }
        b
    }

    /// [`Meta::encode_parts`] in the checked form (`group` below [`CHECKED_GROUPS`]).
    pub fn encode_checked(seq: u64, group: u32, homes: &[u32]) -> BlockData {
        assert!((group as u64) < CHECKED_GROUPS, "a checked metadata line names groups 0..2^16");
        let mut b = Meta::encode_parts(seq, group, homes);
        b[10..12].copy_from_slice(&(homes.len() as u16 | CHECKED).to_le_bytes());
        let c = check(&b);
        le::put_u32(&mut b, 12, c);
        b
    }

    pub fn encode(&self) -> BlockData {
        let homes = &self.homes[..self.n as usize];
        if self.checked {
            Meta::encode_checked(self.seq, self.group, homes)
        } else {
            Meta::encode_parts(self.seq, self.group, homes)
        }
    }

    /// Decode either form; `None` when `n` is out of range or, in the checked form, the check
    /// fails (a block that is no metadata line of any transaction: zeroed, torn or damaged).
    pub fn decode(b: &[u8]) -> Option<Meta> {
        let hi = u16::from_le_bytes([b[10], b[11]]);
        let checked = hi & CHECKED != 0;
        let (group, n) = if checked {
            if le::u32_at(b, 12) != check(b) {
                return None;
            }
            (u16::from_le_bytes([b[8], b[9]]) as u32, (hi & !CHECKED) as u32)
        } else {
            (le::u32_at(b, 8), le::u32_at(b, 12))
        };
        if n == 0 || n as usize > ENTRIES {
            return None;
        }
        let mut homes = [0u32; ENTRIES];
        for (i, h) in homes.iter_mut().enumerate().take(n as usize) {
            *h = le::u32_at(b, HOMES_AT + 4 * i);
        }
        Some(Meta { seq: le::u64_at(b, 0), group, n, homes, checked })
    }
}

/// FNV-1a (32-bit) over a metadata line's bytes 0..12 and 16..64 (all but the check).
fn check(b: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &x in b[..12].iter().chain(&b[16..BLOCK_BYTES]) {
        h = (h ^ x as u32).wrapping_mul(0x0100_0193);
    }
    h
}

/// The metadata block of group `g` of the region whose head is `log0`.
#[inline]
pub fn meta_block(log0: BlockId, g: u64) -> BlockId {
    BlockId(log0.0 + 1 + g * GROUP_BLOCKS)
}

/// The block of entry `j` of group `g`.
#[inline]
pub fn entry_block(log0: BlockId, g: u64, j: usize) -> BlockId {
    BlockId(meta_block(log0, g).0 + 1 + j as u64)
}

/// Groups a region of `blocks` blocks (its head included) holds.
pub fn groups(blocks: u64) -> u64 {
    blocks.saturating_sub(1) / GROUP_BLOCKS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_has_the_documented_bytes() {
        let b = Meta::encode_parts(0x0102, 3, &[7, 0x0a0b0c0d]);
        assert_eq!((b[0], b[1]), (0x02, 0x01), "seq little-endian at byte 0");
        assert_eq!(b[8], 3, "group at byte 8");
        assert_eq!(b[12], 2, "n at byte 12");
        assert_eq!(&b[16..24], &[7, 0, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a]);
        assert!(b[24..].iter().all(|&x| x == 0));
        let m = Meta::decode(&b).unwrap();
        assert_eq!((m.seq, m.group, m.n, m.homes[1]), (0x0102, 3, 2, 0x0a0b0c0d));
        assert_eq!(m.encode(), b);
    }

    #[test]
    fn a_checked_line_has_the_documented_bytes_and_any_torn_rewrite_is_no_line() {
        let b = Meta::encode_checked(0x0102, 3, &[7, 0x0a0b0c0d]);
        assert_eq!((b[0], b[1], b[8], b[9]), (0x02, 0x01, 3, 0), "seq at 0, group u16 at 8");
        assert_eq!((b[10], b[11]), (2, 0x80), "n u16 at 10 with bit 15 set");
        assert_eq!(&b[16..24], &[7, 0, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a]);
        let m = Meta::decode(&b).unwrap();
        assert_eq!((m.seq, m.group, m.n, m.homes[1], m.checked), (0x0102, 3, 2, 0x0a0b0c0d, true));
        assert_eq!(m.encode(), b);
        // A later transaction's line over it, torn in any proper subset of its 8-byte units:
        // never a line (the old one's units and the new one's do not check together).
        let new = Meta::encode_checked(0x0103, 3, &[9, 8, 7, 6, 5]);
        for mask in 1u32..255 {
            let mut torn = b;
            for u in (0..8).filter(|u| mask >> u & 1 == 1) {
                torn[u * 8..u * 8 + 8].copy_from_slice(&new[u * 8..u * 8 + 8]);
            }
            let got = Meta::decode(&torn);
            assert!(got.is_none() || torn == b || torn == new, "mask {mask:#x}: {got:?}");
        }
        // Over a zeroed line: only the whole line decodes.
        for mask in 1u32..255 {
            let mut torn = [0u8; 64];
            for u in (0..8).filter(|u| mask >> u & 1 == 1) {
                torn[u * 8..u * 8 + 8].copy_from_slice(&new[u * 8..u * 8 + 8]);
            }
            assert!(Meta::decode(&torn).is_none() || torn == new, "mask {mask:#x}");
        }
    }

    #[test]
    fn a_zeroed_or_overfull_block_is_no_metadata_line() {
        assert_eq!(Meta::decode(&[0u8; 64]), None);
        let mut b = Meta::encode_parts(1, 0, &[1]);
        b[12] = 13;
        assert_eq!(Meta::decode(&b), None);
    }

    #[test]
    fn groups_follow_the_head_one_after_another() {
        let log0 = BlockId(100);
        assert_eq!(meta_block(log0, 0), BlockId(101));
        assert_eq!(entry_block(log0, 0, 11), BlockId(113));
        assert_eq!(meta_block(log0, 1), BlockId(114));
        assert_eq!(groups(1 + 2 * GROUP_BLOCKS + 5), 2);
    }
}
