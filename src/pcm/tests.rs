//! Hand-computed cell counts, the Flip-N-Write boundary, latency steps and wear bookkeeping.

use super::*;
use crate::types::Cycle;

fn pcm(mode: WriteMode) -> Pcm {
    let cfg = PcmConfig { write_mode: mode, ..PcmConfig::default() };
    Pcm::new(&cfg, 1 << 16, &[("data", 0, 1 << 15), ("log", 1 << 15, 1 << 15)])
}

fn word_bytes(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// A 64-bit word with the low `k` bits set.
fn low_bits(k: u32) -> u64 {
    if k == 64 {
        u64::MAX
    } else {
        (1u64 << k) - 1
    }
}

#[test]
fn differential_write_programs_only_the_changed_cells() {
    let mut p = pcm(WriteMode::Diff);
    let c = p.write(0, &word_bytes(0b1010), &word_bytes(0b0110));
    assert_eq!((c.data_bits, c.flip_bits, c.chunks), (2, 0, 1));
    let c = p.write(0, &word_bytes(7), &word_bytes(7));
    assert_eq!((c.data_bits, c.chunks), (0, 0), "a silent write programs nothing");
}

#[test]
fn flip_n_write_stores_a_word_inverted_when_40_bits_change() {
    let mut p = pcm(WriteMode::Fnw);
    let c = p.write(0, &word_bytes(0), &word_bytes(low_bits(40)));
    assert_eq!((c.data_bits, c.flip_bits), (24, 1), "24 data cells + 1 flip cell instead of 40");
    // Writing the same data again programs nothing: the inverted storage already holds it.
    let c = p.write(0, &word_bytes(low_bits(40)), &word_bytes(low_bits(40)));
    assert_eq!((c.data_bits, c.flip_bits), (0, 0));
    // Back to all zeros: the stored word is !low40 (24 ones). Un-flipped, 0 differs from it in
    // 24 cells, plus the flip cell: 25; kept inverted, !0 differs in 40. So it un-flips.
    let c = p.write(0, &word_bytes(low_bits(40)), &word_bytes(0));
    assert_eq!((c.data_bits, c.flip_bits), (24, 1));
}

#[test]
fn flip_n_write_keeps_32_changed_bits_and_flips_33() {
    // plain and inverted costs differ by an odd number (the flip cell counts), so no exact tie
    // exists: 32 changed cells cost 32 plain against 32 + 1 inverted; 33 cost 33 against 31 + 1.
    let mut p = pcm(WriteMode::Fnw);
    let c = p.write(0, &word_bytes(0), &word_bytes(low_bits(32)));
    assert_eq!((c.data_bits, c.flip_bits), (32, 0));
    let c = p.write(8, &word_bytes(0), &word_bytes(low_bits(33)));
    assert_eq!((c.data_bits, c.flip_bits), (31, 1));
}

#[test]
fn write_all_programs_every_cell_of_the_block() {
    let mut p = pcm(WriteMode::WriteAll);
    let c = p.write(64, &[0u8; 64], &[0u8; 64]);
    assert_eq!((c.data_bits, c.flip_bits, c.chunks), (512, 0, 2));
}

#[test]
fn latency_takes_a_step_per_four_programmed_chunks_that_is_every_128_bytes() {
    let cfg = PcmConfig::default();
    let (o, s) = (cfg.write_overhead_ns, cfg.chunk_program_ns);
    let mut p = pcm(WriteMode::Diff);
    let old = [0u8; 256];
    let mut new = [0u8; 256];
    assert_eq!(p.write(0, &old[..64], &new[..64]).latency_ns, o, "nothing programmed: no step");
    new[0] = 1;
    assert_eq!(p.write(0, &old[..64], &new[..64]).latency_ns, o + s, "one chunk: one step");
    let mut p = pcm(WriteMode::Diff);
    for c in 0..4 {
        new[32 * c] = 1;
    }
    assert_eq!(p.write(0, &old[..128], &new[..128]).latency_ns, o + s, "four chunks over four chips: one step");
    let mut p = pcm(WriteMode::Diff);
    new[128] = 1;
    let c = p.write(0, &old[..160], &new[..160]);
    assert_eq!((c.chunks, c.latency_ns), (5, o + 2 * s), "a fifth chunk past 128 bytes: a second step");
}

#[test]
fn wear_counts_each_cell_and_reports_totals_maxima_and_histograms_per_region() {
    let mut p = pcm(WriteMode::Diff);
    let (a, b) = (word_bytes(0), word_bytes(1));
    for i in 0..3 {
        let (o, n) = if i % 2 == 0 { (a, b) } else { (b, a) };
        p.write(0, &o, &n);
    }
    p.write(1 << 15, &word_bytes(0), &word_bytes(0b11));
    assert_eq!(p.wear.count(0, false), 3);
    assert_eq!(p.wear.count(1, false), 0);
    assert_eq!(p.wear.total_bit_updates, 5);
    let r = p.wear.regions();
    assert_eq!((r[0].name, r[0].total_bit_updates, r[0].max_bit_updates), ("data", 3, 3));
    assert_eq!(r[0].histogram, vec![0, 1], "one cell programmed 2..3 times");
    assert_eq!((r[1].total_bit_updates, r[1].max_bit_updates, r[1].histogram.clone()), (2, 1, vec![2]));
}

#[test]
fn a_cell_programmed_past_the_u16_range_keeps_its_exact_count() {
    let mut p = pcm(WriteMode::Diff);
    for i in 0..70_000u32 {
        let (o, n) = if i % 2 == 0 { (0u64, 1u64) } else { (1, 0) };
        p.write(0, &word_bytes(o), &word_bytes(n));
    }
    assert_eq!(p.wear.count(0, false), 70_000);
    assert_eq!(p.wear.regions()[0].max_bit_updates, 70_000);
}

#[test]
fn region_totals_count_each_write_in_the_first_region_holding_it_aligned_or_not() {
    // Regions that start and end inside pages, overlap, and leave bytes to none.
    let regions = [("a", 0u64, 5000u64), ("b", 5000, 8000), ("c", 9000, 20_000), ("d", 40_960, 4096)];
    let mut p = Pcm::new(&PcmConfig::default(), 1 << 16, &regions);
    let mut want = [0u64; 4];
    let mut rng = crate::rng::Rng::new(7);
    let mut mem = vec![0u8; 1 << 16];
    for _ in 0..3000 {
        let at = rng.below(1 << 10) * 64;
        let new: [u8; 64] = std::array::from_fn(|_| rng.next_u64() as u8);
        let cost = p.write(at, &mem[at as usize..at as usize + 64], &new);
        mem[at as usize..at as usize + 64].copy_from_slice(&new);
        if let Some(i) = regions.iter().position(|&(_, s, l)| at >= s && at < s + l) {
            want[i] += cost.data_bits + cost.flip_bits;
        }
    }
    let got: Vec<u64> = p.wear.regions().iter().map(|r| r.total_bit_updates).collect();
    assert_eq!(got, want, "seed 7");
}

#[test]
fn counters_are_committed_a_region_at_a_time_without_losing_counts() {
    // Pages (4 KiB): 0 in "a", 1 shared by "a" and "b", 2 - 3 in "b", 4 - 7 in none. The first
    // write (page 0) commits the pages of "a"; the first to "b" (page 3, after page 1 was
    // written) commits those of "b" but must leave page 1 as it is; a page of no region is
    // committed alone.
    let regions = [("a", 0u64, 5000u64), ("b", 5000, 8000)];
    let mut p = Pcm::new(&PcmConfig { write_mode: WriteMode::Diff, ..PcmConfig::default() }, 1 << 15, &regions);
    p.wear.commit_regions_whole();
    for &at in &[0u64, 4096, 12288, 20480, 4096, 5120] {
        p.write(at, &word_bytes(0), &word_bytes(1));
        p.write_block_at(at + 64, &[0; 64], &[0xFF; 64]);
    }
    for (at, n) in [(0u64, 1), (4096, 2), (12288, 1), (20480, 1), (5120, 1), (8192, 0), (16384, 0)] {
        assert_eq!(p.wear.count(at * 8, false), n, "bit 0 of byte {at}");
        assert_eq!(p.wear.count((at + 64) * 8 + 5, false), n, "a cell of the block after byte {at}");
    }
    p.reset_stats();
    p.write(12288, &word_bytes(1), &word_bytes(0));
    assert_eq!((p.wear.count(12288 * 8, false), p.wear.count(4096 * 8, false)), (1, 0));
}

/// Model-based: in a region larger than `Wear::WHOLE_REGION_PAGES` pages, the first write to a
/// page commits the pages around it (those sharing its host huge page of counters), never a
/// whole region, even with [`Wear::commit_regions_whole`]; pages are written in a seeded random
/// order, at their first counter word (the one committing zeroes) and in a block, across the
/// large region, a small region committed whole and the pages of no region. A page zeroed
/// again after it was written, or counted without being committed, changes a count or a
/// region's figures.
#[test]
fn counters_of_a_large_region_are_committed_a_host_huge_page_at_a_time() {
    let seed = 0xC0;
    println!("seed {seed}");
    let big = Wear::WHOLE_REGION_PAGES as u64 + 300;
    let (small, outside) = (40u64, 8u64);
    let pages = big + small + outside;
    let regions = [("big", 0u64, big * 4096), ("small", big * 4096, small * 4096)];
    let mut p = Pcm::new(&PcmConfig { write_mode: WriteMode::Diff, ..PcmConfig::default() }, pages * 4096, &regions);
    p.wear.commit_regions_whole();
    // The first write to the large region commits planes 0-1 of the pages of one huge page of
    // counters (256 pages of 8 KiB, and the written page itself if its counters cross into the
    // next), and no page's planes 2-7: no cell was programmed four times.
    p.write(4096 * 1000, &word_bytes(0), &word_bytes(1));
    p.write_block_at(4096 * 1000 + 64, &[0; 64], &[0xFF; 64]);
    p.wear.flush();
    let got = p.wear.committed_pages();
    let huge = Wear::PAGES_PER_HUGE;
    assert!(got.contains(&1000) && (huge - 1..=huge + 1).contains(&got.len()), "{} pages committed", got.len());
    assert!(got.windows(2).all(|w| w[1] == w[0] + 1), "contiguous: {got:?}");
    assert_eq!(p.wear.committed_mid_pages(), Vec::<usize>::new());
    let mut rng = crate::rng::Rng::new(seed);
    let mut want = vec![0u64; pages as usize];
    want[1000] = 1;
    for _ in 0..3000 {
        let page = rng.below(pages);
        let at = page * 4096;
        let k = want[page as usize];
        p.write(at, &word_bytes(k & 1), &word_bytes(!k & 1));
        p.write_block_at(at + 64, &[k as u8; 64], &[!k as u8; 64]);
        want[page as usize] += 1;
    }
    for page in 0..pages {
        let (at, n) = (page * 4096, want[page as usize]);
        assert_eq!(p.wear.count(at * 8, false), n, "seed {seed}: bit 0 of page {page}");
        assert_eq!(p.wear.count((at + 64) * 8 + 3, false), n, "seed {seed}: a cell of page {page}'s block 1");
    }
    let committed = p.wear.committed_pages();
    assert!((0..pages).all(|q| want[q as usize] == 0 || committed.binary_search(&(q as usize)).is_ok()), "seed {seed}");
    assert!((committed.len() as u64) < pages, "seed {seed}: {} of {pages} pages committed", committed.len());
    let r = p.wear.regions();
    for (i, pages) in [0..big, big..big + small].into_iter().enumerate() {
        let max = pages.clone().map(|q| want[q as usize]).max().unwrap_or(0);
        assert_eq!(r[i].max_bit_updates, max, "seed {seed}: region {}", r[i].name);
        let cells: u64 = pages.map(|q| want[q as usize] * 513).sum();
        assert_eq!(r[i].total_bit_updates, cells, "seed {seed}: region {}", r[i].name);
    }
}

/// Planes 2-7 of a region not committed whole are committed a device page at a time, at the
/// first carry out of plane 1 in that page: a cell's fourth program commits its own page's
/// planes and no other page's (a host huge page at a time would be 85 pages).
#[test]
fn planes_2_to_7_are_committed_for_the_page_a_carry_reaches_only() {
    let pages = 1000u64;
    let regions = [("a", 0u64, pages * 4096)];
    let mut p = Pcm::new(&PcmConfig { write_mode: WriteMode::Diff, ..PcmConfig::default() }, pages * 4096, &regions);
    let at = 4096 * 500 + 64 * 3;
    let fill = |k: u8| [if k.is_multiple_of(2) { 0 } else { 0xFF }; 64];
    for k in 0..3 {
        p.write_block_at(at, &fill(k), &fill(k + 1));
    }
    p.wear.flush();
    assert_eq!(p.wear.committed_mid_pages(), Vec::<usize>::new(), "three programs carry into plane 1 only");
    p.write_block_at(at, &fill(3), &fill(4));
    p.wear.flush();
    assert_eq!(p.wear.committed_mid_pages(), vec![500], "the fourth program carries into plane 2");
    assert_eq!(p.wear.count((at + 5) * 8, false), 4);
}

/// A region of at most `Wear::WHOLE_REGION_PAGES` pages is committed a host huge page of
/// counters at a time by default and whole at its first write with
/// [`Wear::commit_regions_whole`] (what `bench` asks for); the same seeded random writes
/// (first counter words, blocks, both regions and the pages of no region) give every count and
/// every region's figures alike either way.
#[test]
fn a_region_is_committed_whole_only_when_asked_and_counts_the_same_either_way() {
    let seed = 0xC1;
    let (a, b, outside) = (1000u64, 300u64, 8u64);
    let pages = a + b + outside;
    let regions = [("a", 0u64, a * 4096), ("b", a * 4096, b * 4096)];
    let cfg = PcmConfig { write_mode: WriteMode::Fnw, ..PcmConfig::default() };
    let (mut lazy, mut whole) = (Pcm::new(&cfg, pages * 4096, &regions), Pcm::new(&cfg, pages * 4096, &regions));
    whole.wear.commit_regions_whole();
    for p in [&mut lazy, &mut whole] {
        p.write(4096 * 500, &word_bytes(0), &word_bytes(1));
        p.wear.flush();
    }
    let (l, w) = (lazy.wear.committed_pages(), whole.wear.committed_pages());
    let huge = Wear::PAGES_PER_HUGE;
    assert!(l.contains(&500) && (huge - 1..=huge + 1).contains(&l.len()), "by default {} pages committed", l.len());
    assert_eq!(w, (0..a as usize).collect::<Vec<_>>(), "asked: region a whole, nothing else");
    // Planes 2-7: with the region when it is committed whole, otherwise not before a carry.
    assert_eq!(whole.wear.committed_mid_pages(), w, "asked: planes 2-7 of region a too");
    assert_eq!(lazy.wear.committed_mid_pages(), Vec::<usize>::new(), "by default: no planes 2-7");
    let mut rng = crate::rng::Rng::new(seed);
    for _ in 0..3000 {
        let at = rng.below(pages) * 4096 + rng.below(64) * 64;
        let (old, new) = (rng.next_u64(), rng.next_u64());
        let (old_block, new_block) = ([old as u8; 64], [new as u8; 64]);
        for p in [&mut lazy, &mut whole] {
            p.write(at, &word_bytes(old), &word_bytes(new));
            p.write_block_at(at / 64 * 64, &old_block, &new_block);
        }
    }
    assert_eq!(lazy.wear.total_bit_updates, whole.wear.total_bit_updates, "seed {seed}");
    assert_eq!(lazy.wear.regions(), whole.wear.regions(), "seed {seed}");
    for page in 0..pages {
        for bit in [0, 8 * 64 + 3, 8 * 4095 + 7] {
            let cell = page * 4096 * 8 + bit;
            assert_eq!(lazy.wear.count(cell, false), whole.wear.count(cell, false), "seed {seed}: cell {cell}");
        }
        let flip = page * 4096 * 8;
        assert_eq!(lazy.wear.count(flip, true), whole.wear.count(flip, true), "seed {seed}: flip cell of page {page}");
    }
}

#[test]
fn flip_cells_wear_too() {
    let mut p = pcm(WriteMode::Fnw);
    p.write(0, &word_bytes(0), &word_bytes(u64::MAX));
    assert_eq!(p.wear.count(0, true), 1, "the flip cell of word 0 was programmed once");
    assert_eq!(p.wear.total_bit_updates, 1, "all ones stored as zeros: only the flip cell");
}

#[test]
fn energy_counts_programmed_cells_reads_and_background() {
    let cfg = PcmConfig::default();
    let mut p = pcm(WriteMode::Diff);
    p.write(0, &word_bytes(0), &word_bytes(0xF));
    let want = 4.0 * cfg.program_energy_pj_per_bit + 64.0 * cfg.read_energy_pj_per_bit;
    assert!((p.energy_nj(0.0) * 1000.0 - want).abs() < 1e-9);
    assert!((p.energy_nj(1e-3) - p.energy_nj(0.0) - cfg.background_power_mw * 1e-3 * 1e6).abs() < 1e-6);
}

#[test]
fn counters_hold_every_page_low_half_and_a_high_half_per_page_past_255_programs() {
    let mut p = pcm(WriteMode::Diff);
    // 16 device pages of 4 KiB: the low halves (one byte per data and flip cell) are all held
    // from the start; the bookkeeping is a byte, a word and a pointer per page.
    let low = 16 * (4096 * 8 + 4096 * 8 / 64);
    let bookkeeping = 16 * (1 + 8 + std::mem::size_of::<Option<Box<[u64]>>>() as u64);
    assert_eq!(p.wear.host_bytes(), low + bookkeeping);
    // One cell programmed 255 times stays in the low half; the 256th program carries into the
    // page's high half, which is then allocated (as large as the low half).
    for k in 0..255u64 {
        p.write(8192, &word_bytes(k & 1), &word_bytes(!k & 1));
    }
    assert_eq!(p.wear.host_bytes(), low + bookkeeping);
    p.write(8192, &word_bytes(1), &word_bytes(0));
    assert_eq!(p.wear.count(8192 * 8, false), 256);
    assert_eq!(p.wear.host_bytes(), low + low / 16 + bookkeeping);
}

/// Model-based: the bit-sliced counters against one plain u64 per cell, with random masks over
/// a few words, one cell driven to exactly 65 536 programs (all planes zero again) and one past
/// it; every count, total, maximum and histogram must agree.
#[test]
fn bit_sliced_counters_equal_plain_per_cell_counts() {
    let seed = 0x5EED;
    println!("seed {seed}");
    let mut rng = crate::rng::Rng::new(seed);
    for word_bits in [8u64, 64] {
        let bytes = 3 * 4096;
        let regions = [("a", 0, 4096), ("b", 4096, 2 * 4096)];
        let mut w = Wear::new(bytes, word_bits, &regions);
        let cells = (bytes * 8) as usize;
        let words = (bytes * 8 / word_bits) as usize;
        let (mut data, mut flips) = (vec![0u64; cells], vec![0u64; words]);
        let mask = if word_bits == 64 { u64::MAX } else { (1 << word_bits) - 1 };
        let mut program = |w: &mut Wear, word: u64, changed: u64, flip: bool| {
            w.program_word(word, changed, flip);
            for i in 0..word_bits {
                data[(word * word_bits + i) as usize] += changed >> i & 1;
            }
            flips[word as usize] += flip as u64;
        };
        for _ in 0..65_536 {
            program(&mut w, 3, 1 << 5, false);
        }
        for _ in 0..70_001 {
            program(&mut w, 700, 1, true);
        }
        for _ in 0..20_000 {
            let word = rng.below(words as u64);
            let changed = rng.next_u64() & rng.next_u64() & mask;
            program(&mut w, word, changed, rng.chance(0.3));
        }
        for (c, &n) in data.iter().enumerate() {
            assert_eq!(w.count(c as u64, false), n, "word_bits {word_bits} cell {c}");
        }
        for (f, &n) in flips.iter().enumerate() {
            assert_eq!(w.count(f as u64 * word_bits, true), n, "word_bits {word_bits} flip {f}");
        }
        let reported = w.regions();
        for (r, &(name, start, len)) in reported.iter().zip(&regions) {
            let in_r = |byte: u64| byte >= start && byte < start + len;
            let mut want = RegionWear { name, histogram: vec![0; 40], ..Default::default() };
            let counts = data.iter().enumerate().filter(|(c, _)| in_r(*c as u64 / 8)).map(|(_, &n)| n);
            let flip_counts =
                flips.iter().enumerate().filter(|(f, _)| in_r(*f as u64 * word_bits / 8)).map(|(_, &n)| n);
            for n in counts.chain(flip_counts).filter(|&n| n > 0) {
                want.total_bit_updates += n;
                want.max_bit_updates = want.max_bit_updates.max(n);
                want.histogram[63 - n.leading_zeros() as usize] += 1;
            }
            while want.histogram.last() == Some(&0) {
                want.histogram.pop();
            }
            assert_eq!(*r, want, "word_bits {word_bits}");
        }
    }
}

/// Model-based: the block fast path (`write_block`) against the word-by-word path
/// (`write_words`) on two devices fed the same random blocks, some written over and over (past
/// 65 536 programs), in every write mode: same costs, flip states, energy and cell counts.
#[test]
fn block_writes_equal_word_by_word_writes() {
    let seed = 0xFA57;
    println!("seed {seed}");
    let mut rng = crate::rng::Rng::new(seed);
    for mode in [WriteMode::Fnw, WriteMode::Diff, WriteMode::WriteAll] {
        let (mut fast, mut slow) = (pcm(mode), pcm(mode));
        let mut mem = vec![0u8; 1 << 16];
        for k in 0..200_000u64 {
            // Mostly one hot block (its cells wrap past the u16 range), else random blocks.
            let b = if k % 8 != 0 { 5 } else { rng.below(1 << 10) };
            let range = b as usize * 64..b as usize * 64 + 64;
            let mut new = [0u8; 64];
            for (i, x) in new.iter_mut().enumerate() {
                *x = match (k + i as u64) % 3 {
                    0 => rng.next_u64() as u8,
                    1 => !mem[range.start + i],
                    _ => mem[range.start + i],
                };
            }
            let old: [u8; 64] = mem[range.clone()].try_into().unwrap();
            let a = fast.write(b * 64, &old, &new);
            let c = slow.write_words(b * 64, &old, &new);
            assert_eq!(a, c, "{mode:?} write {k}");
            mem[range].copy_from_slice(&new);
        }
        assert_eq!(fast.flips, slow.flips, "{mode:?}");
        assert_eq!(fast.energy_nj(1e-3), slow.energy_nj(1e-3));
        assert_eq!(fast.wear.regions(), slow.wear.regions(), "{mode:?}");
        for bit in (0..(1u64 << 19)).step_by(7).chain(5 * 512..6 * 512) {
            assert_eq!(fast.wear.count(bit, false), slow.wear.count(bit, false), "{mode:?} bit {bit}");
            assert_eq!(fast.wear.count(bit, true), slow.wear.count(bit, true), "{mode:?} flip of bit {bit}");
        }
        assert!(fast.wear.regions()[0].max_bit_updates > 65_536 || mode == WriteMode::Fnw, "{mode:?}");
    }
}

/// Model-based: block writes (the path of every run: counter updates wait in batches, applied
/// when a batch fills or a count is read) against a naive device: stored cells, flip states and one u64 count per cell, the
/// Flip-N-Write choice made word by word from the definition. Random blocks changing every
/// 64-bit word (counter lane) or only one or two, a hot block driven past 65 536 programs
/// (through the high halves into the map of wraps), flip cells, counts read between writes
/// (the batch applied early) and a reset of the counters half-way; every count and every figure
/// must agree.
#[test]
fn block_writes_equal_a_naive_per_cell_model() {
    let seed = 0xB10C;
    println!("seed {seed}");
    let mut rng = crate::rng::Rng::new(seed);
    let bytes = 1u64 << 16;
    let mut p = pcm(WriteMode::Fnw);
    let mut logical = vec![0u8; bytes as usize];
    let (mut cells, mut flip_cells) = (vec![0u64; bytes as usize * 8], vec![0u64; bytes as usize / 8]);
    let mut stored_flip = vec![false; bytes as usize / 8];
    for k in 0..260_000u64 {
        if k == 20_000 {
            p.reset_stats();
            cells.iter_mut().chain(&mut flip_cells).for_each(|c| *c = 0);
        }
        let b = if k % 8 != 0 { 9 } else { rng.below(bytes / 64) };
        // The 64-bit words (counter lanes) the write may change: all of them (a log block), or
        // one or two (a store); word 0 of the hot block always, so that its cells wrap.
        let words = match rng.below(3) {
            0 => 0xFF,
            1 => 1u8 << rng.below(8),
            _ => 1u8 << rng.below(8) | 1 << rng.below(8),
        } | (b == 9) as u8;
        let mut new = [0u8; 64];
        for (i, x) in new.iter_mut().enumerate() {
            let old = logical[b as usize * 64 + i];
            *x = match rng.below(4) {
                _ if words >> (i / 8) & 1 == 0 => old,
                0 => rng.next_u64() as u8,
                1 => !old,
                _ => old ^ (rng.next_u64() & rng.next_u64()) as u8,
            };
        }
        let range = b as usize * 64..b as usize * 64 + 64;
        let old: &[u8; 64] = logical[range.clone()].try_into().unwrap();
        let cost = p.write_block_at(b * 64, old, &new);
        let mut want = WriteCost::default();
        for w in 0..8 {
            let at = range.start + 8 * w;
            let word = at / 8;
            let o = u64::from_le_bytes(logical[at..at + 8].try_into().unwrap());
            let n = u64::from_le_bytes(new[8 * w..8 * w + 8].try_into().unwrap());
            let old_cells = if stored_flip[word] { !o } else { o };
            let plain = (old_cells ^ n).count_ones() + stored_flip[word] as u32;
            let inverted = (old_cells ^ !n).count_ones() + !stored_flip[word] as u32;
            let flip = inverted < plain;
            let new_cells = if flip { !n } else { n };
            for i in 0..64 {
                cells[word * 64 + i] += (old_cells ^ new_cells) >> i & 1;
            }
            want.data_bits += (old_cells ^ new_cells).count_ones() as u64;
            if flip != stored_flip[word] {
                flip_cells[word] += 1;
                want.flip_bits += 1;
            }
            stored_flip[word] = flip;
        }
        assert_eq!((cost.data_bits, cost.flip_bits), (want.data_bits, want.flip_bits), "write {k}");
        logical[range].copy_from_slice(&new);
        if k % 1_009 == 0 {
            let bit = rng.below(bytes * 8);
            assert_eq!(p.wear.count(bit, false), cells[bit as usize], "write {k} bit {bit}");
        }
    }
    for (bit, &n) in cells.iter().enumerate() {
        assert_eq!(p.wear.count(bit as u64, false), n, "bit {bit}");
    }
    for (word, &n) in flip_cells.iter().enumerate() {
        assert_eq!(p.wear.count(word as u64 * 64, true), n, "flip of word {word}");
    }
    assert!(cells[9 * 512..10 * 512].iter().any(|&n| n > 65_536), "the hot block wrapped");
    assert!(flip_cells[9 * 8] > 255, "the hot word's flip cell reached the high half");
    let regions = [("data", 0u64, 1u64 << 15), ("log", 1 << 15, 1 << 15)];
    for (r, (name, start, len)) in p.wear.regions().into_iter().zip(regions) {
        let mut want = RegionWear { name, histogram: vec![0; 40], ..Default::default() };
        let in_r = |byte: u64| byte >= start && byte < start + len;
        let data = cells.iter().enumerate().filter(|(c, _)| in_r(*c as u64 / 8)).map(|(_, &n)| n);
        let flips = flip_cells.iter().enumerate().filter(|(w, _)| in_r(*w as u64 * 8)).map(|(_, &n)| n);
        for n in data.chain(flips).filter(|&n| n > 0) {
            want.total_bit_updates += n;
            want.max_bit_updates = want.max_bit_updates.max(n);
            want.histogram[63 - n.leading_zeros() as usize] += 1;
        }
        while want.histogram.last() == Some(&0) {
            want.histogram.pop();
        }
        assert_eq!(r, want);
    }
}

/// The vector twins of the block path's inner steps against the portable ones, on random
/// blocks with every mix of flip states and on random counter planes (the carries reaching
/// every depth, and past the top plane).
#[cfg(target_arch = "x86_64")]
#[test]
fn vector_block_steps_equal_the_portable_ones() {
    if !(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("popcnt")) {
        println!("host without AVX2: nothing to compare");
        return;
    }
    let avx512 =
        std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512vpopcntdq");
    println!("AVX-512 compared too: {avx512}");
    let seed = 0xA5A5;
    println!("seed {seed}");
    let mut rng = crate::rng::Rng::new(seed);
    let mut block = || {
        let mut b = [0u8; 64];
        for c in b.chunks_exact_mut(8) {
            let v = match rng.below(4) {
                0 => 0,
                1 => rng.next_u64() & rng.next_u64(),
                2 => !(rng.next_u64() & rng.next_u64()),
                _ => rng.next_u64(),
            };
            c.copy_from_slice(&v.to_le_bytes());
        }
        b
    };
    for k in 0..20_000u32 {
        let (old, new) = (block(), block());
        let flips = (k % 256) as u8;
        for fnw in [true, false] {
            let (mut vc, mut pc) = ([0u64; 8], [0u64; 8]);
            // SAFETY: the host has AVX2 and popcnt (checked above).
            let v = unsafe { avx2::choose_block(&old, &new, flips, fnw, &mut vc) };
            assert_eq!((v, vc), (choose_block(&old, &new, flips, fnw, &mut pc), pc), "block {k} fnw {fnw}");
            if avx512 {
                let mut wc = [0u64; 8];
                // SAFETY: the host has AVX-512F and its population count (checked above).
                let w = unsafe { avx512::choose_block(&old, &new, flips, fnw, &mut wc) };
                assert_eq!((w, wc), (v, vc), "AVX-512, block {k} fnw {fnw}");
            }
        }
    }
    for k in 0..20_000u32 {
        let mut planes = [0u64; 64];
        for x in planes.iter_mut() {
            // Dense ones in the low planes make carries run deep.
            *x = if k % 2 == 0 { !(rng.next_u64() & rng.next_u64() & rng.next_u64()) } else { rng.next_u64() };
        }
        let mut carry = [0u64; 8];
        for c in carry.iter_mut() {
            *c = rng.next_u64() | rng.next_u64();
        }
        let (mut p1, mut c1) = (planes, carry);
        // SAFETY: the host has AVX2 (checked above).
        let v = unsafe { avx2::add_block(&mut p1, &mut c1) };
        if avx512 {
            let (mut p3, mut c3) = (planes, carry);
            // SAFETY: the host has AVX-512F (checked above).
            let w = unsafe { avx512::add_block(&mut p3, &mut c3) };
            assert_eq!((w, p3), (v, p1), "AVX-512, planes {k}");
            if w != 0 {
                assert_eq!(c3, c1, "AVX-512, carries out of planes {k}");
            }
        }
        let (mut p2, mut c2) = (planes, carry);
        let s = wear::add_block(&mut p2, &mut c2);
        assert_eq!((v, p1), (s, p2), "planes {k}");
        if v != 0 {
            assert_eq!(c1, c2, "carries out of planes {k}");
        }
        // Planes 0-1 and 2-7 as the counters keep them (two and six planes).
        let (mut lo, mut mid) =
            (<[u64; 16]>::try_from(&planes[..16]).unwrap(), <[u64; 48]>::try_from(&planes[16..]).unwrap());
        let (mut lo2, mut mid2, mut c4, mut c5) = (lo, mid, carry, carry);
        // SAFETY: the host has AVX2 (checked above).
        let (a, b) = unsafe { (avx2::add_block(&mut lo, &mut c4), wear::add_block(&mut lo2, &mut c5)) };
        assert_eq!((a, lo), (b, lo2), "planes 0-1, {k}");
        if a != 0 {
            assert_eq!(c4, c5, "carries out of planes 0-1, {k}");
            // SAFETY: as above.
            let (a, b) = unsafe { (avx2::add_block(&mut mid, &mut c4), wear::add_block(&mut mid2, &mut c5)) };
            assert_eq!((a, mid), (b, mid2), "planes 2-7, {k}");
            let joined: Vec<u64> = lo.iter().chain(&mid).copied().collect();
            assert_eq!((a, &joined[..]), (v, &p1[..]), "planes 0-1 then 2-7 as all eight, {k}");
        } else {
            assert_eq!(&lo[..], &p1[..16], "planes 0-1 as all eight, {k}");
        }
        if avx512 {
            let (mut lo3, mut c6) = (<[u64; 16]>::try_from(&planes[..16]).unwrap(), carry);
            // SAFETY: the host has AVX-512F (checked above).
            let w = unsafe { avx512::add_block(&mut lo3, &mut c6) };
            assert_eq!((w, lo3), (a, lo), "AVX-512, planes 0-1, {k}");
        }
    }
}

/// A differential-write device (64-bit words, or 16-bit with `word_bits`) whose cells stick after
/// `endurance` programs.
fn retiring(endurance: f64, word_bits: u64) -> Pcm {
    let cfg = PcmConfig {
        write_mode: WriteMode::Diff,
        fnw_word_bits: word_bits,
        retire_worn_cells: true,
        cell_endurance_writes: endurance,
        ..PcmConfig::default()
    };
    Pcm::new(&cfg, 1 << 16, &[("data", 0, 1 << 15), ("log", 1 << 15, 1 << 15)])
}

/// A block whose byte 5 of the log region is `v`.
fn log_block(v: u8) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[5] = v;
    b
}

/// Toggle bit 2 of byte (1 << 15) + 5 four times, through the block path or word by word; returns
/// the device's and the log region's figures.
fn toggle_four_times(p: &mut Pcm, by_block: bool) -> (RetireFigures, RetireFigures) {
    let states = [0u8, 4, 0, 4, 0];
    for (i, w) in states.windows(2).enumerate() {
        if let Some(r) = &mut p.retire {
            r.cycle = Cycle::new(100 * (i as u64 + 1));
        }
        let (old, new) = (log_block(w[0]), log_block(w[1]));
        if by_block {
            p.write_block_at(1 << 15, &old, &new);
        } else {
            p.write(1 << 15, &old[..8], &new[..8]);
        }
    }
    let f = &p.retire.as_ref().expect("retiring").figures;
    assert_eq!(f[1], RetireFigures { name: "data", ..Default::default() }, "nothing happened in the data region");
    (f[0].clone(), f[2].clone())
}

#[test]
fn a_cell_sticks_at_its_endurance_and_a_write_that_would_change_it_fails_its_read_back() {
    for (word_bits, by_block) in [(64, true), (64, false), (16, false)] {
        let mut p = retiring(3.0, word_bits);
        let (device, log) = toggle_four_times(&mut p, by_block);
        let cell = |write, cycle| Some(CellEvent { byte: (1 << 15) + 5, bit: 2, flip_cell: false, write, cycle });
        let want = RetireFigures {
            name: "log",
            retired_cells: 1,
            first_retired: cell(3, Cycle::new(300)),
            failed_writes: 1,
            failed_cells: 1,
            first_failed_write: cell(4, Cycle::new(400)),
        };
        assert_eq!(log, want, "{word_bits}-bit words, block path {by_block}");
        assert_eq!(device, RetireFigures { name: "device", ..want });
        assert_eq!(p.wear.count(((1 << 15) + 5) * 8 + 2, false), 3, "a stuck cell is not programmed again");
    }
}

#[test]
fn a_write_leaving_a_stuck_cell_at_its_value_does_not_fail() {
    let mut p = retiring(1.0, 64);
    p.write_block_at(1 << 15, &log_block(0), &log_block(4));
    p.write_block_at(1 << 15, &log_block(4), &log_block(4 | 1));
    let log = &p.retire.as_ref().unwrap().figures[2];
    assert_eq!((log.retired_cells, log.failed_writes), (2, 0), "bit 2 stays 1 as written; bit 0 newly programmed");
    p.write_block_at(1 << 15, &log_block(5), &log_block(0));
    let log = &p.retire.as_ref().unwrap().figures[2];
    assert_eq!((log.failed_writes, log.failed_cells), (1, 2));
}

#[test]
fn the_device_is_new_again_when_the_measured_region_starts() {
    let mut p = retiring(1.0, 64);
    p.write_block_at(1 << 15, &log_block(0), &log_block(4));
    p.reset_stats();
    p.write_block_at(1 << 15, &log_block(4), &log_block(0));
    let log = &p.retire.as_ref().unwrap().figures[2];
    assert_eq!((log.retired_cells, log.failed_writes), (1, 0));
    assert_eq!(log.first_retired.map(|e| e.write), Some(1));
}

#[test]
fn endurance_spread_is_seeded_centred_and_bounded() {
    let cfg = PcmConfig { cell_endurance_writes: 1000.0, cell_endurance_cov: 0.2, ..PcmConfig::default() };
    let r = retire::Retire::new(&cfg, 1 << 12, 0, &[]);
    let e: Vec<u64> = (0..20_000).map(|id| r.endurance_of(id)).collect();
    let mean = e.iter().sum::<u64>() as f64 / e.len() as f64;
    let sd = (e.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / e.len() as f64).sqrt();
    assert!((mean - 1000.0).abs() < 5.0, "mean {mean}");
    assert!((sd - 200.0).abs() < 10.0, "standard deviation {sd}");
    assert!(e.iter().all(|&x| (300..=1700).contains(&x)), "Irwin-Hall: within 3.47 deviations");
    let again = retire::Retire::new(&cfg, 1 << 12, 0, &[]);
    assert!((0..100).all(|id| again.endurance_of(id) == r.endurance_of(id)), "same seed, same cells");
    let other = retire::Retire::new(&PcmConfig { cell_endurance_seed: 2, ..cfg }, 1 << 12, 0, &[]);
    assert!((0..100).any(|id| other.endurance_of(id) != r.endurance_of(id)));
}

/// A renewed device (`Pcm::renew`) behaves as a new one: the same writes cost the same cells,
/// chunks and time, leave the same per-region wear, the same counts and the same stuck cells,
/// whatever the device went through before (flipped words, wear, cells stuck at endurance 3).
#[test]
fn a_renewed_device_behaves_as_a_new_one() {
    use crate::rng::Rng;
    for (mode, endurance) in [(WriteMode::Fnw, 1e8), (WriteMode::Diff, 3.0)] {
        let make = || {
            let cfg = PcmConfig {
                write_mode: mode,
                retire_worn_cells: endurance < 10.0,
                cell_endurance_writes: endurance,
                ..PcmConfig::default()
            };
            Pcm::new(&cfg, 1 << 16, &[("data", 0, 1 << 15), ("log", 1 << 15, 1 << 15)])
        };
        // Random block writes over a few blocks (so that cells wear out), each against the
        // bytes the run has written there: the cost of every write and the figures after.
        let run = |p: &mut Pcm, seed: u64| {
            let mut rng = Rng::new(seed);
            let mut mem = vec![0u8; 1 << 16];
            let mut costs = Vec::new();
            for _ in 0..400 {
                let addr = rng.below(6) * 4096 + rng.below(2) * 64;
                let mut new = [0u8; 64];
                new.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
                let old: [u8; 64] = mem[addr as usize..addr as usize + 64].try_into().unwrap();
                costs.push(p.write(addr, &old, &new));
                mem[addr as usize..addr as usize + 64].copy_from_slice(&new);
            }
            let wear = p.wear.regions();
            let counts: Vec<u64> = (0..64 * 8).map(|bit| p.wear.count(bit, false)).collect();
            let stuck = p.retire.as_ref().map(|r| r.figures.clone());
            (costs, format!("{wear:?}"), counts, p.wear.total_bit_updates, stuck)
        };
        let fresh = run(&mut make(), 7);
        let mut used = make();
        run(&mut used, 3);
        used.renew();
        assert_eq!(run(&mut used, 7), fresh, "{mode:?}");
    }
}

#[test]
fn the_block_path_is_the_one_named_if_the_host_runs_it() {
    use super::Simd::*;
    assert_eq!(super::Simd::choose(None, Avx2), Ok(Avx2));
    assert_eq!(super::Simd::choose(Some("auto"), Avx512), Ok(Avx512));
    assert_eq!(super::Simd::choose(Some("portable"), Avx512), Ok(Portable));
    assert_eq!(super::Simd::choose(Some("avx2"), Avx512), Ok(Avx2));
    assert_eq!(super::Simd::choose(Some("avx512"), Avx512), Ok(Avx512));
    let e = super::Simd::choose(Some("avx512"), Avx2).unwrap_err();
    assert!(e.contains("no avx512") && e.ends_with("auto, avx2, portable)"), "{e}");
    let e = super::Simd::choose(Some("sse"), Avx512).unwrap_err();
    assert!(e.contains("\"sse\"") && e.contains("allowed auto, avx512, avx2, portable"), "{e}");
}
