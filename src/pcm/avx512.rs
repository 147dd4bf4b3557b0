//! The block write's two inner steps with 512-bit vectors (x86-64 hosts with AVX-512F and the
//! vector population count, chosen at run time): a block's eight 64-bit words, or one counter
//! plane's eight lanes, are one register, and the per-word choices are mask bits. Each returns
//! exactly what its portable twin returns ([`super::choose_block`], [`super::wear`]'s
//! `add_block`); the tests compare them.

use super::Choice;
use std::arch::x86_64::*;

/// [`super::choose_block`] with one 512-bit register per block.
#[inline]
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
pub(super) fn choose_block(old: &[u8; 64], new: &[u8; 64], old_flips: u8, fnw: bool, out: &mut [u64; 8]) -> Choice {
    let (o, n) = (load_by_16(old), load_by_16(new));
    let ones = _mm512_set1_epi64(-1);
    let stored_old = _mm512_mask_xor_epi64(o, old_flips, o, ones);
    let differ = _mm512_xor_si512(stored_old, n);
    let count = _mm512_popcnt_epi64(differ);
    // Inverted is cheaper exactly when differ + old_flip >= 33 (see `choose_block`).
    let with_flip = _mm512_mask_add_epi64(count, old_flips, count, _mm512_set1_epi64(1));
    let new_flips = if fnw { _mm512_cmpgt_epi64_mask(with_flip, _mm512_set1_epi64(32)) } else { 0 };
    let changed = _mm512_mask_xor_epi64(differ, new_flips, differ, ones);
    let programmed = _mm512_mask_sub_epi64(count, new_flips, _mm512_set1_epi64(64), count);
    // SAFETY: the store writes the 64 bytes of `out`.
    unsafe { _mm512_storeu_si512(out.as_mut_ptr() as *mut __m512i, changed) };
    Choice {
        new_flips,
        dirty: _mm512_test_epi64_mask(changed, changed),
        data_bits: _mm512_reduce_add_epi64(programmed) as u64,
    }
}

/// The 64 bytes of `b` as one register, read 16 bytes at a time. The new contents of a write
/// were most often copied a moment ago, 16 bytes at a time (the rest of the crate is compiled
/// for baseline x86-64), and a load takes its data from stores still waiting in the core's store
/// buffer only when it lies within one of them: a single 64-byte load waits until all four have
/// reached the host cache, which is behind every older instruction, host cache misses included.
/// On an Intel Xeon with AVX-512, SPS h-wal with the device ran at 10.4 - 10.6 M accesses/s
/// with these loads against 9.7 - 10.0 with one 64-byte load (docs/performance.md, the PCM
/// path).
#[inline]
#[target_feature(enable = "avx512f")]
fn load_by_16(b: &[u8; 64]) -> __m512i {
    let p = b.as_ptr() as *const __m128i;
    // In assembly, so that the compiler keeps four loads rather than merging them into one.
    // SAFETY: the four loads read the 64 bytes of `b` (unaligned loads); no other effect.
    unsafe {
        let q = |i: usize| -> __m128i {
            let v: __m128i;
            std::arch::asm!(
                "vmovdqu {v}, xmmword ptr [{p}]",
                v = out(xmm_reg) v,
                p = in(reg) p.add(i),
                options(pure, readonly, nostack, preserves_flags),
            );
            v
        };
        let x = _mm512_castsi128_si512(q(0));
        let x = _mm512_inserti32x4::<1>(x, q(1));
        let x = _mm512_inserti32x4::<2>(x, q(2));
        _mm512_inserti32x4::<3>(x, q(3))
    }
}

/// Add the 8 lane masks `carry` to `W / 8` counter planes of one block (plane k at words
/// `8k .. 8k + 8`, one register), plane by plane; `carry` is left with what carried out of the
/// top plane, returned OR-ed.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn add_block<const W: usize>(planes: &mut [u64; W], carry: &mut [u64; 8]) -> u64 {
    let p = planes.as_mut_ptr() as *mut __m512i;
    // SAFETY: every load and store covers 64 bytes inside `planes` (plane k < W / 8 at
    // bytes 64k) or the 64 bytes of `carry`.
    unsafe {
        let mut c = _mm512_loadu_si512(carry.as_ptr() as *const __m512i);
        for k in 0..W / 8 {
            let x = _mm512_loadu_si512(p.add(k));
            _mm512_storeu_si512(p.add(k), _mm512_xor_si512(x, c));
            c = _mm512_and_si512(c, x);
            if _mm512_test_epi64_mask(c, c) == 0 {
                return 0;
            }
        }
        _mm512_storeu_si512(carry.as_mut_ptr() as *mut __m512i, c);
    }
    carry.iter().fold(0, |a, &x| a | x)
}
