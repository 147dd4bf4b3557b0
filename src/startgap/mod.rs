//! Start-Gap wear levelling of the memory log area (Qureshi et al., MICRO 2009; LOC extended
//! paper section 4.2), done by the memory controller below every protocol.
//!
//! The protocols address `N` logical log lines (the log area of [`Layout`]). The device holds
//! them on `N + 1` physical lines starting at the same address, plus one register block right
//! after them. A logical line `l` is first scrambled by a static randomiser (a Feistel network on
//! the line index, cycle-walked into `0..N`), then placed by the two registers:
//! `p = (r(l) + start) mod N`, plus one if `p >= gap`. Physical line `gap` holds nothing.
//!
//! Every `psi` writes to logical lines the gap moves one line down: the line just below it is
//! copied into it (`gap - 1 -> gap`) and `gap` decreases; a gap at 0 takes line `N` and goes back
//! to `N` while `start` advances. Each move changes the placement of exactly one logical line.
//!
//! Persistence (byte layout in [`regs`], argument in docs/formats/startgap.md): the copy is
//! durable before the register block that points to its new place, and the moved line is not
//! written at its new place (nor its old place reused) before that register block is durable.
//!
//! Left out: the controller's own volatile copy of the registers is modelled as always equal
//! to the last register write issued (recovery reads only the persisted block).

pub mod regs;

use crate::pmem::Layout;
use crate::types::{BlockId, Cycle};
use serde::{Deserialize, Serialize};

pub use regs::Registers;

/// `[startgap]` in the configuration.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StartGapConfig {
    /// Wear-level the memory log area (default off).
    pub enabled: bool,
    /// Writes to the log area between two gap moves (Qureshi et al.: 100).
    pub psi_writes: u64,
    /// Persist the registers as two copies written alternately, so that a register write torn
    /// below 64 bytes leaves the previous copy valid (docs/formats/startgap.md, docs/faults.md).
    /// Off by default: one copy, the format of the register block without the fix.
    #[serde(default)]
    pub two_register_copies: bool,
}

impl Default for StartGapConfig {
    fn default() -> Self {
        StartGapConfig { enabled: false, psi_writes: 100, two_register_copies: false }
    }
}

impl StartGapConfig {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=1_000_000).contains(&self.psi_writes) {
            return Err(format!("startgap.psi_writes = {}: allowed 1..=1000000", self.psi_writes));
        }
        Ok(())
    }
}

/// Key of the static randomiser (fixed: it is part of the hardware, and recovery needs it).
const FEISTEL_KEYS: [u64; 4] =
    [0x9E37_79B9_7F4A_7C15, 0xBF58_476D_1CE4_E5B9, 0x94D0_49BB_1331_11EB, 0x2545_F491_4F6C_DD1D];

/// The static geometry: where the lines and the register block are, and the randomiser.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Block of logical line 0 and of physical line 0 (the log area's first block).
    pub line0: u64,
    /// Logical lines `N`.
    pub lines: u64,
    /// Bits in each Feistel half.
    half_bits: u32,
    /// The register block holds two copies written alternately (`two_register_copies`).
    pub two_copies: bool,
}

impl Geometry {
    /// The geometry over a layout's log area, or `None` when Start-Gap is off.
    /// The layout must reserve the spare line and the register block ([`Layout::with_startgap`]).
    pub fn of(cfg: &StartGapConfig, layout: &Layout) -> Option<Geometry> {
        cfg.enabled.then(|| {
            assert_eq!(layout.startgap_bytes, Self::EXTRA_BYTES, "layout built with with_startgap");
            Geometry {
                two_copies: cfg.two_register_copies,
                ..Geometry::new(layout.log_block0().0, layout.log_blocks())
            }
        })
    }

    /// `lines` logical lines starting at block `line0`.
    pub fn new(line0: u64, lines: u64) -> Geometry {
        assert!((1..1 << 40).contains(&lines));
        let bits = 64 - (lines.max(4) - 1).leading_zeros();
        Geometry { line0, lines, half_bits: bits.div_ceil(2), two_copies: false }
    }

    /// Bytes right after the log area that Start-Gap takes: the spare line and the register
    /// block ([`Layout::startgap_bytes`]).
    pub const EXTRA_BYTES: u64 = 128;

    /// The register block.
    pub fn regs_block(&self) -> BlockId {
        BlockId(self.line0 + self.lines + 1)
    }

    /// Does `b` lie where Start-Gap places things: the `N + 1` physical lines or the register
    /// block?
    #[inline]
    pub fn holds(&self, b: BlockId) -> bool {
        b.0.wrapping_sub(self.line0) < self.lines + 2
    }

    /// Is `b` one of the logical lines?
    #[inline]
    pub fn is_line(&self, b: BlockId) -> bool {
        b.0.wrapping_sub(self.line0) < self.lines
    }

    /// The static randomiser: a bijection of `0..N` (Feistel network on `2 * half_bits` bits,
    /// cycle-walked: values outside `0..N` are encrypted again until they fall inside).
    #[inline]
    pub fn randomise(&self, l: u64) -> u64 {
        debug_assert!(l < self.lines);
        let mut x = l;
        loop {
            x = self.feistel(x);
            if x < self.lines {
                return x;
            }
        }
    }

    /// The inverse of [`Geometry::randomise`] (the rounds run backwards, cycle-walked the same way).
    pub fn unrandomise(&self, r: u64) -> u64 {
        debug_assert!(r < self.lines);
        let mut x = r;
        loop {
            x = self.feistel_inverse(x);
            if x < self.lines {
                return x;
            }
        }
    }

    fn feistel_inverse(&self, x: u64) -> u64 {
        let h = self.half_bits;
        let mask = (1u64 << h) - 1;
        let (mut left, mut right) = (x >> h, x & mask);
        for k in FEISTEL_KEYS.into_iter().rev() {
            (left, right) = (right ^ (mix(left ^ k) & mask), left);
        }
        (left << h) | right
    }

    /// The logical line stored at physical line `p` under `regs`; `None` for the gap.
    pub fn logical_line(&self, regs: &Registers, p: u64) -> Option<u64> {
        debug_assert!(p <= self.lines);
        if p == regs.gap {
            return None;
        }
        let q = p - (p > regs.gap) as u64;
        Some(self.unrandomise((q + self.lines - regs.start) % self.lines))
    }

    #[inline]
    fn feistel(&self, x: u64) -> u64 {
        let h = self.half_bits;
        let mask = (1u64 << h) - 1;
        let (mut left, mut right) = (x >> h, x & mask);
        for k in FEISTEL_KEYS {
            (left, right) = (right, left ^ (mix(right ^ k) & mask));
        }
        (left << h) | right
    }

    /// Physical line of logical line `l` under `regs`.
    #[inline]
    pub fn physical_line(&self, regs: &Registers, l: u64) -> u64 {
        let p = (self.randomise(l) + regs.start) % self.lines;
        p + (p >= regs.gap) as u64
    }

    /// Physical block of logical line block `b` (which must be a line).
    #[inline]
    pub fn physical(&self, regs: &Registers, b: BlockId) -> BlockId {
        BlockId(self.line0 + self.physical_line(regs, b.0 - self.line0))
    }

    /// One gap move from `regs`: (source line, destination line, registers after).
    pub fn next_move(&self, regs: &Registers) -> (u64, u64, Registers) {
        let n = self.lines;
        if regs.gap == 0 {
            (n, 0, Registers { start: (regs.start + 1) % n, gap: n, moves: regs.moves + 1 })
        } else {
            (regs.gap - 1, regs.gap, Registers { start: regs.start, gap: regs.gap - 1, moves: regs.moves + 1 })
        }
    }
}

/// SplitMix64's finaliser: the Feistel round function.
#[inline]
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The controller's Start-Gap state during a run.
pub struct StartGap {
    pub geom: Geometry,
    /// The registers as last written (the volatile copy the controller translates with).
    pub regs: Registers,
    psi: u64,
    /// Writes to logical lines since the last gap move.
    since_move: u64,
    /// Cycle at which the last register write is durable: until then no log-area write starts
    /// (see the module documentation).
    pub barrier: Cycle,
    /// Deliberate defect: the register write is not ordered after the copy.
    pub bug_regs_before_copy: bool,
}

impl StartGap {
    pub fn new(geom: Geometry, psi: u64) -> StartGap {
        StartGap {
            geom,
            regs: Registers::initial(&geom),
            psi,
            since_move: 0,
            barrier: Cycle::ZERO,
            bug_regs_before_copy: false,
        }
    }

    /// Count one write to a logical line; true when a gap move is due.
    #[inline]
    pub fn count_write(&mut self) -> bool {
        self.since_move += 1;
        if self.since_move == self.psi {
            self.since_move = 0;
            true
        } else {
            false
        }
    }
}

/// The physical image of a logical one (the same length: the layout reserves the spare line
/// and the register block after the log area): each log line at its physical place under the
/// initial registers, the spare line zero, the register block encoded, every other byte (data
/// area, NV-LLC state) unchanged.
pub fn physical_initial(geom: &Geometry, logical: &[u8]) -> Vec<u8> {
    let mut phys = crate::hostmem::copy_of(logical);
    let regs = Registers::initial(geom);
    for l in 0..geom.lines {
        let src = BlockId(geom.line0 + l).range();
        let dst = geom.physical(&regs, BlockId(geom.line0 + l)).range();
        phys[dst].copy_from_slice(&logical[src]);
    }
    phys[BlockId(geom.line0 + regs.gap).range()].fill(0);
    phys[geom.regs_block().range()].copy_from_slice(&regs.encode_after(geom, &regs));
    phys
}

#[cfg(test)]
mod tests;
