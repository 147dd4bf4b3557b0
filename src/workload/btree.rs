//! B+tree: transactions of key-value inserts and deletes on a persistent B+tree of 4 KB nodes
//! (Table II of the LOC papers: "each 4KB node contains 200 key(8B)-value(4B) pairs. Each
//! transaction consists of multiple key-value insert or delete operations").
//!
//! # Layout in the data area (little-endian everywhere)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | `root`: address of the root node (a leaf while the tree is small) |
//! | 8 | 8 | unused (0) |
//! | 16 | 16 | metadata of the node [`Slab`] (`free_head`, `bump`) |
//! | 4096 + 4096 i | 4096 | node slot `i`, for `i < node_slots` (4096-aligned) |
//!
//! With `trees = P > 1`, `P` such trees side by side (tree `t` at `t` times one tree's bytes,
//! its addresses relative to its start), each for a key space of `key_space / P` (rounded up):
//! key `k` is key `k / P` of tree `k % P` (docs/workloads.md, "Locking on several cores").
//!
//! Every node is one 4096-byte slot. Leaf:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | `kind` = 1 |
//! | 4 | 4 | `count`: keys held |
//! | 8 | 8 | `next`: address of the next leaf in key order, 0 for the last |
//! | 16 | 1600 | `keys[0..200]` (u64) |
//! | 1616 | 800 | `values[0..200]` (u32); `values[i]` belongs to `keys[i]` |
//! | 2416 | 1680 | unused |
//!
//! Inner node:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | `kind` = 2 |
//! | 4 | 4 | `count`: keys held (children: `count + 1`) |
//! | 8 | 8 | unused |
//! | 16 | 2032 | `keys[0..254]` (u64) |
//! | 2048 | 2040 | `children[0..255]` (u64 node addresses) |
//! | 4088 | 8 | unused |
//!
//! Keys inside a node are strictly ascending; the bytes past `count` are stale and never read.
//! Keys and values are kept in separate arrays so that a binary search touches key blocks only.
//! Inner fanout: 254 keys and 255 eight-byte children are the most that fit in 4 KB with the
//! 16-byte header (16 + 254 * 8 + 255 * 8 = 4088). Child `i` of an inner node holds the keys
//! `k` with `keys[i-1] <= k < keys[i]` (no lower bound for `i = 0`, no upper for `i = count`).
//! The capacities actually used are `leaf_max_keys` (default 200) and `inner_max_keys`
//! (default 254); smaller values only lower the bound on `count` (tests use tiny nodes to make
//! deep trees), the byte offsets above never change.
//!
//! # Operations
//!
//! Insert (the value is overwritten if the key exists) shifts the tail of the key and value
//! arrays right by one entry, as a `memmove` does: one load and one store of the whole tail.
//! A full leaf splits into `ceil((L+1)/2)` and `floor((L+1)/2)` entries, the right half in a new
//! node whose first key becomes the separator; a full inner node splits around its middle key,
//! which moves up; a root split makes a new root. Delete shifts the tail left; a non-root node
//! below its minimum looks at one sibling (the left one if it has one, else the right one):
//! if the sibling holds more than the minimum it lends one entry (through the parent's
//! separator for inner nodes), else the two merge into the left one and the parent loses a
//! separator, recursively; an inner root left with no keys is replaced by its only child.
//! Nodes come from and return to a [`Slab`] inside the same transaction. Lookup is a descent
//! and a search.
//!
//! Fill bounds (`L = leaf_max_keys`, `M = inner_max_keys`): a non-root leaf holds
//! `floor(L/2)..=L` keys, a root leaf `0..=L`; a non-root inner node `floor(M/2)..=M` keys, an
//! inner root `1..=M`.
//!
//! # Workload
//!
//! Keys are drawn uniformly from `0..key_space`. Populate includes each key of the key space
//! with probability 1/2 (a fixed seed), inserted in a random order through the same insert
//! code (on the native back end). A transaction runs `ops_per_tx` operations, each an insert
//! of a random key with a random value (probability `insert_percent`) or a delete of a random
//! key; with 50/50 the expected size stays at half the key space, so about half of the inserts
//! add a key (the other half update a value) and half of the deletes find their key.
//!
//! # Verifier
//!
//! [`BTree::verify`] checks: the root and every child pointer are slots of the node slab that
//! it has handed out; no node is reached twice (no cycle, no shared child); the tree is at most
//! 64 levels deep; every node has a valid kind and a count within the fill bounds; keys are
//! strictly ascending in each node and within the bounds its ancestors' separators give (leaf
//! keys in `[lo, hi)`, inner keys in `(lo, hi)`); every leaf is at the same depth; the leaf
//! chain, from the leftmost leaf, visits every leaf in key order and ends with 0; the slab's
//! count of slots in use equals the number of reachable nodes. It does not check values (the
//! crash checker compares contents with its oracle) nor the stale bytes past `count`.
//!
//! # Transaction size
//!
//! `ops_per_tx` = 11 by default, chosen so that the P-Set (distinct 64-byte blocks written per
//! committed transaction) is near Table II's 89.60 for the B+tree: an insert of a new key or a
//! delete of a present one shifts on average half of a leaf of about 136 entries (about 9 key
//! blocks, 5 value blocks and the header block), an update writes one block and a delete of an
//! absent key none, so an operation writes about 8.3 blocks with splits and merges included.
//! Measured: 10 operations give 82.8, 11 give 91.0, 12 give 99.2 (`locsim run --workload btree
//! --protocol baseline --txs 20000 --warmup-txs 2000`, seeds 1 to 3 within 0.3).
//!
//! # Compute charges
//!
//! Each constant counts the non-memory instructions of a piece of the code below, one cycle
//! each on the in-order core; loads and stores of persistent memory are not counted (they are
//! simulated accesses). None is tuned to any result.
//!
//! | constant | default | count |
//! |---|---|---|
//! | `compute_cycles_per_op` | 39 | three draws (`below` 11, `below` 11, `next_u64` 10) = 32; kind test and branch 2; loop control 2; in the leaf, bounds test and key-equality test 2 and the count update 1 |
//! | `compute_cycles_per_node` | 7 | kind test and branch 2; child address 1; path push (two register stores to the stack) 2; depth counter 1; loop jump 1 |
//! | `compute_cycles_per_search_step` | 7 | `mid = (lo + hi) / 2` 2; key address 1; compare 1; two conditional moves for `lo` and `hi` 2; loop test 1 |
//! | `compute_cycles_per_moved_block` | 8 | a `memmove` with 16-byte vector moves does 4 loads and 4 stores per 64 bytes; the simulator models the run as one load and one store access per block, so the other 6 (L1 hits, 1 cycle each) and the loop control (2 per 64 bytes) are charged here |
//!
//! Split and merge bookkeeping beyond their run stores (a handful of instructions each) is not
//! charged: it happens in about one operation in a hundred.

use super::follow::{Follow, FreeList, Subtrees};
use super::native::Native;
use super::slab::Slab;
use super::Pm;
use crate::rng::Rng;
use crate::types::BlockData;
use crate::types::{blocks_of, Addr};
use serde::{Deserialize, Serialize};

/// Bytes in a node (one slab slot).
pub const NODE_BYTES: u64 = 4096;
/// Key slots in a leaf (and the largest allowed `leaf_max_keys`).
pub const LEAF_SLOTS: u64 = 200;
/// Key slots in an inner node (and the largest allowed `inner_max_keys`).
pub const INNER_SLOTS: u64 = 254;

const ROOT_AT: Addr = Addr(0);
const SLAB_META_AT: Addr = Addr(16);
const NODES_AT: Addr = Addr(4096);
const KIND_LEAF: u32 = 1;
const KIND_INNER: u32 = 2;
const COUNT_OFF: u64 = 4;
const NEXT_OFF: u64 = 8;
const KEYS_OFF: u64 = 16;
const VALUES_OFF: u64 = KEYS_OFF + 8 * LEAF_SLOTS;
const CHILDREN_OFF: u64 = KEYS_OFF + 8 * INNER_SLOTS;
/// Largest run moved by one shift: the children of an inner node (255 * 8 bytes).
const RUN_BYTES: usize = 8 * (INNER_SLOTS as usize + 1);
/// Seed of the populate phase (the initial key set and its insertion order).
const POPULATE_SEED: u64 = 0xB7EE_5EED;
/// Depth beyond which the verifier reports a malformed tree.
const MAX_DEPTH: usize = 64;

/// B+tree parameters (`--set workload.btree.<key>=v`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BTreeConfig {
    /// Number of distinct keys: keys are drawn from `0..key_space` (uniformly unless `keys`
    /// says otherwise). The default,
    /// 2^20, gives about 524 thousand keys and about 15 MiB of nodes after populate.
    pub key_space: u64,
    /// Insert or delete operations per transaction (default 11: P-Set near Table II's 89.6).
    pub ops_per_tx: u64,
    /// Percentage of operations that are inserts (the others are deletes).
    pub insert_percent: u64,
    /// Keys a leaf may hold (at most 200, the papers' value).
    pub leaf_max_keys: u64,
    /// Keys an inner node may hold (at most 254, what fits in 4 KB).
    pub inner_max_keys: u64,
    /// Non-memory instructions per operation (drawing it, dispatch, loop control); the
    /// counts of every `compute_cycles_*` constant are in the module documentation.
    pub compute_cycles_per_op: u64,
    /// Non-memory instructions per node visited in a descent.
    pub compute_cycles_per_node: u64,
    /// Non-memory instructions per binary-search step.
    pub compute_cycles_per_search_step: u64,
    /// Non-memory instructions per 64-byte block written by a run store (`memmove`).
    pub compute_cycles_per_moved_block: u64,
    /// Which keys the operations pick (uniform, zipfian, latest: `workload::keys`).
    pub keys: super::keys::KeysConfig,
    /// Trees the key space is partitioned into (1..=16): key `k` lives in tree `k % trees` as
    /// key `k / trees`, each tree with its own root, node slab and lock (docs/workloads.md,
    /// "Locking on several cores"). 1 is the single-tree layout.
    #[serde(default = "super::one")]
    pub trees: u64,
}

impl Default for BTreeConfig {
    fn default() -> Self {
        BTreeConfig {
            key_space: 1 << 20,
            ops_per_tx: 11,
            insert_percent: 50,
            leaf_max_keys: LEAF_SLOTS,
            inner_max_keys: INNER_SLOTS,
            compute_cycles_per_op: 39,
            compute_cycles_per_node: 7,
            compute_cycles_per_search_step: 7,
            compute_cycles_per_moved_block: 8,
            keys: Default::default(),
            trees: 1,
        }
    }
}

impl BTreeConfig {
    /// Range checks; one-line errors naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        let check = |k: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("workload.btree.{k} = {v}: allowed {lo}..={hi}"))
            }
        };
        self.keys.validate("btree")?;
        check("leaf_max_keys", self.leaf_max_keys, 2, LEAF_SLOTS)?;
        check("inner_max_keys", self.inner_max_keys, 2, INNER_SLOTS)?;
        check("ops_per_tx", self.ops_per_tx, 1, 4096)?;
        check("insert_percent", self.insert_percent, 0, 100)?;
        check("key_space", self.key_space, 16, 1 << 32)?;
        check("trees", self.trees, 1, 16)?;
        check("compute_cycles_per_op", self.compute_cycles_per_op, 0, 1_000_000)?;
        check("compute_cycles_per_node", self.compute_cycles_per_node, 0, 1_000_000)?;
        check("compute_cycles_per_search_step", self.compute_cycles_per_search_step, 0, 1_000_000)?;
        check("compute_cycles_per_moved_block", self.compute_cycles_per_moved_block, 0, 1_000_000)?;
        let bytes = data_bytes_for(self);
        if bytes > MAX_DATA_BYTES {
            return Err(format!(
                "workload.btree.key_space = {}: needs a {bytes}-byte data area with these node \
                 sizes, allowed at most {MAX_DATA_BYTES}",
                self.key_space
            ));
        }
        Ok(())
    }
}

/// Largest data area the configuration may ask for (16 GiB).
const MAX_DATA_BYTES: u64 = 1 << 34;

/// One operation of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Insert(u64, u32),
    Delete(u64),
}

/// Per-event compute charges, in cycles.
#[derive(Clone, Copy, Debug)]
struct Costs {
    op: u64,
    node: u64,
    step: u64,
    moved_block: u64,
}

/// The B+tree workload. Holds no state about the tree: only its parameters and the descent
/// path of the running operation.
#[derive(Clone)]
pub struct BTree {
    key_space: u64,
    ops_per_tx: u64,
    insert_percent: u64,
    leaf_max: usize,
    inner_max: usize,
    cost: Costs,
    slab: Slab,
    /// (inner node, index of the child taken) from the root down, for the running operation.
    path: Vec<(Addr, usize)>,
    keys: super::keys::Keys,
    /// The trees side by side (one: the single-tree layout).
    parts: super::Partitions,
}

/// Slots the node slab needs so that allocation never fails: every non-root leaf holds at
/// least `floor(L/2)` distinct keys out of `key_space`, every non-root inner node at least
/// `floor(M/2) + 1` children.
fn node_slots_for(cfg: &BTreeConfig) -> u64 {
    let leaf_min = (cfg.leaf_max_keys / 2).max(1);
    let fan = cfg.inner_max_keys / 2 + 1;
    let mut level = (cfg.key_space / leaf_min).max(1);
    let mut total = level;
    while level > 1 {
        level = level.div_ceil(fan);
        total += level;
    }
    total
}

/// Bytes of the data area: `trees` trees, each of a key space of `key_space / trees`.
fn data_bytes_for(cfg: &BTreeConfig) -> u64 {
    let one = one_tree(cfg);
    super::Partitions::new(cfg.trees, NODES_AT.0 + node_slots_for(&one) * NODE_BYTES).bytes()
}

/// The configuration of one tree of a partitioned B+tree (its share of the key space).
fn one_tree(cfg: &BTreeConfig) -> BTreeConfig {
    BTreeConfig { key_space: super::Partitions::keys_per(cfg.trees, cfg.key_space), trees: 1, ..cfg.clone() }
}

fn key_at(n: Addr, i: usize) -> Addr {
    n + KEYS_OFF + 8 * i as u64
}
fn value_at(n: Addr, i: usize) -> Addr {
    n + VALUES_OFF + 4 * i as u64
}
fn child_at(n: Addr, i: usize) -> Addr {
    n + CHILDREN_OFF + 8 * i as u64
}

fn count<P: Pm>(pm: &mut P, n: Addr) -> usize {
    pm.load_u32(n + COUNT_OFF) as usize
}
fn set_count<P: Pm>(pm: &mut P, n: Addr, c: usize) {
    pm.store_u32(n + COUNT_OFF, c as u32);
}
fn child<P: Pm>(pm: &mut P, n: Addr, i: usize) -> Addr {
    Addr(pm.load_u64(child_at(n, i)))
}

/// Write a whole header: kind, count, next (one 16-byte store).
fn write_header<P: Pm>(pm: &mut P, n: Addr, kind: u32, count: usize, next: u64) {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&kind.to_le_bytes());
    h[4..8].copy_from_slice(&(count as u32).to_le_bytes());
    h[8..16].copy_from_slice(&next.to_le_bytes());
    pm.store(n, &h);
}

fn load_u64s<P: Pm>(pm: &mut P, at: Addr, n: usize) -> Vec<u64> {
    let mut b = vec![0u8; 8 * n];
    pm.load(at, &mut b);
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
}
fn load_u32s<P: Pm>(pm: &mut P, at: Addr, n: usize) -> Vec<u32> {
    let mut b = vec![0u8; 4 * n];
    pm.load(at, &mut b);
    b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}
fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
fn u32_bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

impl BTree {
    pub fn new(cfg: &BTreeConfig) -> BTree {
        let slab = Slab::new(SLAB_META_AT, NODES_AT, NODE_BYTES, node_slots_for(&one_tree(cfg)));
        BTree {
            key_space: cfg.key_space,
            ops_per_tx: cfg.ops_per_tx,
            insert_percent: cfg.insert_percent,
            leaf_max: cfg.leaf_max_keys as usize,
            inner_max: cfg.inner_max_keys as usize,
            cost: Costs {
                op: cfg.compute_cycles_per_op,
                node: cfg.compute_cycles_per_node,
                step: cfg.compute_cycles_per_search_step,
                moved_block: cfg.compute_cycles_per_moved_block,
            },
            slab,
            path: Vec::with_capacity(MAX_DEPTH),
            keys: super::keys::Keys::new(&cfg.keys, cfg.key_space),
            parts: super::Partitions::new(cfg.trees, NODES_AT.0 + slab.bytes()),
        }
    }

    pub fn data_bytes(&self) -> u64 {
        self.parts.bytes()
    }

    /// Bytes of one tree.
    fn tree_bytes(&self) -> u64 {
        NODES_AT.0 + self.slab.bytes()
    }

    /// The trees, side by side in the data area.
    pub fn partitions(&self) -> super::Partitions {
        self.parts
    }

    fn leaf_min(&self) -> usize {
        self.leaf_max / 2
    }
    fn inner_min(&self) -> usize {
        self.inner_max / 2
    }

    /// Build the initial tree in `data`, in place: an empty root leaf, then the populate keys in
    /// their order.
    pub fn populate(&mut self, data: &mut [u8]) {
        let mut pm = Native::new(data);
        let parts = self.parts;
        pm.begin();
        for t in 0..parts.n {
            let mut pm = parts.at(&mut pm, t);
            let root = self.alloc(&mut pm);
            write_header(&mut pm, root, KIND_LEAF, 0, 0);
            pm.store_u64(ROOT_AT, root.0);
        }
        pm.commit();
        for (k, v) in populate_entries(self.key_space) {
            pm.begin();
            if parts.n == 1 {
                self.insert(&mut pm, k, v);
            } else {
                let (t, k) = parts.route(k);
                self.insert(&mut parts.at(&mut pm, t), k, v);
            }
            pm.commit();
        }
    }

    /// Draw one operation: the key, the kind, then the value (drawn for deletes too, so every
    /// operation consumes the same three numbers).
    fn draw_op(&self, rng: &mut Rng) -> Op {
        // Uniform keys keep their historical order (key, kind, value); the others need the kind
        // first (`latest` gives an insert the next new key).
        let (key, insert) = if self.keys.is_uniform() {
            (rng.below(self.key_space), rng.below(100) < self.insert_percent)
        } else {
            let insert = rng.below(100) < self.insert_percent;
            (self.keys.draw(rng, insert), insert)
        };
        let value = rng.next_u64() as u32;
        if insert {
            Op::Insert(key, value)
        } else {
            Op::Delete(key)
        }
    }

    #[inline]
    pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
        if self.parts.n > 1 {
            return self.run_tx_trees(pm, rng, abort);
        }
        pm.begin();
        if pm.concurrent() {
            // Several cores: one lock over the whole structure (docs/workloads.md, "Locking").
            pm.lock(super::STRUCTURE_LOCK);
        }
        for _ in 0..self.ops_per_tx {
            let op = self.draw_op(rng);
            pm.compute(self.cost.op);
            match op {
                Op::Insert(k, v) => {
                    self.insert(pm, k, v);
                }
                Op::Delete(k) => {
                    self.delete(pm, k);
                }
            }
        }
        if abort {
            pm.abort();
        } else {
            pm.commit();
        }
    }

    /// [`BTree::run_tx`] over several trees: the transaction draws its tree `t` first, then its
    /// operations as on one tree; key `k` becomes key `k / trees` of tree `t` (global key
    /// `t + trees * (k / trees)`). On several cores it takes tree `t`'s lock (the line of its
    /// header) before its first access.
    fn run_tx_trees<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
        let parts = self.parts;
        let t = rng.below(parts.n);
        pm.begin();
        if pm.concurrent() {
            pm.lock(t * parts.stride / 64 + super::STRUCTURE_LOCK);
        }
        for _ in 0..self.ops_per_tx {
            let op = self.draw_op(rng);
            pm.compute(self.cost.op);
            match op {
                Op::Insert(k, v) => {
                    self.insert(&mut parts.at(pm, t), parts.route(k).1, v);
                }
                Op::Delete(k) => {
                    self.delete(&mut parts.at(pm, t), parts.route(k).1);
                }
            }
        }
        if abort {
            pm.abort();
        } else {
            pm.commit();
        }
    }

    fn alloc<P: Pm>(&self, pm: &mut P) -> Addr {
        self.slab.alloc(pm).expect("btree: node slab full, but node_slots bounds any valid tree")
    }

    /// Store a run of bytes (a `memmove` target), charging its copy loop.
    fn store_run<P: Pm>(&self, pm: &mut P, at: Addr, bytes: &[u8]) {
        pm.compute(self.cost.moved_block * blocks_of(at, bytes.len()).count() as u64);
        pm.store(at, bytes);
    }

    /// Insert `item` (`w` bytes) at index `pos` of the array at `base` holding `n` items.
    fn insert_slot<P: Pm>(&self, pm: &mut P, base: Addr, w: usize, n: usize, pos: usize, item: &[u8]) {
        let mut buf = [0u8; RUN_BYTES + 8];
        let tail = (n - pos) * w;
        buf[..w].copy_from_slice(item);
        pm.load(base + (pos * w) as u64, &mut buf[w..w + tail]);
        self.store_run(pm, base + (pos * w) as u64, &buf[..w + tail]);
    }

    /// Remove index `pos` of the array at `base` holding `n` items of `w` bytes.
    fn remove_slot<P: Pm>(&self, pm: &mut P, base: Addr, w: usize, n: usize, pos: usize) {
        let mut buf = [0u8; RUN_BYTES];
        let tail = (n - pos - 1) * w;
        if tail == 0 {
            return;
        }
        pm.load(base + ((pos + 1) * w) as u64, &mut buf[..tail]);
        self.store_run(pm, base + (pos * w) as u64, &buf[..tail]);
    }

    /// Binary search in the keys of node `n` (holding `cnt`): the first index whose key is
    /// `>= key` (`upper = false`) or `> key` (`upper = true`).
    fn search<P: Pm>(&self, pm: &mut P, n: Addr, cnt: usize, key: u64, upper: bool) -> usize {
        let (mut lo, mut hi) = (0, cnt);
        while lo < hi {
            pm.compute(self.cost.step);
            let mid = (lo + hi) / 2;
            let k = pm.load_u64(key_at(n, mid));
            if k < key || (upper && k == key) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Descend to the leaf that may hold `key`, recording the path; returns the leaf and its
    /// count.
    fn descend<P: Pm>(&mut self, pm: &mut P, key: u64) -> (Addr, usize) {
        self.path.clear();
        let mut n = Addr(pm.load_u64(ROOT_AT));
        loop {
            pm.compute(self.cost.node);
            let mut h = [0u8; 8];
            pm.load(n, &mut h);
            let kind = u32::from_le_bytes(h[0..4].try_into().unwrap());
            let cnt = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
            if kind == KIND_LEAF {
                return (n, cnt);
            }
            debug_assert!(kind == KIND_INNER && self.path.len() < MAX_DEPTH);
            let i = self.search(pm, n, cnt, key, true);
            self.path.push((n, i));
            n = child(pm, n, i);
        }
    }

    /// The value stored under `key`, if any.
    pub fn lookup<P: Pm>(&mut self, pm: &mut P, key: u64) -> Option<u32> {
        let (leaf, n) = self.descend(pm, key);
        let pos = self.search(pm, leaf, n, key, false);
        (pos < n && pm.load_u64(key_at(leaf, pos)) == key).then(|| pm.load_u32(value_at(leaf, pos)))
    }

    /// The least key `>= key` and its value, if any (a descent, then at most one step along
    /// the leaf chain: a non-root leaf is never empty). Ordered scans call it again from the
    /// key after the one it gave.
    pub fn ceiling<P: Pm>(&mut self, pm: &mut P, key: u64) -> Option<(u64, u32)> {
        let (leaf, n) = self.descend(pm, key);
        let pos = self.search(pm, leaf, n, key, false);
        if pos < n {
            return Some((pm.load_u64(key_at(leaf, pos)), pm.load_u32(value_at(leaf, pos))));
        }
        let next = Addr(pm.load_u64(leaf + NEXT_OFF));
        (next.0 != 0 && count(pm, next) > 0).then(|| (pm.load_u64(key_at(next, 0)), pm.load_u32(value_at(next, 0))))
    }

    /// Start an empty tree in a zeroed area (one root leaf), inside the caller's transaction:
    /// what [`BTree::populate`] does first, for a tree that another workload fills (YCSB's
    /// and TPC-C's indexes).
    pub fn init_empty<P: Pm>(&self, pm: &mut P) {
        let root = self.alloc(pm);
        write_header(pm, root, KIND_LEAF, 0, 0);
        pm.store_u64(ROOT_AT, root.0);
    }

    /// A range scan: up to `n` entries from the first key `>= start`, in key order, into
    /// `out` (cleared first), along the leaf chain; loads only. Each leaf's share is one load of
    /// its key run and one of its value run.
    pub fn scan<P: Pm>(&mut self, pm: &mut P, start: u64, n: usize, out: &mut Vec<(u64, u32)>) {
        out.clear();
        let (mut leaf, mut cnt) = self.descend(pm, start);
        let mut pos = self.search(pm, leaf, cnt, start, false);
        let (mut kb, mut vb) = ([0u8; 8 * LEAF_SLOTS as usize], [0u8; 4 * LEAF_SLOTS as usize]);
        while out.len() < n {
            if pos >= cnt {
                let next = pm.load_u64(leaf + NEXT_OFF);
                if next == 0 {
                    break;
                }
                pm.compute(self.cost.node);
                (leaf, cnt, pos) = (Addr(next), count(pm, Addr(next)).min(LEAF_SLOTS as usize), 0);
                continue;
            }
            let take = (cnt - pos).min(n - out.len());
            pm.load(key_at(leaf, pos), &mut kb[..8 * take]);
            pm.load(value_at(leaf, pos), &mut vb[..4 * take]);
            out.extend(
                kb[..8 * take].chunks_exact(8).zip(vb[..4 * take].chunks_exact(4)).map(|(k, v)| {
                    (u64::from_le_bytes(k.try_into().unwrap()), u32::from_le_bytes(v.try_into().unwrap()))
                }),
            );
            pos += take;
        }
    }

    /// Every (key, value) of a tree in a data area (addresses from 0, as [`BTree::verify`]
    /// reads it), in key order, from the leftmost leaf along the leaf chain. Call it on an
    /// area [`BTree::verify`] accepts: `Err` if the walk leaves the node slab or loops.
    pub fn entries_in(&self, data: &[u8]) -> Result<Vec<(u64, u32)>, String> {
        let ok = |a: u64| self.slab.contains(Addr(a)) && a + NODE_BYTES <= data.len() as u64;
        let mut n = rd_u64(data, ROOT_AT.0);
        for _ in 0..MAX_DEPTH {
            if !ok(n) {
                return Err(format!("btree: node address {n:#x} outside the node slab"));
            }
            if rd_u32(data, n) != KIND_INNER {
                break;
            }
            n = rd_u64(data, child_at(Addr(n), 0).0);
        }
        let mut out = Vec::new();
        let mut leaves = 0;
        while n != 0 {
            if !ok(n) || leaves > self.slab.capacity {
                return Err(format!("btree: leaf chain leaves the node slab or loops at {n:#x}"));
            }
            let c = (rd_u32(data, n + COUNT_OFF) as usize).min(LEAF_SLOTS as usize);
            for i in 0..c {
                out.push((rd_u64(data, key_at(Addr(n), i).0), rd_u32(data, value_at(Addr(n), i).0)));
            }
            leaves += 1;
            n = rd_u64(data, n + NEXT_OFF);
        }
        Ok(out)
    }

    /// Insert `key` with `value`, or overwrite its value. Returns whether the key is new.
    pub fn insert<P: Pm>(&mut self, pm: &mut P, key: u64, value: u32) -> bool {
        let (leaf, n) = self.descend(pm, key);
        let pos = self.search(pm, leaf, n, key, false);
        if pos < n && pm.load_u64(key_at(leaf, pos)) == key {
            pm.store_u32(value_at(leaf, pos), value);
            return false;
        }
        if n < self.leaf_max {
            self.insert_slot(pm, key_at(leaf, 0), 8, n, pos, &key.to_le_bytes());
            self.insert_slot(pm, value_at(leaf, 0), 4, n, pos, &value.to_le_bytes());
            set_count(pm, leaf, n + 1);
            return true;
        }
        let (sep, right) = self.split_leaf(pm, leaf, pos, key, value);
        self.insert_up(pm, leaf, sep, right);
        true
    }

    /// Split the full `leaf` while inserting `key` at `pos`; returns the separator and the new
    /// right leaf.
    fn split_leaf<P: Pm>(&mut self, pm: &mut P, leaf: Addr, pos: usize, key: u64, value: u32) -> (u64, Addr) {
        let l = self.leaf_max;
        let mut keys = load_u64s(pm, key_at(leaf, 0), l);
        let mut vals = load_u32s(pm, value_at(leaf, 0), l);
        keys.insert(pos, key);
        vals.insert(pos, value);
        let left_n = (l + 2) / 2;
        let right = self.alloc(pm);
        let next = pm.load_u64(leaf + NEXT_OFF);
        write_header(pm, right, KIND_LEAF, l + 1 - left_n, next);
        self.store_run(pm, key_at(right, 0), &u64_bytes(&keys[left_n..]));
        self.store_run(pm, value_at(right, 0), &u32_bytes(&vals[left_n..]));
        if pos < left_n {
            self.store_run(pm, key_at(leaf, pos), &u64_bytes(&keys[pos..left_n]));
            self.store_run(pm, value_at(leaf, pos), &u32_bytes(&vals[pos..left_n]));
        }
        let mut h = [0u8; 12];
        h[0..4].copy_from_slice(&(left_n as u32).to_le_bytes());
        h[4..12].copy_from_slice(&right.0.to_le_bytes());
        pm.store(leaf + COUNT_OFF, &h);
        (keys[left_n], right)
    }

    /// Insert separator `sep` and its right child `right` (split off `left`) into the nodes of
    /// the path, bottom up, splitting full nodes; a root split grows the tree.
    fn insert_up<P: Pm>(&mut self, pm: &mut P, mut left: Addr, mut sep: u64, mut right: Addr) {
        while let Some((node, idx)) = self.path.pop() {
            let n = count(pm, node);
            if n < self.inner_max {
                self.insert_slot(pm, key_at(node, 0), 8, n, idx, &sep.to_le_bytes());
                self.insert_slot(pm, child_at(node, 0), 8, n + 1, idx + 1, &right.0.to_le_bytes());
                set_count(pm, node, n + 1);
                return;
            }
            (sep, right) = self.split_inner(pm, node, idx, sep, right);
            left = node;
        }
        let root = self.alloc(pm);
        write_header(pm, root, KIND_INNER, 1, 0);
        pm.store_u64(key_at(root, 0), sep);
        self.store_run(pm, child_at(root, 0), &u64_bytes(&[left.0, right.0]));
        pm.store_u64(ROOT_AT, root.0);
    }

    /// Split the full inner `node` while inserting `sep` at key index `idx` (and `right` at
    /// child index `idx + 1`); returns the key that moves up and the new right node.
    fn split_inner<P: Pm>(&mut self, pm: &mut P, node: Addr, idx: usize, sep: u64, right: Addr) -> (u64, Addr) {
        let m = self.inner_max;
        let mut keys = load_u64s(pm, key_at(node, 0), m);
        let mut kids = load_u64s(pm, child_at(node, 0), m + 1);
        keys.insert(idx, sep);
        kids.insert(idx + 1, right.0);
        let left_n = m.div_ceil(2);
        let new = self.alloc(pm);
        write_header(pm, new, KIND_INNER, m - left_n, 0);
        self.store_run(pm, key_at(new, 0), &u64_bytes(&keys[left_n + 1..]));
        self.store_run(pm, child_at(new, 0), &u64_bytes(&kids[left_n + 1..]));
        if idx < left_n {
            self.store_run(pm, key_at(node, idx), &u64_bytes(&keys[idx..left_n]));
            self.store_run(pm, child_at(node, idx + 1), &u64_bytes(&kids[idx + 1..=left_n]));
        }
        set_count(pm, node, left_n);
        (keys[left_n], new)
    }

    /// Delete `key`. Returns whether it was present.
    pub fn delete<P: Pm>(&mut self, pm: &mut P, key: u64) -> bool {
        let (leaf, n) = self.descend(pm, key);
        let pos = self.search(pm, leaf, n, key, false);
        if pos == n || pm.load_u64(key_at(leaf, pos)) != key {
            return false;
        }
        self.remove_slot(pm, key_at(leaf, 0), 8, n, pos);
        self.remove_slot(pm, value_at(leaf, 0), 4, n, pos);
        set_count(pm, leaf, n - 1);
        if !self.path.is_empty() && n - 1 < self.leaf_min() && self.rebalance_leaf(pm, leaf, n - 1) {
            self.rebalance_up(pm);
        }
        true
    }

    /// Fix the underfull leaf `node` (holding `n`): borrow from a sibling or merge with one.
    /// Returns whether it merged (the parent, last on the path, lost a key).
    fn rebalance_leaf<P: Pm>(&mut self, pm: &mut P, node: Addr, n: usize) -> bool {
        let (parent, idx) = *self.path.last().expect("a non-root leaf has a parent");
        let pn = count(pm, parent);
        let min = self.leaf_min();
        let left = (idx > 0).then(|| child(pm, parent, idx - 1));
        if let Some(s) = left {
            let sn = count(pm, s);
            if sn > min {
                self.leaf_borrow_left(pm, parent, idx, s, sn, node, n);
                return false;
            }
            self.leaf_merge(pm, s, sn, node, n);
            self.remove_from_parent(pm, parent, pn, idx - 1);
            return true;
        }
        let s = child(pm, parent, idx + 1);
        let sn = count(pm, s);
        if sn > min {
            self.leaf_borrow_right(pm, parent, idx, s, sn, node, n);
            return false;
        }
        self.leaf_merge(pm, node, n, s, sn);
        self.remove_from_parent(pm, parent, pn, idx);
        true
    }

    /// Move the last entry of the left sibling `s` to the front of `node` (child `idx`).
    #[allow(clippy::too_many_arguments)]
    fn leaf_borrow_left<P: Pm>(&self, pm: &mut P, parent: Addr, idx: usize, s: Addr, sn: usize, node: Addr, n: usize) {
        let k = pm.load_u64(key_at(s, sn - 1));
        let v = pm.load_u32(value_at(s, sn - 1));
        self.insert_slot(pm, key_at(node, 0), 8, n, 0, &k.to_le_bytes());
        self.insert_slot(pm, value_at(node, 0), 4, n, 0, &v.to_le_bytes());
        set_count(pm, node, n + 1);
        set_count(pm, s, sn - 1);
        pm.store_u64(key_at(parent, idx - 1), k);
    }

    /// Move the first entry of the right sibling `s` to the end of `node` (child `idx`).
    #[allow(clippy::too_many_arguments)]
    fn leaf_borrow_right<P: Pm>(&self, pm: &mut P, parent: Addr, idx: usize, s: Addr, sn: usize, node: Addr, n: usize) {
        let k = pm.load_u64(key_at(s, 0));
        let v = pm.load_u32(value_at(s, 0));
        pm.store_u64(key_at(node, n), k);
        pm.store_u32(value_at(node, n), v);
        set_count(pm, node, n + 1);
        self.remove_slot(pm, key_at(s, 0), 8, sn, 0);
        self.remove_slot(pm, value_at(s, 0), 4, sn, 0);
        set_count(pm, s, sn - 1);
        let first = pm.load_u64(key_at(s, 0));
        pm.store_u64(key_at(parent, idx), first);
    }

    /// Append the right leaf `r` to its left neighbour `l` and free `r`.
    fn leaf_merge<P: Pm>(&self, pm: &mut P, l: Addr, ln: usize, r: Addr, rn: usize) {
        let mut buf = [0u8; 8 * LEAF_SLOTS as usize];
        pm.load(key_at(r, 0), &mut buf[..8 * rn]);
        self.store_run(pm, key_at(l, ln), &buf[..8 * rn]);
        pm.load(value_at(r, 0), &mut buf[..4 * rn]);
        self.store_run(pm, value_at(l, ln), &buf[..4 * rn]);
        let next = pm.load_u64(r + NEXT_OFF);
        let mut h = [0u8; 12];
        h[0..4].copy_from_slice(&((ln + rn) as u32).to_le_bytes());
        h[4..12].copy_from_slice(&next.to_le_bytes());
        pm.store(l + COUNT_OFF, &h);
        self.slab.free(pm, r);
    }

    /// Remove key `j` and child `j + 1` of the inner node `p` (holding `pn` keys).
    fn remove_from_parent<P: Pm>(&self, pm: &mut P, p: Addr, pn: usize, j: usize) {
        self.remove_slot(pm, key_at(p, 0), 8, pn, j);
        self.remove_slot(pm, child_at(p, 0), 8, pn + 1, j + 1);
        set_count(pm, p, pn - 1);
    }

    /// After a merge: walk up the path fixing underfull inner nodes; an inner root left with
    /// no key is replaced by its only child.
    fn rebalance_up<P: Pm>(&mut self, pm: &mut P) {
        while let Some((node, _)) = self.path.pop() {
            let n = count(pm, node);
            if self.path.is_empty() {
                if n == 0 {
                    let only = pm.load_u64(child_at(node, 0));
                    pm.store_u64(ROOT_AT, only);
                    self.slab.free(pm, node);
                }
                return;
            }
            if n >= self.inner_min() || !self.rebalance_inner(pm, node, n) {
                return;
            }
        }
    }

    /// Fix the underfull inner `node` (holding `n` keys) by borrowing or merging, like
    /// [`BTree::rebalance_leaf`]; the separator in the parent rotates through.
    fn rebalance_inner<P: Pm>(&mut self, pm: &mut P, node: Addr, n: usize) -> bool {
        let (g, idx) = *self.path.last().expect("a non-root node has a parent");
        let gn = count(pm, g);
        let min = self.inner_min();
        if idx > 0 {
            let s = child(pm, g, idx - 1);
            let sn = count(pm, s);
            if sn > min {
                let sep = pm.load_u64(key_at(g, idx - 1));
                let sk = pm.load_u64(key_at(s, sn - 1));
                let sc = pm.load_u64(child_at(s, sn));
                self.insert_slot(pm, key_at(node, 0), 8, n, 0, &sep.to_le_bytes());
                self.insert_slot(pm, child_at(node, 0), 8, n + 1, 0, &sc.to_le_bytes());
                set_count(pm, node, n + 1);
                set_count(pm, s, sn - 1);
                pm.store_u64(key_at(g, idx - 1), sk);
                return false;
            }
            self.inner_merge(pm, g, idx - 1, s, sn, node, n);
            self.remove_from_parent(pm, g, gn, idx - 1);
            return true;
        }
        let s = child(pm, g, idx + 1);
        let sn = count(pm, s);
        if sn > min {
            let sep = pm.load_u64(key_at(g, idx));
            let sk = pm.load_u64(key_at(s, 0));
            let sc = pm.load_u64(child_at(s, 0));
            pm.store_u64(key_at(node, n), sep);
            pm.store_u64(child_at(node, n + 1), sc);
            set_count(pm, node, n + 1);
            pm.store_u64(key_at(g, idx), sk);
            self.remove_slot(pm, key_at(s, 0), 8, sn, 0);
            self.remove_slot(pm, child_at(s, 0), 8, sn + 1, 0);
            set_count(pm, s, sn - 1);
            return false;
        }
        self.inner_merge(pm, g, idx, node, n, s, sn);
        self.remove_from_parent(pm, g, gn, idx);
        true
    }

    /// Append separator `j` of `g` and the right inner node `r` to `l`, and free `r`.
    #[allow(clippy::too_many_arguments)]
    fn inner_merge<P: Pm>(&self, pm: &mut P, g: Addr, j: usize, l: Addr, ln: usize, r: Addr, rn: usize) {
        let mut buf = [0u8; RUN_BYTES];
        buf[..8].copy_from_slice(&pm.load_u64(key_at(g, j)).to_le_bytes());
        pm.load(key_at(r, 0), &mut buf[8..8 + 8 * rn]);
        self.store_run(pm, key_at(l, ln), &buf[..8 + 8 * rn]);
        pm.load(child_at(r, 0), &mut buf[..8 * (rn + 1)]);
        self.store_run(pm, child_at(l, ln + 1), &buf[..8 * (rn + 1)]);
        set_count(pm, l, ln + 1 + rn);
        self.slab.free(pm, r);
    }

    /// Structural check of a data area; see the module documentation for what it checks.
    pub fn verify(&self, data: &[u8]) -> Result<(), String> {
        if self.parts.n == 1 {
            return self.verify_tree(data);
        }
        if (data.len() as u64) < self.parts.bytes() {
            return Err(format!("btree: data area of {} bytes, expected {}", data.len(), self.parts.bytes()));
        }
        for t in 0..self.parts.n {
            self.verify_tree(self.parts.slice(data, t)).map_err(|e| format!("tree {t} of {}: {e}", self.parts.n))?;
        }
        Ok(())
    }

    /// Structural check of one tree.
    fn verify_tree(&self, data: &[u8]) -> Result<(), String> {
        if (data.len() as u64) < self.tree_bytes() {
            return Err(format!("btree: data area of {} bytes, expected {}", data.len(), self.tree_bytes()));
        }
        let used = self.slab.used_in(data).map_err(|e| format!("btree: {e}"))?;
        let mut w = Walk {
            t: self,
            data,
            bump: rd_u64(data, SLAB_META_AT.0 + 8),
            seen: crate::hostmem::committed(self.slab.capacity as usize),
            nodes: 0,
            leaves: Vec::new(),
            leaf_depth: None,
        };
        w.node(rd_u64(data, ROOT_AT.0), 0, 0, 1 << 64, true)?;
        for (i, &leaf) in w.leaves.iter().enumerate() {
            let next = rd_u64(data, leaf + NEXT_OFF);
            let want = w.leaves.get(i + 1).copied().unwrap_or(0);
            if next != want {
                return Err(format!(
                    "btree: leaf {leaf:#x} links to {next:#x}, expected {want:#x} (leaf chain \
                     out of key order or broken)"
                ));
            }
        }
        if w.nodes != used {
            return Err(format!("btree: {} nodes reachable but the slab has {used} slots in use", w.nodes));
        }
        Ok(())
    }
}

/// The populate phase's entries, in insertion order: each key of `0..key_space` with
/// probability 1/2, shuffled, each with a random value.
fn populate_entries(key_space: u64) -> Vec<(u64, u32)> {
    let mut rng = Rng::new(POPULATE_SEED);
    let mut e: Vec<(u64, u32)> = (0..key_space).filter(|_| rng.chance(0.5)).map(|k| (k, 0)).collect();
    for i in (1..e.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        e.swap(i, j);
    }
    for x in &mut e {
        x.1 = rng.next_u64() as u32;
    }
    e
}

fn rd_u64(data: &[u8], a: u64) -> u64 {
    u64::from_le_bytes(data[a as usize..a as usize + 8].try_into().unwrap())
}
fn rd_u32(data: &[u8], a: u64) -> u32 {
    u32::from_le_bytes(data[a as usize..a as usize + 4].try_into().unwrap())
}

/// The verifier's depth-first walk. Every address it reads is inside a node that
/// `Slab::contains` accepted, at an offset below 4096.
struct Walk<'a> {
    t: &'a BTree,
    data: &'a [u8],
    bump: u64,
    seen: Vec<bool>,
    nodes: u64,
    /// Leaves in key order (left to right).
    leaves: Vec<u64>,
    leaf_depth: Option<usize>,
}

impl Walk<'_> {
    /// Check the subtree at `a`, whose keys must lie in `[lo, hi)`.
    fn node(&mut self, a: u64, depth: usize, lo: u128, hi: u128, root: bool) -> Result<(), String> {
        let slab = &self.t.slab;
        if !slab.contains(Addr(a)) {
            return Err(format!("btree: node address {a:#x} at depth {depth} is not a slot of the node slab"));
        }
        let slot = (a - slab.base.0) / NODE_BYTES;
        if slot >= self.bump {
            return Err(format!("btree: node {a:#x} is a slot the slab never handed out"));
        }
        if std::mem::replace(&mut self.seen[slot as usize], true) {
            return Err(format!("btree: node {a:#x} reached twice (a cycle or a shared child)"));
        }
        if depth >= MAX_DEPTH {
            return Err(format!("btree: deeper than {MAX_DEPTH} levels"));
        }
        self.nodes += 1;
        let (kind, cnt) = (rd_u32(self.data, a), rd_u32(self.data, a + COUNT_OFF) as usize);
        match kind {
            KIND_LEAF => self.leaf(a, depth, cnt, lo, hi, root),
            KIND_INNER => self.inner(a, depth, cnt, lo, hi, root),
            k => Err(format!("btree: node {a:#x} has kind {k}, neither leaf (1) nor inner (2)")),
        }
    }

    fn check_count(a: u64, what: &str, cnt: usize, min: usize, max: usize) -> Result<(), String> {
        if (min..=max).contains(&cnt) {
            Ok(())
        } else {
            Err(format!("btree: {what} {a:#x} holds {cnt} keys, allowed {min}..={max}"))
        }
    }

    /// Keys of node `a` strictly ascending, each in `[lo, hi)`, and above `lo` if `strict_lo`
    /// (an inner key equal to its lower bound would leave a child with an empty range, and no
    /// leaf below an inner node may be empty).
    fn keys(&self, a: u64, cnt: usize, lo: u128, hi: u128, strict_lo: bool) -> Result<Vec<u64>, String> {
        let keys: Vec<u64> = (0..cnt).map(|i| rd_u64(self.data, key_at(Addr(a), i).0)).collect();
        for (i, &k) in keys.iter().enumerate() {
            let k128 = k as u128;
            if k128 < lo || (strict_lo && k128 == lo) || k128 >= hi {
                return Err(format!("btree: node {a:#x} key {i} = {k} outside its separators' range [{lo}, {hi})"));
            }
            if i > 0 && keys[i - 1] >= k {
                return Err(format!("btree: node {a:#x} keys {} and {i} out of order", i - 1));
            }
        }
        Ok(keys)
    }

    fn leaf(&mut self, a: u64, depth: usize, cnt: usize, lo: u128, hi: u128, root: bool) -> Result<(), String> {
        let min = if root { 0 } else { self.t.leaf_min() };
        Self::check_count(a, "leaf", cnt, min, self.t.leaf_max)?;
        self.keys(a, cnt, lo, hi, false)?;
        match self.leaf_depth {
            None => self.leaf_depth = Some(depth),
            Some(d) if d != depth => return Err(format!("btree: leaf {a:#x} at depth {depth}, other leaves at {d}")),
            Some(_) => {}
        }
        self.leaves.push(a);
        Ok(())
    }

    fn inner(&mut self, a: u64, depth: usize, cnt: usize, lo: u128, hi: u128, root: bool) -> Result<(), String> {
        let min = if root { 1 } else { self.t.inner_min() };
        Self::check_count(a, "inner node", cnt, min, self.t.inner_max)?;
        let keys = self.keys(a, cnt, lo, hi, true)?;
        for i in 0..=cnt {
            let c = rd_u64(self.data, child_at(Addr(a), i).0);
            let clo = if i == 0 { lo } else { keys[i - 1] as u128 };
            let chi = if i == cnt { hi } else { keys[i] as u128 };
            self.node(c, depth + 1, clo, chi, false)?;
        }
        Ok(())
    }
}

/// The incremental form of [`BTree::verify`] ([`Follow`]): a summary per node of its subtree,
/// kept until a block of the node changes, and recomputed along the path from a changed node
/// to the root (as [`crate::workload::rbtree::RbFollow`] does). An inner node on that path
/// whose own blocks did not change folds in only its children whose summaries did (a
/// `Fold`), so a point costs what changed, not the inner nodes' fan-out (hundreds of
/// children each).
///
/// A summary holds what the whole walk derives from the subtree without knowing where it
/// hangs: whether it passes the checks that need no bounds from above (fill at most the
/// maximum, keys ascending in each node, every child a handed-out slot holding at least the
/// non-root minimum, children's key ranges inside the separators, all leaves at one depth,
/// consecutive children's leaves chained), its height, node count, smallest leaf key, smallest
/// inner key, largest key, its first leaf and its last leaf's `next` pointer. The parent applies the separator bounds
/// to these extremes; the top applies the root's bounds (an inner key above 0), the root's
/// minimum fill, the last leaf's `next` = 0, the height bound, and the count against the
/// slab's slots in use.
///
/// The whole walk also fails on a node reached twice. With non-empty nodes, which the minimum
/// fills guarantee (the configuration requires both maximums to be at least 2), a node reached on two paths would hold keys in two disjoint separator ranges, and a node on
/// a cycle an inner key not above its own lower bound, so the bounds alone reject both.
pub struct BTreeFollow {
    slab: Slab,
    leaf_max: usize,
    inner_max: usize,
    data_bytes: u64,
    bump: u64,
    free: FreeList,
    /// Per node slot: its subtree's summary and the parent that last read it; the nodes whose
    /// evaluation met a child beyond the bump.
    subtrees: Subtrees<NodeSum>,
    /// This evaluation met the depth bound (a cycle).
    deep: bool,
    keys: Vec<u64>,
    /// Per node slot: its last whole fold, which later folds update child by child
    /// ([`BTreeFollow::refold`]), and what its parent's fold counted of it; valid while
    /// stamped with `fold_gen`.
    folds: Vec<Fold>,
    fold_gen: u32,
    /// Per inner node with a valid fold: the children whose summaries were marked stale since,
    /// each once ([`Fold::queued`]), from the trace of marking stale
    /// ([`crate::workload::follow::Walks`]).
    pending: Vec<Vec<u32>>,
}

/// An inner node's fold of its children's summaries, kept so that a child's new summary is
/// folded in by re-checking that child and the next (the checks between neighbours: equal
/// heights, the leaf chain), not all of them: how many children fail their checks, the sum of
/// their node counts; and the node's own place in its parent's fold (index, whether it passed,
/// the node count counted). With every child passing, the extremes come from the first and last
/// child alone ([`BTreeFollow::refold`]).
#[derive(Clone, Copy, Default)]
struct Fold {
    gen: u32,
    bad: u32,
    nodes: u64,
    idx: u32,
    counted: u32,
    passed: bool,
    /// The node whose pending children list this one (slot + 1; 0: none).
    queued: u32,
    /// Being folded (a cycle in a broken image reaches a node inside its own fold, which is
    /// then folded whole again until the depth bound).
    folding: bool,
}

/// A subtree's summary (see [`BTreeFollow`]), packed into 56 bytes so that with its parent
/// link ([`Subtrees`]) it takes 64: re-evaluating an inner node reads about one host line per
/// child.
#[derive(Clone, Copy, PartialEq, Debug)]
struct NodeSum {
    /// Smallest leaf key, smallest inner key, largest key (`u64::MAX` / 0 when none).
    min_leaf: u64,
    min_inner: u64,
    max: u64,
    /// The first leaf's address, and the `next` pointer of the last leaf as read (the last
    /// leaf is inside the subtree, so a change to it marks this summary stale).
    first_leaf: u64,
    last_next: u64,
    nodes: u32,
    count: u16,
    height: u8,
    ok: bool,
    leaf: bool,
    any_key: bool,
}

const FAILED: NodeSum = NodeSum {
    min_leaf: u64::MAX,
    min_inner: u64::MAX,
    max: 0,
    first_leaf: 0,
    last_next: 0,
    nodes: 0,
    count: 0,
    height: 0,
    ok: false,
    leaf: false,
    any_key: false,
};

impl NodeSum {
    /// What a node's own keys say: a leaf's whole summary but for its address and `next`
    /// pointer, an inner node's before its children are folded in ([`NodeSum::absorb`]).
    fn of_keys(keys: &[u64], leaf: bool) -> NodeSum {
        let first = keys.first().copied().unwrap_or(u64::MAX);
        NodeSum {
            ok: keys.windows(2).all(|p| p[0] < p[1]),
            leaf,
            count: keys.len() as u16,
            height: 0,
            nodes: 1,
            min_leaf: if leaf { first } else { u64::MAX },
            min_inner: if leaf { u64::MAX } else { first },
            max: keys.last().copied().unwrap_or(0),
            any_key: !keys.is_empty(),
            first_leaf: 0,
            last_next: 0,
        }
    }

    /// Fold the next child's summary in (its checks are [`BTreeFollow::passes`]).
    fn absorb(&mut self, k: &NodeSum, first: bool) {
        if first {
            (self.height, self.first_leaf) = (k.height + 1, k.first_leaf);
        }
        self.nodes = self.nodes.saturating_add(k.nodes);
        self.min_leaf = self.min_leaf.min(k.min_leaf);
        self.min_inner = self.min_inner.min(k.min_inner);
        self.max = self.max.max(k.max);
        self.any_key |= k.any_key;
        self.last_next = k.last_next;
    }
}

impl BTree {
    /// The incremental verifier.
    pub fn follower(&self) -> BTreeFollow {
        assert!(self.leaf_max >= 2 && self.inner_max >= 2, "non-root nodes are never empty");
        let n = self.slab.capacity as usize;
        BTreeFollow {
            slab: self.slab,
            leaf_max: self.leaf_max,
            inner_max: self.inner_max,
            data_bytes: self.tree_bytes(),
            bump: 0,
            free: FreeList::new(&self.slab),
            subtrees: Subtrees::with_walks(n, MAX_DEPTH),
            deep: false,
            keys: Vec::new(),
            folds: vec![Fold::default(); n],
            fold_gen: 1,
            pending: vec![Vec::new(); n],
        }
    }
}

impl BTreeFollow {
    fn slot(&self, a: u64) -> usize {
        ((a - self.slab.base.0) / NODE_BYTES) as usize
    }

    /// A handed-out node's slot; records `parent` (`Subtrees::beyond_bump`) for a slot of the slab not
    /// handed out yet (a larger bump may make the pointer valid).
    fn handed_out(&mut self, a: u64, parent: usize) -> Option<usize> {
        if !self.slab.contains(Addr(a)) {
            return None;
        }
        let slot = self.slot(a);
        if slot as u64 >= self.bump {
            self.subtrees.beyond_bump(parent);
            return None;
        }
        Some(slot)
    }

    /// The summary of the subtree at the handed-out node `a` (adopted by its parent).
    fn eval(&mut self, data: &[u8], a: u64, depth: usize) -> NodeSum {
        let slot = self.slot(a);
        if let Some(sum) = self.subtrees.sum(slot) {
            return sum;
        }
        self.take_walks();
        let (kind, count) = (rd_u32(data, a), rd_u32(data, a + COUNT_OFF) as usize);
        let leaf = kind == KIND_LEAF;
        let max = if leaf { self.leaf_max } else { self.inner_max };
        // A re-fold re-checks two children per pending one; past a quarter of them pending,
        // a whole fold reads fewer.
        let f = &self.folds[slot];
        let refold = !leaf && f.gen == self.fold_gen && !f.folding && 4 * self.pending[slot].len() <= count + 1;
        let sum = if (kind != KIND_LEAF && kind != KIND_INNER) || count > max {
            FAILED
        } else if let Some(sum) = refold.then(|| self.refold(data, a, slot, count, depth)).flatten() {
            sum
        } else {
            // Host cache hint: the node's keys and children, all at once (a stale inner node
            // is often cold: only its child changed).
            let end = if leaf { key_at(Addr(a), count) } else { child_at(Addr(a), count + 1) };
            if let Some(node) = data.get(a as usize..end.0 as usize) {
                crate::hostmem::prefetch_bytes(node);
            }
            let mut keys = std::mem::take(&mut self.keys);
            keys.clear();
            // One bounds check for the whole key array (the node is in the slab).
            let at = key_at(Addr(a), 0).0 as usize;
            let bytes = &data[at..at + 8 * count];
            keys.extend(bytes.chunks_exact(8).map(|k| u64::from_le_bytes(k.try_into().unwrap())));
            let sum = if leaf { self.leaf_sum(data, a, &keys) } else { self.inner_sum(data, a, slot, &keys, depth) };
            self.keys = keys;
            sum
        };
        self.subtrees.keep(slot, sum);
        sum
    }

    fn leaf_sum(&self, data: &[u8], a: u64, keys: &[u64]) -> NodeSum {
        NodeSum { first_leaf: a, last_next: rd_u64(data, a + NEXT_OFF), ..NodeSum::of_keys(keys, true) }
    }

    fn inner_sum(&mut self, data: &[u8], a: u64, slot: usize, keys: &[u64], depth: usize) -> NodeSum {
        let count = keys.len();
        let mut sum = NodeSum::of_keys(keys, false);
        // Provisionally valid, so that children marked stale while this fold runs are pending.
        (self.folds[slot].gen, self.folds[slot].folding) = (self.fold_gen, true);
        self.unqueue(slot);
        let mut nodes = 0u64;
        let mut prev: Option<NodeSum> = None;
        for i in 0..=count {
            if !sum.ok {
                break;
            }
            if i + 8 <= count {
                // Host cache hint: the summary the walk reads 8 children on.
                let ahead = rd_u64(data, child_at(Addr(a), i + 8).0);
                if self.slab.contains(Addr(ahead)) {
                    self.subtrees.prefetch(self.slot(ahead));
                }
            }
            let c = rd_u64(data, child_at(Addr(a), i).0);
            let Some(cs) = self.handed_out(c, slot) else {
                sum.ok = false;
                break;
            };
            self.subtrees.adopt(cs, slot as u32 + 1);
            if depth + 1 >= MAX_DEPTH {
                (self.deep, sum.ok) = (true, false);
                break;
            }
            let k = self.eval(data, c, depth + 1);
            let passed = self.passes(&k, prev.as_ref(), i.checked_sub(1).map(|j| keys[j]), keys.get(i).copied());
            self.folds[cs] = Fold { idx: i as u32, counted: k.nodes, passed, ..self.folds[cs] };
            sum.ok &= passed;
            sum.absorb(&k, prev.is_none());
            nodes += u64::from(k.nodes);
            prev = Some(k);
        }
        let f = &mut self.folds[slot];
        f.folding = false;
        if sum.ok && f.gen == self.fold_gen {
            (f.bad, f.nodes) = (0, nodes);
        } else {
            f.gen = 0;
        }
        if sum.ok {
            sum
        } else {
            FAILED
        }
    }

    /// The checks a parent makes of child `k` (after `prev`, between separators `lo` and `hi`):
    /// sound, at least the non-root minimum fill, keys in [lo, hi) and inner keys above lo, and
    /// at the height of its left neighbour, whose last leaf chains to its first.
    fn passes(&self, k: &NodeSum, prev: Option<&NodeSum>, lo: Option<u64>, hi: Option<u64>) -> bool {
        let min_fill = if k.leaf { self.leaf_max / 2 } else { self.inner_max / 2 };
        k.ok && k.count as usize >= min_fill
            && lo.is_none_or(|lo| k.min_leaf >= lo && (k.min_inner == u64::MAX || k.min_inner > lo))
            && hi.is_none_or(|hi| !k.any_key || k.max < hi)
            && prev.is_none_or(|p| p.height == k.height && p.last_next == k.first_leaf)
    }

    /// Bring the folds up to the trace of marking stale: a walk's start is folded whole next
    /// time, a step's child is pending in its parent's fold.
    fn take_walks(&mut self) {
        let Some(w) = self.subtrees.walks() else { return };
        if std::mem::take(&mut w.all) {
            self.fold_gen = self.fold_gen.wrapping_add(1).max(1);
        }
        for &s in &w.starts {
            self.folds[s as usize].gen = 0;
        }
        for &(p, c) in &w.steps {
            if self.folds[p as usize].gen == self.fold_gen && self.folds[c as usize].queued != p + 1 {
                self.folds[c as usize].queued = p + 1;
                self.pending[p as usize].push(c);
            }
        }
        w.starts.clear();
        w.steps.clear();
    }

    /// The summary of the inner node `a` (`count` keys) from its last whole fold, re-checking
    /// each pending child and the one after it; `None` when the fold stopped being valid on
    /// the way (fold it whole).
    ///
    /// With every child passing its checks, the extremes are the first and last child's: child
    /// i > 0 has its smallest leaf key and inner keys at or above keys[i-1] >= keys[0], child
    /// i < count its largest key below keys[i] <= the last key, and every child holds a key (at
    /// least the minimum fill, which is at least 1), so the whole fold's minimum leaf key is
    /// the first child's, its minimum inner key min(keys[0], the first child's), its maximum
    /// max(the last key, the last child's).
    fn refold(&mut self, data: &[u8], a: u64, slot: usize, count: usize, depth: usize) -> Option<NodeSum> {
        self.folds[slot].folding = true;
        let sum = self.refold_in(data, a, slot, count, depth);
        self.folds[slot].folding = false;
        sum
    }

    fn refold_in(&mut self, data: &[u8], a: u64, slot: usize, count: usize, depth: usize) -> Option<NodeSum> {
        let mut j = 0;
        while let Some(&c) = self.pending[slot].get(j) {
            j += 1;
            if j > count + 1 {
                // More re-checks than children (children marked stale again and again by what
                // the re-checks evaluate, in a broken image): fold whole.
                return None;
            }
            self.unqueue_one(slot, c);
            // The index this child had in the fold (a child since moved elsewhere names a
            // place whose re-check is merely redundant).
            let i = self.folds[c as usize].idx as usize;
            if i <= count {
                self.recheck(data, a, slot, i, count, depth);
            }
            if i < count {
                self.recheck(data, a, slot, i + 1, count, depth);
            }
            if self.deep {
                return Some(FAILED);
            }
        }
        self.pending[slot].clear();
        self.take_walks();
        if !self.pending[slot].is_empty() {
            // Marked stale again by what the re-checks evaluated: fold whole.
            self.unqueue(slot);
            return None;
        }
        let f = self.folds[slot];
        if f.gen != self.fold_gen {
            return None;
        }
        if f.bad > 0 {
            return Some(FAILED);
        }
        let first = self.child(data, a, 0, slot, depth);
        let last = self.child(data, a, count, slot, depth);
        if self.deep {
            return Some(FAILED);
        }
        let key = |i: usize| rd_u64(data, key_at(Addr(a), i).0);
        let sum = NodeSum {
            ok: true,
            leaf: false,
            count: count as u16,
            height: first.height + 1,
            nodes: (1 + f.nodes).min(u64::from(u32::MAX)) as u32,
            min_leaf: first.min_leaf,
            min_inner: if count > 0 { key(0).min(first.min_inner) } else { first.min_inner },
            max: if count > 0 { key(count - 1).max(last.max) } else { last.max },
            any_key: count > 0 || first.any_key,
            first_leaf: first.first_leaf,
            last_next: last.last_next,
        };
        #[cfg(test)]
        if let Some(whole) = self.whole_fold(data, a, count) {
            assert_eq!(sum, whole, "B+tree follower: a re-fold differs from the whole fold");
        }
        Some(sum)
    }

    /// Empty the pending children of node `slot`.
    fn unqueue(&mut self, slot: usize) {
        for j in 0..self.pending[slot].len() {
            self.unqueue_one(slot, self.pending[slot][j]);
        }
        self.pending[slot].clear();
    }

    fn unqueue_one(&mut self, slot: usize, c: u32) {
        let f = &mut self.folds[c as usize];
        if f.queued == slot as u32 + 1 {
            f.queued = 0;
        }
    }

    /// Re-check child `i` of the inner node `a` against its neighbour and separators, bringing
    /// the fold's failing count and node sum up to date.
    fn recheck(&mut self, data: &[u8], a: u64, slot: usize, i: usize, count: usize, depth: usize) {
        let k = self.child(data, a, i, slot, depth);
        let prev = if i > 0 { Some(self.child(data, a, i - 1, slot, depth)) } else { None };
        let key = |i: usize| rd_u64(data, key_at(Addr(a), i).0);
        let passed = self.passes(&k, prev.as_ref(), i.checked_sub(1).map(key), (i < count).then(|| key(i)));
        let cs = self.slot(rd_u64(data, child_at(Addr(a), i).0));
        let was = self.folds[cs];
        self.folds[cs] = Fold { idx: i as u32, counted: k.nodes, passed, ..was };
        let f = &mut self.folds[slot];
        f.bad = f.bad + u32::from(!passed) - u32::from(!was.passed);
        f.nodes = f.nodes - u64::from(was.counted) + u64::from(k.nodes);
    }

    /// The summary of child `i` of the inner node `a`, whose whole fold found every child
    /// handed out.
    fn child(&mut self, data: &[u8], a: u64, i: usize, slot: usize, depth: usize) -> NodeSum {
        if depth + 1 >= MAX_DEPTH {
            self.deep = true;
            return FAILED;
        }
        let c = rd_u64(data, child_at(Addr(a), i).0);
        self.subtrees.adopt(self.slot(c), slot as u32 + 1);
        self.eval(data, c, depth + 1)
    }

    /// Test cross-check of [`BTreeFollow::refold`]: the whole fold of the inner node `a` from
    /// the kept summaries of its children (`None` if one is not kept), without side effects.
    #[cfg(test)]
    fn whole_fold(&self, data: &[u8], a: u64, count: usize) -> Option<NodeSum> {
        let key = |i: usize| rd_u64(data, key_at(Addr(a), i).0);
        let keys: Vec<u64> = (0..count).map(key).collect();
        let mut sum = NodeSum::of_keys(&keys, false);
        let mut prev: Option<NodeSum> = None;
        for i in 0..=count {
            let k = self.subtrees.sum(self.slot(rd_u64(data, child_at(Addr(a), i).0)))?;
            sum.ok &= self.passes(&k, prev.as_ref(), i.checked_sub(1).map(|j| keys[j]), keys.get(i).copied());
            sum.absorb(&k, prev.is_none());
            prev = Some(k);
        }
        Some(if sum.ok { sum } else { FAILED })
    }

    fn sound(&mut self, data: &[u8]) -> bool {
        if !self.free.ok {
            return false;
        }
        let root = rd_u64(data, ROOT_AT.0);
        if !self.slab.contains(Addr(root)) || self.slot(root) as u64 >= self.bump {
            // A root beyond the bump: re-evaluated on every change anyway.
            return false;
        }
        self.subtrees.adopt(self.slot(root), 0);
        let sum = self.eval(data, root, 0);
        if std::mem::take(&mut self.deep) {
            // A summary cut at the depth bound depends on its depth: keep none of this pass.
            self.subtrees.forget_sums();
            return false;
        }
        sum.ok
            && (sum.leaf || sum.count >= 1)
            && (sum.min_inner == u64::MAX || sum.min_inner > 0)
            && (sum.height as usize) < MAX_DEPTH
            && sum.last_next == 0
            && u64::from(sum.nodes) == self.bump - self.free.len
    }

    fn walk_free(&mut self, data: &[u8], old: Option<&[(usize, BlockData)]>) {
        // The free list's membership does not enter a summary (the whole walk compares
        // counts only).
        self.free.update(data, &self.slab, self.bump, old, |_, _| {});
    }
}

impl Follow for BTreeFollow {
    fn reset(&mut self, data: &[u8]) -> bool {
        self.subtrees.clear();
        self.free = FreeList::new(&self.slab);
        if (data.len() as u64) < self.data_bytes {
            return false;
        }
        self.bump = rd_u64(data, SLAB_META_AT.0 + 8);
        self.walk_free(data, None);
        self.sound(data)
    }

    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool {
        for &(b, _) in old {
            let at = b as u64 * 64;
            if at == SLAB_META_AT.0 / 64 * 64 {
                let bump = rd_u64(data, SLAB_META_AT.0 + 8);
                if bump < self.bump {
                    return self.reset(data);
                }
                if bump > self.bump {
                    self.bump = bump;
                    self.subtrees.bump_grew();
                }
            } else if at >= self.slab.base.0 && at < self.slab.base.0 + self.slab.bytes() {
                self.subtrees.stale(self.slot(at));
            }
        }
        self.walk_free(data, Some(old));
        self.sound(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn cfg(key_space: u64, leaf: u64, inner: u64, ops: u64) -> BTreeConfig {
        BTreeConfig { key_space, ops_per_tx: ops, leaf_max_keys: leaf, inner_max_keys: inner, ..BTreeConfig::default() }
    }

    fn populated(c: &BTreeConfig) -> (BTree, Native) {
        let mut w = BTree::new(c);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        (w, Native::new(mem))
    }

    /// Every entry, by walking to the leftmost leaf and following the leaf chain.
    fn scan(data: &[u8]) -> Vec<(u64, u32)> {
        let mut n = rd_u64(data, ROOT_AT.0);
        while rd_u32(data, n) == KIND_INNER {
            n = rd_u64(data, child_at(Addr(n), 0).0);
        }
        let mut out = Vec::new();
        while n != 0 {
            for i in 0..rd_u32(data, n + COUNT_OFF) as usize {
                let k = rd_u64(data, key_at(Addr(n), i).0);
                out.push((k, rd_u32(data, value_at(Addr(n), i).0)));
            }
            n = rd_u64(data, n + NEXT_OFF);
        }
        out
    }

    fn height(data: &[u8]) -> usize {
        let (mut n, mut h) = (rd_u64(data, ROOT_AT.0), 1);
        while rd_u32(data, n) == KIND_INNER {
            n = rd_u64(data, child_at(Addr(n), 0).0);
            h += 1;
        }
        h
    }

    /// Run `txs` transactions (about 20% aborted) against a BTreeMap model, comparing after
    /// every one; returns the largest and the smallest height seen.
    fn drive(w: &mut BTree, pm: &mut Native, model: &mut BTreeMap<u64, u32>, txs: u64, seed: u64) -> (usize, usize) {
        let (mut ops, mut twin, mut aborts) = (Rng::new(seed), Rng::new(seed), Rng::new(!seed));
        let (mut hmax, mut hmin) = (0, usize::MAX);
        for t in 0..txs {
            let abort = aborts.chance(0.2);
            w.run_tx(pm, &mut ops, abort);
            let drawn: Vec<Op> = (0..w.ops_per_tx).map(|_| w.draw_op(&mut twin)).collect();
            if !abort {
                for op in drawn {
                    match op {
                        Op::Insert(k, v) => model.insert(k, v),
                        Op::Delete(k) => model.remove(&k),
                    };
                }
            }
            let want: Vec<(u64, u32)> = model.iter().map(|(&k, &v)| (k, v)).collect();
            assert!(scan(&pm.mem) == want, "seed {seed}: leaf chain differs from the model after tx {t}");
            for _ in 0..8 {
                let k = aborts.below(w.key_space);
                assert_eq!(w.lookup(pm, k), model.get(&k).copied(), "seed {seed}: lookup {k} after tx {t}");
            }
            if let Err(e) = w.verify(&pm.mem) {
                panic!("seed {seed}: verifier after tx {t}: {e}");
            }
            let h = height(&pm.mem);
            (hmax, hmin) = (hmax.max(h), hmin.min(h));
        }
        (hmax, hmin)
    }

    fn model_of(c: &BTreeConfig) -> BTreeMap<u64, u32> {
        populate_entries(c.key_space).into_iter().collect()
    }

    #[test]
    fn inserts_and_deletes_match_a_btreemap_after_every_transaction_and_aborts_leave_no_trace() {
        for (i, (leaf, inner)) in [(4, 3), (5, 2), (2, 4), (3, 5)].into_iter().enumerate() {
            let c = cfg(400, leaf, inner, 4);
            let (mut w, mut pm) = populated(&c);
            let mut model = model_of(&c);
            assert!(scan(&pm.mem) == model.iter().map(|(&k, &v)| (k, v)).collect::<Vec<_>>());
            w.verify(&pm.mem).unwrap();
            let (hmax, _) = drive(&mut w, &mut pm, &mut model, 600, 11 + i as u64);
            assert!(hmax >= 4, "leaf {leaf} inner {inner}: height only {hmax}");
        }
    }

    #[test]
    fn the_tree_shrinks_to_one_leaf_and_grows_again_through_merges_and_splits() {
        let c = cfg(200, 4, 3, 5);
        let (_, mut pm) = populated(&c);
        let mut model = model_of(&c);
        for (pct, seed) in [(0, 21), (90, 22), (0, 23)] {
            let mut w = BTree::new(&BTreeConfig { insert_percent: pct, ..c.clone() });
            let (hmax, hmin) = drive(&mut w, &mut pm, &mut model, 400, seed);
            if pct == 0 {
                assert_eq!(hmin, 1, "seed {seed}: the tree never shrank to a root leaf");
            } else {
                assert!(hmax >= 5, "seed {seed}: the tree only grew to height {hmax}");
            }
        }
    }

    #[test]
    fn the_verifier_passes_on_every_state_with_full_size_nodes() {
        let c = cfg(60_000, LEAF_SLOTS, INNER_SLOTS, 30);
        let (mut w, mut pm) = populated(&c);
        assert!(height(&pm.mem) >= 2);
        let mut model = model_of(&c);
        drive(&mut w, &mut pm, &mut model, 120, 31);
    }

    /// A populated small tree and the address of its root, a leaf, and that leaf's parent.
    fn corruptible() -> (BTree, Vec<u8>, u64, u64, u64) {
        let c = cfg(400, 4, 3, 4);
        let (w, pm) = populated(&c);
        let root = rd_u64(&pm.mem, 0);
        let mut parent = root;
        while rd_u32(&pm.mem, rd_u64(&pm.mem, child_at(Addr(parent), 1).0)) == KIND_INNER {
            parent = rd_u64(&pm.mem, child_at(Addr(parent), 1).0);
        }
        let leaf = rd_u64(&pm.mem, child_at(Addr(parent), 1).0);
        w.verify(&pm.mem).unwrap();
        (w, pm.mem, root, parent, leaf)
    }

    fn put_u64(d: &mut [u8], a: u64, v: u64) {
        d[a as usize..a as usize + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn the_verifier_catches_each_injected_corruption() {
        type Corrupt = fn(&mut Vec<u8>, u64, u64, u64);
        let cases: [(&str, Corrupt); 9] = [
            ("out of order", |d, _, _, leaf| {
                let (a, b) = (rd_u64(d, leaf + KEYS_OFF), rd_u64(d, leaf + KEYS_OFF + 8));
                put_u64(d, leaf + KEYS_OFF, b);
                put_u64(d, leaf + KEYS_OFF + 8, a);
            }),
            ("outside its separators", |d, _, p, leaf| {
                let k = rd_u64(d, leaf + KEYS_OFF) + 1;
                put_u64(d, key_at(Addr(p), 0).0, k)
            }),
            ("not a slot", |d, _, p, _| put_u64(d, child_at(Addr(p), 1).0, 4096 + 64)),
            ("reached twice", |d, r, p, _| put_u64(d, child_at(Addr(p), 1).0, r)),
            ("links to", |d, _, _, leaf| put_u64(d, leaf + NEXT_OFF, leaf)),
            ("holds 0 keys", |d, _, _, leaf| d[leaf as usize + 4..leaf as usize + 8].fill(0)),
            ("kind 7", |d, _, _, leaf| d[leaf as usize] = 7),
            ("slots in use", |d, _, _, _| {
                let bump = rd_u64(d, SLAB_META_AT.0 + 8);
                put_u64(d, SLAB_META_AT.0 + 8, bump + 1);
            }),
            ("never handed out", |d, _, p, _| {
                let bump = rd_u64(d, SLAB_META_AT.0 + 8);
                put_u64(d, child_at(Addr(p), 1).0, NODES_AT.0 + bump * NODE_BYTES);
            }),
        ];
        for (want, corrupt) in cases {
            let (w, mut d, root, parent, leaf) = corruptible();
            corrupt(&mut d, root, parent, leaf);
            let e = w.verify(&d).expect_err(want);
            assert!(e.contains(want), "expected `{want}`, got `{e}`");
        }
    }

    #[test]
    fn the_verifier_returns_an_error_on_random_garbage_without_panicking() {
        let (w, clean, _, _, _) = corruptible();
        for seed in 0..40u64 {
            let mut rng = Rng::new(seed);
            let mut d = clean.clone();
            // Overwrite a few random words of the used region with random values, some of them
            // plausible node addresses.
            let used_end = NODES_AT.0 + rd_u64(&d, SLAB_META_AT.0 + 8) * NODE_BYTES;
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(used_end / 8) * 8;
                let v = match rng.below(3) {
                    0 => rng.next_u64(),
                    1 => NODES_AT.0 + rng.below(64) * NODE_BYTES,
                    _ => rng.below(8),
                };
                put_u64(&mut d, at, v);
            }
            let _ = w.verify(&d); // must not panic
        }
        let mut rng = Rng::new(99);
        let mut d = clean.clone();
        d.iter_mut().for_each(|b| *b = rng.next_u64() as u8);
        assert!(w.verify(&d).is_err());
        assert!(w.verify(&clean[..4096]).is_err());
    }

    #[test]
    fn validate_names_the_key_and_the_allowed_range() {
        BTreeConfig::default().validate().unwrap();
        let e = cfg(1 << 20, 201, 254, 9).validate().unwrap_err();
        assert_eq!(e, "workload.btree.leaf_max_keys = 201: allowed 2..=200");
        let e = cfg(1 << 20, 200, 1, 9).validate().unwrap_err();
        assert_eq!(e, "workload.btree.inner_max_keys = 1: allowed 2..=254");
        let e = cfg(1 << 32, 2, 2, 9).validate().unwrap_err();
        assert!(e.starts_with("workload.btree.key_space = 4294967296: needs"), "{e}");
    }

    #[test]
    fn the_slab_never_runs_out_when_every_key_of_the_space_is_inserted() {
        for (leaf, inner) in [(2, 2), (3, 2), (4, 3)] {
            let c = BTreeConfig { insert_percent: 100, ..cfg(300, leaf, inner, 10) };
            let (mut w, mut pm) = populated(&c);
            let mut model = model_of(&c);
            drive(&mut w, &mut pm, &mut model, 400, 41);
            assert_eq!(model.len(), 300, "leaf {leaf} inner {inner}: not every key inserted");
        }
    }

    #[test]
    fn the_default_tree_holds_at_least_8_mib_of_nodes_after_populate() {
        let mut w = BTree::new(&BTreeConfig::default());
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        w.verify(&mem).unwrap();
        let used = w.slab.used_in(&mem).unwrap();
        assert!(used * NODE_BYTES >= 8 << 20, "only {used} nodes");
    }

    /// The incremental verifier against the whole one, over runs of deep trees of tiny nodes
    /// (splits, merges, borrows, root changes) and random damage; inner nodes of up to 9 keys
    /// re-fold a few children at a time ([`BTreeFollow::refold`], which a test build checks
    /// against the whole fold every time). Seed 40 damages a tree into a cycle through a
    /// re-folded node.
    #[test]
    fn the_follower_agrees_with_the_verifier_on_a_run_and_on_damage() {
        for (leaf, inner, insert_percent, seed) in
            [(4, 4, 50, 3), (3, 2, 80, 4), (6, 5, 20, 5), (2, 3, 50, 6), (2, 2, 60, 7), (4, 4, 50, 40), (12, 9, 50, 8)]
        {
            // One tree, and the same over three partitioned trees (one follower per tree).
            for trees in [1, 3] {
                let btree = BTreeConfig { insert_percent, trees, ..cfg(400 * trees, leaf, inner, 5) };
                let cfg = crate::workload::WorkloadConfig { btree, ..Default::default() };
                let rejected =
                    crate::workload::follow::check::agrees(crate::workload::WorkloadKind::BTree, &cfg, 400, seed);
                assert!(rejected > 50, "the damage must matter: {rejected} of 400 damaged states rejected");
            }
        }
    }
}
