//! LOC-WAL's Transaction Dependency Pairs (`loc-iccd2014.txt` III-B: `<Tx, Ty, n>`), stored in
//! the data slots of Eager Commit block groups ([`crate::log::ec`]) whose BLK-TAG has the P bit
//! set and ADDR = the number of entries in the block. Written once per speculation window, when
//! the window completes, in the window's last group; that group's META is ordered after every
//! other log write of the window (docs/formats/loc-log.md).
//!
//! A pair block holds up to 16 entries of 4 bytes, little-endian:
//!
//! | bytes | field | meaning |
//! |-------|-------|---------|
//! | 0     | Tx    | TxID of the earlier transaction |
//! | 1     | Ty    | TxID of the later transaction |
//! | 2..4  | n     | u16 |
//!
//! `Tx != Ty`: Tx has `n` blocks whose versions were coalesced into Ty's (a dependency pair).
//! `Tx == Ty`: a record about Tx alone: `n = 0xFFFF` marks Tx aborted (recovery skips it);
//! otherwise `n` is Tx's TxCnt, for a transaction none of whose logged blocks carries it (all
//! its blocks were coalesced into later ones, or it wrote nothing).

use super::ec::BlkTag;
use crate::types::{BlockData, BLOCK_BYTES};

/// TxCnt of a window's order tag ([`order_tag`]): a pair block's tag has TxCnt 0.
const ORDER_MARK: u16 = 0xFFFF;

/// LOC-WAL on more than one core: the tag that ends a speculation window in its core's log
/// region and gives its global order number `order` (below 2^40; windows become durable in
/// this order, a dependent's after its sources'): P set, TxCnt = 0xFFFF, ADDR the order's low
/// 32 bits, TxID its bits 32..40, CID the core. Its slot's data block is not written.
pub fn order_tag(order: u64, cid: u8) -> BlkTag {
    assert!(order < 1 << 40, "a window order number below 2^40");
    BlkTag { addr: order as u32, tx_cnt: ORDER_MARK, tx_id: (order >> 32) as u8, tid: 0, cid, pair: true }
}

/// The window order number of an order tag ([`order_tag`]); `None` for any other tag.
pub fn window_order(t: &BlkTag) -> Option<u64> {
    (t.pair && t.tx_cnt == ORDER_MARK).then_some(t.addr as u64 | (t.tx_id as u64) << 32)
}

/// Entries per pair block.
pub const PAIRS_PER_BLOCK: usize = BLOCK_BYTES / 4;
/// `n` of a self-record marking an aborted transaction.
pub const ABORTED: u16 = 0xFFFF;

/// Transactions live at once (8-bit circular TxIDs, half the space): recovery reads a TxID
/// relative to the log head's `start_seq`, so no live transaction may be 128 or more past it.
pub const MAX_LIVE_TXS: u64 = 128;

/// One entry `<tx, ty, n>`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    pub tx: u8,
    pub ty: u8,
    pub n: u16,
}

impl Pair {
    /// The record "Tx aborted".
    pub fn aborted(tx: u8) -> Pair {
        Pair { tx, ty: tx, n: ABORTED }
    }

    /// The record "Tx's TxCnt is `n`".
    pub fn count(tx: u8, n: u16) -> Pair {
        Pair { tx, ty: tx, n }
    }
}

/// Encode up to [`PAIRS_PER_BLOCK`] entries (the rest of the block is zero).
pub fn encode(pairs: &[Pair]) -> BlockData {
    assert!(pairs.len() <= PAIRS_PER_BLOCK);
    let mut b = [0u8; BLOCK_BYTES];
    for (i, p) in pairs.iter().enumerate() {
        b[4 * i] = p.tx;
        b[4 * i + 1] = p.ty;
        b[4 * i + 2..4 * i + 4].copy_from_slice(&p.n.to_le_bytes());
    }
    b
}

/// Decode the first `count` entries (`count` from the block's tag; clamped to the block).
pub fn decode(b: &[u8], count: usize) -> Vec<Pair> {
    (0..count.min(PAIRS_PER_BLOCK))
        .map(|i| Pair { tx: b[4 * i], ty: b[4 * i + 1], n: u16::from_le_bytes([b[4 * i + 2], b[4 * i + 3]]) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_round_trip_at_the_documented_bytes() {
        let ps = [Pair { tx: 3, ty: 9, n: 0x0102 }, Pair::aborted(4), Pair::count(5, 7)];
        let b = encode(&ps);
        assert_eq!(&b[0..4], &[3, 9, 0x02, 0x01], "Tx, Ty, n little-endian");
        assert_eq!(&b[4..8], &[4, 4, 0xFF, 0xFF]);
        assert_eq!(decode(&b, 3), ps.to_vec());
        assert_eq!(decode(&b, 1), vec![ps[0]]);
        assert_eq!(decode(&b, 99).len(), PAIRS_PER_BLOCK, "a torn count cannot read past the block");
    }

    #[test]
    fn an_order_tag_is_told_from_a_pair_block() {
        let t = order_tag(0x12_3456_789A, 9);
        let v = t.encode();
        assert_eq!((v & 0xFFFF_FFFF, v >> 32 & 0xFFFF, v >> 48 & 0xFF), (0x3456_789A, 0xFFFF, 0x12));
        assert_eq!(window_order(&BlkTag::decode(v).unwrap()), Some(0x12_3456_789A));
        let pairs = BlkTag { addr: 16, pair: true, ..Default::default() };
        assert_eq!(window_order(&pairs), None);
    }

    #[test]
    fn a_full_block_holds_sixteen_pairs() {
        let ps: Vec<Pair> = (0..16).map(|i| Pair { tx: i, ty: i + 1, n: i as u16 * 300 }).collect();
        assert_eq!(decode(&encode(&ps), 16), ps);
    }
}
