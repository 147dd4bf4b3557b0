//! Per-cell program counters, bit-sliced: the 16-bit count of each cell is spread over 16 bit
//! planes, so one write adds its whole changed-bit mask to 64 cells with a ripple carry
//! (`plane[p] ^= carry; carry &= old plane[p]`), a few word operations instead of one increment
//! per programmed cell.
//!
//! Layout: two halves of 8 planes each (bits 0-7 and 8-15 of every count), each allocated per
//! 4 KiB device page on first use: the low half on the page's first write, the high half on the
//! first carry out of its plane 7 (a page never written costs two pointers; most pages never need
//! the high half: 1 byte per cell). In a half, for each of the page's 64 blocks, 8 planes of 8
//! u64 lanes (plane-major: a block's plane is one 64-byte host line, and most writes carry into
//! planes 0 to 2 only); then the flip cells of the page (one per FNW word), 8 planes of
//! `512 / word_bits` u64.
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
/// u64 words of data planes per page and half: 64 blocks x 8 planes x 8 lanes.
const DATA_WORDS: usize = 64 * HALF * LANES;
/// Block writes whose counter updates are held and then applied together.
const BATCH: usize = 16;
/// Flip cells' ids are data-cell ids with this bit set (in the map of wraps).
const FLIP_ID: u64 = 1 << 63;

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
    /// u64 words of one flip plane of a page.
    flip_words: usize,
    /// Per page: planes 0-7 (`low`) and 8-15 (`high`) of its counters.
    low: Vec<Option<Box<[u64]>>>,
    high: Vec<Option<Box<[u64]>>>,
    /// Cell id (data bit index, or `FLIP_ID | word index`) -> times its count wrapped 65 536.
    wraps: BTreeMap<u64, u64>,
    regions: Vec<(&'static str, u64, u64, u64)>,
    pub total_bit_updates: u64,
    /// Block updates not yet applied to the planes (see [`Wear::program_block`]).
    pending: Vec<PendingBlock>,
}

/// One block write's cells, waiting in the batch.
struct PendingBlock {
    addr: u64,
    changed: [u64; 8],
    flips: u8,
}

/// Add `carry` (a mask of cells) to the bit-sliced counters `planes[first + p * stride]` of one
/// half; returns the cells that carried out of its top plane.
#[inline]
fn add(planes: &mut [u64], first: usize, stride: usize, mut carry: u64) -> u64 {
    for p in 0..HALF {
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

/// Add the 8 lane masks `carry` to block `block` of one half, plane by plane (one host line per
/// plane); `carry` is left with what carried out of the half's top plane, returned OR-ed.
#[inline]
fn add_block(half: &mut [u64], block: usize, carry: &mut [u64; 8]) -> u64 {
    let planes = &mut half[block * HALF * LANES..][..HALF * LANES];
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

/// Add the cells of one lane selected by `keep` (bit `i` of plane `p` is bit `p` of cell `i`'s
/// count) to a histogram by highest set plane and to a maximum, plane-wise: a cell falls in
/// bucket `p` when `p` is its highest set plane; the maximum is found by narrowing the
/// candidates plane by plane.
#[inline]
fn lane_figures(low: &[u64], high: Option<&[u64]>, first: usize, stride: usize, keep: u64, acc: &mut LaneAcc) {
    let mut planes = [0u64; PLANES];
    let mut any = 0;
    for (p, x) in planes[..HALF].iter_mut().enumerate() {
        *x = low[first + p * stride] & keep;
        any |= *x;
    }
    if let Some(h) = high {
        for (p, x) in planes[HALF..].iter_mut().enumerate() {
            *x = h[first + p * stride] & keep;
            any |= *x;
        }
    }
    if any == 0 {
        return;
    }
    let (mut higher, mut max, mut cand) = (0u64, 0u64, 0u64);
    for p in (0..PLANES).rev() {
        let x = planes[p];
        let top = x & !higher;
        if top != 0 {
            acc.histogram[p] += top.count_ones() as u64;
        }
        higher |= x;
        if cand == 0 {
            (cand, max) = if x != 0 { (x, 1 << p) } else { (0, 0) };
        } else if cand & x != 0 {
            cand &= x;
            max |= 1 << p;
        }
    }
    acc.max = acc.max.max(max);
}

/// Histogram (by highest set plane) and maximum of the lanes seen so far.
#[derive(Default)]
struct LaneAcc {
    histogram: [u64; PLANES],
    max: u64,
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
        Wear {
            word_bits,
            flip_words: (512 / word_bits) as usize,
            low: (0..bytes.div_ceil(PAGE_BYTES)).map(|_| None).collect(),
            high: (0..bytes.div_ceil(PAGE_BYTES)).map(|_| None).collect(),
            wraps: BTreeMap::new(),
            regions: regions.iter().map(|&(n, s, l)| (n, s, l, 0)).collect(),
            total_bit_updates: 0,
            pending: Vec::with_capacity(BATCH),
        }
    }

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
        if let Some(r) = self.regions.iter_mut().find(|r| byte >= r.1 && byte < r.1 + r.2) {
            r.3 += n;
        }
    }

    /// Ask the host to bring the first two planes of block `addr`'s counters into its cache (a
    /// hint; no effect on results).
    #[inline]
    pub fn prefetch(&self, addr: u64) {
        if let Some(planes) = &self.low[(addr / PAGE_BYTES) as usize] {
            let i = (addr % PAGE_BYTES) as usize / 64 * HALF * LANES;
            crate::pcm::prefetch(&planes[i]);
            crate::pcm::prefetch(&planes[i + LANES]);
        }
    }

    /// Count the programs of one aligned 64-byte block with 64-bit words: data cells set in
    /// `changed` (one mask per word), flip cells set in `flips` (bit i: word i). No totals.
    ///
    /// The update waits in a batch of `BATCH` blocks, applied together: first every block's
    /// counter lines are requested from host memory, then the carries run, so the host waits for
    /// those lines once per batch instead of once per write. Counts are sums, so the order of
    /// application does not change them; every reader applies the batch first.
    #[inline]
    pub fn program_block(&mut self, addr: u64, changed: &[u64; 8], flips: u8) {
        self.pending.push(PendingBlock { addr, changed: *changed, flips });
        if self.pending.len() == BATCH {
            self.flush();
        }
    }

    /// Apply the pending block updates.
    pub fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for p in &pending {
            let page = (p.addr / PAGE_BYTES) as usize;
            let in_page = (p.addr % PAGE_BYTES) as usize;
            let flip_words = self.flip_words;
            let low = self.half(page, false);
            let i = in_page / 64 * HALF * LANES;
            crate::pcm::prefetch(&low[i]);
            crate::pcm::prefetch(&low[i + LANES]);
            if p.flips != 0 {
                crate::pcm::prefetch(&low[DATA_WORDS + in_page / 8 / 64]);
                crate::pcm::prefetch(&low[DATA_WORDS + in_page / 8 / 64 + flip_words]);
            }
        }
        for p in &pending {
            self.apply_block(p.addr, &p.changed, p.flips);
        }
        self.pending = pending;
        self.pending.clear();
    }

    fn apply_block(&mut self, addr: u64, changed: &[u64; 8], flips: u8) {
        debug_assert!(addr.is_multiple_of(64) && self.word_bits == 64);
        let page = (addr / PAGE_BYTES) as usize;
        let in_page = (addr % PAGE_BYTES) as usize;
        let mut carry = *changed;
        if add_block(self.half(page, false), in_page / 64, &mut carry) != 0
            && add_block(self.half(page, true), in_page / 64, &mut carry) != 0
        {
            for (lane, &c) in carry.iter().enumerate() {
                for i in BitIter(c) {
                    *self.wraps.entry(addr * 8 + lane as u64 * 64 + i as u64).or_default() += 1;
                }
            }
        }
        if flips != 0 {
            let f = in_page / 8;
            let wrapped = self.add_cells(page, DATA_WORDS + f / 64, self.flip_words, (flips as u64) << (f % 64));
            for i in BitIter(wrapped >> (f % 64)) {
                *self.wraps.entry(FLIP_ID | (addr / 8 + i as u64)).or_default() += 1;
            }
        }
    }

    /// The low or high half of a page's counters, allocated (zero) on first use.
    #[inline]
    fn half(&mut self, page: usize, high: bool) -> &mut [u64] {
        let words = self.page_words();
        let pages = if high { &mut self.high } else { &mut self.low };
        pages[page].get_or_insert_with(|| vec![0u64; words].into_boxed_slice())
    }

    /// Add `carry` to the 64 counters at `first` (stride `stride`) of a page, low half then high
    /// half; returns the cells that wrapped past 65 535.
    #[inline]
    fn add_cells(&mut self, page: usize, first: usize, stride: usize, carry: u64) -> u64 {
        match add(self.half(page, false), first, stride, carry) {
            0 => 0,
            out => add(self.half(page, true), first, stride, out),
        }
    }

    /// [`Wear::program_word`] without the totals (the caller accounts a whole write at once).
    #[inline]
    pub fn program_cells(&mut self, w: u64, changed: u64, flip: bool) {
        if changed == 0 && !flip {
            return;
        }
        let byte = w * self.word_bits / 8;
        let page = (byte / PAGE_BYTES) as usize;
        let flip_words = self.flip_words;
        let in_page = (byte % PAGE_BYTES) as usize;
        self.half(page, false);
        if changed != 0 {
            let (block, lane) = (in_page / 64, in_page % 64 / 8);
            let wrapped = self.add_cells(page, block * HALF * LANES + lane, LANES, changed << (in_page % 8 * 8));
            for i in BitIter(wrapped) {
                *self.wraps.entry((byte & !7) * 8 + i as u64).or_default() += 1;
            }
        }
        if flip {
            let f = in_page * 8 / self.word_bits as usize;
            if self.add_cells(page, DATA_WORDS + f / 64, flip_words, 1 << (f % 64)) != 0 {
                *self.wraps.entry(FLIP_ID | w).or_default() += 1;
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
        let (byte, flip) =
            if id & FLIP_ID != 0 { ((id & !FLIP_ID) * self.word_bits / 8, true) } else { (id / 8, false) };
        let page = (byte / PAGE_BYTES) as usize;
        let in_page = (byte % PAGE_BYTES) as usize;
        let (first, stride, i) = if flip {
            let f = in_page * 8 / self.word_bits as usize;
            (DATA_WORDS + f / 64, self.flip_words, f % 64)
        } else {
            (in_page / 64 * HALF * LANES + in_page % 64 / 8, LANES, (id % 64) as usize)
        };
        let half = |planes: &Option<Box<[u64]>>| {
            planes.as_ref().map_or(0, |h| (0..HALF).fold(0u64, |v, p| v | (h[first + p * stride] >> i & 1) << p))
        };
        half(&self.low[page]) | half(&self.high[page]) << HALF
    }

    /// Wear of each region: totals, maximum, histogram.
    pub fn regions(&mut self) -> Vec<RegionWear> {
        self.flush();
        self.regions.iter().map(|&(name, start, len, total)| self.region(name, start, len, total)).collect()
    }

    fn region(&self, name: &'static str, start: u64, len: u64, total: u64) -> RegionWear {
        let mut r = RegionWear { name, total_bit_updates: total, max_bit_updates: 0, histogram: vec![0; 40] };
        let first_page = (start / PAGE_BYTES) as usize;
        let end_page = ((start + len).div_ceil(PAGE_BYTES) as usize).min(self.low.len());
        let ids: Vec<u64> = self.wraps.keys().copied().collect();
        let (mut data_at, mut flip_at) = (0, ids.partition_point(|&id| id & FLIP_ID == 0));
        let mut acc = LaneAcc::default();
        for page in first_page..end_page {
            let Some(low) = &self.low[page] else { continue };
            let high = self.high[page].as_deref();
            let page_byte = page as u64 * PAGE_BYTES;
            for lane in 0..64 * LANES {
                let first = lane / LANES * HALF * LANES + lane % LANES;
                let wrapped = wrapped_in(&ids, &mut data_at, page_byte * 8 + lane as u64 * 64);
                lane_figures(low, high, first, LANES, !wrapped, &mut acc);
            }
            let word0 = page_byte * 8 / self.word_bits;
            for fw in 0..self.flip_words {
                let wrapped = wrapped_in(&ids, &mut flip_at, FLIP_ID | (word0 + fw as u64 * 64));
                lane_figures(low, high, DATA_WORDS + fw, self.flip_words, !wrapped, &mut acc);
            }
        }
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

    /// Zero every counter, keeping the pages allocated (no host page faults afterwards).
    pub fn clear(&mut self) {
        self.flush();
        for c in self.low.iter_mut().chain(&mut self.high).flatten() {
            c.fill(0);
        }
        self.wraps.clear();
        for r in &mut self.regions {
            r.3 = 0;
        }
        self.total_bit_updates = 0;
    }

    /// Bytes of host memory the counters occupy.
    pub fn host_bytes(&mut self) -> u64 {
        self.flush();
        let per_page = (self.page_words() * 8) as u64;
        let halves = self.low.iter().chain(&self.high).filter(|p| p.is_some()).count() as u64;
        halves * per_page + 2 * self.low.len() as u64 * 8
    }
}
