//! The incremental form of [`Sqlite::verify`] ([`Follow`]): it reads SQLite's file format
//! directly (big-endian fields, SQLite varints) and keeps, per page, a summary derived from that
//! page alone, and per b-tree page a summary of its subtree, so that a verdict costs the pages
//! the transactions since the previous verdict wrote (a few dozen), not the whole file.
//!
//! # What it models
//!
//! The database this workload writes: page 1 (the file header and `sqlite_schema`, a leaf with
//! the rows of `test` and of its primary-key index), the table b-tree of `test`, the index
//! b-tree `sqlite_autoindex_test_1`, and the freelist. Every row is the record
//! `(key blob(16), value blob(100))`, every index entry `(key blob(16), rowid)`.
//!
//! - **Per page** (recomputed when a block of the page changes): the page type (table interior
//!   0x05, table leaf 0x0D, index interior 0x02, index leaf 0x0A); its local soundness, as
//!   SQLite's `btreeInitPage`, `btreeComputeFreeSpace` and `checkTreePage` see it (cell count
//!   at most `MX_CELL`, cell pointer array below the content area, every cell inside the
//!   content area and the page, the freeblock list ascending, in bounds, at least 4 bytes apart,
//!   no two cells or freeblocks overlapping, the fragmented-bytes count equal to the bytes the
//!   cells and freeblocks leave uncovered); the exact record shapes above (anything else, an
//!   overflow cell for instance, counts as not modeled); keys strictly ascending (rowids in a
//!   table page, key blobs in an index page); the child page numbers with their divider keys;
//!   the smallest and largest key; and for entries (table leaf rows, index cells) their count
//!   and a 128-bit sum of hashes of (key blob, rowid).
//! - **Per subtree** ([`Subtrees`], recomputed on the path from a changed page to the root):
//!   all of the subtree's pages of the tree's kind and locally sound, all leaves at one depth
//!   (at most 20, SQLite's cursor depth), each child's keys inside its dividers (table: child i
//!   in (divider i-1, divider i], the right child above the last divider; index: strictly
//!   between), no empty page, and the subtree's entry count, entry hash sum, page count and
//!   128-bit sum of hashes of its page numbers.
//! - **Globally**, at every verdict: the file size in locsim's region header is a whole number
//!   of pages within the capacity (N pages, below SQLite's lock-byte page); the header's page
//!   count is N and valid (change counter = version-valid-for); the freelist (walked again when
//!   page 1 or a trunk page changed) has at most `usable/4 - 2` leaves per trunk and as many
//!   pages as the header's count; the multiset {1} + the two trees' pages + the freelist's
//!   pages is exactly {1..=N} (count and page-hash sum: every page referenced exactly once,
//!   SQLite's "never used", "2nd reference" and "invalid page number"); the table's row count
//!   and entry hash sum equal the index's (every row has its index entry: integrity_check's
//!   "missing from index" and "wrong # of entries"); the row count is in `rows..=size/116`.
//! - Page 1 apart from the fields modeled above (bytes 24..40, 92..100 of the header) must equal
//!   its content in the last state the whole verifier accepted at a reset (the header's fixed
//!   fields, the schema: root pages, page size, encoding, ...).
//!
//! # Verdicts
//!
//! "Sound" comes from the model alone. Whenever the model does not find the state sound
//! (a check fails, or something it does not model), the verdict is the whole verifier's
//! ([`SqliteFollow::undecided`]), so the follower never says "broken" where [`Sqlite::verify`]
//! says ok; if the whole verifier accepts a state the model cannot vouch for, the next call
//! starts again from the data area ([`Follow::reset`], which also runs the whole verifier).
//! After a broken verdict every subtree summary is dropped (recomputed from the per-page
//! summaries, which stay valid), since a broken image may share pages between subtrees.
//! The model is at least as strict as `PRAGMA integrity_check` on this database (e.g. it
//! requires keys in order in the index, and non-empty pages), so in a sound run it decides
//! every verdict itself.

use super::{Sqlite, KEY_BYTES, VALUE_BYTES};
use crate::types::BlockData;
use crate::workload::follow::{Follow, Spans, Subtrees};
use crate::workload::sqlite::bridge::{Region, HEADER_BYTES};

/// SQLite's largest b-tree depth (`BTCURSOR_MAX_DEPTH`).
const MAX_DEPTH: usize = 20;
/// The byte SQLite locks; its page is never used (`PENDING_BYTE`).
const PENDING_BYTE: u64 = 0x4000_0000;

/// Header fields of page 1 the follower models: change counter, page count, first freelist
/// trunk, freelist count; version-valid-for and the writer's version number.
const PAGE1_MODELED: [std::ops::Range<usize>; 2] = [24..40, 92..100];

const TABLE_INTERIOR: u8 = 0x05;
const TABLE_LEAF: u8 = 0x0D;
const INDEX_INTERIOR: u8 = 0x02;
const INDEX_LEAF: u8 = 0x0A;

/// A table row's record: header size 4, serial types 44 (a 16-byte blob) and 212 (a 100-byte
/// blob, varint 0x81 0x54), then the two blobs.
const ROW_HEADER: [u8; 4] = [4, 12 + 2 * KEY_BYTES as u8, 0x81, 0x54];
const ROW_PAYLOAD: u64 = (4 + KEY_BYTES + VALUE_BYTES) as u64;

/// What one page says about itself.
#[derive(Clone, Copy, Default)]
struct Local {
    /// The page type byte; 0 when the page is not a b-tree page this follower models, or is
    /// not locally sound.
    kind: u8,
    ncells: u32,
    /// Smallest and largest key of the page's own cells (a table's rowid as `rowid ^ 2^63`).
    min: u128,
    max: u128,
    /// Entries on the page (table leaf rows; index cells, leaf and interior) and their hash sum.
    count: u64,
    hash: u128,
}

/// A subtree's summary (see the module documentation).
#[derive(Clone, Copy)]
struct Sum {
    ok: bool,
    height: u8,
    min: u128,
    max: u128,
    count: u64,
    hash: u128,
    pages: u64,
    phash: u128,
}

const FAILED: Sum = Sum { ok: false, height: 0, min: 0, max: 0, count: 0, hash: 0, pages: 0, phash: 0 };

/// The freelist as last walked.
#[derive(Default)]
struct Free {
    ok: bool,
    pages: u64,
    phash: u128,
    trunks: Vec<u32>,
}

/// The SQLite workload's follower (see the module documentation).
pub struct SqliteFollow {
    verifier: Sqlite,
    region: Region,
    page: usize,
    /// Pages the region can hold.
    cap: usize,
    rows: u64,
    locals: Vec<Local>,
    /// Per interior page: (child, divider key) per cell, then (right child, 0).
    kids: Spans<(u32, u128)>,
    subtrees: Subtrees<Sum>,
    deep: bool,
    /// Root pages of `test` and of its index; page 1 as the whole verifier last accepted it
    /// (modeled header fields zeroed); whether the current page 1 differs from it.
    roots: Option<(u32, u32)>,
    page1: Vec<u8>,
    page1_differs: bool,
    free: Free,
    is_trunk: Vec<bool>,
    /// Page hashes summed over 1..=n, for the last n asked.
    target: (u64, u128),
    /// The incremental state can be used (else the next call resets).
    valid: bool,
    mark: Vec<u32>,
    stamp: u32,
    dirty: Vec<usize>,
    scratch_kids: Vec<(u32, u128)>,
    scratch_ranges: Vec<(u32, u32)>,
    /// Verdicts the whole verifier gave (resets included), for tests and measurements.
    pub wholes: u64,
}

impl Sqlite {
    /// The incremental verifier.
    pub fn follower(&self) -> SqliteFollow {
        let page = self.cfg.page_size_bytes as usize;
        let cap = (self.cfg.file_capacity_bytes / self.cfg.page_size_bytes) as usize;
        SqliteFollow {
            verifier: Sqlite::new(&self.cfg),
            region: self.region(),
            page,
            cap,
            rows: self.cfg.rows,
            locals: vec![Local::default(); cap + 1],
            kids: Spans::new(cap + 1),
            subtrees: Subtrees::new(cap + 1, MAX_DEPTH),
            deep: false,
            roots: None,
            page1: Vec::new(),
            page1_differs: true,
            free: Free::default(),
            is_trunk: vec![false; cap + 1],
            target: (0, 0),
            valid: false,
            mark: vec![0; cap + 1],
            stamp: 0,
            dirty: Vec::new(),
            scratch_kids: Vec::new(),
            scratch_ranges: Vec::new(),
            wholes: 0,
        }
    }
}

#[inline]
fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// The hash of an entry (key blob, rowid): two independent 64-bit halves.
#[inline]
fn entry_hash(key: u128, rowid: u64) -> u128 {
    let (hi, lo) = ((key >> 64) as u64, key as u64);
    let a = fmix(hi ^ fmix(lo ^ fmix(rowid ^ 0x243F_6A88_85A3_08D3)));
    let b = fmix(hi.rotate_left(29) ^ fmix(lo.rotate_left(17) ^ fmix(rowid ^ 0x1319_8A2E_0370_7344)));
    (a as u128) << 64 | b as u128
}

#[inline]
fn page_hash(p: u64) -> u128 {
    (fmix(p ^ 0xA409_3822_299F_31D0) as u128) << 64 | fmix(p ^ 0x082E_FA98_EC4E_6C89) as u128
}

#[inline]
fn be16(d: &[u8], at: usize) -> usize {
    u16::from_be_bytes([d[at], d[at + 1]]) as usize
}

#[inline]
fn be32(d: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(d[at..at + 4].try_into().unwrap())
}

/// A SQLite varint at `at` (at most 9 bytes, all inside `d`): value and length.
#[inline]
fn varint(d: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for i in 0..8 {
        let b = *d.get(at + i)?;
        v = (v << 7) | u64::from(b & 0x7f);
        if b < 0x80 {
            return Some((v, i + 1));
        }
    }
    Some(((v << 8) | u64::from(*d.get(at + 8)?), 9))
}

/// The 16-byte key blob at `at` as a number (its byte order is `memcmp`'s).
#[inline]
fn key_at(d: &[u8], at: usize) -> Option<u128> {
    Some(u128::from_be_bytes(d.get(at..at + KEY_BYTES)?.try_into().unwrap()))
}

/// A rowid as a key (`i64` order as unsigned order).
#[inline]
fn rowid_key(r: u64) -> u128 {
    (r ^ (1 << 63)) as u128
}

/// An index record `(key blob(16), rowid)` at `at` of `n` payload bytes: key and rowid.
fn index_record(d: &[u8], at: usize, n: u64) -> Option<(u128, u64)> {
    let h = d.get(at..at + 3)?;
    if h[0] != 3 || h[1] != ROW_HEADER[1] {
        return None;
    }
    let len = match h[2] {
        t @ 1..=4 => t as usize,
        5 => 6,
        6 => 8,
        8 | 9 => 0,
        _ => return None,
    };
    if n != (3 + KEY_BYTES + len) as u64 {
        return None;
    }
    let key = key_at(d, at + 3)?;
    let at = at + 3 + KEY_BYTES;
    let bytes = d.get(at..at + len)?;
    let rowid = match h[2] {
        8 => 0,
        9 => 1,
        _ => {
            let v = bytes.iter().fold(0u64, |v, &b| (v << 8) | u64::from(b));
            // Sign-extend from `len` bytes.
            let shift = 64 - 8 * len as u32;
            (((v << shift) as i64) >> shift) as u64
        }
    };
    Some((key, rowid))
}

/// Parse one b-tree page (page number >= 2) into its summary; `kids` gets the interior page's
/// children. A page the follower does not model, or that fails a local check, has kind 0.
fn parse_page(pg: &[u8], kids: &mut Vec<(u32, u128)>, ranges: &mut Vec<(u32, u32)>) -> Local {
    kids.clear();
    ranges.clear();
    let bad = Local::default();
    let u = pg.len();
    let kind = pg[0];
    let interior = match kind {
        TABLE_INTERIOR | INDEX_INTERIOR => true,
        TABLE_LEAF | INDEX_LEAF => false,
        _ => return bad,
    };
    let hsize = if interior { 12 } else { 8 };
    let ncells = be16(pg, 3);
    let top = match be16(pg, 5) {
        0 => 65536,
        t => t,
    };
    let first_cell = hsize + 2 * ncells;
    if ncells == 0 || ncells > (u - 8) / 6 || top < first_cell || top > u {
        return bad;
    }
    let mut local = Local { kind, ncells: ncells as u32, min: 0, max: 0, count: 0, hash: 0 };
    let mut prev: Option<u128> = None;
    for i in 0..ncells {
        let pc = be16(pg, hsize + 2 * i);
        if pc < top || pc > u - 4 {
            return bad;
        }
        let (size, key, child) = match kind {
            TABLE_LEAF => {
                let Some((n, l1)) = varint(pg, pc) else { return bad };
                let Some((r, l2)) = varint(pg, pc + l1) else { return bad };
                let at = pc + l1 + l2;
                if n != ROW_PAYLOAD || pg.get(at..at + 4) != Some(&ROW_HEADER[..]) {
                    return bad;
                }
                let Some(key) = key_at(pg, at + 4) else { return bad };
                local.count += 1;
                local.hash = local.hash.wrapping_add(entry_hash(key, r));
                (l1 + l2 + ROW_PAYLOAD as usize, rowid_key(r), None)
            }
            TABLE_INTERIOR => {
                let child = be32(pg, pc);
                let Some((r, l)) = varint(pg, pc + 4) else { return bad };
                (4 + l, rowid_key(r), Some(child))
            }
            _ => {
                let off = if interior { 4 } else { 0 };
                let child = interior.then(|| be32(pg, pc));
                let Some((n, l1)) = varint(pg, pc + off) else { return bad };
                let Some((key, rowid)) = index_record(pg, pc + off + l1, n) else { return bad };
                local.count += 1;
                local.hash = local.hash.wrapping_add(entry_hash(key, rowid));
                ((off + l1 + n as usize).max(4), key, child)
            }
        };
        if pc + size > u || prev.is_some_and(|p| p >= key) {
            return bad;
        }
        if prev.is_none() {
            local.min = key;
        }
        (prev, local.max) = (Some(key), key);
        if let Some(c) = child {
            kids.push((c, key));
        }
        ranges.push((pc as u32, (pc + size) as u32));
    }
    if interior {
        kids.push((be32(pg, 8), 0));
    }
    match free_space_agrees(pg, top, ranges) {
        true => local,
        false => bad,
    }
}

/// The rest of [`parse_page`]'s checks, given the cells' byte ranges in `ranges`: the
/// freeblock list is ascending, in the content area (from `top`), its blocks at least 4 bytes
/// apart; no two ranges (cells and freeblocks) overlap; the bytes they leave uncovered are the
/// header's count of fragmented bytes.
fn free_space_agrees(pg: &[u8], top: usize, ranges: &mut Vec<(u32, u32)>) -> bool {
    let u = pg.len();
    let mut pc = be16(pg, 1);
    let mut steps = 0;
    while pc != 0 {
        steps += 1;
        if pc < top || pc > u - 4 || steps > u / 4 {
            return false;
        }
        let (next, size) = (be16(pg, pc), be16(pg, pc + 2));
        if size < 4 || pc + size > u || (next != 0 && next <= pc + size + 3) {
            return false;
        }
        ranges.push((pc as u32, (pc + size) as u32));
        pc = next;
    }
    ranges.sort_unstable();
    let mut end = top as u32;
    let mut frag = 0u32;
    for &(s, e) in ranges.iter() {
        if s < end {
            return false;
        }
        frag += s - end;
        end = e;
    }
    frag += u as u32 - end;
    frag == u32::from(pg[7])
}

/// The rows of `sqlite_schema` on page 1 as this workload creates them: the root pages of
/// `test` and of its index, if page 1 is a leaf holding exactly those two objects.
fn schema_roots(p1: &[u8]) -> Option<(u32, u32)> {
    let hdr = 100;
    // No reserved bytes at the end of a page: the usable size is the page size.
    if p1[20] != 0 || p1[hdr] != TABLE_LEAF || be16(p1, hdr + 3) != 2 {
        return None;
    }
    let mut table = None;
    let mut index = None;
    for i in 0..2 {
        let pc = be16(p1, hdr + 8 + 2 * i);
        let (n, l1) = varint(p1, pc)?;
        let (_, l2) = varint(p1, pc + l1)?;
        let at = pc + l1 + l2;
        if at + n as usize > p1.len() {
            return None; // overflow: not this schema
        }
        let rec = &p1[at..at + n as usize];
        // Columns: type, name, tbl_name, rootpage, sql.
        let (hsize, mut h) = varint(rec, 0)?;
        let mut body = hsize as usize;
        let mut cols = Vec::new();
        while h < hsize as usize {
            let (t, l) = varint(rec, h)?;
            h += l;
            let len = match t {
                0 | 8 | 9 => 0,
                1..=4 => t as usize,
                5 => 6,
                6 | 7 => 8,
                t if t >= 12 => ((t - 12) / 2) as usize,
                _ => return None,
            };
            cols.push((t, rec.get(body..body + len)?));
            body += len;
        }
        if cols.len() != 5 {
            return None;
        }
        let root = match cols[3] {
            (1..=4, b) => b.iter().fold(0u32, |v, &x| (v << 8) | u32::from(x)),
            _ => return None,
        };
        match cols[1].1 {
            b"test" => table = Some(root),
            b"sqlite_autoindex_test_1" => index = Some(root),
            _ => return None,
        }
    }
    Some((table?, index?))
}

impl SqliteFollow {
    fn page_bytes<'d>(&self, data: &'d [u8], p: usize) -> &'d [u8] {
        let at = (self.region.file_start() as usize) + (p - 1) * self.page;
        &data[at..at + self.page]
    }

    /// Page 1 with the fields the follower models zeroed.
    fn page1_fixed(&self, data: &[u8]) -> Vec<u8> {
        let mut p = self.page_bytes(data, 1).to_vec();
        for r in PAGE1_MODELED {
            p[r].fill(0);
        }
        p
    }

    /// Does page 1 differ from the last one the whole verifier accepted, apart from the fields
    /// the follower models?
    fn page1_moved(&self, data: &[u8]) -> bool {
        let (now, was) = (self.page_bytes(data, 1), &self.page1);
        was.len() != now.len() || now[..24] != was[..24] || now[40..92] != was[40..92] || now[100..] != was[100..]
    }

    fn relocal(&mut self, data: &[u8], p: usize) {
        let (mut kids, mut ranges) = (std::mem::take(&mut self.scratch_kids), std::mem::take(&mut self.scratch_ranges));
        let local =
            if p == 1 { Local::default() } else { parse_page(self.page_bytes(data, p), &mut kids, &mut ranges) };
        if local.kind == 0 {
            kids.clear();
        }
        self.locals[p] = local;
        self.kids.set(p, &kids);
        (self.scratch_kids, self.scratch_ranges) = (kids, ranges);
    }

    fn walk_free(&mut self, data: &[u8]) {
        for &t in &self.free.trunks {
            self.is_trunk[t as usize] = false;
        }
        let mut free = Free { ok: true, pages: 0, phash: 0, trunks: std::mem::take(&mut self.free.trunks) };
        free.trunks.clear();
        let p1 = self.page_bytes(data, 1);
        let mut trunk = be32(p1, 32) as usize;
        let max_leaves = (self.page / 4 - 2) as u32;
        while trunk != 0 {
            // A list longer than the capacity has a cycle.
            if trunk > self.cap || free.pages > self.cap as u64 {
                free.ok = false;
                break;
            }
            // Listed before its checks: a change to it walks the list again.
            free.trunks.push(trunk as u32);
            let pg = self.page_bytes(data, trunk);
            let n = be32(pg, 4);
            if n > max_leaves {
                free.ok = false;
                break;
            }
            free.pages += 1 + u64::from(n);
            free.phash = free.phash.wrapping_add(page_hash(trunk as u64));
            for i in 0..n as usize {
                free.phash = free.phash.wrapping_add(page_hash(u64::from(be32(pg, 8 + 4 * i))));
            }
            trunk = be32(pg, 0) as usize;
        }
        for &t in &free.trunks {
            self.is_trunk[t as usize] = true;
        }
        self.free = free;
    }

    /// The summary of the subtree at page `p` of a table (`index` false) or index b-tree.
    fn eval(&mut self, p: usize, index: bool, depth: usize) -> Sum {
        if !(2..=self.cap).contains(&p) {
            return FAILED;
        }
        if let Some(s) = self.subtrees.sum(p) {
            return s;
        }
        let l = self.locals[p];
        let (leaf, interior) = if index { (INDEX_LEAF, INDEX_INTERIOR) } else { (TABLE_LEAF, TABLE_INTERIOR) };
        let mut sum = Sum {
            ok: l.kind == leaf || l.kind == interior,
            height: 0,
            min: l.min,
            max: l.max,
            count: l.count,
            hash: l.hash,
            pages: 1,
            phash: page_hash(p as u64),
        };
        if sum.ok && l.kind == interior {
            let n = l.ncells as usize;
            for i in 0..=n {
                let (c, key) = self.kids.get(p)[i];
                let c = c as usize;
                if !(2..=self.cap).contains(&c) {
                    sum.ok = false;
                    break;
                }
                self.subtrees.adopt(c, p as u32 + 1);
                if depth + 1 >= MAX_DEPTH {
                    (self.deep, sum.ok) = (true, false);
                    break;
                }
                let k = self.eval(c, index, depth + 1);
                let below = i == n || if index { k.max < key } else { k.max <= key };
                let above = i == 0 || k.min > self.kids.get(p)[i - 1].1;
                sum.ok &= k.ok && below && above && (i == 0 || k.height + 1 == sum.height);
                if !sum.ok {
                    break;
                }
                if i == 0 {
                    sum.height = k.height + 1;
                    sum.min = sum.min.min(k.min);
                }
                if i == n {
                    sum.max = sum.max.max(k.max);
                }
                sum.count += k.count;
                sum.hash = sum.hash.wrapping_add(k.hash);
                sum.pages += k.pages;
                sum.phash = sum.phash.wrapping_add(k.phash);
            }
        }
        let sum = if sum.ok { sum } else { FAILED };
        self.subtrees.keep(p, sum);
        sum
    }

    /// Σ page_hash(1..=n).
    fn target(&mut self, n: u64) -> u128 {
        let (mut m, mut s) = self.target;
        while m < n {
            m += 1;
            s = s.wrapping_add(page_hash(m));
        }
        while m > n {
            s = s.wrapping_sub(page_hash(m));
            m -= 1;
        }
        self.target = (m, s);
        s
    }

    /// Does the model find `data` sound?
    fn model_sound(&mut self, data: &[u8]) -> bool {
        let Some((table, index)) = self.roots else { return false };
        let size = match self.region.recorded_size(data) {
            Some(s) => s,
            None => return false,
        };
        let p = self.page as u64;
        if size == 0 || size > self.region.capacity_bytes || !size.is_multiple_of(p) || size > PENDING_BYTE {
            return false;
        }
        let n = size / p;
        let p1 = self.page_bytes(data, 1);
        let (header_pages, free_count) = (be32(p1, 28), be32(p1, 36));
        if self.page1_differs || be32(p1, 24) != be32(p1, 92) || u64::from(header_pages) != n {
            return false;
        }
        if !self.free.ok || self.free.pages != u64::from(free_count) {
            return false;
        }
        self.subtrees.adopt(table as usize, 0);
        let t = self.eval(table as usize, false, 0);
        self.subtrees.adopt(index as usize, 0);
        let i = self.eval(index as usize, true, 0);
        if std::mem::take(&mut self.deep) {
            self.subtrees.clear();
            return false;
        }
        let max_rows = size / (KEY_BYTES + VALUE_BYTES) as u64;
        let phash = page_hash(1).wrapping_add(t.phash).wrapping_add(i.phash).wrapping_add(self.free.phash);
        t.ok && i.ok
            && t.count == i.count
            && t.hash == i.hash
            && (self.rows..=max_rows).contains(&t.count)
            && 1 + t.pages + i.pages + self.free.pages == n
            && phash == self.target(n)
    }

    /// The model does not find `data` sound: the whole verifier decides.
    fn undecided(&mut self, data: &[u8]) -> bool {
        self.wholes += 1;
        let ok = self.verifier.verify(data).is_ok();
        // A broken image may share pages between subtrees: no summary survives it.
        self.subtrees.clear();
        if ok {
            // Sound, but the model cannot vouch for it: start again from the data area.
            self.valid = false;
        }
        ok
    }
}

impl Follow for SqliteFollow {
    fn reset(&mut self, data: &[u8]) -> bool {
        self.wholes += 1;
        self.valid = false;
        self.subtrees.clear();
        self.deep = false;
        let whole = self.verifier.verify(data).is_ok();
        if (data.len() as u64) < self.region.end() {
            return whole;
        }
        if whole {
            self.roots = schema_roots(self.page_bytes(data, 1));
            self.page1 = self.page1_fixed(data);
        }
        if self.roots.is_none() {
            return whole;
        }
        self.page1_differs = self.page1_moved(data);
        self.kids.clear();
        for p in 1..=self.cap {
            self.relocal(data, p);
        }
        self.walk_free(data);
        // A sound image the model cannot vouch for stays with the whole verifier.
        self.valid = !whole || self.model_sound(data);
        if !whole {
            self.subtrees.clear();
        }
        whole
    }

    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool {
        if !self.valid || (data.len() as u64) < self.region.end() {
            return self.reset(data);
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.mark.fill(0);
            self.stamp = 1;
        }
        self.dirty.clear();
        let start = self.region.file_start() as usize / 64;
        for &(b, _) in old {
            if b < start {
                continue;
            }
            let p = (b - start) * 64 / self.page + 1;
            if p <= self.cap && self.mark[p] != self.stamp {
                self.mark[p] = self.stamp;
                self.dirty.push(p);
            }
        }
        let mut free_dirty = false;
        for i in 0..self.dirty.len() {
            let p = self.dirty[i];
            if p == 1 {
                self.page1_differs = self.page1_moved(data);
                free_dirty = true;
                continue;
            }
            self.relocal(data, p);
            self.subtrees.stale(p);
            free_dirty |= self.is_trunk[p];
        }
        if free_dirty {
            self.walk_free(data);
        }
        if self.model_sound(data) {
            true
        } else {
            self.undecided(data)
        }
    }
}

const _: () = assert!(HEADER_BYTES == 64, "a page covers whole blocks from the file's start");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::workload::follow::check;
    use crate::workload::native::Native;
    use crate::workload::sqlite::{SqliteConfig, SqliteMode};
    use crate::workload::{WorkloadConfig, WorkloadKind};

    fn small(mode: SqliteMode) -> SqliteConfig {
        SqliteConfig {
            rows: 2000,
            rows_per_tx: 7,
            mode,
            page_size_bytes: 1024,
            cache_pages: 16,
            file_capacity_bytes: 1 << 20,
            compute_cycles_per_vm_step: 1,
        }
    }

    #[test]
    fn the_follower_agrees_with_the_verifier_on_a_run_and_on_damage() {
        for (mode, seed) in [(SqliteMode::Overwrite, 1), (SqliteMode::Fillrandom, 2)] {
            let cfg = WorkloadConfig { sqlite: small(mode), ..WorkloadConfig::default() };
            let rejected = check::agrees(WorkloadKind::Sqlite, &cfg, 60, seed);
            assert!(rejected > 0, "{mode:?}: the random damage never mattered");
        }
    }

    /// The blocks that differ between `a` and `b`, with `a`'s content.
    fn diff(a: &[u8], b: &[u8]) -> Vec<(usize, BlockData)> {
        a.chunks(64)
            .zip(b.chunks(64))
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .map(|(i, (x, _))| (i, x.try_into().unwrap()))
            .collect()
    }

    const P: usize = 1024;

    fn page_at(p: usize) -> usize {
        64 + (p - 1) * P
    }

    fn pages(d: &[u8]) -> usize {
        (u64::from_le_bytes(d[..8].try_into().unwrap()) as usize) / P
    }

    /// Pages of `kinds` (page-type bytes) among 2..=N.
    fn of_kind(d: &[u8], kinds: &[u8]) -> Vec<usize> {
        (2..=pages(d)).filter(|&p| kinds.contains(&d[page_at(p)])).collect()
    }

    /// The byte offset (in the area) of cell `i`'s content on page `p`.
    fn cell(d: &[u8], p: usize, i: usize) -> usize {
        let at = page_at(p);
        let h = if matches!(d[at], TABLE_INTERIOR | INDEX_INTERIOR) { 12 } else { 8 };
        at + be16(d, at + h + 2 * i)
    }

    fn ncells(d: &[u8], p: usize) -> usize {
        be16(d, page_at(p) + 3)
    }

    /// One damaged copy of `now` per damage class (`None`: the class found nothing to damage).
    fn damaged(now: &[u8], earlier: &[u8], rng: &mut Rng) -> Vec<(&'static str, Option<Vec<u8>>)> {
        let n = pages(now);
        let pick = |v: &[usize], rng: &mut Rng| (!v.is_empty()).then(|| v[rng.below(v.len() as u64) as usize]);
        let mut out = Vec::new();
        // A page replaced by its content in an earlier state (what a broken protocol leaves).
        let changed: Vec<usize> =
            (1..=n.min(pages(earlier))).filter(|&p| now[page_at(p)..][..P] != earlier[page_at(p)..][..P]).collect();
        out.push((
            "page from an earlier state",
            pick(&changed, rng).map(|p| {
                let mut d = now.to_vec();
                d[page_at(p)..][..P].copy_from_slice(&earlier[page_at(p)..][..P]);
                d
            }),
        ));
        // A page zeroed.
        let p = 2 + rng.below(n as u64 - 1) as usize;
        let mut d = now.to_vec();
        d[page_at(p)..][..P].fill(0);
        out.push(("page zeroed", Some(d)));
        // A child pointer retargeted.
        let interior = of_kind(now, &[TABLE_INTERIOR, INDEX_INTERIOR]);
        out.push((
            "child retargeted",
            pick(&interior, rng).map(|p| {
                let mut d = now.to_vec();
                let i = rng.below(ncells(now, p) as u64 + 1) as usize;
                let at = if i == ncells(now, p) { page_at(p) + 8 } else { cell(now, p, i) };
                let to = 2 + rng.below(n as u64 - 1) as u32;
                d[at..at + 4].copy_from_slice(&to.to_be_bytes());
                d
            }),
        ));
        // Two neighbouring children of an interior page swapped (order across pages).
        out.push((
            "children swapped",
            pick(&interior, rng).map(|p| {
                let mut d = now.to_vec();
                let k = ncells(now, p);
                let i = rng.below(k as u64) as usize;
                let (a, b) = (cell(now, p, i), if i + 1 == k { page_at(p) + 8 } else { cell(now, p, i + 1) });
                let (x, y) = (be32(now, a), be32(now, b));
                d[a..a + 4].copy_from_slice(&y.to_be_bytes());
                d[b..b + 4].copy_from_slice(&x.to_be_bytes());
                d
            }),
        ));
        // The freelist count in page 1's header.
        let mut d = now.to_vec();
        let c = be32(now, 64 + 36);
        let c = if c > 0 && rng.chance(0.5) { c - 1 } else { c + 1 };
        d[64 + 36..64 + 40].copy_from_slice(&c.to_be_bytes());
        out.push(("freelist count", Some(d)));
        // A key byte of a table row (the index no longer matches).
        let leaves = of_kind(now, &[TABLE_LEAF]);
        out.push((
            "row key byte",
            pick(&leaves, rng).map(|p| {
                let mut d = now.to_vec();
                let at = cell(now, p, rng.below(ncells(now, p) as u64) as usize);
                let (_, l1) = varint(now, at).unwrap();
                let (_, l2) = varint(now, at + l1).unwrap();
                d[at + l1 + l2 + 4 + rng.below(16) as usize] ^= 1 << rng.below(8);
                d
            }),
        ));
        // A cell removed from a leaf (count and pointer array).
        let leaves = of_kind(now, &[TABLE_LEAF, INDEX_LEAF]);
        out.push((
            "cell removed",
            pick(&leaves, rng).map(|p| {
                let mut d = now.to_vec();
                let (at, k) = (page_at(p), ncells(now, p));
                let i = rng.below(k as u64) as usize;
                d.copy_within(at + 8 + 2 * (i + 1)..at + 8 + 2 * k, at + 8 + 2 * i);
                d[at + 3..at + 5].copy_from_slice(&(k as u16 - 1).to_be_bytes());
                d
            }),
        ));
        // Two cells' pointers swapped (order).
        let all = of_kind(now, &[TABLE_LEAF, INDEX_LEAF, TABLE_INTERIOR, INDEX_INTERIOR]);
        let two: Vec<usize> = all.into_iter().filter(|&p| ncells(now, p) >= 2).collect();
        out.push((
            "cells swapped",
            pick(&two, rng).map(|p| {
                let mut d = now.to_vec();
                let h = page_at(p) + if matches!(now[page_at(p)], TABLE_INTERIOR | INDEX_INTERIOR) { 12 } else { 8 };
                let i = rng.below(ncells(now, p) as u64 - 1) as usize;
                let j = i + 1 + rng.below((ncells(now, p) - i - 1) as u64) as usize;
                let (a, b) = (be16(now, h + 2 * i) as u16, be16(now, h + 2 * j) as u16);
                d[h + 2 * i..h + 2 * i + 2].copy_from_slice(&b.to_be_bytes());
                d[h + 2 * j..h + 2 * j + 2].copy_from_slice(&a.to_be_bytes());
                d
            }),
        ));
        // One page more: the size and page 1's page count grown by a page no one references
        // (a copy of a b-tree page).
        let mut d = now.to_vec();
        if page_at(n + 2) <= d.len() {
            let size = u64::from_le_bytes(d[..8].try_into().unwrap()) + P as u64;
            d[..8].copy_from_slice(&size.to_le_bytes());
            d[64 + 28..64 + 32].copy_from_slice(&(n as u32 + 1).to_be_bytes());
            let from = 2 + rng.below(n as u64 - 1) as usize;
            d.copy_within(page_at(from)..page_at(from) + P, page_at(n + 1));
            out.push(("page appended", Some(d)));
        }
        // A freelist leaf entry naming a page of a tree instead (a second reference).
        let trunk = be32(now, 64 + 32) as usize;
        out.push((
            "freelist entry retargeted",
            (trunk != 0 && be32(now, page_at(trunk) + 4) > 0).then(|| {
                let mut d = now.to_vec();
                let tree = of_kind(now, &[TABLE_LEAF, INDEX_LEAF, TABLE_INTERIOR, INDEX_INTERIOR]);
                let to = pick(&tree, rng).unwrap() as u32;
                d[page_at(trunk) + 8..page_at(trunk) + 12].copy_from_slice(&to.to_be_bytes());
                d
            }),
        ));
        // A bit flip in a page header (page 1's database header included).
        let p = 1 + rng.below(n as u64) as usize;
        let at = if p == 1 { 64 + rng.below(112) as usize } else { page_at(p) + rng.below(12) as usize };
        let mut d = now.to_vec();
        d[at] ^= 1 << rng.below(8);
        out.push(("header bit", Some(d)));
        out
    }

    /// Per damage class: states damaged and states the whole verifier rejected.
    type Tally = std::collections::BTreeMap<&'static str, (usize, usize)>;

    /// A run of `txs` transactions; after each, every damage class on the state (undone
    /// again): the follower's verdict must equal the whole verifier's on every state.
    fn damage_run(cfg: &SqliteConfig, txs: usize, seed: u64, freelist: bool) -> Tally {
        let mut w = Sqlite::new(cfg);
        let verifier = Sqlite::new(cfg);
        let mut data = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut data);
        if freelist {
            data = with_freelist(&w, data);
        }
        let mut f = verifier.follower();
        assert!(f.reset(&data));
        let mut pm = Native::new(data);
        let (mut rng, mut dmg) = (Rng::new(seed), Rng::new(seed ^ 0xDA));
        let mut history = vec![pm.mem.clone()];
        let mut prev = pm.mem.clone();
        let mut tally = Tally::new();
        for t in 0..txs {
            w.run_tx(&mut pm, &mut rng, t % 9 == 4);
            let now = pm.mem.clone();
            assert!(f.changed(&now, &diff(&prev, &now)), "tx {t}: the sound state");
            let earlier = &history[history.len().saturating_sub(1 + dmg.below(8) as usize)];
            for (class, bad) in damaged(&now, earlier, &mut dmg) {
                let Some(bad) = bad else { continue };
                let verdict = verifier.verify(&bad).is_ok();
                let e = tally.entry(class).or_default();
                (e.0, e.1) = (e.0 + 1, e.1 + usize::from(!verdict));
                assert_eq!(
                    f.changed(&bad, &diff(&now, &bad)),
                    verdict,
                    "tx {t}, {class}: follower and verifier disagree"
                );
                assert!(f.changed(&now, &diff(&bad, &now)), "tx {t}, {class}: undoing the damage");
            }
            history.push(now.clone());
            prev = now;
        }
        tally
    }

    /// Rows added at the end of the table and deleted again through SQLite: the same rows,
    /// and a freelist.
    fn with_freelist(w: &Sqlite, data: Vec<u8>) -> Vec<u8> {
        let mut pm = Native::new(data);
        crate::workload::sqlite::bridge::with_pm(&mut pm, || {
            let c = crate::workload::sqlite::bridge::open(w.region(), false).unwrap();
            c.execute_batch(
                "PRAGMA journal_mode=OFF;
                 WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 600)
                 INSERT INTO test (key, value) SELECT CAST(printf('x%015d', i) AS BLOB), zeroblob(100) FROM c;
                 DELETE FROM test WHERE key >= CAST('x' AS BLOB);",
            )
            .unwrap();
        });
        let free = be32(&pm.mem, 64 + 36);
        assert!(free > 10, "a freelist: {free} pages");
        pm.mem
    }

    #[test]
    fn the_follower_agrees_with_the_verifier_on_sqlite_damage() {
        let runs = [
            (SqliteMode::Overwrite, 3, false),
            (SqliteMode::Fillrandom, 4, false),
            (SqliteMode::Fillseq, 5, false),
            (SqliteMode::Fillrandom, 6, true),
        ];
        for (mode, seed, freelist) in runs {
            let tally = damage_run(&small(mode), 30, seed, freelist);
            if freelist {
                assert!(tally.contains_key("freelist entry retargeted"), "{tally:?}");
            }
            eprintln!("{mode:?}: {tally:?}");
            for (class, (n, rejected)) in &tally {
                // The damage matters: most damaged states are broken.
                assert!(*n >= 20 && 2 * rejected > *n, "{mode:?} {class}: {rejected} of {n} rejected ({tally:?})");
            }
            assert!(tally.len() >= 10, "{mode:?}: every damage class ran: {tally:?}");
        }
    }

    /// In a sound run the model decides every verdict: the whole verifier runs only at the
    /// reset.
    #[test]
    fn a_sound_run_is_followed_without_the_whole_verifier() {
        for (mode, freelist) in [
            (SqliteMode::Overwrite, false),
            (SqliteMode::Fillrandom, false),
            (SqliteMode::Fillseq, false),
            (SqliteMode::Overwrite, true),
        ] {
            let cfg = small(mode);
            let mut w = Sqlite::new(&cfg);
            let mut data = vec![0u8; w.data_bytes() as usize];
            w.populate(&mut data);
            if freelist {
                data = with_freelist(&w, data);
            }
            let mut f = w.follower();
            assert!(f.reset(&data));
            let mut pm = Native::new(data);
            let mut rng = Rng::new(7);
            let mut prev = pm.mem.clone();
            for t in 0..150 {
                w.run_tx(&mut pm, &mut rng, t % 5 == 2);
                if t % 3 == 0 {
                    continue;
                }
                assert!(f.changed(&pm.mem, &diff(&prev, &pm.mem)), "{mode:?} tx {t}");
                prev = pm.mem.clone();
            }
            assert_eq!(f.wholes, 1, "{mode:?} (freelist {freelist}): the whole verifier ran beyond the reset");
        }
    }
}
