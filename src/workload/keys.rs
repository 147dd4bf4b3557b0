//! Key distributions of the key-value workloads (btree, hash, rbtree), after YCSB's
//! generators (Cooper et al., SoCC 2010; `site.ycsb.generator`):
//!
//! - `uniform` (the default): every key of `0..key_space` alike; draws exactly what the
//!   workloads drew before distributions existed (`rng.below(key_space)`).
//! - `zipfian`: YCSB's `ZipfianGenerator` (the algorithm of Gray et al., "Quickly generating
//!   billion-record synthetic databases", SIGMOD 1994) over `key_space` ranks, rank `i` drawn
//!   with probability `(1 / (i+1)^theta) / zeta(key_space, theta)`, then scrambled by FNV-1a-64
//!   modulo `key_space` as YCSB's `ScrambledZipfianGenerator` does, so that the popular keys
//!   are spread over the key space instead of clustered at 0. (YCSB draws its ranks over a fixed
//!   10^10 items before the modulo; here over `key_space`, so the closed form is checkable.)
//! - `latest`: YCSB's `SkewedLatestGenerator`: an insert takes the next new key in insertion
//!   order (`inserted mod key_space`), any other operation the key `r` inserts before the
//!   newest, `r` a zipfian rank: the newest keys are the most popular.
//!
//! `workload.<btree|hash|rbtree>.keys.distribution` and `.keys.zipf_theta` (default 0.99,
//! YCSB's) select them.

use crate::rng::Rng;
use serde::{Deserialize, Serialize};
use std::cell::Cell;

/// Which keys the operations pick.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Distribution {
    Uniform,
    Zipfian,
    Latest,
}

/// `[workload.<name>.keys]`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KeysConfig {
    /// `uniform`, `zipfian` or `latest`.
    pub distribution: Distribution,
    /// Skew of `zipfian` and `latest`, strictly between 0 and 1 (YCSB's default 0.99).
    pub zipf_theta: f64,
}

impl Default for KeysConfig {
    fn default() -> Self {
        KeysConfig { distribution: Distribution::Uniform, zipf_theta: 0.99 }
    }
}

impl KeysConfig {
    /// Range check (called by each workload's `validate`).
    pub fn validate(&self, workload: &str) -> Result<(), String> {
        let t = self.zipf_theta;
        if !(t > 0.0 && t < 1.0) {
            return Err(format!("workload.{workload}.keys.zipf_theta = {t}: allowed 0 < theta < 1"));
        }
        Ok(())
    }
}

/// Terms of the zeta sum added one by one; beyond, the Euler-Maclaurin formula.
const ZETA_EXACT_TERMS: u64 = 1 << 22;

/// `zeta(n, theta) = sum over i in 1..=n of 1 / i^theta`.
pub fn zeta(n: u64, theta: f64) -> f64 {
    zeta_from(n, theta, ZETA_EXACT_TERMS)
}

/// [`zeta`] with the first `terms` terms summed one by one.
fn zeta_from(n: u64, theta: f64, terms: u64) -> f64 {
    let exact = n.min(terms);
    let mut s: f64 = (1..=exact).map(|i| (i as f64).powf(-theta)).sum();
    if n > exact {
        // sum over (a, n] of x^-theta = integral from a to n + (f(n) - f(a)) / 2
        //   + theta/12 (a^(-theta-1) - n^(-theta-1)) (the next term is below 1e-20 here).
        let (a, b, k) = (exact as f64, n as f64, 1.0 - theta);
        s += (b.powf(k) - a.powf(k)) / k
            + (b.powf(-theta) - a.powf(-theta)) / 2.0
            + theta / 12.0 * (a.powf(-theta - 1.0) - b.powf(-theta - 1.0));
    }
    s
}

/// YCSB's `ZipfianGenerator` over ranks `0..n`.
#[derive(Clone, Debug)]
pub struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// `1 + 0.5^theta`: below it (times `zetan`) the rank is 1.
    second: f64,
}

impl Zipfian {
    pub fn new(n: u64, theta: f64) -> Zipfian {
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2, theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipfian { n, theta, alpha: 1.0 / (1.0 - theta), zetan, eta, second: 1.0 + 0.5f64.powf(theta) }
    }

    /// One rank (`nextLong` of YCSB's generator; `u` uniform in [0, 1)).
    pub fn rank(&self, rng: &mut Rng) -> u64 {
        let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.second {
            return 1;
        }
        ((self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64).min(self.n - 1)
    }

    /// The closed form: the probability of rank `i`.
    pub fn probability(&self, i: u64) -> f64 {
        ((i + 1) as f64).powf(-self.theta) / self.zetan
    }
}

/// YCSB's `fnvhash64`: FNV-1a over the 8 bytes of `v`, low byte first, absolute value.
pub fn fnv_hash64(mut v: u64) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        h ^= v & 0xff;
        v >>= 8;
        h = h.wrapping_mul(1_099_511_628_211);
    }
    (h as i64).unsigned_abs()
}

/// The key chooser of one workload.
#[derive(Clone, Debug)]
pub struct Keys {
    distribution: Distribution,
    n: u64,
    zipf: Option<Zipfian>,
    /// `latest`: inserts so far (the next new key is `inserted mod n`).
    inserted: Cell<u64>,
}

impl Keys {
    pub fn new(cfg: &KeysConfig, key_space: u64) -> Keys {
        let zipf = (cfg.distribution != Distribution::Uniform).then(|| Zipfian::new(key_space, cfg.zipf_theta));
        Keys { distribution: cfg.distribution, n: key_space, zipf, inserted: Cell::new(0) }
    }

    pub fn is_uniform(&self) -> bool {
        self.distribution == Distribution::Uniform
    }

    /// The key of an operation (an insert if `insert`), drawn from `rng`.
    #[inline]
    pub fn draw(&self, rng: &mut Rng, insert: bool) -> u64 {
        match (self.distribution, &self.zipf) {
            (Distribution::Zipfian, Some(z)) => fnv_hash64(z.rank(rng)) % self.n,
            (Distribution::Latest, Some(z)) => {
                let newest = self.inserted.get();
                if insert {
                    self.inserted.set(newest + 1);
                    newest % self.n
                } else {
                    (newest % self.n + self.n - 1 - z.rank(rng)) % self.n
                }
            }
            _ => rng.below(self.n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact law of Gray's algorithm: ranks 0 and 1 as the closed form, rank `i >= 2` the
    /// measure of the `u` that the continuous inverse maps to `i`.
    fn generator_law(z: &Zipfian, i: u64) -> f64 {
        if i < 2 {
            return z.probability(i);
        }
        let cut = |r: u64| ((r as f64 / z.n as f64).powf(1.0 / z.alpha) - 1.0 + z.eta) / z.eta;
        let lo = z.second / z.zetan;
        let (a, b) = (cut(i).max(lo), cut(i + 1).min(1.0).max(lo));
        (b - a).max(0.0)
    }

    #[test]
    fn zipfian_frequencies_match_the_closed_form() {
        let (n, draws) = (1000u64, 1_000_000u64);
        for theta in [0.99, 0.5] {
            let z = Zipfian::new(n, theta);
            let mut count = vec![0u64; n as usize];
            let mut rng = Rng::new(7);
            for _ in 0..draws {
                count[z.rank(&mut rng) as usize] += 1;
            }
            let within = |got: u64, p: f64, what: &str| {
                let (mean, sd) = (draws as f64 * p, (draws as f64 * p * (1.0 - p)).sqrt());
                assert!((got as f64 - mean).abs() < 5.0 * sd.max(1.0), "theta {theta} {what}: {got} vs {mean:.0}");
            };
            // The samples follow the generator's law rank by rank (5 standard deviations) ...
            for i in 0..50 {
                within(count[i as usize], generator_law(&z, i), &format!("rank {i}"));
            }
            let tail: f64 = (50..n).map(|i| generator_law(&z, i)).sum();
            within(count[50..].iter().sum(), tail, "ranks 50 and up");
            // ... which is the closed form (1/(i+1)^theta)/zeta(n, theta) exactly at ranks 0 and
            // 1 (Gray et al.'s special cases), and beyond them its continuous approximation: it
            // overweights the next ranks (rank 2 by 17% at theta 0.99, 10% at 0.5), by less
            // and less down the ranks, and underweights the last ones (by at most 3.6% at 0.99);
            // the top 100 hold their closed-form share within 2%, the top 500 within 0.5%.
            for i in 0..2 {
                within(count[i as usize], z.probability(i), &format!("closed form, rank {i}"));
            }
            for i in 2..n {
                let r = generator_law(&z, i) / z.probability(i);
                assert!((0.96..1.18).contains(&r), "theta {theta} rank {i}: {r}");
            }
            for (top, tol) in [(100usize, 0.02), (500, 0.005)] {
                let got: u64 = count[..top].iter().sum();
                let want: f64 = (0..top as u64).map(|i| z.probability(i)).sum::<f64>() * draws as f64;
                assert!((got as f64 / want - 1.0).abs() < tol, "theta {theta}, top {top}: {got} vs {want:.0}");
            }
        }
    }

    #[test]
    fn zeta_beyond_the_exact_terms_agrees_with_the_sum() {
        // The tail formula from 10^4 terms on, against the plain sum of 10^6 (as from 2^22 on,
        // where the neglected term is smaller still).
        for theta in [0.99, 0.6] {
            let n = 1_000_000;
            let exact: f64 = (1..=n).map(|i| (i as f64).powf(-theta)).sum();
            assert!((zeta_from(n, theta, 10_000) / exact - 1.0).abs() < 1e-12, "theta {theta}");
        }
    }

    #[test]
    fn uniform_draws_what_the_workloads_always_drew() {
        let k = Keys::new(&KeysConfig::default(), 12345);
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        for _ in 0..1000 {
            assert_eq!(k.draw(&mut a, true), b.below(12345));
        }
    }

    #[test]
    fn latest_favours_the_newest_keys_and_zipfian_spreads_the_popular_ones() {
        let cfg = KeysConfig { distribution: Distribution::Latest, zipf_theta: 0.99 };
        let k = Keys::new(&cfg, 1 << 16);
        let mut rng = Rng::new(5);
        for _ in 0..1000 {
            k.draw(&mut rng, true);
        }
        let newest = 999;
        let hits = (0..10_000).filter(|_| k.draw(&mut rng, false) == newest).count();
        let p = Zipfian::new(1 << 16, 0.99).probability(0);
        assert!((hits as f64 / 10_000.0 / p - 1.0).abs() < 0.15, "{hits}");
        let z = Keys::new(&KeysConfig { distribution: Distribution::Zipfian, zipf_theta: 0.99 }, 1 << 16);
        let top: Vec<u64> = (0..3).map(|r| fnv_hash64(r) % (1 << 16)).collect();
        assert!(top.iter().all(|&t| t > 100), "scrambled: {top:?}");
        let hits = (0..10_000).filter(|_| z.draw(&mut rng, false) == top[0]).count();
        assert!((hits as f64 / 10_000.0 / p - 1.0).abs() < 0.15, "{hits}");
    }

    #[test]
    fn theta_is_checked() {
        for t in [0.0, 1.0, 1.5, -0.1, f64::NAN] {
            let e = KeysConfig { distribution: Distribution::Zipfian, zipf_theta: t }.validate("hash").unwrap_err();
            assert!(e.starts_with("workload.hash.keys.zipf_theta = ") && e.ends_with("allowed 0 < theta < 1"), "{e}");
        }
    }
}
