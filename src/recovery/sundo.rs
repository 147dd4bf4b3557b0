//! Recovery of S-Undo's software undo log ([`crate::log::sundo`], docs/formats/sundo-log.md).
//!
//! Per core region: the head names the valid generation (`start_seq`). From entry 0, every
//! entry that decodes (its check holds, or it is in the unchecked form) and carries that
//! generation names a data line and its old bytes; the first entry that does not (an earlier
//! generation's, torn, or never written) ends the log. The old lines are written home newest
//! first, so that of two entries of one line the older, the value before the transaction, is
//! left (the library logs a line once per transaction, so this matters only for damaged
//! images). Then the head moves to the next generation, which invalidates the entries, as the
//! library's commit does. An entry naming a place outside the data area, or not a line's
//! start, is a corrupt log.
//!
//! Regions are independent: a region holds only its core's running transaction, a committed
//! transaction's lines are durable before its log is invalidated, and two running transactions
//! hold disjoint lines (their locks), so no two regions' undo writes touch one line. The heads
//! follow every undo write.

use super::Plan;
use crate::log::head::{LogFormat, LogHead};
use crate::log::sundo::{entries, entry_block, Entry, ENTRY_BYTES};
use crate::pmem::Layout;
use crate::types::{BlockData, BlockId};

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    super::per_core_regions(layout, image, recover_region)
}

/// Undo core `c`'s running transaction into `plan`; returns its new head write.
fn recover_region(layout: &Layout, image: &[u8], c: usize, plan: &mut Plan) -> Result<(BlockId, BlockData), String> {
    let (log0, blocks) = layout.log_region(c);
    let head = super::undo_head(image, log0, LogFormat::SUndo, "S-Undo")?;
    let gen = head.start_seq;
    let mut undo: Vec<(BlockId, BlockData)> = Vec::new();
    for i in 0..entries(blocks) {
        let at = entry_block(log0, i);
        let from = at.addr().0 as usize;
        let Some(e) = Entry::decode(&image[from..from + ENTRY_BYTES]) else { break };
        if e.gen != gen {
            break;
        }
        if !e.home.is_multiple_of(64) || e.home >= layout.data_bytes {
            return Err(format!(
                "corrupt log at block {}: entry {i} names byte {}, not a line of the data area",
                at.0, e.home
            ));
        }
        undo.push((BlockId(e.home / 64), e.old));
    }
    plan.writes.extend(undo.iter().rev().copied());
    let next = if undo.is_empty() { gen } else { gen + 1 };
    Ok((log0, LogHead { format: LogFormat::SUndo, start: 0, start_seq: next }.encode()))
}
