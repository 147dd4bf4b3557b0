//! A bit-accurate phase-change memory device (`memory.device = "pcm"`): what each block write
//! programs, cell by cell, what it costs in time and energy, and how it wears the cells.
//!
//! A write compares the cells' stored contents with the new data. `write-all` programs every
//! cell; `diff` (differential write) only the cells whose value changes; `fnw` (Flip-N-Write)
//! also keeps one flip cell per `fnw_word_bits`-bit word and stores a word inverted when that
//! programs fewer cells, the flip cell counted (ties do not flip). Stored contents are the data
//! XOR the word's flip state, so the flip state is part of the device.
//!
//! Latency: the device programs 32-byte chunks, one per chip at a time, `chips` chips in
//! parallel: a write costs `write_overhead_ns` plus one `chunk_program_ns` step per `chips`
//! programmed chunks (a step every 128 bytes by default); a chunk with no programmed cell costs
//! nothing. Energy: per programmed cell, per read bit, and background power over time.
//!
//! Left out: programming asymmetry between SET and RESET, drift, resistance levels (MLC).

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod retire;
mod wear;

pub use retire::{CellEvent, RetireFigures};
pub use wear::{RegionWear, Wear};

use serde::{Deserialize, Serialize};

use crate::types::Ns;

/// Which vector instructions the block path uses (a const parameter of its functions):
/// portable code, AVX2 (only reached through `Pcm::write_block_avx2`) or AVX-512 (through
/// `Pcm::write_block_avx512`), each entered only once `Pcm::new` found the host features.
pub(crate) const PORTABLE: u8 = 0;
pub(crate) const AVX2: u8 = 1;
pub(crate) const AVX512: u8 = 2;

/// The environment variable that chooses the block path's instructions (host speed only; every
/// result is the same on each path): `auto` (unset: the widest the host has), `avx512`, `avx2`
/// or `portable` (no vector instructions, as on a host without them).
pub const SIMD_ENV: &str = "LOCSIM_PCM_SIMD";

/// The instructions of the block path: [`Simd::detect`]ed, or chosen with [`SIMD_ENV`]. Wider
/// instructions compare greater; a host that runs one runs every narrower one.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Simd {
    /// Portable code: no vector instructions (the scalar population count instruction where
    /// the host has one).
    Portable,
    /// 256-bit vectors and the population count instruction (x86-64 with AVX2).
    Avx2,
    /// 512-bit vectors and their population count (x86-64 with AVX-512F and VPOPCNTDQ).
    Avx512,
}

impl Simd {
    /// The widest path the host has.
    pub fn detect() -> Simd {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("popcnt") && has!("avx2") && has!("avx512f") && has!("avx512vpopcntdq") {
                return Simd::Avx512;
            }
            if has!("popcnt") && has!("avx2") {
                return Simd::Avx2;
            }
        }
        Simd::Portable
    }

    /// The path [`SIMD_ENV`] asks for (the detected one when it is unset or `auto`); an unknown
    /// name, or a path the host cannot run, is an error naming the allowed values.
    pub fn from_env() -> Result<Simd, String> {
        let v = std::env::var_os(SIMD_ENV);
        Simd::choose(v.as_ref().map(|v| v.to_string_lossy()).as_deref(), Simd::detect())
    }

    /// The path named `want` (`None`: not named) on a host whose widest path is `host`.
    fn choose(want: Option<&str>, host: Simd) -> Result<Simd, String> {
        let want = match want {
            None | Some("auto") => return Ok(host),
            Some("portable") => Simd::Portable,
            Some("avx2") => Simd::Avx2,
            Some("avx512") => Simd::Avx512,
            Some(other) => return Err(format!("{SIMD_ENV} = {other:?}: allowed auto, avx512, avx2, portable")),
        };
        if want > host {
            let runs: Vec<&str> =
                [Simd::Avx512, Simd::Avx2, Simd::Portable].into_iter().filter(|&s| s <= host).map(Simd::name).collect();
            return Err(format!(
                "{SIMD_ENV} = {}: this host has no {} instructions (allowed here: auto, {})",
                want.name(),
                want.name(),
                runs.join(", ")
            ));
        }
        Ok(want)
    }

    pub fn name(self) -> &'static str {
        match self {
            Simd::Portable => "portable",
            Simd::Avx2 => "avx2",
            Simd::Avx512 => "avx512",
        }
    }
}

/// How a write programs cells.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WriteMode {
    /// Every cell of the block is programmed.
    WriteAll,
    /// Only cells whose value changes.
    Diff,
    /// Differential write over Flip-N-Write words.
    Fnw,
}

/// The PCM device's parameters (`[pcm]`; sources in docs/pcm.md).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PcmConfig {
    /// `fnw`, `diff` or `write-all`.
    pub write_mode: WriteMode,
    /// Bits per Flip-N-Write word (one flip cell each).
    pub fnw_word_bits: u64,
    /// Bytes a chip programs as one unit.
    pub chunk_bytes: u64,
    /// Chips programming in parallel.
    pub chips: u64,
    /// Fixed part of a write (row activation and the read of old contents), ns.
    pub write_overhead_ns: u64,
    /// Time to program one chunk on one chip, ns.
    pub chunk_program_ns: u64,
    /// Energy to program one cell, pJ.
    pub program_energy_pj_per_bit: f64,
    /// Energy to read one cell, pJ.
    pub read_energy_pj_per_bit: f64,
    /// Background power of the device, mW.
    pub background_power_mw: f64,
    /// Programs a cell survives: for the lifetime estimate and, with `retire_worn_cells`, the
    /// count at which a cell sticks.
    pub cell_endurance_writes: f64,
    /// Cells programmed `cell_endurance_writes` times stick at their value; writes that would
    /// change a stuck cell are detected by read-back and reported (`retire.rs`). Off: cells
    /// never wear out (the lifetime estimate only).
    pub retire_worn_cells: bool,
    /// Spread of per-cell endurance with `retire_worn_cells`: coefficient of variation of a
    /// normal distribution around `cell_endurance_writes` (0: every cell the same), 0 to 0.25.
    pub cell_endurance_cov: f64,
    /// Seed of the per-cell endurance draws.
    pub cell_endurance_seed: u64,
}

impl Default for PcmConfig {
    fn default() -> Self {
        PcmConfig {
            write_mode: WriteMode::Fnw,
            fnw_word_bits: 64,
            chunk_bytes: 32,
            chips: 4,
            write_overhead_ns: 120,
            chunk_program_ns: 150,
            program_energy_pj_per_bit: 16.8,
            read_energy_pj_per_bit: 2.47,
            background_power_mw: 40.0,
            cell_endurance_writes: 1e8,
            retire_worn_cells: false,
            cell_endurance_cov: 0.0,
            cell_endurance_seed: 1,
        }
    }
}

impl PcmConfig {
    pub fn validate(&self) -> Result<(), String> {
        if ![8, 16, 32, 64].contains(&self.fnw_word_bits) {
            return Err(format!("pcm.fnw_word_bits = {}: allowed 8, 16, 32, 64", self.fnw_word_bits));
        }
        if ![8, 16, 32, 64].contains(&self.chunk_bytes) {
            return Err(format!("pcm.chunk_bytes = {}: allowed 8, 16, 32, 64", self.chunk_bytes));
        }
        if !(1..=64).contains(&self.chips) {
            return Err(format!("pcm.chips = {}: allowed 1..=64", self.chips));
        }
        for (key, v) in
            [("pcm.write_overhead_ns", self.write_overhead_ns), ("pcm.chunk_program_ns", self.chunk_program_ns)]
        {
            if v > 1_000_000 {
                return Err(format!("{key} = {v}: allowed 0..=1000000"));
            }
        }
        for (key, v) in [
            ("pcm.program_energy_pj_per_bit", self.program_energy_pj_per_bit),
            ("pcm.read_energy_pj_per_bit", self.read_energy_pj_per_bit),
            ("pcm.background_power_mw", self.background_power_mw),
        ] {
            // `contains` is false for NaN.
            if !(0.0..=1e6).contains(&v) {
                return Err(format!("{key} = {v}: allowed 0 to 1e6"));
            }
        }
        if !(1.0..=1e18).contains(&self.cell_endurance_writes) {
            return Err(format!("pcm.cell_endurance_writes = {}: allowed 1 to 1e18", self.cell_endurance_writes));
        }
        if !(0.0..=0.25).contains(&self.cell_endurance_cov) {
            return Err(format!("pcm.cell_endurance_cov = {}: allowed 0 to 0.25", self.cell_endurance_cov));
        }
        Ok(())
    }
}

/// What one write programmed and cost.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct WriteCost {
    /// Data cells programmed.
    pub data_bits: u64,
    /// Flip cells programmed.
    pub flip_bits: u64,
    /// Chunks with at least one programmed cell.
    pub chunks: u64,
    /// Device time of the write, ns.
    pub latency_ns: u64,
}

/// The device: flip state of every word, wear of every cell, energy.
pub struct Pcm {
    cfg: PcmConfig,
    /// One bit per FNW word of the device: stored inverted.
    flips: Vec<u64>,
    pub wear: Wear,
    /// Cells programmed and cells read since the last reset (energy is computed from them when
    /// asked: integer sums, exact, and cheaper per write than adding picojoules).
    programmed_cells: u64,
    read_cells: u64,
    /// Chunks holding a programmed cell, by mask of the block's programmed 64-bit words.
    chunks_of_words: [u8; 256],
    /// Latency of a block write, ns, by programmed chunks (0 to 8).
    block_latency_ns: [u64; 9],
    /// The block path's instructions ([`Simd::from_env`]: the host's widest unless
    /// [`SIMD_ENV`] chooses); AVX-512 puts one block or counter plane in a register.
    simd: Simd,
    /// The host has the (scalar) population count instruction: the portable path uses it for the
    /// Flip-N-Write choice (the generic code counts bits with about 12 word operations).
    popcnt: bool,
    /// Stuck cells and failed writes, with `retire_worn_cells` (boxed: the device stays small).
    pub retire: Option<Box<retire::Retire>>,
}

impl Pcm {
    /// A device of `bytes` bytes whose regions (name, first byte, bytes) are reported apart.
    pub fn new(cfg: &PcmConfig, bytes: u64, regions: &[(&'static str, u64, u64)]) -> Pcm {
        Pcm::try_new(cfg, bytes, regions).unwrap_or_else(|r| panic!("{r}"))
    }

    /// [`Pcm::new`], or [`Refused`](crate::hostmem::Refused) if the host does not give the
    /// memory of the device's flip states and cell counters.
    pub fn try_new(
        cfg: &PcmConfig,
        bytes: u64,
        regions: &[(&'static str, u64, u64)],
    ) -> Result<Pcm, crate::hostmem::Refused> {
        let words = bytes * 8 / cfg.fnw_word_bits;
        let per_chunk = (cfg.chunk_bytes / 8).max(1) as u32;
        let group = (1u32 << per_chunk) - 1;
        let chunks_of_words = std::array::from_fn(|m| {
            (0..8).step_by(per_chunk as usize).filter(|&i| m as u32 >> i & group != 0).count() as u8
        });
        let block_latency_ns =
            std::array::from_fn(|c| cfg.write_overhead_ns + (c as u64).div_ceil(cfg.chips) * cfg.chunk_program_ns);
        // The command line rejects a bad choice before any device is built; elsewhere (the
        // library, tests) a bad choice leaves the host's widest path.
        let simd = Simd::from_env().unwrap_or_else(|_| Simd::detect());
        #[cfg(target_arch = "x86_64")]
        let popcnt = std::arch::is_x86_feature_detected!("popcnt");
        #[cfg(not(target_arch = "x86_64"))]
        let popcnt = false;
        Ok(Pcm {
            cfg: cfg.clone(),
            flips: crate::hostmem::try_zeroed(words.div_ceil(64) as usize)?,
            wear: Wear::try_new(bytes, cfg.fnw_word_bits, regions)?,
            programmed_cells: 0,
            read_cells: 0,
            chunks_of_words,
            block_latency_ns,
            simd,
            popcnt,
            retire: cfg.retire_worn_cells.then(|| {
                let names: Vec<&'static str> = regions.iter().map(|r| r.0).collect();
                Box::new(retire::Retire::new(cfg, bytes, words, &names))
            }),
        })
    }

    /// Forget wear and energy so far (start of the measured region); the cells keep their
    /// contents and flip states.
    pub fn reset_stats(&mut self) {
        self.wear.clear();
        if let Some(r) = &mut self.retire {
            r.reset();
        }
        self.programmed_cells = 0;
        self.read_cells = 0;
    }

    /// Make this device as [`Pcm::new`] makes a new one (no wear, no energy, no stuck cell,
    /// no flipped word), at the cost of what was written since it was built or renewed, not
    /// of its size: for the crash checker, which opens a device per checked state.
    pub fn renew(&mut self) {
        self.reset_stats();
        self.flips.fill(0);
    }

    #[inline]
    fn flip(&self, w: u64) -> bool {
        self.flips[(w / 64) as usize] >> (w % 64) & 1 == 1
    }

    #[inline]
    fn set_flip(&mut self, w: u64, f: bool) {
        let (i, m) = ((w / 64) as usize, 1u64 << (w % 64));
        if f {
            self.flips[i] |= m;
        } else {
            self.flips[i] &= !m;
        }
    }

    /// Write `new` over `old` (the data currently stored logically) at byte `addr`; both slices
    /// have the same length, a multiple of the word size, and `addr` is word-aligned.
    pub fn write(&mut self, addr: u64, old: &[u8], new: &[u8]) -> WriteCost {
        match (<&[u8; 64]>::try_from(old), <&[u8; 64]>::try_from(new)) {
            (Ok(o), Ok(n)) if addr.is_multiple_of(64) => self.write_block_at(addr, o, n),
            _ => self.write_words(addr, old, new),
        }
    }

    /// [`Pcm::write`] of one aligned 64-byte block (every write of the memory controller, which
    /// calls this directly): the block path with 64-bit words, else word by word. The cells'
    /// counters are updated in batches ([`Wear::program_block`]); every reader of wear figures
    /// applies the waiting updates first.
    #[inline(always)]
    pub fn write_block_at(&mut self, addr: u64, old: &[u8; 64], new: &[u8; 64]) -> WriteCost {
        debug_assert!(addr.is_multiple_of(64));
        if self.cfg.fnw_word_bits != 64 {
            return self.write_words(addr, old, new);
        }
        match self.simd {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the host has the features `write_block_avx512` is compiled for
            // (`Simd::from_env` and `Simd::detect` checked them).
            Simd::Avx512 => unsafe { self.write_block_avx512(addr, old, new) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the host has the features `write_block_avx2` is compiled for (as above).
            Simd::Avx2 => unsafe { self.write_block_avx2(addr, old, new) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the host has the population count instruction (`Pcm::new` checked it).
            _ if self.popcnt => unsafe { self.write_block_popcnt(addr, old, new) },
            _ => self.write_block::<PORTABLE>(addr, old, new),
        }
    }

    /// [`Pcm::write_block`] with AVX-512 vectors.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,avx2,avx512f,avx512vpopcntdq")]
    fn write_block_avx512(&mut self, addr: u64, old: &[u8; 64], new: &[u8; 64]) -> WriteCost {
        self.write_block::<AVX512>(addr, old, new)
    }

    /// [`Pcm::write_block`]'s portable code with the population count instruction.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn write_block_popcnt(&mut self, addr: u64, old: &[u8; 64], new: &[u8; 64]) -> WriteCost {
        self.write_block::<PORTABLE>(addr, old, new)
    }

    /// [`Pcm::write_block`] with AVX2 vectors and the population count instruction.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt,avx2")]
    fn write_block_avx2(&mut self, addr: u64, old: &[u8; 64], new: &[u8; 64]) -> WriteCost {
        self.write_block::<AVX2>(addr, old, new)
    }

    /// [`Pcm::write`] of one aligned 64-byte block with 64-bit words (every block write of a
    /// run): the same result as [`Pcm::write_words`], without a branch per word: the block's
    /// eight flip states are read and written as one byte, the programmed chunks and the latency
    /// come from tables, and the counters are updated plane by plane. `AVX2`: the inner steps
    /// with vectors (only reached through [`Pcm::write_block_avx2`]).
    #[inline(always)]
    fn write_block<const V: u8>(&mut self, addr: u64, old: &[u8; 64], new: &[u8; 64]) -> WriteCost {
        let w0 = addr / 8;
        let (fi, fs) = ((w0 / 64) as usize, w0 % 64);
        let old_flips = (self.flips[fi] >> fs) as u8;
        let fnw = self.cfg.write_mode == WriteMode::Fnw;
        if self.retire.is_some() || self.cfg.write_mode == WriteMode::WriteAll {
            let mut changed = [0u64; 8];
            let ch = choose::<V>(old, new, old_flips, fnw, &mut changed);
            self.flips[fi] = self.flips[fi] & !(0xFF << fs) | (ch.new_flips as u64) << fs;
            return self.program_block_other::<V>(addr, ch, changed, old_flips ^ ch.new_flips);
        }
        // The choice writes the masks straight into the counters' batch: the common path makes
        // no copy of them (on the portable path a copy is eight 8-byte stores read back 16 bytes
        // at a time, which the host cannot forward from its store buffer).
        let ch = choose::<V>(old, new, old_flips, fnw, self.wear.queue(addr));
        let flips_changed = old_flips ^ ch.new_flips;
        self.wear.queued::<V>(flips_changed);
        self.flips[fi] = self.flips[fi] & !(0xFF << fs) | (ch.new_flips as u64) << fs;
        let cost = self.block_cost(ch.data_bits, ch.dirty, flips_changed);
        self.totals(addr, 64, &cost);
        cost
    }

    /// The programmed chunks and the latency of a block write that programs `data_bits` data
    /// cells in the words of `dirty` (bit i: word i) and changes the flip cells of `flips`.
    #[inline(always)]
    fn block_cost(&self, data_bits: u64, dirty: u8, flips: u8) -> WriteCost {
        let chunks = self.chunks_of_words[(dirty | flips) as usize] as u64;
        WriteCost {
            data_bits,
            flip_bits: flips.count_ones() as u64,
            chunks,
            latency_ns: self.block_latency_ns[chunks as usize],
        }
    }

    /// [`Pcm::write_block`] under write-all (every cell is programmed) or `retire_worn_cells`:
    /// the cost and the counter update from the choice `ch` with its masks `changed`, whose flip
    /// cells `flips_changed` change.
    #[inline(never)]
    fn program_block_other<const V: u8>(
        &mut self,
        addr: u64,
        ch: Choice,
        changed: [u64; 8],
        flips_changed: u8,
    ) -> WriteCost {
        // The cells whose value changes, and those programmed (all of them under write-all).
        let diff = (changed, flips_changed);
        let (prog, data_bits, dirty, prog_flips) = match self.cfg.write_mode {
            WriteMode::WriteAll => ([u64::MAX; 8], 512, 0xFF, 0),
            _ => (changed, ch.data_bits, ch.dirty, flips_changed),
        };
        let cost = self.block_cost(data_bits, dirty, prog_flips);
        if self.retire.is_some() {
            self.program_block_retiring::<V>(addr, diff, prog, prog_flips);
        } else {
            self.wear.program_block::<V>(addr, &prog, prog_flips);
        }
        self.totals(addr, 64, &cost);
        cost
    }

    /// [`Pcm::write_block`]'s counter update with `retire_worn_cells`: stuck cells are left out
    /// (a write that would change one is counted as failed), the counters are updated at once,
    /// and cells reaching their endurance are retired.
    #[inline(never)]
    fn program_block_retiring<const V: u8>(&mut self, addr: u64, diff: ([u64; 8], u8), prog: [u64; 8], flips: u8) {
        let r = self.retire.as_mut().expect("retiring");
        r.begin_write();
        let (w0, region) = (addr / 8, self.wear.region_of(addr));
        let mut wrong = retire::Wrong::default();
        let (mut cells, mut flip_cells) = ([0u64; 8], 0u8);
        for i in 0..8 {
            let word_diff = (diff.0[i], diff.1 >> i & 1 == 1);
            let (c, f) = r.mask_word(w0 + i as u64, 8, word_diff, (prog[i], flips >> i & 1 == 1), &mut wrong);
            cells[i] = c;
            flip_cells |= (f as u8) << i;
        }
        r.end_write(&wrong, region);
        self.wear.apply_block::<V>(addr, &cells, flip_cells);
        for (i, &c) in cells.iter().enumerate() {
            r.check_word(&mut self.wear, w0 + i as u64, 8, (c, flip_cells >> i & 1 == 1), region);
        }
    }

    /// Latency, energy and totals of a write whose programmed cells are counted in `cost`.
    #[inline]
    fn finish(&mut self, addr: u64, bytes: usize, mut cost: WriteCost) -> WriteCost {
        let steps = cost.chunks.div_ceil(self.cfg.chips);
        cost.latency_ns = self.cfg.write_overhead_ns + steps * self.cfg.chunk_program_ns;
        self.totals(addr, bytes, &cost);
        cost
    }

    /// Energy and totals of a write.
    #[inline(always)]
    fn totals(&mut self, addr: u64, bytes: usize, cost: &WriteCost) {
        self.wear.account(addr, cost.data_bits + cost.flip_bits);
        self.programmed_cells += cost.data_bits + cost.flip_bits;
        // Differential write reads the old contents first.
        if self.cfg.write_mode != WriteMode::WriteAll {
            self.read_cells += bytes as u64 * 8;
        }
    }

    /// [`Pcm::write`], word by word, for any word size and length.
    fn write_words(&mut self, addr: u64, old: &[u8], new: &[u8]) -> WriteCost {
        let wb = (self.cfg.fnw_word_bits / 8) as usize;
        debug_assert!(old.len() == new.len() && old.len().is_multiple_of(wb) && addr.is_multiple_of(wb as u64));
        let mut cost = WriteCost::default();
        let chunk = self.cfg.chunk_bytes as usize;
        let mut chunk_dirty = false;
        let region = self.wear.region_of(addr);
        let mut wrong = retire::Wrong::default();
        if let Some(r) = &mut self.retire {
            r.begin_write();
        }
        for (i, (o, n)) in old.chunks(wb).zip(new.chunks(wb)).enumerate() {
            let w = addr / wb as u64 + i as u64;
            let mask = if wb == 8 { u64::MAX } else { (1u64 << (8 * wb)) - 1 };
            let (o, n) = (word(o), word(n));
            let old_flip = self.flip(w);
            let stored_old = if old_flip { !o & mask } else { o };
            let (new_flip, stored_new) = self.choose(stored_old, n, old_flip, mask);
            let changed = stored_old ^ stored_new;
            let flip_changed = old_flip != new_flip;
            let mut prog = if self.cfg.write_mode == WriteMode::WriteAll {
                cost.data_bits += 8 * wb as u64;
                (mask, false)
            } else {
                cost.data_bits += changed.count_ones() as u64;
                cost.flip_bits += flip_changed as u64;
                (changed, flip_changed)
            };
            if let Some(r) = &self.retire {
                prog = r.mask_word(w, wb as u64, (changed, flip_changed), prog, &mut wrong);
            }
            self.wear.program_cells(w, prog.0, prog.1);
            if let Some(r) = &mut self.retire {
                r.check_word(&mut self.wear, w, wb as u64, prog, region);
            }
            self.set_flip(w, new_flip);
            chunk_dirty |= changed != 0 || flip_changed || self.cfg.write_mode == WriteMode::WriteAll;
            if ((i + 1) * wb).is_multiple_of(chunk) || (i + 1) * wb == old.len() {
                cost.chunks += chunk_dirty as u64;
                chunk_dirty = false;
            }
        }
        if let Some(r) = &mut self.retire {
            r.end_write(&wrong, region);
        }
        self.finish(addr, old.len(), cost)
    }

    /// Flip decision of one word: (flip state, stored bits).
    #[inline]
    fn choose(&self, stored_old: u64, n: u64, old_flip: bool, mask: u64) -> (bool, u64) {
        if self.cfg.write_mode != WriteMode::Fnw {
            return (false, n);
        }
        // Inverted storage differs from the old cells exactly where plain storage does not.
        let differ = (stored_old ^ n).count_ones();
        let plain = differ + old_flip as u32;
        let inverted = (mask.count_ones() - differ) + !old_flip as u32;
        if inverted < plain {
            (true, !n & mask)
        } else {
            (false, n)
        }
    }

    /// A hint that block `addr` is likely to be written soon: prefetch what its write reads at
    /// once into the host cache (no effect on results): its flip states and, only when worn
    /// cells are retired (the one path that updates counters at once), its counters
    /// ([`Wear::prefetch`]; `in_order`: the block is one of a run written in order, such as a
    /// log). Otherwise a write's counter update waits in the batch, which requests its own
    /// counter lines just before it applies them ([`Wear::program_block`]); counter lines
    /// fetched at the write, up to a batch earlier, only took host memory bandwidth and miss
    /// buffers from the lines the write does read (SPS with the device about 15 % faster
    /// without them on a Zen 5 EPYC: docs/performance.md, PCM mode).
    #[inline]
    pub fn prefetch_block(&self, addr: u64, in_order: bool) {
        crate::hostmem::prefetch(&self.flips[(addr / 8 / 64) as usize]);
        if self.retire.is_some() {
            self.wear.prefetch(addr, in_order);
        }
    }

    /// Account a read of `bytes`.
    pub fn read(&mut self, bytes: u64) {
        self.read_cells += bytes * 8;
    }

    /// Total energy in nJ over `seconds` of device time (programming, reads, background).
    pub fn energy_nj(&self, seconds: f64) -> f64 {
        let pj = self.programmed_cells as f64 * self.cfg.program_energy_pj_per_bit
            + self.read_cells as f64 * self.cfg.read_energy_pj_per_bit;
        pj / 1000.0 + self.cfg.background_power_mw * seconds * 1e6
    }

    /// Device time of a block write by its programmed chunks (0 to 8), ns: what
    /// [`WriteCost::latency_ns`] is for a 64-byte write.
    pub fn block_latency_ns(&self) -> [Ns; 9] {
        self.block_latency_ns.map(Ns::new)
    }

    pub fn config(&self) -> &PcmConfig {
        &self.cfg
    }

    /// The block path's instructions on this device.
    pub fn simd(&self) -> Simd {
        self.simd
    }
}

/// The Flip-N-Write (or differential) choice for one 64-byte block of 64-bit words, besides its
/// masks of programmed cells (written where the caller says: [`Pcm::write_block`]).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Choice {
    /// Bit i: word i is stored inverted.
    new_flips: u8,
    /// Bit i: word i has a programmed data cell.
    dirty: u8,
    /// Data cells programmed.
    data_bits: u64,
}

/// [`choose_block`] with the instructions `V` names.
#[inline(always)]
fn choose<const V: u8>(old: &[u8; 64], new: &[u8; 64], old_flips: u8, fnw: bool, changed: &mut [u64; 8]) -> Choice {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: with `V` naming vectors this runs inside `write_block_avx2` or
    // `write_block_avx512`, whose callers checked that the host has the features.
    unsafe {
        if V == AVX512 {
            return avx512::choose_block(old, new, old_flips, fnw, changed);
        } else if V == AVX2 {
            return avx2::choose_block(old, new, old_flips, fnw, changed);
        }
    }
    choose_block(old, new, old_flips, fnw, changed)
}

/// The choice of each word of a block whose flip states are `old_flips` (bit i: word i), with
/// Flip-N-Write (`fnw`) or without (differential write); `changed` receives the cells programmed,
/// per word (stored old contents XOR stored new contents).
#[inline(always)]
fn choose_block(old: &[u8; 64], new: &[u8; 64], old_flips: u8, fnw: bool, changed: &mut [u64; 8]) -> Choice {
    let mut ch = Choice::default();
    for (i, c) in changed.iter_mut().enumerate() {
        let o = u64::from_le_bytes(old[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        let n = u64::from_le_bytes(new[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        let old_flip = (old_flips >> i & 1) as u64;
        // The cells that differ from the stored (possibly inverted) old word. Plain storage
        // programs them plus the flip cell if it was set; inverted storage the other 64 plus
        // the flip cell if it was clear (as in `choose`): inverted is cheaper exactly when
        // differ + old_flip >= 33.
        let differ = o ^ old_flip.wrapping_neg() ^ n;
        let new_flip = (fnw && differ.count_ones() as u64 + old_flip >= 33) as u64;
        *c = differ ^ new_flip.wrapping_neg();
        ch.new_flips |= (new_flip as u8) << i;
    }
    // The programmed data cells are the changed ones (64 - differ under inversion), counted in
    // a pass of their own so that no per-word count stays live across the first.
    for (i, &c) in changed.iter().enumerate() {
        ch.data_bits += c.count_ones() as u64;
        ch.dirty |= ((c != 0) as u8) << i;
    }
    ch
}

/// A little-endian word of 1, 2, 4 or 8 bytes (fixed-size reads: no call to memcpy).
#[inline]
fn word(b: &[u8]) -> u64 {
    match b.len() {
        8 => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        4 => u32::from_le_bytes(b.try_into().expect("4 bytes")) as u64,
        2 => u16::from_le_bytes(b.try_into().expect("2 bytes")) as u64,
        _ => b[0] as u64,
    }
}

#[cfg(test)]
mod tests;
