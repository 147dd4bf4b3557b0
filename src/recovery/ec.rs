//! Recovery of Eager Commit's block groups ([`crate::log::ec`]) under strict inter-transaction
//! ordering (EC-WAL, i.e. LOC with a speculation degree of 1).
//!
//! From the head's `start` SID: read each group's META while its SID is the one expected (a
//! stale or torn META ends the valid log). The valid tags, in log order, form runs of one TxID
//! each (transactions log one after the other). A run is committed when it holds a non-zero
//! TxCnt equal to its number of blocks; the first run that is not committed cuts the rest
//! (in-order commit). Committed blocks are redone home in log order; the head is rewritten to the
//! first group not fully redone.

use super::Plan;
use crate::log::ec::{valid_groups, GROUP_BLOCKS};
use crate::log::head::{LogFormat, LogHead};
use crate::pmem::{read_block, Layout};
use crate::types::BlockId;

/// One valid tag in log order: home block, TxID, TxCnt, data position, group SID.
struct Entry {
    home: u32,
    tx_id: u8,
    tx_cnt: u16,
    at: BlockId,
    sid: u64,
}

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let log0 = layout.log_block0();
    let head = LogHead::decode(&image[log0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
    if head.format != LogFormat::Ec {
        return Err(format!("corrupt log at block {}: log head format {:?}, expected Ec", log0.0, head.format));
    }
    let groups = (layout.log_blocks() - 1) / GROUP_BLOCKS;
    super::head_in_range(&head, log0, groups * GROUP_BLOCKS)?;
    let data_blocks = layout.data_bytes / 64;
    let entries = scan(image, log0, groups, head.start);
    let mut plan = Plan::default();
    let mut new_start = head.start + entries.last().map_or(0, |e| e.sid + 1 - head.start);
    let mut i = 0;
    while i < entries.len() {
        let run = entries[i..].iter().take_while(|e| e.tx_id == entries[i].tx_id).count();
        let txs = &entries[i..i + run];
        let count = txs.iter().rev().find(|e| e.tx_cnt != 0).map(|e| e.tx_cnt as usize);
        if count != Some(run) || txs.iter().any(|e| e.home as u64 >= data_blocks) {
            new_start = txs[0].sid;
            break;
        }
        for e in txs {
            plan.writes.push((BlockId(e.home as u64), read_block(image, e.at)));
        }
        plan.redone_txs += 1;
        i += run;
    }
    plan.writes.push((log0, LogHead { format: LogFormat::Ec, start: new_start, start_seq: 0 }.encode()));
    Ok(plan)
}

/// The valid tags of the groups from `start`, in log order, until a META's SID is not the one
/// expected.
fn scan(image: &[u8], log0: BlockId, groups: u64, start: u64) -> Vec<Entry> {
    let mut out = Vec::new();
    for (sid, g0, meta) in valid_groups(image, log0.0, groups, start) {
        for (slot, t) in meta.tags.iter().enumerate() {
            if let Some(t) = t {
                out.push(Entry { home: t.addr, tx_id: t.tx_id, tx_cnt: t.tx_cnt, at: BlockId(g0 + slot as u64), sid });
            }
        }
    }
    out
}
