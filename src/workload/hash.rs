//! Hash: insert and delete entries of a persistent chained hash table (Table II of the LOC
//! papers, "insert/delete entries in a hash table", from the NV-Heaps suite).
//!
//! # Persistent layout (little-endian)
//!
//! | bytes | content |
//! |---|---|
//! | `0..16` | [`Slab`] metadata of the entry slab: `free_head` u64, `bump` u64 |
//! | `16..64` | unused (the allocator's block is not shared with buckets) |
//! | `64..64 + 8 * buckets` | bucket heads: u64 address of the first entry of the chain, 0 = empty |
//! | `slab_base..` | `key_space` entry slots of 64 bytes (`slab_base` = the bucket array's end rounded up to 64) |
//! | then, with `allocators = A > 1` | regions 1..A of `key_space` slots each, then allocators 1..A's [`Slab`] metadata, one 64-byte line each |
//!
//! With `A > 1` (on several cores: docs/workloads.md, "Locking on several cores") allocator `a`
//! hands out the slots of region `a`; a freed slot goes on the free list of the allocator that
//! frees it, whatever its region. With `A = 1` (the default) the layout is the one above.
//!
//! An entry is one 64-byte slot, so one block: `key` u64 at +0, `next` u64 at +8 (address of
//! the next entry of the chain, 0 = end), value 48 bytes at +16. A free slot holds the slab's
//! free-list link at +0. The slab has one slot per key of the key space, so an insert never
//! finds it full.
//!
//! # Operations
//!
//! Key `k` lives in bucket `(k * 0x9E3779B97F4A7C15) >> (64 - log2 buckets)` (Fibonacci
//! hashing). An insert walks the chain: if the key is there its value is overwritten (48 bytes,
//! one store); otherwise a slot is allocated, written whole (key, next = old head, value: one
//! 64-byte store) and becomes the bucket head. A delete walks the chain and, if the key is
//! there, stores its `next` into the predecessor's link (the bucket head or the previous
//! entry's `next`) and frees the slot. Every store happens inside the transaction, allocator
//! metadata included.
//!
//! Each operation draws, in this order: insert with probability `insert_percent`%, else delete;
//! the key uniformly from `0..key_space`; for an insert, a 64-bit seed from which the 48 value
//! bytes are expanded. Populate fills exactly `insert_percent`% of the key space (a seeded
//! random choice, inserted in random order), the steady state of this process, so the table
//! size neither drifts nor starts away from equilibrium. At the defaults (2^19 keys, 50%) that
//! is 262144 entries = 16 MiB of entries plus 2 MiB of bucket heads (2^18 buckets, load factor
//! 1): 18 MiB of live structure, 18 times the 1 MiB LLC.
//!
//! The driver keeps no state between transactions (the operations depend only on the random
//! stream), so an aborted transaction cannot leave it inconsistent.
//!
//! # P-Set and transaction size
//!
//! Half the inserts find a new key (writes: the entry's block, the bucket head's block) and
//! half update (the entry's block); half the deletes find their key (the predecessor's block,
//! the freed slot's block). With the allocator's block, written by nearly every transaction,
//! that is at most `1.25 * ops_per_tx + 1` blocks; a slot freed and reallocated within one
//! transaction (the free list is LIFO) shares its block, so the model measures about
//! `1.14 * ops_per_tx + 1`. `ops_per_tx = 9` gives a measured P-Set of 11.25 blocks per
//! transaction (`locsim run --workload hash --protocol baseline,h-wal --txs 2000
//! --warmup-txs 200`; 8 would give 10.14), the nearest to Table II's 10.92. The paper's value
//! is an input here; nothing else is tuned toward it.
//!
//! # Compute charges
//!
//! Instructions other than loads and stores, one cycle each on the in-order core, counted with
//! the conventions of docs/workloads.md for SPS: one random draw (`Rng::below` or
//! `Rng::next_u64`) is 11 instructions, a compare-and-branch is one (fused, or `cbz`-like), a
//! multiply is one, address arithmetic folds into the addressing mode, register moves are free.
//! The constants are counts, not fitted to any result.
//!
//! | charge | work | instructions |
//! |---|---|---|
//! | `compute_cycles_per_insert` | op-kind draw and its compare-and-branch (12); key draw (11); value-seed draw (11); hash multiply and shift (2); six value words, one add each (6); found? (1); allocator: free list empty? and the new slot's address (2) | 45 |
//! | `compute_cycles_per_delete` | op-kind draw and its compare-and-branch (12); key draw (11); hash multiply and shift (2); found? (1) | 26 |
//! | `compute_cycles_per_probe` | per entry visited: key equal? (1); end of chain? (1) | 2 |
//!
//! # Verifier ([`HashTable::verify`])
//!
//! Every chain pointer is the first byte of a handed-out slab slot; no entry is reached twice
//! (this rules out cycles and shared tails); every entry's key is below `key_space` and hashes
//! to the bucket whose chain holds it; no key appears twice; the number of entries reached
//! from the buckets equals the slab's slots in use, and no slot on the free list is reached:
//! the chains reach every live key exactly once. It does not check values (the crash checker's
//! prefix comparison covers contents).

use super::follow::{Follow, Rewalk, SlabLists, Spans};
use super::kv::{self, rd, KvStore};
use super::slab::{Regions, Slab};
use super::Pm;
use crate::types::{Addr, BlockData};

/// Bytes of one entry (one slab slot, one block).
pub const ENTRY_BYTES: u64 = 64;
/// Bytes of an entry's value.
pub const VALUE_BYTES: usize = 48;
/// Address of the bucket array.
const BUCKETS_AT: u64 = 64;
/// Offsets inside an entry.
const KEY: u64 = 0;
const NEXT: u64 = 8;
const VALUE: u64 = 16;
/// Fibonacci hashing multiplier (2^64 / golden ratio).
const FIB: u64 = 0x9E37_79B9_7F4A_7C15;
/// Seed of the populate phase's key choice and order (a constant: populate is deterministic).
const POPULATE_SEED: u64 = 0x4841_5348;
/// Chains the verifier advances together (their cache misses overlap).
const VERIFY_BATCH: usize = 16;

/// Parameters of the hash-table workload (`--set workload.hash.<key>=v`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HashTableConfig {
    /// Keys are drawn from `0..key_space` (uniformly unless `keys` says otherwise) (keys; also the entry slab's capacity).
    pub key_space: u64,
    /// Bucket heads (a power of two).
    pub buckets: u64,
    /// Operations (inserts and deletes) per transaction.
    pub ops_per_tx: u64,
    /// Percent of operations that are inserts (the rest are deletes); populate fills this
    /// percent of the key space.
    pub insert_percent: u64,
    /// Non-memory instructions of one insert, outside the chain walk.
    pub compute_cycles_per_insert: u64,
    /// Non-memory instructions of one delete, outside the chain walk.
    pub compute_cycles_per_delete: u64,
    /// Non-memory instructions per chain entry visited.
    pub compute_cycles_per_probe: u64,
    /// Which keys the operations pick (uniform, zipfian, latest: `workload::keys`).
    pub keys: super::keys::KeysConfig,
    /// Entry allocators (1..=16), each with its own metadata line and slab region of
    /// `key_space` slots; on several cores core `c` allocates and frees through allocator
    /// `c % allocators`, so with one per core no two cores write one allocator line and
    /// transactions on different bucket lines run concurrently. 1 is the single-core layout.
    #[serde(default = "one")]
    pub allocators: u64,
}

/// The default of `allocators` in a configuration file that does not name it.
fn one() -> u64 {
    1
}

impl Default for HashTableConfig {
    fn default() -> Self {
        HashTableConfig {
            key_space: 1 << 19,
            buckets: 1 << 18,
            ops_per_tx: 9,
            insert_percent: 50,
            compute_cycles_per_insert: 45,
            compute_cycles_per_delete: 26,
            compute_cycles_per_probe: 2,
            keys: Default::default(),
            allocators: 1,
        }
    }
}

impl HashTableConfig {
    /// Range checks; the error names the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        self.keys.validate("hash")?;
        let err = |k: &str, v: u64, allowed: &str| Err(format!("workload.hash.{k} = {v}: allowed {allowed}"));
        if !(16..=(1 << 28)).contains(&self.key_space) {
            return err("key_space", self.key_space, "16..=268435456");
        }
        if !(2..=(1 << 28)).contains(&self.buckets) || !self.buckets.is_power_of_two() {
            return err("buckets", self.buckets, "a power of two in 2..=268435456");
        }
        if !(1..=4096).contains(&self.ops_per_tx) {
            return err("ops_per_tx", self.ops_per_tx, "1..=4096");
        }
        if self.insert_percent > 100 {
            return err("insert_percent", self.insert_percent, "0..=100");
        }
        if !(1..=16).contains(&self.allocators) {
            return err("allocators", self.allocators, "1..=16");
        }
        for (k, v) in [
            ("compute_cycles_per_insert", self.compute_cycles_per_insert),
            ("compute_cycles_per_delete", self.compute_cycles_per_delete),
            ("compute_cycles_per_probe", self.compute_cycles_per_probe),
        ] {
            if v > 1_000_000 {
                return err(k, v, "0..=1000000");
            }
        }
        Ok(())
    }
}

/// The hash-table workload: configuration and the table's fixed geometry (no volatile copy of
/// the table).
#[derive(Clone)]
pub struct HashTable {
    cfg: HashTableConfig,
    /// Allocator 0's slab (the single-core one).
    slab: Slab,
    keys: super::keys::Keys,
    bucket_bits: u32,
    /// The allocator this driver allocates and frees through ([`HashTable::for_core`]).
    alloc: u64,
}

impl KvStore for HashTable {
    const POPULATE_SEED: u64 = POPULATE_SEED;
    fn shape(&self) -> (u64, u64, u64) {
        (self.cfg.ops_per_tx, self.cfg.insert_percent, self.cfg.key_space)
    }
    fn keys(&self) -> &super::keys::Keys {
        &self.keys
    }
    /// Bytes of data area: header, bucket array, entry slabs, the other allocators' lines.
    fn data_bytes(&self) -> u64 {
        self.slab.base.0 + self.cfg.allocators * self.slab.bytes() + 64 * (self.cfg.allocators - 1)
    }
    fn insert<P: Pm>(&self, pm: &mut P, key: u64, seed: u64) {
        HashTable::insert(self, pm, key, seed)
    }
    fn delete<P: Pm>(&self, pm: &mut P, key: u64) {
        HashTable::delete(self, pm, key)
    }
    /// The line of each operation's bucket head and the line of this core's allocator: all
    /// the lines a transaction writes are those, the entries of the locked chains and the
    /// slots on this allocator's free list or in its region.
    fn locks(&self, ops: &[kv::Op], ids: &mut Vec<u64>) {
        ids.extend(ops.iter().map(|op| match *op {
            kv::Op::Insert { key, .. } | kv::Op::Delete { key } => self.bucket_of(key).0 / 64,
        }));
        ids.push(self.allocator(self.alloc).meta.0 / 64);
    }
}

impl HashTable {
    pub fn new(cfg: &HashTableConfig) -> Self {
        let slab_base = (BUCKETS_AT + 8 * cfg.buckets).next_multiple_of(64);
        HashTable {
            cfg: cfg.clone(),
            slab: Slab::new(Addr(0), Addr(slab_base), ENTRY_BYTES, cfg.key_space),
            bucket_bits: cfg.buckets.trailing_zeros(),
            keys: super::keys::Keys::new(&cfg.keys, cfg.key_space),
            alloc: 0,
        }
    }

    /// The driver of core `core`: it allocates and frees through allocator
    /// `core % allocators`.
    pub fn for_core(&mut self, core: usize) {
        self.alloc = core as u64 % self.cfg.allocators;
    }

    /// Allocator `a`'s slab: allocator 0's metadata at address 0 (the single-core layout),
    /// the others' in one line each after the last region; region `a` follows region `a - 1`.
    fn allocator(&self, a: u64) -> Slab {
        let regions_end = self.slab.base.0 + self.cfg.allocators * self.slab.bytes();
        let meta = if a == 0 { 0 } else { regions_end + 64 * (a - 1) };
        Slab::new(Addr(meta), self.slab.base + a * self.slab.bytes(), ENTRY_BYTES, self.cfg.key_space)
    }

    /// Address of the head pointer of `key`'s bucket.
    fn bucket_of(&self, key: u64) -> Addr {
        let b = key.wrapping_mul(FIB) >> (64 - self.bucket_bits);
        Addr(BUCKETS_AT + 8 * b)
    }

    /// Walk `key`'s chain: the address of the link pointing at the entry holding `key`, that
    /// entry (0 if absent), and the chain's head (kept in a register by real code).
    fn find<P: Pm>(&self, pm: &mut P, key: u64) -> Found {
        let mut link = self.bucket_of(key);
        let head = pm.load_u64(link);
        let mut cur = head;
        while cur != 0 {
            pm.compute(self.cfg.compute_cycles_per_probe);
            if pm.load_u64(Addr(cur + KEY)) == key {
                break;
            }
            link = Addr(cur + NEXT);
            cur = pm.load_u64(link);
        }
        Found { link, entry: cur, head }
    }

    /// A lookup (loads only): the first 8 value bytes stored under `key` (for an entry inserted
    /// with seed `s`, `s` itself: [`kv::value_bytes`]'s first word), `None` if absent. A
    /// structure that keeps its own records (YCSB's index) stores their addresses so.
    pub fn get<P: Pm>(&self, pm: &mut P, key: u64) -> Option<u64> {
        let e = self.find(pm, key).entry;
        (e != 0).then(|| pm.load_u64(Addr(e + VALUE)))
    }

    /// The line of `key`'s bucket head (its lock id on several cores).
    pub fn bucket_line(&self, key: u64) -> u64 {
        self.bucket_of(key).0 / 64
    }

    /// Entries in use in a data area (the single-allocator layout), for a verifier that has
    /// already passed [`HashTable::verify`].
    pub fn entries_in(&self, data: &[u8]) -> Result<u64, String> {
        self.slab.used_in(data)
    }

    fn insert<P: Pm>(&self, pm: &mut P, key: u64, seed: u64) {
        pm.compute(self.cfg.compute_cycles_per_insert);
        let found = self.find(pm, key);
        if found.entry != 0 {
            pm.store(Addr(found.entry + VALUE), &kv::value_bytes::<VALUE_BYTES>(seed));
            return;
        }
        let entry = self.allocator(self.alloc).alloc(pm).expect("an allocator's region has a slot for every key");
        let mut bytes = [0u8; ENTRY_BYTES as usize];
        bytes[..8].copy_from_slice(&key.to_le_bytes());
        bytes[8..16].copy_from_slice(&found.head.to_le_bytes());
        bytes[16..].copy_from_slice(&kv::value_bytes::<VALUE_BYTES>(seed));
        pm.store(entry, &bytes);
        pm.store_u64(self.bucket_of(key), entry.0);
    }

    fn delete<P: Pm>(&self, pm: &mut P, key: u64) {
        pm.compute(self.cfg.compute_cycles_per_delete);
        let found = self.find(pm, key);
        if found.entry == 0 {
            return;
        }
        let next = pm.load_u64(Addr(found.entry + NEXT));
        pm.store_u64(found.link, next);
        self.allocator(self.alloc).free_foreign(pm, Addr(found.entry));
    }

    /// Structural check of a data area (see the module doc); `Err` is one line.
    pub fn verify(&self, data: &[u8]) -> Result<(), String> {
        if (data.len() as u64) < self.data_bytes() {
            return Err(format!("hash: data area of {} bytes, need {}", data.len(), self.data_bytes()));
        }
        let slots = (self.cfg.allocators * self.cfg.key_space) as usize;
        let slabs: Vec<Slab> = (0..self.cfg.allocators).map(|a| self.allocator(a)).collect();
        // The free lists (a list may hold slots of any region): well formed and disjoint.
        let Regions { bumps, free, used } = Regions::read(data, &slabs, "hash", "slot")?;
        let mut seen = Seen {
            slot: crate::hostmem::committed(slots),
            key: crate::hostmem::committed(self.cfg.key_space as usize),
            entries: 0,
        };
        self.walk_chains(data, &bumps, &mut seen)?;
        if seen.entries != used {
            return Err(format!("hash: {} entries reachable from the buckets, slab has {used} in use", seen.entries));
        }
        if let Some(s) = (0..slots).find(|&s| free[s] && seen.slot[s]) {
            let at = self.slab.base.0 + s as u64 * ENTRY_BYTES;
            return Err(format!("hash: free slot {at:#x} is reachable from a bucket"));
        }
        Ok(())
    }

    /// The slot index (over all regions) of the entry at `e`, if `e` is the first byte of a
    /// slot its region's allocator has handed out (`bumps`, per allocator).
    fn handed_out(&self, e: u64, bumps: &[u64]) -> Option<usize> {
        super::slab::handed_out(&self.allocator(0), bumps, e)
    }

    /// Walk every chain, marking slots and keys in `seen`. Up to `VERIFY_BATCH` chains advance
    /// together, their entries read before any is checked, so the cache misses overlap.
    fn walk_chains(&self, data: &[u8], bumps: &[u64], seen: &mut Seen) -> Result<(), String> {
        let mut cursors: Vec<(u64, u64)> = Vec::with_capacity(VERIFY_BATCH);
        let mut entries: Vec<Option<(usize, u64, u64)>> = Vec::with_capacity(VERIFY_BATCH);
        let mut next_bucket = 0;
        loop {
            while cursors.len() < VERIFY_BATCH && next_bucket < self.cfg.buckets {
                let head = rd(data, BUCKETS_AT + 8 * next_bucket);
                if head != 0 {
                    cursors.push((next_bucket, head));
                }
                next_bucket += 1;
            }
            if cursors.is_empty() {
                return Ok(());
            }
            entries.extend(cursors.iter().map(|&(_, e)| self.entry_at(data, e, bumps)));
            for (c, entry) in cursors.iter_mut().zip(entries.drain(..)) {
                c.1 = self.check_entry(c.0, c.1, entry, seen)?;
            }
            cursors.retain(|c| c.1 != 0);
        }
    }

    /// `(slot, key, next)` of the entry at `e`, if `e` is the first byte of a handed-out slot.
    fn entry_at(&self, data: &[u8], e: u64, bumps: &[u64]) -> Option<(usize, u64, u64)> {
        let s = self.handed_out(e, bumps)?;
        Some((s, rd(data, e + KEY), rd(data, e + NEXT)))
    }

    /// Check the entry at `e` on bucket `b`'s chain (`None`: not an entry slot); its `next`.
    fn check_entry(&self, b: u64, e: u64, entry: Option<(usize, u64, u64)>, seen: &mut Seen) -> Result<u64, String> {
        let Some((slot, key, next)) = entry else {
            return Err(format!("hash: bucket {b}: link {e:#x} is not a handed-out entry slot"));
        };
        if std::mem::replace(&mut seen.slot[slot], true) {
            return Err(format!("hash: bucket {b}: entry {e:#x} reached twice (a cycle or a shared chain)"));
        }
        seen.entries += 1;
        if key >= self.cfg.key_space {
            return Err(format!("hash: bucket {b}: entry {e:#x} holds key {key} outside the key space"));
        }
        if self.bucket_of(key).0 != BUCKETS_AT + 8 * b {
            return Err(format!("hash: bucket {b}: entry {e:#x} holds key {key} of another bucket"));
        }
        if std::mem::replace(&mut seen.key[key as usize], true) {
            return Err(format!("hash: key {key} is in the table twice"));
        }
        Ok(next)
    }
}

/// The incremental form of [`HashTable::verify`] ([`Follow`]): the buckets are the roots of
/// `SlabLists` (which keeps the slot and free-list checks); beside it, each chain's keys and
/// how many chains hold each key (`dups`, the excess: no key twice in the table when 0).
pub struct HashFollow {
    table: HashTable,
    lists: SlabLists,
    keys: Spans<u64>,
    scratch: Vec<u64>,
    count: Vec<u32>,
    dups: u64,
}

impl HashTable {
    /// The incremental verifier of the single-allocator layout; `None` with several
    /// allocators (whose free lists cross regions): the crash checker then verifies whole
    /// images with [`HashTable::verify`].
    pub fn follower(&self) -> Option<HashFollow> {
        if self.cfg.allocators > 1 {
            return None;
        }
        let lists = SlabLists::new(self.slab, self.cfg.buckets, BUCKETS_AT, 8);
        Some(HashFollow {
            table: HashTable::new(&self.cfg),
            lists,
            keys: Spans::new(self.cfg.buckets as usize),
            scratch: Vec::new(),
            count: crate::hostmem::committed(self.cfg.key_space as usize),
            dups: 0,
        })
    }
}

impl HashFollow {
    /// Walk bucket `b`'s chain again, as [`HashTable::check_entry`] does.
    fn rewalk(&mut self, data: &[u8], b: u32) {
        for i in self.keys.forget(b as usize) {
            let c = &mut self.count[self.keys.at(i) as usize];
            *c -= 1;
            self.dups -= u64::from(*c >= 1);
        }
        self.lists.begin(b);
        let (mut keys, mut ok) = (std::mem::take(&mut self.scratch), true);
        keys.clear();
        let mut at = rd(data, BUCKETS_AT + 8 * b as u64);
        while at != 0 {
            if !self.lists.step(at) {
                ok = false;
                break;
            }
            let key = rd(data, at + KEY);
            if key >= self.table.cfg.key_space || self.table.bucket_of(key).0 != BUCKETS_AT + 8 * b as u64 {
                ok = false;
                break;
            }
            keys.push(key);
            at = rd(data, at + NEXT);
        }
        for &key in &keys {
            let c = &mut self.count[key as usize];
            self.dups += u64::from(*c >= 1);
            *c += 1;
        }
        self.keys.set(b as usize, &keys);
        self.scratch = keys;
        self.lists.end(b, ok);
    }
}

impl Follow for HashFollow {
    fn reset(&mut self, data: &[u8]) -> bool {
        self.keys.clear();
        self.count.fill(0);
        self.dups = 0;
        if (data.len() as u64) < self.table.data_bytes() {
            return false;
        }
        self.lists.reset(data);
        // Chains are walked bucket by bucket; the loads of the chain 16 buckets ahead start
        // now, so that the walks' cache misses overlap (prefetches only: the walk is the same).
        let buckets = self.table.cfg.buckets as u32;
        let head = |b: u32| rd(data, BUCKETS_AT + 8 * b as u64);
        for b in 0..buckets {
            if b + 16 < buckets {
                self.lists.prefetch_slot(data, head(b + 16));
            }
            if b + 8 < buckets {
                let e = head(b + 8);
                if self.lists.handed_out(e).is_some() {
                    if let Some(c) = self.count.get(rd(data, e + KEY) as usize) {
                        crate::hostmem::prefetch(c);
                    }
                }
            }
            self.rewalk(data, b);
        }
        self.lists.sound() && self.dups == 0
    }

    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool {
        match self.lists.changed(data, old) {
            Rewalk::Reset => self.reset(data),
            Rewalk::Roots(todo) => {
                for b in todo {
                    self.rewalk(data, b);
                }
                self.lists.sound() && self.dups == 0
            }
        }
    }
}

/// The result of a chain walk ([`HashTable::find`]).
struct Found {
    /// The link (bucket head or an entry's `next`) that points at `entry`.
    link: Addr,
    /// The entry holding the key, 0 if absent.
    entry: u64,
    /// The chain's first entry, 0 if the bucket is empty.
    head: u64,
}

/// What a verification has reached so far.
struct Seen {
    slot: Vec<bool>,
    key: Vec<bool>,
    entries: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::workload::kv::KvModel;
    use crate::workload::native::Native;
    use std::collections::HashMap;

    fn small() -> HashTableConfig {
        HashTableConfig { key_space: 512, buckets: 32, ops_per_tx: 4, ..HashTableConfig::default() }
    }

    /// All (key, value) pairs reachable from the buckets, sorted by key (valid tables only).
    fn contents(w: &HashTable, data: &[u8]) -> Vec<(u64, [u8; VALUE_BYTES])> {
        let mut out = Vec::new();
        for b in 0..w.cfg.buckets {
            let mut cur = rd(data, BUCKETS_AT + 8 * b);
            while cur != 0 {
                let v = (cur + VALUE) as usize;
                out.push((rd(data, cur), data[v..v + VALUE_BYTES].try_into().unwrap()));
                cur = rd(data, cur + NEXT);
            }
        }
        out.sort_unstable_by_key(|e| e.0);
        out
    }

    fn sorted(model: &HashMap<u64, u64>) -> Vec<(u64, [u8; VALUE_BYTES])> {
        let mut keys: Vec<u64> = model.keys().copied().collect();
        keys.sort_unstable();
        keys.into_iter().map(|k| (k, kv::value_bytes::<VALUE_BYTES>(model[&k]))).collect()
    }

    /// Populate a small table, then run `txs` seeded transactions (about 20% aborted), calling
    /// `each(tx, workload, memory, model)` after every one.
    fn run_sequence(seed: u64, txs: u64, mut each: impl FnMut(u64, &HashTable, &[u8], &HashMap<u64, u64>)) {
        let w = HashTable::new(&small());
        kv::run_model_sequence(&w, seed, txs, |tx, mem, model| each(tx, &w, mem, model));
    }

    #[test]
    fn random_inserts_and_deletes_match_a_hashmap_after_every_transaction_and_aborts_leave_no_trace() {
        for seed in [1, 2, 3] {
            run_sequence(seed, 1500, |tx, w, mem, model| {
                assert_eq!(contents(w, mem), sorted(model), "seed {seed}, after tx {tx}");
            });
        }
    }

    /// Four allocators, the transactions going round them as four cores' would: every entry
    /// freed into the allocator of the transaction that deletes it, whatever its region. The
    /// table matches the model and passes the verifier after every transaction, and slots
    /// of other regions were recycled.
    #[test]
    fn per_core_allocators_recycle_each_others_slots_and_the_verifier_passes() {
        let cfg = HashTableConfig { allocators: 4, ..small() };
        cfg.validate().unwrap();
        let mut w = HashTable::new(&cfg);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        w.verify(&mem).unwrap();
        let mix = w.mix();
        let mut model: HashMap<u64, u64> = kv::populated(&mix).collect();
        let mut pm = Native::new(mem);
        let (mut ops, mut aborts) = (Rng::new(11), Rng::derive(11, 2));
        let mut foreign = 0;
        for tx in 0..2000u64 {
            w.for_core(tx as usize % 4);
            let abort = aborts.chance(0.2);
            let mut replay = ops.clone();
            kv::run_tx(&w, &mix, &mut pm, &mut ops, abort);
            if !abort {
                kv::for_each_op(&mix, w.keys(), &mut replay, |op| match op {
                    kv::Op::Insert { key, seed } => model.put(key, seed),
                    kv::Op::Delete { key } => model.del(key),
                });
            }
            w.verify(&pm.mem).unwrap_or_else(|e| panic!("after tx {tx}: {e}"));
            assert_eq!(contents(&w, &pm.mem), sorted(&model), "after tx {tx}");
            let a = w.allocator(w.alloc);
            let head = rd(&pm.mem, a.meta.0);
            foreign += u64::from(head != 0 && !a.contains(Addr(head)));
        }
        assert!(foreign > 100, "slots of other regions on a free list: {foreign}");
    }

    /// On 4 cores with an allocator per core, transactions of different cores overlap: the
    /// same transactions take fewer cycles than on one core; with one allocator (every
    /// transaction locks its line) they do not.
    #[test]
    fn with_an_allocator_per_core_four_cores_run_transactions_concurrently() {
        let cycles = |cores: u32, allocators: u64| {
            let sets = [
                format!("machine.cores={cores}"),
                format!("workload.hash.allocators={allocators}"),
                "workload.hash.key_space=16384".into(),
                "workload.hash.buckets=8192".into(),
            ];
            crate::runner::baseline_cycles(crate::workload::WorkloadKind::Hash, &sets, 4000, 400)
        };
        let one = cycles(1, 4);
        assert_eq!(one, cycles(1, 1), "one core: the allocators added change nothing it does");
        let (fine, coarse) = (cycles(4, 4), cycles(4, 1));
        assert!(fine * 3 < one * 2, "4 cores, 4 allocators: {fine} cycles, 1 core: {one}");
        assert!(coarse > one, "4 cores, 1 allocator (serialised): {coarse} cycles, 1 core: {one}");
    }

    #[test]
    fn verifier_rejects_a_slot_on_two_allocators_free_lists() {
        let cfg = HashTableConfig { allocators: 2, ..small() };
        let mut w = HashTable::new(&cfg);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        let mut pm = Native::new(mem);
        pm.begin();
        let (a0, a1) = (w.allocator(0), w.allocator(1));
        let slot = a0.alloc(&mut pm).unwrap();
        a0.free(&mut pm, slot);
        pm.store_u64(a1.meta, slot.0);
        pm.commit();
        w.for_core(1);
        assert!(w.verify(&pm.mem).unwrap_err().contains("listed twice"));
    }

    #[test]
    fn verifier_passes_on_every_state_of_the_random_sequence() {
        for seed in [4, 5] {
            run_sequence(seed, 1500, |tx, w, mem, _| {
                if let Err(e) = w.verify(mem) {
                    panic!("seed {seed}, after tx {tx}: {e}");
                }
            });
        }
    }

    /// A populated small table and the address of one entry of a chain with at least two.
    fn populated() -> (HashTable, Vec<u8>, u64) {
        let mut w = HashTable::new(&small());
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        let head = (0..32)
            .map(|b| rd(&mem, BUCKETS_AT + 8 * b))
            .find(|&h| h != 0 && rd(&mem, h + NEXT) != 0)
            .expect("a chain of two");
        w.verify(&mem).unwrap();
        (w, mem, head)
    }

    fn put(mem: &mut [u8], a: u64, v: u64) {
        mem[a as usize..a as usize + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn verifier_rejects_a_chain_that_loops_back() {
        let (w, mut mem, head) = populated();
        let second = rd(&mem, head + NEXT);
        put(&mut mem, second + NEXT, head);
        assert!(w.verify(&mem).unwrap_err().contains("reached twice"));
    }

    #[test]
    fn verifier_rejects_an_entry_whose_key_hashes_elsewhere() {
        let (w, mut mem, head) = populated();
        let key = rd(&mem, head);
        let other = (0..512).find(|&k| w.bucket_of(k) != w.bucket_of(key)).unwrap();
        put(&mut mem, head, other);
        let e = w.verify(&mem).unwrap_err();
        assert!(e.contains("of another bucket") || e.contains("twice"), "{e}");
    }

    #[test]
    fn verifier_rejects_a_link_outside_the_slab() {
        let (w, mut mem, head) = populated();
        put(&mut mem, head + NEXT, 24);
        assert!(w.verify(&mem).unwrap_err().contains("not a handed-out"));
    }

    #[test]
    fn verifier_rejects_an_entry_unlinked_but_not_freed() {
        let (w, mut mem, head) = populated();
        let second = rd(&mem, head + NEXT);
        let third = rd(&mem, second + NEXT);
        put(&mut mem, head + NEXT, third);
        assert!(w.verify(&mem).unwrap_err().contains("slab has"));
    }

    #[test]
    fn verifier_rejects_a_freed_slot_still_on_a_chain() {
        let (w, mut mem, head) = populated();
        let second = rd(&mem, head + NEXT);
        let mut pm = Native::new(mem);
        pm.begin();
        w.slab.free(&mut pm, Addr(second));
        pm.commit();
        mem = pm.mem;
        assert!(w.verify(&mem).is_err());
    }

    #[test]
    fn verifier_returns_an_error_on_garbage_and_on_a_short_area() {
        let w = HashTable::new(&small());
        let mut mem = vec![0u8; w.data_bytes() as usize];
        let mut rng = Rng::new(9);
        for b in mem.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        assert!(w.verify(&mem).is_err());
        assert!(w.verify(&mem[..100]).is_err());
    }

    #[test]
    fn default_populate_builds_at_least_8_mib_of_live_structure() {
        let cfg = HashTableConfig::default();
        cfg.validate().unwrap();
        let mut w = HashTable::new(&cfg);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        w.verify(&mem).unwrap();
        let entries = w.slab.used_in(&mem).unwrap();
        assert_eq!(entries, cfg.key_space / 2);
        assert!(entries * ENTRY_BYTES + 8 * cfg.buckets >= 8 << 20);
    }

    #[test]
    fn validate_names_the_key_and_the_allowed_range() {
        let cfg = HashTableConfig { buckets: 100, ..HashTableConfig::default() };
        assert_eq!(cfg.validate().unwrap_err(), "workload.hash.buckets = 100: allowed a power of two in 2..=268435456");
    }

    #[test]
    fn the_follower_agrees_with_the_verifier_on_a_run_and_on_damage() {
        for (insert_percent, seed) in [(50, 3), (90, 4), (10, 5)] {
            let hash = HashTableConfig { insert_percent, ..small() };
            let cfg = crate::workload::WorkloadConfig { hash, ..Default::default() };
            let rejected = crate::workload::follow::check::agrees(crate::workload::WorkloadKind::Hash, &cfg, 400, seed);
            assert!(rejected > 50, "the damage must matter: {rejected} of 400 damaged states rejected");
        }
    }
}
