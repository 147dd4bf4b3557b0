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
use crate::log::ec::{valid_groups, Meta, DATA_SLOTS, GROUP_BLOCKS};
use crate::log::head::{LogFormat, LogHead};
use crate::log::nvllc::{self, Binding, Register};
use crate::pmem::{read_block, Layout};
use crate::types::BlockId;
use std::collections::BTreeSet;

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let nv0 = layout.nvllc_block0();
    let reg = Register::decode(&image[nv0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: NV-LLC commit register does not decode", nv0.0))?;
    if reg.committed.checked_add(1 << 32).is_none() {
        return Err(format!("corrupt log at block {}: committed {} within 2^32 of 2^64", nv0.0, reg.committed));
    }
    let slots = nvllc::slots_in(layout.nvllc_bytes, layout.cores);
    let data_blocks = layout.data_bytes / 64;
    let wanted = |seq: u64| reg.applied < seq && seq <= reg.committed;
    // (seq, 0 = log / 1 = line, position, home, where the data is)
    let mut cands: Vec<(u64, u8, u64, u64, BlockId)> = Vec::new();
    let mut heads = Vec::with_capacity(layout.cores as usize);
    // Per core: the global number its binding registers (with one core, the register's).
    let mut bound = Vec::with_capacity(layout.cores as usize);
    for c in 0..layout.cores as usize {
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
                let b = BlockId(nv0.0 + nvllc::binding_block(slots, c));
                Some(Binding::decode(&image[b.range()]).ok_or_else(|| {
                    format!("corrupt log at block {}: core {c}'s NV-LLC binding does not decode", b.0)
                })?)
            }
        };
        bound.push(binding.map_or(reg.committed, |b| b.seq));
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
                if wanted(seq) && (t.addr as u64) < data_blocks {
                    let pos = ((c as u64) << 48) | ((sid - head.start) * 8 + slot as u64);
                    cands.push((seq, 0, pos, t.addr as u64, BlockId(g0 + slot as u64)));
                }
            }
        }
        let local = binding.map_or(reg.committed, |b| b.local);
        heads.push((
            log0,
            LogHead { format: LogFormat::Kiln, start: end_sid, start_seq: head.start_seq.max(local.saturating_add(1)) },
        ));
    }
    for s in 0..slots {
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
            if wanted(seq) && seq <= bound[nvllc::tag_cid(tag) as usize] && home < data_blocks {
                cands.push((seq, 1, s as u64, home, BlockId(nv0.0 + nvllc::data_block(s))));
            }
        }
    }
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

/// Kiln's recovery kept up to date block by block, for the crash checker (`Sweep::plan` in
/// `src/crash/sweep.rs`): between two crash points a few hundred NV-LLC blocks land, while
/// [`recover`] reads every slot and writes every committed line home (thousands of blocks), so
/// the checker keeps the per-home outcome of [`recover`] here and re-derives only the homes a
/// landed block affects. A fallback-log block re-derives what it can change
/// (`Tracker::land_log`): a logged block, the home its tag names; a META of the last valid
/// group (rewritten as the group fills) or of the next, that group's candidates (a transaction
/// whose write set overflows the NV-LLC logs thousands of blocks, and reading every valid group
/// at each of them made its check quadratic); the head, the whole log. A log recovery rejects, a
/// register that does not decode or whose `applied` changes, or a `committed` that falls drops
/// it ([`Tracker::land`] returns false), and the checker recovers whole. The
/// checker compares it with [`recover`] on the 1st, 8th, 64th, ... use.
///
/// What it keeps is what [`recover`] derives: per slot its decoded tag, per home the slots
/// whose tag names it (a list through `next`), the slots whose transaction the register does
/// not cover yet (`pending`), and how many candidates the plan writes home (`admitted`). The
/// plan writes a home the data of its last candidate in (seq, slot) order.
#[derive(Clone)]
pub struct Tracker {
    nv0: u64,
    log: std::ops::Range<u64>,
    data_blocks: u64,
    committed: u64,
    applied: u64,
    tags: Vec<Option<(u64, u64)>>,
    /// Per home: its first candidate slot + 1 (0: none); per slot: the next of the same home.
    first: Vec<u32>,
    next: Vec<u32>,
    pending: Vec<u32>,
    is_pending: Vec<bool>,
    /// The fallback log's candidates, by home.
    log_cands: BTreeSet<LogCand>,
    /// The fallback log's groups, its head's `start` and `start_seq` as last read, and the SID
    /// of the first group past its valid ones.
    groups: u64,
    start: u64,
    start_seq: u64,
    end_sid: u64,
    /// The candidates of the last valid group (SID `end_sid - 1`), when known: what a rewrite
    /// of its META replaces.
    tail: Option<Vec<LogCand>>,
    admitted: usize,
    dirty: Vec<u32>,
    is_dirty: Vec<bool>,
}

impl Tracker {
    /// Take a durable image whose [`recover`] succeeded (`None` if its register or log would
    /// make [`recover`] fail).
    pub fn new(layout: &Layout, image: &[u8]) -> Option<Tracker> {
        if layout.cores > 1 {
            // Per-core regions and bindings: the checker recovers whole.
            return None;
        }
        let nv0 = layout.nvllc_block0();
        let reg = Register::decode(&image[nv0.range()])?;
        let log0 = layout.log_block0();
        let slots = nvllc::slots_in(layout.nvllc_bytes, 1);
        let data_blocks = layout.data_bytes / 64;
        let mut t = Tracker {
            nv0: nv0.0,
            log: log0.0..log0.0 + layout.log_blocks(),
            data_blocks,
            committed: reg.committed,
            applied: reg.applied,
            // Arrays read at random before written there: committed now, so that no page is
            // first mapped to the zero page (whose replacement at the first write would flush
            // every other crash-check worker's TLB).
            tags: vec![None; slots],
            first: crate::hostmem::committed(data_blocks as usize),
            next: crate::hostmem::committed(slots),
            pending: Vec::new(),
            is_pending: crate::hostmem::committed(slots),
            log_cands: BTreeSet::new(),
            groups: (layout.log_blocks() - 1) / GROUP_BLOCKS,
            start: 0,
            start_seq: 0,
            end_sid: 0,
            tail: None,
            admitted: 0,
            dirty: Vec::new(),
            is_dirty: crate::hostmem::committed(data_blocks as usize),
        };
        if !t.scan_log(image) {
            return None;
        }
        for s in 0..slots {
            t.set_tag(s, nvllc::decode_tag(&image[BlockId(nv0.0 + nvllc::tag_block(s)).range()]));
        }
        t.take_dirty(|_, _| {});
        Some(t)
    }

    /// Read the fallback log's candidates again, as [`recover`] does (its valid groups from the
    /// head's `start`); false where [`recover`] would fail on it. The homes of the candidates
    /// before and after are re-derived.
    fn scan_log(&mut self, image: &[u8]) -> bool {
        let log0 = BlockId(self.log.start);
        let groups = self.groups;
        let head = match LogHead::decode(&image[log0.range()]) {
            Some(h) if h.format == LogFormat::Kiln && super::head_in_range(&h, log0, groups * GROUP_BLOCKS).is_ok() => {
                h
            }
            _ => return false,
        };
        (self.start, self.start_seq, self.end_sid) = (head.start, head.start_seq, head.start);
        let mut cands = Vec::new();
        for (sid, g0, meta) in valid_groups(image, log0.0, groups, head.start) {
            self.end_sid = sid + 1;
            if !self.read_group(sid, g0, &meta, &mut cands) {
                return false;
            }
        }
        let last = (self.end_sid.max(self.start + 1) - 1 - self.start) * 8;
        self.tail = (self.end_sid > self.start).then(|| cands.iter().filter(|c| c.2 >= last).copied().collect());
        for (home, seq, _, _) in std::mem::replace(&mut self.log_cands, cands.into_iter().collect()) {
            self.admitted -= usize::from(self.wanted(seq));
            self.mark(home);
        }
        let (applied, committed) = (self.applied, self.committed);
        for &(home, seq, _, _) in &self.log_cands {
            self.admitted += usize::from(applied < seq && seq <= committed);
            mark(&mut self.is_dirty, &mut self.dirty, home);
        }
        true
    }

    /// Add the candidates of valid group `sid` (first block `g0`, its `meta`) to `cands`, as
    /// [`recover`] reads them; false where it would fail on them.
    fn read_group(&self, sid: u64, g0: u64, meta: &Meta, cands: &mut Vec<LogCand>) -> bool {
        for (slot, t) in meta.tags.iter().enumerate() {
            let Some(t) = t else { continue };
            let d = t.tx_id.wrapping_sub(self.start_seq as u8) as u64;
            if d >= 128 {
                return false;
            }
            if (t.addr as u64) < self.data_blocks {
                let pos = (sid - self.start) * 8 + slot as u64;
                cands.push((t.addr as u64, self.start_seq + d, pos, g0 + slot as u64));
            }
        }
        true
    }

    /// Block `b` of the fallback-log area was written. The head: the whole log is read again.
    /// A data slot of a valid group: the home its tag names is marked (the plan may write it
    /// this block's new content). A META past the group after the valid ones changes nothing
    /// (the valid groups end before it); of the last valid group (rewritten as the group
    /// fills) or the one after it (a new group): the log is read again from that group on;
    /// further inside: the whole log. False where [`recover`] would fail on it.
    fn land_log(&mut self, b: u64, image: &[u8]) -> bool {
        let off = b - self.log.start;
        if off == 0 {
            return self.scan_log(image);
        }
        let g = (off - 1) / GROUP_BLOCKS;
        if g >= self.groups {
            return true; // past the last group: never read
        }
        // The SID the valid groups would give group `g`: the one in start..start + groups.
        let sid = self.start + (g + self.groups - self.start % self.groups) % self.groups;
        let slot = ((off - 1) % GROUP_BLOCKS) as usize;
        if slot < DATA_SLOTS {
            if sid < self.end_sid {
                let meta = self.log.start + 1 + g * GROUP_BLOCKS + DATA_SLOTS as u64;
                if let Some(t) = Meta::decode(&image[BlockId(meta).range()]).tags[slot] {
                    if (t.addr as u64) < self.data_blocks {
                        self.mark(t.addr as u64);
                    }
                }
            }
            return true;
        }
        if sid > self.end_sid {
            return true;
        }
        if sid + 1 < self.end_sid || (sid + 1 == self.end_sid && self.tail.is_none()) {
            return self.scan_log(image);
        }
        self.read_log_from(sid, image)
    }

    /// Read the fallback log's valid groups again from SID `from` (the last valid group,
    /// whose candidates `tail` holds, or the one after it) on, as [`Tracker::scan_log`] reads
    /// them, with the head it last read; the candidates of the groups before stay.
    fn read_log_from(&mut self, from: u64, image: &[u8]) -> bool {
        let rewrite = from + 1 == self.end_sid;
        if rewrite {
            for c in self.tail.take().expect("the caller checked") {
                self.log_cands.remove(&c);
                self.admitted -= usize::from(self.wanted(c.1));
                self.mark(c.0);
            }
        }
        self.end_sid = from;
        let left = (self.start + self.groups - from) as usize;
        let mut last = Vec::new();
        for (sid, g0, meta) in valid_groups(image, self.log.start, self.groups, from).take(left) {
            self.end_sid = sid + 1;
            last.clear();
            if !self.read_group(sid, g0, &meta, &mut last) {
                return false;
            }
            for &c in &last {
                self.log_cands.insert(c);
                self.admitted += usize::from(self.wanted(c.1));
                self.mark(c.0);
            }
        }
        // The last valid group's candidates: unknown when the rewritten group is no longer
        // valid; the same as before when the group after the valid ones is still not valid.
        if self.end_sid > from {
            self.tail = Some(last);
        } else if rewrite {
            self.tail = None;
        }
        true
    }

    fn wanted(&self, seq: u64) -> bool {
        self.applied < seq && seq <= self.committed
    }

    fn mark(&mut self, home: u64) {
        mark(&mut self.is_dirty, &mut self.dirty, home);
    }

    /// Slot `s`'s tag is now `tag`.
    fn set_tag(&mut self, s: usize, tag: Option<(u64, u64)>) {
        let old = std::mem::replace(&mut self.tags[s], tag);
        if old == tag {
            return;
        }
        if let Some((home, seq)) = old.filter(|&(h, _)| h < self.data_blocks) {
            let after = self.next[s];
            if self.first[home as usize] == s as u32 + 1 {
                self.first[home as usize] = after;
            } else {
                let mut at = self.first[home as usize] as usize - 1;
                while self.next[at] != s as u32 + 1 {
                    at = self.next[at] as usize - 1;
                }
                self.next[at] = after;
            }
            if self.wanted(seq) {
                self.admitted -= 1;
                self.mark(home);
            }
        }
        if let Some((home, seq)) = tag.filter(|&(h, _)| h < self.data_blocks) {
            self.next[s] = self.first[home as usize];
            self.first[home as usize] = s as u32 + 1;
            if self.wanted(seq) {
                self.admitted += 1;
                self.mark(home);
            } else if seq > self.committed && !std::mem::replace(&mut self.is_pending[s], true) {
                self.pending.push(s as u32);
            }
        }
    }

    /// Host cache hint: start loading what [`Tracker::land`] of `data` at block `b` will
    /// touch (the slot's tag and link, and for a tag the new home's list head and mark). No
    /// effect on results.
    #[inline]
    pub fn prefetch(&self, b: BlockId, data: &crate::types::BlockData) {
        let Some(off) = b.0.checked_sub(self.nv0 + 1) else { return };
        let s = (off / 2) as usize;
        if let (Some(t), Some(n)) = (self.tags.get(s), self.next.get(s)) {
            crate::hostmem::prefetch(t);
            crate::hostmem::prefetch(n);
            if off % 2 == 0 {
                if let Some((home, _)) = nvllc::decode_tag(data) {
                    if let (Some(f), Some(d)) = (self.first.get(home as usize), self.is_dirty.get(home as usize)) {
                        crate::hostmem::prefetch(f);
                        crate::hostmem::prefetch(d);
                    }
                }
            }
        }
    }

    /// Block `b` of `image` was written (its new content is in `image`). False: the tracker
    /// cannot follow this image (see [`Tracker`]); drop it.
    pub fn land(&mut self, b: BlockId, image: &[u8]) -> bool {
        if self.log.contains(&b.0) {
            return self.land_log(b.0, image);
        }
        let Some(off) = b.0.checked_sub(self.nv0) else { return true }; // the data area
        if off == 0 {
            let Some(reg) = Register::decode(&image[b.range()]) else { return false };
            if reg.applied != self.applied
                || reg.committed < self.committed
                || reg.committed.checked_add(1 << 32).is_none()
            {
                return false;
            }
            if reg.committed > self.committed {
                let before = std::mem::replace(&mut self.committed, reg.committed);
                let mut pending = std::mem::take(&mut self.pending);
                pending.retain(|&s| {
                    let keep = match self.tags[s as usize] {
                        Some((_, seq)) if seq > self.committed => true,
                        // Admitted now unless it was already (its tag changed since it
                        // was queued).
                        Some((home, seq)) => {
                            if home < self.data_blocks && seq > before && self.wanted(seq) {
                                self.admitted += 1;
                                self.mark(home);
                            }
                            false
                        }
                        None => false,
                    };
                    self.is_pending[s as usize] = keep;
                    keep
                });
                self.pending = pending;
                let (applied, committed) = (self.applied, self.committed);
                for &(home, seq, _, _) in &self.log_cands {
                    if seq > before && applied < seq && seq <= committed {
                        self.admitted += 1;
                        mark(&mut self.is_dirty, &mut self.dirty, home);
                    }
                }
            }
            return true;
        }
        let s = ((off - 1) / 2) as usize;
        if s >= self.tags.len() {
            return true;
        }
        if off % 2 == 1 {
            self.set_tag(s, nvllc::decode_tag(&image[b.range()]));
        } else if let Some((home, seq)) = self.tags[s] {
            if home < self.data_blocks && self.wanted(seq) {
                self.mark(home);
            }
        }
        true
    }

    /// The data writes of the plan [`recover`] would make now (its redo writes).
    pub fn redo_writes(&self) -> usize {
        self.admitted
    }

    /// Each home whose outcome may have changed since the last call, with the block whose
    /// data the plan writes to it last (`None`: the plan does not write it).
    pub fn take_dirty(&mut self, mut f: impl FnMut(BlockId, Option<BlockId>)) {
        for home in std::mem::take(&mut self.dirty) {
            self.is_dirty[home as usize] = false;
            // The last in recovery's order (seq, log before line, position) wins.
            let mut best: Option<((u64, u8, u64), u64)> = None;
            let mut consider = |key: (u64, u8, u64), block: u64| {
                if best.is_none_or(|b| key > b.0) {
                    best = Some((key, block));
                }
            };
            let h = home as u64;
            for &(_, seq, pos, block) in self.log_cands.range((h, 0, 0, 0)..(h + 1, 0, 0, 0)) {
                if self.wanted(seq) {
                    consider((seq, 0, pos), block);
                }
            }
            let mut at = self.first[home as usize];
            while at != 0 {
                let s = at as usize - 1;
                let (_, seq) = self.tags[s].expect("a listed slot has a tag");
                if self.wanted(seq) {
                    consider((seq, 1, s as u64), self.nv0 + nvllc::data_block(s));
                }
                at = self.next[s];
            }
            f(BlockId(home as u64), best.map(|(_, b)| BlockId(b)));
        }
    }
}

/// A fallback-log candidate: (home, seq, position in the log, block).
type LogCand = (u64, u64, u64, u64);

/// Mark `home` as one whose outcome may have changed (see [`Tracker::take_dirty`]).
fn mark(is_dirty: &mut [bool], dirty: &mut Vec<u32>, home: u64) {
    if !std::mem::replace(&mut is_dirty[home as usize], true) {
        dirty.push(home as u32);
    }
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
    use super::*;
    use crate::log::ec::BlkTag;
    use crate::rng::Rng;
    use crate::types::BlockData;

    /// The outcome the tracker keeps, laid over a data area, against [`recover`]'s plan
    /// applied to it: after every one of a random sequence of writes to tags (of few homes, so
    /// that homes have several candidates, some out of range), line data, the register
    /// (`committed` growing by jumps, so that queued slots are admitted), rewritten tags of
    /// queued slots, and the fallback log's METAs (valid or not, so that groups appear and
    /// vanish) and logged blocks. Also: a head recovery rejects, or a changed `applied`, drops
    /// the tracker.
    #[test]
    fn the_tracker_keeps_what_recovery_writes_home() {
        let slots = 40;
        let layout = Layout::new(64 * 64, 64 * (1 + 8 * 4)).with_nvllc(nvllc::bytes(slots, 1));
        let nv0 = layout.nvllc_block0().0;
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            let mut image = vec![0u8; layout.total_bytes() as usize];
            let head = LogHead { format: LogFormat::Kiln, start: 0, start_seq: 1 };
            image[layout.log_block0().range()].copy_from_slice(&head.encode());
            let mut committed = 0;
            let write = |image: &mut Vec<u8>, b: u64, d: BlockData| image[BlockId(b).range()].copy_from_slice(&d);
            write(&mut image, nv0, Register { committed, applied: 0 }.encode());
            let mut t = Tracker::new(&layout, &image).expect("a log recovery accepts");
            let mut laid = vec![None; 64];
            let log0 = layout.log_block0().0;
            for step in 0..400 {
                let b = match rng.below(14) {
                    // The fallback log: a META of one of its four groups (valid ones from the
                    // head's start on, this lap's SID or the next's), tags of few homes and
                    // transactions near the register's; or a logged data block.
                    10 => {
                        let g = rng.below(4);
                        let mut tags = [None; DATA_SLOTS];
                        for tag in tags.iter_mut() {
                            if rng.chance(0.5) {
                                let d = rng.below((committed + 12).min(128));
                                *tag = Some(BlkTag {
                                    addr: rng.below(70) as u32,
                                    tx_cnt: 1,
                                    tx_id: (1 + d) as u8,
                                    ..Default::default()
                                });
                            }
                        }
                        let sid = if rng.chance(0.9) { g } else { g + 4 };
                        write(&mut image, log0 + 1 + 8 * g + DATA_SLOTS as u64, Meta { sid, tags }.encode());
                        log0 + 1 + 8 * g + DATA_SLOTS as u64
                    }
                    11 => {
                        let at = log0 + 1 + 8 * rng.below(4) + rng.below(DATA_SLOTS as u64);
                        let mut d = [0u8; 64];
                        d[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
                        write(&mut image, at, d);
                        at
                    }
                    // The head, its `start` moved (the valid groups then begin elsewhere, and
                    // a META of the next lap's SID may be one of them).
                    12 => {
                        let start = rng.below(6);
                        write(&mut image, log0, LogHead { format: LogFormat::Kiln, start, start_seq: 1 }.encode());
                        log0
                    }
                    0..=4 => {
                        let s = rng.below(slots as u64) as usize;
                        let tag = rng.chance(0.85).then(|| (rng.below(70), committed + rng.below(12)));
                        write(&mut image, nv0 + nvllc::tag_block(s), nvllc::encode_tag(tag));
                        nv0 + nvllc::tag_block(s)
                    }
                    5..=7 => {
                        let s = rng.below(slots as u64) as usize;
                        let mut d = [0u8; 64];
                        d[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
                        write(&mut image, nv0 + nvllc::data_block(s), d);
                        nv0 + nvllc::data_block(s)
                    }
                    _ => {
                        committed += rng.below(4);
                        write(&mut image, nv0, Register { committed, applied: 0 }.encode());
                        nv0
                    }
                };
                assert!(t.land(BlockId(b), &image), "seed {seed} step {step}");
                t.take_dirty(|home, from| laid[home.0 as usize] = from.map(|f| read_block(&image, f)));
                let plan = recover(&layout, &image).unwrap();
                let redo = plan.writes.len() - 2;
                assert_eq!(t.redo_writes(), redo, "seed {seed} step {step}: redo writes");
                let mut want = vec![None; 64];
                for (h, d) in &plan.writes[..redo] {
                    want[h.0 as usize] = Some(*d);
                }
                assert_eq!(laid, want, "seed {seed} step {step}: the homes' last writes");
            }
            // A log recovery rejects drops it: a head that does not decode.
            let mut headless = image.clone();
            write(&mut headless, log0, [0; 64]);
            assert!(!t.clone().land(BlockId(log0), &headless), "a head recovery rejects drops it");
            write(&mut image, nv0, Register { committed, applied: 1 }.encode());
            let mut t = Tracker::new(&layout, &{
                let mut i = image.clone();
                write(&mut i, nv0, Register { committed, applied: 0 }.encode());
                i
            })
            .unwrap();
            assert!(!t.land(BlockId(nv0), &image), "a changed `applied` drops it");
        }
    }

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
