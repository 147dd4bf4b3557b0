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
//!
//! The crash checker recovers thousands of images that differ from one another in a few
//! blocks; its scan cache (`crash::incremental::hoop`) keeps each region's scans between
//! recoveries, built from the pieces here (`Scan`, `scan`, `read_head`), and must give
//! what [`recover`] gives.

use super::{head_in_range, Plan};
use crate::log::head::{LogFormat, LogHead};
use crate::log::hoop::{data_word, SliceMeta, SLICE_BLOCKS};
use crate::pmem::{read_block, Layout};
use crate::types::{BlockData, BlockId};

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let mut skip_below = 0;
    let mut top = 0;
    let mut scans = Vec::with_capacity(layout.cores as usize);
    for c in 0..layout.cores as usize {
        let (hb, head, cap) = read_head(layout, image, c)?;
        skip_below = skip_below.max(LogHead::home_below(&hb));
        let mut s = Scan::default();
        s.restart(&hb, &head);
        scan(image, layout.log_region(c).0, cap, layout.data_bytes / 8, &mut s)?;
        top = top.max(s.top());
        scans.push(s);
    }
    // The committed transactions not yet home, by global order (stable: equal orders, only in
    // a corrupt log, keep region order), their words laid into the home blocks in that order.
    let mut txs: Vec<(u64, usize, usize)> = Vec::new();
    for (c, s) in scans.iter().enumerate() {
        txs.extend(s.txs.iter().enumerate().filter(|(_, t)| t.order >= skip_below).map(|(j, t)| (t.order, c, j)));
    }
    txs.sort_by_key(|t| t.0);
    let mut homes = std::collections::BTreeMap::new();
    for &(_, c, j) in &txs {
        for &(w, v) in scans[c].tx_words(j) {
            let b = w as u64 / 8;
            let d: &mut BlockData = homes.entry(b).or_insert_with(|| read_block(image, BlockId(b)));
            let o = (w as usize % 8) * 8;
            d[o..o + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    let mut plan =
        Plan { writes: homes.into_iter().map(|(b, d)| (BlockId(b), d)).collect(), redone_txs: txs.len() as u64 };
    let home_below = skip_below.max(top);
    for (c, s) in scans.iter().enumerate() {
        plan.writes.push((layout.log_region(c).0, s.next_head(home_below)));
    }
    Ok(plan)
}

/// Core `c`'s log head: its block, decoded, and the slices its region holds; an error where
/// recovery rejects it.
pub(crate) fn read_head(layout: &Layout, image: &[u8], c: usize) -> Result<(BlockData, LogHead, u64), String> {
    let (log0, blocks) = layout.log_region(c);
    let hb = read_block(image, log0);
    let head =
        LogHead::decode(&hb).ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
    if head.format != LogFormat::Hoop {
        return Err(format!("corrupt log at block {}: log head format {:?}, expected Hoop", log0.0, head.format));
    }
    let cap = (blocks - 1) / SLICE_BLOCKS;
    head_in_range(&head, log0, cap + 1)?;
    Ok((hb, head, cap))
}

/// A committed transaction of a region's scan: its global order, the ring position past its
/// last slice, and the end of its words in [`Scan::words`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tx {
    pub(crate) order: u64,
    pub(crate) end: u64,
    pub(crate) words_end: usize,
}

/// One region's committed transactions in log order, scanned from the head in `hb`.
#[derive(Debug)]
pub(crate) struct Scan {
    pub(crate) hb: BlockData,
    pub(crate) start: u64,
    pub(crate) start_seq: u64,
    pub(crate) txs: Vec<Tx>,
    /// (home word number, value) of every committed transaction, in slice order.
    pub(crate) words: Vec<(u32, u64)>,
}

impl Default for Scan {
    fn default() -> Scan {
        Scan { hb: [0; 64], start: 0, start_seq: 0, txs: Vec::new(), words: Vec::new() }
    }
}

impl Clone for Scan {
    fn clone(&self) -> Scan {
        let mut s = Scan::default();
        s.clone_from(self);
        s
    }

    fn clone_from(&mut self, o: &Scan) {
        (self.hb, self.start, self.start_seq) = (o.hb, o.start, o.start_seq);
        self.txs.clone_from(&o.txs);
        self.words.clone_from(&o.words);
    }
}

impl Scan {
    /// The ring position past the last committed transaction scanned.
    pub(crate) fn end(&self) -> u64 {
        self.txs.last().map_or(self.start, |t| t.end)
    }

    /// One past the largest global order scanned (0: none).
    pub(crate) fn top(&self) -> u64 {
        self.txs.iter().map(|t| t.order.saturating_add(1)).max().unwrap_or(0)
    }

    /// The words of transaction `j`.
    pub(crate) fn tx_words(&self, j: usize) -> &[(u32, u64)] {
        let from = j.checked_sub(1).map_or(0, |i| self.txs[i].words_end);
        &self.words[from..self.txs[j].words_end]
    }

    /// The head recovery writes: past the last committed transaction, `home_below` as given,
    /// in the head's own form (two slots: the slot not holding the newest head).
    pub(crate) fn next_head(&self, home_below: u64) -> BlockData {
        let next =
            LogHead { format: LogFormat::Hoop, start: self.end(), start_seq: self.start_seq + self.txs.len() as u64 };
        next.encode_next_home(&self.hb, home_below)
    }

    /// Keep the transactions that end at or before ring position `pos`.
    pub(crate) fn truncate(&mut self, pos: u64) {
        let keep = self.txs.partition_point(|t| t.end <= pos);
        self.txs.truncate(keep);
        self.words.truncate(self.txs.last().map_or(0, |t| t.words_end));
    }

    /// Start the scan at `head` (decoded from `hb`): the transactions from it on when it is
    /// the start of one scanned (a head moved past whole transactions), else none.
    pub(crate) fn restart(&mut self, hb: &BlockData, head: &LogHead) {
        let j = match head.start.checked_sub(self.start) {
            Some(0) => Some(0),
            Some(_) => self.txs.iter().position(|t| t.end == head.start).map(|j| j + 1),
            None => None,
        };
        match j {
            Some(j) if self.start_seq.checked_add(j as u64) == Some(head.start_seq) => {
                let w = j.checked_sub(1).map_or(0, |i| self.txs[i].words_end);
                self.txs.drain(..j);
                self.words.drain(..w);
                for t in &mut self.txs {
                    t.words_end -= w;
                }
            }
            _ => {
                self.txs.clear();
                self.words.clear();
            }
        }
        (self.hb, self.start, self.start_seq) = (*hb, head.start, head.start_seq);
    }
}

/// Scan one region on from the last committed transaction of `s`, adding the committed
/// transactions found; an error for a slice that decodes but names a home word outside the
/// data area's `words`.
pub(crate) fn scan(image: &[u8], log0: BlockId, cap: u64, words: u64, s: &mut Scan) -> Result<(), String> {
    let mut pos = s.end();
    let mut seq = s.start_seq + s.txs.len() as u64;
    let mut prev_order = s.txs.last().map_or(0, |t| t.order);
    let (mut order, mut index) = (0u64, 0u32);
    while pos - s.start < cap {
        let data_at = BlockId(log0.0 + 1 + SLICE_BLOCKS * (pos % cap));
        let data = read_block(image, data_at);
        let meta = read_block(image, BlockId(data_at.0 + 1));
        let Some(m) = SliceMeta::decode(&meta, &data) else { break };
        if m.seq != seq || m.index != index || (index > 0 && m.order != order) || m.order <= prev_order {
            break;
        }
        if let Some(w) = m.addrs[..m.count as usize].iter().find(|&&w| w as u64 >= words) {
            return Err(format!(
                "corrupt log at block {}: home word {w} outside the data area ({words} words)",
                data_at.0 + 1
            ));
        }
        order = m.order;
        s.words.extend((0..m.count as usize).map(|i| (m.addrs[i], data_word(&data, i))));
        pos += 1;
        index += 1;
        if m.commits() {
            s.txs.push(Tx { order, end: pos, words_end: s.words.len() });
            prev_order = order;
            seq += 1;
            index = 0;
        }
    }
    s.words.truncate(s.txs.last().map_or(0, |t| t.words_end));
    Ok(())
}
