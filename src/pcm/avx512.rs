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
pub(super) fn choose_block(old: &[u8; 64], new: &[u8; 64], old_flips: u8, fnw: bool) -> Choice {
    // SAFETY: each load reads the 64 bytes of one array (unaligned loads).
    let (o, n) = unsafe {
        (_mm512_loadu_si512(old.as_ptr() as *const __m512i), _mm512_loadu_si512(new.as_ptr() as *const __m512i))
    };
    let ones = _mm512_set1_epi64(-1);
    let stored_old = _mm512_mask_xor_epi64(o, old_flips, o, ones);
    let differ = _mm512_xor_si512(stored_old, n);
    let count = _mm512_popcnt_epi64(differ);
    // Inverted is cheaper exactly when differ + old_flip >= 33 (see `choose_block`).
    let with_flip = _mm512_mask_add_epi64(count, old_flips, count, _mm512_set1_epi64(1));
    let new_flips = if fnw { _mm512_cmpgt_epi64_mask(with_flip, _mm512_set1_epi64(32)) } else { 0 };
    let changed = _mm512_mask_xor_epi64(differ, new_flips, differ, ones);
    let programmed = _mm512_mask_sub_epi64(count, new_flips, _mm512_set1_epi64(64), count);
    let mut ch = Choice {
        new_flips,
        dirty: _mm512_test_epi64_mask(changed, changed),
        data_bits: _mm512_reduce_add_epi64(programmed) as u64,
        ..Choice::default()
    };
    // SAFETY: the store writes the 64 bytes of `changed`.
    unsafe { _mm512_storeu_si512(ch.changed.as_mut_ptr() as *mut __m512i, changed) };
    ch
}

/// Add the 8 lane masks `carry` to one block's half of counter planes (plane k at words
/// `8k .. 8k + 8`, one register), plane by plane; `carry` is left with what carried out of the
/// top plane, returned OR-ed.
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn add_block(planes: &mut [u64; 64], carry: &mut [u64; 8]) -> u64 {
    let p = planes.as_mut_ptr() as *mut __m512i;
    // SAFETY: every load and store covers 64 bytes inside `planes` (plane k at bytes 64k) or
    // the 64 bytes of `carry`.
    unsafe {
        let mut c = _mm512_loadu_si512(carry.as_ptr() as *const __m512i);
        for k in 0..8 {
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
