//! Proteus's undo log (docs/formats/proteus-log.md): the log pending queue (LPQ) at the memory
//! controller, which is inside the persistence domain, and the entries it spills to memory.
//!
//! The LPQ's state lies in the durable image after the memory log area and the Start-Gap
//! reserve (`Layout::nvllc_block0`, the place of non-volatile state outside memory):
//!
//! - blocks `0..16`: one finish register per core (16 = the most cores), 64 bytes each:
//!   0..8 magic `PROTEUSR`, 8..16 u64 `finished`: every transaction of that core with a
//!   sequence number at or below it is committed (or rolled back) and its entries are dead;
//! - then two blocks per LPQ slot `s`: the entry header at `16 + 2s`, the old data at `17 + 2s`.
//!
//! Entry header (64 bytes, little-endian), the same in an LPQ slot and in memory:
//!
//! | bytes  | field | meaning                                                         |
//! |--------|-------|-----------------------------------------------------------------|
//! | 0..8   | magic | `PROTEUSE`                                                      |
//! | 8..12  | core  | u32: the core whose transaction logged it                       |
//! | 12..16 | 0     | reserved                                                        |
//! | 16..24 | seq   | u64: that core's transaction sequence number (from 1)           |
//! | 24..32 | index | u64: the entry's number within its transaction (from 0)         |
//! | 32..40 | home  | u64: block number of the logged line in the data area           |
//! | 40..48 | check | u64: FNV-1a over bytes 8..40 and the 64 data bytes               |
//! | 48..64 | 0     | reserved                                                        |
//!
//! The check makes a header torn below 64 bytes (docs/faults.md) or one whose data block is not
//! the one it was written with read as no entry; the protocol never needs that entry then, since
//! the LPQ holds it until the spilled copy is whole.
//!
//! A spilled entry lives in its core's log region (`Layout::log_region`): block 0 of the region
//! is a log head (format 6, informational), spill position `p` of the running transaction has
//! its header at block `1 + 2p` and its data at `2 + 2p`. Positions restart at 0 for each
//! transaction, and the `p`-th spilled entry of a transaction is its entry `index = p`.

use super::le;
use crate::types::{BlockData, BLOCK_BYTES};

pub const REG_MAGIC: &[u8; 8] = b"PROTEUSR";
pub const ENTRY_MAGIC: &[u8; 8] = b"PROTEUSE";
/// Finish registers reserved (one per core, the most cores `machine.cores` allows).
pub const REGISTERS: u64 = 16;

/// Bytes of LPQ state for a queue of `slots` entries.
pub fn bytes(slots: usize) -> u64 {
    (REGISTERS + 2 * slots as u64) * BLOCK_BYTES as u64
}

/// Block offsets (from the LPQ state's first block) of core `c`'s finish register and of slot
/// `s`'s header and data.
pub fn register_block(c: usize) -> u64 {
    c as u64
}
pub fn slot_header_block(s: usize) -> u64 {
    REGISTERS + 2 * s as u64
}
pub fn slot_data_block(s: usize) -> u64 {
    REGISTERS + 1 + 2 * s as u64
}

/// Block offsets (from the first block of a core's log region) of spill position `p`.
pub fn spill_header_block(p: u64) -> u64 {
    1 + 2 * p
}
pub fn spill_data_block(p: u64) -> u64 {
    2 + 2 * p
}
/// Spill positions a log region of `blocks` blocks holds.
pub fn spill_capacity(blocks: u64) -> u64 {
    blocks.saturating_sub(1) / 2
}

/// Encode a finish register.
pub fn encode_register(finished: u64) -> BlockData {
    let mut b = [0u8; BLOCK_BYTES];
    b[0..8].copy_from_slice(REG_MAGIC);
    le::put_u64(&mut b, 8, finished);
    b
}

/// Decode a finish register; `None` if the magic is wrong.
pub fn decode_register(b: &[u8]) -> Option<u64> {
    (&b[0..8] == REG_MAGIC).then(|| le::u64_at(b, 8))
}

/// A decoded entry header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EntryHeader {
    pub core: u32,
    pub seq: u64,
    pub index: u64,
    pub home: u64,
}

impl EntryHeader {
    /// The header block for this entry with old data `data`.
    pub fn encode(&self, data: &BlockData) -> BlockData {
        let mut b = [0u8; BLOCK_BYTES];
        b[0..8].copy_from_slice(ENTRY_MAGIC);
        le::put_u32(&mut b, 8, self.core);
        le::put_u64(&mut b, 16, self.seq);
        le::put_u64(&mut b, 24, self.index);
        le::put_u64(&mut b, 32, self.home);
        let c = check(&b, data);
        le::put_u64(&mut b, 40, c);
        b
    }

    /// Decode a header block and check it against its data block; `None` for a block that is
    /// not a header of this data (an empty slot is all zeros).
    pub fn decode(b: &[u8], data: &[u8]) -> Option<EntryHeader> {
        if &b[0..8] != ENTRY_MAGIC || le::u64_at(b, 40) != check(b, data) {
            return None;
        }
        Some(EntryHeader {
            core: le::u32_at(b, 8),
            seq: le::u64_at(b, 16),
            index: le::u64_at(b, 24),
            home: le::u64_at(b, 32),
        })
    }
}

/// FNV-1a (64-bit) over header bytes 8..40 and the data block.
fn check(header: &[u8], data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in header[8..40].iter().chain(data) {
        h = (h ^ x as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_register_have_the_documented_bytes() {
        let h = EntryHeader { core: 3, seq: 0x0102, index: 5, home: 0x0A0B_0C0D };
        let d = [7u8; 64];
        let b = h.encode(&d);
        assert_eq!(&b[0..8], b"PROTEUSE");
        assert_eq!((b[8], b[16], b[17], b[24], b[32], b[35]), (3, 0x02, 0x01, 5, 0x0D, 0x0A));
        assert!(b[48..].iter().all(|&x| x == 0));
        assert_eq!(EntryHeader::decode(&b, &d), Some(h));
        assert_eq!(EntryHeader::decode(&[0u8; 64], &d), None, "an empty slot is no entry");
        assert_eq!(EntryHeader::decode(&b, &[0u8; 64]), None, "another data block fails the check");
        let mut torn = b;
        torn[16] ^= 1;
        assert_eq!(EntryHeader::decode(&torn, &d), None, "a header torn at its seq fails the check");
        let r = encode_register(0x1122);
        assert_eq!((&r[0..8], r[8], r[9]), (&b"PROTEUSR"[..], 0x22, 0x11));
        assert_eq!(decode_register(&r), Some(0x1122));
        assert_eq!(decode_register(&b), None);
        assert_eq!(
            (slot_header_block(0), slot_data_block(2), spill_header_block(1), spill_capacity(7)),
            (16, 21, 3, 3)
        );
    }
}
