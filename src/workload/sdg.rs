//! SDG: insert and delete edges of a large undirected graph stored as adjacency lists (Table II
//! of the LOC papers, "insert/delete edges in a large graph", after the Boost Graph Library's
//! `adjacency_list`, reference \[4\]).
//!
//! # Persistent layout (data area, little-endian)
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 8 | magic, the bytes `LOCSDG01` |
//! | 8 | 8 | vertex count `V` |
//! | 16 | 8 | edge count `E` (undirected edges) |
//! | 24 | 16 | metadata of the chunk slab (`free_head`, `bump`; see `slab.rs`) |
//! | 40 | 24 | zero |
//! | 64 | 16 V | vertex table; vertex `v` at `64 + 16 v`: `head` u64 (address of the first chunk of its adjacency list, 0 = empty), `degree` u64 |
//! | `B` | 64 C | chunk slab: `C` chunks of 64 bytes, `B` = `64 + 16 V` rounded up to 64 |
//! | then, with `allocators = A > 1` | | regions 1..A of `C` chunks each, then allocators 1..A's lines of 64 bytes: slab metadata (`free_head`, `bump`) at +0, the allocator's edge count at +16 |
//!
//! With `A > 1` (on several cores: docs/workloads.md, "Locking on several cores") allocator `a`
//! hands out the chunks of region `a` and keeps its own edge count (allocator 0's are the
//! header's); a freed chunk goes on the free list of the allocator that frees it, whatever its
//! region, and the graph's edge count is the wrapping sum of the allocators' counts. With
//! `A = 1` (the default) the layout is the one above.
//!
//! An adjacency chunk is one 64-byte block: `next` u64 at 0 (address of the next chunk, 0 =
//! last), `count` u32 at 8 (ids held, 1..=13), then 13 neighbour ids u32 at `12 + 4 i`.
//! A chunk on the slab's free list holds the free-list link in its first 8 bytes instead.
//!
//! Every list is an unrolled linked list in which every chunk but the first is full. An insert
//! of `w` into `adj(v)` appends to the first chunk, or pushes a new chunk in front of the list
//! when the first chunk is full. A delete overwrites `w`'s slot with the last id of the first
//! chunk and shrinks the first chunk, freeing it when it empties. A list of degree `d` therefore
//! has `ceil(d / 13)` chunks. The graph is undirected: edge `{u, v}` is `v` in `adj(u)` and `u`
//! in `adj(v)`; an insert or a delete changes both lists, both degrees and the edge count in
//! one transaction.
//!
//! Capacity: `C = V + ceil(2 max_edges / 13)`. A graph of `E` edges uses
//! `sum_v ceil(d_v / 13) <= V + 2E / 13` chunks, and the driver never inserts past `max_edges`,
//! so an allocation never fails.
//!
//! # Transactions
//!
//! `ops_per_tx` edge operations; each is an insert with probability `insert_percent` %, except
//! that an empty graph always inserts and a graph of `max_edges` edges always deletes.
//! With several allocators a transaction draws its operations first (an insert its two
//! distinct endpoints, a delete its edge), locks their vertex-table lines and its allocator's
//! line on several cores, then runs them; an insert whose edge is there already changes
//! nothing (`Sdg::run_planned`).
//! - **Insert**: draw `u`, `v` uniformly until `u != v` and the edge is absent. Absence is
//!   checked by scanning the shorter of the two adjacency lists through [`Pm`] loads.
//! - **Delete**: draw an edge uniformly from the driver's volatile list of live edges, find each
//!   endpoint in the other's list (a scan) and remove it.
//!
//! The volatile edge list is driver state only (it chooses deletions); every change to it in a
//! transaction is journalled and undone when the transaction aborts, so it always lists exactly
//! the edges of the persistent graph between transactions.
//!
//! # Verifier
//!
//! [`Sdg::verify`] checks a data area: the header (magic, `V`); every list pointer is a
//! handed-out chunk of the slab and no chunk is reached twice (no cycle, no shared chunk); each
//! chunk's count is in 1..=13 and every chunk but the first is full; neighbour ids are below
//! `V`, no self-loops, no neighbour twice in one list; `degree` equals the list length and
//! `head` is 0 exactly when the degree is 0; adjacency is symmetric (`v` in `adj(u)` iff `u` in
//! `adj(v)`); the edge count (summed over the allocators) equals the number of edges; the
//! slabs' free lists are well formed and disjoint (a list may hold chunks of any region),
//! disjoint from the reachable chunks, and the two together are all handed-out chunks (no
//! leak). It does not check the bytes of free chunks, the unused
//! id slots of a chunk, or the 24 zero bytes of the header.
//!
//! # Compute constants
//!
//! Non-memory instructions, one cycle each, counted from the code below as a simple in-order
//! core would run it (loads and stores of the data area are simulated accesses and not counted;
//! a xoshiro256** draw is 11 instructions, as counted for SPS in docs/workloads.md):
//!
//! | work | insert | delete |
//! |---|---|---|
//! | choose the operation: one draw, two bound checks, one compare | 14 | 14 |
//! | loop control | 2 | 2 |
//! | draw `u`, `v` (two draws) / draw an edge index (one draw) | 22 | 11 |
//! | self-loop test / read the edge from the volatile list (load, unpack) | 1 | 3 |
//! | two vertex-table addresses (shift, add) | 4 | 4 |
//! | pick the shorter list (compare, two conditional moves) / two scan set-ups and exits | 3 | 4 |
//! | scan set-up and exit test | 2 | |
//! | per endpoint: append (empty and full tests, slot address, count + 1, degree + 1) | 10 | |
//! | per endpoint: remove (slot and last-slot addresses, compare, empty test, degree - 1) | | 16 |
//! | edge count +/- 1 | 1 | 1 |
//! | volatile list: normalise and push / swap-remove; journal entry | 9 | 6 |
//! | **total** | **68** | **61** |
//!
//! Scans: `compute_cycles_per_neighbour_compared = 3` (compare-and-branch, index increment,
//! loop bound compare-and-branch) and `compute_cycles_per_chunk_visited = 2` (index reset, the
//! `next == 0` test). An insert attempt rejected as a self-loop or an existing edge is charged
//! a whole insert again (it is rare: about `1/V + 2E/V^2` of attempts). The slab's own
//! allocation and free arithmetic (about 5 instructions, on about one append or remove in 13)
//! is not charged. The constants are counts of instructions, not tuned to any result.
//!
//! # Transaction size
//!
//! An insert dirties two vertex-table blocks and the two first chunks (a new chunk instead
//! when one is full); a delete dirties the same four blocks plus, when the removed id is not in
//! the first chunk, the chunk that held it; the header block (edge count, slab metadata) is
//! dirtied once per transaction. That is about 4.1 blocks per operation plus one, so
//! `ops_per_tx = 13` puts the P-Set near Table II's 52.85 blocks per transaction (measured:
//! 53.67 at the defaults, seed 1; 12 operations would give about 49.6).

use super::follow::{Follow, Lines, Rewalk, SlabLists};
use super::native::Native;
use super::slab::{Regions, Slab, META_BYTES};
use super::Pm;
use crate::rng::Rng;
use crate::types::{Addr, BlockData};

/// SDG parameters (`--set workload.sdg.<key>=v`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SdgConfig {
    /// Vertices of the graph (default 2^17; ids are u32).
    pub vertices: u64,
    /// Edges inserted by the populate phase (default 2^19: mean degree 8).
    pub initial_edges: u64,
    /// Most edges the graph may hold; sizes the chunk slab. At this count the driver deletes.
    pub max_edges: u64,
    /// Edge inserts and deletes per transaction.
    pub ops_per_tx: u64,
    /// Percentage of operations that are inserts (0..=100).
    pub insert_percent: u64,
    /// Non-memory instructions per insert attempt (see the module doc for the count).
    pub compute_cycles_per_insert: u64,
    /// Non-memory instructions per delete.
    pub compute_cycles_per_delete: u64,
    /// Non-memory instructions per neighbour id compared while scanning a list.
    pub compute_cycles_per_neighbour_compared: u64,
    /// Non-memory instructions per chunk visited while scanning a list.
    pub compute_cycles_per_chunk_visited: u64,
    /// Chunk allocators (1..=16), each with its own edge count, slab metadata line and slab
    /// region of `C` chunks; on several cores core `c` allocates, frees and counts through
    /// allocator `c % allocators`. With more than one, a transaction draws its operations'
    /// vertices first and locks their vertex-table lines and its allocator's line (so that
    /// transactions on different vertices run concurrently); 1 is the single-allocator layout
    /// and one lock over the graph.
    #[serde(default = "super::one")]
    pub allocators: u64,
}

impl Default for SdgConfig {
    fn default() -> Self {
        SdgConfig {
            vertices: 1 << 17,
            initial_edges: 1 << 19,
            max_edges: 1 << 20,
            ops_per_tx: 13,
            insert_percent: 50,
            compute_cycles_per_insert: 68,
            compute_cycles_per_delete: 61,
            compute_cycles_per_neighbour_compared: 3,
            compute_cycles_per_chunk_visited: 2,
            allocators: 1,
        }
    }
}

impl SdgConfig {
    /// Range checks; one-line errors naming the key, the value and the allowed range.
    pub fn validate(&self) -> Result<(), String> {
        let check = |key: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("workload.sdg.{key} = {v}: allowed {lo}..={hi}"))
            }
        };
        check("vertices", self.vertices, 4, 1 << 24)?;
        let most = (self.vertices * (self.vertices - 1) / 4).min(1 << 28);
        check("max_edges", self.max_edges, 1, most)?;
        check("initial_edges", self.initial_edges, 0, self.max_edges)?;
        check("ops_per_tx", self.ops_per_tx, 1, 4096)?;
        check("insert_percent", self.insert_percent, 0, 100)?;
        check("allocators", self.allocators, 1, 16)?;
        for (key, v) in [
            ("compute_cycles_per_insert", self.compute_cycles_per_insert),
            ("compute_cycles_per_delete", self.compute_cycles_per_delete),
            ("compute_cycles_per_neighbour_compared", self.compute_cycles_per_neighbour_compared),
            ("compute_cycles_per_chunk_visited", self.compute_cycles_per_chunk_visited),
        ] {
            check(key, v, 0, 1_000_000)?;
        }
        Ok(())
    }
}

const MAGIC: u64 = u64::from_le_bytes(*b"LOCSDG01");
const MAGIC_AT: u64 = 0;
const VERTICES_AT: u64 = 8;
const EDGES_AT: u64 = 16;
const SLAB_META_AT: u64 = 24;
const VERTEX_TABLE_AT: u64 = 64;
const VERTEX_BYTES: u64 = 16;
const HEAD: u64 = 0;
const DEGREE: u64 = 8;
const CHUNK_BYTES: u64 = 64;
const NEXT: u64 = 0;
const COUNT: u64 = 8;
const IDS: u64 = 12;
/// Neighbour ids per chunk.
const CHUNK_IDS: u64 = 13;
/// The populate phase draws from this fixed seed: the initial image depends only on the
/// configuration.
const POPULATE_SEED: u64 = 0x5D6;
/// Inserts per populate transaction (bounds the native back end's undo buffer).
const POPULATE_BATCH: u64 = 1024;

fn vertex_addr(v: u32) -> Addr {
    Addr(VERTEX_TABLE_AT + v as u64 * VERTEX_BYTES)
}

fn id_addr(chunk: u64, i: u64) -> Addr {
    Addr(chunk + IDS + 4 * i)
}

/// One edge operation of a transaction drawn before it runs (several allocators: its
/// vertices are known before the transaction takes its locks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Planned {
    /// Insert edge `{u, v}` (`u != v`) unless it is there already.
    Insert(u32, u32),
    /// Delete this live edge of the driver's list (already taken off the list).
    Delete((u32, u32)),
}

/// A change to the volatile edge list, journalled so that an abort can undo it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    /// The edge was pushed at the end.
    Inserted((u32, u32)),
    /// The edge was swap-removed from `index`.
    Deleted { index: usize, edge: (u32, u32) },
}

/// The SDG driver: configuration, slab geometry and volatile state for choosing operations.
#[derive(Clone)]
pub struct Sdg {
    cfg: SdgConfig,
    /// Allocator 0's slab (the single-allocator one).
    slab: Slab,
    /// The allocator this driver allocates, frees and counts edges through ([`Sdg::for_core`]).
    alloc: u64,
    /// The operations of the transaction in progress (several allocators).
    plan: Vec<Planned>,
    /// Live edges `(u, v)` with `u < v`, in an order fixed by the operation history.
    edges: Vec<(u32, u32)>,
    /// Changes to `edges` made by the current (or last) transaction.
    journal: Vec<Change>,
    /// The most edges `edges` may hold (`max_edges`; its share on one of several cores).
    cap: u64,
}

impl Sdg {
    /// Build the driver. Panics on a configuration that [`SdgConfig::validate`] rejects.
    pub fn new(cfg: &SdgConfig) -> Self {
        if let Err(e) = cfg.validate() {
            panic!("{e}");
        }
        let base = (VERTEX_TABLE_AT + cfg.vertices * VERTEX_BYTES).next_multiple_of(CHUNK_BYTES);
        let capacity = cfg.vertices + (2 * cfg.max_edges).div_ceil(CHUNK_IDS);
        Sdg {
            cfg: cfg.clone(),
            slab: Slab::new(Addr(SLAB_META_AT), Addr(base), CHUNK_BYTES, capacity),
            alloc: 0,
            plan: Vec::new(),
            edges: Vec::new(),
            journal: Vec::new(),
            cap: cfg.max_edges,
        }
    }

    /// Bytes of data area: header, vertex table, the chunk slabs' regions and the other
    /// allocators' lines.
    pub fn data_bytes(&self) -> u64 {
        self.regions_end() + 64 * (self.cfg.allocators - 1)
    }

    /// The end of the last allocator's slab region.
    fn regions_end(&self) -> u64 {
        self.slab.base.0 + self.cfg.allocators * self.slab.bytes()
    }

    /// Allocator `a`'s slab: allocator 0's metadata in the header (the single-allocator
    /// layout), the others' in one line each after the last region; region `a` follows region
    /// `a - 1`.
    fn allocator(&self, a: u64) -> Slab {
        if a == 0 {
            return self.slab;
        }
        let meta = Addr(self.regions_end() + 64 * (a - 1));
        Slab::new(meta, self.slab.base + a * self.slab.bytes(), CHUNK_BYTES, self.slab.capacity)
    }

    /// Address of allocator `a`'s edge count (in the header for allocator 0, else in its line
    /// after the slab metadata).
    fn edges_at(&self, a: u64) -> Addr {
        if a == 0 {
            Addr(EDGES_AT)
        } else {
            self.allocator(a).meta + META_BYTES
        }
    }

    /// Build the initial graph of `initial_edges` random edges with the workload's own insert
    /// code, on the native back end over the data area (in place; zero on entry).
    pub fn populate(&mut self, data: &mut [u8]) {
        let n = self.data_bytes() as usize;
        let mut pm = Native::new(&mut data[..n]);
        pm.begin();
        pm.store_u64(Addr(MAGIC_AT), MAGIC);
        pm.store_u64(Addr(VERTICES_AT), self.cfg.vertices);
        pm.commit();
        self.edges.clear();
        self.edges.reserve(self.cfg.initial_edges as usize);
        let mut rng = Rng::new(POPULATE_SEED);
        let mut done = 0;
        while done < self.cfg.initial_edges {
            pm.begin();
            let batch = POPULATE_BATCH.min(self.cfg.initial_edges - done);
            for _ in 0..batch {
                self.insert_random(&mut pm, &mut rng);
            }
            pm.commit();
            done += batch;
        }
        self.journal.clear();
    }

    /// Run one transaction of `ops_per_tx` edge inserts and deletes; abort it if `abort`.
    #[inline]
    pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
        self.journal.clear();
        pm.begin();
        if self.cfg.allocators > 1 {
            self.run_planned(pm, rng);
        } else {
            if pm.concurrent() {
                // Several cores: one lock over the whole structure (docs/workloads.md, "Locking").
                pm.lock(super::STRUCTURE_LOCK);
            }
            for _ in 0..self.cfg.ops_per_tx {
                if self.choose_insert(rng, self.edges.len() as u64) {
                    self.insert_random(pm, rng);
                } else {
                    self.delete_random(pm, rng);
                }
            }
        }
        if abort {
            pm.abort();
            self.rollback();
        } else {
            pm.commit();
        }
    }

    /// The operations of a transaction with several allocators: drawn first (the vertices of
    /// an insert, a deletion's edge taken off the driver's list), then, on several cores, the
    /// locks of their vertex-table lines and of this allocator's line, ascending (strict
    /// two-phase locking; docs/workloads.md, "Locking on several cores"), then run. An insert
    /// whose edge turns out to be there already (inserted by another core, or earlier in this
    /// transaction) changes nothing.
    fn run_planned<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng) {
        let mut plan = std::mem::take(&mut self.plan);
        plan.clear();
        let mut live = self.edges.len() as u64;
        for _ in 0..self.cfg.ops_per_tx {
            if self.choose_insert(rng, live) {
                let (u, v) = loop {
                    pm.compute(self.cfg.compute_cycles_per_insert);
                    let u = rng.below(self.cfg.vertices) as u32;
                    let v = rng.below(self.cfg.vertices) as u32;
                    if u != v {
                        break (u, v);
                    }
                };
                plan.push(Planned::Insert(u, v));
                live += 1;
            } else {
                pm.compute(self.cfg.compute_cycles_per_delete);
                let index = rng.below(self.edges.len() as u64) as usize;
                let edge = self.edges.swap_remove(index);
                self.journal.push(Change::Deleted { index, edge });
                plan.push(Planned::Delete(edge));
                live -= 1;
            }
        }
        if pm.concurrent() {
            let mut ids: Vec<u64> = plan
                .iter()
                .flat_map(|op| {
                    let (u, v) = match *op {
                        Planned::Insert(u, v) | Planned::Delete((u, v)) => (u, v),
                    };
                    [vertex_addr(u).0 / 64, vertex_addr(v).0 / 64]
                })
                .collect();
            ids.push(self.allocator(self.alloc).meta.0 / 64);
            ids.sort_unstable();
            ids.dedup();
            for id in ids {
                pm.lock(id);
            }
        }
        for op in &plan {
            match *op {
                Planned::Insert(u, v) => {
                    let (hu, du) = load_vertex(pm, u);
                    let (hv, dv) = load_vertex(pm, v);
                    let present = if du <= dv { self.find(pm, hu, v) } else { self.find(pm, hv, u) };
                    if present.is_none() {
                        self.insert_edge(pm, (u, hu, du), (v, hv, dv));
                    }
                }
                Planned::Delete(edge) => self.delete_edge(pm, edge),
            }
        }
        self.plan = plan;
    }

    /// The driver of core `core` of `cores`: it deletes only the live edges it lists (every
    /// `cores`-th populated edge from its own index on, then those it inserts), so no two cores
    /// delete one edge, and it lists at most its share of `max_edges`, so the slab, sized for
    /// `max_edges`, never fills. It allocates, frees and counts through allocator
    /// `core % allocators`.
    pub fn for_core(&mut self, core: usize, cores: usize) {
        self.alloc = core as u64 % self.cfg.allocators;
        let mut i = 0;
        self.edges.retain(|_| {
            i += 1;
            (i - 1) % cores == core
        });
        self.cap = self.cfg.max_edges / cores as u64;
    }

    /// Structural check of a data area; `Err` is one line naming what is broken.
    pub fn verify(&self, data: &[u8]) -> Result<(), String> {
        self.read_graph(data).map(|_| ())
    }

    /// Insert (true) or delete, the graph holding `live` of this driver's edges.
    fn choose_insert(&self, rng: &mut Rng, live: u64) -> bool {
        let draw = rng.below(100);
        if self.edges.is_empty() {
            true
        } else if live >= self.cap {
            false
        } else {
            draw < self.cfg.insert_percent
        }
    }

    /// Undo the journalled changes to the volatile edge list, newest first.
    fn rollback(&mut self) {
        for c in self.journal.iter().rev() {
            match *c {
                Change::Inserted(e) => {
                    let popped = self.edges.pop();
                    debug_assert_eq!(popped, Some(e));
                }
                Change::Deleted { index, edge } => {
                    self.edges.push(edge);
                    let last = self.edges.len() - 1;
                    self.edges.swap(index, last);
                }
            }
        }
    }

    /// Insert one new edge between two distinct random vertices.
    fn insert_random<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng) {
        loop {
            pm.compute(self.cfg.compute_cycles_per_insert);
            let u = rng.below(self.cfg.vertices) as u32;
            let v = rng.below(self.cfg.vertices) as u32;
            if u == v {
                continue;
            }
            let (hu, du) = load_vertex(pm, u);
            let (hv, dv) = load_vertex(pm, v);
            let present = if du <= dv { self.find(pm, hu, v) } else { self.find(pm, hv, u) };
            if present.is_some() {
                continue;
            }
            self.insert_edge(pm, (u, hu, du), (v, hv, dv));
            return;
        }
    }

    /// Insert the absent edge `{u, v}`, each end given with its list's head and degree.
    fn insert_edge<P: Pm>(&mut self, pm: &mut P, (u, hu, du): (u32, u64, u64), (v, hv, dv): (u32, u64, u64)) {
        self.append(pm, u, hu, du, v);
        self.append(pm, v, hv, dv, u);
        self.add_edge_count(pm, 1);
        let e = (u.min(v), u.max(v));
        self.edges.push(e);
        self.journal.push(Change::Inserted(e));
    }

    /// Delete a random live edge.
    fn delete_random<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng) {
        pm.compute(self.cfg.compute_cycles_per_delete);
        let index = rng.below(self.edges.len() as u64) as usize;
        let edge = self.edges.swap_remove(index);
        self.journal.push(Change::Deleted { index, edge });
        self.delete_edge(pm, edge);
    }

    /// Delete the live edge `(u, v)` from both lists.
    fn delete_edge<P: Pm>(&self, pm: &mut P, (u, v): (u32, u32)) {
        let (hu, du) = load_vertex(pm, u);
        self.remove(pm, u, hu, du, v);
        let (hv, dv) = load_vertex(pm, v);
        self.remove(pm, v, hv, dv, u);
        self.add_edge_count(pm, u64::MAX); // wrapping -1
    }

    /// Add `delta` (wrapping: `u64::MAX` is -1) to this allocator's edge count.
    fn add_edge_count<P: Pm>(&self, pm: &mut P, delta: u64) {
        let at = self.edges_at(self.alloc);
        let e = pm.load_u64(at);
        pm.store_u64(at, e.wrapping_add(delta));
    }

    /// Scan the list starting at `head` for `w`: its chunk and slot.
    fn find<P: Pm>(&self, pm: &mut P, head: u64, w: u32) -> Option<(u64, u64)> {
        let mut at = head;
        while at != 0 {
            let n = pm.load_u32(Addr(at + COUNT)) as u64;
            let mut hit = None;
            let mut scanned = 0;
            for i in 0..n {
                scanned += 1;
                if pm.load_u32(id_addr(at, i)) == w {
                    hit = Some((at, i));
                    break;
                }
            }
            pm.compute(
                self.cfg.compute_cycles_per_chunk_visited + scanned * self.cfg.compute_cycles_per_neighbour_compared,
            );
            if hit.is_some() {
                return hit;
            }
            at = pm.load_u64(Addr(at + NEXT));
        }
        None
    }

    /// Add `w` to `adj(v)`, whose list starts at `head` and has `degree` ids.
    fn append<P: Pm>(&self, pm: &mut P, v: u32, head: u64, degree: u64, w: u32) {
        let va = vertex_addr(v);
        if head != 0 {
            let n = pm.load_u32(Addr(head + COUNT)) as u64;
            if n < CHUNK_IDS {
                pm.store_u32(id_addr(head, n), w);
                pm.store_u32(Addr(head + COUNT), n as u32 + 1);
                pm.store_u64(va + DEGREE, degree + 1);
                return;
            }
        }
        let c = self.allocator(self.alloc).alloc(pm).expect("sdg: a chunk region is sized for max_edges");
        pm.store_u64(c + NEXT, head);
        pm.store_u32(c + COUNT, 1);
        pm.store_u32(id_addr(c.0, 0), w);
        pm.store_u64(va + HEAD, c.0);
        pm.store_u64(va + DEGREE, degree + 1);
    }

    /// Remove `w` from `adj(v)`: the first chunk's last id fills its slot.
    fn remove<P: Pm>(&self, pm: &mut P, v: u32, head: u64, degree: u64, w: u32) {
        let (chunk, slot) = self.find(pm, head, w).expect("sdg: a live edge is in both adjacency lists");
        let n = pm.load_u32(Addr(head + COUNT)) as u64;
        if (chunk, slot) != (head, n - 1) {
            let last = pm.load_u32(id_addr(head, n - 1));
            pm.store_u32(id_addr(chunk, slot), last);
        }
        let va = vertex_addr(v);
        if n == 1 {
            let next = pm.load_u64(Addr(head + NEXT));
            pm.store_u64(va + HEAD, next);
            self.allocator(self.alloc).free_foreign(pm, Addr(head));
        } else {
            pm.store_u32(Addr(head + COUNT), n as u32 - 1);
        }
        pm.store_u64(va + DEGREE, degree - 1);
    }
}

fn load_vertex<P: Pm>(pm: &mut P, v: u32) -> (u64, u64) {
    let va = vertex_addr(v);
    (pm.load_u64(va + HEAD), pm.load_u64(va + DEGREE))
}

fn rd64(data: &[u8], a: u64) -> u64 {
    u64::from_le_bytes(data[a as usize..a as usize + 8].try_into().unwrap())
}

fn rd32(data: &[u8], a: u64) -> u32 {
    u32::from_le_bytes(data[a as usize..a as usize + 4].try_into().unwrap())
}

/// What the verifier gathers while walking the lists.
struct Walk {
    /// Per slab chunk: reached from some list.
    seen: Vec<bool>,
    reached: u64,
    /// The adjacency lists, each sorted, one after the other (`adj(v)` is
    /// `ids[start[v]..start[v + 1]]`).
    ids: Vec<u32>,
    start: Vec<usize>,
}

impl Sdg {
    /// Check the whole structure and return its edges `(u, v)`, `u < v`, sorted.
    fn read_graph(&self, data: &[u8]) -> Result<Vec<(u64, u64)>, String> {
        if (data.len() as u64) < self.data_bytes() {
            return Err(format!("sdg: data area of {} bytes, expected {}", data.len(), self.data_bytes()));
        }
        if rd64(data, MAGIC_AT) != MAGIC || rd64(data, VERTICES_AT) != self.cfg.vertices {
            return Err("sdg: header magic or vertex count differs from the configuration".into());
        }
        let slots = (self.cfg.allocators * self.slab.capacity) as usize;
        let slabs: Vec<Slab> = (0..self.cfg.allocators).map(|a| self.allocator(a)).collect();
        // The free lists (with several allocators a list may hold chunks of any region): well
        // formed and disjoint.
        let Regions { bumps, free, used } = Regions::read(data, &slabs, "sdg", "chunk")?;
        let mut walk = Walk { seen: crate::hostmem::committed(slots), reached: 0, ids: Vec::new(), start: vec![0] };
        for v in 0..self.cfg.vertices as u32 {
            self.check_vertex(data, v, &bumps, &mut walk)?;
        }
        let edges = symmetric_edges(&walk)?;
        let counted = (0..self.cfg.allocators).fold(0u64, |n, a| n.wrapping_add(rd64(data, self.edges_at(a).0)));
        if counted != edges.len() as u64 {
            return Err(format!("sdg: header counts {counted} edges, the lists hold {}", edges.len()));
        }
        if let Some(s) = (0..slots).find(|&s| free[s] && walk.seen[s]) {
            let at = self.slab.base.0 + s as u64 * CHUNK_BYTES;
            return Err(format!("sdg: chunk {at:#x} is both in an adjacency list and on the free list"));
        }
        if walk.reached != used {
            return Err(format!("sdg: {} chunks reachable from the lists, the slabs have {used} in use", walk.reached));
        }
        Ok(edges)
    }

    /// The chunk index (over all regions) of the chunk at `c`, if `c` is the first byte of a
    /// chunk its region's allocator has handed out (`bumps`, per allocator).
    fn handed_out(&self, c: u64, bumps: &[u64]) -> Option<usize> {
        super::slab::handed_out(&self.slab, bumps, c)
    }

    /// Walk `adj(v)`: pointers, chunk fill, ids, degree; append its ids to `walk`.
    fn check_vertex(&self, data: &[u8], v: u32, bumps: &[u64], walk: &mut Walk) -> Result<(), String> {
        let va = vertex_addr(v).0;
        let (head, degree) = (rd64(data, va + HEAD), rd64(data, va + DEGREE));
        let from = walk.ids.len();
        let mut at = head;
        while at != 0 {
            let Some(slot) = self.handed_out(at, bumps) else {
                return Err(format!("sdg: vertex {v}: chunk pointer {at:#x} is not a handed-out chunk"));
            };
            if walk.seen[slot] {
                return Err(format!("sdg: vertex {v}: chunk {at:#x} reached twice (a cycle or a shared chunk)"));
            }
            walk.seen[slot] = true;
            walk.reached += 1;
            let n = rd32(data, at + COUNT) as u64;
            let first = at == head;
            if n == 0 || n > CHUNK_IDS || (!first && n != CHUNK_IDS) {
                return Err(format!("sdg: vertex {v}: chunk {at:#x} holds {n} ids (first chunk: {first})"));
            }
            for i in 0..n {
                walk.ids.push(rd32(data, at + IDS + 4 * i));
            }
            at = rd64(data, at + NEXT);
        }
        if (walk.ids.len() - from) as u64 != degree {
            return Err(format!("sdg: vertex {v}: degree {degree} but its list holds {} ids", walk.ids.len() - from));
        }
        self.check_ids(v, &mut walk.ids[from..])?;
        walk.start.push(walk.ids.len());
        Ok(())
    }

    /// Ids of `adj(v)`: in range, no self-loop, no duplicate. Sorts them.
    fn check_ids(&self, v: u32, ids: &mut [u32]) -> Result<(), String> {
        ids.sort_unstable();
        for (i, &w) in ids.iter().enumerate() {
            if w as u64 >= self.cfg.vertices {
                return Err(format!("sdg: vertex {v}: neighbour id {w} out of range"));
            }
            if w == v {
                return Err(format!("sdg: vertex {v}: self-loop"));
            }
            if i > 0 && ids[i - 1] == w {
                return Err(format!("sdg: vertex {v}: neighbour {w} listed twice"));
            }
        }
        Ok(())
    }
}

/// The incremental form of [`Sdg::verify`] ([`Follow`]): the vertices are the roots of
/// `SlabLists` (which keeps the chunk and free-list checks); beside it, each vertex's
/// neighbour set (sorted, without duplicates, self-loops or out-of-range ids), the directed
/// edges whose reverse is missing (`asym`: the adjacency is symmetric when it is 0) and the ids
/// listed in total (twice the header's edge count when sound). The neighbour sets are
/// `Lines`: most are short, and a short one is a single cache line, since `set_adj` reads
/// the sets of neighbours at random.
pub struct SdgFollow {
    lists: SlabLists,
    data_bytes: u64,
    adj: Lines,
    scratch: Vec<u32>,
    asym: u64,
    listed: u64,
    bulk: bool,
}

impl Sdg {
    /// The incremental verifier of the single-allocator layout; `None` with several
    /// allocators (whose free lists cross regions): the crash checker then verifies whole
    /// images with [`Sdg::verify`].
    pub fn follower(&self) -> Option<SdgFollow> {
        if self.cfg.allocators > 1 {
            return None;
        }
        let lists = SlabLists::new(self.slab, self.cfg.vertices, VERTEX_TABLE_AT, VERTEX_BYTES);
        Some(SdgFollow {
            lists,
            data_bytes: self.data_bytes(),
            adj: Lines::new(self.cfg.vertices as usize),
            scratch: Vec::new(),
            asym: 0,
            listed: 0,
            bulk: false,
        })
    }
}

impl SdgFollow {
    fn sound(&self, data: &[u8]) -> bool {
        let header = rd64(data, MAGIC_AT) == MAGIC && rd64(data, VERTICES_AT) == self.lists.roots;
        header
            && self.lists.sound()
            && self.asym == 0
            && self.listed.is_multiple_of(2)
            && self.listed / 2 == rd64(data, EDGES_AT)
    }

    /// Host cache hint: start loading what walking vertex `v` touches first (its first chunk,
    /// that chunk's per-slot state, its neighbour list if it is not in its line; the entry and
    /// the line are read). No effect on results.
    fn prefetch(&self, data: &[u8], v: u32) {
        if (v as u64) < self.lists.roots {
            let head = rd64(data, vertex_addr(v).0 + HEAD);
            self.lists.prefetch_slot(data, head);
            self.adj.prefetch_long(v as usize);
        }
    }

    /// Walk `adj(v)` again, as [`Sdg::check_vertex`] and [`Sdg::check_ids`] do.
    fn rewalk(&mut self, data: &[u8], v: u32) {
        let va = vertex_addr(v).0;
        let (head, degree) = (rd64(data, va + HEAD), rd64(data, va + DEGREE));
        self.lists.begin(v);
        let (mut ids, mut ok, mut at) = (std::mem::take(&mut self.scratch), true, head);
        ids.clear();
        while at != 0 {
            if !self.lists.step(at) {
                ok = false;
                break;
            }
            let n = rd32(data, at + COUNT) as u64;
            if n == 0 || n > CHUNK_IDS || (at != head && n != CHUNK_IDS) {
                ok = false;
                break;
            }
            ids.extend((0..n).map(|i| rd32(data, at + IDS + 4 * i)));
            at = rd64(data, at + NEXT);
        }
        ok &= ids.len() as u64 == degree;
        sort_ids(&mut ids);
        let roots = self.lists.roots;
        let clean = |w: &[u32]| w[0] != w[1] && (w[1] as u64) < roots && w[1] != v;
        if ids.first().is_some_and(|&w| w as u64 >= roots || w == v) || !ids.windows(2).all(clean) {
            ids.dedup();
            ids.retain(|&w| (w as u64) < roots && w != v);
            ok = false;
        }
        self.lists.end(v, ok);
        self.set_adj(v, &ids);
        self.scratch = ids;
    }

    /// Directed edges `(v, w)` (`w` in `adj(v)`) whose reverse is missing: per `w`, the `v`
    /// listing it (the transpose, built in increasing `v` by a counting sort) not in `adj(w)`.
    fn count_asymmetric(&self) -> u64 {
        let n = self.lists.roots as usize;
        let mut start: Vec<u32> = crate::hostmem::committed(n + 1);
        for v in 0..n {
            for &w in self.adj.get(v) {
                start[w as usize + 1] += 1;
            }
        }
        for w in 0..n {
            start[w + 1] += start[w];
        }
        let mut fill = start.clone();
        let mut rev: Vec<u32> = crate::hostmem::committed(start[n] as usize);
        for v in 0..n {
            for &w in self.adj.get(v) {
                rev[fill[w as usize] as usize] = v as u32;
                fill[w as usize] += 1;
            }
        }
        let mut missing = 0u64;
        for w in 0..n {
            let (listers, own) = (&rev[start[w] as usize..start[w + 1] as usize], self.adj.get(w));
            let mut j = 0;
            for &v in listers {
                while j < own.len() && own[j] < v {
                    j += 1;
                }
                missing += u64::from(j == own.len() || own[j] != v);
            }
        }
        missing
    }

    /// Replace `adj(v)`, keeping `asym` (directed edges without their reverse; not while
    /// `bulk`, see [`Follow::reset`]) and `listed`.
    fn set_adj(&mut self, v: u32, new: &[u32]) {
        let old = self.adj.get(v as usize);
        self.listed = self.listed - old.len() as u64 + new.len() as u64;
        if self.bulk {
            self.adj.set(v as usize, new);
            return;
        }
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < new.len() {
            let (a, b) = (old.get(i).copied().unwrap_or(u32::MAX), new.get(j).copied().unwrap_or(u32::MAX));
            if a == b {
                (i, j) = (i + 1, j + 1);
                continue;
            }
            // (v, w) leaves (a < b) or joins the edge set; its reverse (w, v) is there or not.
            let (w, joins) = if a < b { (a, false) } else { (b, true) };
            // A self-loop never reaches here (the walk drops them), so `old` is not `adj(w)`.
            if joins == self.adj.get(w as usize).binary_search(&v).is_ok() {
                self.asym -= 1;
            } else {
                self.asym += 1;
            }
            if a < b {
                i += 1;
            } else {
                j += 1;
            }
        }
        self.adj.set(v as usize, new);
    }
}

impl Follow for SdgFollow {
    fn reset(&mut self, data: &[u8]) -> bool {
        (self.asym, self.listed) = (0, 0);
        self.adj.clear();
        if (data.len() as u64) < self.data_bytes {
            return false;
        }
        self.lists.reset(data);
        // Every list first, with `set_adj` keeping no asymmetry count (each id's reverse would
        // be a random look-up), then the count from the transpose in one sequential pass.
        self.bulk = true;
        for v in 0..self.lists.roots as u32 {
            self.adj.prefetch(v as usize + 16);
            self.prefetch(data, v + 8);
            self.rewalk(data, v);
        }
        self.bulk = false;
        self.asym = self.count_asymmetric();
        self.sound(data)
    }

    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool {
        match self.lists.changed(data, old) {
            Rewalk::Reset => self.reset(data),
            Rewalk::Roots(todo) => {
                // Cache hints in stages, each over every queued vertex so that its misses
                // overlap: the vertices' entries and neighbour sets' lines, then what those
                // lead to (first chunk, its slot's record, a long neighbour set; the walks'
                // `set_adj` searches the sets of neighbours, mostly queued too).
                for &v in &todo {
                    if let Some(x) = data.get(vertex_addr(v).0 as usize) {
                        crate::hostmem::prefetch(x);
                    }
                    self.adj.prefetch(v as usize);
                }
                for &v in &todo {
                    self.prefetch(data, v);
                }
                for &v in &todo {
                    self.rewalk(data, v);
                }
                self.sound(data)
            }
        }
    }
}

/// Sort a vertex's neighbour ids. Most lists are short (mean degree 8): those of at most 16
/// ids are sorted by rank ([`sort_by_rank`]), with no data-dependent branch, where an insertion
/// sort's branches on random ids are mispredicted about once per id.
fn sort_ids(ids: &mut [u32]) {
    let sorted = match ids.len() {
        0..=8 => sort_by_rank::<8>(ids),
        9..=16 => sort_by_rank::<16>(ids),
        _ => false,
    };
    if !sorted {
        ids.sort_unstable();
    }
}

/// Sort at most `K` ids by rank: an id's place is the number of ids below it, counted for all
/// `K` places at once, which vectorises. False, the ids untouched, when an id is there twice
/// (only in a broken image: ranks then collide).
fn sort_by_rank<const K: usize>(ids: &mut [u32]) -> bool {
    let n = ids.len();
    // Compared as signed numbers (biased), which vectorises on every x86-64; the padding
    // ranks nothing (only the ids are counted).
    let mut a = [0i32; K];
    for (a, &x) in a.iter_mut().zip(ids.iter()) {
        *a = (x ^ 1 << 31) as i32;
    }
    let (mut below, mut equal) = ([0i32; K], [0i32; K]);
    for &y in &a[..n] {
        for i in 0..K {
            below[i] += i32::from(y < a[i]);
            equal[i] += i32::from(y == a[i]);
        }
    }
    if equal[..n].iter().any(|&e| e != 1) {
        return false;
    }
    for i in 0..n {
        ids[below[i] as usize % n] = (a[i] as u32) ^ 1 << 31;
    }
    true
}

/// Every edge must be listed from both ends (the lists in `walk` are sorted and in range);
/// returns the edges, sorted.
///
/// The transpose of the lists is built by a counting sort (`rev(w)` = the `v` listing `w`, in
/// increasing order); the adjacency is symmetric exactly when every `rev(w)` equals `adj(w)`.
fn symmetric_edges(walk: &Walk) -> Result<Vec<(u64, u64)>, String> {
    let n = walk.start.len() - 1;
    let adj = |v: usize| &walk.ids[walk.start[v]..walk.start[v + 1]];
    let mut fill = walk.start.clone();
    let mut rev: Vec<u32> = crate::hostmem::committed(walk.ids.len());
    for v in 0..n {
        for &w in adj(v) {
            let w = w as usize;
            if fill[w] == walk.start[w + 1] {
                return Err(find_asymmetry(walk));
            }
            rev[fill[w]] = v as u32;
            fill[w] += 1;
        }
    }
    if rev != walk.ids {
        return Err(find_asymmetry(walk));
    }
    let mut edges = Vec::with_capacity(walk.ids.len() / 2);
    for v in 0..n {
        let bigger = adj(v).iter().filter(|&&w| w as usize > v);
        edges.extend(bigger.map(|&w| (v as u64, w as u64)));
    }
    Ok(edges)
}

/// Name one entry whose reverse is missing (slow; only on the error path).
fn find_asymmetry(walk: &Walk) -> String {
    let adj = |v: u32| &walk.ids[walk.start[v as usize]..walk.start[v as usize + 1]];
    for v in 0..walk.start.len() as u32 - 1 {
        for &w in adj(v) {
            if adj(w).binary_search(&v).is_err() {
                return format!("sdg: adjacency not symmetric: {w} is in adj({v}) but {v} is not in adj({w})");
            }
        }
    }
    "sdg: adjacency not symmetric".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn small(insert_percent: u64) -> SdgConfig {
        SdgConfig {
            vertices: 32,
            initial_edges: 100,
            max_edges: 248,
            ops_per_tx: 6,
            insert_percent,
            compute_cycles_per_insert: 1,
            compute_cycles_per_delete: 1,
            compute_cycles_per_neighbour_compared: 1,
            compute_cycles_per_chunk_visited: 1,
            allocators: 1,
        }
    }

    fn sorted(model: &HashSet<(u64, u64)>) -> Vec<(u64, u64)> {
        let mut v: Vec<_> = model.iter().copied().collect();
        v.sort_unstable();
        v
    }

    /// Populate, then run `txs` seeded transactions (about 20% aborted) on the native back end,
    /// keeping a `HashSet` model of the edges; `check(t, driver, memory, model)` runs on the
    /// populated state (`t = None`) and after every transaction.
    fn run_sequence(
        cfg: &SdgConfig,
        seed: u64,
        txs: u64,
        mut check: impl FnMut(Option<u64>, &Sdg, &[u8], &HashSet<(u64, u64)>),
    ) {
        let mut w = Sdg::new(cfg);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        let mut model: HashSet<(u64, u64)> = w.edges.iter().map(|&(a, b)| (a as u64, b as u64)).collect();
        assert_eq!(model.len() as u64, cfg.initial_edges, "seed {seed}");
        check(None, &w, &mem, &model);
        let mut pm = Native::new(mem);
        let (mut ops, mut aborts) = (Rng::derive(seed, 1), Rng::derive(seed, 2));
        for t in 0..txs {
            // Several allocators: the transactions go round them as several cores' would.
            w.alloc = t % cfg.allocators;
            let abort = aborts.chance(0.2);
            w.run_tx(&mut pm, &mut ops, abort);
            if !abort {
                apply_journal(&w.journal, &mut model, seed, t);
            }
            check(Some(t), &w, &pm.mem, &model);
        }
    }

    /// Apply a committed transaction's operations to the model, checking each is legal.
    fn apply_journal(journal: &[Change], model: &mut HashSet<(u64, u64)>, seed: u64, t: u64) {
        for c in journal {
            match *c {
                Change::Inserted((a, b)) => {
                    assert!(a < b, "seed {seed} tx {t}: edge {a}-{b} not normalised");
                    assert!(model.insert((a as u64, b as u64)), "seed {seed} tx {t}: inserted existing edge {a}-{b}");
                }
                Change::Deleted { edge: (a, b), .. } => {
                    assert!(model.remove(&(a as u64, b as u64)), "seed {seed} tx {t}: deleted absent edge {a}-{b}")
                }
            }
        }
    }

    /// The three mixes: balanced, insert-heavy (reaches `max_edges`, multi-chunk lists),
    /// delete-heavy (reaches the empty graph).
    const MIXES: [u64; 3] = [50, 85, 15];

    /// After transaction `t` of the run with `seed`: the graph read from `mem` and the driver's
    /// edge list both equal the model, without duplicates.
    fn graph_matches(seed: u64, t: Option<u64>, w: &Sdg, mem: &[u8], model: &HashSet<(u64, u64)>) {
        let got = w.read_graph(mem).unwrap_or_else(|e| panic!("seed {seed} {t:?}: {e}"));
        assert_eq!(got, sorted(model), "seed {seed} after tx {t:?}: graph differs");
        let driver: HashSet<(u64, u64)> = w.edges.iter().map(|&(a, b)| (a as u64, b as u64)).collect();
        assert_eq!(w.edges.len(), driver.len(), "seed {seed} {t:?}: duplicate");
        assert_eq!(&driver, model, "seed {seed} after tx {t:?}: edge list differs");
    }

    #[test]
    fn edge_operations_match_a_hash_set_model_after_every_transaction_and_aborts_leave_no_trace() {
        for (k, pct) in MIXES.into_iter().enumerate() {
            let seed = 40 + k as u64;
            let cfg = small(pct);
            let (mut most, mut least) = (0, usize::MAX);
            run_sequence(&cfg, seed, 600, |t, w, mem, model| {
                graph_matches(seed, t, w, mem, model);
                most = most.max(model.len());
                least = least.min(model.len());
            });
            match pct {
                85 => assert_eq!(most as u64, cfg.max_edges, "seed {seed}: never full"),
                15 => assert_eq!(least, 0, "seed {seed}: never empty"),
                _ => {}
            }
        }
    }

    /// Four allocators, the transactions going round them as four cores' would (their
    /// operations drawn before they run): after every transaction the graph equals the model
    /// and the driver's list, the verifier passes, and chunks of other regions were recycled
    /// through a free list.
    #[test]
    fn per_allocator_transactions_match_the_model_and_recycle_each_others_chunks() {
        for (k, pct) in MIXES.into_iter().enumerate() {
            let seed = 50 + k as u64;
            let cfg = SdgConfig { allocators: 4, ..small(pct) };
            cfg.validate().unwrap();
            let (mut foreign, mut most, mut least) = (0, 0, usize::MAX);
            run_sequence(&cfg, seed, 600, |t, w, mem, model| {
                graph_matches(seed, t, w, mem, model);
                let a = w.allocator(w.alloc);
                let head = rd64(mem, a.meta.0);
                foreign += u64::from(head != 0 && !a.contains(Addr(head)));
                (most, least) = (most.max(model.len()), least.min(model.len()));
            });
            assert!(foreign > 20, "seed {seed}: chunks of other regions on a free list: {foreign}");
            // A transaction that empties the graph part-way inserts for its remaining
            // operations (it deletes only edges there when it began), so it may end on one.
            match pct {
                85 => assert_eq!(most as u64, cfg.max_edges, "seed {seed}: never full"),
                15 => assert!(least <= 1, "seed {seed}: never (nearly) empty: {least}"),
                _ => {}
            }
        }
    }

    /// With several allocators the verifier sums the allocators' edge counts and rejects a
    /// chunk on two free lists.
    #[test]
    fn verifier_with_allocators_checks_the_summed_edge_count_and_the_free_lists() {
        let cfg = SdgConfig { allocators: 3, ..small(50) };
        let mut w = Sdg::new(&cfg);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        let mut pm = Native::new(mem);
        let mut rng = Rng::new(4);
        for t in 0..300 {
            w.alloc = t % 3;
            w.run_tx(&mut pm, &mut rng, false);
        }
        w.verify(&pm.mem).unwrap();
        let mut bad = pm.mem.clone();
        let at = w.edges_at(2).0;
        let n = rd64(&bad, at).wrapping_add(1);
        put64(&mut bad, at, n);
        assert!(w.verify(&bad).unwrap_err().contains("header counts"));
        // A chunk on allocator 1's free list pushed on allocator 2's too.
        let (m1, m2) = (w.allocator(1).meta.0, w.allocator(2).meta.0);
        let mut bad = pm.mem.clone();
        let shared = [m1, m2, 0].into_iter().map(|m| rd64(&bad, m)).find(|&h| h != 0).expect("a free chunk");
        let head2 = rd64(&bad, m2);
        put64(&mut bad, shared, head2);
        put64(&mut bad, m2, shared);
        let e = w.verify(&bad).unwrap_err();
        assert!(e.contains("listed twice") || e.contains("free link"), "{e}");
    }

    /// On 4 cores with an allocator per core, transactions on different vertices overlap: the
    /// same transactions take fewer cycles than on one core; with one allocator (one lock over
    /// the graph) they do not.
    #[test]
    fn with_an_allocator_per_core_four_cores_run_transactions_concurrently() {
        let cycles = |cores: u32, allocators: u64| {
            let sets = [
                format!("machine.cores={cores}"),
                format!("workload.sdg.allocators={allocators}"),
                "workload.sdg.vertices=16384".into(),
                "workload.sdg.initial_edges=32768".into(),
                "workload.sdg.max_edges=65536".into(),
            ];
            crate::runner::baseline_cycles(crate::workload::WorkloadKind::Sdg, &sets, 2000, 200)
        };
        let one = cycles(1, 4);
        let (fine, coarse) = (cycles(4, 4), cycles(4, 1));
        // 16384 vertices: two transactions' 26 vertices share a lock line about one time in six.
        assert!(fine * 4 < one * 3, "4 cores, 4 allocators: {fine} cycles, 1 core: {one}");
        assert!(coarse > one, "4 cores, 1 allocator (serialised): {coarse} cycles, 1 core: {one}");
    }

    #[test]
    fn verifier_accepts_every_state_of_the_model_sequence() {
        for (k, pct) in MIXES.into_iter().enumerate() {
            let seed = 40 + k as u64;
            run_sequence(&small(pct), seed, 600, |t, w, mem, _| {
                if let Err(e) = w.verify(mem) {
                    panic!("seed {seed} after tx {t:?}: {e}");
                }
            });
        }
    }

    /// A populated small graph with several two-chunk lists, and the vertex of largest degree.
    fn dense() -> (Sdg, Vec<u8>, u32) {
        let mut cfg = small(50);
        cfg.initial_edges = 220;
        let mut w = Sdg::new(&cfg);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        let v = (0..32u32).max_by_key(|&v| rd64(&mem, vertex_addr(v).0 + DEGREE)).unwrap();
        assert!(rd64(&mem, vertex_addr(v).0 + DEGREE) > CHUNK_IDS);
        w.verify(&mem).unwrap();
        (w, mem, v)
    }

    fn put64(mem: &mut [u8], a: u64, x: u64) {
        mem[a as usize..a as usize + 8].copy_from_slice(&x.to_le_bytes());
    }

    fn put32(mem: &mut [u8], a: u64, x: u32) {
        mem[a as usize..a as usize + 4].copy_from_slice(&x.to_le_bytes());
    }

    /// The ids of `adj(v)` in a data area, in list order.
    fn adj(mem: &[u8], v: u32) -> Vec<u32> {
        let (mut ids, mut at) = (Vec::new(), rd64(mem, vertex_addr(v).0 + HEAD));
        while at != 0 {
            for i in 0..rd32(mem, at + COUNT) as u64 {
                ids.push(rd32(mem, at + IDS + 4 * i));
            }
            at = rd64(mem, at + NEXT);
        }
        ids
    }

    /// Apply `f(memory, first chunk, second (full) chunk, v)` to the dense graph, where `v` has
    /// the largest degree; return the verifier's error.
    fn corrupted(f: impl FnOnce(&mut [u8], u64, u64, u32)) -> String {
        let (w, mut mem, v) = dense();
        let head = rd64(&mem, vertex_addr(v).0 + HEAD);
        let second = rd64(&mem, head + NEXT);
        f(&mut mem, head, second, v);
        let e = w.verify(&mem).expect_err("corruption not caught");
        assert!(!e.contains('\n'));
        e
    }

    #[test]
    fn verifier_catches_asymmetry_degree_cycle_self_loop_duplicate_and_leak() {
        let e = corrupted(|mem, _, second, v| {
            let adj = adj(mem, v);
            let stranger = (0..32).find(|x| *x != v && !adj.contains(x)).unwrap();
            put32(mem, second + IDS, stranger);
        });
        assert!(e.contains("not symmetric"), "{e}");
        let e = corrupted(|mem, _, _, v| {
            let d = rd64(mem, vertex_addr(v).0 + DEGREE);
            put64(mem, vertex_addr(v).0 + DEGREE, d + 1);
        });
        assert!(e.contains("degree"), "{e}");
        let e = corrupted(|mem, head, _, _| put64(mem, head + NEXT, head));
        assert!(e.contains("reached twice"), "{e}");
        let e = corrupted(|mem, _, second, v| put32(mem, second + IDS, v));
        assert!(e.contains("self-loop"), "{e}");
        let e = corrupted(|mem, _, second, _| {
            let other = rd32(mem, second + IDS + 4);
            put32(mem, second + IDS, other);
        });
        assert!(e.contains("listed twice"), "{e}");
        let e = corrupted(|mem, _, _, _| {
            let bump = rd64(mem, SLAB_META_AT + 8);
            put64(mem, SLAB_META_AT + 8, bump + 1);
        });
        assert!(e.contains("chunks reachable"), "{e}");
        let e = corrupted(|mem, _, _, _| put64(mem, EDGES_AT, 7));
        assert!(e.contains("header counts"), "{e}");
    }

    #[test]
    fn verifier_returns_an_error_and_never_panics_on_garbage() {
        let (w, mem, _) = dense();
        assert!(w.verify(&mem[..100]).is_err());
        let mut rng = Rng::new(9);
        for round in 0..200 {
            let mut bad = mem.clone();
            let (start, n) =
                if round % 2 == 0 { (64, bad.len() - 64) } else { (rng.below(bad.len() as u64) as usize, 8) };
            for b in bad[start..(start + n).min(mem.len())].iter_mut() {
                *b = rng.next_u64() as u8;
            }
            let _ = w.verify(&bad);
        }
    }

    #[test]
    fn default_populate_is_deterministic_verified_and_at_least_8_mib_live() {
        let cfg = SdgConfig::default();
        let mut w = Sdg::new(&cfg);
        let mut a = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut a);
        let mut b = vec![0u8; w.data_bytes() as usize];
        Sdg::new(&cfg).populate(&mut b);
        assert!(a == b, "populate is not deterministic");
        let edges = w.read_graph(&a).unwrap();
        assert_eq!(edges.len() as u64, cfg.initial_edges);
        let chunks = w.slab.used_in(&a).unwrap();
        let live = cfg.vertices * VERTEX_BYTES + chunks * CHUNK_BYTES;
        assert!(live >= 8 << 20, "live structure {live} bytes");
    }

    #[test]
    fn validate_names_the_key_and_the_allowed_range() {
        SdgConfig::default().validate().unwrap();
        let c = SdgConfig { insert_percent: 101, ..SdgConfig::default() };
        assert_eq!(c.validate().unwrap_err(), "workload.sdg.insert_percent = 101: allowed 0..=100");
        let mut c = small(50);
        c.max_edges = 249;
        assert_eq!(c.validate().unwrap_err(), "workload.sdg.max_edges = 249: allowed 1..=248");
    }

    /// Taking a data area whole counts the edges without their reverse in one pass over the
    /// transpose; following it counts them edge by edge: both give the same count, on a run's
    /// states and on states where a listed id was moved to another vertex (asymmetric).
    #[test]
    fn a_whole_take_counts_the_asymmetric_edges_the_following_one_counts() {
        use crate::workload::follow::{check::diff, Follow};
        let cfg = small(50);
        let mut w = Sdg::new(&cfg);
        let mut data = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut data);
        let (mut followed, mut whole) = (w.follower().unwrap(), w.follower().unwrap());
        assert!(followed.reset(&data));
        let mut pm = Native::new(data);
        let (mut rng, mut damage) = (Rng::new(9), Rng::new(10));
        let mut seen_asym = 0;
        for _ in 0..60 {
            let before = pm.mem.clone();
            w.run_tx(&mut pm, &mut rng, false);
            let mut now = pm.mem.clone();
            // Half the time: one id of the first chunk of a random vertex, re-pointed.
            if damage.chance(0.5) {
                let v = damage.below(cfg.vertices) as u32;
                let head = rd64(&now, vertex_addr(v).0 + HEAD);
                if head != 0 && rd32(&now, head + COUNT) > 0 {
                    let at = (head + IDS) as usize;
                    let id = (rd32(&now, head + IDS) + 1 + damage.below(cfg.vertices - 1) as u32) % cfg.vertices as u32;
                    now[at..at + 4].copy_from_slice(&id.to_le_bytes());
                }
            }
            let a = followed.changed(&now, &diff(&before, &now));
            let b = whole.reset(&now);
            assert_eq!((a, followed.asym, followed.listed), (b, whole.asym, whole.listed));
            seen_asym += u64::from(whole.asym > 0);
            // Undo the damage for the next transaction.
            let undo = diff(&now, &pm.mem);
            followed.changed(&pm.mem, &undo);
        }
        assert!(seen_asym > 5, "the damage must make some states asymmetric: {seen_asym}");
    }

    #[test]
    fn sorting_ids_by_rank_equals_a_sort() {
        let mut rng = Rng::new(11);
        for round in 0..2000 {
            let n = round % 21;
            let range = [4, 40, u64::from(u32::MAX) + 1][round % 3];
            let mut ids: Vec<u32> = (0..n).map(|_| rng.below(range) as u32).collect();
            let mut want = ids.clone();
            want.sort_unstable();
            sort_ids(&mut ids);
            assert_eq!(ids, want);
        }
    }

    #[test]
    fn the_follower_agrees_with_the_verifier_on_a_run_and_on_damage() {
        for (insert_percent, seed) in [(50, 3), (90, 4), (10, 5)] {
            let cfg = crate::workload::WorkloadConfig { sdg: small(insert_percent), ..Default::default() };
            let rejected = crate::workload::follow::check::agrees(crate::workload::WorkloadKind::Sdg, &cfg, 400, seed);
            assert!(rejected > 50, "the damage must matter: {rejected} of 400 damaged states rejected");
        }
    }
}
