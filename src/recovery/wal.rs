//! Recovery of H-WAL's block log ([`crate::log::wal`]).
//!
//! In each core's log region (`Layout::log_region`; one region with one core): from the head's
//! `start`, expecting `start_seq`, read descriptors and the data blocks they announce until a
//! commit record of the same sequence number whose block count matches; that transaction is
//! committed; go on with the next sequence number. Anything else (a torn or stale block, a
//! count mismatch, a wrong sequence number, on more than one core a commit record whose global
//! `order` does not grow) ends the region's valid log.
//!
//! With one core the committed transactions are redone in log order. With more than one, those
//! whose global sequence number is below the largest `home_below` of any region's head are
//! already at home and skipped; the others are redone in global sequence order, whatever their
//! region (docs/formats/wal-log.md, "Regions"). Finally each region's head is rewritten to point
//! just past its last committed transaction.

use super::Plan;
use crate::log::head::{LogFormat, LogHead};
use crate::log::wal::{CommitRecord, Descriptor};
use crate::pmem::{read_block, Layout};
use crate::types::BlockId;

/// A committed transaction found in a region: its global sequence number (its position in
/// the region with one core) and its (home block, log block) pairs in log order.
pub(crate) struct Committed {
    pub order: u64,
    pub blocks: Vec<(u64, BlockId)>,
}

/// What recovery found in one region: its committed transactions in log order, its head block
/// and the head to write after recovery.
struct Region {
    txs: Vec<Committed>,
    log0: BlockId,
    home_below: u64,
    next: LogHead,
}

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let multi = layout.cores > 1;
    let regions =
        (0..layout.cores as usize).map(|c| scan(layout, image, c, multi)).collect::<Result<Vec<_>, String>>()?;
    let mut plan = Plan::default();
    let heads: Vec<_> = regions.iter().map(|r| (r.log0, r.next, r.home_below)).collect();
    let txs = regions.into_iter().flat_map(|r| r.txs);
    let home_below = redo_in_order(&mut plan, image, heads.iter().map(|h| h.2), txs, multi);
    for (log0, next, _) in heads {
        plan.writes.push((log0, next.encode_home(home_below)));
    }
    Ok(plan)
}

/// Redo `txs` (every region's committed transactions, each region's in log order) into `plan`:
/// with one region in log order; with more (`multi`), skipping those below the largest of
/// `heads_home_below` and the others in global sequence order. Returns the `home_below` the
/// new heads carry: once the plan is applied every transaction found is at home (0 with one
/// region). Shared by H-WAL and EC-WAL.
pub(crate) fn redo_in_order(
    plan: &mut Plan,
    image: &[u8],
    heads_home_below: impl Iterator<Item = u64>,
    txs: impl Iterator<Item = Committed>,
    multi: bool,
) -> u64 {
    let skip_below = heads_home_below.max().unwrap_or(0);
    let mut txs: Vec<Committed> = txs.collect();
    let top = txs.iter().map(|t| t.order + 1).max().unwrap_or(0);
    if multi {
        txs.retain(|t| t.order >= skip_below);
        // Stable: equal numbers (only in a corrupt log) keep region order.
        txs.sort_by_key(|t| t.order);
    }
    for t in &txs {
        for &(home, at) in &t.blocks {
            plan.writes.push((BlockId(home), read_block(image, at)));
        }
        plan.redone_txs += 1;
    }
    if multi {
        skip_below.max(top)
    } else {
        0
    }
}

/// The committed transactions of core `c`'s region.
fn scan(layout: &Layout, image: &[u8], c: usize, multi: bool) -> Result<Region, String> {
    let (log0, blocks) = layout.log_region(c);
    let head = LogHead::decode(&image[log0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
    if head.format != LogFormat::HWal {
        return Err(format!("corrupt log at block {}: log head format {:?}, expected HWal", log0.0, head.format));
    }
    let cap = blocks - 1;
    super::head_in_range(&head, log0, cap + 16)?;
    let pos = |lsn: u64| BlockId(log0.0 + 1 + lsn % cap);
    let data_blocks = layout.data_bytes / 64;
    let mut txs = Vec::new();
    let (mut lsn, mut seq) = (head.start, head.start_seq);
    let mut pending: Vec<(u64, BlockId)> = Vec::new();
    let mut cursor = lsn;
    let mut last_order = 0;
    while cursor - head.start < cap {
        let blk = &image[pos(cursor).range()];
        if let Some(d) = Descriptor::decode(blk).filter(|d| d.seq == seq) {
            if d.addrs.iter().any(|&a| a as u64 >= data_blocks) {
                break; // a descriptor pointing outside the data area is not ours
            }
            for (i, &a) in d.addrs.iter().enumerate() {
                pending.push((a as u64, pos(cursor + 1 + i as u64)));
            }
            cursor += 1 + d.addrs.len() as u64;
        } else if let Some(c) = CommitRecord::decode(blk)
            .filter(|c| c.seq == seq && c.blocks as usize == pending.len() && (!multi || c.order > last_order))
        {
            let order = if multi { c.order } else { txs.len() as u64 };
            last_order = c.order;
            txs.push(Committed { order, blocks: std::mem::take(&mut pending) });
            cursor += 1;
            lsn = cursor;
            seq += 1;
        } else {
            break;
        }
    }
    let next = LogHead { format: LogFormat::HWal, start: lsn, start_seq: seq };
    let home_below = if multi { LogHead::home_below(&image[log0.range()]) } else { 0 };
    Ok(Region { txs, log0, home_below, next })
}
