//! Deterministic pseudo-random numbers (xoshiro256** seeded by SplitMix64).
//!
//! Written here rather than taken from a crate so that a seed gives the same stream in every
//! future version of locsim: results must replay byte for byte (docs/model.md section 7).

/// The two streams of core `c` in a run seeded `seed`: its workload's operations and its
/// abort decisions, separate so that changing the abort rate does not change which operations
/// run. Core 0's are a single-core run's; the others' are independent streams derived from the
/// seed and the core id.
pub fn run_streams(seed: u64, c: usize) -> (Rng, Rng) {
    (Rng::derive(seed, 1 + 2 * c as u64), Rng::derive(seed, 2 + 2 * c as u64))
}

/// Whether the next transaction aborts, drawn from the abort stream (nothing is drawn at rate 0).
#[inline]
pub fn next_abort(aborts: &mut Rng, rate: f64) -> bool {
    rate > 0.0 && aborts.chance(rate)
}

/// xoshiro256** generator. Not cryptographic; fast and well distributed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator whose whole stream is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let s = [splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x), splitmix64(&mut x)];
        Rng { s }
    }

    /// An independent stream derived from this seed and a label (e.g. one per crash point).
    pub fn derive(seed: u64, label: u64) -> Rng {
        Rng::new(seed ^ label.wrapping_mul(0xD6E8_FEB8_6659_FD93).rotate_left(17))
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let r = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        r
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift (bias below 2^-32 for n < 2^32).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// True with probability `p` (0.0..=1.0).
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_gives_same_stream_and_different_seeds_differ() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(7);
                move |_| r.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..8)
            .map({
                let mut r = Rng::new(8);
                move |_| r.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = r.below(10);
            assert!(v < 10);
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
