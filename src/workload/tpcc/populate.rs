//! The initial database of clause 4.3.3.1, written through the same code paths as the
//! transactions (slab allocations, B+tree inserts) on the native back end.

use super::*;

/// A row being built: its bytes, fields put at their offsets.
struct Row<const N: usize>([u8; N]);

impl<const N: usize> Row<N> {
    fn new() -> Self {
        Row([0u8; N])
    }
    fn int(&mut self, off: u64, v: u64, n: usize) -> &mut Self {
        self.0[off as usize..off as usize + n].copy_from_slice(&v.to_le_bytes()[..n]);
        self
    }
    fn bytes(&mut self, off: u64, b: &[u8]) -> &mut Self {
        self.0[off as usize..off as usize + b.len()].copy_from_slice(b);
        self
    }
    /// A random a-string (clause 4.3.2.2) of `lo..=hi` characters in a field of `n` bytes.
    fn text(&mut self, rng: &mut Rng, off: u64, lo: u64, hi: u64) -> &mut Self {
        let len = uniform(rng, lo, hi);
        for k in 0..len {
            self.0[(off + k) as usize] = ALNUM[rng.below(ALNUM.len() as u64) as usize];
        }
        self
    }
    /// [`Row::text`] with "ORIGINAL" at a random place in 10 % of rows (clause 4.3.3.1, I_DATA
    /// and S_DATA).
    fn data(&mut self, rng: &mut Rng, off: u64) -> &mut Self {
        let len = uniform(rng, 26, 50);
        self.text(rng, off, len, len);
        if rng.below(10) == 0 {
            let at = off + rng.below(len - 8 + 1);
            self.bytes(at, b"ORIGINAL");
        }
        self
    }
    /// The address columns of clause 4.3.3.1: two streets, city (10..20), state 2, zip 9.
    fn address(&mut self, rng: &mut Rng, off: u64) -> &mut Self {
        self.text(rng, off, 10, 20).text(rng, off + 20, 10, 20).text(rng, off + 40, 10, 20).text(rng, off + 60, 2, 2);
        let zip = rng.below(10_000);
        self.bytes(off + 62, format!("{zip:04}11111").as_bytes())
    }
}

const ALNUM: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

impl Tpcc {
    /// Build the initial database in `data` (all zero on entry).
    pub fn populate(&mut self, data: &mut [u8]) {
        let mut pm = Native::new(data);
        let mut rng = Rng::new(POPULATE_SEED);
        pm.begin();
        self.item_tree.init_empty(&mut Part { pm: &mut pm, base: self.lay.item_idx });
        for w in 0..self.w {
            for x in INDEXES {
                let base = self.wbase(w) + self.lay.idx[x as usize];
                self.trees[x as usize].init_empty(&mut Part { pm: &mut pm, base });
            }
        }
        pm.commit();
        for i in 1..=self.items {
            let mut r = Row::<{ I_SLOT as usize }>::new();
            r.int(0, i, 4).int(4, uniform(&mut rng, 1, 10_000), 4).text(&mut rng, 8, 14, 24);
            r.int(I_PRICE, uniform(&mut rng, 100, 10_000), 4).data(&mut rng, 36);
            pm.begin();
            let a = self.lay.item.alloc(&mut pm).expect("the ITEM slab holds every item");
            pm.store(a, &r.0);
            let slot = (a.0 - self.lay.item.base.0) / I_SLOT;
            self.item_tree.insert(&mut Part { pm: &mut pm, base: self.lay.item_idx }, i, slot as u32);
            pm.commit();
        }
        for w in 0..self.w {
            self.populate_warehouse(&mut pm, &mut rng, w);
            for d in 1..=DISTRICTS {
                self.populate_district(&mut pm, &mut rng, w, d);
            }
        }
    }

    /// Store `bytes` as a new row of table `t` of warehouse `w`; its slot.
    fn put<P: Pm>(&self, pm: &mut P, w: u64, t: T, bytes: &[u8]) -> u64 {
        let slot = self.alloc(pm, w, t).expect("tpcc: the populated rows fit the preallocated areas");
        pm.store(self.row(w, t, slot), bytes);
        slot
    }

    /// WAREHOUSE's row and the warehouse's STOCK.
    fn populate_warehouse<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, w: u64) {
        let mut r = Row::<{ W_SLOT as usize }>::new();
        r.int(0, w + 1, 2).text(rng, W_NAME, 6, 10).address(rng, 12);
        r.int(W_TAX, rng.below(2001), 2).int(W_YTD, 30_000_000, 8);
        pm.begin();
        self.put(pm, w, T::W, &r.0);
        pm.commit();
        for i in 1..=self.items {
            let mut r = Row::<{ S_SLOT as usize }>::new();
            r.int(0, i, 4).int(4, w + 1, 2).int(S_QUANTITY, uniform(rng, 10, 100), 2);
            for k in 0..DISTRICTS {
                r.text(rng, S_DIST + 24 * k, 24, 24);
            }
            r.data(rng, 256);
            pm.begin();
            let slot = self.put(pm, w, T::S, &r.0);
            self.insert(pm, w, X::S, i, slot);
            pm.commit();
        }
    }

    /// A DISTRICT's row, its CUSTOMERs with their HISTORY rows, its ORDERs, ORDER-LINEs and
    /// NEW-ORDERs (the last 900 of 3,000 at scale 1: the same share scaled).
    fn populate_district<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, w: u64, d: u64) {
        let mut r = Row::<{ D_SLOT as usize }>::new();
        r.int(0, d, 1).int(1, w + 1, 2).text(rng, D_NAME, 6, 10).address(rng, 13);
        r.int(D_TAX, rng.below(2001), 2).int(D_YTD, 3_000_000, 8).int(D_NEXT_O_ID, self.cust + 1, 4);
        pm.begin();
        self.put(pm, w, T::D, &r.0);
        pm.commit();
        for c in 1..=self.cust {
            self.populate_customer(pm, rng, w, d, c);
        }
        // O_C_ID: a random permutation of the customer ids.
        let mut perm: Vec<u64> = (1..=self.cust).collect();
        for k in (1..perm.len()).rev() {
            perm.swap(k, rng.below(k as u64 + 1) as usize);
        }
        let first_new = self.cust - self.cust * 3 / 10 + 1;
        for o in 1..=self.cust {
            pm.begin();
            self.populate_order(pm, rng, w, d, o, perm[o as usize - 1], o < first_new);
            if o >= first_new {
                let slot = self.put(pm, w, T::No, &new_order_row(w, d, o));
                self.insert(pm, w, X::No, order_key(d, o), slot);
            }
            pm.commit();
        }
    }

    fn populate_customer<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, w: u64, d: u64, c: u64) {
        let name = if c <= self.names { c - 1 } else { nurand(rng, 255, 0, 999, C_LAST_LOAD) % self.names };
        let mut r = Row::<{ C_SLOT as usize }>::new();
        r.int(0, c, 2).int(2, d, 1).int(3, w + 1, 2).text(rng, C_FIRST, 8, 16).bytes(21, b"OE");
        r.bytes(C_LAST, &last_name(name)).address(rng, 39).text(rng, 110, 16, 16).int(126, 0, 8);
        r.bytes(C_CREDIT, if rng.below(10) == 0 { b"BC" } else { b"GC" }).int(136, 5_000_000, 8);
        r.int(C_DISCOUNT, rng.below(5001), 2).int(C_BALANCE, (-1000i64) as u64, 8).int(C_YTD_PAYMENT, 1000, 8);
        r.int(C_PAYMENT_CNT, 1, 2).text(rng, C_DATA, 300, 500);
        let mut h = Row::<{ H_SLOT as usize }>::new();
        h.int(0, c, 2).int(2, d, 1).int(3, w + 1, 2).int(5, d, 1).int(6, w + 1, 2).int(16, 1000, 4);
        h.text(rng, 20, 12, 24);
        pm.begin();
        let slot = self.put(pm, w, T::C, &r.0);
        self.insert(pm, w, X::C, cust_key(d, c), slot);
        self.insert(pm, w, X::Cl, last_key(d, name, c), slot);
        self.put(pm, w, T::H, &h.0);
        pm.commit();
    }

    #[allow(clippy::too_many_arguments)]
    fn populate_order<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, w: u64, d: u64, o: u64, c: u64, delivered: bool) {
        let cnt = uniform(rng, 5, MAX_OL);
        let carrier = if delivered { uniform(rng, 1, 10) } else { 0 };
        let slot = self.put(pm, w, T::O, &order_row(w, d, o, c, 0, carrier, cnt, 1));
        self.insert(pm, w, X::O, order_key(d, o), slot);
        self.insert(pm, w, X::Oc, order_cust_key(d, c, o), slot);
        for ol in 1..=cnt {
            let amount = if delivered { 0 } else { uniform(rng, 1, 999_999) };
            let mut r = line_row(w, d, o, ol, uniform(rng, 1, self.items), w, 5, amount);
            r.text(rng, 27, 24, 24);
            let slot = self.put(pm, w, T::Ol, &r.0);
            self.insert(pm, w, X::Ol, line_key(d, o, ol), slot);
        }
    }
}

/// A NEW-ORDER row.
pub(super) fn new_order_row(w: u64, d: u64, o: u64) -> [u8; NO_SLOT as usize] {
    let mut r = Row::<{ NO_SLOT as usize }>::new();
    r.int(0, o, 4).int(4, d, 1).int(5, w + 1, 2);
    r.0
}

/// An ORDER row.
#[allow(clippy::too_many_arguments)]
pub(super) fn order_row(
    w: u64,
    d: u64,
    o: u64,
    c: u64,
    date: u64,
    carrier: u64,
    cnt: u64,
    local: u64,
) -> [u8; O_SLOT as usize] {
    let mut r = Row::<{ O_SLOT as usize }>::new();
    r.int(0, o, 4).int(4, d, 1).int(5, w + 1, 2).int(O_C_ID, c, 2).int(O_ENTRY_D, date, 8);
    r.int(O_CARRIER_ID, carrier, 1).int(O_OL_CNT, cnt, 1).int(O_ALL_LOCAL, local, 1);
    r.0
}

/// An ORDER-LINE row (OL_DIST_INFO left zero), not delivered.
#[allow(clippy::too_many_arguments)]
fn line_row(w: u64, d: u64, o: u64, ol: u64, i: u64, sw: u64, qty: u64, amount: u64) -> Row<{ OL_SLOT as usize }> {
    let mut r = Row::<{ OL_SLOT as usize }>::new();
    r.int(0, o, 4).int(4, d, 1).int(5, w + 1, 2).int(7, ol, 1).int(OL_I_ID, i, 4).int(12, sw + 1, 2);
    r.int(22, qty, 1).int(OL_AMOUNT, amount, 4);
    r
}

/// An ORDER-LINE row with its OL_DIST_INFO.
#[allow(clippy::too_many_arguments)]
pub(super) fn order_line_row(
    w: u64,
    d: u64,
    o: u64,
    ol: u64,
    i: u64,
    sw: u64,
    qty: u64,
    amount: u64,
    dist: &[u8; 24],
) -> [u8; OL_SLOT as usize] {
    let mut r = line_row(w, d, o, ol, i, sw, qty, amount);
    r.bytes(27, dist);
    r.0
}

/// A HISTORY row.
#[allow(clippy::too_many_arguments)]
pub(super) fn history_row(
    c: u64,
    cd: u64,
    cw: u64,
    d: u64,
    w: u64,
    date: u64,
    amount: u64,
    data: &[u8; 24],
) -> [u8; H_SLOT as usize] {
    let mut r = Row::<{ H_SLOT as usize }>::new();
    r.int(0, c, 2).int(2, cd, 1).int(3, cw + 1, 2).int(5, d, 1).int(6, w + 1, 2).int(8, date, 8).int(16, amount, 4);
    r.bytes(20, data);
    r.0
}
