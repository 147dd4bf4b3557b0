//! S-Undo's software undo log (docs/formats/sundo-log.md), after the undo log of PMDK's
//! libpmemobj (`struct ulog` and `struct ulog_entry_buf`): per core region, after its head, a
//! sequence of entries, each the old content of one data line, written by ordinary stores
//! through the cache and made durable with cache-line flushes and a fence before the line is
//! stored to. The log is valid for the generation the head names (`start_seq`): an entry
//! counts only if it carries that generation and its check holds, and commit invalidates every
//! entry at once by moving the head to the next generation (one write).
//!
//! Entry `i` of a region occupies its blocks `1 + 2i` and `2 + 2i` (128 bytes, little-endian):
//!
//! | bytes   | field | meaning                                                              |
//! |---------|-------|----------------------------------------------------------------------|
//! | 0..8    | home  | u64: byte address of the logged line in the data area (a multiple of 64) |
//! | 8..16   | check | u64: FNV-1a (64-bit) over bytes 0..8 and 16..88, bit 0 set; [`UNCHECKED`] in the unchecked form |
//! | 16..24  | gen   | u64: the generation (the head's `start_seq`) the entry was logged in |
//! | 24..88  | old   | the line's 64 old bytes                                              |
//! | 88..128 | 0     | padding to the cache line, as PMDK aligns an undo entry              |
//!
//! The entry spans two lines, which become durable separately: a torn entry (one line new, the
//! other still an earlier entry's or zero) fails its check. [`UNCHECKED`] in place of the check
//! is the unchecked form, written only by the injected bug `unchecked-undo-entry` (a library
//! without the check): recovery then takes the entry whole. The marker is not 0, so that a slot
//! never written (zero) with only its `gen` unit new, a torn state under 8-byte atomicity, is no
//! entry.

use super::le;
use crate::types::{BlockData, BlockId, BLOCK_BYTES};

/// Bytes of one entry (two lines).
pub const ENTRY_BYTES: usize = 128;
/// Blocks of one entry.
pub const ENTRY_BLOCKS: u64 = 2;
const OLD_AT: usize = 24;
/// The check field of the unchecked form: `nocheck` and a zero byte, little-endian; bit 0 clear,
/// so never a check.
pub const UNCHECKED: u64 = u64::from_le_bytes(*b"nocheck\0");

/// A decoded entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Byte address of the logged line.
    pub home: u64,
    pub gen: u64,
    pub old: BlockData,
    /// In the checked form (its check held); `false`: the unchecked form ([`UNCHECKED`]).
    pub checked: bool,
}

impl Entry {
    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut b = [0u8; ENTRY_BYTES];
        le::put_u64(&mut b, 0, self.home);
        le::put_u64(&mut b, 16, self.gen);
        b[OLD_AT..OLD_AT + BLOCK_BYTES].copy_from_slice(&self.old);
        let c = if self.checked { check(&b) } else { UNCHECKED };
        le::put_u64(&mut b, 8, c);
        b
    }

    /// Decode the 128 bytes of an entry; `None` when its check fails (torn, stale in part,
    /// damaged, or never written).
    pub fn decode(b: &[u8]) -> Option<Entry> {
        let stored = le::u64_at(b, 8);
        if stored != UNCHECKED && stored != check(b) {
            return None;
        }
        let mut old = [0u8; BLOCK_BYTES];
        old.copy_from_slice(&b[OLD_AT..OLD_AT + BLOCK_BYTES]);
        Some(Entry { home: le::u64_at(b, 0), gen: le::u64_at(b, 16), old, checked: stored != UNCHECKED })
    }
}

/// FNV-1a (64-bit) over an entry's bytes 0..8 and 16..88 (all but the check and the padding),
/// with bit 0 set so that it is never [`UNCHECKED`] (nor 0, a slot never written).
fn check(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b[..8].iter().chain(&b[16..OLD_AT + BLOCK_BYTES]) {
        h = (h ^ x as u64).wrapping_mul(0x100_0000_01b3);
    }
    h | 1
}

/// The first block of entry `i` of the region whose head is `log0`.
#[inline]
pub fn entry_block(log0: BlockId, i: u64) -> BlockId {
    BlockId(log0.0 + 1 + ENTRY_BLOCKS * i)
}

/// Entries a region of `blocks` blocks (its head included) holds.
pub fn entries(blocks: u64) -> u64 {
    blocks.saturating_sub(1) / ENTRY_BLOCKS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(checked: bool) -> Entry {
        let mut old = [0u8; 64];
        for (i, x) in old.iter_mut().enumerate() {
            *x = i as u8 + 1;
        }
        Entry { home: 0x0102_0340, gen: 7, old, checked }
    }

    #[test]
    fn an_entry_round_trips_and_has_the_documented_bytes() {
        let e = entry(true);
        let b = e.encode();
        assert_eq!(&b[0..8], &[0x40, 0x03, 0x02, 0x01, 0, 0, 0, 0], "home little-endian at byte 0");
        assert_eq!(&b[16..24], &[7, 0, 0, 0, 0, 0, 0, 0], "gen at byte 16");
        assert_eq!((b[24], b[87]), (1, 64), "old bytes at 24..88");
        assert!(b[88..].iter().all(|&x| x == 0), "padding");
        assert_eq!(b[8] & 1, 1, "a check has bit 0 set");
        assert_eq!(Entry::decode(&b), Some(e));
        // The unchecked form: the marker in place of the check, decoded whole.
        let u = entry(false).encode();
        assert_eq!(&u[8..16], b"nocheck\0");
        assert_eq!(Entry::decode(&u), Some(entry(false)));
    }

    #[test]
    fn a_slot_never_written_with_some_units_of_an_entry_is_no_entry() {
        // Under 8-byte atomicity the first write to a slot may leave any of its 11 units new
        // over zeros (the crash checker found the `gen` unit alone, which a zero check once
        // let through as the unchecked form).
        for e in [entry(true), Entry { home: 0, old: [0; 64], ..entry(true) }] {
            let new = e.encode();
            for mask in 0u32..(1 << 11) - 1 {
                let mut torn = [0u8; ENTRY_BYTES];
                for u in (0..11).filter(|u| mask >> u & 1 == 1) {
                    torn[u * 8..u * 8 + 8].copy_from_slice(&new[u * 8..u * 8 + 8]);
                }
                let got = Entry::decode(&torn);
                // Units equal to zero in the entry itself leave a mask that is the whole entry.
                assert!(got.is_none() || got == Some(e), "mask {mask:#x}: {got:?}");
            }
        }
        assert_eq!(Entry::decode(&[0u8; ENTRY_BYTES]), None, "zeros are no entry");
    }

    #[test]
    fn a_torn_entry_fails_its_check_unless_unchecked() {
        let new = entry(true).encode();
        let stale = Entry { home: 0x40, gen: 6, old: [0xEE; 64], checked: true }.encode();
        // Any mix of the two entries' 8-byte units other than either whole one: no entry.
        for mask in 1u32..(1 << 11) - 1 {
            let mut torn = stale;
            for u in (0..11).filter(|u| mask >> u & 1 == 1) {
                torn[u * 8..u * 8 + 8].copy_from_slice(&new[u * 8..u * 8 + 8]);
            }
            assert_eq!(Entry::decode(&torn), None, "mask {mask:#x}");
        }
        // Its first line new, its second line zero (never written): no entry in the checked
        // form; taken whole, with the wrong old bytes, in the unchecked form.
        let mut torn = [0u8; ENTRY_BYTES];
        torn[..64].copy_from_slice(&new[..64]);
        assert_eq!(Entry::decode(&torn), None);
        let unchecked = entry(false).encode();
        torn[..64].copy_from_slice(&unchecked[..64]);
        let got = Entry::decode(&torn).unwrap();
        assert_ne!(got.old, entry(false).old);
    }

    #[test]
    fn entries_follow_the_head_two_blocks_each() {
        let log0 = BlockId(100);
        assert_eq!(entry_block(log0, 0), BlockId(101));
        assert_eq!(entry_block(log0, 3), BlockId(107));
        assert_eq!(entries(1 + 2 * 5 + 1), 5);
        assert_eq!(entries(0), 0);
    }
}
