//! H-WAL's redo log: a circular sequence of 64-byte blocks after the head.
//!
//! Log position `lsn` (a u64 that only grows) lives at log block `1 + lsn % capacity`. One
//! transaction with sequence number `seq` and data blocks `d0..dn` occupies consecutive
//! positions: `[desc][d0..d11][desc][d12..d23]...[commit]`: each descriptor lists the home block
//! numbers of the up to 12 data blocks that follow it; the commit record ends the transaction.
//!
//! Descriptor (64 bytes):
//!
//! | bytes  | field  | meaning                                          |
//! |--------|--------|--------------------------------------------------|
//! | 0..4   | magic  | `DESC`                                           |
//! | 4      | count  | u8, 1..=12 data blocks follow                    |
//! | 5..8   | 0      |                                                  |
//! | 8..16  | seq    | u64 transaction sequence number                  |
//! | 16..64 | addrs  | 12 x u32 home block numbers (the paper's ADDR)   |
//!
//! Commit record (64 bytes): `CMIT`, u32 total data blocks at 4..8, u64 seq at 8..16, u64
//! order at 16..24 (the global commit sequence number on more than one core, 0 with one),
//! zeros.
//!
//! `seq` numbers the transactions of one log region (one core's log) consecutively, so a
//! descriptor written before commit carries it; `order` is assigned at commit across every core
//! and orders recovery across regions (docs/formats/wal-log.md, "Regions").
//!
//! The commit record is written only after every descriptor and data block of its transaction
//! is durable (intra-transaction ordering), so a durable commit record vouches for them.

use super::le;
use crate::types::{BlockData, BLOCK_BYTES};

pub const DESC_MAGIC: u32 = u32::from_le_bytes(*b"DESC");
pub const COMMIT_MAGIC: u32 = u32::from_le_bytes(*b"CMIT");
/// Home block numbers per descriptor.
pub const ADDRS_PER_DESC: usize = 12;

/// A descriptor: the homes of the data blocks that follow it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    pub seq: u64,
    pub addrs: Vec<u32>,
}

impl Descriptor {
    pub fn encode_parts(seq: u64, addrs: &[u32]) -> BlockData {
        assert!((1..=ADDRS_PER_DESC).contains(&addrs.len()));
        let mut b = [0u8; BLOCK_BYTES];
        le::put_u32(&mut b, 0, DESC_MAGIC);
        b[4] = addrs.len() as u8;
        le::put_u64(&mut b, 8, seq);
        for (i, a) in addrs.iter().enumerate() {
            le::put_u32(&mut b, 16 + 4 * i, *a);
        }
        b
    }

    pub fn encode(&self) -> BlockData {
        Descriptor::encode_parts(self.seq, &self.addrs)
    }

    /// Decode; `None` unless magic and count are valid.
    pub fn decode(b: &[u8]) -> Option<Descriptor> {
        if le::u32_at(b, 0) != DESC_MAGIC || b[4] == 0 || b[4] as usize > ADDRS_PER_DESC {
            return None;
        }
        let n = b[4] as usize;
        Some(Descriptor { seq: le::u64_at(b, 8), addrs: (0..n).map(|i| le::u32_at(b, 16 + 4 * i)).collect() })
    }
}

/// A commit record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CommitRecord {
    pub seq: u64,
    pub blocks: u32,
    /// Global commit sequence number (more than one core; 0 with one).
    pub order: u64,
}

impl CommitRecord {
    pub fn encode(&self) -> BlockData {
        let mut b = [0u8; BLOCK_BYTES];
        le::put_u32(&mut b, 0, COMMIT_MAGIC);
        le::put_u32(&mut b, 4, self.blocks);
        le::put_u64(&mut b, 8, self.seq);
        le::put_u64(&mut b, 16, self.order);
        b
    }

    pub fn decode(b: &[u8]) -> Option<CommitRecord> {
        (le::u32_at(b, 0) == COMMIT_MAGIC).then(|| CommitRecord {
            blocks: le::u32_at(b, 4),
            seq: le::u64_at(b, 8),
            order: le::u64_at(b, 16),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_round_trips_with_one_and_twelve_addresses() {
        for n in [1usize, 12] {
            let d = Descriptor { seq: 77, addrs: (0..n as u32).map(|i| i * 1000 + 3).collect() };
            assert_eq!(Descriptor::decode(&d.encode()), Some(d));
        }
    }

    #[test]
    fn descriptor_layout_is_little_endian_at_documented_offsets() {
        let b = Descriptor::encode_parts(0x0A0B, &[0x11223344]);
        assert_eq!(&b[0..4], b"DESC");
        assert_eq!(b[4], 1);
        assert_eq!((b[8], b[9]), (0x0B, 0x0A));
        assert_eq!(&b[16..20], &[0x44, 0x33, 0x22, 0x11]);
    }

    #[test]
    fn commit_round_trips_and_is_not_a_descriptor() {
        let c = CommitRecord { seq: 5, blocks: 3, order: 0 };
        let b = c.encode();
        assert_eq!(CommitRecord::decode(&b), Some(c));
        assert!(b[16..].iter().all(|&x| x == 0), "one core: zeros after seq");
        let o = CommitRecord { order: 0x0102, ..c };
        assert_eq!((o.encode()[16], o.encode()[17]), (0x02, 0x01), "order little-endian at 16");
        assert_eq!(CommitRecord::decode(&o.encode()), Some(o));
        assert_eq!(Descriptor::decode(&b), None);
        assert_eq!(CommitRecord::decode(&Descriptor::encode_parts(5, &[1])), None);
    }

    #[test]
    fn zero_block_decodes_as_nothing() {
        assert_eq!(Descriptor::decode(&[0; 64]), None);
        assert_eq!(CommitRecord::decode(&[0; 64]), None);
    }
}
