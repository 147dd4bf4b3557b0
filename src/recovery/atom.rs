//! Recovery of ATOM's undo log ([`crate::log::atom`], docs/formats/atom-log.md).
//!
//! Per core region: the head names the transaction whose log is not freed (`start_seq`).
//! From group 0, every metadata line of that transaction, in group order, names entries
//! whose old lines are written back home; a group that is not full (in the paper's form), a
//! line that does not decode (zeroed, or in the checked form of `atom.checked_meta` torn), or a
//! metadata line of another transaction (an older one's, left in place), ends the log. In the
//! checked form a partial group is closed when its line is written, so the next group may
//! follow it. The old lines are
//! written newest first, so that if a line were logged twice the oldest copy (the value
//! before the transaction) is the one left. Then the head moves past the transaction.
//!
//! Regions are independent: a region holds only its core's running transaction, committed
//! ones have their data home before their log is freed, and two running transactions hold
//! disjoint lines (strict two-phase locking), so no two regions' undo writes touch one line
//! and any region order gives the same image. The heads follow every undo write.

use super::Plan;
use crate::log::atom::{entry_block, groups, meta_block, Meta, ENTRIES};
use crate::log::head::{LogFormat, LogHead};
use crate::pmem::{read_block, Layout};
use crate::types::{BlockData, BlockId};

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    super::per_core_regions(layout, image, recover_region)
}

/// Undo core `c`'s running transaction into `plan`; returns its new head write.
fn recover_region(layout: &Layout, image: &[u8], c: usize, plan: &mut Plan) -> Result<(BlockId, BlockData), String> {
    let (log0, blocks) = layout.log_region(c);
    let head = super::undo_head(image, log0, LogFormat::Atom, "ATOM")?;
    let seq = head.start_seq;
    let mut undo: Vec<(BlockId, BlockId)> = Vec::new(); // (home, entry), log order
    for g in 0..groups(blocks) {
        let Some(meta) = Meta::decode(&image[meta_block(log0, g).range()]) else { break };
        if meta.seq != seq || meta.group as u64 != g {
            break;
        }
        for j in 0..meta.n as usize {
            let home = BlockId(meta.homes[j] as u64);
            if !layout.is_data(home) {
                return Err(format!(
                    "corrupt log at block {}: entry {j} of group {g} names block {}, outside the data area",
                    meta_block(log0, g).0,
                    home.0
                ));
            }
            undo.push((home, entry_block(log0, g, j)));
        }
        if (meta.n as usize) < ENTRIES && !meta.checked {
            break;
        }
    }
    plan.writes.extend(undo.iter().rev().map(|&(home, entry)| (home, read_block(image, entry))));
    let next = if undo.is_empty() { seq } else { seq + 1 };
    Ok((log0, LogHead { format: LogFormat::Atom, start: 0, start_seq: next }.encode()))
}
