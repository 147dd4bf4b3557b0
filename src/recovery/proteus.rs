//! Recovery for Proteus: roll back each core's unfinished transaction from the undo entries in
//! the durable image ([`crate::log::proteus`], docs/formats/proteus-log.md).
//!
//! For each core `c`:
//! 1. its finish register in the LPQ state gives `finished`; the only transaction of `c` whose
//!    entries are live is `s = finished + 1` (a core runs one transaction at a time, and a
//!    sequence number is never reused: an abort finishes its number too);
//! 2. its entries: every LPQ slot whose header names `(c, s)`, and the spilled entries in `c`'s
//!    log region, read from spill position 0 while position `p` holds `(c, s, index p)`;
//! 3. for each home block, the entry with the lowest index holds its content before the
//!    transaction (a block logged again after the log lookup table forgot it holds the
//!    transaction's own earlier stores): that content is written home.
//!
//! The plan writes the homes (in block order), then the finish register `s` of every core
//! rolled back, so a second recovery finds no live entry. A prefix of the plan leaves the
//! entries live and the same plan is made again. Recovery reads no block of the data area.

use super::Plan;
use crate::log::head::{LogFormat, LogHead};
use crate::log::proteus::{self, EntryHeader};
use crate::pmem::{read_block, Layout};
use crate::types::{BlockData, BlockId};

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let lpq0 = layout.nvllc_block0();
    let slots = (layout.nvllc_bytes / 64).saturating_sub(proteus::REGISTERS) / 2;
    let mut plan = Plan::default();
    let mut registers = Vec::new();
    // Every LPQ slot's entry, decoded once (its header names its core), in slot order.
    let mut entries: Vec<(EntryHeader, BlockData)> = Vec::new();
    for i in 0..slots as usize {
        let hb = BlockId(lpq0.0 + proteus::slot_header_block(i));
        let data = read_block(image, BlockId(lpq0.0 + proteus::slot_data_block(i)));
        if let Some(h) = EntryHeader::decode(&image[hb.range()], &data) {
            entries.push((h, data));
        }
    }
    // (home, index, data) of the live entries of the core being recovered.
    let mut undo: Vec<(u64, u64, BlockData)> = Vec::new();
    for c in 0..layout.cores as usize {
        let (log0, blocks) = layout.log_region(c);
        match LogHead::decode(&image[log0.range()]) {
            Some(h) if h.format == LogFormat::Proteus && h.start == 0 && h.start_seq == 0 => {}
            _ => {
                return Err(format!(
                    "corrupt log at block {}: not a Proteus log region head (format 6, start 0)",
                    log0.0
                ))
            }
        }
        let reg = BlockId(lpq0.0 + proteus::register_block(c));
        let finished = proteus::decode_register(&image[reg.range()])
            .ok_or_else(|| format!("corrupt log at block {}: Proteus finish register does not decode", reg.0))?;
        let s = finished
            .checked_add(1)
            .ok_or_else(|| format!("corrupt log at block {}: finished {finished} at 2^64", reg.0))?;
        let live = |h: &EntryHeader| h.core as usize == c && h.seq == s && h.home < layout.data_bytes / 64;
        undo.clear();
        undo.extend(entries.iter().filter(|(h, _)| live(h)).map(|&(h, data)| (h.home, h.index, data)));
        for p in 0..proteus::spill_capacity(blocks) {
            let hb = BlockId(log0.0 + proteus::spill_header_block(p));
            let data = read_block(image, BlockId(log0.0 + proteus::spill_data_block(p)));
            match EntryHeader::decode(&image[hb.range()], &data).filter(|h| live(h) && h.index == p) {
                Some(h) => undo.push((h.home, p, data)),
                None => break,
            }
        }
        if undo.is_empty() {
            continue;
        }
        // Lowest index per home: sort by (home, index) and keep each home's first.
        undo.sort_unstable_by_key(|&(home, index, _)| (home, index));
        undo.dedup_by_key(|e| e.0);
        plan.writes.extend(undo.iter().map(|&(home, _, data)| (BlockId(home), data)));
        plan.redone_txs += 1;
        registers.push((reg, proteus::encode_register(s)));
    }
    // Cores roll back disjoint lines (two transactions in flight never write one line); the
    // homes of all cores in block order, then the registers.
    plan.writes.sort_by_key(|&(b, _)| b);
    plan.writes.extend(registers);
    Ok(plan)
}
