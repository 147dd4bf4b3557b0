//! Recovery of LOC-WAL's log (`loc-extended.txt` 3.4): Eager Commit block groups holding
//! blocks of every transaction of a speculation window, interleaved, plus the window's Tx
//! Dependency Pairs ([`crate::log::loc`]).
//!
//! 1. From the head's `start` SID, read each group's META while its SID is the one expected
//!    (a stale or torn META ends the valid log). Data tags are counted per TxID; pair blocks
//!    (P bit) are decoded. TxIDs are read relative to the head's `start_seq` (at most 128 live).
//! 2. From the newest transaction to the oldest (the paper: pairs "tail to head"; a pair
//!    `<Tx, Ty, n>` always has Ty later than Tx): Tx is committed when it is not marked aborted
//!    and its logged blocks, plus `n` for every pair whose Ty is committed, equal its TxCnt
//!    (from the tag of its last logged block, or its count record).
//! 3. In TxID order from `start_seq`, aborted transactions are skipped and the first
//!    transaction that is not committed cuts the rest (in-order commit); a TxID with no
//!    evidence at all is not committed.
//! 4. The committed transactions' blocks are redone home in TxID order, each transaction's in
//!    log order; the head moves past every group read.
//!
//! On more than one core ([`recover_regions`]) each core's region is read the same way, but a
//! window counts only once its order tag ([`loc::order_tag`]) is read: the tags between two
//! order tags are one window, decided by steps 2-3 on their own, and a window without its order
//! tag (not yet durable) has nothing committed. The windows of all regions are then redone as
//! H-WAL's transactions are (`super::wal::redo_in_order`): those below the largest
//! `home_below` of the heads skipped, the others in order-number order.

use super::ec::region_head;
use super::wal::{redo_in_order, Committed};
use super::Plan;
use crate::log::ec::{valid_groups, BlkTag};
use crate::log::head::{LogFormat, LogHead};
use crate::log::loc::{self, ABORTED, MAX_LIVE_TXS};
use crate::pmem::{read_block, Layout};
use crate::types::BlockId;

/// One logged data block: distance of its TxID from `start_seq`, home block, position.
struct Entry {
    d: usize,
    home: u64,
    at: BlockId,
}

#[derive(Clone, Copy, Default)]
struct Tx {
    logged: u32,
    cnt: Option<u16>,
    aborted: bool,
    bad_home: bool,
    committed: bool,
}

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    if layout.cores > 1 {
        return recover_regions(layout, image);
    }
    let log0 = layout.log_block0();
    let (head, groups) = region_head(image, log0, layout.log_blocks(), LogFormat::Loc)?;
    let data_blocks = layout.data_bytes / 64;
    let mut w = Window::new();
    let mut end_sid = head.start;
    for (sid, g0, meta) in valid_groups(image, log0.0, groups, head.start) {
        end_sid = sid + 1;
        for (slot, t) in meta.tags.iter().enumerate() {
            let Some(t) = t else { continue };
            w.add(image, t, BlockId(g0 + slot as u64), head.start_seq as u8, data_blocks)?;
        }
    }
    let seen = w.hi;
    // One window from the head's `start_seq` on: a TxID before the first one seen, with no
    // evidence at all, is not committed and cuts the rest (step 3).
    w.lo = 0;
    let (blocks, n) = w.committed();
    let mut plan = Plan::default();
    for (home, at) in blocks {
        plan.writes.push((BlockId(home), read_block(image, at)));
    }
    plan.redone_txs = n;
    let next = LogHead { format: LogFormat::Loc, start: end_sid, start_seq: head.start_seq + seen as u64 };
    plan.writes.push((log0, next.encode_next(&image[log0.range()])));
    Ok(plan)
}

/// The distance of `tx_id` (read at block `at`) from the head's start TxID `base`: at most
/// [`MAX_LIVE_TXS`] are live.
fn rel(base: u8, tx_id: u8, at: BlockId) -> Result<usize, String> {
    let d = tx_id.wrapping_sub(base) as u64;
    if d >= MAX_LIVE_TXS {
        return Err(format!(
            "corrupt log at block {}: TxID {tx_id} is not within {MAX_LIVE_TXS} of the head's start TxID {base}",
            at.0
        ));
    }
    Ok(d as usize)
}

/// One window of a region (on one core, the whole log): its transactions (by distance from the
/// head's `start_seq`), logged blocks and pairs.
struct Window {
    txs: [Tx; MAX_LIVE_TXS as usize],
    entries: Vec<Entry>,
    deps: Vec<(usize, usize, u16)>,
    lo: usize,
    hi: usize,
}

impl Window {
    fn new() -> Window {
        Window {
            txs: [Tx::default(); MAX_LIVE_TXS as usize],
            entries: Vec::new(),
            deps: Vec::new(),
            lo: usize::MAX,
            hi: 0,
        }
    }

    fn saw(&mut self, d: usize) {
        self.lo = self.lo.min(d);
        self.hi = self.hi.max(d + 1);
    }

    /// Step 1 for the tag `t` of log block `at`: count a data block, or decode a pair block.
    /// `base` is the head's start TxID; a home past the `data_blocks` makes its transaction
    /// not committed.
    fn add(&mut self, image: &[u8], t: &BlkTag, at: BlockId, base: u8, data_blocks: u64) -> Result<(), String> {
        if t.pair {
            for p in loc::decode(&image[at.range()], t.addr as usize) {
                let (dx, dy) = (rel(base, p.tx, at)?, rel(base, p.ty, at)?);
                self.saw(dx);
                self.saw(dy);
                if dx != dy {
                    self.deps.push((dx, dy, p.n));
                } else if p.n == ABORTED {
                    self.txs[dx].aborted = true;
                } else {
                    self.txs[dx].cnt = Some(p.n);
                }
            }
            return Ok(());
        }
        let d = rel(base, t.tx_id, at)?;
        self.saw(d);
        let tx = &mut self.txs[d];
        tx.logged += 1;
        if t.tx_cnt != 0 {
            tx.cnt = Some(t.tx_cnt);
        }
        tx.bad_home |= t.addr as u64 >= data_blocks;
        self.entries.push(Entry { d, home: t.addr as u64, at });
        Ok(())
    }

    /// Steps 2-3 over the window's transactions: the (home, log block) pairs to redo, in
    /// TxID order, and the number of committed transactions.
    fn committed(mut self) -> (Vec<(u64, BlockId)>, u64) {
        if self.lo >= self.hi {
            return (Vec::new(), 0);
        }
        for d in (self.lo..self.hi).rev() {
            let from_deps: u32 = self
                .deps
                .iter()
                .filter(|&&(dx, dy, _)| dx == d && self.txs[dy].committed)
                .map(|&(_, _, n)| n as u32)
                .sum();
            let t = &mut self.txs[d];
            t.committed = !t.aborted && !t.bad_home && t.cnt.is_some_and(|c| c as u32 == t.logged + from_deps);
        }
        let cut = (self.lo..self.hi).find(|&d| !self.txs[d].aborted && !self.txs[d].committed).unwrap_or(self.hi);
        let mut redo: Vec<&Entry> = self.entries.iter().filter(|e| e.d < cut && self.txs[e.d].committed).collect();
        redo.sort_by_key(|e| e.d);
        let n = (self.lo..cut).filter(|&d| self.txs[d].committed).count() as u64;
        (redo.iter().map(|e| (e.home, e.at)).collect(), n)
    }
}

/// Recovery on more than one core: every region's windows, redone in window order.
pub fn recover_regions(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let mut heads = Vec::new();
    let mut windows = Vec::new();
    let mut committed_txs = Vec::new();
    for c in 0..layout.cores as usize {
        let (log0, blocks) = layout.log_region(c);
        let (head, groups) = region_head(image, log0, blocks, LogFormat::Loc)?;
        let data_blocks = layout.data_bytes / 64;
        let mut w = Window::new();
        let mut seen = 0usize;
        let mut end_sid = head.start;
        let mut last_order = 0;
        'groups: for (sid, g0, meta) in valid_groups(image, log0.0, groups, head.start) {
            end_sid = sid + 1;
            for (slot, t) in meta.tags.iter().enumerate() {
                let Some(t) = t else { continue };
                let at = BlockId(g0 + slot as u64);
                if let Some(order) = loc::window_order(t) {
                    if order <= last_order {
                        break 'groups; // a stale window: the valid log ends
                    }
                    last_order = order;
                    let (blocks, n) = std::mem::replace(&mut w, Window::new()).committed();
                    committed_txs.push((order, n));
                    windows.push(Committed { order, blocks });
                    continue;
                }
                w.add(image, t, at, head.start_seq as u8, data_blocks)?;
                seen = seen.max(w.hi);
            }
        }
        let next = LogHead { format: LogFormat::Loc, start: end_sid, start_seq: head.start_seq + seen as u64 };
        heads.push((log0, next, LogHead::home_below(&image[log0.range()])));
    }
    let mut plan = Plan::default();
    let skip_below = heads.iter().map(|h| h.2).max().unwrap_or(0);
    let home_below = redo_in_order(&mut plan, image, heads.iter().map(|h| h.2), windows.into_iter(), true);
    // `redo_in_order` counts windows; the plan reports transactions.
    plan.redone_txs = committed_txs.iter().filter(|&&(o, _)| o >= skip_below).map(|&(_, n)| n).sum();
    for (log0, next, _) in heads {
        // In the head's own form (`loc.two_slot_head`: the slot not holding the newest head).
        plan.writes.push((log0, next.encode_next_home(&image[log0.range()], home_below)));
    }
    Ok(plan)
}
