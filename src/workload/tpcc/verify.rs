//! The structural verifier: every index a well-formed B+tree whose entries name rows its table
//! has handed out, one entry per row in use, and the consistency conditions 1-4 of clause
//! 3.3.2 in every warehouse and district.

use super::*;

/// One warehouse's indexes, read from a data area.
struct Entries {
    /// Per index, its (key, slot) entries in key order.
    of: Vec<Vec<(u64, u32)>>,
}

impl Tpcc {
    /// Structural check of a data area (a recovered image, the area after a run): `Err` names
    /// the warehouse, the district and the condition broken.
    pub fn verify(&self, data: &[u8]) -> Result<(), String> {
        if (data.len() as u64) < self.data_bytes() {
            return Err(format!("tpcc: data area of {} bytes, expected {}", data.len(), self.data_bytes()));
        }
        let items = &data[self.lay.item_idx as usize..(self.lay.item_idx + self.item_tree.data_bytes()) as usize];
        self.item_tree.verify(items).map_err(|e| format!("tpcc: ITEM index: {e}"))?;
        for w in 0..self.w {
            let part = &data[self.wbase(w) as usize..(self.wbase(w) + self.lay.stride) as usize];
            self.verify_warehouse(part).map_err(|e| format!("tpcc: warehouse {}: {e}", w + 1))?;
        }
        Ok(())
    }

    fn verify_warehouse(&self, part: &[u8]) -> Result<(), String> {
        let mut of = Vec::with_capacity(INDEXES.len());
        for x in INDEXES {
            let (at, tree) = (self.lay.idx[x as usize], &self.trees[x as usize]);
            let bytes = &part[at as usize..(at + tree.data_bytes()) as usize];
            let name = INDEX_NAMES[x as usize];
            tree.verify(bytes).map_err(|e| format!("{name} index: {e}"))?;
            of.push(tree.entries_in(bytes).map_err(|e| format!("{name} index: {e}"))?);
        }
        let e = Entries { of };
        self.verify_rows(part, &e)?;
        self.condition_1(part)?;
        for d in 1..=DISTRICTS {
            self.conditions_2_to_4(part, &e, d).map_err(|m| format!("district {d}: {m}"))?;
        }
        Ok(())
    }

    /// Each indexed table: as many rows in use as index entries, each entry a handed-out slot,
    /// no slot named twice.
    fn verify_rows(&self, part: &[u8], e: &Entries) -> Result<(), String> {
        for (x, t) in [(X::C, T::C), (X::O, T::O), (X::No, T::No), (X::Ol, T::Ol), (X::S, T::S)] {
            let name = INDEX_NAMES[x as usize];
            let slab = &self.lay.tabs[t as usize];
            let used = slab.used_in(part).map_err(|m| format!("{name} table: {m}"))?;
            let entries = &e.of[x as usize];
            if used != entries.len() as u64 {
                return Err(format!("{name}: {used} rows in use, {} index entries", entries.len()));
            }
            let bump = rd(part, slab.meta.0 + 8, 8);
            let mut seen = vec![false; bump as usize];
            for &(k, s) in entries {
                match seen.get_mut(s as usize) {
                    Some(b) if !*b => *b = true,
                    _ => return Err(format!("{name}: key {k:#x} names slot {s}, not a row of its own")),
                }
            }
        }
        for t in [T::W, T::D, T::H] {
            self.lay.tabs[t as usize].used_in(part).map_err(|m| format!("table {t:?}: {m}"))?;
        }
        Ok(())
    }

    /// The address of slot `slot` of table `t` inside a partition.
    fn at(&self, t: T, slot: u64) -> u64 {
        let s = &self.lay.tabs[t as usize];
        s.base.0 + slot * s.slot_bytes
    }

    /// Condition 1: W_YTD = sum(D_YTD).
    fn condition_1(&self, part: &[u8]) -> Result<(), String> {
        let w_ytd = rd(part, self.at(T::W, 0) + W_YTD, 8);
        let sum: u64 = (0..DISTRICTS).map(|d| rd(part, self.at(T::D, d) + D_YTD, 8)).sum();
        if w_ytd != sum {
            return Err(format!("consistency condition 1: W_YTD = {w_ytd}, sum of D_YTD = {sum}"));
        }
        Ok(())
    }

    /// Conditions 2 (D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)), 3 (NEW-ORDER rows contiguous:
    /// max(NO_O_ID) - min(NO_O_ID) + 1 = their count) and 4 (sum(O_OL_CNT) = ORDER-LINE rows)
    /// for district `d`.
    fn conditions_2_to_4(&self, part: &[u8], e: &Entries, d: u64) -> Result<(), String> {
        let next = rd(part, self.at(T::D, d - 1) + D_NEXT_O_ID, 4);
        let in_d = |x: X, shift: u32| {
            let v = &e.of[x as usize];
            let lo = v.partition_point(|&(k, _)| k >> shift < d);
            let hi = v.partition_point(|&(k, _)| k >> shift <= d);
            &v[lo..hi]
        };
        let orders = in_d(X::O, 32);
        let news = in_d(X::No, 32);
        let max_o = orders.last().map_or(0, |&(k, _)| k & u32::MAX as u64);
        if next.wrapping_sub(1) != max_o {
            return Err(format!(
                "consistency condition 2: D_NEXT_O_ID - 1 = {}, max(O_ID) = {max_o}",
                next.wrapping_sub(1)
            ));
        }
        if let (Some(&(first, _)), Some(&(last, _))) = (news.first(), news.last()) {
            let (lo, hi) = (first & u32::MAX as u64, last & u32::MAX as u64);
            if hi != max_o {
                return Err(format!("consistency condition 2: max(O_ID) = {max_o}, max(NO_O_ID) = {hi}"));
            }
            if hi - lo + 1 != news.len() as u64 {
                return Err(format!(
                    "consistency condition 3: NEW-ORDER rows {lo}..={hi}: {} rows, not contiguous",
                    news.len()
                ));
            }
        }
        let ol_cnt: u64 = orders.iter().map(|&(_, s)| rd(part, self.at(T::O, s as u64) + O_OL_CNT, 1)).sum();
        let lines = in_d(X::Ol, 36).len() as u64;
        if ol_cnt != lines {
            return Err(format!("consistency condition 4: sum(O_OL_CNT) = {ol_cnt}, ORDER-LINE rows = {lines}"));
        }
        Ok(())
    }
}
