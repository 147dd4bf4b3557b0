//! HOOP's recovery ([`crate::recovery::hoop`]) resumed from what the last one scanned, for the
//! crash checker: the incremental recoverer of [`LogFormat::Hoop`] (`Incremental`,
//! docs/crash-checker.md, "Cost"). A crash sweep's consecutive images differ in a few slices, so
//! a recovery scans and replays a few transactions instead of every live one; it must give what
//! [`crate::recovery::hoop::recover`] gives (a pure function of the image), which the checker's
//! guards and the model-based test in `tests/hoop.rs` compare.

use super::super::overlay::Overlay;
use crate::log::head::{LogFormat, LogHead};
use crate::log::hoop::SLICE_BLOCKS;
use crate::pmem::{read_block, Layout};
use crate::recovery::hoop::{read_head, scan, Scan};
use crate::recovery::Plan;
use crate::types::{BlockData, BlockId};

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
/// block changed (a changed head restarts its region's scan), no replayed transaction was
/// dropped from a scan, `home_below` did not move, and every transaction scanned since comes
/// later in global order than all those replayed: then replaying only those transactions'
/// words, over the replayed home blocks (those the image changed taken afresh, the replayed
/// words kept), gives the same plan as replaying all of them over blocks read from the image.
/// A crash sweep's consecutive images differ in a few slices, so a recovery replays a few
/// transactions instead of every live one (docs/crash-checker.md, "Cost").
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
/// ([`Cache::land`]); the result is then [`recover`](crate::recovery::hoop::recover)'s.
pub fn recover_cached(layout: &Layout, image: &[u8], cache: &mut Cache) -> Result<Plan, String> {
    recover_cached_with(layout, image, cache, |b| read_block(image, b))
}

/// [`recover_cached`] with the image's home blocks read through `home` (the content of data
/// block `b`), its log regions from `image`: for a caller whose `image` holds something else
/// over the data area (the crash checker's overlay of the last plan), so that
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
/// written prefix is the plan's own content (`Recoverer::same_again`). Otherwise the
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
    let (skip_below, top, head_moved) = cache.scan_regions(layout, image)?;
    // Resume the last replay where it still holds ([`Replay`]), else replay from nothing.
    let regions = &cache.regions;
    let resume = prev.filter(|r| {
        !head_moved
            && r.skip_below == skip_below
            && regions.iter().flatten().enumerate().all(|(c, s)| {
                s.txs.len() >= r.counts[c]
                    && s.txs[r.counts[c]..].iter().all(|t| t.order < skip_below || t.order > r.top)
            })
    });
    if resume.is_none() {
        cache.restart_replay(layout.data_bytes.div_ceil(64) as usize);
    }
    let same = cache.retake_stale(resume.is_some(), &home);
    cache.list_txs(resume.as_ref(), skip_below);
    if let (true, true, Some(r)) = (again && same, cache.order.is_empty(), &resume) {
        if cache.regions.iter().flatten().enumerate().all(|(c, s)| s.txs.len() == r.counts[c]) {
            // Every scan as the last recovery left it (a changed head or a shortened scan
            // would have stopped the resume), the same home blocks with the same content: the
            // last plan. The replay stays as it was.
            cache.replay = resume;
            return Ok(None);
        }
    }
    cache.replay_words(&home);
    merge_fresh(&mut cache.blocks, &mut cache.fresh);
    let Cache { regions, order: txs, homes, blocks, at, .. } = &*cache;
    let mut writes = Vec::with_capacity(blocks.len() + regions.len());
    writes.extend(blocks.iter().map(|&b| (BlockId(b), homes[at[b as usize] as u32 as usize])));
    let redone = resume.as_ref().map_or(0, |r| r.redone) + txs.len() as u64;
    let top_replayed = txs.iter().map(|t| t.0).chain(resume.as_ref().map(|r| r.top)).max().unwrap_or(0);
    let mut plan = Plan { writes, redone_txs: redone };
    let home_below = skip_below.max(top);
    for (c, s) in regions.iter().flatten().enumerate() {
        plan.writes.push((layout.log_region(c).0, s.next_head(home_below)));
    }
    let mut counts = resume.map(|r| r.counts).unwrap_or_default();
    counts.clear();
    counts.extend(regions.iter().flatten().map(|s| s.txs.len()));
    cache.replay = Some(Replay { skip_below, counts, top: top_replayed, redone });
    Ok(Some(plan))
}

/// Merge `fresh` (blocks not in `blocks`), sorted, into `blocks` (increasing), in place from
/// the back.
fn merge_fresh(blocks: &mut Vec<u64>, fresh: &mut [u64]) {
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
}

impl Cache {
    /// Scan each region on from what the cache holds (from its head afresh where the head
    /// block changed): the largest `home_below` of the heads, one past the largest global order
    /// scanned, and whether a head block changed. An error where recovery rejects the image
    /// (the region then scans afresh next time).
    fn scan_regions(&mut self, layout: &Layout, image: &[u8]) -> Result<(u64, u64, bool), String> {
        let (mut skip_below, mut top, mut head_moved) = (0, 0, false);
        for c in 0..layout.cores as usize {
            let (hb, head, cap) = read_head(layout, image, c)?;
            let log0 = layout.log_region(c).0;
            skip_below = skip_below.max(LogHead::home_below(&hb));
            let mut s = self.regions[c].take().unwrap_or_default();
            head_moved |= s.hb != hb;
            if s.txs.is_empty() || s.hb != hb {
                s.restart(&hb, &head);
            }
            scan(image, log0, cap, layout.data_bytes / 8, &mut s)?;
            top = top.max(s.top());
            self.regions[c] = Some(s);
        }
        Ok((skip_below, top, head_moved))
    }

    /// Replay from nothing over `n` data blocks: a new generation of `at`, no home block.
    fn restart_replay(&mut self, n: usize) {
        if self.at.len() != n {
            // Zeroed pages from the allocator: only the blocks written are touched.
            self.at = vec![0; n];
        }
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.at.fill(0);
            self.generation = 1;
        }
        self.homes.clear();
        self.masks.clear();
        self.blocks.clear();
    }

    /// Home blocks the image changed under the replay (when `resuming` it): the image's block
    /// (through `home`) with the replayed words kept. True when each is as the replay had it.
    fn retake_stale(&mut self, resuming: bool, home: &impl Fn(BlockId) -> BlockData) -> bool {
        let stamp = self.generation as u64;
        let mut same = true;
        for b in self.stale.drain(..) {
            if resuming && self.at[b as usize] >> 32 == stamp {
                let i = self.at[b as usize] as u32 as usize;
                let mut d = home(BlockId(b));
                for k in (0..8).filter(|k| self.masks[i] >> k & 1 != 0) {
                    d[k * 8..k * 8 + 8].copy_from_slice(&self.homes[i][k * 8..k * 8 + 8]);
                }
                same &= self.homes[i] == d;
                self.homes[i] = d;
            }
        }
        same
    }

    /// The transactions to replay into `order` (those scanned since, when resuming), by global
    /// order; stable: equal orders (only in a corrupt log) keep region order.
    fn list_txs(&mut self, resume: Option<&Replay>, skip_below: u64) {
        self.order.clear();
        for (c, s) in self.regions.iter().flatten().enumerate() {
            let from = resume.map_or(0, |r| r.counts[c]);
            self.order.extend(
                (s.txs.iter().enumerate().skip(from))
                    .filter(|(_, t)| t.order >= skip_below)
                    .map(|(j, t)| (t.order, c as u32, j as u32)),
            );
        }
        self.order.sort_by_key(|t| t.0);
    }

    /// The words of the transactions in `order`, in that order, into the home blocks, each
    /// read through `home` once (at its first word) and found again through `at`, stamped with
    /// the replay's generation; the blocks first written here listed in `fresh`.
    fn replay_words(&mut self, home: &impl Fn(BlockId) -> BlockData) {
        let Cache { regions, order, homes, at, generation, masks, fresh, .. } = self;
        let stamp = (*generation as u64) << 32;
        fresh.clear();
        for &(_, c, j) in order.iter() {
            let s = regions[c as usize].as_ref().expect("scanned above");
            for &(w, v) in s.tx_words(j as usize) {
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
    }
}

/// HOOP's incremental recoverer ([`super::IncrementalRecovery`]): recovery of the checker's
/// durable image through HOOP's scan cache ([`Cache`]), which is told of every durable write
/// ([`Recoverer::land`]); a recovery of an image the cache has not heard of (the recovered
/// image, or one with a prefix of a plan laid) goes through a copy of it. On the 1st, 8th,
/// 64th, ... use a whole recovery runs beside it and must agree. Not under Start-Gap, whose
/// view rewrites the log area behind the cache's back ([`super::for_format`]).
pub(crate) struct Recoverer {
    hoop: Cache,
    copy: Cache,
    uses: u64,
    /// The length, the redone transactions and the last write's block of the plan the cache's
    /// last recovery made, if it made one: [`Recoverer::same_again`] relies on being given
    /// that plan, and checks it by these.
    last: Option<(usize, u64, u64)>,
}

/// What [`Recoverer`] remembers of a plan (`Recoverer::last`).
fn mark(plan: Option<&crate::recovery::Plan>) -> Option<(usize, u64, u64)> {
    let p = plan?;
    Some((p.writes.len(), p.redone_txs, p.writes.last().map_or(u64::MAX, |(b, _)| b.0)))
}

const FORMAT: Option<LogFormat> = Some(LogFormat::Hoop);

impl Recoverer {
    /// Over `layout`, nothing scanned yet.
    pub(crate) fn new(layout: &Layout) -> Recoverer {
        Recoverer { hoop: Cache::new(layout), copy: Cache::default(), uses: 0, last: None }
    }
}

impl super::IncrementalRecovery for Recoverer {
    /// Block `b` of the durable image changed.
    #[inline]
    fn land(&mut self, layout: &Layout, b: BlockId, _img: &[u8]) {
        self.hoop.land(layout, b);
    }

    /// The durable image changed in ways [`Recoverer::land`] did not hear of: scan afresh.
    fn forget(&mut self, layout: &Layout) {
        self.hoop = Cache::new(layout);
        self.last = None;
    }

    /// Recovery of the durable image through the scan cache, its data blocks read as the
    /// overlay has them under it (the durable content) while `img`'s data area holds the last
    /// plan laid over it. Every use is a whole plan ([`super::Recovered::Plan`]); on the 1st,
    /// 8th, 64th, ... the engine runs a whole recovery of the durable image, which must agree
    /// (it alone can take its overlay away).
    fn recover(
        &mut self,
        layout: &Layout,
        img: &[u8],
        overlay: &Overlay,
        _changed: &mut Vec<(BlockId, Option<BlockId>)>,
    ) -> Option<super::Recovered> {
        let plan = recover_cached_with(layout, img, &mut self.hoop, |b| overlay.durable_in(img, b));
        self.uses += 1;
        self.last = mark(plan.as_ref().ok());
        Some(super::Recovered::Plan(plan, crate::crash::guard_due(self.uses, 3)))
    }

    /// The check of a crash during recovery through the scan cache, for a crash after
    /// `cut <= redo` of `plan`'s writes (all to the data area, in increasing block order, as
    /// HOOP's plans are) over the durable image whose home block `b` is what `overlay` has
    /// under it and whose log area is `img`'s: the second recovery, of that image with those
    /// writes made, runs through the cache with the image's home blocks read as it has them
    /// (the prefix's from `plan`, the others the durable content) and its log area, which the
    /// prefix leaves as it was, from `img`; nothing is written. True when it makes `plan`
    /// again: recovering from there then ends where the first recovery did, which is what the
    /// whole check would find. False, for the caller to check the whole way, when it makes
    /// another plan, when the prefix has another shape, and on the 1st, 8th, 64th, ... use of
    /// the cache (its guard). The prefix's blocks are reported to the cache as changed before
    /// this recovery and again after it, so that the next one reads them from the durable
    /// image. `plan` is the plan the cache's last recovery made (checked by its length,
    /// redone transactions and last block, false otherwise), so that a recovery that finds it
    /// again need not make it and compare ([`recover_cached_again`]).
    fn same_again(
        &mut self,
        layout: &Layout,
        img: &[u8],
        plan: &crate::recovery::Plan,
        (cut, redo): (usize, usize),
        overlay: &Overlay,
    ) -> bool {
        // `plan` must be the cache's last plan: a recovery that finds it again says so.
        if cut > redo || self.last != mark(Some(plan)) {
            return false;
        }
        let prefix = &plan.writes[..cut];
        if !prefix.windows(2).all(|w| w[0].0 .0 < w[1].0 .0) {
            return false;
        }
        for (b, _) in prefix {
            self.hoop.land(layout, *b);
        }
        // The recovery reads the prefix's blocks first, in its (increasing) order, as the cache
        // heard of them: the entry after the last one found is looked at before a search.
        let next = std::cell::Cell::new(0);
        let home = |b: BlockId| {
            let j = match prefix.get(next.get()) {
                Some((x, _)) if *x == b => next.get(),
                _ => match prefix.binary_search_by_key(&b.0, |(x, _)| x.0) {
                    Ok(j) => j,
                    Err(_) => return overlay.durable_in(img, b),
                },
            };
            next.set(j + 1);
            prefix[j].1
        };
        let again = recover_cached_again(layout, img, &mut self.hoop, home);
        self.uses += 1;
        let guard = crate::crash::guard_due(self.uses, 3);
        for (b, _) in prefix {
            self.hoop.land(layout, *b);
        }
        match again {
            // `plan` again, known without making it.
            Ok(None) => !guard,
            Ok(Some(p)) => {
                self.last = mark(Some(&p));
                !guard && p == *plan
            }
            Err(_) => {
                self.last = None;
                false
            }
        }
    }

    /// Recovery of an image the cache has not heard of, through a copy of the cache.
    fn recover_other(&mut self, layout: &Layout, img: &[u8]) -> Result<crate::recovery::Plan, String> {
        self.copy.clone_from(&self.hoop);
        let plan = recover_cached(layout, img, &mut self.copy);
        self.uses += 1;
        if crate::crash::guard_due(self.uses, 3) {
            let whole = crate::recovery::recover(FORMAT, layout, img);
            assert!(whole == plan, "crash checker: HOOP's scan cache disagrees with a whole recovery");
        }
        plan
    }
}
