//! YCSB: the six core workloads of the Yahoo! Cloud Serving Benchmark (Cooper et al., "Benchmarking
//! Cloud Serving Systems with YCSB", SoCC 2010, section 4.1 and Table 2; the `workloads/workloada`
//! ... `workloadf` files and `CoreWorkload` of YCSB), as `-w ycsb-a` ... `-w ycsb-f`, on
//! persistent records in a slab, indexed by the persistent hash table (`hash.rs`) or B+tree
//! (`btree.rs`). One YCSB operation is one transaction. The definitions, the generators and the
//! byte layout with its crash argument are in docs/ycsb.md.
//!
//! | workload | operations | keys |
//! |---|---|---|
//! | `ycsb-a` | 50% read, 50% update | scrambled zipfian |
//! | `ycsb-b` | 95% read, 5% update | scrambled zipfian |
//! | `ycsb-c` | 100% read | scrambled zipfian |
//! | `ycsb-d` | 95% read, 5% insert | latest |
//! | `ycsb-e` | 95% scan (length uniform in `1..=max_scan_length`), 5% insert | scrambled zipfian |
//! | `ycsb-f` | 50% read, 50% read-modify-write | scrambled zipfian |
//!
//! # Persistent layout (little-endian)
//!
//! | bytes | content |
//! |---|---|
//! | `0..16` | the record [`Slab`]'s metadata: `free_head` u64 (always 0: records are never deleted), `bump` u64 = records stored |
//! | `4096..4096 + I` | the index: a hash table or a B+tree, with its own layout (docs/workloads.md), addresses relative to 4096 |
//! | `R..R + C * S` | `C` record slots of `S` bytes (`R` = the index's end rounded up to 4096; `S` = `8 + field_count * field_bytes` rounded up to 64) |
//!
//! Record slot `i` holds key number `i` (YCSB's `keynum`: inserts take the slab's next slot, in
//! order): its key u64 at +0, then `field_count` fields of `field_bytes` bytes. A field is its
//! 8-byte seed, then `field_bytes - 8` bytes expanded from the seed, the key and the field's
//! index ([`field_bytes`]): a field "decodes" when its bytes are that expansion, so a field
//! whose lines come from two different writes (a torn update) does not. The hash index maps key
//! `i` to the record's address (the first word of its entry's value); the B+tree maps
//! `fnv_hash64(i)` (YCSB's hashed insert order, `insertorder=hashed`) to the slot number `i`.

use super::btree::{BTree, BTreeConfig};
use super::hash::{HashTable, HashTableConfig};
use super::keys::fnv_hash64;
use super::kv::{rd, KvStore as _};
use super::native::Native;
use super::slab::Slab;
use super::{Part, Pm};
use crate::rng::Rng;
use crate::types::{Addr, BlockData};
use serde::{Deserialize, Serialize};

/// YCSB's `ScrambledZipfianGenerator.ZETAN`: zeta(ITEM_COUNT, 0.99), precomputed by YCSB.
pub const ZETAN: f64 = 26.46902820178302;
/// YCSB's `ZIPFIAN_CONSTANT` (and `USED_ZIPFIAN_CONSTANT`), the skew theta of its zipfian draws.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// YCSB's `ScrambledZipfianGenerator.ITEM_COUNT`: the ranks are drawn over `0..=ITEM_COUNT`,
/// then hashed (FNV-1a 64) and reduced modulo the key space.
pub const ITEM_COUNT: u64 = 10_000_000_000;

/// Where the index starts (the record slab's metadata has the first page).
const INDEX_AT: u64 = 4096;
/// Records inserted per populate transaction.
const POPULATE_BATCH: u64 = 1024;
/// Seeds the populated fields.
const POPULATE_SEED: u64 = 0x5943_5342;
/// Largest data area a configuration may ask for (16 GiB).
const MAX_DATA_BYTES: u64 = 1 << 34;

/// The index over the records (`workload.ycsb.index`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IndexKind {
    /// YCSB's own choice: the hash table for A-D and F, the B+tree (ordered) for E.
    Default,
    Hash,
    Btree,
}

/// Parameters of the YCSB workloads (`--set workload.ycsb.<key>=v`), shared by the six.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct YcsbConfig {
    /// Records loaded before the run (YCSB's `recordcount`).
    pub records: u64,
    /// YCSB's `operationcount`: sizes the room for inserts, `operations * insert share * 2`
    /// records (YCSB's `expectednewkeys`), and the scrambled zipfian's key space. An insert
    /// that finds the room full writes nothing.
    pub operations: u64,
    /// Fields per record (YCSB's `fieldcount`).
    pub field_count: u64,
    /// Bytes per field (YCSB's `fieldlength`); the first 8 are the field's seed.
    pub field_bytes: u64,
    /// Longest scan of `ycsb-e` (YCSB's `maxscanlength`; the length is uniform from 1).
    pub max_scan_length: u64,
    /// `default`, `hash` or `btree`.
    pub index: IndexKind,
    /// Non-memory instructions of one operation: its kind and key draws (docs/ycsb.md).
    pub compute_cycles_per_op: u64,
    /// Non-memory instructions per field value generated (seed draw and expansion).
    pub compute_cycles_per_field_written: u64,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            records: 50_000,
            operations: 100_000,
            field_count: 10,
            field_bytes: 100,
            max_scan_length: 100,
            index: IndexKind::Default,
            compute_cycles_per_op: 94,
            compute_cycles_per_field_written: 47,
        }
    }
}

impl YcsbConfig {
    /// Range checks; one line naming the key, the value and what is allowed.
    /// Bytes of one record: its key, then `field_count` fields of `field_bytes`.
    pub fn record_bytes(&self) -> u64 {
        8 + self.field_count * self.field_bytes
    }

    pub fn validate(&self) -> Result<(), String> {
        let check = |k: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("workload.ycsb.{k} = {v}: allowed {lo}..={hi}"))
            }
        };
        check("records", self.records, 2, 1 << 26)?;
        check("operations", self.operations, 0, 1 << 32)?;
        check("field_count", self.field_count, 1, 64)?;
        check("field_bytes", self.field_bytes, 8, 4096)?;
        check("max_scan_length", self.max_scan_length, 1, 1000)?;
        check("compute_cycles_per_op", self.compute_cycles_per_op, 0, 1_000_000)?;
        check("compute_cycles_per_field_written", self.compute_cycles_per_field_written, 0, 1_000_000)?;
        for l in Letter::ALL {
            let bytes = YcsbCore::data_bytes_of(self, l);
            if bytes > MAX_DATA_BYTES {
                return Err(format!(
                    "workload.ycsb.records = {}: needs a {bytes}-byte data area with these record sizes, allowed at \
                     most {MAX_DATA_BYTES}",
                    self.records
                ));
            }
        }
        Ok(())
    }
}

/// Which of the six workloads.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Letter {
    A,
    B,
    C,
    D,
    E,
    F,
}

/// The operations of YCSB's `CoreWorkload`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

impl Letter {
    pub const ALL: [Letter; 6] = [Letter::A, Letter::B, Letter::C, Letter::D, Letter::E, Letter::F];

    fn of(c: char) -> Letter {
        match c {
            'a' => Letter::A,
            'b' => Letter::B,
            'c' => Letter::C,
            'd' => Letter::D,
            'e' => Letter::E,
            _ => Letter::F,
        }
    }

    /// The operation proportions of `workloads/workload<x>`, in the order `CoreWorkload` adds
    /// them to its `DiscreteGenerator` (read, update, insert, scan, read-modify-write).
    pub fn mix(self) -> &'static [(Kind, f64)] {
        match self {
            Letter::A => &[(Kind::Read, 0.5), (Kind::Update, 0.5)],
            Letter::B => &[(Kind::Read, 0.95), (Kind::Update, 0.05)],
            Letter::C => &[(Kind::Read, 1.0)],
            Letter::D => &[(Kind::Read, 0.95), (Kind::Insert, 0.05)],
            Letter::E => &[(Kind::Insert, 0.05), (Kind::Scan, 0.95)],
            Letter::F => &[(Kind::Read, 0.5), (Kind::ReadModifyWrite, 0.5)],
        }
    }

    fn insert_share(self) -> f64 {
        self.mix().iter().filter(|(k, _)| *k == Kind::Insert).map(|(_, p)| p).sum()
    }
}

/// `u` uniform in [0, 1) with 53 bits (Java's `Random.nextDouble` has as many).
#[inline]
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// YCSB's `ZipfianGenerator` (Gray et al., "Quickly generating billion-record synthetic
/// databases", SIGMOD 1994), with its incremental zeta when the item count grows.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    countforzeta: u64,
}

/// YCSB's `zetastatic(st, n, theta, initialsum)`: `initialsum` plus `1 / (i+1)^theta` for `i`
/// in `st..n`, summed in that order.
pub fn zetastatic(st: u64, n: u64, theta: f64, initialsum: f64) -> f64 {
    let mut sum = initialsum;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

impl Zipfian {
    /// `ZipfianGenerator(0, items - 1, theta, zetan)`.
    pub fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2theta = zetastatic(0, 2, theta, 0.0);
        let mut z =
            Zipfian { items, theta, zeta2theta, alpha: 1.0 / (1.0 - theta), zetan, eta: 0.0, countforzeta: items };
        z.eta = z.eta_now();
        z
    }

    /// `ZipfianGenerator(0, items - 1, theta)`: zeta summed as YCSB does.
    pub fn new(items: u64, theta: f64) -> Zipfian {
        Zipfian::with_zetan(items, theta, zetastatic(0, items, theta, 0.0))
    }

    /// YCSB's `eta`, from the item count given at construction (as YCSB computes it also after
    /// the count has grown).
    fn eta_now(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta)) / (1.0 - self.zeta2theta / self.zetan)
    }

    /// `nextLong(itemcount)` with the uniform draw `u`: zeta extended incrementally if
    /// `itemcount` grew (a smaller one is used as it is, as YCSB does by default).
    pub fn next_long(&mut self, itemcount: u64, u: f64) -> u64 {
        if itemcount > self.countforzeta {
            self.zetan = zetastatic(self.countforzeta, itemcount, self.theta, self.zetan);
            self.countforzeta = itemcount;
            self.eta = self.eta_now();
        }
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

/// YCSB's `ScrambledZipfianGenerator(0, itemcount - 1)` at theta 0.99: a rank over
/// `0..=ITEM_COUNT` with the precomputed `ZETAN`, hashed by FNV-1a 64 and reduced modulo
/// `itemcount`.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    gen: Zipfian,
    itemcount: u64,
}

impl ScrambledZipfian {
    pub fn new(itemcount: u64) -> ScrambledZipfian {
        ScrambledZipfian { gen: Zipfian::with_zetan(ITEM_COUNT + 1, ZIPFIAN_CONSTANT, ZETAN), itemcount }
    }

    /// `nextValue` with the uniform draw `u`.
    pub fn next_with(&mut self, u: f64) -> u64 {
        let items = self.gen.items;
        fnv_hash64(self.gen.next_long(items, u)) % self.itemcount
    }
}

/// One drawn operation: its kind, its key number, the field it writes and that field's seed,
/// the scan length.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub kind: Kind,
    pub key: u64,
    pub field: u64,
    pub seed: u64,
    pub len: u64,
}

/// `field_bytes` bytes of field `f` of key `key` with seed `seed`: the seed, then its expansion.
pub fn field_bytes(key: u64, f: u64, seed: u64, out: &mut [u8]) {
    let n = out.len().min(8);
    out[..n].copy_from_slice(&seed.to_le_bytes()[..n]);
    let x = seed ^ key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ f.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    for (j, w) in out[n..].chunks_mut(8).enumerate() {
        let v = splitmix(x.wrapping_add(j as u64));
        w.copy_from_slice(&v.to_le_bytes()[..w.len()]);
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The index, one of the two existing persistent structures, at `INDEX_AT`.
#[derive(Clone)]
enum Index {
    Hash(HashTable),
    Btree(BTree),
}

/// A data area read through [`Pm`] (loads only), for the verifier's lookups.
struct Image<'a>(&'a [u8]);

impl Pm for Image<'_> {
    fn begin(&mut self) {}
    fn commit(&mut self) {}
    fn abort(&mut self) {}
    fn load(&mut self, addr: Addr, buf: &mut [u8]) {
        match self.0.get(addr.0 as usize..addr.0 as usize + buf.len()) {
            Some(b) => buf.copy_from_slice(b),
            None => buf.fill(0),
        }
    }
    fn store(&mut self, _addr: Addr, _data: &[u8]) {
        debug_assert!(false, "the verifier only reads");
    }
    fn compute(&mut self, _cycles: u64) {}
    fn last_durable_tx(&self) -> u64 {
        0
    }
}

/// One YCSB workload: its configuration, the record slab, the index, and the driver state of
/// YCSB's client (the newest key it knows inserted, its generators).
#[derive(Clone)]
pub struct YcsbCore {
    cfg: YcsbConfig,
    letter: Letter,
    slab: Slab,
    index: Index,
    index_bytes: u64,
    /// YCSB's `transactioninsertkeysequence.lastValue()` as this core knows it: the newest key
    /// number it saw inserted (all below it are committed).
    latest: u64,
    scrambled: ScrambledZipfian,
    /// `ycsb-d`'s `SkewedLatestGenerator`'s zipfian.
    skewed: Zipfian,
    buf: Vec<u8>,
    ids: Vec<u64>,
    scan: Vec<(u64, u32)>,
}

impl YcsbCore {
    pub fn new(cfg: &YcsbConfig, letter: Letter) -> YcsbCore {
        let (index, index_bytes, slab) = Self::layout(cfg, letter);
        YcsbCore {
            cfg: cfg.clone(),
            letter,
            scrambled: ScrambledZipfian::new(slab.capacity + 1),
            skewed: Zipfian::new(if letter == Letter::D { cfg.records - 1 } else { 2 }, ZIPFIAN_CONSTANT),
            buf: vec![0u8; cfg.record_bytes() as usize],
            slab,
            index,
            index_bytes,
            latest: cfg.records - 1,
            ids: Vec::new(),
            scan: Vec::new(),
        }
    }

    /// Bytes of data area `letter` needs under `cfg`: the layout alone, without the generators
    /// (`ycsb-d`'s zipfian sums zeta over every record), so that checking a configuration costs
    /// no more than its arithmetic.
    pub fn data_bytes_of(cfg: &YcsbConfig, letter: Letter) -> u64 {
        let slab = Self::layout(cfg, letter).2;
        slab.base.0 + slab.bytes()
    }

    /// The index, its bytes, and the record slab after it (one slot per record the run can
    /// hold: the records loaded plus twice the inserts expected).
    fn layout(cfg: &YcsbConfig, letter: Letter) -> (Index, u64, Slab) {
        let expected = (cfg.operations as f64 * letter.insert_share() * 2.0) as u64;
        let capacity = cfg.records + expected;
        let btree = match cfg.index {
            IndexKind::Default => letter == Letter::E,
            k => k == IndexKind::Btree,
        };
        let index = if btree {
            Index::Btree(BTree::new(&BTreeConfig { key_space: capacity.max(16), ..Default::default() }))
        } else {
            Index::Hash(HashTable::new(&HashTableConfig {
                key_space: capacity,
                buckets: capacity.next_power_of_two().max(2),
                compute_cycles_per_insert: 5,
                compute_cycles_per_delete: 0,
                ..Default::default()
            }))
        };
        let index_bytes = match &index {
            Index::Hash(h) => h.data_bytes(),
            Index::Btree(b) => b.data_bytes(),
        };
        let records_at = (INDEX_AT + index_bytes).next_multiple_of(4096);
        let slot = cfg.record_bytes().next_multiple_of(64);
        (index, index_bytes, Slab::new(Addr(0), Addr(records_at), slot, capacity))
    }

    pub fn letter(&self) -> Letter {
        self.letter
    }

    /// Bytes of data area: the slab's page, the index, the record slots.
    pub fn data_bytes(&self) -> u64 {
        self.slab.base.0 + self.slab.bytes()
    }

    fn record_at(&self, key: u64) -> Addr {
        self.slab.base + key * self.slab.slot_bytes
    }

    fn index_pm<'a, P: Pm>(pm: &'a mut P) -> Part<'a, P> {
        Part { pm, base: INDEX_AT }
    }

    /// The record address the index holds for `key`.
    fn lookup<P: Pm>(&mut self, pm: &mut P, key: u64) -> Option<Addr> {
        let slab = self.slab;
        let mut ix = Self::index_pm(pm);
        match &mut self.index {
            Index::Hash(h) => h.get(&mut ix, key).map(Addr),
            Index::Btree(b) => b.lookup(&mut ix, fnv_hash64(key)).map(|s| slab.base + s as u64 * slab.slot_bytes),
        }
    }

    /// Load the whole record of `key` (a real read), if indexed.
    fn read<P: Pm>(&mut self, pm: &mut P, key: u64) -> Option<Addr> {
        let at = self.lookup(pm, key)?;
        pm.load(at, &mut self.buf);
        Some(at)
    }

    /// Write field `f` of the record of `key` at `at`.
    fn write_field<P: Pm>(&mut self, pm: &mut P, at: Addr, key: u64, f: u64, seed: u64) {
        pm.compute(self.cfg.compute_cycles_per_field_written);
        let n = self.cfg.field_bytes as usize;
        field_bytes(key, f, seed, &mut self.buf[..n]);
        pm.store(at + 8 + f * self.cfg.field_bytes, &self.buf[..n]);
    }

    /// Insert the next record (key = the slab's next slot), its field `f` seeded by
    /// `seed(f)`; `None` if the room is full (nothing written). On several cores the caller
    /// holds lock 0 (the slab's line); the index's lines are locked here, ascending.
    fn insert<P: Pm>(&mut self, pm: &mut P, seed: impl Fn(u64) -> u64) -> Option<u64> {
        let at = self.slab.alloc(pm)?;
        let key = (at.0 - self.slab.base.0) / self.slab.slot_bytes;
        if pm.concurrent() {
            if let Index::Hash(h) = &self.index {
                pm.lock(INDEX_AT / 64);
                pm.lock(INDEX_AT / 64 + h.bucket_line(key));
            }
        }
        let fb = self.cfg.field_bytes as usize;
        let mut buf = std::mem::take(&mut self.buf);
        buf[..8].copy_from_slice(&key.to_le_bytes());
        for (f, field) in buf[8..].chunks_exact_mut(fb).enumerate() {
            pm.compute(self.cfg.compute_cycles_per_field_written);
            field_bytes(key, f as u64, seed(f as u64), field);
        }
        pm.store(at, &buf);
        self.buf = buf;
        let mut ix = Self::index_pm(pm);
        match &mut self.index {
            Index::Hash(h) => super::kv::KvStore::insert(h, &mut ix, key, at.0),
            Index::Btree(b) => {
                b.insert(&mut ix, fnv_hash64(key), key as u32);
            }
        }
        Some(key)
    }

    /// Write the initial records `0..records` in place, in key order, through the insert code
    /// on a native back end.
    pub fn populate(&mut self, data: &mut [u8]) {
        let n = self.data_bytes() as usize;
        let mut pm = Native::new(&mut data[..n]);
        if let Index::Btree(b) = &self.index {
            pm.begin();
            b.init_empty(&mut Self::index_pm(&mut pm));
            pm.commit();
        }
        let mut done = 0;
        while done < self.cfg.records {
            pm.begin();
            for key in done..(done + POPULATE_BATCH).min(self.cfg.records) {
                self.insert(&mut pm, |f| splitmix(POPULATE_SEED ^ key.wrapping_mul(64).wrapping_add(f)));
            }
            pm.commit();
            done = (done + POPULATE_BATCH).min(self.cfg.records);
        }
    }

    /// YCSB's `nextKeynum`: `latest` for `ycsb-d` (the newest key minus a zipfian rank over the
    /// keys below it), else the scrambled zipfian, drawn again while beyond the newest key.
    fn next_key(&mut self, rng: &mut Rng) -> u64 {
        if self.letter == Letter::D {
            let max = self.latest;
            return max - self.skewed.next_long(max, unit(rng)).min(max);
        }
        loop {
            let k = self.scrambled.next_with(unit(rng));
            if k <= self.latest {
                return k;
            }
        }
    }

    /// Draw one operation: the kind (YCSB's `DiscreteGenerator`), then as `CoreWorkload` does
    /// for it: the key, the field to write and its seed, the scan length.
    pub fn draw_op(&mut self, rng: &mut Rng) -> Op {
        let mut u = unit(rng);
        let mix = self.letter.mix();
        let mut kind = mix[mix.len() - 1].0;
        for &(k, p) in mix {
            if u < p {
                kind = k;
                break;
            }
            u -= p;
        }
        let mut op = Op { kind, key: 0, field: 0, seed: 0, len: 0 };
        match kind {
            Kind::Insert => op.seed = rng.next_u64(),
            Kind::Read => op.key = self.next_key(rng),
            Kind::Update | Kind::ReadModifyWrite => {
                op.key = self.next_key(rng);
                op.field = rng.below(self.cfg.field_count);
                op.seed = rng.next_u64();
            }
            Kind::Scan => {
                op.key = self.next_key(rng);
                op.len = 1 + rng.below(self.cfg.max_scan_length);
            }
        }
        op
    }

    /// On several cores: the locks of `op`, ascending (docs/ycsb.md, "Several cores").
    fn lock<P: Pm>(&mut self, pm: &mut P, op: &Op) {
        let inserts = self.letter.insert_share() > 0.0;
        if op.kind == Kind::Insert || (inserts && matches!(self.index, Index::Btree(_))) {
            pm.lock(super::STRUCTURE_LOCK);
            return;
        }
        self.ids.clear();
        let keys = match op.kind {
            Kind::Scan if matches!(self.index, Index::Hash(_)) => op.key..(op.key + op.len).min(self.latest + 1),
            _ => op.key..op.key + 1,
        };
        for k in keys {
            self.ids.push(self.record_at(k).0 / 64);
            if let (true, Index::Hash(h)) = (inserts, &self.index) {
                self.ids.push(INDEX_AT / 64 + h.bucket_line(k));
            }
        }
        self.ids.sort_unstable();
        self.ids.dedup();
        for &id in &self.ids {
            pm.lock(id);
        }
    }

    /// Exactly one transaction: one operation; aborted at the end if `abort`.
    pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
        let op = self.draw_op(rng);
        pm.begin();
        pm.compute(self.cfg.compute_cycles_per_op);
        if pm.concurrent() {
            self.lock(pm, &op);
        }
        let mut inserted = None;
        match op.kind {
            Kind::Read => {
                self.read(pm, op.key);
            }
            Kind::Update => {
                if let Some(at) = self.lookup(pm, op.key) {
                    self.write_field(pm, at, op.key, op.field, op.seed);
                }
            }
            Kind::ReadModifyWrite => {
                if let Some(at) = self.read(pm, op.key) {
                    self.write_field(pm, at, op.key, op.field, op.seed);
                }
            }
            Kind::Insert => inserted = self.insert(pm, |f| splitmix(op.seed.wrapping_add(f))),
            Kind::Scan => self.scan(pm, op.key, op.len),
        }
        if abort {
            pm.abort();
        } else {
            pm.commit();
            if let Some(k) = inserted {
                self.latest = self.latest.max(k);
            }
        }
    }

    /// Read `len` records from `key` on: in the B+tree's key order, or (hash index) the key
    /// numbers `key..` up to the newest.
    fn scan<P: Pm>(&mut self, pm: &mut P, key: u64, len: u64) {
        if let Index::Btree(b) = &mut self.index {
            let mut out = std::mem::take(&mut self.scan);
            b.scan(&mut Self::index_pm(pm), fnv_hash64(key), len as usize, &mut out);
            for &(_, slot) in &out {
                let at = self.record_at(slot as u64);
                pm.load(at, &mut self.buf);
            }
            self.scan = out;
            return;
        }
        for k in key..(key + len).min(self.latest + 1) {
            self.read(pm, k);
        }
    }
}

/// Verification (docs/ycsb.md, "Verifier").
impl YcsbCore {
    /// Structural check of a data area; `Err` is one line naming what is broken.
    pub fn verify(&self, data: &[u8]) -> Result<(), String> {
        let n = self.check_index(data)?;
        (0..n).try_for_each(|i| self.check_record(data, i))
    }

    /// The slab's metadata, the index's own structure, and every record's key indexed at its
    /// slot, with no other entry: the records stored.
    fn check_index(&self, data: &[u8]) -> Result<u64, String> {
        if (data.len() as u64) < self.data_bytes() {
            return Err(format!("ycsb: data area of {} bytes, need {}", data.len(), self.data_bytes()));
        }
        let (free, n) = (rd(data, 0), rd(data, 8));
        if free != 0 {
            return Err(format!("ycsb: the record slab has a free list ({free:#x}); records are never deleted"));
        }
        if n < self.cfg.records || n > self.slab.capacity {
            return Err(format!(
                "ycsb: {n} records stored, allowed {}..={} (populated..=room)",
                self.cfg.records, self.slab.capacity
            ));
        }
        let ix = &data[INDEX_AT as usize..(INDEX_AT + self.index_bytes) as usize];
        let mut img = Image(ix);
        let entries = match &self.index {
            Index::Hash(h) => {
                h.verify(ix).map_err(|e| format!("ycsb index: {e}"))?;
                h.entries_in(ix).map_err(|e| format!("ycsb index: {e}"))?
            }
            Index::Btree(b) => {
                b.verify(ix).map_err(|e| format!("ycsb index: {e}"))?;
                let mut all = Vec::new();
                b.clone().scan(&mut img, 0, usize::MAX, &mut all);
                all.len() as u64
            }
        };
        if entries != n {
            return Err(format!("ycsb: the index holds {entries} keys, the slab {n} records"));
        }
        let mut tree = match &self.index {
            Index::Btree(b) => Some(b.clone()),
            Index::Hash(_) => None,
        };
        for i in 0..n {
            let got = match (&self.index, &mut tree) {
                (Index::Hash(h), _) => h.get(&mut img, i),
                (_, Some(b)) => b.lookup(&mut img, fnv_hash64(i)).map(|s| self.record_at(s as u64).0),
                _ => None,
            };
            if got != Some(self.record_at(i).0) {
                return Err(format!(
                    "ycsb: record {i} (at {:#x}) is not indexed (the index gives {got:x?})",
                    self.record_at(i).0
                ));
            }
        }
        Ok(n)
    }

    /// Record slot `i`: it holds key `i`, and each field decodes.
    fn check_record(&self, data: &[u8], i: u64) -> Result<(), String> {
        let at = self.record_at(i).0;
        let key = rd(data, at);
        if key != i {
            return Err(format!("ycsb: record slot {i} (at {at:#x}) holds key {key}"));
        }
        let fb = self.cfg.field_bytes as usize;
        let mut want = [0u8; 4096];
        for f in 0..self.cfg.field_count {
            let a = (at + 8 + f * self.cfg.field_bytes) as usize;
            let got = &data[a..a + fb];
            field_bytes(i, f, u64::from_le_bytes(got[..8].try_into().unwrap()), &mut want[..fb]);
            if got != &want[..fb] {
                return Err(format!("ycsb: record {i} field {f} (at {a:#x}) does not decode: torn or stale bytes"));
            }
        }
        Ok(())
    }

    /// The incremental verifier ([`super::follow::Follow`]).
    pub fn follower(&self) -> YcsbFollow {
        YcsbFollow { y: self.clone(), index_ok: false, n: 0, bad: Vec::new() }
    }
}

/// [`YcsbCore::verify`], incremental: a change confined to stored records' slots rechecks
/// those records; any other (an insert: the slab's metadata, the index, a new slot) checks the
/// whole area again.
pub struct YcsbFollow {
    y: YcsbCore,
    index_ok: bool,
    /// Records stored at the last whole check.
    n: u64,
    /// Records that do not decode, ascending.
    bad: Vec<u64>,
}

impl super::follow::Follow for YcsbFollow {
    fn reset(&mut self, data: &[u8]) -> bool {
        self.bad.clear();
        match self.y.check_index(data) {
            Ok(n) => {
                self.index_ok = true;
                self.n = n;
                self.bad.extend((0..n).filter(|&i| self.y.check_record(data, i).is_err()));
            }
            Err(_) => self.index_ok = false,
        }
        self.index_ok && self.bad.is_empty()
    }

    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool {
        let (base, slot) = (self.y.slab.base.0, self.y.slab.slot_bytes);
        let end = base + self.n * slot;
        if !self.index_ok || old.iter().any(|&(b, _)| (b as u64 * 64) < base || (b as u64 * 64) >= end) {
            return self.reset(data);
        }
        for &(b, _) in old {
            let i = (b as u64 * 64 - base) / slot;
            let ok = self.y.check_record(data, i).is_ok();
            match (self.bad.binary_search(&i), ok) {
                (Ok(p), true) => {
                    self.bad.remove(p);
                }
                (Err(p), false) => self.bad.insert(p, i),
                _ => {}
            }
        }
        self.bad.is_empty()
    }
}

/// `ycsb-<letter>`: [`YcsbCore`] with its letter as a type, one per workload of the
/// `workloads!` table.
#[derive(Clone)]
pub struct Ycsb<const L: char>(pub YcsbCore);

impl<const L: char> Ycsb<L> {
    pub fn new(cfg: &YcsbConfig) -> Self {
        Ycsb(YcsbCore::new(cfg, Letter::of(L)))
    }
}

impl<const L: char> std::ops::Deref for Ycsb<L> {
    type Target = YcsbCore;
    fn deref(&self) -> &YcsbCore {
        &self.0
    }
}

impl<const L: char> std::ops::DerefMut for Ycsb<L> {
    fn deref_mut(&mut self) -> &mut YcsbCore {
        &mut self.0
    }
}

pub type YcsbA = Ycsb<'a'>;
pub type YcsbB = Ycsb<'b'>;
pub type YcsbC = Ycsb<'c'>;
pub type YcsbD = Ycsb<'d'>;
pub type YcsbE = Ycsb<'e'>;
pub type YcsbF = Ycsb<'f'>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::follow::Follow;

    fn small(index: IndexKind) -> YcsbConfig {
        YcsbConfig { records: 2000, operations: 4000, index, ..Default::default() }
    }

    fn populated(cfg: &YcsbConfig, l: Letter) -> (YcsbCore, Native) {
        let mut y = YcsbCore::new(cfg, l);
        let mut mem = vec![0u8; y.data_bytes() as usize];
        y.populate(&mut mem);
        (y, Native::new(mem))
    }

    #[test]
    fn fnv_and_the_scrambled_zipfian_give_what_ycsbs_formulas_give() {
        // FNV-1a 64 of the value's 8 bytes, low first, absolute value as a signed long (the
        // values computed by an independent transcription of YCSB's `Utils.fnvhash64`).
        for (v, h) in [(0, 6284781860667377211), (1, 8517097267634966620), (2, 1820151046732198393)] {
            assert_eq!(fnv_hash64(v), h, "fnvhash64({v})");
        }
        // `nextLong` over ITEM_COUNT + 1 items with ZETAN: eta, and ranks at fixed draws
        // (ranks 0 and 1 below 1/zetan and (1 + 0.5^theta)/zetan), then `% itemcount`.
        let mut s = ScrambledZipfian::new(50_001);
        assert_eq!(s.gen.eta, 0.21220003380967406);
        for (u, rank, key) in [
            (0.01, 0, 26331),
            (0.05, 1, 34693),
            (0.5, 134552, 17349),
            (0.9, 1170869537, 15390),
            (0.99, 8086205587, 27177),
            (0.999999, 9999787803, 26437),
        ] {
            assert_eq!(s.gen.clone().next_long(ITEM_COUNT + 1, u), rank, "u = {u}");
            assert_eq!(s.next_with(u), key, "u = {u}");
        }
    }

    #[test]
    fn zetan_is_zeta_of_ten_to_the_ten_at_0_99() {
        let z = crate::workload::keys::zeta(ITEM_COUNT + 1, ZIPFIAN_CONSTANT);
        assert!((z / ZETAN - 1.0).abs() < 1e-10, "{z}");
    }

    #[test]
    fn ranks_0_and_1_have_their_exact_probabilities_and_zeta_grows_as_summed_afresh() {
        let (mut s, mut rng, n) = (ScrambledZipfian::new(1000), Rng::new(11), 1_000_000u64);
        let mut c = [0u64; 2];
        for _ in 0..n {
            let r = s.gen.next_long(ITEM_COUNT + 1, unit(&mut rng));
            if r < 2 {
                c[r as usize] += 1;
            }
        }
        for (i, p) in [(0, 1.0 / ZETAN), (1, 0.5f64.powf(0.99) / ZETAN)] {
            let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
            assert!((c[i] as f64 - mean).abs() < 5.0 * sd, "rank {i}: {} vs {mean:.0}", c[i]);
        }
        // The latest distribution's zipfian: zeta extended term by term equals the fresh sum.
        let mut z = Zipfian::new(1999, ZIPFIAN_CONSTANT);
        z.next_long(2500, 0.5);
        assert_eq!(z.zetan, zetastatic(0, 2500, ZIPFIAN_CONSTANT, 0.0));
        assert_eq!(z.countforzeta, 2500);
    }

    #[test]
    fn each_workload_draws_its_mix_and_keys_in_range() {
        for l in Letter::ALL {
            let mut y = YcsbCore::new(&small(IndexKind::Default), l);
            let (mut rng, n) = (Rng::new(5), 200_000u64);
            let mut count = std::collections::HashMap::new();
            for _ in 0..n {
                let op = y.draw_op(&mut rng);
                *count.entry(op.kind).or_insert(0u64) += 1;
                assert!(op.key <= y.latest && op.field < 10, "{l:?} {op:?}");
                if op.kind == Kind::Scan {
                    assert!((1..=100).contains(&op.len));
                }
                if l == Letter::D && op.kind == Kind::Read {
                    assert!(op.key >= 1, "latest never picks key 0 (YCSB's max - rank, rank < max)");
                }
            }
            for &(k, p) in l.mix() {
                let got = *count.get(&k).unwrap_or(&0);
                let (mean, sd) = (n as f64 * p, (n as f64 * p * (1.0 - p)).sqrt());
                assert!((got as f64 - mean).abs() <= 5.0 * sd, "{l:?} {k:?}: {got} vs {mean:.0}");
            }
            assert_eq!(count.values().sum::<u64>(), n);
        }
    }

    #[test]
    fn reads_write_nothing_and_every_workload_keeps_the_verifier_passing() {
        for index in [IndexKind::Hash, IndexKind::Btree] {
            let (mut y, mut pm) = populated(&small(index), Letter::C);
            y.verify(&pm.mem).unwrap();
            let before = pm.mem.clone();
            let mut rng = Rng::new(3);
            for _ in 0..2000 {
                y.run_tx(&mut pm, &mut rng, false);
            }
            assert!(pm.mem == before, "{index:?}: ycsb-c wrote");
            for l in Letter::ALL {
                let (mut y, mut pm) = populated(&small(index), l);
                let (mut rng, mut aborts) = (Rng::new(7), Rng::new(8));
                let mut f = y.follower();
                assert!(f.reset(&pm.mem));
                for _ in 0..3000 {
                    y.run_tx(&mut pm, &mut rng, aborts.chance(0.2));
                }
                y.verify(&pm.mem).unwrap_or_else(|e| panic!("{index:?} {l:?}: {e}"));
                let stored = rd(&pm.mem, 8);
                let inserts = l.insert_share() > 0.0;
                assert_eq!(stored > 2000, inserts, "{index:?} {l:?}: {stored} records");
                assert_eq!(y.latest, stored - 1, "{index:?} {l:?}: the driver knows the newest key");
                assert!(f.reset(&pm.mem));
            }
        }
    }

    #[test]
    fn the_verifier_and_its_follower_catch_a_torn_field_a_wrong_key_and_an_unindexed_record() {
        for index in [IndexKind::Hash, IndexKind::Btree] {
            let (y, pm) = populated(&small(index), Letter::A);
            let mut f = y.follower();
            assert!(f.reset(&pm.mem));
            let rec = y.record_at(777).0 as usize;
            // A field's tail from another write: one byte of field 3 changed.
            let mut m = pm.mem.clone();
            let at = rec + 8 + 3 * 100 + 50;
            let old = <BlockData>::try_from(&m[at / 64 * 64..at / 64 * 64 + 64]).unwrap();
            m[at] ^= 1;
            let e = y.verify(&m).unwrap_err();
            assert!(
                e.starts_with("ycsb: record 777 field 3 ") && e.ends_with("does not decode: torn or stale bytes"),
                "{e}"
            );
            assert!(!f.changed(&m, &[(at / 64, old)]));
            m[at] ^= 1;
            assert!(f.changed(&m, &[(at / 64, old)]), "repaired");
            // A slot holding another key.
            let mut m = pm.mem.clone();
            m[rec..rec + 8].copy_from_slice(&778u64.to_le_bytes());
            assert_eq!(y.verify(&m).unwrap_err(), format!("ycsb: record slot 777 (at {rec:#x}) holds key 778"));
            // The index loses a record: a hash entry's key, or a B+tree leaf's key, changed.
            let mut m = pm.mem.clone();
            match &y.index {
                Index::Hash(h) => {
                    // The bucket head of key 777 unlinked: its chain's entries are lost.
                    let b = INDEX_AT + h.bucket_line(777) * 64;
                    let slot = (b..b + 64).step_by(8).find(|&a| rd(&m, a) != 0).unwrap() as usize;
                    m[slot..slot + 8].fill(0);
                }
                Index::Btree(_) => {
                    // The rightmost key of the first leaf moved up by one: still ordered, but
                    // no longer the hash of any record.
                    let root = rd(&m, INDEX_AT) + INDEX_AT;
                    let mut n = root;
                    while u32::from_le_bytes(m[n as usize..n as usize + 4].try_into().unwrap()) != 1 {
                        n = rd(&m, n + 2048) + INDEX_AT;
                    }
                    let cnt = u32::from_le_bytes(m[n as usize + 4..n as usize + 8].try_into().unwrap()) as u64;
                    let k = n + 16 + 8 * (cnt - 1);
                    let v = rd(&m, k) + 1;
                    m[k as usize..k as usize + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            let e = y.verify(&m).unwrap_err();
            assert!(e.starts_with("ycsb"), "{index:?}: {e}");
            assert!(!y.follower().reset(&m));
        }
    }

    #[test]
    fn bad_knobs_are_one_line_naming_the_key_and_the_allowed_values() {
        let bad = |f: fn(&mut YcsbConfig)| {
            let mut c = YcsbConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        assert_eq!(bad(|c| c.field_bytes = 0), "workload.ycsb.field_bytes = 0: allowed 8..=4096");
        assert_eq!(bad(|c| c.records = 0), "workload.ycsb.records = 0: allowed 2..=67108864");
        assert_eq!(bad(|c| c.field_count = 0), "workload.ycsb.field_count = 0: allowed 1..=64");
        assert!(bad(|c| {
            c.records = 1 << 26;
            c.field_count = 64;
            c.field_bytes = 4096
        })
        .starts_with("workload.ycsb.records = 67108864: needs a "));
        YcsbConfig::default().validate().unwrap();
    }
}
