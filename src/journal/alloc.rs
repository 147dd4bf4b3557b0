//! The journal manager: frame and portion allocation with reuse, reuse limits and migration,
//! garbage collection (whole or incremental), journal start and end, and the rebuild of the
//! DRAM-resident metadata from PCM after a crash.
//!
//! DRAM holds a mirror of everything (frame states, descriptors, the current header copy) so
//! that lookups cost no PCM reads; PCM holds what recovery needs, written in the order that
//! docs/journal-format.md argues for. Without S2, the quasi-non-volatile and non-functional
//! data (presence bits, reusable bits, reuse counters, first-free pointer) are written to PCM
//! too; with S2 they live only in DRAM and are rebuilt (reuse counters restart at 1).

use super::format::{self, flag, Desc, HeaderCopy, SlotRec, DESCS, PORTIONS, SLOTS, STREAM_HDR};
use super::media::{EventKind, Media};
use super::policy::Policy;
use serde::Serialize;

/// State of a page frame (the paper's active, reuse, invalid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FState {
    Invalid,
    Active,
    Reuse,
}

/// DRAM view of one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub state: FState,
    pub header: bool,
    /// Slot of the database file the frame belongs to (meaningless when invalid).
    pub owner: usize,
    /// Uses since the frame was allocated (the reuse counter).
    pub uses: u32,
    /// Portions referenced by a descriptor (data frames).
    pub used: u64,
}

/// DRAM view of one header frame descriptor and its header frame.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    pub valid: bool,
    pub name: String,
    pub frame: usize,
    /// SQLite has written a journal header and not deleted the journal yet.
    pub open: bool,
    /// The hot-journal flag: set once SQLite's header carries its magic (after the journal
    /// sync), cleared at commit.
    pub hot: bool,
    pub copy: usize,
    pub hdr: HeaderCopy,
    pub descs: Vec<Desc>,
    /// Page number -> descriptor index + 1, for descriptors with a PTR.
    pub by_pg: Vec<u32>,
    /// Journal record k -> descriptor index.
    pub records: Vec<u16>,
    pub cur_data: usize,
    pub hot_byte: u8,
    pub slot_v: u8,
    /// Descriptor count as last written to PCM (written once per journal, before the hot flag).
    pub persisted_count: u16,
}

/// Counters of allocator activity.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Stats {
    pub journals: u64,
    pub records: u64,
    pub reused_records: u64,
    pub gcs: u64,
    pub frames_freed_by_gc: u64,
    pub migrations: u64,
}

/// Why a journal operation did not complete.
#[derive(Debug, PartialEq, Eq)]
pub enum JErr {
    /// No free frame or descriptor, even after garbage collection.
    Full,
    /// The crash point was reached.
    Crashed,
    /// SQLite did something this translation does not support.
    Protocol(String),
}

type R<T> = Result<T, JErr>;

macro_rules! w {
    ($e:expr) => {
        if !$e {
            return Err(JErr::Crashed);
        }
    };
}

/// The journal manager.
pub struct Journal {
    pub pol: Policy,
    pub frames: Vec<Frame>,
    pub slots: Vec<Slot>,
    presence: u64,
    reusable: u64,
    cursor: usize,
    gc_cursor: usize,
    pub stats: Stats,
}

fn free_frame() -> Frame {
    Frame { state: FState::Invalid, header: false, owner: usize::MAX, uses: 0, used: 0 }
}

impl Journal {
    /// An empty journal area of `frames` frames (frame 0 the manager).
    pub fn new(pol: Policy, frames: usize) -> Journal {
        assert!((3..=format::MAX_FRAMES as usize).contains(&frames));
        let mut fr = vec![free_frame(); frames];
        fr[0].state = FState::Active;
        Journal {
            pol,
            frames: fr,
            slots: vec![Slot::default(); SLOTS],
            presence: 0,
            reusable: 0,
            cursor: 1,
            gc_cursor: 1,
            stats: Stats::default(),
        }
    }

    /// Write the manager frame's magic (before the measured region).
    pub fn format(m: &mut Media) {
        m.pcm_write(0, format::MGR_MAGIC);
    }

    fn xor(&self) -> bool {
        self.pol.xor
    }

    /// The slot of database `name`, binding a free one if needed.
    pub fn slot_for(&mut self, name: &str) -> Option<usize> {
        SlotRec::name_field(name)?;
        if let Some(s) = self.slots.iter().position(|s| s.name == name) {
            return Some(s);
        }
        let s =
            self.slots.iter().position(|s| s.name.is_empty()).or_else(|| self.slots.iter().position(|s| !s.valid))?;
        self.slots[s].name = name.to_string();
        Some(s)
    }

    fn write_slot(&mut self, m: &mut Media, s: usize) -> R<()> {
        let sl = &self.slots[s];
        let rec =
            SlotRec { v: sl.slot_v, frame: sl.frame as u8, name: SlotRec::name_field(&sl.name).expect("bound name") };
        w!(m.pcm_write(format::slot_addr(s), &rec.encode()));
        Ok(())
    }

    fn write_desc(&mut self, m: &mut Media, s: usize, d: usize) -> R<()> {
        let b = self.slots[s].descs[d].encode();
        w!(m.pcm_write(format::desc_addr(self.slots[s].frame, d), &b));
        Ok(())
    }

    fn write_hot(&mut self, m: &mut Media, s: usize, v: bool) -> R<()> {
        let sl = &mut self.slots[s];
        sl.hot_byte = flag::set(sl.hot_byte, v, self.pol.xor);
        sl.hot = v;
        let (b, h) = (sl.hot_byte, sl.frame);
        w!(m.pcm_write(format::frame_addr(h) + format::HDR_HOT, &[b]));
        Ok(())
    }

    fn write_count(&mut self, m: &mut Media, f: usize) -> R<()> {
        if self.pol.s2 {
            return Ok(());
        }
        let fr = &self.frames[f];
        if fr.header {
            w!(m.pcm_write(format::frame_addr(f) + format::HDR_REUSE_COUNT, &fr.uses.to_le_bytes()));
        } else {
            let c = fr.uses.min(u16::MAX as u32) as u16;
            w!(m.pcm_write(format::MGR_COUNTS + 2 * f as u64, &c.to_le_bytes()));
        }
        Ok(())
    }

    /// Move frame `f` to `st`, keeping presence (active) and reusable (not invalid) bits.
    fn set_state(&mut self, m: &mut Media, f: usize, st: FState) -> R<()> {
        self.frames[f].state = st;
        if st == FState::Invalid {
            self.frames[f].used = 0;
        }
        let bit = 1u64 << f;
        let p = if st == FState::Active { self.presence | bit } else { self.presence & !bit };
        let r = if st == FState::Invalid { self.reusable & !bit } else { self.reusable | bit };
        if p != self.presence {
            self.presence = p;
            if !self.pol.s2 {
                w!(m.pcm_write(format::MGR_PRESENCE, &p.to_le_bytes()));
            }
        }
        if r != self.reusable {
            self.reusable = r;
            if !self.pol.s2 {
                w!(m.pcm_write(format::MGR_REUSABLE, &r.to_le_bytes()));
            }
        }
        Ok(())
    }

    /// A free frame, in rotation; garbage collection if there is none.
    fn alloc_frame(&mut self, m: &mut Media) -> R<usize> {
        for pass in 0..2 {
            let n = self.frames.len();
            for i in 0..n - 1 {
                let f = 1 + (self.cursor - 1 + i) % (n - 1);
                if self.frames[f].state == FState::Invalid {
                    self.cursor = 1 + f % (n - 1);
                    return Ok(f);
                }
            }
            if pass == 0 {
                self.gc(m)?;
            }
        }
        Err(JErr::Full)
    }

    /// Free the frames in reuse state: all, or `gc_percent` % of them (incremental, INVp),
    /// taken in rotation from where the last collection stopped.
    pub fn gc(&mut self, m: &mut Media) -> R<()> {
        let n = self.frames.len();
        let order: Vec<usize> = (0..n - 1).map(|i| 1 + (self.gc_cursor - 1 + i) % (n - 1)).collect();
        let cand: Vec<usize> = order.into_iter().filter(|&f| self.frames[f].state == FState::Reuse).collect();
        if cand.is_empty() {
            return Ok(());
        }
        self.stats.gcs += 1;
        let take = (cand.len() * self.pol.gc_percent as usize).div_ceil(100).max(1);
        let saved = m.ctx;
        m.ctx = EventKind::Gc;
        let invalid_before = self.frames.iter().filter(|f| f.state == FState::Invalid).count();
        for &f in &cand[..take] {
            if self.frames[f].state != FState::Reuse {
                continue;
            }
            if self.frames[f].header {
                self.free_header(m, self.frames[f].owner)?;
            } else {
                self.free_data(m, f)?;
            }
            self.gc_cursor = 1 + f % (n - 1);
        }
        let invalid_after = self.frames.iter().filter(|f| f.state == FState::Invalid).count();
        self.stats.frames_freed_by_gc += (invalid_after - invalid_before) as u64;
        m.ctx = saved;
        Ok(())
    }

    /// Free data frame `f` (reuse state): clear the PTRs that name it, then mark it invalid.
    fn free_data(&mut self, m: &mut Media, f: usize) -> R<()> {
        let s = self.frames[f].owner;
        for d in 0..self.slots[s].descs.len() {
            let ds = self.slots[s].descs[d];
            if ds.ptr != 0 && format::split_ptr(ds.ptr).0 == f {
                debug_assert!(!flag::get(ds.v, self.xor()));
                self.slots[s].descs[d].ptr = 0;
                self.slots[s].by_pg[ds.pgno as usize] = 0;
                self.write_desc(m, s, d)?;
            }
        }
        self.set_state(m, f, FState::Invalid)
    }

    /// Free the header frame of slot `s` (not hot) and every data frame it links: the slot's
    /// valid flag is cleared first, which makes them all unreachable at once.
    fn free_header(&mut self, m: &mut Media, s: usize) -> R<()> {
        let sl = &mut self.slots[s];
        debug_assert!(sl.valid && !sl.open);
        sl.slot_v = flag::set(sl.slot_v, false, self.pol.xor);
        sl.valid = false;
        self.write_slot(m, s)?;
        let h = self.slots[s].frame;
        for f in 1..self.frames.len() {
            if f != h && !self.frames[f].header && self.frames[f].owner == s && self.frames[f].state != FState::Invalid
            {
                self.set_state(m, f, FState::Invalid)?;
            }
        }
        let sl = &mut self.slots[s];
        sl.descs.clear();
        sl.by_pg.clear();
        self.set_state(m, h, FState::Invalid)
    }

    /// Make the header frame of slot `s` ready for a new journal.
    fn header_for(&mut self, m: &mut Media, s: usize) -> R<()> {
        let sl = &self.slots[s];
        if sl.valid {
            let h = sl.frame;
            if !self.pol.reuse {
                return Err(JErr::Protocol("RR header frame still valid at journal start".into()));
            }
            if self.pol.header_limit().is_some_and(|n| self.frames[h].uses >= n) {
                return self.migrate_header(m, s);
            }
            self.frames[h].uses += 1;
            self.write_count(m, h)?;
            return self.set_state(m, h, FState::Active);
        }
        let h = self.alloc_frame(m)?;
        self.frames[h] = Frame { state: FState::Invalid, header: true, owner: s, uses: 1, used: 0 };
        let sl = &mut self.slots[s];
        sl.frame = h;
        sl.hot_byte = 0;
        sl.descs.clear();
        sl.by_pg.clear();
        sl.copy = self.pol.header_copies as usize - 1;
        sl.hdr = HeaderCopy::default();
        sl.persisted_count = 0;
        w!(m.pcm_write(format::frame_addr(h) + format::HDR_HOT, &[0]));
        w!(m.pcm_write(format::frame_addr(h) + format::HDR_DESC_COUNT, &0u16.to_le_bytes()));
        let zeros = vec![0u8; (self.pol.header_copies as u64 * format::COPY_BYTES) as usize];
        w!(m.pcm_write(format::copy_addr(h, 0), &zeros));
        self.write_count(m, h)?;
        self.set_state(m, h, FState::Active)?;
        let sl = &mut self.slots[s];
        sl.valid = true;
        sl.slot_v = flag::set(sl.slot_v, true, self.pol.xor);
        self.write_slot(m, s)
    }

    /// Copy the header frame of slot `s`, at its reuse limit, to a fresh frame and switch the
    /// slot to it (one block write), then free the old one.
    fn migrate_header(&mut self, m: &mut Media, s: usize) -> R<()> {
        let h = self.slots[s].frame;
        self.frames[h].state = FState::Active; // pinned against collection
        let g = self.alloc_frame(m)?;
        let saved = m.ctx;
        m.ctx = EventKind::Gc;
        let len = format::HDR_DESCS + self.slots[s].descs.len() as u64 * format::DESC_BYTES;
        let mut buf = vec![0u8; len as usize];
        m.pcm_read(format::frame_addr(h), &mut buf);
        w!(m.pcm_write(format::frame_addr(g), &buf));
        self.frames[g] = Frame { state: FState::Invalid, header: true, owner: s, uses: 1, used: 0 };
        self.slots[s].frame = g;
        self.write_slot(m, s)?;
        m.ctx = saved;
        self.stats.migrations += 1;
        self.write_count(m, g)?;
        self.set_state(m, g, FState::Active)?;
        self.frames[h].header = false;
        self.set_state(m, h, FState::Invalid)
    }

    /// SQLite wrote the journal header (offset 0) of a journal that does not exist yet.
    pub fn start(&mut self, m: &mut Media, s: usize, stream: &[u8; STREAM_HDR]) -> R<()> {
        m.ctx = EventKind::JournalMeta;
        self.header_for(m, s)?;
        let n = self.pol.header_copies as usize;
        let sl = &mut self.slots[s];
        sl.copy = (sl.copy + 1) % n;
        sl.hdr = HeaderCopy::from_stream(stream, sl.hdr.generation.wrapping_add(1));
        sl.records.clear();
        sl.cur_data = 0;
        sl.open = true;
        let (h, c, b) = (sl.frame, sl.copy, sl.hdr.encode());
        w!(m.pcm_write(format::copy_addr(h, c), &b));
        self.stats.journals += 1;
        self.hot_if_magic(m, s)
    }

    /// SQLite writes the header with a zero magic and rewrites it with the magic once the
    /// records are synced: that rewrite is when the journal becomes hot.
    fn hot_if_magic(&mut self, m: &mut Media, s: usize) -> R<()> {
        let sl = &mut self.slots[s];
        if !sl.hot && sl.hdr.magic != [0; 8] {
            let n = sl.descs.len() as u16;
            if n != sl.persisted_count {
                sl.persisted_count = n;
                w!(m.pcm_write(format::frame_addr(sl.frame) + format::HDR_DESC_COUNT, &n.to_le_bytes()));
            }
            self.write_hot(m, s, true)?;
        }
        Ok(())
    }

    /// SQLite rewrote header bytes of a live journal (the record count after its sync).
    pub fn update_header(&mut self, m: &mut Media, s: usize, off: usize, data: &[u8]) -> R<()> {
        m.ctx = EventKind::JournalMeta;
        let sl = &mut self.slots[s];
        let mut st = sl.hdr.to_stream();
        let end = (off + data.len()).min(STREAM_HDR);
        if off < end {
            st[off..end].copy_from_slice(&data[..end - off]);
        }
        sl.hdr = HeaderCopy::from_stream(&st, sl.hdr.generation);
        let (h, c, b) = (sl.frame, sl.copy, sl.hdr.encode());
        w!(m.pcm_write(format::copy_addr(h, c), &b));
        self.hot_if_magic(m, s)
    }

    fn lookup(&self, s: usize, pgno: u32) -> Option<usize> {
        let i = *self.slots[s].by_pg.get(pgno as usize)?;
        (i != 0).then(|| i as usize - 1)
    }

    /// SQLite wrote the page number of record `k`: find the descriptor and portion.
    pub fn record_pgno(&mut self, m: &mut Media, s: usize, k: usize, pgno: u32) -> R<()> {
        m.ctx = EventKind::JournalMeta;
        if k != self.slots[s].records.len() || k >= DESCS as usize {
            return Err(JErr::Protocol(format!("journal record {k} written out of order")));
        }
        let old = self.lookup(s, pgno);
        if let Some(d) = old {
            if flag::get(self.slots[s].descs[d].v, self.xor()) {
                return Err(JErr::Protocol(format!("page {pgno} journaled twice")));
            }
            let f = format::split_ptr(self.slots[s].descs[d].ptr).0;
            let usable = self.pol.reuse
                && match self.frames[f].state {
                    FState::Active => true,
                    FState::Reuse => self.activate_data(m, s, f)?,
                    FState::Invalid => false,
                };
            if usable {
                self.slots[s].descs[d].ord = k as u16;
                self.write_desc(m, s, d)?;
                self.slots[s].records.push(d as u16);
                self.stats.records += 1;
                self.stats.reused_records += 1;
                return Ok(());
            }
        }
        let ptr = self.alloc_portion(m, s)?;
        let d = match self.lookup(s, pgno) {
            Some(d) => {
                let (f, q) = format::split_ptr(self.slots[s].descs[d].ptr);
                self.frames[f].used &= !(1u64 << q);
                d
            }
            None => self.free_desc(s)?,
        };
        let sl = &mut self.slots[s];
        if d == sl.descs.len() {
            sl.descs.push(Desc::default());
        }
        let ds = &mut sl.descs[d];
        (ds.pgno, ds.ptr, ds.ord) = (pgno, ptr, k as u16);
        if sl.by_pg.len() <= pgno as usize {
            sl.by_pg.resize(pgno as usize + 1, 0);
        }
        sl.by_pg[pgno as usize] = d as u32 + 1;
        sl.records.push(d as u16);
        self.stats.records += 1;
        // An appended descriptor becomes visible to recovery when the count is written, just
        // before the journal turns hot (`hot_if_magic`).
        self.write_desc(m, s, d)
    }

    fn free_desc(&self, s: usize) -> R<usize> {
        let sl = &self.slots[s];
        let xor = self.xor();
        match sl.descs.iter().position(|d| d.ptr == 0 && !flag::get(d.v, xor)) {
            Some(d) => Ok(d),
            None if sl.descs.len() < DESCS as usize => Ok(sl.descs.len()),
            None => Err(JErr::Full),
        }
    }

    /// Bring data frame `f` (reuse state) back to active for slot `s`, migrating it first if it
    /// reached the reuse limit. False if no frame was free for the migration.
    fn activate_data(&mut self, m: &mut Media, s: usize, f: usize) -> R<bool> {
        let mut f = f;
        if self.pol.reuse_limit.is_some_and(|n| self.frames[f].uses >= n) {
            self.frames[f].state = FState::Active; // pinned against collection
            let g = match self.alloc_frame(m) {
                Ok(g) => g,
                Err(JErr::Full) => {
                    self.frames[f].state = FState::Reuse;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            };
            self.migrate_data(m, s, f, g)?;
            f = g;
        }
        self.frames[f].uses += 1;
        self.write_count(m, f)?;
        self.set_state(m, f, FState::Active)?;
        Ok(true)
    }

    /// Copy the referenced portions of `f` to `g`, then repoint their descriptors.
    fn migrate_data(&mut self, m: &mut Media, s: usize, f: usize, g: usize) -> R<()> {
        let saved = m.ctx;
        m.ctx = EventKind::Gc;
        let used = self.frames[f].used;
        let mut buf = vec![0u8; format::PAGE_BYTES as usize];
        for q in (0..PORTIONS as usize).filter(|q| used >> q & 1 == 1) {
            m.pcm_read(format::portion_addr(format::ptr_of(f, q)), &mut buf);
            w!(m.pcm_write(format::portion_addr(format::ptr_of(g, q)), &buf));
        }
        self.frames[g] = Frame { state: FState::Invalid, header: false, owner: s, uses: 0, used };
        for d in 0..self.slots[s].descs.len() {
            let ptr = self.slots[s].descs[d].ptr;
            if ptr != 0 && format::split_ptr(ptr).0 == f {
                self.slots[s].descs[d].ptr = format::ptr_of(g, format::split_ptr(ptr).1);
                self.write_desc(m, s, d)?;
            }
        }
        m.ctx = saved;
        self.stats.migrations += 1;
        self.set_state(m, f, FState::Invalid)
    }

    /// A free portion for slot `s`: in its current data frame, another active one, or a fresh
    /// frame.
    fn alloc_portion(&mut self, m: &mut Media, s: usize) -> R<u16> {
        let fits = |j: &Journal, f: usize| {
            let fr = &j.frames[f];
            fr.state == FState::Active && !fr.header && fr.owner == s && fr.used != u64::MAX
        };
        let cur = self.slots[s].cur_data;
        let f = if cur != 0 && fits(self, cur) {
            cur
        } else if let Some(f) = (1..self.frames.len()).find(|&f| fits(self, f)) {
            f
        } else {
            let f = self.alloc_frame(m)?;
            self.frames[f] = Frame { state: FState::Invalid, header: false, owner: s, uses: 1, used: 0 };
            self.write_count(m, f)?;
            self.set_state(m, f, FState::Active)?;
            f
        };
        self.slots[s].cur_data = f;
        let q = (!self.frames[f].used).trailing_zeros() as usize;
        self.frames[f].used |= 1u64 << q;
        if !self.pol.s2 {
            let next = (!self.frames[f].used).trailing_zeros() as usize;
            let ff = if next < PORTIONS as usize { format::ptr_of(f, next) } else { 0 };
            w!(m.pcm_write(format::frame_addr(self.slots[s].frame) + format::HDR_FIRST_FREE, &ff.to_le_bytes()));
        }
        Ok(format::ptr_of(f, q))
    }

    /// SQLite wrote the page image of record `k`.
    pub fn record_data(&mut self, m: &mut Media, s: usize, k: usize, data: &[u8]) -> R<()> {
        let d = *self.slots[s].records.get(k).ok_or_else(|| JErr::Protocol(format!("record {k} data before pgno")))?;
        m.ctx = EventKind::JournalData;
        w!(m.pcm_write(format::portion_addr(self.slots[s].descs[d as usize].ptr), data));
        Ok(())
    }

    /// SQLite wrote the checksum of record `k`: store it and set the valid flag (one block).
    pub fn record_cksum(&mut self, m: &mut Media, s: usize, k: usize, cksum: u32) -> R<()> {
        let d = *self.slots[s].records.get(k).ok_or_else(|| JErr::Protocol(format!("record {k} cksum before pgno")))?
            as usize;
        m.ctx = EventKind::JournalMeta;
        let xor = self.xor();
        let ds = &mut self.slots[s].descs[d];
        ds.cksum = cksum;
        ds.v = flag::set(ds.v, true, xor);
        self.write_desc(m, s, d)
    }

    /// Clear the hot-journal flag only (the injected bug does this early).
    pub fn clear_hot(&mut self, m: &mut Media, s: usize) -> R<()> {
        m.ctx = EventKind::JournalMeta;
        self.write_hot(m, s, false)
    }

    /// SQLite deleted the journal: clear the hot flag (the commit point), then the valid flags,
    /// then move the frames to reuse state (RU) or free them (RR).
    pub fn end(&mut self, m: &mut Media, s: usize) -> R<()> {
        m.ctx = EventKind::JournalMeta;
        if self.slots[s].hot {
            self.write_hot(m, s, false)?;
        }
        self.slots[s].open = false;
        let xor = self.xor();
        let records = std::mem::take(&mut self.slots[s].records);
        for &d in &records {
            let ds = &mut self.slots[s].descs[d as usize];
            ds.v = flag::set(ds.v, false, xor);
            self.write_desc(m, s, d as usize)?;
        }
        if !self.pol.reuse {
            return self.free_header(m, s);
        }
        for f in 1..self.frames.len() {
            let fr = &self.frames[f];
            if fr.owner == s && fr.state == FState::Active {
                self.set_state(m, f, FState::Reuse)?;
            }
        }
        Ok(())
    }

    /// Journal byte stream size of slot `s` (0 when no journal exists).
    pub fn stream_size(&self, s: usize) -> u64 {
        let sl = &self.slots[s];
        if sl.open {
            super::format::HDR_SECTOR + sl.records.len() as u64 * super::format::RECORD_BYTES
        } else {
            0
        }
    }

    /// Rebuild the DRAM metadata from the PCM image after a crash, repairing what the crash
    /// left half done (valid flags of a journal that was no longer hot; presence and reusable
    /// bits without S2). Err names an impossible image.
    pub fn rebuild(m: &mut Media, pol: Policy) -> Result<Journal, String> {
        let nf = (m.bytes.len() as u64 / format::FRAME_BYTES) as usize;
        let mut j = Journal::new(pol, nf);
        let xor = j.xor();
        let mut mgr = vec![0u8; (format::MGR_SLOTS + SLOTS as u64 * format::SLOT_BYTES) as usize];
        m.pcm_read(0, &mut mgr);
        for s in 0..SLOTS {
            let a = format::slot_addr(s) as usize;
            let rec = SlotRec::decode(&mgr[a..a + format::SLOT_BYTES as usize]);
            j.slots[s].slot_v = rec.v;
            if !flag::get(rec.v, xor) {
                continue;
            }
            let h = rec.frame as usize;
            if h == 0 || h >= nf || j.frames[h].state != FState::Invalid {
                return Err(format!("slot {s} names frame {h}, out of range or taken"));
            }
            j.rebuild_slot(m, s, h, rec.name_str(), &mgr)?;
        }
        for s in 0..SLOTS {
            if j.slots[s].valid && !j.slots[s].hot {
                j.rebuild_repair_valid(m, s).map_err(|e| format!("repair: {e:?}"))?;
            }
        }
        if !j.pol.s2 {
            let (p, r) = (j.presence, j.reusable);
            if !m.pcm_write(format::MGR_PRESENCE, &p.to_le_bytes())
                || !m.pcm_write(format::MGR_REUSABLE, &r.to_le_bytes())
            {
                return Err("crash during repair".into());
            }
        }
        Ok(j)
    }

    fn rebuild_slot(&mut self, m: &mut Media, s: usize, h: usize, name: String, mgr: &[u8]) -> Result<(), String> {
        let xor = self.xor();
        let n_copies = self.pol.header_copies as usize;
        let mut head = vec![0u8; format::HDR_DESCS as usize];
        m.pcm_read(format::frame_addr(h), &mut head);
        let hot_byte = head[format::HDR_HOT as usize];
        let count = |o: u64, n: usize| -> u64 {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&head[o as usize..o as usize + n]);
            u64::from_le_bytes(b)
        };
        let nd = count(format::HDR_DESC_COUNT, 2) as usize;
        if nd > DESCS as usize {
            return Err(format!("header frame {h}: {nd} descriptors"));
        }
        let (copy, hdr) = (0..n_copies)
            .map(|i| {
                let o = (format::HDR_COPIES + i as u64 * format::COPY_BYTES) as usize;
                (i, HeaderCopy::decode(&head[o..o + format::COPY_BYTES as usize]))
            })
            .max_by_key(|(i, c)| (c.generation, usize::MAX - i))
            .expect("at least one copy");
        let mut raw = vec![0u8; nd * format::DESC_BYTES as usize];
        m.pcm_read(format::desc_addr(h, 0), &mut raw);
        let descs: Vec<Desc> = raw.chunks(format::DESC_BYTES as usize).map(Desc::decode).collect();
        let hot = flag::get(hot_byte, xor);
        let uses = if self.pol.s2 { 1 } else { count(format::HDR_REUSE_COUNT, 4) as u32 };
        self.frames[h] = Frame { state: FState::Invalid, header: true, owner: s, uses, used: 0 };
        self.set_state_dram(h, if hot { FState::Active } else { FState::Reuse });
        let mut by_pg = Vec::new();
        let mut records: Vec<(u16, u16)> = Vec::new();
        for (d, ds) in descs.iter().enumerate() {
            if ds.ptr == 0 {
                continue;
            }
            let (f, q) = format::split_ptr(ds.ptr);
            if f == 0 || f >= self.frames.len() || f == h {
                return Err(format!("slot {s} descriptor {d}: PTR to frame {f}"));
            }
            let fr = &mut self.frames[f];
            if fr.state != FState::Invalid && (fr.header || fr.owner != s) {
                return Err(format!("frame {f} claimed by two journals"));
            }
            if fr.used >> q & 1 == 1 {
                return Err(format!("portion {f}.{q} referenced twice"));
            }
            if fr.state == FState::Invalid {
                let c = &mgr[(format::MGR_COUNTS + 2 * f as u64) as usize..][..2];
                let uses = if self.pol.s2 { 1 } else { u16::from_le_bytes([c[0], c[1]]) as u32 };
                *fr = Frame { state: FState::Invalid, header: false, owner: s, uses, used: 0 };
                self.set_state_dram(f, FState::Reuse);
            }
            self.frames[f].used |= 1u64 << q;
            let valid = flag::get(ds.v, xor);
            if hot && valid {
                self.set_state_dram(f, FState::Active);
                records.push((ds.ord, d as u16));
            }
            if by_pg.len() <= ds.pgno as usize {
                by_pg.resize(ds.pgno as usize + 1, 0);
            }
            by_pg[ds.pgno as usize] = d as u32 + 1;
        }
        records.sort_unstable();
        let sl = &mut self.slots[s];
        *sl = Slot {
            valid: true,
            name,
            frame: h,
            open: hot,
            hot,
            copy,
            hdr,
            descs,
            by_pg,
            records: records.into_iter().map(|(_, d)| d).collect(),
            cur_data: 0,
            hot_byte,
            slot_v: sl.slot_v,
            persisted_count: nd as u16,
        };
        Ok(())
    }

    fn set_state_dram(&mut self, f: usize, st: FState) {
        self.frames[f].state = st;
        let bit = 1u64 << f;
        self.presence = if st == FState::Active { self.presence | bit } else { self.presence & !bit };
        self.reusable = if st == FState::Invalid { self.reusable & !bit } else { self.reusable | bit };
    }

    fn rebuild_repair_valid(&mut self, m: &mut Media, s: usize) -> R<()> {
        let xor = self.xor();
        for d in 0..self.slots[s].descs.len() {
            if flag::get(self.slots[s].descs[d].v, xor) {
                let ds = &mut self.slots[s].descs[d];
                ds.v = flag::set(ds.v, false, xor);
                self.write_desc(m, s, d)?;
            }
        }
        if !self.pol.reuse {
            self.free_header(m, s)?;
        }
        Ok(())
    }

    /// Check the DRAM metadata against itself and against the PCM image: every descriptor
    /// mirrored byte for byte, each portion referenced once, frame states consistent with the
    /// slots that own them.
    pub fn check(&self, m: &Media) -> Result<(), String> {
        let xor = self.xor();
        let mut used = vec![0u64; self.frames.len()];
        for (s, sl) in self.slots.iter().enumerate().filter(|(_, sl)| sl.valid) {
            let h = sl.frame;
            let fr = &self.frames[h];
            if !fr.header || fr.owner != s || fr.state == FState::Invalid {
                return Err(format!("slot {s}: header frame {h} is {fr:?}"));
            }
            let c = (format::frame_addr(h) + format::HDR_DESC_COUNT) as usize;
            if u16::from_le_bytes([m.bytes[c], m.bytes[c + 1]]) != sl.persisted_count {
                return Err(format!("slot {s}: descriptor count in PCM differs from DRAM"));
            }
            if (fr.state == FState::Active) != sl.open {
                return Err(format!("slot {s}: header frame {h} {:?} but open = {}", fr.state, sl.open));
            }
            for (d, ds) in sl.descs.iter().enumerate() {
                let a = format::desc_addr(h, d) as usize;
                if m.bytes[a..a + format::DESC_BYTES as usize] != ds.encode() {
                    return Err(format!("slot {s} descriptor {d}: DRAM and PCM differ"));
                }
                if ds.ptr == 0 {
                    continue;
                }
                let (f, q) = format::split_ptr(ds.ptr);
                let ff = &self.frames[f];
                if ff.header || ff.owner != s || ff.state == FState::Invalid || used[f] >> q & 1 == 1 {
                    return Err(format!("slot {s} descriptor {d}: portion {f}.{q} in {ff:?}"));
                }
                if flag::get(ds.v, xor) && (!sl.open || ff.state != FState::Active) {
                    return Err(format!("slot {s} descriptor {d}: valid outside an open journal"));
                }
                used[f] |= 1 << q;
            }
        }
        for (f, fr) in self.frames.iter().enumerate().skip(1) {
            if !fr.header && fr.state != FState::Invalid && fr.used != used[f] {
                return Err(format!("frame {f}: used {:x} but descriptors reference {:x}", fr.used, used[f]));
            }
            if fr.state != FState::Invalid && !self.slots.get(fr.owner).is_some_and(|s| s.valid) {
                return Err(format!("frame {f} {:?} owned by an invalid slot", fr.state));
            }
        }
        Ok(())
    }

    /// Decoded current journal header of slot `s` (SQLite's stream bytes).
    pub fn header_stream(&self, s: usize) -> [u8; STREAM_HDR] {
        self.slots[s].hdr.to_stream()
    }
}
