//! The persistent state of Kiln's non-volatile LLC, as it appears in the durable image after the
//! memory log area (`Layout::nvllc_block0`). docs/model.md section 2: under Kiln and LOC-Kiln the LLC,
//! with its tags and transaction state, survives a crash. docs/formats/kiln.md.
//!
//! Block 0: the commit register (the LLC's LastCommittedTxID). Then two blocks per LLC line
//! frame (slot `s`): a tag block at `1 + 2s` and the line's data at `2 + 2s`. Only what
//! recovery needs is kept: a line's committed data and whose it is; a line holding uncommitted
//! (pending) data has an invalid tag block, since recovery discards it anyway.
//!
//! Register (64 bytes, little-endian): 0..8 magic `LOCSIMNV`, 8..16 u64 `committed`: the
//! sequence number of the last committed transaction (0: none); 16..24 u64 `applied`: recovery
//! has written home everything committed up to this sequence number (0 during a run), so a
//! second recovery ignores it (idempotence).
//!
//! Tag block: 0 u8 `valid` (1 = the data block holds committed data), 8..16 u64 `home` block,
//! 16..24 u64 `seq` of the transaction that committed it; the rest 0.

use super::le;
use crate::types::{BlockData, BLOCK_BYTES};

pub const MAGIC: &[u8; 8] = b"LOCSIMNV";

/// Bytes of NV-LLC state for an LLC of `slots` line frames.
pub fn bytes(slots: usize) -> u64 {
    (1 + 2 * slots as u64) * BLOCK_BYTES as u64
}

/// Block offsets (from the NV-LLC's first block) of slot `s`'s tag and data.
pub fn tag_block(s: usize) -> u64 {
    1 + 2 * s as u64
}
pub fn data_block(s: usize) -> u64 {
    2 + 2 * s as u64
}

/// The commit register: (committed, applied).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Register {
    pub committed: u64,
    pub applied: u64,
}

impl Register {
    pub fn encode(&self) -> BlockData {
        let mut b = [0u8; BLOCK_BYTES];
        b[0..8].copy_from_slice(MAGIC);
        le::put_u64(&mut b, 8, self.committed);
        le::put_u64(&mut b, 16, self.applied);
        b
    }

    /// `None` if the block is not a register.
    pub fn decode(b: &[u8]) -> Option<Register> {
        (&b[0..8] == MAGIC).then(|| Register { committed: le::u64_at(b, 8), applied: le::u64_at(b, 16) })
    }
}

/// A slot's tag: `Some((home, seq))` = committed data of `home` by transaction `seq`.
pub fn encode_tag(t: Option<(u64, u64)>) -> BlockData {
    let mut b = [0u8; BLOCK_BYTES];
    if let Some((home, seq)) = t {
        b[0] = 1;
        le::put_u64(&mut b, 8, home);
        le::put_u64(&mut b, 16, seq);
    }
    b
}

pub fn decode_tag(b: &[u8]) -> Option<(u64, u64)> {
    (b[0] == 1).then(|| (le::u64_at(b, 8), le::u64_at(b, 16)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_and_tags_round_trip_at_the_documented_bytes() {
        let reg = Register { committed: 0x0102, applied: 5 };
        let r = reg.encode();
        assert_eq!(&r[0..8], MAGIC);
        assert_eq!((r[8], r[9], r[16]), (0x02, 0x01, 5), "little-endian");
        assert_eq!(Register::decode(&r), Some(reg));
        assert_eq!(Register::decode(&[0u8; 64]), None);
        let t = encode_tag(Some((7, 9)));
        assert_eq!((t[0], t[8], t[16]), (1, 7, 9));
        assert_eq!(decode_tag(&t), Some((7, 9)));
        assert_eq!(decode_tag(&encode_tag(None)), None);
        assert_eq!(decode_tag(&[0u8; 64]), None, "a zeroed image has no committed lines");
        assert_eq!(bytes(4), 9 * 64);
        assert_eq!((tag_block(3), data_block(3)), (7, 8));
    }
}
