//! Recovery of HOOP's out-of-place region ([`crate::log::hoop`]; docs/formats/hoop-log.md).
//!
//! In each core's region, from the head's `start`, expecting `start_seq`: read slices (data
//! block, metadata block) whose checksum holds, whose sequence number is the expected one,
//! whose index counts up from 0 and whose global order is the transaction's first slice's,
//! until one carries the COMMIT flag: that transaction is committed; go on with the next
//! sequence number. Anything else (a torn, stale or never-written slice, an index or order out
//! of step, a global order that does not grow) ends the region's valid log, and a transaction
//! without its COMMIT slice is dropped.
//!
//! Transactions whose global order is below the largest `home_below` of any region's head are
//! home already (garbage-collected) and skipped; the others are replayed word by word, in
//! global order whatever their region, into the home blocks read from the image. Then each
//! region's head is rewritten past its last committed transaction, `home_below` past every
//! transaction found, in the head's own form (`hoop.two_slot_head`: the slot not holding the
//! newest head; [`crate::log::head`]). The mapping table is volatile: nothing else is read.

use super::{head_in_range, Plan};
use crate::log::head::{LogFormat, LogHead};
use crate::log::hoop::{data_word, SliceMeta, SLICE_BLOCKS};
use crate::pmem::{read_block, Layout};
use crate::types::{BlockData, BlockId};

/// A committed transaction: its global order and its (home word number, value) pairs in
/// slice order.
struct Committed {
    order: u64,
    words: Vec<(u32, u64)>,
}

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let mut txs = Vec::new();
    let mut heads = Vec::new();
    let mut skip_below = 0;
    for c in 0..layout.cores as usize {
        let (log0, blocks) = layout.log_region(c);
        let hb = read_block(image, log0);
        let head =
            LogHead::decode(&hb).ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
        if head.format != LogFormat::Hoop {
            return Err(format!("corrupt log at block {}: log head format {:?}, expected Hoop", log0.0, head.format));
        }
        let cap = (blocks - 1) / SLICE_BLOCKS;
        head_in_range(&head, log0, cap + 1)?;
        skip_below = skip_below.max(LogHead::home_below(&hb));
        let (found, next) = scan(image, log0, cap, head, layout.data_bytes / 8)?;
        txs.extend(found);
        heads.push((log0, next, hb));
    }
    let top = txs.iter().map(|t| t.order.saturating_add(1)).max().unwrap_or(0);
    txs.retain(|t| t.order >= skip_below);
    // Stable: equal orders (only in a corrupt log) keep region order.
    txs.sort_by_key(|t| t.order);
    let mut home: std::collections::BTreeMap<u64, BlockData> = std::collections::BTreeMap::new();
    let mut plan = Plan::default();
    for t in &txs {
        for &(w, v) in &t.words {
            let b = w as u64 / 8;
            let d = home.entry(b).or_insert_with(|| read_block(image, BlockId(b)));
            let at = (w as usize % 8) * 8;
            d[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        plan.redone_txs += 1;
    }
    plan.writes.extend(home.into_iter().map(|(b, d)| (BlockId(b), d)));
    let home_below = skip_below.max(top);
    for (log0, next, hb) in heads {
        // In the head's own form (two slots: the slot not holding the newest head).
        plan.writes.push((log0, next.encode_next_home(&hb, home_below)));
    }
    Ok(plan)
}

/// The committed transactions of one region in log order, and the head past them; an error
/// for a slice that decodes but names a home word outside the data area's `words`.
fn scan(image: &[u8], log0: BlockId, cap: u64, head: LogHead, words: u64) -> Result<(Vec<Committed>, LogHead), String> {
    let mut txs: Vec<Committed> = Vec::new();
    let (mut pos, mut seq) = (head.start, head.start_seq);
    let mut end = pos;
    let mut cur = Committed { order: 0, words: Vec::new() };
    let mut index = 0u32;
    while pos - head.start < cap {
        let data_at = BlockId(log0.0 + 1 + SLICE_BLOCKS * (pos % cap));
        let data = read_block(image, data_at);
        let meta = read_block(image, BlockId(data_at.0 + 1));
        let Some(m) = SliceMeta::decode(&meta, &data) else { break };
        let prev_order = txs.last().map_or(0, |t| t.order);
        if m.seq != seq || m.index != index || (index > 0 && m.order != cur.order) || m.order <= prev_order {
            break;
        }
        if let Some(w) = m.addrs[..m.count as usize].iter().find(|&&w| w as u64 >= words) {
            return Err(format!(
                "corrupt log at block {}: home word {w} outside the data area ({words} words)",
                data_at.0 + 1
            ));
        }
        cur.order = m.order;
        cur.words.extend((0..m.count as usize).map(|i| (m.addrs[i], data_word(&data, i))));
        pos += 1;
        index += 1;
        if m.commits() {
            txs.push(std::mem::replace(&mut cur, Committed { order: 0, words: Vec::new() }));
            seq += 1;
            index = 0;
            end = pos;
        }
    }
    Ok((txs, LogHead { format: LogFormat::Hoop, start: end, start_seq: seq }))
}
