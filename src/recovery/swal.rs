//! Recovery of S-WAL's software log ([`crate::log::swal`]).
//!
//! From the head's `start`, expecting `start_seq`: collect data entries of that sequence number
//! until a commit entry of the same number whose count matches; redo their bytes home, in log
//! order; go on. Anything else ends the valid log. The redo is expressed as whole-block writes
//! (image block overlaid with the entries), then the head is rewritten past the last commit.
//!
//! With more than one core every core's region (`Layout::log_region`) is read the same way, in
//! region order, and the heads follow every redo write. No cross-region order is needed: a
//! commit returns only after its truncation is durable, so a region holds at most its core's
//! committing transaction, and transactions committing at once on different cores write
//! different lines (docs/formats/wal-log.md, "Regions").

use super::Plan;
use crate::log::head::{LogFormat, LogHead};
use crate::log::swal::{EntryHeader, HEADER_BYTES, KIND_COMMIT, KIND_DATA};
use crate::pmem::{read_block, Layout};
use crate::types::{blocks_of, Addr, BlockData, BlockId};

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    // Blocks being rebuilt, in first-touch order (recovery is not a hot path).
    let mut blocks: Vec<(BlockId, BlockData)> = Vec::new();
    let mut plan = Plan::default();
    let mut heads = Vec::new();
    for c in 0..layout.cores as usize {
        heads.push(recover_region(layout, image, c, &mut blocks, &mut plan)?);
    }
    plan.writes = blocks;
    plan.writes.extend(heads);
    Ok(plan)
}

/// Redo core `c`'s region into `blocks`; returns its new head write.
fn recover_region(
    layout: &Layout,
    image: &[u8],
    c: usize,
    blocks: &mut Vec<(BlockId, BlockData)>,
    plan: &mut Plan,
) -> Result<(BlockId, BlockData), String> {
    let (log0, nblocks) = layout.log_region(c);
    let head = LogHead::decode(&image[log0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
    if head.format != LogFormat::SWal {
        return Err(format!("corrupt log at block {}: log head format {:?}, expected SWal", log0.0, head.format));
    }
    let area = log0.addr().0 as usize + 64;
    let cap = nblocks * 64 - 64;
    super::head_in_range(&head, log0, cap + (1 << 33))?; // an entry is at most 24 + 2^32 bytes
    let read = |lso: u64, out: &mut [u8]| {
        for (i, o) in out.iter_mut().enumerate() {
            *o = image[area + ((lso + i as u64) % cap) as usize];
        }
    };
    let (mut lsn, mut seq) = (head.start, head.start_seq);
    let mut pending: Vec<(u64, u32, u64)> = Vec::new(); // (home addr, len, lso of data)
    let mut cursor = lsn;
    let mut hdr = [0u8; HEADER_BYTES];
    while cursor - head.start + HEADER_BYTES as u64 <= cap {
        read(cursor, &mut hdr);
        let h = EntryHeader::decode(&hdr);
        if h.seq != seq {
            break;
        }
        if h.kind == KIND_DATA && h.len > 0 && h.addr.checked_add(h.len as u64).is_some_and(|e| e <= layout.data_bytes)
        {
            pending.push((h.addr, h.len, cursor + HEADER_BYTES as u64));
            cursor += h.entry_bytes();
        } else if h.kind == KIND_COMMIT && h.len == 0 && h.addr == pending.len() as u64 {
            for &(addr, len, at) in &pending {
                let mut data = vec![0u8; len as usize];
                read(at, &mut data);
                overlay(blocks, image, Addr(addr), &data);
            }
            pending.clear();
            plan.redone_txs += 1;
            cursor += h.entry_bytes();
            lsn = cursor;
            seq += 1;
        } else {
            break;
        }
    }
    Ok((log0, LogHead { format: LogFormat::SWal, start: lsn, start_seq: seq }.encode()))
}

fn overlay(blocks: &mut Vec<(BlockId, BlockData)>, image: &[u8], addr: Addr, data: &[u8]) {
    let mut done = 0usize;
    for b in blocks_of(addr, data.len()) {
        let i = match blocks.iter().position(|(x, _)| *x == b) {
            Some(i) => i,
            None => {
                blocks.push((b, read_block(image, b)));
                blocks.len() - 1
            }
        };
        let start = if done == 0 { addr.offset_in_block() } else { 0 };
        let n = (64 - start).min(data.len() - done);
        blocks[i].1[start..start + n].copy_from_slice(&data[done..done + n]);
        done += n;
    }
}
