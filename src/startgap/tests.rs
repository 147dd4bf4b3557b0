//! Start-Gap mapping, randomiser and register format: exact values, and seeded model-based
//! tests against a plain vector of logical lines.

use super::*;
use crate::recovery::startgap::{logical_image, update_logical_log};
use crate::rng::Rng;

const SIZES: [u64; 9] = [1, 2, 3, 4, 5, 16, 17, 100, 1000];

fn is_permutation(v: &[u64], n: u64) -> bool {
    let mut seen = vec![false; n as usize];
    v.iter().all(|&x| x < n && !std::mem::replace(&mut seen[x as usize], true))
}

#[test]
fn randomiser_is_a_bijection_of_the_line_indices() {
    for n in SIZES.into_iter().chain([4096, 4097, 65536]) {
        let g = Geometry::new(0, n);
        let img: Vec<u64> = (0..n).map(|l| g.randomise(l)).collect();
        assert!(is_permutation(&img, n), "n = {n}");
    }
    // It does scramble: consecutive lines do not stay consecutive.
    let g = Geometry::new(0, 1000);
    assert!((0..999).filter(|&l| g.randomise(l) + 1 == g.randomise(l + 1)).count() < 10);
}

#[test]
fn logical_line_inverts_the_placement() {
    let seed = 0x1E5;
    println!("seed {seed}");
    let mut rng = Rng::new(seed);
    for n in SIZES {
        let g = Geometry::new(0, n);
        for _ in 0..20 {
            let r = Registers { start: rng.below(n), gap: rng.below(n + 1), moves: 0 };
            for l in 0..n {
                assert_eq!(g.logical_line(&r, g.physical_line(&r, l)), Some(l), "n {n} {r:?}");
            }
            assert_eq!(g.logical_line(&r, r.gap), None);
        }
    }
}

#[test]
fn initial_registers_leave_the_last_line_as_gap() {
    let g = Geometry::new(100, 8);
    let r = Registers::initial(&g);
    assert_eq!((r.start, r.gap, r.moves), (0, 8, 0));
    // With start 0 and the gap at N, line l sits at randomise(l).
    for l in 0..8 {
        assert_eq!(g.physical(&r, BlockId(100 + l)), BlockId(100 + g.randomise(l)));
    }
    assert_eq!(g.regs_block(), BlockId(109));
    assert!(g.is_line(BlockId(107)) && !g.is_line(BlockId(108)) && !g.is_line(BlockId(99)));
}

#[test]
fn gap_moves_down_then_wraps_and_advances_start() {
    let g = Geometry::new(0, 3);
    let mut r = Registers::initial(&g);
    let mut seen = Vec::new();
    for _ in 0..5 {
        let (src, dst, next) = g.next_move(&r);
        seen.push((src, dst, next.start, next.gap));
        r = next;
    }
    assert_eq!(seen, vec![(2, 3, 0, 2), (1, 2, 0, 1), (0, 1, 0, 0), (3, 0, 1, 3), (2, 3, 1, 2)]);
    assert_eq!(r.moves, 5);
}

/// Every step: the N logical lines occupy N distinct physical lines other than the gap, and a
/// move changes the place of exactly one logical line, from the move's source to its destination.
#[test]
fn mapping_is_a_bijection_at_every_step_and_a_move_relocates_one_line() {
    let seed = 0x5A17;
    println!("seed {seed}");
    let mut rng = Rng::new(seed);
    for n in SIZES {
        let g = Geometry::new(rng.below(1000), n);
        let mut r = Registers::initial(&g);
        let place = |r: &Registers| (0..n).map(|l| g.physical_line(r, l)).collect::<Vec<_>>();
        let mut before = place(&r);
        // Three full turns of `start` (a turn is N + 1 moves) for the small sizes.
        for step in 0..(3 * (n + 1) * n + 7).min(20_000) {
            let (src, dst, next) = g.next_move(&r);
            r = next;
            let after = place(&r);
            let mut with_gap = after.clone();
            with_gap.push(r.gap);
            assert!(is_permutation(&with_gap, n + 1), "n {n} step {step}: {after:?} gap {}", r.gap);
            let moved: Vec<u64> = (0..n as usize).filter(|&l| before[l] != after[l]).map(|l| l as u64).collect();
            assert_eq!(moved.len(), 1, "n {n} step {step}");
            let l = moved[0] as usize;
            assert_eq!((before[l], after[l]), (src, dst), "n {n} step {step}");
            before = after;
        }
    }
}

#[test]
fn register_block_layout_is_little_endian_and_checked() {
    let g = Geometry::new(0, 0x1_0002);
    let r = Registers { start: 0x0a0b, gap: 7, moves: 0x1_0000_0001 };
    let b = r.encode(&g);
    assert_eq!(&b[0..8], b"LOCSGAP1");
    assert_eq!(&b[8..16], &[0x02, 0, 0x01, 0, 0, 0, 0, 0]);
    assert_eq!(&b[16..24], &[0x0b, 0x0a, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&b[24..32], &[7, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(&b[32..40], &[1, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(b[48..64], [0; 16]);
    assert_eq!(Registers::decode(&b, &g), Ok(r));
    let mut bad = b;
    bad[24] = 8;
    assert_eq!(Registers::decode(&bad, &g).unwrap_err(), "start-gap register block: checksum mismatch");
    assert_eq!(Registers::decode(&[0; 64], &g).unwrap_err(), "start-gap register block: bad magic");
    let out = Registers { start: 0x1_0002, gap: 0, moves: 0 }.encode(&g);
    assert!(Registers::decode(&out, &g).unwrap_err().contains("out of range"));
    let other = Geometry::new(0, 5);
    assert!(Registers::decode(&b, &other).unwrap_err().contains("65538 lines, configured 5"));
}

/// Model-based: a vector of logical lines against a physical image that receives translated
/// writes, gap-move copies and register writes; the logical view rebuilt from the physical
/// image alone equals the model after every step, outside the reserve (spare line and register
/// block). Two blocks after the reserve stand for Kiln's NV-LLC state: written in place, never
/// moved.
#[test]
fn logical_view_rebuilt_from_the_physical_image_equals_the_model() {
    let seed = 0xB0B;
    println!("seed {seed}");
    let mut rng = Rng::new(seed);
    for (n, psi) in [(1, 1), (3, 1), (16, 3), (100, 7)] {
        let g = Geometry::new(2, n);
        let reserve = ((2 + n) * 64) as usize..((4 + n) * 64) as usize;
        let total = ((6 + n) * 64) as usize;
        let mut model = vec![0u8; total];
        rng.next_u64().to_le_bytes().iter().cycle().zip(model.iter_mut()).for_each(|(a, b)| *b = *a);
        let mut phys = physical_initial(&g, &model);
        assert_eq!(phys.len(), total);
        let outside = |img: &[u8]| [img[..reserve.start].to_vec(), img[reserve.end..].to_vec()].concat();
        let mut sg = StartGap::new(g, psi);
        // A view kept up to date line by line, as the crash checker does.
        let (mut view, mut view_regs, mut written) = (model.clone(), Registers::initial(&g), Vec::new());
        for step in 0..20 * (n + 1) * psi {
            if rng.below(4) == 0 {
                // A write after the reserve: same place in both images.
                let b = BlockId(4 + n + rng.below(2));
                let data = [rng.next_u64() as u8; 64];
                for img in [&mut model, &mut phys, &mut view] {
                    img[b.range()].copy_from_slice(&data);
                }
            }
            let b = BlockId(2 + rng.below(n));
            let data = [rng.next_u64() as u8; 64];
            model[b.range()].copy_from_slice(&data);
            written.push(g.physical(&sg.regs, b));
            phys[g.physical(&sg.regs, b).range()].copy_from_slice(&data);
            if sg.count_write() {
                let (src, dst, next) = g.next_move(&sg.regs);
                let line: [u8; 64] = phys[BlockId(2 + src).range()].try_into().unwrap();
                phys[BlockId(2 + dst).range()].copy_from_slice(&line);
                phys[g.regs_block().range()].copy_from_slice(&next.encode(&g));
                sg.regs = next;
            }
            assert!(outside(&logical_image(&g, &phys).unwrap()) == outside(&model), "n {n} psi {psi} step {step}");
            if rng.below(4) == 0 {
                view_regs = update_logical_log(&g, &view_regs, &phys, &written, &mut view).unwrap();
                written.clear();
                assert!(outside(&view) == outside(&model), "line-by-line view: n {n} psi {psi} step {step}");
            }
        }
    }
}

#[test]
fn with_two_copies_any_torn_register_write_decodes_to_the_old_or_the_new_registers() {
    let g = Geometry { two_copies: true, ..Geometry::new(0, 1000) };
    let mut r = Registers::initial(&g);
    let mut block = r.encode_after(&g, &r);
    assert_eq!(Registers::decode(&block, &g), Ok(r));
    for _ in 0..5 {
        let (_, _, next) = g.next_move(&r);
        let new = next.encode_after(&g, &r);
        // Every subset of the eight 8-byte units lands: old or new registers, never other.
        for mask in 0u32..256 {
            let mut torn = block;
            for u in (0..8).filter(|u| mask >> u & 1 == 1) {
                torn[u * 8..u * 8 + 8].copy_from_slice(&new[u * 8..u * 8 + 8]);
            }
            let got = Registers::decode(&torn, &g).unwrap();
            assert!(got == r || got == next, "mask {mask:#x}: {got:?}");
            let slot = (next.moves % 2) as usize * 32..(next.moves % 2) as usize * 32 + 32;
            assert_eq!(got == next, torn[slot.clone()] == new[slot], "mask {mask:#x}: new once its copy is whole");
        }
        (r, block) = (next, new);
    }
    assert_eq!(Registers::decode(&[0; 64], &g).unwrap_err(), "start-gap register block: no valid copy");
}
