//! RBTree: insert and delete nodes of a persistent red-black tree (Table II of the LOC papers,
//! "insert/delete nodes in a red-black tree", from the NV-Heaps suite).
//!
//! # Persistent layout (little-endian)
//!
//! | bytes | content |
//! |---|---|
//! | `0..16` | [`Slab`] metadata of the node slab: `free_head` u64, `bump` u64 |
//! | `64..72` | root pointer: address of the root node, 0 = empty tree |
//! | `128..128 + 64 * key_space` | node slots of 64 bytes, one per key of the key space |
//!
//! With `trees = P > 1`, `P` such trees side by side (tree `t` at `t` times one tree's bytes,
//! rounded up to 64; its addresses relative to its start), each for a key space of
//! `key_space / P` (rounded up): key `k` is key `k / P` of tree `k % P` (docs/workloads.md,
//! "Locking on several cores").
//!
//! A node is one 64-byte slot, so one block: `key` u64 at +0, `left` u64 at +8, `right` u64
//! at +16, `parent` u64 at +24 (addresses, 0 = none), `colour` u64 at +32 (0 = black, 1 = red),
//! value 24 bytes at +40. A free slot holds the slab's free-list link at +0. The slab has a slot
//! for every key, so an insert never finds it full.
//!
//! # Operations
//!
//! The tree is sentinel-free: a null child is address 0 and counts as black. Insert and delete
//! are those of CLRS (3rd edition, chapter 13), every load and store through [`Pm`]. Without a
//! sentinel, the delete fix-up carries the parent of the doubly-black position `x` explicitly
//! (CLRS stores it in the sentinel's parent field). An insert of a key already present
//! overwrites its value (24 bytes, one store). The final "colour the root (or `x`) black" of
//! both fix-ups stores only when the node is red, as production implementations do; an
//! unconditional store would add the root's block to nearly every transaction's write set.
//!
//! Each operation draws, in this order: insert with probability `insert_percent`%, else delete;
//! the key uniformly from `0..key_space`; for an insert, a 64-bit seed from which the 24 value
//! bytes are expanded. A delete of an absent key only searches. Populate inserts exactly
//! `insert_percent`% of the key space (a seeded random choice, in random order), the steady
//! state of this process. At the defaults (2^19 keys, 50%) that is 262144 nodes = 16 MiB of
//! live structure, 16 times the 1 MiB LLC.
//!
//! The driver keeps no state between transactions (the operations depend only on the random
//! stream), so an aborted transaction cannot leave it inconsistent.
//!
//! # P-Set and transaction size
//!
//! Per operation: an update writes one block; a new key writes its node, its parent, the
//! allocator's block and the nodes its fix-up recolours or rotates; a delete of a present key
//! writes the spliced nodes' neighbours, the freed slot and the fix-up's nodes; a delete of an
//! absent key writes nothing. The P-Set drifts down over the first ~60000 transactions and then
//! holds: populate builds the tree by inserts alone, and the mixed insert/delete steady state
//! needs fewer fix-up writes per operation (presumably a different share of red nodes; not
//! measured). In steady state the model measures about 2.0 blocks per operation, so
//! `ops_per_tx = 16` gives 32.46 blocks per transaction after 150000 warm-up transactions and
//! 32.76 after `locsim run`'s default 20000 (`locsim run --workload rbtree --protocol baseline
//! --txs 5000 --warmup-txs 20000`; 34.45 after only 200 warm-up transactions). 15 would give
//! 30.52 and 17 gives 34.24 in steady state; 16 is the nearest to Table II's 33.26. The
//! paper's value is an input here; nothing else is tuned toward it.
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
//! | `compute_cycles_per_insert` | op-kind draw and its compare-and-branch (12); key draw (11); value-seed draw (11); three value words, one add each (3); allocator: free list empty? and the new slot's address (2); empty tree? (1); left or right of the parent? (1) | 41 |
//! | `compute_cycles_per_delete` | op-kind draw and its compare-and-branch (12); key draw (11); found? (1); no left child? no right child? (2); successor is `z`'s child? (1); removed colour black? (1); two transplants: parent null? or which side? and child null? (2 x 2 = 4) | 32 |
//! | `compute_cycles_per_level` | per node visited by a search or a minimum: key equal? (1); less than? selecting the child (1); null? (1) | 3 |
//! | `compute_cycles_per_fixup_step` | per fix-up loop iteration: which side? (1); two colour tests (2); loop condition (1); the rotation's inner child null? and parent's side (2) | 6 |
//!
//! # Verifier ([`RbTree::verify`])
//!
//! An iterative walk from the root (no recursion, so a garbage image cannot overflow the
//! stack) checks: every pointer is 0 or the first byte of a handed-out slab slot; no node is
//! reached twice (no cycle, no shared subtree); every node's parent pointer names the node whose
//! child pointer led to it (the root's is 0); keys are below `key_space` and in BST order (each
//! within the open interval its ancestors allow, so no key twice); colours are 0 or 1; the root
//! is black; no red node has a red child; every root-to-null path has the same number of black
//! nodes; the reachable node count equals the slab's slots in use, and no free slot is
//! reachable. It does not check values (the crash checker's prefix comparison covers them).

use super::follow::{Follow, FreeList, Subtrees};
use super::kv::{self, rd, KvStore};
use super::slab::Slab;
use super::{Partitions, Pm};
use crate::types::{Addr, BlockData};

/// Bytes of one node (one slab slot, one block).
pub const NODE_BYTES: u64 = 64;
/// Bytes of a node's value.
pub const VALUE_BYTES: usize = 24;
/// Address of the root pointer.
const ROOT: Addr = Addr(64);
/// Address of the first node slot.
const NODES_AT: u64 = 128;
/// Offsets inside a node.
const KEY: u64 = 0;
const LEFT: u64 = 8;
const RIGHT: u64 = 16;
const PARENT: u64 = 24;
const COLOUR: u64 = 32;
const VALUE: u64 = 40;
const BLACK: u64 = 0;
const RED: u64 = 1;
/// Seed of the populate phase's key choice and order (a constant: populate is deterministic).
const POPULATE_SEED: u64 = 0x5242_5452;

/// Parameters of the red-black tree workload (`--set workload.rbtree.<key>=v`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RbTreeConfig {
    /// Keys are drawn from `0..key_space` (uniformly unless `keys` says otherwise) (keys; also the node slab's capacity).
    pub key_space: u64,
    /// Operations (inserts and deletes) per transaction.
    pub ops_per_tx: u64,
    /// Percent of operations that are inserts (the rest are deletes); populate fills this
    /// percent of the key space.
    pub insert_percent: u64,
    /// Non-memory instructions of one insert, outside the search and the fix-up.
    pub compute_cycles_per_insert: u64,
    /// Non-memory instructions of one delete, outside the searches and the fix-up.
    pub compute_cycles_per_delete: u64,
    /// Non-memory instructions per node visited by a search or a minimum.
    pub compute_cycles_per_level: u64,
    /// Non-memory instructions per iteration of an insert or delete fix-up loop.
    pub compute_cycles_per_fixup_step: u64,
    /// Which keys the operations pick (uniform, zipfian, latest: `workload::keys`).
    pub keys: super::keys::KeysConfig,
    /// Trees the key space is partitioned into (1..=16): key `k` lives in tree `k % trees`,
    /// each tree with its own root, node slab and lock (docs/workloads.md, "Locking on several
    /// cores"). 1 is the single-tree layout.
    #[serde(default = "super::one")]
    pub trees: u64,
}

impl Default for RbTreeConfig {
    fn default() -> Self {
        RbTreeConfig {
            key_space: 1 << 19,
            ops_per_tx: 16,
            insert_percent: 50,
            compute_cycles_per_insert: 41,
            compute_cycles_per_delete: 32,
            compute_cycles_per_level: 3,
            compute_cycles_per_fixup_step: 6,
            keys: Default::default(),
            trees: 1,
        }
    }
}

impl RbTreeConfig {
    /// Range checks; the error names the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        self.keys.validate("rbtree")?;
        let err = |k: &str, v: u64, allowed: &str| Err(format!("workload.rbtree.{k} = {v}: allowed {allowed}"));
        if !(16..=(1 << 28)).contains(&self.key_space) {
            return err("key_space", self.key_space, "16..=268435456");
        }
        if !(1..=4096).contains(&self.ops_per_tx) {
            return err("ops_per_tx", self.ops_per_tx, "1..=4096");
        }
        if self.insert_percent > 100 {
            return err("insert_percent", self.insert_percent, "0..=100");
        }
        if !(1..=16).contains(&self.trees) {
            return err("trees", self.trees, "1..=16");
        }
        for (k, v) in [
            ("compute_cycles_per_insert", self.compute_cycles_per_insert),
            ("compute_cycles_per_delete", self.compute_cycles_per_delete),
            ("compute_cycles_per_level", self.compute_cycles_per_level),
            ("compute_cycles_per_fixup_step", self.compute_cycles_per_fixup_step),
        ] {
            if v > 1_000_000 {
                return err(k, v, "0..=1000000");
            }
        }
        Ok(())
    }
}

/// The other child side (`LEFT` <-> `RIGHT`).
fn other(side: u64) -> u64 {
    LEFT + RIGHT - side
}

fn get<P: Pm>(pm: &mut P, node: u64, field: u64) -> u64 {
    pm.load_u64(Addr(node + field))
}

fn set<P: Pm>(pm: &mut P, node: u64, field: u64, v: u64) {
    pm.store_u64(Addr(node + field), v)
}

/// Null counts as black.
fn is_red<P: Pm>(pm: &mut P, node: u64) -> bool {
    node != 0 && get(pm, node, COLOUR) == RED
}

/// The red-black tree workload: configuration and the slab geometry (no volatile copy of the
/// tree).
#[derive(Clone)]
pub struct RbTree {
    /// One tree's configuration (`key_space`: the keys one tree holds at most).
    cfg: RbTreeConfig,
    slab: Slab,
    /// Keys drawn from the whole key space.
    keys: super::keys::Keys,
    key_space: u64,
    /// The trees side by side (one: the single-tree layout).
    parts: Partitions,
}

impl KvStore for RbTree {
    const POPULATE_SEED: u64 = POPULATE_SEED;
    fn shape(&self) -> (u64, u64, u64) {
        (self.cfg.ops_per_tx, self.cfg.insert_percent, self.key_space)
    }
    fn keys(&self) -> &super::keys::Keys {
        &self.keys
    }
    /// Bytes of data area: per tree, header, root pointer, node slab.
    fn data_bytes(&self) -> u64 {
        self.parts.bytes()
    }
    fn insert<P: Pm>(&self, pm: &mut P, key: u64, seed: u64) {
        if self.parts.n == 1 {
            return RbTree::insert(self, pm, key, seed);
        }
        let (t, k) = self.parts.route(key);
        RbTree::insert(self, &mut self.parts.at(pm, t), k, seed)
    }
    fn delete<P: Pm>(&self, pm: &mut P, key: u64) {
        if self.parts.n == 1 {
            return RbTree::delete(self, pm, key);
        }
        let (t, k) = self.parts.route(key);
        RbTree::delete(self, &mut self.parts.at(pm, t), k)
    }
    fn partitions(&self) -> u64 {
        self.parts.n
    }
    /// One lock per tree: the first line of each tree its operations' keys live in.
    fn locks(&self, ops: &[super::kv::Op], ids: &mut Vec<u64>) {
        ids.extend(ops.iter().map(|op| {
            let key = match *op {
                super::kv::Op::Insert { key, .. } | super::kv::Op::Delete { key } => key,
            };
            self.parts.route(key).0 * self.parts.stride / 64 + super::STRUCTURE_LOCK
        }));
    }
}

impl RbTree {
    pub fn new(cfg: &RbTreeConfig) -> Self {
        let one = RbTreeConfig { key_space: Partitions::keys_per(cfg.trees, cfg.key_space), trees: 1, ..cfg.clone() };
        let slab = Slab::new(Addr(0), Addr(NODES_AT), NODE_BYTES, one.key_space);
        let parts = Partitions::new(cfg.trees, slab.base.0 + slab.bytes());
        RbTree {
            cfg: one,
            slab,
            keys: super::keys::Keys::new(&cfg.keys, cfg.key_space),
            key_space: cfg.key_space,
            parts,
        }
    }

    /// Bytes of one tree.
    fn tree_bytes(&self) -> u64 {
        self.slab.base.0 + self.slab.bytes()
    }

    /// The trees, side by side in the data area.
    pub fn partitions(&self) -> Partitions {
        self.parts
    }

    /// Descend from the root toward `key`: `(node holding key or 0, last node visited or 0,
    /// the side of it the descent took last)`.
    fn search<P: Pm>(&self, pm: &mut P, key: u64) -> (u64, u64, u64) {
        let (mut cur, mut parent, mut side) = (pm.load_u64(ROOT), 0, LEFT);
        while cur != 0 {
            pm.compute(self.cfg.compute_cycles_per_level);
            let k = get(pm, cur, KEY);
            if k == key {
                break;
            }
            parent = cur;
            side = if key < k { LEFT } else { RIGHT };
            cur = get(pm, cur, side);
        }
        (cur, parent, side)
    }

    fn insert<P: Pm>(&self, pm: &mut P, key: u64, seed: u64) {
        pm.compute(self.cfg.compute_cycles_per_insert);
        let (found, parent, side) = self.search(pm, key);
        if found != 0 {
            pm.store(Addr(found + VALUE), &kv::value_bytes::<VALUE_BYTES>(seed));
            return;
        }
        let z = self.slab.alloc(pm).expect("the slab has a slot for every key").0;
        let mut bytes = [0u8; NODE_BYTES as usize];
        bytes[KEY as usize..][..8].copy_from_slice(&key.to_le_bytes());
        bytes[PARENT as usize..][..8].copy_from_slice(&parent.to_le_bytes());
        bytes[COLOUR as usize..][..8].copy_from_slice(&RED.to_le_bytes());
        bytes[VALUE as usize..].copy_from_slice(&kv::value_bytes::<VALUE_BYTES>(seed));
        pm.store(Addr(z), &bytes);
        if parent == 0 {
            pm.store_u64(ROOT, z);
        } else {
            set(pm, parent, side, z);
        }
        self.insert_fixup(pm, z);
    }

    /// CLRS RB-INSERT-FIXUP, both mirror cases through `side`.
    fn insert_fixup<P: Pm>(&self, pm: &mut P, mut z: u64) {
        loop {
            let mut p = get(pm, z, PARENT);
            if !is_red(pm, p) {
                break;
            }
            pm.compute(self.cfg.compute_cycles_per_fixup_step);
            let g = get(pm, p, PARENT);
            let side = if p == get(pm, g, LEFT) { LEFT } else { RIGHT };
            let uncle = get(pm, g, other(side));
            if is_red(pm, uncle) {
                set(pm, p, COLOUR, BLACK);
                set(pm, uncle, COLOUR, BLACK);
                set(pm, g, COLOUR, RED);
                z = g;
                continue;
            }
            if z == get(pm, p, other(side)) {
                z = p;
                self.rotate(pm, z, side);
                p = get(pm, z, PARENT);
            }
            set(pm, p, COLOUR, BLACK);
            set(pm, g, COLOUR, RED);
            self.rotate(pm, g, other(side));
        }
        let root = pm.load_u64(ROOT);
        if is_red(pm, root) {
            set(pm, root, COLOUR, BLACK);
        }
    }

    /// Rotate `x` down toward `side` (`LEFT`: CLRS LEFT-ROTATE); its other child rises.
    fn rotate<P: Pm>(&self, pm: &mut P, x: u64, side: u64) {
        let up = other(side);
        let y = get(pm, x, up);
        let inner = get(pm, y, side);
        set(pm, x, up, inner);
        if inner != 0 {
            set(pm, inner, PARENT, x);
        }
        let xp = get(pm, x, PARENT);
        set(pm, y, PARENT, xp);
        self.replace_child(pm, xp, x, y);
        set(pm, y, side, x);
        set(pm, x, PARENT, y);
    }

    /// Make `parent`'s pointer to `old` (or the root pointer, if `parent` is 0) point to `new`.
    fn replace_child<P: Pm>(&self, pm: &mut P, parent: u64, old: u64, new: u64) {
        if parent == 0 {
            pm.store_u64(ROOT, new);
        } else if get(pm, parent, LEFT) == old {
            set(pm, parent, LEFT, new);
        } else {
            set(pm, parent, RIGHT, new);
        }
    }

    /// CLRS RB-TRANSPLANT: `v` (possibly 0) takes `u`'s place under `u`'s parent `up`.
    fn transplant<P: Pm>(&self, pm: &mut P, u: u64, v: u64, up: u64) {
        self.replace_child(pm, up, u, v);
        if v != 0 {
            set(pm, v, PARENT, up);
        }
    }

    /// CLRS RB-DELETE; `x` and its parent `xp` are tracked without a sentinel.
    fn delete<P: Pm>(&self, pm: &mut P, key: u64) {
        pm.compute(self.cfg.compute_cycles_per_delete);
        let (z, _, _) = self.search(pm, key);
        if z == 0 {
            return;
        }
        let (zl, zr, zp) = (get(pm, z, LEFT), get(pm, z, RIGHT), get(pm, z, PARENT));
        let zc = get(pm, z, COLOUR);
        let mut removed_colour = zc;
        let (x, xp);
        if zl == 0 || zr == 0 {
            x = if zl == 0 { zr } else { zl };
            xp = zp;
            self.transplant(pm, z, x, zp);
        } else {
            let y = self.minimum(pm, zr);
            removed_colour = get(pm, y, COLOUR);
            x = get(pm, y, RIGHT);
            let yp = get(pm, y, PARENT);
            if yp == z {
                xp = y;
            } else {
                xp = yp;
                self.transplant(pm, y, x, yp);
                set(pm, y, RIGHT, zr);
                set(pm, zr, PARENT, y);
            }
            self.transplant(pm, z, y, zp);
            set(pm, y, LEFT, zl);
            set(pm, zl, PARENT, y);
            set(pm, y, COLOUR, zc);
        }
        if removed_colour == BLACK {
            self.delete_fixup(pm, x, xp);
        }
        self.slab.free(pm, Addr(z));
    }

    fn minimum<P: Pm>(&self, pm: &mut P, mut n: u64) -> u64 {
        loop {
            pm.compute(self.cfg.compute_cycles_per_level);
            let l = get(pm, n, LEFT);
            if l == 0 {
                return n;
            }
            n = l;
        }
    }

    /// CLRS RB-DELETE-FIXUP, both mirror cases through `side`; `xp` is `x`'s parent (`x` may
    /// be 0, the null leaf).
    fn delete_fixup<P: Pm>(&self, pm: &mut P, mut x: u64, mut xp: u64) {
        while x != pm.load_u64(ROOT) && !is_red(pm, x) {
            pm.compute(self.cfg.compute_cycles_per_fixup_step);
            let side = if x == get(pm, xp, LEFT) { LEFT } else { RIGHT };
            let mut w = get(pm, xp, other(side));
            debug_assert!(w != 0, "a doubly-black node has a sibling");
            if is_red(pm, w) {
                set(pm, w, COLOUR, BLACK);
                set(pm, xp, COLOUR, RED);
                self.rotate(pm, xp, side);
                w = get(pm, xp, other(side));
            }
            let (wn, wf) = (get(pm, w, side), get(pm, w, other(side)));
            if !is_red(pm, wn) && !is_red(pm, wf) {
                set(pm, w, COLOUR, RED);
                x = xp;
                xp = get(pm, x, PARENT);
                continue;
            }
            if !is_red(pm, wf) {
                set(pm, wn, COLOUR, BLACK);
                set(pm, w, COLOUR, RED);
                self.rotate(pm, w, other(side));
                w = get(pm, xp, other(side));
            }
            let pc = get(pm, xp, COLOUR);
            set(pm, w, COLOUR, pc);
            set(pm, xp, COLOUR, BLACK);
            let wf = get(pm, w, other(side));
            set(pm, wf, COLOUR, BLACK);
            self.rotate(pm, xp, side);
            x = pm.load_u64(ROOT);
            break;
        }
        if is_red(pm, x) {
            set(pm, x, COLOUR, BLACK);
        }
    }
}

impl RbTree {
    /// Structural check of a data area (see the module doc): each tree's; `Err` is one line.
    pub fn verify(&self, data: &[u8]) -> Result<(), String> {
        if self.parts.n == 1 {
            return self.verify_tree(data);
        }
        if (data.len() as u64) < self.parts.bytes() {
            return Err(format!("rbtree: data area of {} bytes, need {}", data.len(), self.parts.bytes()));
        }
        for t in 0..self.parts.n {
            self.verify_tree(self.parts.slice(data, t)).map_err(|e| format!("tree {t} of {}: {e}", self.parts.n))?;
        }
        Ok(())
    }

    /// Structural check of one tree.
    fn verify_tree(&self, data: &[u8]) -> Result<(), String> {
        if (data.len() as u64) < self.tree_bytes() {
            return Err(format!("rbtree: data area of {} bytes, need {}", data.len(), self.tree_bytes()));
        }
        let used = self.slab.used_in(data).map_err(|e| format!("rbtree: {e}"))?;
        let mut walk = Walk {
            bump: rd(data, self.slab.meta.0 + 8),
            seen: crate::hostmem::committed(self.cfg.key_space as usize),
            nodes: 0,
            black_height: None,
        };
        let root = rd(data, ROOT.0);
        let mut stack = Vec::new();
        walk.push(&mut stack, root, 0, (None, None), 0, false)?;
        if let Some(r) = stack.first().and_then(|f| self.node_at(data, f.node, walk.bump)) {
            if r.colour != BLACK {
                return Err(format!("rbtree: root {root:#x} is not black"));
            }
        }
        let mut batch: Vec<(Frame, Option<Node>)> = Vec::with_capacity(VERIFY_BATCH);
        while !stack.is_empty() {
            // Read a batch of independent nodes first, so their cache misses overlap.
            let from = stack.len().saturating_sub(VERIFY_BATCH);
            batch.extend(stack.drain(from..).map(|f| (f, self.node_at(data, f.node, walk.bump))));
            for (f, node) in batch.drain(..) {
                self.check_node(&f, node, &mut walk, &mut stack)?;
            }
        }
        if walk.nodes != used {
            return Err(format!("rbtree: {} nodes reachable from the root, slab has {used} in use", walk.nodes));
        }
        let mut at = rd(data, self.slab.meta.0);
        while at != 0 {
            if walk.seen[((at - NODES_AT) / NODE_BYTES) as usize] {
                return Err(format!("rbtree: free slot {at:#x} is reachable from the root"));
            }
            at = rd(data, at);
        }
        Ok(())
    }

    /// The fields of the node at `n`, if `n` is the first byte of a handed-out slot.
    fn node_at(&self, data: &[u8], n: u64, bump: u64) -> Option<Node> {
        let off = n.checked_sub(NODES_AT)?;
        if off % NODE_BYTES != 0 || off / NODE_BYTES >= bump.min(self.cfg.key_space) {
            return None;
        }
        Some(Node {
            key: rd(data, n + KEY),
            left: rd(data, n + LEFT),
            right: rd(data, n + RIGHT),
            parent: rd(data, n + PARENT),
            colour: rd(data, n + COLOUR),
        })
    }

    /// Check the node of one frame (`None`: not a node slot) and push its children.
    fn check_node(&self, f: &Frame, node: Option<Node>, walk: &mut Walk, stack: &mut Vec<Frame>) -> Result<(), String> {
        let n = f.node;
        let Some(node) = node else {
            return Err(format!("rbtree: child of {:#x} is {n:#x}, not a handed-out node slot", f.parent));
        };
        if std::mem::replace(&mut walk.seen[((n - NODES_AT) / NODE_BYTES) as usize], true) {
            return Err(format!("rbtree: node {n:#x} reached twice (a cycle or a shared subtree)"));
        }
        walk.nodes += 1;
        let (key, colour) = (node.key, node.colour);
        if node.parent != f.parent {
            return Err(format!(
                "rbtree: node {n:#x} has parent pointer {:#x}, but hangs under {:#x}",
                node.parent, f.parent
            ));
        }
        let in_order = f.lo.is_none_or(|lo| key > lo) && f.hi.is_none_or(|hi| key < hi);
        if key >= self.cfg.key_space || !in_order {
            return Err(format!("rbtree: node {n:#x} holds key {key}, out of order or outside the key space"));
        }
        if colour > RED || (colour == RED && f.parent_red) {
            return Err(format!(
                "rbtree: node {n:#x} has colour {colour} under a {} parent",
                if f.parent_red { "red" } else { "black" }
            ));
        }
        let blacks = f.blacks + (colour == BLACK) as u64;
        let red = colour == RED;
        walk.push(stack, node.left, n, (f.lo, Some(key)), blacks, red)?;
        walk.push(stack, node.right, n, (Some(key), f.hi), blacks, red)
    }
}

/// Nodes the verifier reads before checking any of them (their cache misses overlap).
const VERIFY_BATCH: usize = 16;

/// The fields of a node the verifier checks.
#[derive(Clone, Copy)]
struct Node {
    key: u64,
    left: u64,
    right: u64,
    parent: u64,
    colour: u64,
}

/// A node still to check in the verifier's walk, the node whose child pointer led to it, the
/// open key interval its ancestors allow, the black nodes above it, and whether its parent is
/// red.
#[derive(Clone, Copy)]
struct Frame {
    node: u64,
    parent: u64,
    lo: Option<u64>,
    hi: Option<u64>,
    blacks: u64,
    parent_red: bool,
}

/// The incremental form of [`RbTree::verify`] ([`Follow`]): a summary per node of the subtree
/// it heads (its own checks and its children's, size, smallest and largest key, black height,
/// colour), kept until a block of that subtree changes. A changed node marks itself and the
/// nodes above it (as last evaluated) stale; an evaluation from the root recomputes only stale
/// summaries. The subtree checks are those of the whole verifier, phrased bottom-up: every
/// child's parent pointer names its parent, the left subtree's keys are below the node's and
/// the right's above, both children have one black height, a red node has no red child. A
/// node reached from two places fails a parent check (or, under one parent twice, the order),
/// and a cycle fails a parent check, so "reached twice" needs no check of its own; depth is
/// bounded by 128 (no red-black tree is deeper: its height is at most 2 log2(n + 1)).
pub struct RbFollow {
    tree: RbTree,
    bump: u64,
    free: FreeList,
    /// Per node slot: its subtree's summary and the parent that last read it; the nodes whose
    /// evaluation met a child beyond the bump.
    subtrees: Subtrees<Sum>,
    /// This evaluation met the depth bound.
    deep: bool,
}

/// A subtree's summary (see [`RbFollow`]).
#[derive(Clone, Copy)]
struct Sum {
    ok: bool,
    size: u64,
    min: u64,
    max: u64,
    black_height: u32,
    red: bool,
}

const MAX_HEIGHT: u32 = 128;

impl RbTree {
    /// The incremental verifier of one tree.
    pub fn follower(&self) -> RbFollow {
        let n = self.cfg.key_space as usize;
        RbFollow {
            tree: RbTree::new(&self.cfg),
            bump: 0,
            free: FreeList::new(&self.slab),
            subtrees: Subtrees::new(n, MAX_HEIGHT as usize),
            deep: false,
        }
    }
}

impl RbFollow {
    fn slot(n: u64) -> usize {
        ((n - NODES_AT) / NODE_BYTES) as usize
    }

    /// The summary of the subtree at `n` (a handed-out node, adopted by its parent).
    /// Invariant: every node inside a kept summary, and every node whose parent pointer it
    /// read, has its `up` leading inside that subtree to the summary's node; so marking from a
    /// changed node upwards reaches every summary that read it.
    fn eval(&mut self, data: &[u8], n: u64, depth: u32) -> Sum {
        let slot = Self::slot(n);
        if let Some(sum) = self.subtrees.sum(slot) {
            return sum;
        }
        let fail = Sum { ok: false, size: 0, min: 0, max: 0, black_height: 0, red: false };
        let node = self.tree.node_at(data, n, u64::MAX).expect("a handed-out node");
        let mut ok = node.key < self.tree.cfg.key_space && node.colour <= RED && !self.free.on[slot];
        let red = node.colour == RED;
        // Both children's loads start before the left subtree is walked (the right child's
        // then overlap it). No effect on results.
        for child in [node.left, node.right] {
            if child >= NODES_AT && child < self.tree.tree_bytes() {
                crate::hostmem::prefetch(&data[child as usize]);
                self.subtrees.prefetch(Self::slot(child));
                if let Some(on) = self.free.on.get(Self::slot(child)) {
                    crate::hostmem::prefetch(on);
                }
            }
        }
        let mut kids = [None; 2];
        for (i, child) in [node.left, node.right].into_iter().enumerate() {
            if child == 0 || !ok {
                continue;
            }
            if self.tree.node_at(data, child, self.bump).is_none() {
                if self.tree.node_at(data, child, u64::MAX).is_some() {
                    self.subtrees.beyond_bump(slot);
                }
                ok = false;
                continue;
            }
            self.subtrees.adopt(Self::slot(child), slot as u32 + 1);
            if rd(data, child + PARENT) != n {
                ok = false;
                continue;
            }
            if depth >= MAX_HEIGHT {
                (self.deep, ok) = (true, false);
                continue;
            }
            let sum = self.eval(data, child, depth + 1);
            ok &= sum.ok && !(red && sum.red);
            kids[i] = Some(sum);
        }
        let bh = |k: Option<Sum>| k.map_or(0, |s| s.black_height);
        let (l, r) = (kids[0], kids[1]);
        ok &= l.is_none_or(|l| l.max < node.key) && r.is_none_or(|r| node.key < r.min) && bh(l) == bh(r);
        let sum = if ok {
            Sum {
                ok,
                size: 1 + l.map_or(0, |s| s.size) + r.map_or(0, |s| s.size),
                min: l.map_or(node.key, |s| s.min),
                max: r.map_or(node.key, |s| s.max),
                black_height: bh(l) + u32::from(!red),
                red,
            }
        } else {
            fail
        };
        self.subtrees.keep(slot, sum);
        sum
    }

    fn sound(&mut self, data: &[u8]) -> bool {
        if !self.free.ok {
            return false;
        }
        let root = rd(data, ROOT.0);
        if root == 0 {
            return self.bump == self.free.len;
        }
        if self.tree.node_at(data, root, self.bump).is_none() {
            return false;
        }
        self.subtrees.adopt(Self::slot(root), 0);
        if rd(data, root + PARENT) != 0 {
            return false;
        }
        let sum = self.eval(data, root, 0);
        if std::mem::take(&mut self.deep) {
            // A summary cut at the depth bound depends on its depth: keep none of this pass.
            self.subtrees.forget_sums();
            return false;
        }
        sum.ok && !sum.red && sum.size == self.bump - self.free.len
    }

    fn walk_free(&mut self, data: &[u8], old: Option<&[(usize, BlockData)]>) {
        let mut flipped = Vec::new();
        self.free.update(data, &self.tree.slab, self.bump, old, |slot, _| flipped.push(slot));
        for slot in flipped {
            self.subtrees.stale(slot);
        }
    }
}

impl Follow for RbFollow {
    fn reset(&mut self, data: &[u8]) -> bool {
        *self = self.tree.follower();
        if (data.len() as u64) < self.tree.tree_bytes() {
            return false;
        }
        self.bump = rd(data, self.tree.slab.meta.0 + 8);
        self.walk_free(data, None);
        self.sound(data)
    }

    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool {
        for &(b, _) in old {
            let at = b as u64 * 64;
            if at == self.tree.slab.meta.0 {
                let bump = rd(data, self.tree.slab.meta.0 + 8);
                if bump < self.bump {
                    return self.reset(data);
                }
                if bump > self.bump {
                    self.bump = bump;
                    self.subtrees.bump_grew();
                }
            } else if at >= NODES_AT && at < self.tree.tree_bytes() {
                self.subtrees.stale(Self::slot(at));
            }
        }
        self.walk_free(data, Some(old));
        self.sound(data)
    }
}

/// What the verifier's walk has reached so far.
struct Walk {
    bump: u64,
    seen: Vec<bool>,
    nodes: u64,
    black_height: Option<u64>,
}

impl Walk {
    /// A child pointer of `parent`: a null leaf closes a path (its black count must match every
    /// other path's); a node is pushed for checking.
    fn push(
        &mut self,
        stack: &mut Vec<Frame>,
        node: u64,
        parent: u64,
        (lo, hi): (Option<u64>, Option<u64>),
        blacks: u64,
        parent_red: bool,
    ) -> Result<(), String> {
        if node != 0 {
            stack.push(Frame { node, parent, lo, hi, blacks, parent_red });
            return Ok(());
        }
        let bh = *self.black_height.get_or_insert(blacks);
        if bh != blacks {
            return Err(format!("rbtree: a path below {parent:#x} has {blacks} black nodes, another {bh}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::workload::native::Native;
    use std::collections::BTreeMap;

    fn small() -> RbTreeConfig {
        RbTreeConfig { key_space: 512, ops_per_tx: 6, ..RbTreeConfig::default() }
    }

    /// The (key, value) pairs of an in-order walk (valid trees only).
    fn in_order(data: &[u8]) -> Vec<(u64, [u8; VALUE_BYTES])> {
        let (mut out, mut stack, mut cur) = (Vec::new(), Vec::new(), rd(data, ROOT.0));
        while cur != 0 || !stack.is_empty() {
            while cur != 0 {
                stack.push(cur);
                cur = rd(data, cur + LEFT);
            }
            let n = stack.pop().unwrap();
            let v = (n + VALUE) as usize;
            out.push((rd(data, n), data[v..v + VALUE_BYTES].try_into().unwrap()));
            cur = rd(data, n + RIGHT);
        }
        out
    }

    fn expanded(model: &BTreeMap<u64, u64>) -> Vec<(u64, [u8; VALUE_BYTES])> {
        model.iter().map(|(&k, &s)| (k, kv::value_bytes::<VALUE_BYTES>(s))).collect()
    }

    /// Populate a small tree, then run `txs` seeded transactions (about 20% aborted), calling
    /// `each(tx, workload, memory, model)` after every one (tx = u64::MAX: after populate).
    fn run_sequence(seed: u64, txs: u64, mut each: impl FnMut(u64, &RbTree, &[u8], &BTreeMap<u64, u64>)) {
        let w = RbTree::new(&small());
        kv::run_model_sequence(&w, seed, txs, |tx, mem, model| each(tx, &w, mem, model));
    }

    #[test]
    fn random_inserts_and_deletes_match_a_btreemap_after_every_transaction_and_aborts_leave_no_trace() {
        for seed in [1, 2, 3] {
            run_sequence(seed, 1500, |tx, _, mem, model| {
                assert_eq!(in_order(mem), expanded(model), "seed {seed}, after tx {tx}");
            });
        }
    }

    #[test]
    fn verifier_passes_on_every_state_of_the_random_sequence() {
        for seed in [4, 5, 6] {
            run_sequence(seed, 1500, |tx, w, mem, _| {
                if let Err(e) = w.verify(mem) {
                    panic!("seed {seed}, after tx {tx}: {e}");
                }
            });
        }
    }

    #[test]
    fn a_tree_emptied_and_refilled_stays_valid() {
        let cfg = RbTreeConfig { key_space: 64, insert_percent: 0, ..small() };
        let w = RbTree::new(&cfg);
        let mut pm = Native::new(vec![0u8; w.data_bytes() as usize]);
        let mut rng = Rng::new(11);
        let mut order: Vec<u64> = (0..64).collect();
        for round in 0..4 {
            for i in (1..64).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            pm.begin();
            for &k in &order {
                if round % 2 == 0 {
                    w.insert(&mut pm, k, k);
                } else {
                    w.delete(&mut pm, k);
                }
                w.verify(&pm.mem).unwrap_or_else(|e| panic!("round {round}, key {k}: {e}"));
            }
            pm.commit();
            let want = if round % 2 == 0 { 64 } else { 0 };
            assert_eq!(in_order(&pm.mem).len(), want, "round {round}");
        }
    }

    /// A populated small tree (verified) and its nodes in order.
    fn populated() -> (RbTree, Vec<u8>, Vec<u64>) {
        let mut w = RbTree::new(&small());
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        w.verify(&mem).unwrap();
        let mut nodes: Vec<u64> = (0..256).map(|i| NODES_AT + i * NODE_BYTES).collect();
        nodes.sort_by_key(|&n| rd(&mem, n));
        (w, mem, nodes)
    }

    fn put(mem: &mut [u8], a: u64, v: u64) {
        mem[a as usize..a as usize + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn verifier_rejects_a_red_node_with_a_red_child() {
        let (w, mut mem, nodes) = populated();
        let child = nodes
            .iter()
            .copied()
            .find(|&n| {
                rd(&mem, n + COLOUR) == BLACK && {
                    let p = rd(&mem, n + PARENT);
                    p != 0 && rd(&mem, p + COLOUR) == RED
                }
            })
            .expect("a black child of a red node");
        put(&mut mem, child + COLOUR, RED);
        let e = w.verify(&mem).unwrap_err();
        assert!(e.contains("under a red parent") || e.contains("black nodes"), "{e}");
    }

    #[test]
    fn verifier_rejects_unequal_black_heights() {
        let (w, mut mem, nodes) = populated();
        let leaf = nodes
            .iter()
            .copied()
            .find(|&n| {
                let p = rd(&mem, n + PARENT);
                rd(&mem, n + LEFT) == 0
                    && rd(&mem, n + RIGHT) == 0
                    && rd(&mem, n + COLOUR) == BLACK
                    && p != 0
                    && rd(&mem, p + COLOUR) == BLACK
            })
            .expect("a black leaf under a black parent");
        put(&mut mem, leaf + COLOUR, RED);
        assert!(w.verify(&mem).unwrap_err().contains("black nodes"));
    }

    #[test]
    fn verifier_rejects_keys_out_of_order() {
        let (w, mut mem, nodes) = populated();
        let (a, b) = (nodes[10], nodes[200]);
        let (ka, kb) = (rd(&mem, a), rd(&mem, b));
        put(&mut mem, a, kb);
        put(&mut mem, b, ka);
        assert!(w.verify(&mem).unwrap_err().contains("out of order"));
    }

    #[test]
    fn verifier_rejects_a_parent_pointer_that_disagrees_with_the_child_pointer() {
        let (w, mut mem, nodes) = populated();
        let n = nodes[77];
        let p = rd(&mem, n + PARENT);
        put(&mut mem, n + PARENT, if p == nodes[3] { nodes[4] } else { nodes[3] });
        assert!(w.verify(&mem).unwrap_err().contains("parent pointer"));
    }

    #[test]
    fn verifier_rejects_a_child_pointer_back_to_the_root() {
        let (w, mut mem, _) = populated();
        let mut n = rd(&mem, ROOT.0);
        while rd(&mem, n + LEFT) != 0 {
            n = rd(&mem, n + LEFT);
        }
        let root = rd(&mem, ROOT.0);
        put(&mut mem, n + LEFT, root);
        assert!(w.verify(&mem).unwrap_err().contains("reached twice"));
    }

    #[test]
    fn verifier_rejects_a_node_unlinked_but_not_freed_and_a_link_outside_the_slab() {
        let (w, mut mem, nodes) = populated();
        let leaf = nodes.iter().copied().find(|&n| rd(&mem, n + LEFT) == 0 && rd(&mem, n + RIGHT) == 0).unwrap();
        let p = rd(&mem, leaf + PARENT);
        let side = if rd(&mem, p + LEFT) == leaf { LEFT } else { RIGHT };
        let mut cut = mem.clone();
        put(&mut cut, p + side, 0);
        assert!(w.verify(&cut).is_err());
        put(&mut mem, leaf + LEFT, 72);
        assert!(w.verify(&mem).unwrap_err().contains("not a handed-out"));
    }

    #[test]
    fn verifier_returns_an_error_on_garbage_and_on_a_short_area() {
        let w = RbTree::new(&small());
        let mut mem = vec![0u8; w.data_bytes() as usize];
        let mut rng = Rng::new(9);
        for b in mem.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        assert!(w.verify(&mem).is_err());
        mem[..16].fill(0);
        put(&mut mem, 8, 512);
        put(&mut mem, ROOT.0, NODES_AT);
        assert!(w.verify(&mem).is_err());
        assert!(w.verify(&mem[..100]).is_err());
    }

    #[test]
    fn default_populate_builds_at_least_8_mib_of_live_structure() {
        let cfg = RbTreeConfig::default();
        cfg.validate().unwrap();
        let mut w = RbTree::new(&cfg);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        w.verify(&mem).unwrap();
        let nodes = w.slab.used_in(&mem).unwrap();
        assert_eq!(nodes, cfg.key_space / 2);
        assert!(nodes * NODE_BYTES >= 8 << 20);
    }

    #[test]
    fn validate_names_the_key_and_the_allowed_range() {
        let cfg = RbTreeConfig { ops_per_tx: 0, ..RbTreeConfig::default() };
        assert_eq!(cfg.validate().unwrap_err(), "workload.rbtree.ops_per_tx = 0: allowed 1..=4096");
    }

    #[test]
    fn the_follower_agrees_with_the_verifier_on_a_run_and_on_damage() {
        for (insert_percent, seed) in [(50, 3), (90, 4), (10, 5)] {
            // One tree, and three partitioned trees (one follower per tree).
            for trees in [1, 3] {
                let rbtree = RbTreeConfig { insert_percent, trees, ..small() };
                let cfg = crate::workload::WorkloadConfig { rbtree, ..Default::default() };
                let rejected =
                    crate::workload::follow::check::agrees(crate::workload::WorkloadKind::RbTree, &cfg, 400, seed);
                assert!(rejected > 50, "the damage must matter: {rejected} of 400 damaged states rejected");
            }
        }
    }
}
