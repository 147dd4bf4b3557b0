//! Eager Commit's memory log (EC-WAL, and the log of LOC): statically organised block groups.
//!
//! After the head (block 0), the log area is divided into groups of eight 64-byte blocks: seven
//! data blocks (slots 0..7) and one META block (slot 7). Group `sid` (a sequence number that only
//! grows) lives at group index `sid % groups`, i.e. log blocks `1 + 8 * (sid % groups)` ..= `+7`.
//! The controller makes a group's META durable after the group's data blocks.
//!
//! META block (64 bytes, little-endian):
//!
//! | bytes  | field | meaning |
//! |--------|-------|---------|
//! | 0..8   | SID   | u64 sequence id of this group |
//! | 8..64  | BLK-TAG x 7 | u64 each, one per data slot |
//!
//! BLK-TAG (64 bits, bit 0 = least significant):
//!
//! | bits   | field | meaning |
//! |--------|-------|---------|
//! | 0..32  | ADDR  | home block number of the data |
//! | 32..48 | TxCnt | total log blocks of the transaction on its last block, 0 on the others |
//! | 48..56 | TxID  | 8-bit circular transaction id |
//! | 56     | TID   | hardware thread id (0) |
//! | 57..60 | CID   | core id (0) |
//! | 60     | V     | slot valid (one of the paper's four reserved bits: a group may be closed before all seven slots are filled) |
//! | 61     | P     | the slot holds no logged data: under LOC-WAL a block of Tx Dependency Pairs ([`crate::log::loc`]), ADDR then its number of entries; under EC-WAL on more than one core the transaction's order tag ([`BlkTag::order_tag`]), whose data block is not written |
//! | 62     | CID3  | the core id's fourth bit (cores 8..15; `machine.cores` goes to 16, the paper's CID to 8) |
//! | 63     | RESV  | 0 |

use super::le;
use crate::types::{BlockData, BLOCK_BYTES};

/// The valid groups of a log area from SID `start` on, in order: (SID, first block, META), while
/// each group's META carries the expected SID and at least one tag (a stale or torn META ends
/// the valid log). `log0` is the log head's block; groups follow it.
pub fn valid_groups(image: &[u8], log0: u64, groups: u64, start: u64) -> impl Iterator<Item = (u64, u64, Meta)> + '_ {
    (start..start + groups)
        .map(move |sid| {
            let g0 = log0 + 1 + GROUP_BLOCKS * (sid % groups);
            let at = ((g0 + DATA_SLOTS as u64) * BLOCK_BYTES as u64) as usize;
            (sid, g0, Meta::decode(&image[at..at + BLOCK_BYTES]))
        })
        .take_while(|(sid, _, meta)| meta.sid == *sid && meta.tags.iter().any(|t| t.is_some()))
}

/// Data slots per group.
pub const DATA_SLOTS: usize = 7;
/// Blocks per group (data slots + META).
pub const GROUP_BLOCKS: u64 = 8;

/// One BLK-TAG.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct BlkTag {
    pub addr: u32,
    pub tx_cnt: u16,
    pub tx_id: u8,
    pub tid: u8,
    pub cid: u8,
    /// The slot holds dependency pairs (LOC-WAL), not logged data.
    pub pair: bool,
}

impl BlkTag {
    /// Encode as a valid tag.
    pub fn encode(&self) -> u64 {
        debug_assert!(self.tid < 2 && self.cid < 16);
        (self.addr as u64)
            | (self.tx_cnt as u64) << 32
            | (self.tx_id as u64) << 48
            | (self.tid as u64) << 56
            | (self.cid as u64 & 7) << 57
            | 1 << 60
            | (self.pair as u64) << 61
            | (self.cid as u64 >> 3) << 62
    }

    /// Decode; `None` for an empty (invalid) slot.
    pub fn decode(v: u64) -> Option<BlkTag> {
        (v >> 60 & 1 == 1).then_some(BlkTag {
            addr: v as u32,
            tx_cnt: (v >> 32) as u16,
            tx_id: (v >> 48) as u8,
            tid: (v >> 56 & 1) as u8,
            cid: (v >> 57 & 7 | (v >> 62 & 1) << 3) as u8,
            pair: v >> 61 & 1 == 1,
        })
    }
}

impl BlkTag {
    /// EC-WAL on more than one core: the tag that ends a transaction (after the tag carrying
    /// TxCnt, in the same or the next group) and gives its global commit sequence number
    /// `order` (below 2^48): P set, ADDR its low 32 bits, TxCnt its high 16 bits. Its slot's data
    /// block is not written.
    pub fn order_tag(order: u64, tx_id: u8) -> BlkTag {
        assert!(order < 1 << 48, "a global commit sequence number below 2^48");
        BlkTag { addr: order as u32, tx_cnt: (order >> 32) as u16, tx_id, tid: 0, cid: 0, pair: true }
    }

    /// The global commit sequence number of an order tag ([`BlkTag::order_tag`]).
    pub fn order(&self) -> u64 {
        self.addr as u64 | (self.tx_cnt as u64) << 32
    }
}

/// A decoded META block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub sid: u64,
    pub tags: [Option<BlkTag>; DATA_SLOTS],
}

impl Meta {
    pub fn encode(&self) -> BlockData {
        let mut b = [0u8; BLOCK_BYTES];
        le::put_u64(&mut b, 0, self.sid);
        for (i, t) in self.tags.iter().enumerate() {
            le::put_u64(&mut b, 8 + 8 * i, t.map_or(0, |t| t.encode()));
        }
        b
    }

    pub fn decode(b: &[u8]) -> Meta {
        let mut tags = [None; DATA_SLOTS];
        for (i, t) in tags.iter_mut().enumerate() {
            *t = BlkTag::decode(le::u64_at(b, 8 + 8 * i));
        }
        let word = le::u64_at(b, 0);
        let sid = if word >> 63 == 0 {
            word
        } else if word >> SID_BITS & CHECK_MASK == meta_check(word & SID_MASK, b) {
            word & SID_MASK
        } else {
            BAD_SID // a torn or damaged checksummed META: no SID recovery expects
        };
        Meta { sid, tags }
    }

    /// Encode with the checksum (`log.meta_checksum`): SID word = bit 63 set, bits 39..63 the
    /// checksum of the SID and the seven tags, bits 0..39 the SID.
    pub fn encode_checked(&self) -> BlockData {
        assert!(self.sid <= SID_MASK, "a checksummed META has a SID below 2^39");
        let mut b = self.encode();
        let word = 1 << 63 | meta_check(self.sid, &b) << SID_BITS | self.sid;
        le::put_u64(&mut b, 0, word);
        b
    }
}

/// Bits of the SID in a checksummed META (2^39 groups of 512 bytes: 256 TiB of log writes).
pub const SID_BITS: u32 = 39;
const SID_MASK: u64 = (1 << SID_BITS) - 1;
const CHECK_MASK: u64 = (1 << 24) - 1;
/// The SID a META that fails its checksum decodes to (never one recovery expects).
pub const BAD_SID: u64 = u64::MAX;

/// Does a log of this format hold block groups (EC-WAL, LOC-WAL, Kiln's fallback log)?
pub fn in_groups(f: super::head::LogFormat) -> bool {
    use super::head::LogFormat::*;
    matches!(f, Ec | Loc | Kiln)
}

/// Format the groups of a log area (of every core's region) for checksummed METAs (`log.meta_checksum`): every META
/// block holds a SID word with the checksum bit set and a wrong checksum, so that no META
/// block, however torn, decodes without a checksum, not even the first lap's (a zeroed META
/// block would decode as the papers' format with SID 0).
pub fn format_checked(layout: &crate::pmem::Layout, image: &mut [u8]) {
    let empty = Meta { sid: 0, tags: [None; DATA_SLOTS] }.encode();
    let word = 1 << 63 | (meta_check(0, &empty) ^ 1) << SID_BITS;
    for c in 0..layout.cores as usize {
        let (log0, blocks) = layout.log_region(c);
        for g in 0..(blocks - 1) / GROUP_BLOCKS {
            let at = (log0.0 + 1 + GROUP_BLOCKS * g + DATA_SLOTS as u64) as usize * BLOCK_BYTES;
            image[at..at + BLOCK_BYTES].copy_from_slice(&empty);
            le::put_u64(&mut image[at..], 0, word);
        }
    }
}

/// 24-bit checksum of a META: FNV-1a over the SID and the tag bytes (8..64), folded.
fn meta_check(sid: u64, b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in sid.to_le_bytes().iter().chain(&b[8..64]) {
        h = (h ^ x as u64).wrapping_mul(0x100_0000_01b3);
    }
    (h ^ h >> 24 ^ h >> 48) & CHECK_MASK
}

#[cfg(test)]
mod checked_tests {
    use super::*;

    #[test]
    fn a_checksummed_meta_round_trips_and_a_torn_one_is_refused() {
        let mut tags = [None; DATA_SLOTS];
        for (i, t) in tags.iter_mut().enumerate() {
            *t = Some(BlkTag { addr: 100 + i as u32, tx_cnt: (i == 6) as u16 * 7, tx_id: 9, ..Default::default() });
        }
        let m = Meta { sid: 12345, tags };
        let b = m.encode_checked();
        assert_eq!(b[7] >> 7, 1, "bit 63 marks the checksum");
        assert_eq!(Meta::decode(&b), m);
        assert_eq!(Meta::decode(&m.encode()), m, "the papers' format still decodes");
        // Any proper subset of its 8-byte units over an older META of another group.
        let old =
            Meta { sid: 12345 - 64, tags: [Some(BlkTag { addr: 5, tx_id: 9, tx_cnt: 1, ..Default::default() }); 7] }
                .encode_checked();
        for mask in 1u32..255 {
            let mut torn = old;
            for u in 0..8 {
                if mask >> u & 1 == 1 {
                    torn[8 * u..8 * u + 8].copy_from_slice(&b[8 * u..8 * u + 8]);
                }
            }
            assert_ne!(Meta::decode(&torn).sid, 12345, "mask {mask:08b}");
        }
        // A formatted log: no META decodes, and a first-lap META torn over one does not either.
        let layout = crate::pmem::Layout::new(64 * 64, 64 * 1024);
        let mut img = vec![0u8; layout.total_bytes() as usize];
        format_checked(&layout, &mut img);
        let first = (layout.log_block0().0 + 1 + DATA_SLOTS as u64) as usize * 64;
        assert_eq!(Meta::decode(&img[first..first + 64]).sid, BAD_SID);
        let zero = Meta { sid: 0, ..m.clone() }.encode_checked();
        for mask in 1u32..255 {
            let mut torn: [u8; 64] = img[first..first + 64].try_into().unwrap();
            for u in (0..8).filter(|u| mask >> u & 1 == 1) {
                torn[8 * u..8 * u + 8].copy_from_slice(&zero[8 * u..8 * u + 8]);
            }
            assert_eq!(Meta::decode(&torn).sid, BAD_SID, "mask {mask:08b}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_fields_sit_at_the_documented_bits() {
        let t = BlkTag { addr: 0xDEAD_BEEF, tx_cnt: 0x1234, tx_id: 0xAB, tid: 1, cid: 5, pair: false };
        let v = t.encode();
        assert_eq!(v & 0xFFFF_FFFF, 0xDEAD_BEEF);
        assert_eq!(v >> 32 & 0xFFFF, 0x1234);
        assert_eq!(v >> 48 & 0xFF, 0xAB);
        assert_eq!(v >> 56 & 1, 1);
        assert_eq!(v >> 57 & 7, 5);
        assert_eq!(v >> 60, 1, "valid bit set, other reserved bits clear");
        assert_eq!(BlkTag::decode(v), Some(t));
        assert_eq!(BlkTag::decode(0), None);
        let p = BlkTag { pair: true, ..t };
        assert_eq!(p.encode() >> 60, 0b11, "pair bit is bit 61");
        assert_eq!(BlkTag::decode(p.encode()), Some(p));
        // Cores 8..15: the fourth CID bit is bit 62; cores 0..7 leave it clear.
        let hi = BlkTag { cid: 13, ..t };
        assert_eq!((hi.encode() >> 57 & 7, hi.encode() >> 60), (5, 0b101));
        assert_eq!(BlkTag::decode(hi.encode()), Some(hi));
        assert_eq!(t.encode() >> 62, 0, "core 5: the paper's tag");
        let o = BlkTag::order_tag(0x1234_5678_9ABC, 7);
        let v = o.encode();
        assert_eq!((v & 0xFFFF_FFFF, v >> 32 & 0xFFFF), (0x5678_9ABC, 0x1234), "order in ADDR and TxCnt");
        assert_eq!(v >> 60, 0b11, "an order tag is valid, with P");
        assert_eq!(BlkTag::decode(v).map(|t| (t.order(), t.tx_id)), Some((0x1234_5678_9ABC, 7)));
    }

    #[test]
    fn meta_round_trips_with_empty_slots() {
        let mut tags = [None; DATA_SLOTS];
        tags[0] = Some(BlkTag { addr: 7, tx_cnt: 0, tx_id: 3, ..Default::default() });
        tags[4] = Some(BlkTag { addr: 9, tx_cnt: 2, tx_id: 3, ..Default::default() });
        let m = Meta { sid: 0x0102_0304_0506_0708, tags };
        let b = m.encode();
        assert_eq!(b[0], 0x08, "SID little-endian at byte 0");
        assert_eq!(Meta::decode(&b), m);
        assert_eq!(Meta::decode(&[0u8; 64]), Meta { sid: 0, tags: [None; DATA_SLOTS] });
    }
}
