//! Worn-out cells (`pcm.retire_worn_cells`): a cell programmed as many times as its endurance
//! is retired, stuck at the value its last program gave it. A later write that would change a
//! stuck cell fails there; the controller sees it by reading the block back after the write
//! (verify-after-write), so every such write is counted and reported, never silently lost.
//!
//! Endurance per cell: `cell_endurance_writes`, or with `cell_endurance_cov > 0` a draw from a
//! normal distribution of that mean and coefficient of variation, clamped to at least 1: an
//! Irwin-Hall sum of four uniforms from a hash of the cell's id and `cell_endurance_seed`, so a
//! cell's endurance needs no storage and is the same in every run with that seed. Counts are the
//! wear counters' ([`super::Wear`]): like them, they start at the measured region, where the
//! device is new (the stuck cells and the events so far are forgotten with the counters).
//!
//! Left out: what a real controller does next (error-correcting pointers, remapping the line, a
//! retry with inverted data): the image keeps the value written, as if one of them corrected
//! the failure; the figures say how often one was needed and when the first one was.

use serde::Serialize;

use crate::types::Cycle;

/// One cell at one moment: where, and which write.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct CellEvent {
    /// Byte of the device holding the cell (physical: after Start-Gap's translation).
    pub byte: u64,
    /// Bit of that byte (0 = least significant); for a flip cell, the first bit of its word.
    pub bit: u8,
    /// A Flip-N-Write flip cell rather than a data cell.
    pub flip_cell: bool,
    /// The device's write (1 = the first write of the measured region).
    pub write: u64,
    /// Core cycle at which that write was issued to the device (0 where no clock is kept).
    pub cycle: Cycle,
}

/// Retired cells and failed writes of one region (or of the whole device).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RetireFigures {
    pub name: &'static str,
    /// Cells that reached their endurance.
    pub retired_cells: u64,
    /// The first of them.
    pub first_retired: Option<CellEvent>,
    /// Writes that would have changed a stuck cell (seen by reading back).
    pub failed_writes: u64,
    /// Cells of those writes left holding the wrong value.
    pub failed_cells: u64,
    /// The first failed write, at its first wrong cell.
    pub first_failed_write: Option<CellEvent>,
}

/// Stuck cells and the events so far.
pub struct Retire {
    endurance: f64,
    cov: f64,
    seed: u64,
    /// One bit per data cell, as the device's bytes (bit `8 * byte + b` of the bit string).
    stuck: Vec<u64>,
    /// One bit per flip cell.
    stuck_flips: Vec<u64>,
    /// Device writes since the last reset.
    pub writes: u64,
    /// Core cycle of the current write (set by the caller).
    pub cycle: Cycle,
    /// The whole device, then each region.
    pub figures: Vec<RetireFigures>,
}

/// SplitMix64's finaliser: a well-mixed 64-bit hash.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Retire {
    pub fn new(cfg: &super::PcmConfig, bytes: u64, flip_cells: u64, regions: &[&'static str]) -> Retire {
        let mut figures = vec![RetireFigures { name: "device", ..Default::default() }];
        figures.extend(regions.iter().map(|&name| RetireFigures { name, ..Default::default() }));
        Retire {
            endurance: cfg.cell_endurance_writes,
            cov: cfg.cell_endurance_cov,
            seed: cfg.cell_endurance_seed,
            stuck: crate::hostmem::zeroed(bytes.div_ceil(8) as usize),
            stuck_flips: crate::hostmem::zeroed(flip_cells.div_ceil(64) as usize),
            writes: 0,
            cycle: Cycle::ZERO,
            figures,
        }
    }

    /// Forget stuck cells and events (the counters were zeroed: a new device).
    pub fn reset(&mut self) {
        self.stuck.fill(0);
        self.stuck_flips.fill(0);
        self.writes = 0;
        for f in &mut self.figures {
            *f = RetireFigures { name: f.name, ..Default::default() };
        }
    }

    /// Programs cell `id` survives (`id`: data bit index, or flip cell index with bit 63 set).
    pub fn endurance_of(&self, id: u64) -> u64 {
        if self.cov == 0.0 {
            return self.endurance as u64;
        }
        let h = mix(self.seed ^ mix(id));
        let sum: f64 = (0..4).map(|i| ((h >> (16 * i)) & 0xFFFF) as f64 / 65536.0).sum();
        let z = (sum - 2.0) * 3f64.sqrt();
        (self.endurance * (1.0 + self.cov * z)).round().max(1.0) as u64
    }

    /// Stuck data cells of the 64 starting at bit `8 * byte` (`byte` a multiple of 8).
    #[inline]
    pub fn stuck_at(&self, byte: u64) -> u64 {
        self.stuck[(byte / 8) as usize]
    }

    /// Stuck flip cells `64 * lane .. 64 * lane + 63`.
    #[inline]
    pub fn stuck_flip_lane(&self, lane: u64) -> u64 {
        self.stuck_flips[lane as usize]
    }

    /// Retire data cell `8 * byte + bit` or flip cell `flip` (region index `region` + 1 in the
    /// figures, or none).
    pub fn retire(&mut self, byte: u64, bit: u8, flip: Option<u64>, region: Option<usize>) {
        match flip {
            Some(f) => self.stuck_flips[(f / 64) as usize] |= 1 << (f % 64),
            None => self.stuck[(byte / 8) as usize] |= 1 << (byte % 8 * 8 + bit as u64),
        }
        let e = self.event(byte, bit, flip.is_some());
        for f in self.touched(region) {
            f.retired_cells += 1;
            f.first_retired.get_or_insert(e);
        }
    }

    /// A write that left `cells` stuck cells wrong, the first at `byte`, `bit`.
    pub fn failed(&mut self, byte: u64, bit: u8, flip_cell: bool, cells: u64, region: Option<usize>) {
        let e = self.event(byte, bit, flip_cell);
        for f in self.touched(region) {
            f.failed_writes += 1;
            f.failed_cells += cells;
            f.first_failed_write.get_or_insert(e);
        }
    }

    fn event(&self, byte: u64, bit: u8, flip_cell: bool) -> CellEvent {
        CellEvent { byte, bit, flip_cell, write: self.writes, cycle: self.cycle }
    }

    /// The device's figures and, if any, the region's.
    fn touched(&mut self, region: Option<usize>) -> impl Iterator<Item = &mut RetireFigures> {
        let (device, rest) = self.figures.split_first_mut().expect("device figures");
        std::iter::once(device).chain(region.and_then(|r| rest.get_mut(r)))
    }
}

impl Retire {
    /// A write begins (its events carry this write's number).
    #[inline]
    pub fn begin_write(&mut self) {
        self.writes += 1;
    }

    /// Before word `w` (of `wb` bytes) is programmed: of the cells the write changes (`diff`,
    /// `flip_diff` for its flip cell), count the stuck ones as wrong (the read-back after the
    /// write sees them); returns the cells to program (`prog`, `flip_prog`) less the stuck ones,
    /// which a program no longer changes or wears. `wrong` gathers the write's wrong cells and
    /// the first of them.
    #[inline]
    pub fn mask_word(
        &self,
        w: u64,
        wb: u64,
        (diff, flip_diff): (u64, bool),
        prog: (u64, bool),
        wrong: &mut Wrong,
    ) -> (u64, bool) {
        let byte = w * wb;
        let shift = byte % 8 * 8;
        let mask = if wb == 8 { u64::MAX } else { (1u64 << (8 * wb)) - 1 };
        let stuck = self.stuck_at(byte & !7) >> shift & mask;
        let stuck_flip = self.stuck_flip_lane(w / 64) >> (w % 64) & 1 == 1;
        let bad = diff & stuck;
        if bad != 0 {
            let b = bad.trailing_zeros() as u64;
            wrong.note(byte + b / 8, (b % 8) as u8, false, bad.count_ones() as u64);
        }
        if flip_diff && stuck_flip {
            wrong.note(byte, 0, true, 1);
        }
        (prog.0 & !stuck, prog.1 && !stuck_flip)
    }

    /// After word `w` (of `wb` bytes) was programmed (`prog`, `flip_prog`): retire the cells
    /// whose count reached their endurance.
    pub fn check_word(
        &mut self,
        wear: &mut super::Wear,
        w: u64,
        wb: u64,
        (prog, flip_prog): (u64, bool),
        region: Option<usize>,
    ) {
        let byte = w * wb;
        let mut m = prog;
        while m != 0 {
            let b = m.trailing_zeros() as u64;
            m &= m - 1;
            let id = byte * 8 + b;
            if wear.count(id, false) >= self.endurance_of(id) {
                self.retire(byte + b / 8, (b % 8) as u8, None, region);
            }
        }
        if flip_prog && wear.count(byte * 8, true) >= self.endurance_of(1 << 63 | w) {
            self.retire(byte, 0, Some(w), region);
        }
    }

    /// After a write's words were masked: record it as failed if any cell was wrong.
    pub fn end_write(&mut self, wrong: &Wrong, region: Option<usize>) {
        if let Some((byte, bit, flip)) = wrong.first {
            self.failed(byte, bit, flip, wrong.cells, region);
        }
    }
}

/// The stuck cells one write would have changed.
#[derive(Default)]
pub struct Wrong {
    pub cells: u64,
    /// Byte, bit and flip-cell flag of the first.
    pub first: Option<(u64, u8, bool)>,
}

impl Wrong {
    fn note(&mut self, byte: u64, bit: u8, flip: bool, cells: u64) {
        self.cells += cells;
        self.first.get_or_insert((byte, bit, flip));
    }
}
