//! Recovery of H-WAL's block log ([`crate::log::wal`]).
//!
//! From the head's `start`, expecting `start_seq`: read descriptors and the data blocks they
//! announce until a commit record of the same sequence number whose block count matches; redo
//! those blocks home, in log order; go on with the next sequence number. Anything else (a torn
//! or stale block, a count mismatch, a wrong sequence number) ends the valid log. Finally the
//! head is rewritten to point just past the last committed transaction.

use super::Plan;
use crate::log::head::{LogFormat, LogHead};
use crate::log::wal::{CommitRecord, Descriptor};
use crate::pmem::{read_block, Layout};
use crate::types::BlockId;

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let log0 = layout.log_block0();
    let head = LogHead::decode(&image[log0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
    if head.format != LogFormat::HWal {
        return Err(format!("corrupt log at block {}: log head format {:?}, expected HWal", log0.0, head.format));
    }
    let cap = layout.log_blocks() - 1;
    super::head_in_range(&head, log0, cap + 16)?;
    let pos = |lsn: u64| BlockId(log0.0 + 1 + lsn % cap);
    let data_blocks = layout.data_bytes / 64;
    let mut plan = Plan::default();
    let (mut lsn, mut seq) = (head.start, head.start_seq);
    let mut pending: Vec<(u32, u64)> = Vec::new();
    let mut cursor = lsn;
    while cursor - head.start < cap {
        let blk = &image[pos(cursor).range()];
        if let Some(d) = Descriptor::decode(blk).filter(|d| d.seq == seq) {
            if d.addrs.iter().any(|&a| a as u64 >= data_blocks) {
                break; // a descriptor pointing outside the data area is not ours
            }
            for (i, &a) in d.addrs.iter().enumerate() {
                pending.push((a, cursor + 1 + i as u64));
            }
            cursor += 1 + d.addrs.len() as u64;
        } else if let Some(c) = CommitRecord::decode(blk).filter(|c| c.seq == seq && c.blocks as usize == pending.len())
        {
            let _ = c;
            for &(a, l) in &pending {
                plan.writes.push((BlockId(a as u64), read_block(image, pos(l))));
            }
            pending.clear();
            plan.redone_txs += 1;
            cursor += 1;
            lsn = cursor;
            seq += 1;
        } else {
            break;
        }
    }
    let new_head = LogHead { format: LogFormat::HWal, start: lsn, start_seq: seq };
    plan.writes.push((log0, new_head.encode()));
    Ok(plan)
}
