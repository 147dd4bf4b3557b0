//! TPC-C: the order-entry benchmark of the TPC-C specification, revision 5.11 (Transaction
//! Processing Performance Council, 2010), on persistent memory: the nine tables of clause 1.3
//! with their columns, rows in [`Slab`]s, primary indexes as persistent B+trees
//! ([`super::btree::BTree`]), the five transactions of clause 2 in the mix of clause 5.2.3, and
//! a verifier of the consistency conditions 1-4 of clause 3.3.2. docs/tpcc.md is the page: the
//! byte layout of every row and region, the scale knob, what is and is not as specified.
//!
//! # Layout (little-endian)
//!
//! The data area holds a global partition (the ITEM table and its index), then one partition
//! per warehouse, `stride` bytes each (a multiple of 4096), holding that warehouse's rows of
//! the eight other tables and their indexes. A partition starts with a 4096-byte header: the
//! slab metadata of each of its tables, 16 bytes at `16 t` for table `t` (`W D C H NO O OL S`,
//! 0 to 7; the global partition: ITEM at 0). Then each table's slot region and each index's
//! B+tree region (a tree's addresses are relative to its region's start), every region
//! 4096-aligned. Row layouts are in docs/tpcc.md and in the `*_`-prefixed offsets below.
//!
//! WAREHOUSE and DISTRICT rows are reached by their ids (slot 0, and slot `d - 1`: populate
//! allocates them in id order and they are never deleted); every other table through its
//! index, whose value is the row's slot number. HISTORY has no primary key (clause 1.3.4) and
//! no index.
//!
//! # Locking
//!
//! A transaction locks, in ascending order, the first line of the partition of every
//! warehouse it touches (its home warehouse, New-Order's supply warehouses, Payment's
//! customer's warehouse) before its first access: the warehouse is the unit of isolation, so
//! transactions of different warehouses run concurrently. The ITEM partition is never written
//! after populate and is read without a lock. The read-only transactions lock their warehouse
//! too (so that they never read a B+tree in the middle of another core's split) and write
//! nothing.

use super::btree::{BTree, BTreeConfig};
use super::native::Native;
use super::slab::Slab;
use super::{Part, Pm};
use crate::rng::Rng;
use crate::types::Addr;
use serde::{Deserialize, Serialize};

/// Districts per warehouse (clause 1.2.1).
pub const DISTRICTS: u64 = 10;
/// Customers per district at scale 1 (clause 1.2.1).
pub const CUSTOMERS: u64 = 3000;
/// Items (and stock rows per warehouse) at scale 1 (clause 1.2.1).
pub const ITEMS: u64 = 100_000;
/// Order lines per order: 5 to 15 (clause 2.4.1.3).
const MAX_OL: u64 = 15;
/// Largest warehouse count the configuration may ask for.
const MAX_WAREHOUSES: u64 = 64;

/// NURand's run-time constants `C` (clause 2.1.6): for C_LAST, C_ID and OL_I_ID; and the load
/// constant for C_LAST. `C_LAST_RUN - C_LAST_LOAD = 66` lies in 65..=119 and is neither 96 nor
/// 112, as clause 2.1.6.1 asks.
pub const C_LAST_LOAD: u64 = 157;
pub const C_LAST_RUN: u64 = 223;
pub const C_ID: u64 = 259;
pub const C_OL_I_ID: u64 = 7911;

/// The last-name syllables of clause 4.3.2.3.
const SYLLABLES: [&str; 10] = ["BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"];
/// Seed of the populate phase.
const POPULATE_SEED: u64 = 0x7BCC_5EED;

// Row layouts: byte offset of each column (clause 1.3), then the slot size (the row rounded up
// to 8 bytes). Integers of numeric(n) are the smallest of 1, 2, 4 or 8 bytes that holds them;
// money is in cents, signed 8 bytes for numeric(12,2), 4 for numeric(6,2) and numeric(5,2);
// tax and discount numeric(4,4) in 1/10000 as 2 bytes; dates 8 bytes; text fields their size.
const W_NAME: u64 = 2;
const W_TAX: u64 = 83;
const W_YTD: u64 = 85;
const W_SLOT: u64 = 96;
const D_NAME: u64 = 3;
const D_TAX: u64 = 84;
const D_YTD: u64 = 86;
const D_NEXT_O_ID: u64 = 94;
const D_SLOT: u64 = 104;
const C_FIRST: u64 = 5;
const C_LAST: u64 = 23;
const C_CREDIT: u64 = 134;
const C_DISCOUNT: u64 = 144;
const C_BALANCE: u64 = 146;
const C_YTD_PAYMENT: u64 = 154;
const C_PAYMENT_CNT: u64 = 162;
const C_DELIVERY_CNT: u64 = 164;
const C_DATA: u64 = 166;
const C_SLOT: u64 = 672;
const H_SLOT: u64 = 48;
const NO_SLOT: u64 = 8;
const O_C_ID: u64 = 7;
const O_ENTRY_D: u64 = 9;
const O_CARRIER_ID: u64 = 17;
const O_OL_CNT: u64 = 18;
const O_ALL_LOCAL: u64 = 19;
const O_SLOT: u64 = 24;
const OL_I_ID: u64 = 8;
const OL_DELIVERY_D: u64 = 14;
const OL_AMOUNT: u64 = 23;
const OL_SLOT: u64 = 56;
const I_PRICE: u64 = 32;
const I_SLOT: u64 = 88;
const S_QUANTITY: u64 = 6;
const S_DIST: u64 = 8;
const S_YTD: u64 = 248;
const S_SLOT: u64 = 312;

/// The tables of a warehouse partition, in header order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum T {
    W = 0,
    D,
    C,
    H,
    No,
    O,
    Ol,
    S,
}
const TABLES: [T; 8] = [T::W, T::D, T::C, T::H, T::No, T::O, T::Ol, T::S];
const SLOTS: [u64; 8] = [W_SLOT, D_SLOT, C_SLOT, H_SLOT, NO_SLOT, O_SLOT, OL_SLOT, S_SLOT];

/// The indexes of a warehouse partition: CUSTOMER, customer by last name, ORDER, order by
/// customer, NEW-ORDER, ORDER-LINE, STOCK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum X {
    C = 0,
    Cl,
    O,
    Oc,
    No,
    Ol,
    S,
}
const INDEXES: [X; 7] = [X::C, X::Cl, X::O, X::Oc, X::No, X::Ol, X::S];
const INDEX_NAMES: [&str; 7] =
    ["CUSTOMER", "customer-by-last-name", "ORDER", "order-by-customer", "NEW-ORDER", "ORDER-LINE", "STOCK"];

/// TPC-C parameters (`--set workload.tpcc.<key>=v`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TpccConfig {
    /// Warehouses: `cores` (the default: one per core, `machine.cores`, resolved when the
    /// configuration is built) or a count, 1..=64.
    pub warehouses: String,
    /// Divides the customers per district (3,000) and the items and stock rows per warehouse
    /// (100,000) of clause 1.2.1, for short runs: 1..=100; the default 10 (300 customers per
    /// district, 10,000 items) populates one warehouse in well under a second.
    pub scale: u64,
    /// New orders (and payments) a warehouse's preallocated ORDER, NEW-ORDER, ORDER-LINE and
    /// HISTORY areas take beyond the initial rows (default 36,000: the default `run`, 70,000
    /// transactions, on one warehouse); a New-Order or Payment that finds its area full rolls
    /// back.
    pub orders_per_warehouse: u64,
    /// Non-memory instructions per row a transaction reads or writes (address arithmetic 2,
    /// field decode 4, update arithmetic 2, loop control 2); the B+tree descents charge their
    /// own (the `workload.btree` defaults).
    pub compute_cycles_per_row: u64,
}

impl Default for TpccConfig {
    fn default() -> Self {
        TpccConfig { warehouses: "cores".into(), scale: 10, orders_per_warehouse: 36_000, compute_cycles_per_row: 10 }
    }
}

impl TpccConfig {
    /// Range checks; one-line errors naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        if self.warehouses != "cores" {
            match self.warehouses.parse::<u64>() {
                Ok(n) if (1..=MAX_WAREHOUSES).contains(&n) => {}
                _ => {
                    return Err(format!(
                        "workload.tpcc.warehouses = {}: allowed cores or 1..={MAX_WAREHOUSES}",
                        self.warehouses
                    ))
                }
            }
        }
        let check = |k: &str, v: u64, lo: u64, hi: u64| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("workload.tpcc.{k} = {v}: allowed {lo}..={hi}"))
            }
        };
        check("scale", self.scale, 1, 100)?;
        check("orders_per_warehouse", self.orders_per_warehouse, 1, 1_000_000)?;
        check("compute_cycles_per_row", self.compute_cycles_per_row, 0, 1_000_000)
    }

    /// `warehouses = cores` becomes the core count (called where the configuration is built).
    pub fn resolve(&mut self, cores: u32) {
        if self.warehouses == "cores" {
            self.warehouses = cores.to_string();
        }
    }

    /// The warehouse count (an unresolved `cores`: one).
    pub fn warehouse_count(&self) -> u64 {
        self.warehouses.parse().unwrap_or(1)
    }
}

/// NURand(A, x, y) of clause 2.1.6: `(((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x`.
pub fn nurand(rng: &mut Rng, a: u64, x: u64, y: u64, c: u64) -> u64 {
    (((rng.below(a + 1) | (x + rng.below(y - x + 1))) + c) % (y - x + 1)) + x
}

/// A uniform draw from `lo..=hi`.
fn uniform(rng: &mut Rng, lo: u64, hi: u64) -> u64 {
    lo + rng.below(hi - lo + 1)
}

/// The last name of number `n` (0..=999), clause 4.3.2.3, into 16 bytes (zero padded).
pub fn last_name(n: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    let mut at = 0;
    for digit in [n / 100, n / 10 % 10, n % 10] {
        for &b in SYLLABLES[digit as usize].as_bytes() {
            out[at] = b;
            at += 1;
        }
    }
    out
}

/// The five transactions (clause 2), in the order of [`Tpcc::mix`].
pub const TX_NAMES: [&str; 5] = ["new-order", "payment", "order-status", "delivery", "stock-level"];

/// Where each region of a partition lies (offsets from the partition's start).
#[derive(Clone, Debug)]
struct Lay {
    /// Per table, its slab (addresses relative to the partition).
    tabs: [Slab; 8],
    /// Per index, its region's offset.
    idx: [u64; 7],
    /// Bytes of a warehouse partition.
    stride: u64,
    /// The global partition: ITEM's slab and its index's offset, and its bytes.
    item: Slab,
    item_idx: u64,
    global: u64,
}

fn align(x: u64) -> u64 {
    x.div_ceil(4096) * 4096
}

/// A B+tree index of at most `keys` entries.
fn tree(keys: u64) -> BTree {
    BTree::new(&BTreeConfig { key_space: keys.max(16), ..BTreeConfig::default() })
}

/// The TPC-C workload: its shape, its indexes' descent state and its driver state.
#[derive(Clone)]
pub struct Tpcc {
    w: u64,
    cust: u64,
    items: u64,
    names: u64,
    row_cycles: u64,
    /// Boxed, with the ITEM index, so that a built workload stays small beside the others.
    lay: Box<Lay>,
    trees: Vec<BTree>,
    item_tree: Box<BTree>,
    /// The running core and the core count (one core: 0 of 1).
    core: u64,
    cores: u64,
    /// A date: transactions this driver has begun.
    clock: u64,
    /// Per transaction type, committed and rolled back (New-Order's unused item, a full area).
    pub mix: [u64; 5],
    pub rolled_back: [u64; 5],
    scratch: Vec<(u64, u64)>,
}

/// What one warehouse's transaction touched, for locking.
struct Locks {
    ids: [u64; MAX_OL as usize + 1],
    n: usize,
}

impl Locks {
    fn new() -> Locks {
        Locks { ids: [0; MAX_OL as usize + 1], n: 0 }
    }
    fn add(&mut self, w: u64) {
        self.ids[self.n] = w;
        self.n += 1;
    }
    /// Take the locks of the warehouses added, ascending, once each.
    fn take<P: Pm>(&mut self, pm: &mut P, t: &Tpcc) {
        if !pm.concurrent() {
            return;
        }
        let ids = &mut self.ids[..self.n];
        ids.sort_unstable();
        let mut last = u64::MAX;
        for &w in ids.iter() {
            if w != last {
                pm.lock(t.wbase(w) / 64);
                last = w;
            }
        }
    }
}

fn rd(data: &[u8], a: u64, n: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&data[a as usize..a as usize + n]);
    u64::from_le_bytes(b)
}

impl Tpcc {
    pub fn new(cfg: &TpccConfig) -> Tpcc {
        let w = cfg.warehouse_count();
        let cust = CUSTOMERS / cfg.scale;
        let items = ITEMS / cfg.scale;
        let orders = DISTRICTS * cust + cfg.orders_per_warehouse;
        let caps = [1, DISTRICTS, DISTRICTS * cust, orders, orders, orders, orders * MAX_OL, items];
        let keys = [DISTRICTS * cust, DISTRICTS * cust, orders, orders, orders, orders * MAX_OL, items];
        let trees: Vec<BTree> = keys.iter().map(|&k| tree(k)).collect();
        let mut at = 4096;
        let tabs = TABLES.map(|t| {
            let s = Slab::new(Addr(16 * t as u64), Addr(at), SLOTS[t as usize], caps[t as usize]);
            at = align(at + s.bytes());
            s
        });
        let idx = INDEXES.map(|x| {
            let here = at;
            at = align(at + trees[x as usize].data_bytes());
            here
        });
        let item = Slab::new(Addr(0), Addr(4096), I_SLOT, items);
        let item_tree = tree(items);
        let item_idx = align(4096 + item.bytes());
        let global = align(item_idx + item_tree.data_bytes());
        Tpcc {
            w,
            cust,
            items,
            names: cust.min(1000),
            row_cycles: cfg.compute_cycles_per_row,
            lay: Box::new(Lay { tabs, idx, stride: at, item, item_idx, global }),
            trees,
            item_tree: Box::new(item_tree),
            core: 0,
            cores: 1,
            clock: 0,
            mix: [0; 5],
            rolled_back: [0; 5],
            scratch: Vec::new(),
        }
    }

    pub fn data_bytes(&self) -> u64 {
        self.lay.global + self.w * self.lay.stride
    }

    /// Core `core` of `cores`: its home warehouses are those `w` with `w % cores == core`
    /// (with fewer warehouses than cores, warehouse `core % warehouses`).
    pub fn for_core(&mut self, core: usize, cores: usize) {
        (self.core, self.cores) = (core as u64, cores as u64);
    }

    /// The address of O_OL_CNT of district 1's first order (populated delivered, never
    /// written by a transaction): the crash checker's tests break condition 4 there.
    #[cfg(test)]
    pub(crate) fn first_order_line_count_at(&self) -> u64 {
        self.row(0, T::O, 0).0 + O_OL_CNT
    }

    fn wbase(&self, w: u64) -> u64 {
        self.lay.global + w * self.lay.stride
    }

    /// The absolute address of slot `slot` of table `t` of warehouse `w`.
    fn row(&self, w: u64, t: T, slot: u64) -> Addr {
        let s = &self.lay.tabs[t as usize];
        Addr(self.wbase(w) + s.base.0 + slot * s.slot_bytes)
    }

    /// Take a row of table `t` of warehouse `w`: its slot number, `None` when the area is full.
    fn alloc<P: Pm>(&self, pm: &mut P, w: u64, t: T) -> Option<u64> {
        let s = self.lay.tabs[t as usize];
        let a = s.alloc(&mut Part { pm, base: self.wbase(w) })?;
        Some((a.0 - s.base.0) / s.slot_bytes)
    }

    fn free<P: Pm>(&self, pm: &mut P, w: u64, t: T, slot: u64) {
        let s = self.lay.tabs[t as usize];
        s.free(&mut Part { pm, base: self.wbase(w) }, s.base + slot * s.slot_bytes);
    }

    fn insert<P: Pm>(&mut self, pm: &mut P, w: u64, x: X, key: u64, slot: u64) {
        let base = self.wbase(w) + self.lay.idx[x as usize];
        self.trees[x as usize].insert(&mut Part { pm, base }, key, slot as u32);
    }

    fn get<P: Pm>(&mut self, pm: &mut P, w: u64, x: X, key: u64) -> Option<u64> {
        let base = self.wbase(w) + self.lay.idx[x as usize];
        self.trees[x as usize].lookup(&mut Part { pm, base }, key).map(u64::from)
    }

    fn ceiling<P: Pm>(&mut self, pm: &mut P, w: u64, x: X, key: u64) -> Option<(u64, u64)> {
        let base = self.wbase(w) + self.lay.idx[x as usize];
        self.trees[x as usize].ceiling(&mut Part { pm, base }, key).map(|(k, v)| (k, v as u64))
    }

    fn item<P: Pm>(&mut self, pm: &mut P, i: u64) -> Option<Addr> {
        let base = self.lay.item_idx;
        let slot = self.item_tree.lookup(&mut Part { pm, base }, i)?;
        Some(self.lay.item.base + slot as u64 * I_SLOT)
    }

    /// A customer's row: its slot, looked up by id.
    fn customer<P: Pm>(&mut self, pm: &mut P, w: u64, d: u64, c: u64) -> u64 {
        self.get(pm, w, X::C, cust_key(d, c)).expect("tpcc: every customer id of 1..=customers is indexed")
    }

    /// The customer of clause 2.5.2.2 chosen by last name `name` in district `d`: the one at
    /// position ceil(n / 2) of those with that name sorted by C_FIRST; `(id, slot)`.
    fn by_last_name<P: Pm>(&mut self, pm: &mut P, w: u64, d: u64, name: u64) -> Option<(u64, u64)> {
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        let prefix = (d << 16) | name;
        let mut key = prefix << 16;
        while let Some((k, slot)) = self.ceiling(pm, w, X::Cl, key) {
            if k >> 16 != prefix {
                break;
            }
            scratch.push((k & 0xFFFF, slot));
            key = k + 1;
        }
        let mut firsts: Vec<([u8; 16], u64, u64)> = scratch
            .iter()
            .map(|&(c, slot)| {
                let mut f = [0u8; 16];
                pm.load(self.row(w, T::C, slot) + C_FIRST, &mut f);
                pm.compute(self.row_cycles);
                (f, c, slot)
            })
            .collect();
        self.scratch = scratch;
        firsts.sort_unstable();
        let n = firsts.len();
        (n > 0).then(|| (firsts[(n - 1) / 2].1, firsts[(n - 1) / 2].2))
    }

    /// Warehouse of this core's next transaction (its terminal's home warehouse).
    fn home(&self, rng: &mut Rng) -> u64 {
        if self.w <= self.cores {
            return self.core % self.w;
        }
        let owned = (self.w - self.core).div_ceil(self.cores);
        self.core + self.cores * rng.below(owned)
    }

    /// A warehouse other than `w` (itself with one warehouse).
    fn other(&self, rng: &mut Rng, w: u64) -> u64 {
        if self.w == 1 {
            return w;
        }
        let o = rng.below(self.w - 1);
        if o >= w {
            o + 1
        } else {
            o
        }
    }

    /// Run one transaction of the mix of clause 5.2.3: New-Order 45 %, Payment 43 %,
    /// Order-Status, Delivery and Stock-Level 4 % each. `abort`: roll it back at its end.
    #[inline]
    pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
        self.clock += 1;
        let r = rng.below(100);
        let (kind, done) = match r {
            0..45 => (0, self.new_order(pm, rng)),
            45..88 => (1, self.payment(pm, rng)),
            88..92 => (2, self.order_status(pm, rng)),
            92..96 => (3, self.delivery(pm, rng)),
            _ => (4, self.stock_level(pm, rng)),
        };
        if !done {
            pm.abort();
            self.rolled_back[kind] += 1;
        } else if abort {
            pm.abort();
        } else {
            pm.commit();
            self.mix[kind] += 1;
        }
    }
}

fn cust_key(d: u64, c: u64) -> u64 {
    (d << 16) | c
}
fn last_key(d: u64, name: u64, c: u64) -> u64 {
    (((d << 16) | name) << 16) | c
}
fn order_key(d: u64, o: u64) -> u64 {
    (d << 32) | o
}
fn order_cust_key(d: u64, c: u64, o: u64) -> u64 {
    (d << 48) | (c << 32) | (u32::MAX as u64 - o)
}
fn line_key(d: u64, o: u64, ol: u64) -> u64 {
    (d << 36) | (o << 4) | ol
}

mod populate;
mod txs;
mod verify;

#[cfg(test)]
mod tests;
