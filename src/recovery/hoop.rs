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
//! blocks; a [`Cache`] keeps each region's scanned committed transactions between recoveries
//! so that a scan resumes where the last one ended (docs/crash-checker.md, "Cost"). [`recover`] is a recovery with an empty cache.

use super::{head_in_range, Plan};
use crate::log::head::{LogFormat, LogHead};
use crate::log::hoop::{data_word, SliceMeta, SLICE_BLOCKS};
use crate::pmem::{read_block, Layout};
use crate::types::{BlockData, BlockId};

pub fn recover(layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    recover_cached(layout, image, &mut Cache::new(layout))
}

/// A committed transaction of a region's scan: its global order, the ring position past its
/// last slice, and the end of its words in [`Scan::words`].
#[derive(Clone, Copy, Debug)]
struct Tx {
    order: u64,
    end: u64,
    words_end: usize,
}

/// One region's committed transactions in log order, scanned from the head in `hb`.
#[derive(Debug)]
struct Scan {
    hb: BlockData,
    start: u64,
    start_seq: u64,
    txs: Vec<Tx>,
    /// (home word number, value) of every committed transaction, in slice order.
    words: Vec<(u32, u64)>,
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
    fn end(&self) -> u64 {
        self.txs.last().map_or(self.start, |t| t.end)
    }

    /// Keep the transactions that end at or before ring position `pos`.
    fn truncate(&mut self, pos: u64) {
        let keep = self.txs.partition_point(|t| t.end <= pos);
        self.txs.truncate(keep);
        self.words.truncate(self.txs.last().map_or(0, |t| t.words_end));
    }

    /// Start the scan at `head` (decoded from `hb`): the transactions from it on when it is
    /// the start of one scanned (a head moved past whole transactions), else none.
    fn restart(&mut self, hb: &BlockData, head: &LogHead) {
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

/// Each region's scan as the last recovery left it, kept by the crash checker between the
/// recoveries of one sweep. A durable write to a slice already scanned must be reported
/// ([`Cache::land`]); a changed head is seen by comparing the head block.
#[derive(Debug, Default)]
pub struct Cache {
    regions: Vec<Option<Scan>>,
    /// Scratch of [`recover_cached`], kept to spare allocations per recovery: the transactions
    /// to replay, the home blocks they write (and their numbers), and per data block its
    /// generation stamp (high half) and index in `homes` (low half).
    order: Vec<(u64, u32, u32)>,
    homes: Vec<BlockData>,
    blocks: Vec<u64>,
    at: Vec<u64>,
    generation: u32,
    /// The last recovery's replay, which the next one extends ([`Replay`]); `None` after a
    /// failed recovery, a copy, or a change that undoes what was replayed.
    replay: Option<Replay>,
    /// Per entry of `homes`: the words (bit i: word i) the replay wrote into it.
    masks: Vec<u8>,
    /// Home blocks of `homes` that changed in the image since the last recovery.
    stale: Vec<u64>,
    /// Scratch: the home blocks first written by this recovery's replay.
    fresh: Vec<u64>,
}

/// What the last recovery replayed: `homes` holds its home blocks (stamped with `generation`)
/// and `blocks` their numbers in increasing order. The next recovery resumes it when no head
/// block changed (a changed head restarts its region's scan), no replayed transaction was dropped from a scan, `home_below`
/// did not move, and every transaction scanned since comes later in global order than all
/// those replayed: then replaying only those transactions' words, over the replayed home blocks
/// (those the image changed taken afresh, the replayed words kept), gives the same plan as
/// replaying all of them over blocks read from the image. A crash sweep's consecutive images
/// differ in a few slices, so a recovery replays a few transactions instead of every live one
/// (docs/crash-checker.md, "Cost").
#[derive(Debug)]
struct Replay {
    skip_below: u64,
    /// Per region: the number of its transactions replayed or skipped (below `skip_below`).
    counts: Vec<usize>,
    /// The largest global order replayed (0: none).
    top: u64,
    redone: u64,
}

impl Clone for Cache {
    fn clone(&self) -> Cache {
        Cache { regions: self.regions.clone(), ..Cache::default() }
    }

    /// The scans only, into the vectors `self` has (a copy does not resume a replay: it hears
    /// of no image change).
    fn clone_from(&mut self, o: &Cache) {
        self.regions.clone_from(&o.regions);
        self.replay = None;
    }
}

impl Cache {
    pub fn new(layout: &Layout) -> Cache {
        Cache { regions: vec![None; layout.cores as usize], ..Cache::default() }
    }

    /// Block `b` of the image is about to change: forget the transactions scanned from it on
    /// in its region (and the replay, if one of them was replayed); a home block the replay
    /// wrote is taken afresh from the image by the next recovery.
    pub fn land(&mut self, layout: &Layout, b: BlockId) {
        if self.replay.is_some() && b.0 < self.at.len() as u64 {
            if self.at[b.0 as usize] >> 32 == self.generation as u64 {
                self.stale.push(b.0);
            }
            return;
        }
        for (c, r) in self.regions.iter_mut().enumerate() {
            let (log0, blocks) = layout.log_region(c);
            if b.0 <= log0.0 || b.0 >= log0.0 + blocks {
                continue;
            }
            let Some(s) = r else { return };
            let cap = (blocks - 1) / SLICE_BLOCKS;
            let slot = (b.0 - log0.0 - 1) / SLICE_BLOCKS;
            if slot >= cap {
                return;
            }
            let pos = s.start + (slot + cap - s.start % cap) % cap;
            if pos < s.end() {
                s.truncate(pos);
                if self.replay.as_ref().is_some_and(|r| s.txs.len() < r.counts[c]) {
                    self.replay = None;
                }
            }
            return;
        }
    }
}

/// Recovery resuming each region's scan from `cache`, which it leaves holding this image's
/// scans. `cache` must have heard of every durable write to a slice since it was last used
/// ([`Cache::land`]); the result is then [`recover`]'s.
pub fn recover_cached(layout: &Layout, image: &[u8], cache: &mut Cache) -> Result<Plan, String> {
    recover_cached_with(layout, image, cache, |b| read_block(image, b))
}

/// [`recover_cached`] with the image's home blocks read through `home` (the content of data
/// block `b`), its log regions from `image`: for a caller whose `image` holds something else
/// over the data area (the crash checker's overlay of the last plan, `crash::overlay`), so that
/// it need not take it away to recover.
pub fn recover_cached_with(
    layout: &Layout,
    image: &[u8],
    cache: &mut Cache,
    home: impl Fn(BlockId) -> BlockData,
) -> Result<Plan, String> {
    recover_from_cache(layout, image, cache, home, false).map(|p| p.expect("a plan is made when asked for"))
}

/// [`recover_cached_with`] for a caller that holds the plan of the cache's last recovery:
/// `Ok(None)` when this recovery makes that plan again, which it then knows without making it.
/// That is when it resumes the last replay with nothing to add (no head changed, every scan
/// as long as it was, so no transaction to replay and the same home blocks and log heads) and
/// every home block the image changed since reads back, with the replayed words kept, as the
/// replay had it: the crash checker's second recovery after a crash during HOOP's redo, whose
/// written prefix is the plan's own content (`crash::Recoverer::same_again`). Otherwise the
/// plan, as [`recover_cached_with`] makes it.
pub fn recover_cached_again(
    layout: &Layout,
    image: &[u8],
    cache: &mut Cache,
    home: impl Fn(BlockId) -> BlockData,
) -> Result<Option<Plan>, String> {
    recover_from_cache(layout, image, cache, home, true)
}

/// [`recover_cached_with`], or with `again` [`recover_cached_again`].
fn recover_from_cache(
    layout: &Layout,
    image: &[u8],
    cache: &mut Cache,
    home: impl Fn(BlockId) -> BlockData,
    again: bool,
) -> Result<Option<Plan>, String> {
    // Put back only once this recovery has succeeded.
    let prev = cache.replay.take();
    let mut skip_below = 0;
    let mut top = 0;
    let mut head_moved = false;
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
        let mut s = cache.regions[c].take().unwrap_or_default();
        head_moved |= s.hb != hb;
        if s.txs.is_empty() || s.hb != hb {
            s.restart(&hb, &head);
        }
        scan(image, log0, cap, layout.data_bytes / 8, &mut s)?;
        top = top.max(s.txs.iter().map(|t| t.order.saturating_add(1)).max().unwrap_or(0));
        cache.regions[c] = Some(s);
    }
    let Cache { regions, order: txs, homes, blocks, at, generation, masks, stale, fresh, .. } = cache;
    let scan_of = |c: usize| regions[c].as_ref().expect("scanned above");
    // Resume the last replay where it still holds ([`Replay`]), else replay from nothing.
    let resume = prev.filter(|r| {
        !head_moved
            && r.skip_below == skip_below
            && regions.iter().flatten().enumerate().all(|(c, s)| {
                s.txs.len() >= r.counts[c]
                    && s.txs[r.counts[c]..].iter().all(|t| t.order < skip_below || t.order > r.top)
            })
    });
    let n = layout.data_bytes.div_ceil(64) as usize;
    if resume.is_none() {
        if at.len() != n {
            // Zeroed pages from the allocator: only the blocks written are touched.
            *at = vec![0; n];
        }
        *generation = generation.wrapping_add(1);
        if *generation == 0 {
            at.fill(0);
            *generation = 1;
        }
        homes.clear();
        masks.clear();
        blocks.clear();
    }
    let stamp = (*generation as u64) << 32;
    // Home blocks the image changed under the replay: the image's block with the replayed
    // words kept. `same`: each as the replay had it.
    let mut same = true;
    for b in stale.drain(..) {
        if resume.is_some() && at[b as usize] >> 32 == stamp >> 32 {
            let i = at[b as usize] as u32 as usize;
            let mut d = home(BlockId(b));
            for k in (0..8).filter(|k| masks[i] >> k & 1 != 0) {
                d[k * 8..k * 8 + 8].copy_from_slice(&homes[i][k * 8..k * 8 + 8]);
            }
            same &= homes[i] == d;
            homes[i] = d;
        }
    }
    // The transactions to replay (those scanned since, when resuming), by global order;
    // stable: equal orders (only in a corrupt log) keep region order.
    txs.clear();
    for (c, s) in regions.iter().flatten().enumerate() {
        let from = resume.as_ref().map_or(0, |r| r.counts[c]);
        txs.extend(
            (s.txs.iter().enumerate().skip(from))
                .filter(|(_, t)| t.order >= skip_below)
                .map(|(j, t)| (t.order, c as u32, j as u32)),
        );
    }
    txs.sort_by_key(|t| t.0);
    if let (true, true, Some(r)) = (again && same, txs.is_empty(), &resume) {
        if regions.iter().flatten().enumerate().all(|(c, s)| s.txs.len() == r.counts[c]) {
            // Every scan as the last recovery left it (a changed head or a shortened scan
            // would have stopped the resume), the same home blocks with the same content: the
            // last plan. The replay stays as it was.
            cache.replay = resume;
            return Ok(None);
        }
    }
    // Their words in replay order into the home blocks, each read from the image once (at its
    // first word) and found again through `at`, stamped with the replay's generation.
    fresh.clear();
    for &(_, c, j) in txs.iter() {
        let s = scan_of(c as usize);
        let from = (j as usize).checked_sub(1).map_or(0, |i| s.txs[i].words_end);
        for &(w, v) in &s.words[from..s.txs[j as usize].words_end] {
            let b = w as usize / 8;
            if at[b] >> 32 != stamp >> 32 {
                at[b] = stamp | homes.len() as u64;
                homes.push(home(BlockId(b as u64)));
                masks.push(0);
                fresh.push(b as u64);
            }
            let i = at[b] as u32 as usize;
            let o = (w as usize % 8) * 8;
            homes[i][o..o + 8].copy_from_slice(&v.to_le_bytes());
            masks[i] |= 1 << (w % 8);
        }
    }
    // `blocks` in increasing order: the fresh ones sorted and merged in from the back, in
    // place (the two lists have no block in common).
    fresh.sort_unstable();
    let (mut i, mut k) = (blocks.len(), fresh.len());
    blocks.resize(i + k, 0);
    while k > 0 {
        let at = i + k - 1;
        if i > 0 && blocks[i - 1] > fresh[k - 1] {
            blocks[at] = blocks[i - 1];
            i -= 1;
        } else {
            blocks[at] = fresh[k - 1];
            k -= 1;
        }
    }
    let mut writes = Vec::with_capacity(blocks.len() + regions.len());
    writes.extend(blocks.iter().map(|&b| (BlockId(b), homes[at[b as usize] as u32 as usize])));
    let redone = resume.as_ref().map_or(0, |r| r.redone) + txs.len() as u64;
    let top_replayed = txs.iter().map(|t| t.0).chain(resume.as_ref().map(|r| r.top)).max().unwrap_or(0);
    let mut plan = Plan { writes, redone_txs: redone };
    let home_below = skip_below.max(top);
    for (c, s) in regions.iter().flatten().enumerate() {
        let next = LogHead { format: LogFormat::Hoop, start: s.end(), start_seq: s.start_seq + s.txs.len() as u64 };
        // In the head's own form (two slots: the slot not holding the newest head).
        plan.writes.push((layout.log_region(c).0, next.encode_next_home(&s.hb, home_below)));
    }
    let mut counts = resume.map(|r| r.counts).unwrap_or_default();
    counts.clear();
    counts.extend(regions.iter().flatten().map(|s| s.txs.len()));
    cache.replay = Some(Replay { skip_below, counts, top: top_replayed, redone });
    Ok(Some(plan))
}

/// Scan one region on from the last committed transaction of `s`, adding the committed
/// transactions found; an error for a slice that decodes but names a home word outside the
/// data area's `words`.
fn scan(image: &[u8], log0: BlockId, cap: u64, words: u64, s: &mut Scan) -> Result<(), String> {
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
