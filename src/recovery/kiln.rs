//! Recovery for Kiln and LOC-Kiln: the durable image includes the non-volatile LLC's state
//! ([`crate::log::nvllc`]) after the memory log area.
//!
//! 1. The NV-LLC's commit register gives `committed`, and `applied` (what an earlier recovery
//!    already wrote home).
//! 2. Candidates: every fallback-log block (Eager Commit groups from the head's `start`, while
//!    each META's SID is the one expected; TxIDs relative to the head's `start_seq`) and every
//!    NV-LLC line recorded as committed, whose transaction's sequence number is in
//!    `applied < seq <= committed`. Later transactions (pending data, or a window the register
//!    does not cover yet) are discarded.
//! 3. Candidates are written home in sequence order, a fallback-log block before a line of the
//!    same transaction (the line is the newer copy), log order within the log.
//! 4. The register is rewritten with `applied = committed` (so that recovering again changes
//!    nothing), then the fallback log's head past every group read.
//!
//! With more than one core (`Layout::cores`), each core's fallback-log region is read as a
//! log of its own (its head first); its TxIDs are core-local, and a block counts only if its
//! transaction is the one the core's Core Binding names, as the global sequence number the
//! binding gives (docs/formats/kiln.md). A committed NV-LLC line counts only if its owner's
//! binding covers it too (a core's binding moves with each of its register moves; under
//! LOC-Kiln another core's register move does not register this core's window). Every region's
//! head is rewritten at the end.

use super::Plan;
use crate::log::ec::{valid_groups, GROUP_BLOCKS};
use crate::log::head::{LogFormat, LogHead};
use crate::log::nvllc::{self, Binding, Register};
use crate::pmem::{read_block, Layout};
use crate::types::BlockId;

/// A block to write home: (sequence number, 0 = fallback log / 1 = NV-LLC line, position,
/// home block, where the data is).
type Candidate = (u64, u8, u64, u64, BlockId);

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let nv0 = layout.nvllc_block0();
    let reg = Register::decode(&image[nv0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: NV-LLC commit register does not decode", nv0.0))?;
    if reg.committed.checked_add(1 << 32).is_none() {
        return Err(format!("corrupt log at block {}: committed {} within 2^32 of 2^64", nv0.0, reg.committed));
    }
    let mut cands: Vec<Candidate> = Vec::new();
    let mut heads = Vec::with_capacity(layout.cores as usize);
    // Per core: the global number its binding registers (with one core, the register's).
    let mut bound = Vec::with_capacity(layout.cores as usize);
    for c in 0..layout.cores as usize {
        let (registered, head) = region_candidates(layout, image, &reg, c, &mut cands)?;
        bound.push(registered);
        heads.push(head);
    }
    line_candidates(layout, image, &reg, &bound, &mut cands)?;
    sort_candidates(&mut cands, reg.applied + 1..=reg.committed);
    let mut plan = Plan { writes: Vec::with_capacity(cands.len() + 1 + heads.len()), ..Plan::default() };
    for &(_, _, _, home, at) in &cands {
        plan.writes.push((BlockId(home), read_block(image, at)));
    }
    plan.redone_txs = reg.committed.saturating_sub(reg.applied);
    plan.writes.push((nv0, Register { committed: reg.committed, applied: reg.committed }.encode()));
    for (log0, head) in heads {
        plan.writes.push((log0, head.encode()));
    }
    Ok(plan)
}

/// Core `c`'s fallback-log region: pushes onto `cands` each block of a transaction the register
/// covers (and, with more than one core, the one its Core Binding names); returns the global
/// number the core's binding registers and the region's head block with the head to rewrite.
fn region_candidates(
    layout: &Layout,
    image: &[u8],
    reg: &Register,
    c: usize,
    cands: &mut Vec<Candidate>,
) -> Result<(u64, (BlockId, LogHead)), String> {
    let nv0 = layout.nvllc_block0();
    let data_blocks = layout.data_bytes / 64;
    let (log0, blocks) = layout.log_region(c);
    let head = LogHead::decode(&image[log0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
    if head.format != LogFormat::Kiln {
        return Err(format!("corrupt log at block {}: log head format {:?}, expected Kiln", log0.0, head.format));
    }
    // With more than one core the region's TxIDs are core-local: only the transaction its
    // Core Binding names may count, as the global number it committed as.
    let binding = match layout.cores {
        1 => None,
        _ => {
            let slots = nvllc::slots_in(layout.nvllc_bytes, layout.cores);
            let b = BlockId(nv0.0 + nvllc::binding_block(slots, c));
            Some(
                Binding::decode(&image[b.range()])
                    .ok_or_else(|| format!("corrupt log at block {}: core {c}'s NV-LLC binding does not decode", b.0))?,
            )
        }
    };
    let groups = (blocks - 1) / GROUP_BLOCKS;
    super::head_in_range(&head, log0, groups * GROUP_BLOCKS)?;
    let mut end_sid = head.start;
    for (sid, g0, meta) in valid_groups(image, log0.0, groups, head.start) {
        end_sid = sid + 1;
        for (slot, t) in meta.tags.iter().enumerate() {
            let Some(t) = t else { continue };
            let d = t.tx_id.wrapping_sub(head.start_seq as u8) as u64;
            if d >= 128 {
                return Err(format!(
                    "corrupt log at block {}: fallback log TxID {} not within 128 of the head's {}",
                    g0 + slot as u64,
                    t.tx_id,
                    head.start_seq
                ));
            }
            let seq = match binding {
                None => head.start_seq + d,
                Some(b) if b.local == head.start_seq + d => b.seq,
                Some(_) => continue,
            };
            if reg.applied < seq && seq <= reg.committed && (t.addr as u64) < data_blocks {
                let pos = ((c as u64) << 48) | ((sid - head.start) * 8 + slot as u64);
                cands.push((seq, 0, pos, t.addr as u64, BlockId(g0 + slot as u64)));
            }
        }
    }
    let local = binding.map_or(reg.committed, |b| b.local);
    let start_seq = head.start_seq.max(local.saturating_add(1));
    let registered = binding.map_or(reg.committed, |b| b.seq);
    Ok((registered, (log0, LogHead { format: LogFormat::Kiln, start: end_sid, start_seq })))
}

/// The NV-LLC lines recorded as committed: pushes onto `cands` each line of a transaction the
/// register covers and its owner core's binding `bound` registers.
fn line_candidates(
    layout: &Layout,
    image: &[u8],
    reg: &Register,
    bound: &[u64],
    cands: &mut Vec<Candidate>,
) -> Result<(), String> {
    let nv0 = layout.nvllc_block0();
    let data_blocks = layout.data_bytes / 64;
    for s in 0..nvllc::slots_in(layout.nvllc_bytes, layout.cores) {
        let tag = &image[BlockId(nv0.0 + nvllc::tag_block(s)).range()];
        if let Some((home, seq)) = nvllc::decode_tag(tag) {
            if nvllc::tag_cid(tag) as u32 >= layout.cores {
                let b = nv0.0 + nvllc::tag_block(s);
                return Err(format!(
                    "corrupt log at block {b}: NV-LLC tag of core {} of {}",
                    nvllc::tag_cid(tag),
                    layout.cores
                ));
            }
            let wanted = reg.applied < seq && seq <= reg.committed;
            if wanted && seq <= bound[nvllc::tag_cid(tag) as usize] && home < data_blocks {
                cands.push((seq, 1, s as u64, home, BlockId(nv0.0 + nvllc::data_block(s))));
            }
        }
    }
    Ok(())
}

/// Sort candidates by (seq, kind, position), the order they are written home in. They were
/// pushed log blocks first, then lines, each in position order, so a stable sort by `seq` alone
/// gives that order: a counting sort over the register's window `seqs` when it is not much
/// wider than the candidates (the usual case: linear in their number, where a comparison sort
/// of a full NV-LLC was most of the crash checker's time), else a stable comparison sort.
fn sort_candidates<T: Copy>(cands: &mut Vec<(u64, u8, u64, u64, T)>, seqs: std::ops::RangeInclusive<u64>) {
    let lo = *seqs.start();
    let width = seqs.end().saturating_sub(lo).saturating_add(1);
    if width > 4 * cands.len() as u64 + 64 || cands.iter().any(|c| !seqs.contains(&c.0)) {
        cands.sort_by_key(|c| c.0);
        return;
    }
    let mut at = vec![0u32; width as usize + 1];
    for c in cands.iter() {
        at[(c.0 - lo) as usize + 1] += 1;
    }
    for i in 1..at.len() {
        at[i] += at[i - 1];
    }
    let mut out = cands.clone();
    for c in cands.iter() {
        let slot = &mut at[(c.0 - lo) as usize];
        out[*slot as usize] = *c;
        *slot += 1;
    }
    *cands = out;
}

#[cfg(test)]
mod tests {
    use crate::rng::Rng;

    /// The counting sort gives the order of a sort by the whole key, for candidates pushed as
    /// recovery pushes them (log blocks, then lines, positions increasing), in a narrow window
    /// and in a wide one (the comparison-sort path).
    #[test]
    fn candidates_sort_as_by_seq_kind_and_position() {
        let mut rng = Rng::new(7);
        for (n, lo, width) in [(0, 1, 1), (50, 1, 10), (3000, 100, 500), (200, 5, 1 << 40)] {
            let mut c: Vec<(u64, u8, u64, u64, ())> = Vec::new();
            for kind in 0..2u8 {
                let mut pos = 0;
                for _ in 0..n / 2 {
                    pos += 1 + rng.below(3);
                    c.push((lo + rng.below(width.min(1 << 20)), kind, pos, rng.below(1000), ()));
                }
            }
            let mut want = c.clone();
            want.sort_unstable_by_key(|x| (x.0, x.1, x.2));
            super::sort_candidates(&mut c, lo..=lo + width - 1);
            assert_eq!(c, want, "{n} candidates, window {width}");
        }
    }
}
