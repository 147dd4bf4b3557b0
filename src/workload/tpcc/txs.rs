//! The five transactions of clause 2. Each returns whether it reached its end (`false`: it
//! rolls back: New-Order's unused item, clause 2.4.2.3, or a full preallocated area); the
//! caller commits or aborts. Each begins the transaction and locks its warehouses itself.

use super::populate::{history_row, new_order_row, order_line_row, order_row};
use super::*;

fn le(b: &[u8]) -> u64 {
    let mut x = [0u8; 8];
    x[..b.len()].copy_from_slice(b);
    u64::from_le_bytes(x)
}

/// A customer chosen as clause 2.5.1.2 and 2.6.1.2 say: by last name 60 %, by id 40 %.
#[derive(Clone, Copy)]
enum Who {
    Name(u64),
    Id(u64),
}

impl Tpcc {
    fn draw_customer(&self, rng: &mut Rng) -> Who {
        if uniform(rng, 1, 100) <= 60 {
            Who::Name(nurand(rng, 255, 0, 999, C_LAST_RUN) % self.names)
        } else {
            Who::Id(nurand(rng, 1023, 1, self.cust, C_ID))
        }
    }

    /// The customer `who` of district `d` of warehouse `w`: `(id, slot)`.
    fn find<P: Pm>(&mut self, pm: &mut P, w: u64, d: u64, who: Who, rng_id: u64) -> (u64, u64) {
        if let Who::Name(n) = who {
            if let Some(found) = self.by_last_name(pm, w, d, n) {
                return found;
            }
        }
        let c = if let Who::Id(c) = who { c } else { rng_id };
        (c, self.customer(pm, w, d, c))
    }

    fn load_bytes<P: Pm, const N: usize>(&self, pm: &mut P, a: Addr) -> [u8; N] {
        let mut b = [0u8; N];
        pm.load(a, &mut b);
        pm.compute(self.row_cycles);
        b
    }

    /// New-Order (clause 2.4): 5 to 15 items, each from a remote warehouse with probability
    /// 1 % (with more than one warehouse); 1 % of them name an unused item last and roll back.
    pub(super) fn new_order<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng) -> bool {
        let w = self.home(rng);
        let d = uniform(rng, 1, DISTRICTS);
        let c = nurand(rng, 1023, 1, self.cust, C_ID);
        let n = uniform(rng, 5, MAX_OL) as usize;
        let rollback = uniform(rng, 1, 100) == 1;
        let mut lines = [(0u64, 0u64, 0u64); MAX_OL as usize];
        let mut locks = Locks::new();
        locks.add(w);
        let mut all_local = 1;
        for (k, l) in lines[..n].iter_mut().enumerate() {
            let i = if rollback && k == n - 1 { self.items + 1 } else { nurand(rng, 8191, 1, self.items, C_OL_I_ID) };
            let sw = if self.w > 1 && uniform(rng, 1, 100) == 1 { self.other(rng, w) } else { w };
            all_local &= (sw == w) as u64;
            *l = (i, sw, uniform(rng, 1, 10));
            locks.add(sw);
        }
        pm.begin();
        locks.take(pm, self);
        let _w_tax: [u8; 2] = self.load_bytes(pm, self.row(w, T::W, 0) + W_TAX);
        let da = self.row(w, T::D, d - 1);
        // D_TAX, D_YTD, D_NEXT_O_ID: 14 bytes.
        let dist: [u8; 14] = self.load_bytes(pm, da + D_TAX);
        let o = le(&dist[(D_NEXT_O_ID - D_TAX) as usize..]);
        pm.store_u32(da + D_NEXT_O_ID, o as u32 + 1);
        let cs = self.customer(pm, w, d, c);
        let _cust: [u8; 32] = self.load_bytes(pm, self.row(w, T::C, cs) + C_LAST);
        let Some(os) = self.alloc(pm, w, T::O) else { return false };
        pm.store(self.row(w, T::O, os), &order_row(w, d, o, c, self.clock, 0, n as u64, all_local));
        pm.compute(self.row_cycles);
        self.insert(pm, w, X::O, order_key(d, o), os);
        self.insert(pm, w, X::Oc, order_cust_key(d, c, o), os);
        let Some(ns) = self.alloc(pm, w, T::No) else { return false };
        pm.store(self.row(w, T::No, ns), &new_order_row(w, d, o));
        self.insert(pm, w, X::No, order_key(d, o), ns);
        for (k, &(i, sw, qty)) in lines[..n].iter().enumerate() {
            if !self.order_line(pm, (w, d, o, k as u64 + 1), i, sw, qty) {
                return false;
            }
        }
        true
    }

    /// One item of New-Order: ITEM, STOCK (updated), the ORDER-LINE row. `false`: unused item.
    fn order_line<P: Pm>(
        &mut self,
        pm: &mut P,
        (w, d, o, ol): (u64, u64, u64, u64),
        i: u64,
        sw: u64,
        qty: u64,
    ) -> bool {
        let Some(ia) = self.item(pm, i) else { return false };
        let item: [u8; 54] = self.load_bytes(pm, ia + I_PRICE);
        let price = le(&item[..4]);
        let ss = self.get(pm, sw, X::S, i).expect("tpcc: every item has a stock row in every warehouse");
        let sa = self.row(sw, T::S, ss);
        let mut q = le(&self.load_bytes::<P, 2>(pm, sa + S_QUANTITY));
        let info: [u8; 24] = self.load_bytes(pm, sa + S_DIST + 24 * (d - 1));
        let _data: [u8; 50] = self.load_bytes(pm, sa + 256);
        q = if q >= qty + 10 { q - qty } else { q + 91 - qty };
        pm.store(sa + S_QUANTITY, &(q as u16).to_le_bytes());
        // S_YTD, S_ORDER_CNT, S_REMOTE_CNT: 8 bytes.
        let old: [u8; 8] = self.load_bytes(pm, sa + S_YTD);
        let mut counts = [0u8; 8];
        counts[..4].copy_from_slice(&((le(&old[..4]) + qty) as u32).to_le_bytes());
        counts[4..6].copy_from_slice(&((le(&old[4..6]) + 1) as u16).to_le_bytes());
        counts[6..8].copy_from_slice(&((le(&old[6..8]) + (sw != w) as u64) as u16).to_le_bytes());
        pm.store(sa + S_YTD, &counts);
        let Some(ls) = self.alloc(pm, w, T::Ol) else { return false };
        pm.store(self.row(w, T::Ol, ls), &order_line_row(w, d, o, ol, i, sw, qty, qty * price, &info));
        pm.compute(self.row_cycles);
        self.insert(pm, w, X::Ol, line_key(d, o, ol), ls);
        true
    }

    /// Payment (clause 2.5): the customer of a remote warehouse 15 % of the time (with more
    /// than one warehouse), chosen by last name 60 %.
    pub(super) fn payment<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng) -> bool {
        let w = self.home(rng);
        let d = uniform(rng, 1, DISTRICTS);
        let (cw, cd) = if self.w > 1 && uniform(rng, 1, 100) > 85 {
            (self.other(rng, w), uniform(rng, 1, DISTRICTS))
        } else {
            (w, d)
        };
        let who = self.draw_customer(rng);
        let fallback = nurand(rng, 1023, 1, self.cust, C_ID);
        let amount = uniform(rng, 100, 500_000);
        pm.begin();
        let mut locks = Locks::new();
        locks.add(w);
        locks.add(cw);
        locks.take(pm, self);
        let wa = self.row(w, T::W, 0);
        let ytd = pm.load_u64(wa + W_YTD);
        pm.store_u64(wa + W_YTD, ytd + amount);
        let w_name: [u8; 10] = self.load_bytes(pm, wa + W_NAME);
        let da = self.row(w, T::D, d - 1);
        let ytd = pm.load_u64(da + D_YTD);
        pm.store_u64(da + D_YTD, ytd + amount);
        let d_name: [u8; 10] = self.load_bytes(pm, da + D_NAME);
        let (c, cs) = self.find(pm, cw, cd, who, fallback);
        let ca = self.row(cw, T::C, cs);
        // C_BALANCE, C_YTD_PAYMENT, C_PAYMENT_CNT: 18 bytes.
        let old: [u8; 18] = self.load_bytes(pm, ca + C_BALANCE);
        let mut money = [0u8; 18];
        money[..8].copy_from_slice(&(le(&old[..8]).wrapping_sub(amount)).to_le_bytes());
        money[8..16].copy_from_slice(&(le(&old[8..16]) + amount).to_le_bytes());
        money[16..18].copy_from_slice(&((le(&old[16..18]) + 1) as u16).to_le_bytes());
        pm.store(ca + C_BALANCE, &money);
        let credit: [u8; 2] = self.load_bytes(pm, ca + C_CREDIT);
        if &credit == b"BC" {
            let old: [u8; 500] = self.load_bytes(pm, ca + C_DATA);
            let mut new = [0u8; 500];
            let head = format!("{c} {cd} {} {d} {} {amount} ", cw + 1, w + 1);
            new[..head.len()].copy_from_slice(head.as_bytes());
            new[head.len()..].copy_from_slice(&old[..500 - head.len()]);
            pm.store(ca + C_DATA, &new);
        }
        let mut h_data = [b' '; 24];
        h_data[..10].copy_from_slice(&w_name);
        h_data[14..].copy_from_slice(&d_name);
        let Some(hs) = self.alloc(pm, w, T::H) else { return false };
        pm.store(self.row(w, T::H, hs), &history_row(c, cd, cw, d, w, self.clock, amount, &h_data));
        pm.compute(self.row_cycles);
        true
    }

    /// Order-Status (clause 2.6): a customer's last order and its lines; reads only.
    pub(super) fn order_status<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng) -> bool {
        let w = self.home(rng);
        let d = uniform(rng, 1, DISTRICTS);
        let who = self.draw_customer(rng);
        let fallback = nurand(rng, 1023, 1, self.cust, C_ID);
        pm.begin();
        let mut locks = Locks::new();
        locks.add(w);
        locks.take(pm, self);
        let (c, cs) = self.find(pm, w, d, who, fallback);
        let _cust: [u8; 8] = self.load_bytes(pm, self.row(w, T::C, cs) + C_BALANCE);
        let Some((k, os)) = self.ceiling(pm, w, X::Oc, order_cust_key(d, c, u32::MAX as u64)) else { return true };
        if k >> 32 != (d << 16) | c {
            return true;
        }
        let o = u32::MAX as u64 - (k & u32::MAX as u64);
        let order: [u8; O_SLOT as usize] = self.load_bytes(pm, self.row(w, T::O, os));
        for ol in 1..=order[O_OL_CNT as usize] as u64 {
            if let Some(ls) = self.get(pm, w, X::Ol, line_key(d, o, ol)) {
                let _line: [u8; 24] = self.load_bytes(pm, self.row(w, T::Ol, ls) + OL_I_ID);
            }
        }
        true
    }

    /// Delivery (clause 2.7): in each district, the oldest NEW-ORDER row is deleted, its order
    /// given a carrier, its lines a delivery date, its customer the lines' amount.
    pub(super) fn delivery<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng) -> bool {
        let w = self.home(rng);
        let carrier = uniform(rng, 1, 10);
        pm.begin();
        let mut locks = Locks::new();
        locks.add(w);
        locks.take(pm, self);
        for d in 1..=DISTRICTS {
            let Some((k, ns)) = self.ceiling(pm, w, X::No, order_key(d, 0)) else { continue };
            if k >> 32 != d {
                continue;
            }
            let o = k & u32::MAX as u64;
            let base = self.wbase(w) + self.lay.idx[X::No as usize];
            self.trees[X::No as usize].delete(&mut Part { pm, base }, k);
            self.free(pm, w, T::No, ns);
            let os = self.get(pm, w, X::O, order_key(d, o)).expect("tpcc: a NEW-ORDER row's order exists");
            let oa = self.row(w, T::O, os);
            let order: [u8; O_SLOT as usize] = self.load_bytes(pm, oa);
            pm.store(oa + O_CARRIER_ID, &[carrier as u8]);
            let mut sum = 0;
            for ol in 1..=order[O_OL_CNT as usize] as u64 {
                let ls = self.get(pm, w, X::Ol, line_key(d, o, ol)).expect("tpcc: an order's lines exist");
                let la = self.row(w, T::Ol, ls);
                sum += le(&self.load_bytes::<P, 4>(pm, la + OL_AMOUNT));
                pm.store_u64(la + OL_DELIVERY_D, self.clock);
            }
            let c = le(&order[O_C_ID as usize..O_C_ID as usize + 2]);
            let cs = self.customer(pm, w, d, c);
            let ca = self.row(w, T::C, cs);
            let balance = pm.load_u64(ca + C_BALANCE);
            pm.store_u64(ca + C_BALANCE, balance.wrapping_add(sum));
            let n = le(&self.load_bytes::<P, 2>(pm, ca + C_DELIVERY_CNT));
            pm.store(ca + C_DELIVERY_CNT, &((n + 1) as u16).to_le_bytes());
        }
        true
    }

    /// Stock-Level (clause 2.8): the distinct items of a district's last 20 orders whose stock
    /// is below a threshold of 10 to 20; reads only.
    pub(super) fn stock_level<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng) -> bool {
        let w = self.home(rng);
        let d = uniform(rng, 1, DISTRICTS);
        let threshold = uniform(rng, 10, 20);
        pm.begin();
        let mut locks = Locks::new();
        locks.add(w);
        locks.take(pm, self);
        let next = pm.load_u32(self.row(w, T::D, d - 1) + D_NEXT_O_ID) as u64;
        let mut items = std::mem::take(&mut self.scratch);
        items.clear();
        let (mut key, end) = (line_key(d, next.saturating_sub(20), 0), line_key(d, next, 0));
        while let Some((k, ls)) = self.ceiling(pm, w, X::Ol, key) {
            if k >= end {
                break;
            }
            items.push((pm.load_u32(self.row(w, T::Ol, ls) + OL_I_ID) as u64, 0));
            pm.compute(self.row_cycles);
            key = k + 1;
        }
        items.sort_unstable();
        items.dedup();
        let mut low = 0;
        for &(i, _) in &items {
            if let Some(ss) = self.get(pm, w, X::S, i) {
                low += (pm.load_u16_at(self.row(w, T::S, ss) + S_QUANTITY) < threshold) as u64;
            }
        }
        // `low` is the count the terminal shows (clause 2.8.2.2).
        let _ = low;
        self.scratch = items;
        true
    }
}

/// A two-byte load.
trait LoadU16 {
    fn load_u16_at(&mut self, a: Addr) -> u64;
}

impl<P: Pm> LoadU16 for P {
    fn load_u16_at(&mut self, a: Addr) -> u64 {
        let mut b = [0u8; 2];
        self.load(a, &mut b);
        u16::from_le_bytes(b) as u64
    }
}
