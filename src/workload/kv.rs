//! The key-value driver shared by the hash table and the red-black tree: the operation mix
//! (insert or delete of a uniform key), the populate phase (a fixed share of the key space,
//! inserted through the store's own code on a native back end), and the value bytes expanded
//! from a seed. A store implements [`KvStore`]; everything else is here, once.

use super::keys::Keys;
use super::native::Native;
use super::Pm;
use crate::rng::Rng;

/// Keys inserted per populate transaction.
const POPULATE_BATCH: usize = 4096;

/// A persistent key-value structure driven by [`run_tx`] and [`populate`].
pub trait KvStore: Sized {
    /// Seeds the populate order and the populated values (distinct per workload).
    const POPULATE_SEED: u64;
    /// Operations per transaction, percentage of inserts, key space (from its configuration).
    fn shape(&self) -> (u64, u64, u64);
    /// Bytes of data area it needs.
    fn data_bytes(&self) -> u64;
    /// Its key chooser (`[workload.<name>.keys]`).
    fn keys(&self) -> &Keys;
    /// Insert `key` (or overwrite its value) with the value expanded from `seed`.
    fn insert<P: Pm>(&self, pm: &mut P, key: u64, seed: u64);
    /// Delete `key` if present.
    fn delete<P: Pm>(&self, pm: &mut P, key: u64);
    /// On several cores: the lock ids a transaction of `ops` takes (any order, duplicates
    /// allowed: [`run_tx`] sorts them), covering every line it may write. By default one lock
    /// over the whole structure.
    fn locks(&self, ops: &[Op], ids: &mut Vec<u64>) {
        let _ = ops;
        ids.push(super::STRUCTURE_LOCK);
    }
    /// Partitions of the key space (key `k` in partition `k % n`); a transaction works in one
    /// partition ([`run_tx`]). One by default.
    fn partitions(&self) -> u64 {
        1
    }

    /// Its operation mix.
    fn mix(&self) -> Mix {
        let (ops_per_tx, insert_percent, key_space) = self.shape();
        Mix { ops_per_tx, insert_percent, key_space, populate_seed: Self::POPULATE_SEED }
    }

    /// Write the initial structure: `insert_percent`% of the key space, through the store's own
    /// insert code on a native back end.
    fn populate(&mut self, data: &mut [u8]) {
        populate(self, &self.mix(), data, self.data_bytes() as usize);
    }

    /// Exactly one transaction of `ops_per_tx` operations; aborted at the end if `abort`.
    fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
        run_tx(self, &self.mix(), pm, rng, abort);
    }
}

/// The mix: operations per transaction, share of inserts, key space, populate seed.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub ops_per_tx: u64,
    pub insert_percent: u64,
    pub key_space: u64,
    /// Seeds the populate order and the populated values (distinct per workload).
    pub populate_seed: u64,
}

/// One operation, as drawn from the random stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Insert { key: u64, seed: u64 },
    Delete { key: u64 },
}

/// Draw, in this order: insert with probability `insert_percent`%, the key, the value seed.
pub fn draw_op(mix: &Mix, keys: &Keys, rng: &mut Rng) -> Op {
    let insert = rng.below(100) < mix.insert_percent;
    let key = keys.draw(rng, insert);
    if insert {
        Op::Insert { key, seed: rng.next_u64() }
    } else {
        Op::Delete { key }
    }
}

/// Exactly one transaction of `ops_per_tx` operations; aborted at the end if `abort`.
pub fn run_tx<S: KvStore, P: Pm>(s: &S, mix: &Mix, pm: &mut P, rng: &mut Rng, abort: bool) {
    let apply = |pm: &mut P, op: Op| match op {
        Op::Insert { key, seed } => s.insert(pm, key, seed),
        Op::Delete { key } => s.delete(pm, key),
    };
    // Several partitions: the transaction draws its partition `t` first, and its keys `k`
    // become `t + n * (k / n)`, keys of partition `t` (docs/workloads.md).
    let n = s.partitions();
    let t = if n > 1 { rng.below(n) } else { 0 };
    let draw = |rng: &mut Rng| match draw_op(mix, s.keys(), rng) {
        op if n == 1 => op,
        Op::Insert { key, seed } => Op::Insert { key: t + n * (key / n), seed },
        Op::Delete { key } => Op::Delete { key: t + n * (key / n) },
    };
    pm.begin();
    if pm.concurrent() {
        // Several cores: the operations are drawn first (the same draws in the same order),
        // so that the transaction takes every lock it needs, ascending, before its first
        // access (strict two-phase locking; docs/workloads.md, "Locking on several cores").
        let ops: Vec<Op> = (0..mix.ops_per_tx).map(|_| draw(rng)).collect();
        let mut ids = Vec::with_capacity(ops.len() + 1);
        s.locks(&ops, &mut ids);
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            pm.lock(id);
        }
        for op in ops {
            apply(pm, op);
        }
    } else {
        for _ in 0..mix.ops_per_tx {
            apply(pm, draw(rng));
        }
    }
    if abort {
        pm.abort();
    } else {
        pm.commit();
    }
}

/// The operations of one transaction drawn from `rng` and `keys` (copies of what the
/// transaction used), for models: test oracles replay them into a std collection.
pub fn for_each_op(mix: &Mix, keys: &Keys, rng: &mut Rng, mut f: impl FnMut(Op)) {
    for _ in 0..mix.ops_per_tx {
        f(draw_op(mix, keys, rng));
    }
}

/// The (key, value seed) pairs that [`populate`] inserts, for models.
pub fn populated(mix: &Mix) -> impl Iterator<Item = (u64, u64)> {
    let seed = mix.populate_seed;
    populate_keys(mix).into_iter().map(move |k| (k, k ^ seed))
}

/// Fill `insert_percent`% of the key space (the steady state of the mix) into `data[..n]`, in
/// place.
pub fn populate<S: KvStore>(s: &S, mix: &Mix, data: &mut [u8], n: usize) {
    let mut pm = Native::new(&mut data[..n]);
    let keys = populate_keys(mix);
    for batch in keys.chunks(POPULATE_BATCH) {
        pm.begin();
        for &key in batch {
            s.insert(&mut pm, key, key ^ mix.populate_seed);
        }
        pm.commit();
    }
}

/// `insert_percent`% of `0..key_space`, chosen and ordered at random from the populate seed.
pub fn populate_keys(mix: &Mix) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..mix.key_space).collect();
    let mut rng = Rng::new(mix.populate_seed);
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.below(i as u64 + 1) as usize);
    }
    keys.truncate((mix.key_space * mix.insert_percent / 100) as usize);
    keys
}

/// `N` value bytes expanded from a 64-bit seed (`N` a multiple of 8).
pub fn value_bytes<const N: usize>(seed: u64) -> [u8; N] {
    let mut v = [0u8; N];
    for (i, w) in v.chunks_exact_mut(8).enumerate() {
        w.copy_from_slice(&seed.wrapping_add((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes());
    }
    v
}

/// A little-endian u64 of a data area (verifiers).
pub fn rd(data: &[u8], a: u64) -> u64 {
    u64::from_le_bytes(data[a as usize..a as usize + 8].try_into().unwrap())
}

/// A std-collection model of a key-value store, for test oracles.
pub trait KvModel: FromIterator<(u64, u64)> {
    fn put(&mut self, key: u64, seed: u64);
    fn del(&mut self, key: u64);
}

impl KvModel for std::collections::HashMap<u64, u64> {
    fn put(&mut self, key: u64, seed: u64) {
        self.insert(key, seed);
    }
    fn del(&mut self, key: u64) {
        self.remove(&key);
    }
}

impl KvModel for std::collections::BTreeMap<u64, u64> {
    fn put(&mut self, key: u64, seed: u64) {
        self.insert(key, seed);
    }
    fn del(&mut self, key: u64) {
        self.remove(&key);
    }
}

/// Model-based test driver: populate `s` on a native back end, run `txs` transactions seeded by
/// `seed` (about 20% aborted), replay each committed one into the model `M`, and call
/// `each(tx, memory, model)` after populate (`tx = u64::MAX`) and after every transaction.
pub fn run_model_sequence<S: KvStore, M: KvModel>(s: &S, seed: u64, txs: u64, mut each: impl FnMut(u64, &[u8], &M)) {
    let mix = s.mix();
    let mut mem = vec![0u8; s.data_bytes() as usize];
    let n = mem.len();
    populate(s, &mix, &mut mem, n);
    let mut model: M = populated(&mix).collect();
    each(u64::MAX, &mem, &model);
    let mut pm = Native::new(mem);
    let (mut ops, mut aborts) = (Rng::new(seed), Rng::derive(seed, 2));
    for tx in 0..txs {
        let abort = aborts.chance(0.2);
        let (mut replay, replay_keys) = (ops.clone(), s.keys().clone());
        run_tx(s, &mix, &mut pm, &mut ops, abort);
        if !abort {
            for_each_op(&mix, &replay_keys, &mut replay, |op| match op {
                Op::Insert { key, seed } => model.put(key, seed),
                Op::Delete { key } => model.del(key),
            });
        }
        each(tx, &pm.mem, &model);
    }
}
