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
//! Tag block: 0 u8 `valid` (1 = the data block holds committed data), 1 u8 `cid` (the core
//! whose transaction committed it: its owner; 0 with one core), 8..16 u64 `home` block, 16..24
//! u64 `seq` of the transaction that committed it (the global commit sequence); the rest 0.
//!
//! With more than one core (docs/multicore.md), one Core Binding block per core follows the
//! slots (`1 + 2 * slots + c` for core `c`): 0..8 magic `LOCSIMCB`, 8..16 u64 `local`: the
//! core-local sequence number of the core's last committed transaction with blocks in its
//! fallback-log region, 16..24 u64 `seq`: the global sequence number it committed as (0, 0:
//! none). The fallback log's TxIDs are core-local (a transaction's global number is assigned at
//! commit, after its evicted lines were logged); the binding names the one logged transaction
//! of the region that may count. With one core there are no binding blocks (local and global
//! numbers are the same).

use super::le;
use crate::types::{BlockData, BLOCK_BYTES};

pub const MAGIC: &[u8; 8] = b"LOCSIMNV";
/// Magic of a Core Binding block.
pub const BINDING_MAGIC: &[u8; 8] = b"LOCSIMCB";

/// Core Binding blocks after the slots: one per core with more than one core, else none.
fn bindings(cores: u32) -> u64 {
    if cores > 1 {
        cores as u64
    } else {
        0
    }
}

/// Bytes of NV-LLC state for an LLC of `slots` line frames shared by `cores` cores.
pub fn bytes(slots: usize, cores: u32) -> u64 {
    (1 + 2 * slots as u64 + bindings(cores)) * BLOCK_BYTES as u64
}

/// Line frames described by `bytes` of NV-LLC state of `cores` cores (the inverse of [`bytes`]).
pub fn slots_in(bytes: u64, cores: u32) -> usize {
    ((bytes / BLOCK_BYTES as u64).saturating_sub(1 + bindings(cores)) / 2) as usize
}

/// Block offset (from the NV-LLC's first block) of core `c`'s Core Binding block.
pub fn binding_block(slots: usize, c: usize) -> u64 {
    1 + 2 * slots as u64 + c as u64
}

/// A Core Binding: the core's transaction `local` committed as global `seq`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct Binding {
    pub local: u64,
    pub seq: u64,
}

impl Binding {
    pub fn encode(&self) -> BlockData {
        let mut b = [0u8; BLOCK_BYTES];
        b[0..8].copy_from_slice(BINDING_MAGIC);
        le::put_u64(&mut b, 8, self.local);
        le::put_u64(&mut b, 16, self.seq);
        b
    }

    /// `None` if the block is not a binding.
    pub fn decode(b: &[u8]) -> Option<Binding> {
        (&b[0..8] == BINDING_MAGIC).then(|| Binding { local: le::u64_at(b, 8), seq: le::u64_at(b, 16) })
    }
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

/// A slot's tag: `Some((home, seq))` = committed data of `home` by transaction `seq` (of
/// core 0).
pub fn encode_tag(t: Option<(u64, u64)>) -> BlockData {
    encode_owned_tag(t.map(|(home, seq)| (home, seq, 0)))
}

/// A slot's tag: `Some((home, seq, cid))` = committed data of `home` by transaction `seq` of
/// core `cid`.
pub fn encode_owned_tag(t: Option<(u64, u64, u8)>) -> BlockData {
    let mut b = [0u8; BLOCK_BYTES];
    if let Some((home, seq, cid)) = t {
        b[0] = 1;
        b[1] = cid;
        le::put_u64(&mut b, 8, home);
        le::put_u64(&mut b, 16, seq);
    }
    b
}

/// `(home, seq)` of a tag holding committed data.
pub fn decode_tag(b: &[u8]) -> Option<(u64, u64)> {
    (b[0] == 1).then(|| (le::u64_at(b, 8), le::u64_at(b, 16)))
}

/// The owner core of a tag.
pub fn tag_cid(b: &[u8]) -> u8 {
    b[1]
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
        assert_eq!(bytes(4, 1), 9 * 64);
        assert_eq!((tag_block(3), data_block(3)), (7, 8));
    }

    #[test]
    fn owner_and_core_bindings_sit_at_the_documented_bytes() {
        let t = encode_owned_tag(Some((7, 9, 5)));
        assert_eq!((t[0], t[1], t[8], t[16]), (1, 5, 7, 9));
        assert_eq!((decode_tag(&t), tag_cid(&t)), (Some((7, 9)), 5));
        assert_eq!(encode_owned_tag(Some((7, 9, 0))), encode_tag(Some((7, 9))), "core 0: the one-core tag");
        let b = Binding { local: 0x0102, seq: 7 }.encode();
        assert_eq!((&b[0..8], b[8], b[9], b[16]), (&BINDING_MAGIC[..], 0x02, 0x01, 7));
        assert_eq!(Binding::decode(&b), Some(Binding { local: 0x0102, seq: 7 }));
        assert_eq!(Binding::decode(&[0u8; 64]), None);
        // Four slots and four cores: the register, 8 slot blocks, then a binding per core.
        assert_eq!(bytes(4, 4), 13 * 64);
        assert_eq!((slots_in(bytes(4, 4), 4), slots_in(bytes(4, 1), 1)), (4, 4));
        assert_eq!((binding_block(4, 0), binding_block(4, 3)), (9, 12));
    }
}
