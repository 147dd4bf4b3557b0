//! Per-cell program counters: dense u16 arrays allocated per 4 KiB page on first write (a page
//! never written costs a pointer), plus a side map for the rare cells that pass 65 535 programs
//! (hot metadata such as a log head). Totals per region are kept as writes happen; maxima and
//! histograms are computed when reported.

use std::collections::BTreeMap;

const PAGE_BYTES: u64 = 4096;

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
    /// Per page: data cells (8 per byte), then flip cells (one per word).
    pages: Vec<Option<Box<[u16]>>>,
    overflow: BTreeMap<u64, u64>,
    regions: Vec<(&'static str, u64, u64, u64)>,
    pub total_bit_updates: u64,
}

impl Wear {
    pub fn new(bytes: u64, word_bits: u64, regions: &[(&'static str, u64, u64)]) -> Wear {
        Wear {
            word_bits,
            pages: (0..bytes.div_ceil(PAGE_BYTES)).map(|_| None).collect(),
            overflow: BTreeMap::new(),
            regions: regions.iter().map(|&(n, s, l)| (n, s, l, 0)).collect(),
            total_bit_updates: 0,
        }
    }

    fn cells_per_page(&self) -> usize {
        (PAGE_BYTES * 8 + PAGE_BYTES * 8 / self.word_bits) as usize
    }

    /// Count one program of each cell of word `w` set in `changed`, and of its flip cell.
    #[inline]
    pub fn program_word(&mut self, w: u64, changed: u64, flip: bool) {
        let n = changed.count_ones() as u64 + flip as u64;
        if n == 0 {
            return;
        }
        let byte = w * self.word_bits / 8;
        let page = (byte / PAGE_BYTES) as usize;
        let cells = self.cells_per_page();
        let counters = self.pages[page].get_or_insert_with(|| vec![0u16; cells].into_boxed_slice());
        let base = ((byte % PAGE_BYTES) * 8) as usize;
        let mut bits = changed;
        let mut spill = Vec::new();
        while bits != 0 {
            let i = base + bits.trailing_zeros() as usize;
            bump(counters, i, &mut spill, page, cells);
            bits &= bits - 1;
        }
        if flip {
            let i = (PAGE_BYTES * 8) as usize + ((byte % PAGE_BYTES) * 8 / self.word_bits) as usize;
            bump(counters, i, &mut spill, page, cells);
        }
        for c in spill {
            *self.overflow.entry(c).or_default() += 1;
        }
        self.total_bit_updates += n;
        if let Some(r) = self.regions.iter_mut().find(|r| byte >= r.1 && byte < r.1 + r.2) {
            r.3 += n;
        }
    }

    /// Programs of one cell: data cell `bit` of the device (byte * 8 + bit), or with `flip` the
    /// flip cell of the word holding that bit.
    pub fn count(&self, bit: u64, flip: bool) -> u64 {
        let byte = bit / 8;
        let page = (byte / PAGE_BYTES) as usize;
        let i = if flip {
            (PAGE_BYTES * 8 + (byte % PAGE_BYTES) * 8 / self.word_bits) as usize
        } else {
            (bit % (PAGE_BYTES * 8)) as usize
        };
        let global = (page * self.cells_per_page() + i) as u64;
        self.pages[page].as_ref().map_or(0, |c| c[i] as u64) + self.overflow.get(&global).copied().unwrap_or(0)
    }

    /// Wear of each region: totals, maximum, histogram.
    pub fn regions(&self) -> Vec<RegionWear> {
        self.regions
            .iter()
            .map(|&(name, start, len, total)| {
                let mut r = RegionWear { name, total_bit_updates: total, max_bit_updates: 0, histogram: vec![0; 40] };
                let cells = self.cells_per_page();
                for page in
                    (start / PAGE_BYTES) as usize..((start + len).div_ceil(PAGE_BYTES) as usize).min(self.pages.len())
                {
                    let Some(c) = &self.pages[page] else { continue };
                    for (i, &v) in c.iter().enumerate() {
                        let v = v as u64
                            + if v == u16::MAX {
                                self.overflow.get(&((page * cells + i) as u64)).copied().unwrap_or(0)
                            } else {
                                0
                            };
                        if v > 0 {
                            r.max_bit_updates = r.max_bit_updates.max(v);
                            r.histogram[63 - v.leading_zeros() as usize] += 1;
                        }
                    }
                }
                while r.histogram.last() == Some(&0) {
                    r.histogram.pop();
                }
                r
            })
            .collect()
    }

    /// Zero every counter, keeping the pages allocated (no host page faults afterwards).
    pub fn clear(&mut self) {
        for c in self.pages.iter_mut().flatten() {
            c.fill(0);
        }
        self.overflow.clear();
        for r in &mut self.regions {
            r.3 = 0;
        }
        self.total_bit_updates = 0;
    }

    /// Bytes of host memory the counters occupy.
    pub fn host_bytes(&self) -> u64 {
        let per_page = (self.cells_per_page() * 2) as u64;
        self.pages.iter().filter(|p| p.is_some()).count() as u64 * per_page + self.pages.len() as u64 * 8
    }
}

#[inline]
fn bump(counters: &mut [u16], i: usize, spill: &mut Vec<u64>, page: usize, cells: usize) {
    if counters[i] == u16::MAX {
        spill.push((page * cells + i) as u64);
    } else {
        counters[i] += 1;
    }
}
