//! Torn writes (docs/faults.md): the crash states in which a 64-byte write the device was
//! programming at the crash is durable in part.
//!
//! Under atomicity `A` (8, 16, 32 or 64 bytes) a block is `64 / A` aligned units. A write is *in
//! flight* at crash cycle `t` when its bank had started it and not finished it,
//! `started <= t < durable` (a write still waiting in the controller's queue has programmed no
//! cell and is lost whole; under ADR nothing is in flight). Such a write may have left any
//! proper subset of the units it changes durable (the empty subset is the clean crash state;
//! the full one would make it durable before its recorded cycle, which is a different crash
//! point). At `A = 64` a block is one unit, so there are no torn states: the clean model.
//!
//! Which torn states a crash point gets ([`variants`]), with `F` writes in flight and `m` the
//! units a write changes:
//! - sampled (default): for each write in flight, one random non-empty proper subset of its
//!   changed units; and, when two or more are in flight, one state with every write in flight
//!   torn at once (each a random proper subset, possibly empty);
//! - `--exhaustive`: for each write in flight, every non-empty proper subset (`2^m - 2`, at most
//!   `2^(64/A) - 2`: 254 at 8 bytes), plus the joint sampled state. Combinations of several
//!   writes torn at once are only sampled: at most one write per bank is in flight, but their
//!   product is unbounded in practice (254^F).
//!
//! Every draw comes from `Rng::derive(seed ^ 0x7042, t)`, so the states of a point depend on the
//! point alone and `--crash-at t` replays them.

use crate::pmem::DurableWrite;
use crate::rng::Rng;
use crate::types::{BlockData, BlockId, Cycle};

/// The write atomicities `--atomicity` accepts, in bytes.
pub const ATOMICITIES: [u32; 4] = [8, 16, 32, 64];

/// Check an atomicity value: one of [`ATOMICITIES`].
pub fn parse_atomicity(a: u32) -> Result<u32, String> {
    if ATOMICITIES.contains(&a) {
        Ok(a)
    } else {
        Err(format!("--atomicity {a}: allowed 8, 16, 32, 64 (bytes a write persists atomically)"))
    }
}

/// One torn crash state: these blocks replace the clean durable image's, and what to say.
pub struct TornState {
    pub blocks: Vec<(BlockId, BlockData)>,
    pub describe: String,
}

/// The writes in flight at `t`: indexes into `writes` (sorted by durable cycle), searched from
/// `from` (the first write not durable at `t`) while a write could still have started by `t`
/// (`max_service`: the longest `durable - started` of the run).
pub fn in_flight(writes: &[DurableWrite], from: usize, t: Cycle, max_service: Cycle) -> Vec<usize> {
    let horizon = t.saturating_add(max_service);
    (from..writes.len())
        .take_while(|&j| writes[j].durable <= horizon)
        .filter(|&j| writes[j].started <= t && t < writes[j].durable)
        .collect()
}

/// The longest time any write of the run spent in service.
pub fn max_service(writes: &[DurableWrite]) -> Cycle {
    writes.iter().map(|w| w.durable.saturating_sub(w.started)).max().unwrap_or(Cycle::ZERO)
}

/// The units (bitmask over `64 / atomicity` units) where `new` differs from `old`.
fn changed_units(old: &BlockData, new: &BlockData, atomicity: usize) -> Vec<usize> {
    (0..64 / atomicity)
        .filter(|&u| old[u * atomicity..(u + 1) * atomicity] != new[u * atomicity..(u + 1) * atomicity])
        .collect()
}

/// `old` with the units of `new` selected by `mask` (bit `i` = the `i`-th changed unit).
fn torn(old: &BlockData, new: &BlockData, units: &[usize], mask: u64, atomicity: usize) -> BlockData {
    let mut out = *old;
    for (i, &u) in units.iter().enumerate() {
        if mask >> i & 1 == 1 {
            let r = u * atomicity..(u + 1) * atomicity;
            out[r.clone()].copy_from_slice(&new[r]);
        }
    }
    out
}

/// The torn states of crash point `t`. `flight` are the writes in flight (with `old`, the
/// block's content in the clean durable image at `t`, for each).
pub fn variants(
    flight: &[(&DurableWrite, BlockData)],
    atomicity: u32,
    exhaustive: bool,
    seed: u64,
    t: Cycle,
) -> Vec<TornState> {
    let a = atomicity as usize;
    let mut out = Vec::new();
    if a >= 64 {
        return out;
    }
    let mut rng = Rng::derive(seed ^ 0x7042, t.get());
    let units: Vec<Vec<usize>> = flight.iter().map(|(w, old)| changed_units(old, &w.data, a)).collect();
    let name = |w: &DurableWrite, u: &[usize], mask: u64| {
        let kept: Vec<String> =
            u.iter().enumerate().filter(|(i, _)| mask >> i & 1 == 1).map(|(_, &x)| (x * a).to_string()).collect();
        format!(
            "{} write to block {} (durable at {}) torn: only bytes at offsets [{}] of {} changed {}-byte units durable",
            w.kind.name(),
            w.block.0,
            w.durable,
            kept.join(","),
            u.len(),
            a
        )
    };
    for ((w, old), u) in flight.iter().zip(&units) {
        let m = u.len() as u32;
        if m < 2 {
            continue; // a write that changes one unit is atomic
        }
        let full = (1u64 << m) - 1;
        let masks: Vec<u64> = if exhaustive { (1..full).collect() } else { vec![1 + rng.below(full - 1)] };
        for mask in masks {
            out.push(TornState { blocks: vec![(w.block, torn(old, &w.data, u, mask, a))], describe: name(w, u, mask) });
        }
    }
    let tearable = units.iter().filter(|u| u.len() >= 2).count();
    if tearable >= 2 {
        let mut blocks = Vec::new();
        let mut parts = Vec::new();
        for ((w, old), u) in flight.iter().zip(&units) {
            if u.len() < 2 {
                continue;
            }
            let mask = rng.below((1u64 << u.len()) - 1);
            blocks.push((w.block, torn(old, &w.data, u, mask, a)));
            parts.push(name(w, u, mask));
        }
        out.push(TornState { blocks, describe: parts.join("; ") });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::WriteKind;

    fn write(started: Cycle, durable: Cycle, block: u64, data: BlockData) -> DurableWrite {
        DurableWrite { started, durable, block: BlockId(block), kind: WriteKind::LogHead, data }
    }

    #[test]
    fn atomicity_is_one_of_the_allowed_values() {
        for a in ATOMICITIES {
            assert_eq!(parse_atomicity(a), Ok(a));
        }
        let e = parse_atomicity(4).unwrap_err();
        assert!(e.contains("allowed 8, 16, 32, 64"), "{e}");
    }

    #[test]
    fn in_flight_means_started_and_not_durable() {
        let ws = [
            write(Cycle::new(0), Cycle::new(10), 1, [0; 64]),
            write(Cycle::new(5), Cycle::new(20), 2, [0; 64]),
            write(Cycle::new(12), Cycle::new(30), 3, [0; 64]),
        ];
        let ms = max_service(&ws);
        assert_eq!(ms, Cycle::new(18));
        assert_eq!(in_flight(&ws, 0, Cycle::new(9), ms), vec![0, 1]);
        assert_eq!(in_flight(&ws, 1, Cycle::new(10), ms), vec![1], "durable at 10 is not in flight at 10");
        assert_eq!(in_flight(&ws, 1, Cycle::new(11), ms), vec![1], "not started yet");
        assert_eq!(in_flight(&ws, 1, Cycle::new(12), ms), vec![1, 2]);
    }

    #[test]
    fn exhaustive_enumerates_every_proper_subset_of_the_changed_units() {
        let mut new = [0u8; 64];
        new[0] = 1;
        new[17] = 2; // unit 2 at 8 bytes
        new[63] = 3; // unit 7
        let w = write(Cycle::new(0), Cycle::new(10), 4, new);
        let flight = [(&w, [0u8; 64])];
        let states = variants(&flight, 8, true, 1, Cycle::new(5));
        assert_eq!(states.len(), 6, "2^3 - 2");
        let mut seen: Vec<BlockData> = states.iter().map(|s| s.blocks[0].1).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 6, "all distinct");
        assert!(seen.iter().all(|b| *b != new && *b != [0; 64]), "neither the old nor the new block");
        assert_eq!(variants(&flight, 32, true, 1, Cycle::new(5)).len(), 2, "two 32-byte units");
        assert!(variants(&flight, 64, true, 1, Cycle::new(5)).is_empty(), "64: the clean model");
        let sampled = variants(&flight, 8, false, 1, Cycle::new(5));
        assert_eq!(sampled.len(), 1);
        assert_eq!(sampled[0].blocks[0].1, variants(&flight, 8, false, 1, Cycle::new(5))[0].blocks[0].1, "seeded");
    }

    #[test]
    fn several_writes_in_flight_also_tear_together() {
        let (mut x, mut y) = ([0u8; 64], [0u8; 64]);
        x[0] = 1;
        x[8] = 1;
        y[0] = 1;
        y[8] = 1;
        let (w1, w2) = (write(Cycle::new(0), Cycle::new(10), 4, x), write(Cycle::new(0), Cycle::new(11), 5, y));
        let one = write(Cycle::new(0), Cycle::new(12), 6, [7; 64]);
        let mut single = [0u8; 64];
        single[3] = 9;
        let w3 = write(Cycle::new(0), Cycle::new(12), 7, single);
        let states =
            variants(&[(&w1, [0; 64]), (&w2, [0; 64]), (&one, [7; 64]), (&w3, [0; 64])], 8, false, 3, Cycle::new(5));
        assert_eq!(states.len(), 3, "one each for the two tearable writes, one joint");
        assert_eq!(states[2].blocks.len(), 2);
    }
}
