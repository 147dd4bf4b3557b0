//! Per-cell program counters, bit-sliced: the 16-bit count of each cell is spread over 16 bit
//! planes, so one write adds its whole changed-bit mask to 64 cells with a ripple carry
//! (`plane[p] ^= carry; carry &= old plane[p]`), a few word operations instead of one increment
//! per programmed cell.
//!
//! Layout: two halves of 8 planes each (bits 0-7 and 8-15 of every count); the low half's data
//! planes in two dense arrays over the whole device, planes 0-1 (`low`) and planes 2-7 (`mid`).
//! - Planes 0-1 are 2 bytes of counters per data byte, allocated zeroed, advised for huge host
//!   pages and committed at the first write to a region, the whole region or, in a large one,
//!   the host huge page around the written page ([`Wear::first_write`]: the host's first touch
//!   of fresh memory is paid where a run writes only, and not page by page inside the
//!   simulation), and a write finds its counters by address alone (no pointer to chase, few
//!   host TLB misses). Block `k` (at byte `64k`) has its planes at words `16k .. 16k + 16`,
//!   plane-major: plane `p` of its 8 u64 lanes at `16k + 8p`, one 64-byte host line per plane.
//!   Flip cells (one per FNW word) in a second dense array: lane `L` (flip cells `64L .. 64L +
//!   63`) has its 8 planes at words `8L .. 8L + 8`, one host line.
//! - Planes 2-7 (6 bytes per data byte; block `k` at words `48k .. 48k + 48`, plane `p` at
//!   word `48k + 8(p - 2)`) are committed with a region committed whole, and otherwise a device
//!   page at a time on small host pages at the first carry out of plane 1 in that page (a
//!   cell's fourth program, [`Wear::mid_first_write`]), so that a short run, whose cells are
//!   programmed a few times, has the host zero only the few pages it carries into (three
//!   quarters of the low half's bytes).
//! - The high half is allocated per 4 KiB device page on the first carry out of its plane 7 (a
//!   cell past 255 programs, such as the log head's): the block-plane-major layout of 64 words
//!   per block restricted to the page (data planes at the byte offset in the page, then the
//!   page's flip lanes).
//!
//! A byte per device page says whether the page was written since the counters were last zeroed,
//! and one whether its planes 2-7 were, so that zeroing and the end-of-run figures visit only
//! those pages; a word per page says which of its blocks' planes 2-7 a carry reached, so that the
//! end-of-run figures read only those (planes 2-7 are three quarters of the low half's bytes, and
//! reading them was most of a long run's end-of-run scan).
//!
//! Exact past 65 535: a carry out of the top plane wraps the cell to 0 and adds one to the cell's
//! entry in a side map of wraps (rare: hot metadata such as a log head). Totals per region are
//! kept as writes happen; maxima and histograms are computed plane-wise when reported.

use std::collections::BTreeMap;

const PAGE_BYTES: u64 = 4096;
/// Planes of a whole count.
const PLANES: usize = 16;
/// Planes of one half.
const HALF: usize = 8;
/// u64 lanes of one block's plane.
const LANES: usize = 8;
/// Planes of the `low` array (planes 0-1) and of the `mid` array (planes 2-7).
const LOW: usize = 2;
const MID: usize = HALF - LOW;
/// u64 words of one block's planes in `low` and in `mid`.
const LOW_WORDS: usize = LOW * LANES;
const MID_WORDS: usize = MID * LANES;
/// u64 words of one page's planes in `low` and in `mid` (64 blocks).
const PAGE_LOW_WORDS: usize = 64 * LOW_WORDS;
const PAGE_MID_WORDS: usize = 64 * MID_WORDS;
/// u64 words of one block's half: 8 planes x 8 lanes.
const BLOCK_WORDS: usize = HALF * LANES;
/// u64 words of data planes per page and half: 64 blocks x 8 planes x 8 lanes.
const DATA_WORDS: usize = 64 * BLOCK_WORDS;
/// Block writes whose counter updates wait before being applied together ([`Wear::program_block`]).
const BATCH: usize = 1024;
/// How many waiting updates ahead of the one being applied have their counter lines requested
/// from host memory.
const BATCH_AHEAD: usize = 16;
/// An update whose carry will leave plane 1 (its changed cells set in planes 0 and 1, which
/// were requested `BATCH_AHEAD` updates before and have arrived by then) requests its planes 2
/// to `1 + MID_AHEAD_PLANES` this many updates before it is applied (a hint; no effect on
/// results). Long runs of B+tree, whose hot blocks' counts grow, carry past plane 1 often, and
/// the host waited on each of those planes: with the hint, B+tree with the device ran 8 - 14 %
/// faster at 100 000 transactions and 2 - 5 % at 300 000 on an Emerald Rapids Xeon, SPS the same
/// (docs/performance.md, PCM mode).
const MID_AHEAD: usize = 8;
/// Planes requested past plane 1 by that hint: 4 gave B+tree baseline 5 % more than 2, 6 no more
/// than 4.
const MID_AHEAD_PLANES: usize = 4;
/// Flip cells' ids are data-cell ids with this bit set (in the map of wraps).
const FLIP_ID: u64 = 1 << 63;
/// Page states: not written since the counters were last zeroed (all zero), written since, and
/// never written (all zero, its low half not yet committed: [`Wear::first_write`]).
const CLEAN: u8 = 0;
const DIRTY: u8 = 1;
const FRESH: u8 = 2;
/// `Wear::page_region` values: no region holds the page; more than one may.
const NO_REGION: u8 = u8::MAX;
const MIXED_PAGE: u8 = u8::MAX - 1;
/// Regions of at most this many pages (64 MiB of device, 512 MiB of low-half counters: the log
/// area and the data area of every one-core workload with default settings, up to SQLite's
/// 48 MiB) have their counters committed whole at the first write to one of their pages when
/// [`Wear::commit_regions_whole`] asked for it (`bench`: the first touch then falls in the
/// warm-up, not in the measured region); otherwise, and in larger regions (the data areas of
/// multi-core workloads), a host huge page at a time ([`Wear::first_write`]). Committing the
/// one-core hash table's and B+tree's data areas a huge page at a time left some of it inside
/// `bench`'s measured region (PCM mode slower there in 7 of 8 pairs, by up to 12 %); committing
/// every region whole cost `reproduce --quick` 7 % of its CPU samples, as a short run writes a
/// small part of its regions.
const WHOLE_REGION_PAGES: usize = 16384;

/// Wear figures of one region.
#[derive(Clone, Debug, Default, serde::Serialize, PartialEq)]
pub struct RegionWear {
    pub name: &'static str,
    pub total_bit_updates: u64,
    pub max_bit_updates: u64,
    /// `histogram[k]`: cells programmed between 2^k and 2^(k+1) - 1 times (cells never
    /// programmed are not counted).
    pub histogram: Vec<u64>,
}

/// The device's cell counters.
pub struct Wear {
    word_bits: u64,
    /// Flip lanes (64 flip cells each) per page: `512 / word_bits`.
    flip_words: usize,
    /// Planes 0-1 of every data cell (see the module comment).
    low: Vec<u64>,
    /// Planes 2-7 of every data cell.
    mid: Vec<u64>,
    /// Planes 0-7 of every flip cell.
    flip_low: Vec<u64>,
    /// Per page: planes 8-15 of its data and flip cells, once needed.
    high: Vec<Option<Box<[u64]>>>,
    /// Per page: `FRESH`, `CLEAN` or `DIRTY` (planes 0-1 and the flip cells).
    pages: Vec<u8>,
    /// Per page: the same for planes 2-7 of its data cells (`DIRTY` only in a `DIRTY` page).
    mid_pages: Vec<u8>,
    /// Per page: bit `b` set when a carry has reached planes 2-7 of the page's block `b` since
    /// the counters were zeroed (a block whose bit is clear has those planes zero), so that the
    /// end-of-run figures read planes 2-7 of those blocks only ([`Wear::scan`]).
    mid_blocks: Vec<u64>,
    /// Cell id (data bit index, or `FLIP_ID | word index`) -> times its count wrapped 65 536.
    wraps: BTreeMap<u64, u64>,
    regions: Vec<(&'static str, u64, u64, u64)>,
    /// Regions of at most this many pages are committed whole at their first write
    /// ([`Wear::first_write`]): 0, or [`WHOLE_REGION_PAGES`] once [`Wear::commit_regions_whole`].
    whole_region_pages: usize,
    /// Per page: the index of the region holding it whole, `NO_REGION` for none, or
    /// `MIXED_PAGE` where regions start or end inside it (then they are searched).
    page_region: Vec<u8>,
    pub total_bit_updates: u64,
    /// Counter planes of each waiting update requested ahead ([`batch_planes`]).
    batch_planes: usize,
    /// Block updates not yet applied to the planes, in write order (see [`Wear::program_block`]);
    /// at most `BATCH`.
    pending: Vec<PendingBlock>,
}

/// One block write's cells, waiting in the batch.
#[derive(Copy, Clone, Default)]
struct PendingBlock {
    addr: u64,
    changed: [u64; 8],
    flips: u8,
}

/// Add `carry` (a mask of cells) to the bit-sliced counters `planes[first + p * stride]`, `p` in
/// `0 .. n`; returns the cells that carried out of the top plane.
#[inline]
fn add(planes: &mut [u64], first: usize, stride: usize, n: usize, mut carry: u64) -> u64 {
    for p in 0..n {
        let x = &mut planes[first + p * stride];
        let old = *x;
        *x = old ^ carry;
        carry &= old;
        if carry == 0 {
            return 0;
        }
    }
    carry
}

/// Add the 8 lane masks `carry` to one block's planes (`W / 8` planes of 8 lanes), plane by plane
/// (one host line per plane); `carry` is left with what carried out of the top plane, returned
/// OR-ed.
#[inline(always)]
pub(super) fn add_block<const W: usize>(planes: &mut [u64; W], carry: &mut [u64; LANES]) -> u64 {
    let mut any = 0;
    for plane in planes.chunks_exact_mut(LANES) {
        any = 0;
        for (x, c) in plane.iter_mut().zip(carry.iter_mut()) {
            let old = *x;
            *x = old ^ *c;
            *c &= old;
            any |= *c;
        }
        if any == 0 {
            break;
        }
    }
    any
}

/// Planes of a block's low half requested from host memory ahead of its carries when they are
/// added at once (retiring worn cells, [`Wear::prefetch`]), for a write to a random place:
/// planes 0 and 1 (most writes reach plane 1; a plane fetched on demand costs a
/// whole host memory latency). Fetching 4 wasted host memory bandwidth on an Intel Xeon with
/// AVX-512: SPS h-wal 5.4 M accesses/s with 4, 6.7 M with 2 (an older AMD EPYC host without
/// AVX-512 had run faster with 4). A fit to the hosts measured, to re-measure on another.
const PREFETCH_RANDOM: usize = 2;
/// The same for a write in a run of consecutive blocks (a log): plane 0 only; the host's own
/// prefetcher follows the stream of plane-1 lines (7.2 M with 1; baseline, whose writes are all
/// random, loses 15 % with 1).
const PREFETCH_IN_ORDER: usize = 1;
/// Planes requested for each update of the batch, `BATCH_AHEAD` updates before it is applied,
/// a fit to the hosts measured (docs/performance.md, PCM mode): 3 on a Zen 5 EPYC (SPS with the
/// device 5 - 8 % faster than with 2, 4 no better), 2 elsewhere: an Emerald Rapids Xeon (SPS 9 -
/// 11 % faster than with 3 on every block path, B+tree the same; a third plane is read by about
/// one write in ten) and a Zen 3 EPYC (SPS baseline 44 - 48 % of plain against 40 - 43 % with 3,
/// h-wal 43 - 46 % against 39 - 41 %, B+tree the same), where `perf` put most of the batch's
/// time on the third plane's prefetch instruction.
fn batch_planes() -> usize {
    match crate::hostmem::host_amd_family() {
        Some(family) if family >= 0x1A => 3,
        _ => 2,
    }
}

/// Ask the host for the first `planes` planes (host lines) of block `k`'s low half.
#[inline(always)]
fn prefetch_planes(low: &[u64], mid: &[u64], k: usize, planes: usize) {
    for p in 0..planes {
        if p < LOW {
            crate::hostmem::prefetch(&low[k * LOW_WORDS + p * LANES]);
        } else {
            crate::hostmem::prefetch(&mid[k * MID_WORDS + (p - LOW) * LANES]);
        }
    }
}

/// [`add_block`] on the block path `V` (the vector bodies where the caller runs on them).
#[inline(always)]
fn add_planes<const V: u8, const W: usize>(planes: &mut [u64; W], carry: &mut [u64; LANES]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `V` names vectors only on the paths of `Pcm::write_block_avx2` and
    // `Pcm::write_block_avx512`, whose callers checked that the host has them.
    return match V {
        super::AVX512 => unsafe { super::avx512::add_block(planes, carry) },
        super::AVX2 => unsafe { super::avx2::add_block(planes, carry) },
        _ => add_block(planes, carry),
    };
    #[cfg(not(target_arch = "x86_64"))]
    add_block(planes, carry)
}

/// Histogram (by highest set plane) and maximum of the cells seen so far.
#[derive(Default)]
struct LaneAcc {
    histogram: [u64; PLANES],
    max: u64,
}

/// Add `N` lanes of cells (`x[p][l]`: bit `i` is bit `p` of the count of cell `i` of lane `l`;
/// planes from `x.len()` up are zero)
/// to a histogram by highest set plane and to a maximum, plane-wise: a cell falls in bucket `p`
/// when `p` is its highest set plane; the maximum is found by narrowing the candidates from the
/// highest nonzero plane down, and only when it could exceed the maximum so far.
#[inline(always)]
fn group_figures<const N: usize>(x: &[[u64; N]], acc: &mut LaneAcc) {
    let Some(top) = (0..x.len()).rev().find(|&p| x[p].iter().any(|&v| v != 0)) else { return };
    let mut higher = [0u64; N];
    for p in (0..=top).rev() {
        let mut n = 0;
        for (h, &v) in higher.iter_mut().zip(&x[p]) {
            n += (v & !*h).count_ones() as u64;
            *h |= v;
        }
        acc.histogram[p] += n;
    }
    if (2u64 << top) - 1 <= acc.max {
        return;
    }
    let (mut cand, mut max) = (x[top], 1u64 << top);
    for p in (0..top).rev() {
        let mut t = cand;
        let mut any = 0;
        for (c, &v) in t.iter_mut().zip(&x[p]) {
            *c &= v;
            any |= *c;
        }
        if any != 0 {
            cand = t;
            max |= 1 << p;
        }
    }
    acc.max = acc.max.max(max);
}

/// Cells among the 64 whose ids start at `id0` that have wrapped (bit i: cell id0 + i), from the
/// sorted wrapped ids, with a cursor that only moves forward (callers ask in increasing `id0`).
#[inline]
fn wrapped_in(ids: &[u64], at: &mut usize, id0: u64) -> u64 {
    while ids.get(*at).is_some_and(|&id| id < id0) {
        *at += 1;
    }
    ids[*at..].iter().take_while(|&&id| id < id0 + 64).fold(0, |m, &id| m | 1 << (id - id0))
}

/// Set bits of a word, lowest first.
struct BitIter(u64);

impl Iterator for BitIter {
    type Item = u32;
    #[inline]
    fn next(&mut self) -> Option<u32> {
        (self.0 != 0).then(|| {
            let i = self.0.trailing_zeros();
            self.0 &= self.0 - 1;
            i
        })
    }
}

impl Wear {
    pub fn new(bytes: u64, word_bits: u64, regions: &[(&'static str, u64, u64)]) -> Wear {
        Wear::try_new(bytes, word_bits, regions).unwrap_or_else(|r| panic!("{r}"))
    }

    /// [`Wear::new`], or [`Refused`](crate::hostmem::Refused) if the host does not give the
    /// counters' memory (8 bytes of host address space per device byte and more for the flip
    /// cells, provided as the run writes).
    pub fn try_new(
        bytes: u64,
        word_bits: u64,
        regions: &[(&'static str, u64, u64)],
    ) -> Result<Wear, crate::hostmem::Refused> {
        let pages = bytes.div_ceil(PAGE_BYTES) as usize;
        let flip_words = (512 / word_bits) as usize;
        Ok(Wear {
            word_bits,
            flip_words,
            low: crate::hostmem::try_zeroed(pages * PAGE_LOW_WORDS)?,
            mid: crate::hostmem::try_zeroed_small_pages(pages * PAGE_MID_WORDS)?,
            flip_low: crate::hostmem::try_zeroed(pages * flip_words * HALF)?,
            high: (0..pages).map(|_| None).collect(),
            pages: vec![FRESH; pages],
            mid_pages: vec![FRESH; pages],
            mid_blocks: vec![0; pages],
            wraps: BTreeMap::new(),
            regions: regions.iter().map(|&(n, s, l)| (n, s, l, 0)).collect(),
            whole_region_pages: 0,
            batch_planes: batch_planes(),
            page_region: (0..pages as u64)
                .map(|p| {
                    // The first region touching the page counts its bytes (as the search does)
                    // if it holds the page whole.
                    let (first, end) = (p * PAGE_BYTES, (p + 1) * PAGE_BYTES);
                    match regions.iter().position(|&(_, s, l)| s < end && first < s + l) {
                        None => NO_REGION,
                        Some(i)
                            if i < MIXED_PAGE as usize
                                && regions[i].1 <= first
                                && end <= regions[i].1 + regions[i].2 =>
                        {
                            i as u8
                        }
                        Some(_) => MIXED_PAGE,
                    }
                })
                .collect(),
            total_bit_updates: 0,
            pending: Vec::with_capacity(BATCH),
        })
    }

    /// Commit each region of at most `WHOLE_REGION_PAGES` pages whole at its first write
    /// instead of a host huge page at a time: the same counts, with the host's first touch of a
    /// region's counters in one place (for `bench`, in the warm-up rather than in the measured
    /// region; [`crate::runner::RunSpec::prefault`]).
    pub fn commit_regions_whole(&mut self) {
        self.whole_region_pages = WHOLE_REGION_PAGES;
    }

    /// u64 words of one page's half (data and flip cells).
    fn page_words(&self) -> usize {
        DATA_WORDS + HALF * self.flip_words
    }

    /// Count one program of each cell of word `w` set in `changed`, and of its flip cell, in
    /// the cells' counters and in the totals.
    pub fn program_word(&mut self, w: u64, changed: u64, flip: bool) {
        self.program_cells(w, changed, flip);
        self.account(w * self.word_bits / 8, changed.count_ones() as u64 + flip as u64);
    }

    /// Add `n` programmed cells to the totals of the device and of the region holding `byte`.
    #[inline]
    pub fn account(&mut self, byte: u64, n: u64) {
        self.total_bit_updates += n;
        match self.page_region.get((byte / PAGE_BYTES) as usize) {
            Some(&i) if i < MIXED_PAGE => self.regions[i as usize].3 += n,
            Some(&MIXED_PAGE) => {
                if let Some(r) = self.regions.iter_mut().find(|r| byte >= r.1 && byte < r.1 + r.2) {
                    r.3 += n;
                }
            }
            _ => {}
        }
    }

    /// Index of the region holding `byte` (as [`Wear::account`] finds it), if any.
    pub fn region_of(&self, byte: u64) -> Option<usize> {
        match self.page_region.get((byte / PAGE_BYTES) as usize) {
            Some(&i) if i < MIXED_PAGE => Some(i as usize),
            Some(&MIXED_PAGE) => self.regions.iter().position(|r| byte >= r.1 && byte < r.1 + r.2),
            _ => None,
        }
    }

    /// Ask the host to bring the first planes of block `addr`'s counters into its cache (a hint;
    /// no effect on results); `in_order`: the block is one of a run written in order.
    #[inline]
    pub fn prefetch(&self, addr: u64, in_order: bool) {
        let k = addr as usize / 64;
        if (k + 1) * LOW_WORDS <= self.low.len() {
            let planes = if in_order { PREFETCH_IN_ORDER } else { PREFETCH_RANDOM };
            prefetch_planes(&self.low, &self.mid, k, planes);
        }
    }

    /// Count the programs of one aligned 64-byte block with 64-bit words: data cells set in
    /// `changed` (one mask per word), flip cells set in `flips` (bit i: word i). No totals.
    ///
    /// The update waits in a batch of `BATCH` block writes (80 bytes each, written in order),
    /// applied together when the batch is full: a loop that only updates counters, each
    /// update's host lines requested `BATCH_AHEAD` updates before, so that the host has many of
    /// the (cold) counter lines in flight at once; applied one write at a time between the
    /// simulation's other work, the host waited for each log write's counter lines
    /// (docs/performance.md, PCM mode). Counts are sums, so the order of application does not change them; every reader
    /// applies the waiting updates first ([`Wear::flush`]).
    #[inline]
    pub fn program_block<const V: u8>(&mut self, addr: u64, changed: &[u64; 8], flips: u8) {
        *self.queue(addr) = *changed;
        self.queued::<V>(flips);
    }

    /// [`Wear::program_block`] in two steps, so that the caller writes the masks in place (no
    /// copy): the batch's next entry, for block `addr`, whose changed cells the caller writes
    /// before it calls [`Wear::queued`].
    #[inline(always)]
    pub fn queue(&mut self, addr: u64) -> &mut [u64; 8] {
        debug_assert!(addr.is_multiple_of(64) && self.word_bits == 64);
        self.pending.push(PendingBlock { addr, changed: [0; 8], flips: 0 });
        &mut self.pending.last_mut().expect("just pushed").changed
    }

    /// The entry [`Wear::queue`] gave is written; its changed flip cells are `flips`.
    #[inline(always)]
    pub fn queued<const V: u8>(&mut self, flips: u8) {
        self.pending.last_mut().expect("an entry from `queue`").flips = flips;
        if self.pending.len() == BATCH {
            self.apply_pending::<V>();
        }
    }

    /// Apply the waiting block updates, in write order.
    #[inline(never)]
    fn apply_pending<const V: u8>(&mut self) {
        let n = self.pending.len();
        for i in 0..n {
            if let Some(q) = self.pending.get(i + BATCH_AHEAD) {
                let a = q.addr as usize;
                prefetch_planes(&self.low, &self.mid, a / 64, self.batch_planes);
                if q.flips != 0 {
                    crate::hostmem::prefetch(&self.flip_low[a / 8 / 64 * HALF]);
                }
            }
            if let Some(q) = self.pending.get(i + MID_AHEAD) {
                // Planes 2 - 7 are committed (DIRTY) only once a carry has reached them; an
                // earlier update of the same block still waiting may change planes 0 - 1, so this
                // is a guess, as a hint may be.
                let (a, k) = (q.addr as usize, q.addr as usize / 64);
                if self.mid_pages[a / PAGE_BYTES as usize] == DIRTY {
                    let low = &self.low[k * LOW_WORDS..(k + 1) * LOW_WORDS];
                    let reach = (0..LANES).fold(0, |acc, l| acc | q.changed[l] & low[l] & low[LANES + l]);
                    if reach != 0 {
                        for p in 0..MID_AHEAD_PLANES {
                            crate::hostmem::prefetch(&self.mid[k * MID_WORDS + p * LANES]);
                        }
                    }
                }
            }
            let p = self.pending[i];
            self.apply_block::<V>(p.addr, &p.changed, p.flips);
        }
        self.pending.clear();
    }

    /// Apply the waiting block updates.
    pub fn flush(&mut self) {
        self.apply_pending::<{ super::PORTABLE }>();
    }

    /// Count the programs of one block at once (as [`Wear::program_block`] does later): for a
    /// caller that reads the counts right after (retiring worn cells).
    #[inline(always)]
    pub(super) fn apply_block<const V: u8>(&mut self, addr: u64, changed: &[u64; 8], flips: u8) {
        let a = addr as usize;
        self.written(a / PAGE_BYTES as usize);
        let mut carry = *changed;
        let k = a / 64;
        let planes: &mut [u64; LOW_WORDS] =
            (&mut self.low[k * LOW_WORDS..(k + 1) * LOW_WORDS]).try_into().expect("one block");
        if add_planes::<V, LOW_WORDS>(planes, &mut carry) != 0 {
            self.carry_block_mid::<V>(addr, &mut carry);
        }
        if flips != 0 {
            let f = a / 8;
            let lane = f / 64;
            let out = add(&mut self.flip_low, lane * HALF, 1, HALF, (flips as u64) << (f % 64));
            if out != 0 {
                self.carry_flips_high(lane, out);
            }
        }
    }

    /// Carries of a block's data cells out of plane 1: into planes 2-7 (committed at the page's
    /// first such carry), and past them into the high half.
    #[inline(never)]
    fn carry_block_mid<const V: u8>(&mut self, addr: u64, carry: &mut [u64; 8]) {
        let (a, page) = (addr as usize, (addr / PAGE_BYTES) as usize);
        if self.mid_pages[page] != DIRTY {
            self.mid_first_write(page);
        }
        let k = a / 64;
        self.mid_blocks[page] |= 1 << (k % 64);
        let planes: &mut [u64; MID_WORDS] =
            (&mut self.mid[k * MID_WORDS..(k + 1) * MID_WORDS]).try_into().expect("one block");
        if add_planes::<V, MID_WORDS>(planes, carry) != 0 {
            self.carry_block_high(addr, carry);
        }
    }

    /// Carries of a block's data cells out of plane 7: into the page's high half, and past it
    /// into the map of wraps.
    #[cold]
    fn carry_block_high(&mut self, addr: u64, carry: &mut [u64; 8]) {
        let (page, in_page) = ((addr / PAGE_BYTES) as usize, (addr % PAGE_BYTES) as usize);
        let high: &mut [u64; BLOCK_WORDS] =
            (&mut self.high_half(page)[in_page..in_page + BLOCK_WORDS]).try_into().expect("one block");
        if add_block(high, carry) != 0 {
            for (lane, &c) in carry.iter().enumerate() {
                for i in BitIter(c) {
                    *self.wraps.entry(addr * 8 + lane as u64 * 64 + i as u64).or_default() += 1;
                }
            }
        }
    }

    /// Carries `out` of flip lane `lane` out of plane 7: into the high half, and past it into
    /// the map of wraps.
    #[cold]
    fn carry_flips_high(&mut self, lane: usize, out: u64) {
        let (page, fw) = (lane / self.flip_words, lane % self.flip_words);
        let wrapped = add(self.high_half(page), DATA_WORDS + fw * HALF, 1, HALF, out);
        for i in BitIter(wrapped) {
            *self.wraps.entry(FLIP_ID | (lane as u64 * 64 + i as u64)).or_default() += 1;
        }
    }

    /// Mark page `page` written (before its counters change).
    #[inline(always)]
    fn written(&mut self, page: usize) {
        if self.pages[page] != DIRTY {
            self.first_write(page);
        }
    }

    /// The first write to a page since the counters were zeroed. If the page was never written,
    /// commit planes 0-1 and the flip cells of the pages around it first: the pages whose
    /// counters lie in the same host huge page as the page's ([`Wear::host_page_span`]) within
    /// each region holding it, or every page of a region of at most `whole_region_pages` pages
    /// ([`Wear::commit_regions_whole`], which commits that region's planes 2-7 too); the page
    /// alone outside every region. The host's first touch of fresh memory (page faults, zeroing,
    /// and under a hypervisor its own first touch) is paid only where the run writes, a host huge
    /// page at a time, which is what the kernel zeroes at the first touch of any byte of it
    /// anyway: a short run writes a small part of a large data area (a few per cent of the
    /// 8-core hash table's 130 MiB). A region committed whole pays it at once, so not inside a
    /// measured region that merely sweeps on through a log the warm-up already wrote. A page not
    /// yet committed was never written: its counters are zero, and committing writes zeros.
    #[cold]
    #[inline(never)]
    fn first_write(&mut self, page: usize) {
        if self.pages[page] == FRESH {
            let flips = self.flip_words * HALF;
            for (span, whole) in self.spans(page, self.host_page_span(page)) {
                if whole {
                    crate::hostmem::advise_huge_slice(
                        &self.mid[span.start * PAGE_MID_WORDS..span.end * PAGE_MID_WORDS],
                    );
                }
                for q in span {
                    if self.pages[q] == FRESH {
                        self.pages[q] = CLEAN;
                        let (l, f) = (q * PAGE_LOW_WORDS, q * flips);
                        crate::hostmem::commit_zeroed(&mut self.low[l..l + PAGE_LOW_WORDS], 0);
                        crate::hostmem::commit_zeroed(&mut self.flip_low[f..f + flips], 0);
                    }
                    if whole && self.mid_pages[q] == FRESH {
                        self.mid_pages[q] = CLEAN;
                        let m = q * PAGE_MID_WORDS;
                        crate::hostmem::commit_zeroed(&mut self.mid[m..m + PAGE_MID_WORDS], 0);
                    }
                }
            }
        }
        self.pages[page] = DIRTY;
    }

    /// The first carry out of plane 1 in a page since the counters were zeroed: as
    /// [`Wear::first_write`], for planes 2-7, but a page at a time (a page whose planes 0-1 were
    /// committed whole with its region had these committed with them, on host huge pages). Few
    /// pages of a short run are programmed four times in a cell, and they lie far apart: with a
    /// host huge page at a time (85 device pages' planes 2-7), an 8-core red-black tree run
    /// under PCM (`run -w rbtree -p h-wal --txs 5000 --warmup-txs 2000`, 8 cores and trees) had
    /// 4 748 pages' planes committed, 111 MiB zeroed by the host, for carries into 250, and
    /// spent a quarter of its host time there.
    #[cold]
    #[inline(never)]
    fn mid_first_write(&mut self, page: usize) {
        if self.mid_pages[page] == FRESH {
            for (span, _) in self.spans(page, page..page + 1) {
                for q in span {
                    if self.mid_pages[q] == FRESH {
                        self.mid_pages[q] = CLEAN;
                        let m = q * PAGE_MID_WORDS;
                        crate::hostmem::commit_zeroed(&mut self.mid[m..m + PAGE_MID_WORDS], 0);
                    }
                }
            }
        }
        self.mid_pages[page] = DIRTY;
    }

    /// The pages to commit with `page`: in each region holding it, the whole region if it has at
    /// most `whole_region_pages` pages (`true`), else its pages within `near` (`false`); the
    /// page alone if no region holds it.
    fn spans(&self, page: usize, near: std::ops::Range<usize>) -> Vec<(std::ops::Range<usize>, bool)> {
        let (first, end) = (page as u64 * PAGE_BYTES, (page as u64 + 1) * PAGE_BYTES);
        let n = self.pages.len();
        let mut spans: Vec<_> = (self.regions.iter())
            .filter(|r| r.1 < end && first < r.1 + r.2)
            .map(|r| {
                let whole = (r.1 / PAGE_BYTES) as usize..((r.1 + r.2).div_ceil(PAGE_BYTES) as usize).min(n);
                if whole.len() <= self.whole_region_pages {
                    (whole, true)
                } else {
                    (whole.start.max(near.start)..whole.end.min(near.end), false)
                }
            })
            .collect();
        if spans.is_empty() {
            spans.push((page..page + 1, false));
        }
        spans
    }

    /// The pages whose planes 0-1 lie wholly in the host huge page ([`crate::hostmem::HUGE`])
    /// holding the first of `page`'s, and `page` itself (whose planes may end in the next huge
    /// page): committing them faults in that one huge page (where the kernel backs the counters
    /// with huge pages: [`crate::hostmem::zeroed`]).
    fn host_page_span(&self, page: usize) -> std::ops::Range<usize> {
        let (bytes, huge) = (PAGE_LOW_WORDS * 8, crate::hostmem::HUGE);
        let base = self.low.as_ptr() as usize;
        let window = (base + page * bytes) / huge * huge;
        let first = (window.max(base) - base).div_ceil(bytes);
        let end = ((window + huge - base) / bytes).clamp(page + 1, self.pages.len());
        first.min(page)..end
    }

    /// Pages whose planes 0-1 are committed (written, or committed with one that was).
    #[cfg(test)]
    pub(super) fn committed_pages(&self) -> Vec<usize> {
        (0..self.pages.len()).filter(|&p| self.pages[p] != FRESH).collect()
    }

    /// Pages whose planes 2-7 are committed.
    #[cfg(test)]
    pub(super) fn committed_mid_pages(&self) -> Vec<usize> {
        (0..self.pages.len()).filter(|&p| self.mid_pages[p] != FRESH).collect()
    }

    /// Device pages whose planes 0-1 fill one host huge page.
    #[cfg(test)]
    pub(super) const PAGES_PER_HUGE: usize = crate::hostmem::HUGE / (PAGE_LOW_WORDS * 8);

    /// [`WHOLE_REGION_PAGES`], for the tests.
    #[cfg(test)]
    pub(super) const WHOLE_REGION_PAGES: usize = WHOLE_REGION_PAGES;

    /// The high half of a page's counters, allocated (zero) on first use.
    fn high_half(&mut self, page: usize) -> &mut [u64] {
        let words = self.page_words();
        self.high[page].get_or_insert_with(|| vec![0u64; words].into_boxed_slice())
    }

    /// [`Wear::program_word`] without the totals (the caller accounts a whole write at once).
    #[inline]
    pub fn program_cells(&mut self, w: u64, changed: u64, flip: bool) {
        if changed == 0 && !flip {
            return;
        }
        let byte = w * self.word_bits / 8;
        let page = (byte / PAGE_BYTES) as usize;
        self.written(page);
        if changed != 0 {
            let (k, lane) = ((byte / 64) as usize, (byte % 64 / 8) as usize);
            let out = add(&mut self.low, k * LOW_WORDS + lane, LANES, LOW, changed << (byte % 8 * 8));
            if out != 0 {
                if self.mid_pages[page] != DIRTY {
                    self.mid_first_write(page);
                }
                self.mid_blocks[page] |= 1 << (k % 64);
                let out = add(&mut self.mid, k * MID_WORDS + lane, LANES, MID, out);
                if out != 0 {
                    let in_page = (byte % PAGE_BYTES) as usize / 64 * BLOCK_WORDS + lane;
                    for i in BitIter(add(self.high_half(page), in_page, LANES, HALF, out)) {
                        *self.wraps.entry((byte & !7) * 8 + i as u64).or_default() += 1;
                    }
                }
            }
        }
        if flip {
            let lane = (w / 64) as usize;
            let out = add(&mut self.flip_low, lane * HALF, 1, HALF, 1 << (w % 64));
            if out != 0 {
                self.carry_flips_high(lane, out);
            }
        }
    }

    /// Programs of one cell: data cell `bit` of the device (byte * 8 + bit), or with `flip` the
    /// flip cell of the word holding that bit.
    pub fn count(&mut self, bit: u64, flip: bool) -> u64 {
        self.flush();
        let id = if flip { FLIP_ID | (bit / self.word_bits) } else { bit };
        self.count_planes(id) + (self.wraps.get(&id).copied().unwrap_or(0) << PLANES)
    }

    /// The planes' part (count modulo 65 536) of cell `id`.
    fn count_planes(&self, id: u64) -> u64 {
        // Bits `0 .. n` of the count from `h[first + p * stride]`, bit `i`.
        let planes = |h: &[u64], first: usize, stride: usize, n: usize, i: usize| {
            (0..n).fold(0u64, |v, p| v | (h[first + p * stride] >> i & 1) << p)
        };
        if id & FLIP_ID != 0 {
            let w = (id & !FLIP_ID) as usize;
            let (lane, page, i) = (w / 64, w / 64 / self.flip_words, w % 64);
            let high_first = DATA_WORDS + lane % self.flip_words * HALF;
            return planes(&self.flip_low, lane * HALF, 1, HALF, i)
                | self.high[page].as_ref().map_or(0, |h| planes(h, high_first, 1, HALF, i)) << HALF;
        }
        let (byte, i) = ((id / 8) as usize, (id % 64) as usize);
        let (k, lane, page) = (byte / 64, byte % 64 / 8, byte / PAGE_BYTES as usize);
        let mut v = planes(&self.low, k * LOW_WORDS + lane, LANES, LOW, i);
        // Planes 2-7 of a page never carried into are zero (and not read: reading would map
        // the host's zero page there).
        if self.mid_pages[page] != FRESH {
            v |= planes(&self.mid, k * MID_WORDS + lane, LANES, MID, i) << LOW;
        }
        let high_first = byte % PAGE_BYTES as usize / 64 * BLOCK_WORDS + lane;
        v | self.high[page].as_ref().map_or(0, |h| planes(h, high_first, LANES, HALF, i)) << HALF
    }

    /// Wear of each region: totals, maximum, histogram.
    pub fn regions(&mut self) -> Vec<RegionWear> {
        self.flush();
        self.regions.iter().map(|&(name, start, len, total)| self.region(name, start, len, total)).collect()
    }

    fn region(&self, name: &'static str, start: u64, len: u64, total: u64) -> RegionWear {
        let mut r = RegionWear { name, total_bit_updates: total, max_bit_updates: 0, histogram: vec![0; 40] };
        let first_page = (start / PAGE_BYTES) as usize;
        let end_page = ((start + len).div_ceil(PAGE_BYTES) as usize).min(self.pages.len());
        let acc = self.scan(first_page..end_page);
        r.max_bit_updates = acc.max;
        for (h, a) in r.histogram.iter_mut().zip(acc.histogram) {
            *h += a;
        }
        // Cells that wrapped past 65 535, one by one.
        for &id in self.wraps.keys() {
            let byte = if id & FLIP_ID != 0 { (id & !FLIP_ID) * self.word_bits / 8 } else { id / 8 };
            if byte >= start && byte < start + len {
                let v = self.count_planes(id) + (self.wraps[&id] << PLANES);
                r.max_bit_updates = r.max_bit_updates.max(v);
                r.histogram[63 - v.leading_zeros() as usize] += 1;
            }
        }
        while r.histogram.last() == Some(&0) {
            r.histogram.pop();
        }
        r
    }

    /// Histogram and maximum of the planes' part of the cells of `pages` that never wrapped,
    /// with the host's population count instruction where it has one (same result).
    fn scan(&self, pages: std::ops::Range<usize>) -> LaneAcc {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("popcnt") {
            // SAFETY: the host has the feature `scan_popcnt` is compiled for (checked above).
            return unsafe { self.scan_popcnt(pages) };
        }
        self.scan_pages(pages)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn scan_popcnt(&self, pages: std::ops::Range<usize>) -> LaneAcc {
        self.scan_pages(pages)
    }

    /// [`Wear::scan`]: only pages written since the counters were zeroed, and of their blocks
    /// only the planes that can be nonzero (planes 2-7 of a block a carry reached, the high half
    /// of a page that has one); a cell in bucket `p` when `p` is its highest set plane.
    #[inline(always)]
    fn scan_pages(&self, pages: std::ops::Range<usize>) -> LaneAcc {
        let ids: Vec<u64> = self.wraps.keys().copied().collect();
        let (mut data_at, mut flip_at) = (0, ids.partition_point(|&id| id & FLIP_ID == 0));
        let mut acc = LaneAcc::default();
        // The planes of one block; each block fills those it passes on.
        let mut x = [[0u64; LANES]; PLANES];
        for page in pages {
            if self.pages[page] != DIRTY {
                continue;
            }
            let high = self.high[page].as_deref();
            // Nonzero only in a page whose planes 2-7 are `DIRTY` (set after, cleared with, that).
            let mid_blocks = self.mid_blocks[page];
            let page_byte = page * PAGE_BYTES as usize;
            for block in 0..64 {
                let base = page_byte + block * 64;
                let k = base / 64;
                let low = &self.low[k * LOW_WORDS..(k + 1) * LOW_WORDS];
                let mid = (mid_blocks >> block & 1 != 0).then(|| &self.mid[k * MID_WORDS..(k + 1) * MID_WORDS]);
                let planes = match (high, mid) {
                    (Some(_), _) => PLANES,
                    (None, Some(_)) => HALF,
                    (None, None) if low.iter().any(|&v| v != 0) => LOW,
                    (None, None) => continue,
                };
                for (p, plane) in x[..LOW].iter_mut().enumerate() {
                    plane.copy_from_slice(&low[p * LANES..p * LANES + LANES]);
                }
                if planes > LOW {
                    for (p, plane) in x[LOW..HALF].iter_mut().enumerate() {
                        match mid {
                            Some(m) => plane.copy_from_slice(&m[p * LANES..p * LANES + LANES]),
                            None => *plane = [0; LANES],
                        }
                    }
                }
                if let Some(h) = high {
                    let h = &h[block * BLOCK_WORDS..(block + 1) * BLOCK_WORDS];
                    for (p, plane) in x[HALF..].iter_mut().enumerate() {
                        plane.copy_from_slice(&h[p * LANES..p * LANES + LANES]);
                    }
                }
                let x = &mut x[..planes];
                if ids.get(data_at).is_some_and(|&id| id < (base as u64 + 64) * 8) {
                    for lane in 0..LANES {
                        let keep = !wrapped_in(&ids, &mut data_at, (base + lane * LANES) as u64 * 8);
                        x.iter_mut().for_each(|plane| plane[lane] &= keep);
                    }
                }
                group_figures(x, &mut acc);
            }
            for fw in 0..self.flip_words {
                let lane = page * self.flip_words + fw;
                let mut x = [[0u64; 1]; PLANES];
                for (plane, &v) in x[..HALF].iter_mut().zip(&self.flip_low[lane * HALF..][..HALF]) {
                    plane[0] = v;
                }
                if let Some(h) = high {
                    for (plane, &v) in x[HALF..].iter_mut().zip(&h[DATA_WORDS + fw * HALF..][..HALF]) {
                        plane[0] = v;
                    }
                }
                let keep = !wrapped_in(&ids, &mut flip_at, FLIP_ID | (lane as u64 * 64));
                x.iter_mut().for_each(|plane| plane[0] &= keep);
                group_figures(&x, &mut acc);
            }
        }
        acc
    }

    /// Zero every counter; written pages stay committed (no host page faults afterwards).
    pub fn clear(&mut self) {
        self.flush();
        for page in 0..self.pages.len() {
            if self.pages[page] != DIRTY {
                continue;
            }
            self.pages[page] = CLEAN;
            self.low[page * PAGE_LOW_WORDS..(page + 1) * PAGE_LOW_WORDS].fill(0);
            if self.mid_pages[page] == DIRTY {
                self.mid_pages[page] = CLEAN;
                self.mid_blocks[page] = 0;
                self.mid[page * PAGE_MID_WORDS..(page + 1) * PAGE_MID_WORDS].fill(0);
            }
            let flips = self.flip_words * HALF;
            self.flip_low[page * flips..(page + 1) * flips].fill(0);
            if let Some(h) = &mut self.high[page] {
                h.fill(0);
            }
        }
        self.wraps.clear();
        for r in &mut self.regions {
            r.3 = 0;
        }
        self.total_bit_updates = 0;
    }

    /// Bytes of host memory the counters reserve: the low half of every page (of which the
    /// regions written are committed, `Wear::first_write`), the high halves allocated, and
    /// the per-page bookkeeping. The bound is both halves of every page.
    pub fn host_bytes(&mut self) -> u64 {
        self.flush();
        let per_page = (self.page_words() * 8) as u64;
        let high = self.high.iter().filter(|p| p.is_some()).count() as u64;
        let bookkeeping = self.pages.len() * (1 + 8 + std::mem::size_of::<Option<Box<[u64]>>>());
        (self.pages.len() as u64 + high) * per_page + bookkeeping as u64
    }
}
