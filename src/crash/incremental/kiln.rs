//! Kiln's and LOC-Kiln's recovery ([`crate::recovery::kiln`]) kept up to date block by block
//! for the crash checker: the incremental recoverer of [`LogFormat::Kiln`]
//! (`Incremental`, docs/crash-checker.md, "Cost").

use super::super::overlay::Overlay;
use crate::log::ec::{valid_groups, Meta, DATA_SLOTS, GROUP_BLOCKS};
use crate::log::head::{LogFormat, LogHead};
use crate::log::nvllc::{self, Binding, Register};
use crate::pmem::Layout;
use crate::types::{BlockData, BlockId};
use std::collections::BTreeSet;

/// Kiln's recovery kept up to date block by block, for the crash checker (`Tracking`):
/// between two crash points a few hundred NV-LLC blocks land, while [`recover`](crate::recovery::kiln::recover) reads every slot and writes every
/// committed line home (thousands of blocks), so the checker keeps the per-home outcome of
/// [`recover`](crate::recovery::kiln::recover) here and re-derives only the homes a landed block affects. A fallback-log block
/// re-derives what it can change (`Tracker::land_log`): a logged block, the home its tag names;
/// a META of the last valid group (rewritten as the group fills) or of the next, that group's
/// candidates (a transaction whose write set overflows the NV-LLC logs thousands of blocks, and
/// reading every valid group at each of them made its check quadratic); the head, the whole
/// region. With more than one core each core's fallback-log region is followed as a log of its
/// own, and a Core Binding that moves re-reads its core's region (its candidates count as the
/// global number the binding gives) and admits the core's lines it now covers. A log recovery
/// rejects, a register that does not decode or whose `applied` changes, a `committed` that
/// falls, a binding that does not decode or whose number falls, or a tag of a core the layout
/// does not have drops it ([`Tracker::land`] returns false), and the checker recovers whole.
/// The checker compares it with [`recover`](crate::recovery::kiln::recover) on the 1st, 8th, 64th, ... use.
///
/// What it keeps is what [`recover`](crate::recovery::kiln::recover) derives: per slot its decoded tag, per home the slots
/// whose tag names it (a list through `next`), the slots whose transaction the register or
/// their owner's binding does not cover yet (`pending`), and how many candidates the plan
/// writes home (`admitted`). The plan writes a home the data of its last candidate in
/// (seq, log before line, position) order.
#[derive(Clone)]
pub struct Tracker {
    nv0: u64,
    /// The log area's first block and the blocks of each core's region ([`Layout::log_region`]).
    log0: u64,
    per: u64,
    regions: Vec<Region>,
    data_blocks: u64,
    committed: u64,
    applied: u64,
    /// Per core: the global number its Core Binding registers, the last of its lines recovery
    /// may write home (`u64::MAX` with one core, whose lines the register alone admits).
    bound: Vec<u64>,
    tags: Vec<Option<Tag>>,
    /// Per home: its first candidate slot + 1 (0: none); per slot: the next of the same home.
    first: Vec<u32>,
    next: Vec<u32>,
    pending: Vec<u32>,
    is_pending: Vec<bool>,
    admitted: usize,
    dirty: Vec<u32>,
    is_dirty: Vec<bool>,
}

/// A slot's decoded tag: (home, seq, owner core).
type Tag = (u64, u64, u8);

/// One core's fallback-log region as last read (with one core, the whole log area).
#[derive(Clone, Default)]
struct Region {
    core: u64,
    /// The region's head block and its groups.
    head: u64,
    groups: u64,
    /// The head's `start` and `start_seq` as last read, and the SID of the first group past
    /// its valid ones.
    start: u64,
    start_seq: u64,
    end_sid: u64,
    /// The core's Core Binding (`None` with one core).
    binding: Option<Binding>,
    /// The region's candidates, by home.
    cands: BTreeSet<LogCand>,
    /// The candidates of the last valid group (SID `end_sid - 1`), when known: what a rewrite
    /// of its META replaces.
    tail: Option<Vec<LogCand>>,
}

impl Region {
    /// Add the candidates of valid group `sid` (first block `g0`, its `meta`) to `cands`, as
    /// [`recover`](crate::recovery::kiln::recover) reads them; false where it would fail on them.
    fn read_group(&self, sid: u64, g0: u64, meta: &Meta, data_blocks: u64, cands: &mut Vec<LogCand>) -> bool {
        for (slot, t) in meta.tags.iter().enumerate() {
            let Some(t) = t else { continue };
            let d = t.tx_id.wrapping_sub(self.start_seq as u8) as u64;
            if d >= 128 {
                return false;
            }
            let seq = match self.binding {
                None => self.start_seq + d,
                Some(b) if b.local == self.start_seq + d => b.seq,
                Some(_) => continue,
            };
            if (t.addr as u64) < data_blocks {
                let pos = (self.core << 48) | ((sid - self.start) * 8 + slot as u64);
                cands.push((t.addr as u64, seq, pos, g0 + slot as u64));
            }
        }
        true
    }
}

impl Tracker {
    /// Take a durable image whose [`recover`](crate::recovery::kiln::recover) succeeded (`None` if its register, a binding, a
    /// tag or a log would make [`recover`](crate::recovery::kiln::recover) fail).
    pub fn new(layout: &Layout, image: &[u8]) -> Option<Tracker> {
        let nv0 = layout.nvllc_block0();
        let reg = Register::decode(&image[nv0.range()])?;
        let cores = layout.cores as usize;
        let slots = nvllc::slots_in(layout.nvllc_bytes, layout.cores);
        let data_blocks = layout.data_bytes / 64;
        let (log0, per) = layout.log_region(0);
        let mut regions = Vec::with_capacity(cores);
        let mut bound = Vec::with_capacity(cores);
        for c in 0..cores {
            let binding = match cores {
                1 => None,
                _ => Some(Binding::decode(&image[BlockId(nv0.0 + nvllc::binding_block(slots, c)).range()])?),
            };
            bound.push(binding.map_or(u64::MAX, |b| b.seq));
            let head = log0.0 + c as u64 * per;
            regions.push(Region {
                core: c as u64,
                head,
                groups: (per - 1) / GROUP_BLOCKS,
                binding,
                ..Region::default()
            });
        }
        let mut t = Tracker {
            nv0: nv0.0,
            log0: log0.0,
            per,
            regions,
            data_blocks,
            committed: reg.committed,
            applied: reg.applied,
            bound,
            // Arrays read at random before written there: committed now, so that no page is
            // first mapped to the zero page (whose replacement at the first write would flush
            // every other crash-check worker's TLB).
            tags: vec![None; slots],
            first: crate::hostmem::committed(data_blocks as usize),
            next: crate::hostmem::committed(slots),
            pending: Vec::new(),
            is_pending: crate::hostmem::committed(slots),
            admitted: 0,
            dirty: Vec::new(),
            is_dirty: crate::hostmem::committed(data_blocks as usize),
        };
        for r in 0..cores {
            if !t.scan_log(r, image) {
                return None;
            }
        }
        for s in 0..slots {
            let tag = &image[BlockId(nv0.0 + nvllc::tag_block(s)).range()];
            if !t.land_tag(s, tag) {
                return None;
            }
        }
        t.take_dirty(|_, _| {});
        Some(t)
    }

    /// Read region `r`'s candidates again, as [`recover`](crate::recovery::kiln::recover) does (its valid groups from the
    /// head's `start`); false where [`recover`](crate::recovery::kiln::recover) would fail on it. The homes of the candidates
    /// before and after are re-derived.
    fn scan_log(&mut self, r: usize, image: &[u8]) -> bool {
        let (applied, committed, data_blocks) = (self.applied, self.committed, self.data_blocks);
        let reg = &mut self.regions[r];
        let log0 = BlockId(reg.head);
        let groups = reg.groups;
        let head = match LogHead::decode(&image[log0.range()]) {
            Some(h)
                if h.format == LogFormat::Kiln
                    && crate::recovery::head_in_range(&h, log0, groups * GROUP_BLOCKS).is_ok() =>
            {
                h
            }
            _ => return false,
        };
        (reg.start, reg.start_seq, reg.end_sid) = (head.start, head.start_seq, head.start);
        let mut cands = Vec::new();
        for (sid, g0, meta) in valid_groups(image, log0.0, groups, head.start) {
            reg.end_sid = sid + 1;
            if !reg.read_group(sid, g0, &meta, data_blocks, &mut cands) {
                return false;
            }
        }
        let last = (reg.core << 48) | ((reg.end_sid.max(reg.start + 1) - 1 - reg.start) * 8);
        reg.tail = (reg.end_sid > reg.start).then(|| cands.iter().filter(|c| c.2 >= last).copied().collect());
        let old = std::mem::replace(&mut reg.cands, cands.into_iter().collect());
        let wanted = |seq: u64| applied < seq && seq <= committed;
        for (home, seq, _, _) in old {
            self.admitted -= usize::from(wanted(seq));
            mark(&mut self.is_dirty, &mut self.dirty, home);
        }
        for &(home, seq, _, _) in &self.regions[r].cands {
            self.admitted += usize::from(wanted(seq));
            mark(&mut self.is_dirty, &mut self.dirty, home);
        }
        true
    }

    /// Block `off` of region `r` was written. The head: the whole region is read again.
    /// A data slot of a valid group: the home its tag names is marked (the plan may write it
    /// this block's new content). A META past the group after the valid ones changes nothing
    /// (the valid groups end before it); of the last valid group (rewritten as the group
    /// fills) or the one after it (a new group): the region is read again from that group on;
    /// further inside: the whole region. False where [`recover`](crate::recovery::kiln::recover) would fail on it.
    fn land_log(&mut self, r: usize, off: u64, image: &[u8]) -> bool {
        if off == 0 {
            return self.scan_log(r, image);
        }
        let reg = &self.regions[r];
        let g = (off - 1) / GROUP_BLOCKS;
        if g >= reg.groups {
            return true; // past the last group: never read
        }
        // The SID the valid groups would give group `g`: the one in start..start + groups.
        let sid = reg.start + (g + reg.groups - reg.start % reg.groups) % reg.groups;
        let slot = ((off - 1) % GROUP_BLOCKS) as usize;
        if slot < DATA_SLOTS {
            if sid < reg.end_sid {
                let meta = reg.head + 1 + g * GROUP_BLOCKS + DATA_SLOTS as u64;
                if let Some(t) = Meta::decode(&image[BlockId(meta).range()]).tags[slot] {
                    if (t.addr as u64) < self.data_blocks {
                        self.mark(t.addr as u64);
                    }
                }
            }
            return true;
        }
        if sid > reg.end_sid {
            return true;
        }
        if sid + 1 < reg.end_sid || (sid + 1 == reg.end_sid && reg.tail.is_none()) {
            return self.scan_log(r, image);
        }
        self.read_log_from(r, sid, image)
    }

    /// Read region `r`'s valid groups again from SID `from` (the last valid group, whose
    /// candidates `tail` holds, or the one after it) on, as [`Tracker::scan_log`] reads them,
    /// with the head it last read; the candidates of the groups before stay.
    fn read_log_from(&mut self, r: usize, from: u64, image: &[u8]) -> bool {
        let (applied, committed, data_blocks) = (self.applied, self.committed, self.data_blocks);
        let wanted = |seq: u64| applied < seq && seq <= committed;
        let reg = &mut self.regions[r];
        let rewrite = from + 1 == reg.end_sid;
        if rewrite {
            for c in reg.tail.take().expect("the caller checked") {
                reg.cands.remove(&c);
                self.admitted -= usize::from(wanted(c.1));
                mark(&mut self.is_dirty, &mut self.dirty, c.0);
            }
        }
        reg.end_sid = from;
        let left = (reg.start + reg.groups - from) as usize;
        let mut last = Vec::new();
        for (sid, g0, meta) in valid_groups(image, reg.head, reg.groups, from).take(left) {
            reg.end_sid = sid + 1;
            last.clear();
            if !reg.read_group(sid, g0, &meta, data_blocks, &mut last) {
                return false;
            }
            for &c in &last {
                reg.cands.insert(c);
                self.admitted += usize::from(wanted(c.1));
                mark(&mut self.is_dirty, &mut self.dirty, c.0);
            }
        }
        // The last valid group's candidates: unknown when the rewritten group is no longer
        // valid; the same as before when the group after the valid ones is still not valid.
        if reg.end_sid > from {
            reg.tail = Some(last);
        } else if rewrite {
            reg.tail = None;
        }
        true
    }

    fn wanted(&self, seq: u64) -> bool {
        self.applied < seq && seq <= self.committed
    }

    /// Is a committed line of transaction `seq` of core `cid` written home? The register
    /// covers it and, with several cores, so does its owner's binding.
    fn line_wanted(&self, seq: u64, cid: u8) -> bool {
        self.wanted(seq) && seq <= self.bound[cid as usize]
    }

    fn mark(&mut self, home: u64) {
        mark(&mut self.is_dirty, &mut self.dirty, home);
    }

    /// Slot `s`'s tag block now holds `tag`; false where [`recover`](crate::recovery::kiln::recover) fails on it (a tag of a
    /// core the layout does not have).
    fn land_tag(&mut self, s: usize, tag: &[u8]) -> bool {
        let decoded = nvllc::decode_tag(tag).map(|(home, seq)| (home, seq, nvllc::tag_cid(tag)));
        if decoded.is_some_and(|(_, _, cid)| cid as usize >= self.bound.len()) {
            return false;
        }
        self.set_tag(s, decoded);
        true
    }

    /// Slot `s`'s tag is now `tag`.
    fn set_tag(&mut self, s: usize, tag: Option<Tag>) {
        let old = std::mem::replace(&mut self.tags[s], tag);
        if old == tag {
            return;
        }
        if let Some((home, seq, cid)) = old.filter(|&(h, _, _)| h < self.data_blocks) {
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
            if self.line_wanted(seq, cid) {
                self.admitted -= 1;
                self.mark(home);
            }
        }
        if let Some((home, seq, cid)) = tag.filter(|&(h, _, _)| h < self.data_blocks) {
            self.next[s] = self.first[home as usize];
            self.first[home as usize] = s as u32 + 1;
            if self.line_wanted(seq, cid) {
                self.admitted += 1;
                self.mark(home);
            } else if seq > self.committed.min(self.bound[cid as usize])
                && !std::mem::replace(&mut self.is_pending[s], true)
            {
                self.pending.push(s as u32);
            }
        }
    }

    /// The register's `committed` or a binding's number grew: admit the queued slots covered
    /// now and not before (`before`: the register's `committed` and, if a binding moved, its
    /// core and former number), and keep those still beyond.
    fn admit_pending(&mut self, before: u64, moved: Option<(usize, u64)>) {
        let was_limit = |bound: &[u64], cid: u8| {
            let b = match moved {
                Some((c, old)) if c == cid as usize => old,
                _ => bound[cid as usize],
            };
            before.min(b)
        };
        let (applied, committed) = (self.applied, self.committed);
        let mut pending = std::mem::take(&mut self.pending);
        pending.retain(|&s| {
            let keep = match self.tags[s as usize] {
                Some((home, seq, cid)) => {
                    let limit = committed.min(self.bound[cid as usize]);
                    // Admitted now unless it was already (its tag changed since it was queued).
                    if applied < seq && seq <= limit && seq > was_limit(&self.bound, cid) && home < self.data_blocks {
                        self.admitted += 1;
                        mark(&mut self.is_dirty, &mut self.dirty, home);
                    }
                    seq > limit
                }
                None => false,
            };
            self.is_pending[s as usize] = keep;
            keep
        });
        self.pending = pending;
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
        if let Some(off) = b.0.checked_sub(self.log0) {
            let r = off / self.per;
            if r < self.regions.len() as u64 {
                return self.land_log(r as usize, off % self.per, image);
            }
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
                self.admit_pending(before, None);
                let (applied, committed) = (self.applied, self.committed);
                for reg in &self.regions {
                    for &(home, seq, _, _) in &reg.cands {
                        if seq > before && applied < seq && seq <= committed {
                            self.admitted += 1;
                            mark(&mut self.is_dirty, &mut self.dirty, home);
                        }
                    }
                }
            }
            return true;
        }
        let slots = self.tags.len() as u64;
        if off > 2 * slots {
            // A Core Binding (with several cores), else past the NV-LLC state.
            let c = (off - 1 - 2 * slots) as usize;
            return match self.regions.get(c).and_then(|r| r.binding) {
                Some(old) => self.land_binding(c, old, image, b),
                None => true,
            };
        }
        let s = ((off - 1) / 2) as usize;
        if off % 2 == 1 {
            return self.land_tag(s, &image[b.range()]);
        }
        if let Some((home, seq, cid)) = self.tags[s] {
            if home < self.data_blocks && self.line_wanted(seq, cid) {
                self.mark(home);
            }
        }
        true
    }

    /// Core `c`'s Core Binding (block `b`, `old` before) was written: its lines up to the new
    /// number are admitted, and its region, whose candidates count as the number the binding
    /// gives, is read again.
    fn land_binding(&mut self, c: usize, old: Binding, image: &[u8], b: BlockId) -> bool {
        let Some(new) = Binding::decode(&image[b.range()]) else { return false };
        if new == old {
            return true;
        }
        if new.seq < old.seq {
            return false;
        }
        self.regions[c].binding = Some(new);
        let was = std::mem::replace(&mut self.bound[c], new.seq);
        if new.seq > was {
            self.admit_pending(self.committed, Some((c, was)));
        }
        self.scan_log(c, image)
    }

    /// The data writes of the plan [`recover`](crate::recovery::kiln::recover) would make now (its redo writes).
    pub fn redo_writes(&self) -> usize {
        self.admitted
    }

    /// The writes of the plan [`recover`](crate::recovery::kiln::recover) would make now: its redo writes, the register, and a
    /// head per core.
    pub fn plan_writes(&self) -> usize {
        self.admitted + 1 + self.regions.len()
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
            for reg in &self.regions {
                for &(_, seq, pos, block) in reg.cands.range((h, 0, 0, 0)..(h + 1, 0, 0, 0)) {
                    if self.wanted(seq) {
                        consider((seq, 0, pos), block);
                    }
                }
            }
            let mut at = self.first[home as usize];
            while at != 0 {
                let s = at as usize - 1;
                let (_, seq, cid) = self.tags[s].expect("a listed slot has a tag");
                if self.line_wanted(seq, cid) {
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

/// Kiln's incremental recoverer ([`super::IncrementalRecovery`]): a [`Tracker`] while one
/// follows the durable image. A tracker is built at a point where none follows (the first, or
/// after one was dropped) once a block outside the data area has landed since the last try (a
/// build fails only where recovery would, and recovery reads the log and the NV-LLC state);
/// the whole plan is then laid once, and after that only the homes whose outcome changed.
pub(crate) struct Tracking {
    tracker: Option<Tracker>,
    /// Whether building a tracker may succeed now.
    retry: bool,
    /// The tracker's uses (the 1st, 8th, 64th, ... compared with a whole recovery).
    tracked: u64,
}

impl Default for Tracking {
    fn default() -> Tracking {
        Tracking { tracker: None, retry: true, tracked: 0 }
    }
}

const FORMAT: Option<LogFormat> = Some(LogFormat::Kiln);

impl super::IncrementalRecovery for Tracking {
    #[inline]
    fn land(&mut self, layout: &Layout, b: BlockId, img: &[u8]) {
        match &mut self.tracker {
            Some(tracker) => {
                if !tracker.land(b, img) {
                    self.tracker = None;
                    self.retry = true;
                }
            }
            None => self.retry |= !layout.is_data(b),
        }
    }

    #[inline]
    fn prefetch(&self, b: BlockId, data: &BlockData) {
        if let Some(tracker) = &self.tracker {
            tracker.prefetch(b, data);
        }
    }

    fn forget(&mut self, _layout: &Layout) {
        self.tracker = None;
        self.retry = true;
    }

    fn recover(
        &mut self,
        layout: &Layout,
        img: &[u8],
        _overlay: &Overlay,
        changed: &mut Vec<(BlockId, Option<BlockId>)>,
    ) -> Option<super::Recovered> {
        let mut whole = None;
        if self.tracker.is_none() {
            if !std::mem::take(&mut self.retry) {
                return None;
            }
            self.tracker = Some(Tracker::new(layout, img)?);
            // Kiln's recovery reads no data block: the overlay does not change its plan.
            match crate::recovery::recover(FORMAT, layout, img) {
                Ok(plan) => whole = Some(plan),
                Err(_) => {
                    self.tracker = None;
                    return None;
                }
            }
        }
        let tracker = self.tracker.as_mut().expect("built above");
        tracker.take_dirty(|home, from| changed.push((home, from)));
        Some(super::Recovered::Homes { whole, redo: tracker.redo_writes(), writes: tracker.plan_writes() })
    }

    /// The guard of the tracker, which keeps the overlay up to date: a whole recovery of the
    /// image (Kiln's reads no data block, so the overlay does not change it) makes `redo` redo
    /// writes, its last write to each block is what the overlay lays there, and the overlay
    /// lays nothing else.
    fn check_laid(&mut self, layout: &Layout, img: &[u8], overlay: &Overlay, redo: usize) {
        self.tracked += 1;
        if !crate::crash::guard_due(self.tracked, 3) {
            return;
        }
        let whole = crate::recovery::recover(FORMAT, layout, img)
            .expect("crash checker: the Kiln tracker follows an image recovery rejects");
        let n = whole.writes.iter().position(|(b, _)| !layout.is_data(*b)).unwrap_or(whole.writes.len());
        assert_eq!(n, redo, "crash checker: the Kiln tracker's count of redo writes");
        let mut last: Vec<(BlockId, BlockData)> = whole.writes[..n].iter().rev().copied().collect();
        last.sort_by_key(|(b, _)| b.0);
        last.dedup_by_key(|(b, _)| b.0);
        for (b, d) in &last {
            let laid = overlay.covers(*b);
            assert!(laid && img[b.range()] == d[..], "crash checker: the Kiln tracker's block {}", b.0);
        }
        assert_eq!(last.len(), overlay.len(), "crash checker: the Kiln tracker lays blocks recovery does not write");
    }

    fn recover_other(&mut self, layout: &Layout, img: &[u8]) -> Result<crate::recovery::Plan, String> {
        crate::recovery::recover(FORMAT, layout, img)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::ec::BlkTag;
    use crate::pmem::read_block;
    use crate::recovery::kiln::recover;
    use crate::rng::Rng;
    use crate::types::BlockData;

    /// The outcome the tracker keeps, laid over a data area, against [`recover`]'s plan
    /// applied to it: after every one of a random sequence of writes to tags (of few homes, so
    /// that homes have several candidates, some out of range; with several cores, of every
    /// core), line data, the register (`committed` growing by jumps, so that queued slots are
    /// admitted), rewritten tags of queued slots, each region's METAs (valid or not, so that
    /// groups appear and vanish), logged blocks and head, and with several cores the Core
    /// Bindings (their numbers growing by jumps, their local numbers naming some of the logged
    /// transactions). Also: a head recovery rejects, a changed `applied`, a tag of a core the
    /// layout lacks or a binding whose number falls drops the tracker.
    #[test]
    fn the_tracker_keeps_what_recovery_writes_home() {
        for cores in [1, 3] {
            follow_random_writes(cores);
        }
    }

    fn follow_random_writes(cores: u32) {
        let slots = 40;
        let region = 1 + 8 * 4;
        let layout =
            Layout::new(64 * 64, 64 * region * cores as u64).with_nvllc(nvllc::bytes(slots, cores)).with_cores(cores);
        let nv0 = layout.nvllc_block0().0;
        let binding = |c: usize| nv0 + nvllc::binding_block(slots, c);
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            let mut image = vec![0u8; layout.total_bytes() as usize];
            let write = |image: &mut Vec<u8>, b: u64, d: BlockData| image[BlockId(b).range()].copy_from_slice(&d);
            for c in 0..cores as usize {
                let head = LogHead { format: LogFormat::Kiln, start: 0, start_seq: 1 };
                write(&mut image, layout.log_region(c).0 .0, head.encode());
                if cores > 1 {
                    write(&mut image, binding(c), Binding::default().encode());
                }
            }
            let mut committed = 0;
            let mut bound = vec![0; cores as usize];
            write(&mut image, nv0, Register { committed, applied: 0 }.encode());
            let mut t = Tracker::new(&layout, &image).expect("a log recovery accepts");
            let mut laid = vec![None; 64];
            for step in 0..400 {
                let c = rng.below(cores as u64) as usize;
                let log0 = layout.log_region(c).0 .0;
                let b = match rng.below(15) {
                    // A region's fallback log: a META of one of its four groups (valid ones
                    // from the head's start on, this lap's SID or the next's), tags of few homes
                    // and transactions near the register's; or a logged data block.
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
                                    cid: c as u8,
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
                    // A Core Binding: its number up by a jump, its local number one of the
                    // logged transactions' (or not).
                    13 if cores > 1 => {
                        bound[c] += rng.below(4);
                        let local = 1 + rng.below((committed + 12).min(128));
                        write(&mut image, binding(c), Binding { local, seq: bound[c] }.encode());
                        binding(c)
                    }
                    0..=4 => {
                        let s = rng.below(slots as u64) as usize;
                        let tag = rng.chance(0.85).then(|| (rng.below(70), committed + rng.below(12), c as u8));
                        write(&mut image, nv0 + nvllc::tag_block(s), nvllc::encode_owned_tag(tag));
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
                assert!(t.land(BlockId(b), &image), "{cores} cores, seed {seed} step {step}");
                t.take_dirty(|home, from| laid[home.0 as usize] = from.map(|f| read_block(&image, f)));
                let plan = recover(&layout, &image).unwrap();
                let redo = plan.writes.len() - 1 - cores as usize;
                assert_eq!(t.redo_writes(), redo, "{cores} cores, seed {seed} step {step}: redo writes");
                assert_eq!(t.plan_writes(), plan.writes.len(), "{cores} cores, seed {seed} step {step}: writes");
                let mut want = vec![None; 64];
                for (h, d) in &plan.writes[..redo] {
                    want[h.0 as usize] = Some(*d);
                }
                assert_eq!(laid, want, "{cores} cores, seed {seed} step {step}: the homes' last writes");
            }
            let log0 = layout.log_block0().0;
            // A log recovery rejects drops it: a head that does not decode.
            let mut headless = image.clone();
            write(&mut headless, log0, [0; 64]);
            assert!(!t.clone().land(BlockId(log0), &headless), "a head recovery rejects drops it");
            // A tag of a core the layout does not have.
            let mut alien = image.clone();
            let tag = nv0 + nvllc::tag_block(0);
            write(&mut alien, tag, nvllc::encode_owned_tag(Some((1, committed, cores as u8))));
            assert!(recover(&layout, &alien).is_err());
            assert!(!t.clone().land(BlockId(tag), &alien), "a tag of core {cores} of {cores} drops it");
            if cores > 1 && bound[1] > 0 {
                let mut fallen = image.clone();
                write(&mut fallen, binding(1), Binding { local: 1, seq: bound[1] - 1 }.encode());
                assert!(!t.clone().land(BlockId(binding(1)), &fallen), "a binding whose number falls drops it");
            }
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
}
