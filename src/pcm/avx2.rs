//! The block write's two inner steps with 256-bit vectors (x86-64 hosts with AVX2, chosen at
//! run time): the Flip-N-Write choice of a block's eight 64-bit words, and the ripple carry of a
//! block's changed cells through its counter planes. Each returns exactly what its portable
//! twin returns ([`super::choose_block`], [`super::wear`]'s `add_block`); the tests compare them.

use super::Choice;
use std::arch::x86_64::*;

/// Population count of each 64-bit lane (nibble table, then byte sums per lane).
#[inline]
#[target_feature(enable = "avx2")]
fn popcount_lanes(v: __m256i) -> __m256i {
    let table = _mm256_setr_epi8(
        0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4,
    );
    let nibble = _mm256_set1_epi8(0x0F);
    let lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, nibble));
    let hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(v), nibble));
    _mm256_sad_epu8(_mm256_add_epi8(lo, hi), _mm256_setzero_si256())
}

/// Four words of a block (`half` 0 or 1): changed cells, new flip mask (all ones per flipped
/// word), programmed data cells per word.
#[inline]
#[target_feature(enable = "avx2")]
fn choose_half(old: __m256i, new: __m256i, old_flips: u8, half: i64, fnw: bool) -> (__m256i, __m256i, __m256i) {
    let bits = _mm256_setr_epi64x(1 << (4 * half), 2 << (4 * half), 4 << (4 * half), 8 << (4 * half));
    let flip = _mm256_cmpeq_epi64(_mm256_and_si256(_mm256_set1_epi64x(old_flips as i64), bits), bits);
    let stored_old = _mm256_xor_si256(old, flip);
    let differ = _mm256_xor_si256(stored_old, new);
    let count = popcount_lanes(differ);
    // Inverted is cheaper exactly when differ + old_flip >= 33 (see `choose_block`).
    let with_flip = _mm256_sub_epi64(count, flip);
    let new_flip = if fnw { _mm256_cmpgt_epi64(with_flip, _mm256_set1_epi64x(32)) } else { _mm256_setzero_si256() };
    let changed = _mm256_xor_si256(differ, new_flip);
    let programmed = _mm256_blendv_epi8(count, _mm256_sub_epi64(_mm256_set1_epi64x(64), count), new_flip);
    (changed, new_flip, programmed)
}

/// [`super::choose_block`] with vectors.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn choose_block(old: &[u8; 64], new: &[u8; 64], old_flips: u8, fnw: bool, out: &mut [u64; 8]) -> Choice {
    // SAFETY: each load reads 32 bytes inside a 64-byte array (unaligned loads).
    let (o0, o1, n0, n1) = unsafe {
        let (o, n) = (old.as_ptr() as *const __m256i, new.as_ptr() as *const __m256i);
        (_mm256_loadu_si256(o), _mm256_loadu_si256(o.add(1)), _mm256_loadu_si256(n), _mm256_loadu_si256(n.add(1)))
    };
    let (c0, f0, p0) = choose_half(o0, n0, old_flips, 0, fnw);
    let (c1, f1, p1) = choose_half(o1, n1, old_flips, 1, fnw);
    let mut ch = Choice::default();
    // SAFETY: each store writes 32 bytes inside the 64-byte array `out`.
    unsafe {
        let c = out.as_mut_ptr() as *mut __m256i;
        _mm256_storeu_si256(c, c0);
        _mm256_storeu_si256(c.add(1), c1);
    }
    let flips = |f: __m256i| _mm256_movemask_pd(_mm256_castsi256_pd(f)) as u8;
    ch.new_flips = flips(f0) | flips(f1) << 4;
    let zero = _mm256_setzero_si256();
    ch.dirty = !(flips(_mm256_cmpeq_epi64(c0, zero)) | flips(_mm256_cmpeq_epi64(c1, zero)) << 4);
    let p = _mm256_add_epi64(p0, p1);
    let p = _mm_add_epi64(_mm256_castsi256_si128(p), _mm256_extracti128_si256::<1>(p));
    ch.data_bits = (_mm_cvtsi128_si64(p) + _mm_extract_epi64::<1>(p)) as u64;
    ch
}

/// Add the 8 lane masks `carry` to `W / 8` counter planes of one block (plane k at words
/// `8k .. 8k + 8`), plane by plane; `carry` is left with what carried out of the top plane,
/// returned OR-ed.
#[inline]
#[target_feature(enable = "avx2")]
pub(super) fn add_block<const W: usize>(planes: &mut [u64; W], carry: &mut [u64; 8]) -> u64 {
    let p = planes.as_mut_ptr() as *mut __m256i;
    let c = carry.as_mut_ptr() as *mut __m256i;
    // SAFETY: every load and store covers 32 bytes inside `planes` (plane k < W / 8 at
    // bytes 64k) or inside `carry` (64 bytes).
    unsafe {
        let (mut c0, mut c1) = (_mm256_loadu_si256(c), _mm256_loadu_si256(c.add(1)));
        for k in 0..W / 8 {
            let (x0, x1) = (_mm256_loadu_si256(p.add(2 * k)), _mm256_loadu_si256(p.add(2 * k + 1)));
            _mm256_storeu_si256(p.add(2 * k), _mm256_xor_si256(x0, c0));
            _mm256_storeu_si256(p.add(2 * k + 1), _mm256_xor_si256(x1, c1));
            c0 = _mm256_and_si256(c0, x0);
            c1 = _mm256_and_si256(c1, x1);
            let any = _mm256_or_si256(c0, c1);
            if _mm256_testz_si256(any, any) == 1 {
                return 0;
            }
        }
        _mm256_storeu_si256(c, c0);
        _mm256_storeu_si256(c.add(1), c1);
    }
    carry.iter().fold(0, |a, &x| a | x)
}
