//! The concurrent oracle against a brute-force reference (every subset of a small random
//! history), against the prefix rule on one core, and on named cross-core cases.

use super::*;
use crate::rng::Rng;

/// A history built by hand: the oracle log, the recorder's commit calls and acknowledgements,
/// the initial data area, and per transaction its core and the lines it reads and writes.
struct Hist {
    oracle: OracleLog,
    record: Recorder,
    initial: Vec<u8>,
    core: Vec<u8>,
    reads: Vec<Vec<u64>>,
    writes: Vec<Vec<u64>>,
}

impl Hist {
    fn new(lines: usize) -> Hist {
        Hist {
            oracle: OracleLog::default(),
            record: Recorder::default(),
            initial: vec![0; lines * 64],
            core: Vec::new(),
            reads: Vec::new(),
            writes: Vec::new(),
        }
    }

    /// Commit a transaction of `core` at cycle `called` with these stores and reads.
    fn tx(&mut self, core: u8, called: Cycle, stores: &[(u64, Vec<u8>)], reads: &[u64]) {
        let o = &mut self.oracle;
        let mut lines = Vec::new();
        for (addr, bytes) in stores {
            o.stores.push((*addr, bytes.len() as u32, o.bytes.len() as u64));
            o.bytes.extend_from_slice(bytes);
            lines.extend(blocks_of(Addr(*addr), bytes.len()).map(|b| b.0));
        }
        lines.sort_unstable();
        lines.dedup();
        o.tx_end.push(o.stores.len());
        o.tx_core.push(core);
        o.reads.extend_from_slice(reads);
        o.tx_read_end.push(o.reads.len());
        self.record.commit_called.push(called);
        self.core.push(core);
        self.reads.push(reads.to_vec());
        self.writes.push(lines);
    }

    fn ack(&mut self, cycle: Cycle, core: u8, n: u64) {
        self.record.acks.push((cycle, n));
        self.record.ack_cores.push(core);
    }

    fn history(&self) -> History {
        History::new(&self.oracle, &self.record, &self.initial)
    }

    /// The image of the transactions in `set` (a bit mask), applied in commit order.
    fn image(&self, set: u64) -> Vec<u8> {
        let mut d = self.initial.clone();
        for k in (0..self.core.len()).filter(|k| set >> k & 1 == 1) {
            self.oracle.apply_tx(k, &mut d);
        }
        d
    }

    /// Per core, the transactions acknowledged at `t` (the largest count of its entries by `t`).
    fn acked_mask(&self, t: Cycle) -> u64 {
        let mut mask = 0;
        for (i, &(cycle, n)) in self.record.acks.iter().enumerate() {
            let core = self.record.ack_cores[i];
            if cycle <= t {
                let of_core = (0..self.core.len()).filter(|&k| self.core[k] == core);
                of_core.take(n as usize).for_each(|k| mask |= 1 << k);
            }
        }
        mask
    }

    /// The valid sets at `t`, by the definition: every acknowledged transaction in; every member
    /// issued; closed under each core's order and under dependence (a member needs every
    /// earlier transaction that wrote a line it read or wrote).
    fn valid_sets(&self, t: Cycle) -> Vec<u64> {
        let n = self.core.len();
        let need: Vec<u64> = (0..n)
            .map(|k| {
                let touched =
                    |j: usize| self.writes[j].iter().any(|l| self.reads[k].contains(l) || self.writes[k].contains(l));
                (0..k).filter(|&j| self.core[j] == self.core[k] || touched(j)).fold(0, |m, j| m | 1 << j)
            })
            .collect();
        let issued = (0..n).filter(|&k| self.record.commit_called[k] <= t).fold(0u64, |m, k| m | 1 << k);
        let acked = self.acked_mask(t);
        (0..1u64 << n)
            .filter(|&s| s & acked == acked && s & !issued == 0)
            .filter(|&s| (0..n).all(|k| s >> k & 1 == 0 || need[k] & !s == 0))
            .collect()
    }
}

/// A random history: `cores` cores, `txs` transactions over `lines` lines, stores of random
/// length (some crossing into the next line) with bytes from a two-letter alphabet (so that
/// versions of a line often repeat), reads of random lines, commit calls in increasing cycles
/// (ties too), and per core acknowledgements in its order.
fn random_hist(rng: &mut Rng, cores: u8, txs: usize, lines: usize) -> Hist {
    let mut h = Hist::new(lines);
    let alphabet = |rng: &mut Rng| rng.below(2) as u8;
    for b in h.initial.iter_mut() {
        *b = alphabet(rng);
    }
    let mut cycle = 0;
    for _ in 0..txs {
        cycle += rng.below(3);
        let stores: Vec<(u64, Vec<u8>)> = (0..1 + rng.below(2))
            .map(|_| {
                let line = rng.below(lines as u64);
                let off = rng.below(64);
                let max = if line + 1 < lines as u64 { 80 } else { 64 - off };
                let len = 1 + rng.below(max.min(80));
                let len = len.min(lines as u64 * 64 - line * 64 - off);
                (line * 64 + off, (0..len).map(|_| alphabet(rng)).collect())
            })
            .collect();
        let reads: Vec<u64> = (0..rng.below(3)).map(|_| rng.below(lines as u64)).collect();
        h.tx(rng.below(cores as u64) as u8, Cycle::new(cycle), &stores, &reads);
    }
    // Per core: acknowledge a prefix of its transactions, one step at a time, each after its
    // commit call, in that core's order.
    let mut entries = Vec::new();
    for c in 0..cores {
        let (mut at, mut n) = (Cycle::ZERO, 0);
        for k in (0..txs).filter(|&k| h.core[k] == c) {
            n += 1;
            at = at.max(h.record.commit_called[k]) + Cycle::new(rng.below(4));
            if rng.chance(0.6) {
                entries.push((at, c, n));
            }
        }
    }
    entries.sort_by_key(|e| e.0);
    for (at, c, n) in entries {
        h.ack(at, c, n);
    }
    h
}

/// Recovered images to try at one crash cycle: the image of a valid set, of any set, lines
/// mixed from several sets' images, a line torn between two images, a byte flipped.
fn candidates(rng: &mut Rng, h: &Hist, valid: &[u64]) -> Vec<Vec<u8>> {
    let n = h.core.len();
    let any = |rng: &mut Rng| rng.below(1 << n);
    let good = |rng: &mut Rng| valid.get(rng.below(valid.len().max(1) as u64) as usize).copied().unwrap_or(0);
    let mut out = vec![h.image(good(rng)), h.image(any(rng))];
    let lines = h.initial.len() / 64;
    let mut mixed = h.image(good(rng));
    for l in 0..lines {
        let from = if rng.chance(0.5) { good(rng) } else { any(rng) };
        mixed[l * 64..l * 64 + 64].copy_from_slice(&h.image(from)[l * 64..l * 64 + 64]);
    }
    out.push(mixed);
    let (mut torn, other) = (h.image(good(rng)), h.image(any(rng)));
    let at = rng.below(h.initial.len() as u64) as usize;
    let len = (1 + rng.below(32) as usize).min(h.initial.len() - at);
    torn[at..at + len].copy_from_slice(&other[at..at + len]);
    out.push(torn);
    let mut flipped = h.image(good(rng));
    flipped[rng.below(h.initial.len() as u64) as usize] ^= 1;
    out.push(flipped);
    out
}

/// The checker's verdict equals the brute force's over every subset, and on success its set is
/// the least valid set with that image (the intersection of all of them).
fn agrees(h: &Hist, t: Cycle, recovered: &[u8], valid: &[u64], context: &str) -> bool {
    let matching: Vec<u64> = valid.iter().copied().filter(|&s| h.image(s) == recovered).collect();
    let history = h.history();
    let verdict = judge(&history, &h.initial, &h.oracle, recovered, t);
    match verdict {
        Ok(set) => {
            assert!(!matching.is_empty(), "{context}: checker accepts, no valid set has this image");
            let least = matching.iter().fold(u64::MAX, |m, &s| m & s);
            let got = set.iter().fold(0u64, |m, &k| m | 1 << k);
            assert_eq!(got, least, "{context}: least valid set");
            true
        }
        Err(f) => {
            assert!(
                matching.is_empty(),
                "{context}: checker rejects ({f}), valid set {:b} has this image",
                matching[0]
            );
            false
        }
    }
}

#[test]
fn the_checker_agrees_with_every_subset_on_random_concurrent_histories() {
    let (mut accepted, mut rejected) = (0, 0);
    for seed in 0..1500u64 {
        let mut rng = Rng::new(seed);
        let cores = 1 + rng.below(3) as u8;
        let txs = 1 + rng.below(9) as usize;
        let lines = 1 + rng.below(4) as usize;
        let h = random_hist(&mut rng, cores, txs, lines);
        let end = h.record.commit_called.last().copied().unwrap_or(Cycle::ZERO) + Cycle::new(8);
        for _ in 0..3 {
            let t = Cycle::new(rng.below((end + Cycle::new(1)).get()));
            let valid = h.valid_sets(t);
            for (i, recovered) in candidates(&mut rng, &h, &valid).iter().enumerate() {
                let context = format!("seed {seed}, t {t}, image {i}");
                match agrees(&h, t, recovered, &valid, &context) {
                    true => accepted += 1,
                    false => rejected += 1,
                }
            }
        }
    }
    // Both verdicts are common, so neither side is tested vacuously.
    assert!(accepted > 5000 && rejected > 5000, "accepted {accepted}, rejected {rejected}");
}

/// With one core the valid sets are the prefixes `0..k`, `A(t) <= k <= I(t)`.
#[test]
fn with_one_core_the_checker_is_the_prefix_rule() {
    let (mut accepted, mut rejected) = (0, 0);
    for seed in 0..400u64 {
        let mut rng = Rng::new(seed);
        let txs = 1 + rng.below(40) as usize;
        let lines = 1 + rng.below(8) as usize;
        let h = random_hist(&mut rng, 1, txs, lines);
        let history = h.history();
        let end = h.record.commit_called.last().copied().unwrap_or(Cycle::ZERO) + Cycle::new(8);
        for _ in 0..8 {
            let t = Cycle::new(rng.below((end + Cycle::new(1)).get()));
            let a = h.acked_mask(t).count_ones() as usize;
            let i = history.issued(t) as usize;
            let prefix = |k: usize| h.image(if k == 64 { u64::MAX } else { (1u64 << k) - 1 });
            let mut recovered = prefix(rng.below(txs as u64 + 1) as usize);
            if rng.chance(0.3) {
                let at = rng.below(recovered.len() as u64) as usize;
                recovered[at] ^= 1;
            }
            let k = (a..=i).find(|&k| prefix(k) == recovered);
            match judge(&history, &h.initial, &h.oracle, &recovered, t) {
                Ok(set) => {
                    let k = k.unwrap_or_else(|| panic!("seed {seed}, t {t}: accepted, no S_k with {a} <= k <= {i}"));
                    assert_eq!(set, (0..k as u32).collect::<Vec<_>>(), "seed {seed}, t {t}: the least k");
                    accepted += 1;
                }
                Err(f) => {
                    assert_eq!(k, None, "seed {seed}, t {t}: rejected ({f}), S_k matches");
                    rejected += 1;
                }
            }
        }
    }
    assert!(accepted > 500 && rejected > 500, "accepted {accepted}, rejected {rejected}");
}

/// Lines 0..4, transactions writing whole lines with one byte value each: (core, [(line,
/// value)], reads), issued at cycles 1, 2, ...; acknowledgements (core, n) at cycle 100. The
/// crash is at cycle 200.
/// One transaction of [`named`]: its core, the lines it writes with their byte, its reads.
type Named<'a> = (u8, &'a [(u64, u8)], &'a [u64]);

fn named(txs: &[Named], acks: &[(u8, u64)]) -> Hist {
    let mut h = Hist::new(4);
    for (k, (core, writes, reads)) in txs.iter().enumerate() {
        let stores: Vec<(u64, Vec<u8>)> = writes.iter().map(|&(l, v)| (l * 64, vec![v; 64])).collect();
        h.tx(*core, Cycle::new(1 + k as u64), &stores, reads);
    }
    for &(core, n) in acks {
        h.ack(Cycle::new(100), core, n);
    }
    h
}

/// The initial area with whole lines set.
fn area(lines: &[(u64, u8)]) -> Vec<u8> {
    let mut d = vec![0; 4 * 64];
    for &(l, v) in lines {
        d[l as usize * 64..l as usize * 64 + 64].fill(v);
    }
    d
}

fn check(h: &Hist, recovered: &[u8]) -> Result<Vec<u32>, Failure> {
    judge(&h.history(), &h.initial, &h.oracle, recovered, Cycle::new(200))
}

#[test]
fn a_dependent_durable_without_its_source_is_caught_naming_the_source() {
    // Core 1's transaction 1 read line 0, which core 0's transaction 0 wrote.
    let h = named(&[(0, &[(0, 7)], &[]), (1, &[(1, 9)], &[0])], &[]);
    let f = check(&h, &area(&[(1, 9)])).unwrap_err();
    assert_eq!((f.line, f.tx, f.core), (0, Some(0), Some(0)), "{f}");
    assert_eq!(f.reason, Reason::NoVersion { acknowledged: false, at_least: true });
    // Both, or the source alone, are valid; without the read, the dependent alone is too.
    assert_eq!(check(&h, &area(&[(0, 7), (1, 9)])), Ok(vec![0, 1]));
    assert_eq!(check(&h, &area(&[(0, 7)])), Ok(vec![0]));
    let free = named(&[(0, &[(0, 7)], &[]), (1, &[(1, 9)], &[])], &[]);
    assert_eq!(check(&free, &area(&[(1, 9)])), Ok(vec![1]));
}

#[test]
fn an_overwrite_durable_without_the_version_it_overwrote_is_caught() {
    // Transaction 1 (core 1) overwrote line 0 of transaction 0 (core 0), which also wrote
    // line 2: transaction 1 durable whole needs transaction 0 whole.
    let h = named(&[(0, &[(0, 7), (2, 5)], &[]), (1, &[(0, 8), (1, 9)], &[])], &[]);
    let f = check(&h, &area(&[(0, 8), (1, 9)])).unwrap_err();
    assert_eq!((f.line, f.tx, f.core), (2, Some(0), Some(0)), "{f}");
    assert_eq!(check(&h, &area(&[(0, 8), (1, 9), (2, 5)])), Ok(vec![0, 1]));
}

#[test]
fn an_acknowledged_transaction_missing_is_caught() {
    let h = named(&[(0, &[(0, 7)], &[]), (1, &[(1, 9)], &[])], &[(1, 1)]);
    let f = check(&h, &area(&[(0, 7)])).unwrap_err();
    assert_eq!((f.line, f.tx, f.core), (1, Some(1), Some(1)), "{f}");
    assert_eq!(f.reason, Reason::NoVersion { acknowledged: true, at_least: true });
    assert!(f.to_string().contains("(acknowledged)"), "{f}");
    // The other core's unacknowledged transaction may be lost.
    assert_eq!(check(&h, &area(&[(1, 9)])), Ok(vec![1]));
}

#[test]
fn a_same_core_order_violation_is_caught() {
    let h = named(&[(0, &[(0, 7)], &[]), (0, &[(1, 9)], &[])], &[]);
    let f = check(&h, &area(&[(1, 9)])).unwrap_err();
    assert_eq!((f.line, f.tx, f.core), (0, Some(0), Some(0)), "{f}");
    // On two cores the later transaction alone is valid.
    let h = named(&[(0, &[(0, 7)], &[]), (1, &[(1, 9)], &[])], &[]);
    assert_eq!(check(&h, &area(&[(1, 9)])), Ok(vec![1]));
}

#[test]
fn a_torn_transaction_is_caught() {
    let h = named(&[(2, &[(0, 7), (3, 4)], &[])], &[]);
    let f = check(&h, &area(&[(3, 4)])).unwrap_err();
    assert_eq!((f.line, f.tx, f.core), (0, Some(0), Some(2)), "{f}");
    // A line holding no version at all: torn within the line.
    let mut d = area(&[(0, 7), (3, 4)]);
    d[3 * 64 + 10] = 1;
    let f = check(&h, &d).unwrap_err();
    assert_eq!((f.line, f.reason.clone()), (3, Reason::NoVersion { acknowledged: false, at_least: false }), "{f}");
}

#[test]
fn bytes_of_an_unissued_or_uncommitted_write_are_caught() {
    let h = named(&[(0, &[(0, 7)], &[]), (1, &[(1, 9)], &[])], &[]);
    // At cycle 1 transaction 1's commit has not been called.
    let f = judge(&h.history(), &h.initial, &h.oracle, &area(&[(1, 9)]), Cycle::new(1)).unwrap_err();
    assert_eq!((f.line, f.tx, f.core, f.reason.clone()), (1, Some(1), Some(1), Reason::Unissued), "{f}");
    // A line no committed transaction writes must keep its initial bytes.
    let f = check(&h, &area(&[(2, 3)])).unwrap_err();
    assert_eq!((f.line, f.reason), (2, Reason::Unwritten));
}

/// Versions of a line may repeat: the smallest candidate is taken first, and a later one when
/// another line forces it.
#[test]
fn a_repeated_version_takes_the_least_writer_the_other_lines_allow() {
    // Line 0: 7 (tx 0), back to 0 (tx 1, core 1), 7 (tx 2, core 1, also writing line 1).
    let h = named(&[(0, &[(0, 7)], &[]), (1, &[(0, 0)], &[]), (1, &[(0, 7), (1, 5)], &[])], &[]);
    assert_eq!(check(&h, &area(&[(0, 7)])), Ok(vec![0]));
    assert_eq!(check(&h, &area(&[])), Ok(vec![]));
    assert_eq!(check(&h, &area(&[(0, 7), (1, 5)])), Ok(vec![0, 1, 2]));
    // Acknowledging core 1's first: line 0 at 0 is version 2, not the initial.
    let h = named(&[(0, &[(0, 7)], &[]), (1, &[(0, 0)], &[]), (1, &[(0, 7), (1, 5)], &[])], &[(1, 1)]);
    assert_eq!(check(&h, &area(&[])), Ok(vec![0, 1]));
    assert!(check(&h, &area(&[(0, 7)])).is_err());
}
