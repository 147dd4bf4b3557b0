//! Recovery of Eager Commit's block groups ([`crate::log::ec`]) under strict inter-transaction
//! ordering (EC-WAL, i.e. LOC with a speculation degree of 1).
//!
//! In each core's log region (`Layout::log_region`; one with one core), from the head's `start`
//! SID: read each group's META while its SID is the one expected (a stale or torn META ends the
//! valid log). The valid tags, in log order, form runs of one TxID each (transactions log one
//! after the other). A run is committed when it holds a non-zero TxCnt equal to its number of
//! data blocks and, on more than one core, ends with an order tag (P set: the transaction's
//! global sequence number, [`crate::log::ec::BlkTag::order_tag`]); the first run that is not
//! committed cuts the rest (in-order commit). With one core committed blocks are redone home in
//! log order; with more, as for H-WAL (`super::wal::redo_in_order`): transactions below the
//! largest `home_below` of the heads skipped, the others in global sequence order. Each head is
//! rewritten to the first group of its region not fully redone.

use super::wal::{redo_in_order, Committed};
use super::Plan;
use crate::log::ec::{valid_groups, GROUP_BLOCKS};
use crate::log::head::{LogFormat, LogHead};
use crate::pmem::Layout;
use crate::types::BlockId;

/// One valid tag in log order: home block (the global sequence number for an order tag),
/// TxID, TxCnt, data position, group SID, and whether it is an order tag.
struct Entry {
    home: u64,
    tx_id: u8,
    tx_cnt: u16,
    at: BlockId,
    sid: u64,
    order: bool,
}

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let multi = layout.cores > 1;
    let mut heads = Vec::new();
    let mut txs = Vec::new();
    for c in 0..layout.cores as usize {
        let (log0, home_below, new_start) = scan_region(layout, image, c, multi, &mut txs)?;
        heads.push((log0, LogHead { format: LogFormat::Ec, start: new_start, start_seq: 0 }, home_below));
    }
    let mut plan = Plan::default();
    let home_below = redo_in_order(&mut plan, image, heads.iter().map(|h| h.2), txs.into_iter(), multi);
    for (log0, next, _) in heads {
        plan.writes.push((log0, next.encode_home(home_below)));
    }
    Ok(plan)
}

/// Core `c`'s region: its committed transactions appended to `txs`; returns its head block,
/// its head's `home_below` and the SID its new head starts at.
fn scan_region(
    layout: &Layout,
    image: &[u8],
    c: usize,
    multi: bool,
    txs: &mut Vec<Committed>,
) -> Result<(BlockId, u64, u64), String> {
    let (log0, blocks) = layout.log_region(c);
    let (head, groups) = region_head(image, log0, blocks, LogFormat::Ec)?;
    let data_blocks = layout.data_bytes / 64;
    let entries = scan(image, log0, groups, head.start, multi);
    let mut new_start = head.start + entries.last().map_or(0, |e| e.sid + 1 - head.start);
    let (mut i, mut last_order) = (0, 0);
    while i < entries.len() {
        let run = entries[i..].iter().take_while(|e| e.tx_id == entries[i].tx_id).count();
        let run_entries = &entries[i..i + run];
        let (data, order) = match run_entries.split_last() {
            Some((o, data)) if multi && o.order => (data, Some(o.home)),
            _ => (run_entries, None),
        };
        let count = data.iter().rev().find(|e| e.tx_cnt != 0).map(|e| e.tx_cnt as usize);
        let committed = count == Some(data.len())
            && data.iter().all(|e| !e.order && e.home < data_blocks)
            && (!multi || order.is_some_and(|o| o > last_order));
        if !committed {
            new_start = run_entries[0].sid;
            break;
        }
        let order = order.unwrap_or(txs.len() as u64);
        last_order = order;
        txs.push(Committed { order, blocks: data.iter().map(|e| (e.home, e.at)).collect() });
        i += run;
    }
    let home_below = if multi { LogHead::home_below(&image[log0.range()]) } else { 0 };
    Ok((log0, home_below, new_start))
}

/// The valid tags of the groups from `start`, in log order, until a META's SID is not the one
/// expected. A P tag is an order tag on more than one core (`multi`); with one, EC-WAL writes
/// none and it counts as any tag.
fn scan(image: &[u8], log0: BlockId, groups: u64, start: u64, multi: bool) -> Vec<Entry> {
    let mut out = Vec::new();
    for (sid, g0, meta) in valid_groups(image, log0.0, groups, start) {
        for (slot, t) in meta.tags.iter().enumerate() {
            if let Some(t) = t {
                let (home, order) = if multi && t.pair { (t.order(), true) } else { (t.addr as u64, false) };
                out.push(Entry { home, tx_id: t.tx_id, tx_cnt: t.tx_cnt, at: BlockId(g0 + slot as u64), sid, order });
            }
        }
    }
    out
}

/// The head of a log region of block groups (`blocks` blocks at `log0`), checked: it decodes,
/// names `format` (EC-WAL's or LOC-WAL's), and its start lies within the region's groups; and
/// the number of groups.
pub(super) fn region_head(
    image: &[u8],
    log0: BlockId,
    blocks: u64,
    format: LogFormat,
) -> Result<(LogHead, u64), String> {
    let head = LogHead::decode(&image[log0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
    if head.format != format {
        return Err(format!("corrupt log at block {}: log head format {:?}, expected {format:?}", log0.0, head.format));
    }
    let groups = (blocks - 1) / GROUP_BLOCKS;
    super::head_in_range(&head, log0, groups * GROUP_BLOCKS)?;
    Ok((head, groups))
}
