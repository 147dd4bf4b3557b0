//! The journal manager: frame and portion allocation with reuse, placement into the database's
//! own reuse-state frames, reuse limits (per portion, or per frame with migration), garbage
//! collection (whole or incremental, lazy: a freed frame keeps its associations until another
//! use takes it), journal start and end, and the rebuild of the DRAM-resident metadata from PCM
//! after a crash.
//!
//! DRAM holds a mirror of everything (frame states, descriptors, the current header copy) so
//! that lookups cost no PCM reads; PCM holds what recovery needs, written in the order that
//! docs/journal-format.md argues for. Without S2, the quasi-non-volatile and non-functional
//! data (presence bits, reusable bits, reuse counters, first-free pointer) are written to PCM
//! too; with S2 they live only in DRAM and are rebuilt (reuse counters restart at 1).

use super::bug::Bug;
use super::format::{self, flag, Desc, HeaderCopy, SlotRec, DESCS, PORTIONS, SLOTS, STREAM_HDR};
use super::media::{EventKind, Media};
use super::policy::Policy;
use serde::Serialize;

/// `Frame::owner` of a frame that belongs to no database file.
const NONE: usize = usize::MAX;

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
    /// Slot of the database file the frame belongs to. An invalid frame with an owner was
    /// freed by garbage collection but not taken for another use yet: the owner's descriptors
    /// still name it (its associations are kept), and the owner may take it back.
    pub owner: usize,
    /// Uses since the frame was allocated (the frame's reuse counter: header frames, and data
    /// frames under a per-frame limit).
    pub uses: u32,
    /// Portions referenced by a descriptor (data frames).
    pub used: u64,
    /// Page images written into each portion since the frame was allocated (the per-portion
    /// reuse counters).
    pub puses: [u16; PORTIONS as usize],
}

impl Frame {
    /// Freed by garbage collection, associations kept (see `owner`).
    pub fn stale(&self) -> bool {
        self.state == FState::Invalid && self.owner != NONE
    }

    /// A data frame of slot `s` that is not in use by a journal: reuse state, or freed by
    /// garbage collection with its associations kept.
    fn idle_data_of(&self, s: usize) -> bool {
        !self.header && self.owner == s && self.state != FState::Active
    }
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
    /// The first-free pointer: where the next placement of a new page starts (0: frame 1).
    pub next_fit: u16,
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
    /// Records of pages without a usable old portion, by where they were placed: a free
    /// portion of the database's own reuse-state (or freed, untaken) frames, an active frame of
    /// the journal, a freshly allocated frame.
    pub placed_reuse_frame: u64,
    pub placed_active_frame: u64,
    pub placed_fresh_frame: u64,
    /// Records whose old portion had reached the per-portion reuse limit (the page moved).
    pub moved_at_portion_limit: u64,
    /// Frames freed by garbage collection and taken back by their database, associations kept.
    pub reclaimed_after_gc: u64,
    /// Frames freed by garbage collection whose associations were cleared when another use
    /// took them.
    pub associations_dropped: u64,
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

fn bad_header() -> JErr {
    JErr::Protocol("journal header: sector or page size not a power of two".into())
}

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
    /// An injected defect (crash-checker tests).
    pub bug: Option<Bug>,
}

fn free_frame() -> Frame {
    Frame { state: FState::Invalid, header: false, owner: NONE, uses: 0, used: 0, puses: [0; PORTIONS as usize] }
}

/// A frame just taken for slot `s` (state invalid until `set_state`).
fn new_frame(header: bool, s: usize, uses: u32, used: u64) -> Frame {
    Frame { header, owner: s, uses, used, ..free_frame() }
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
            bug: None,
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

    /// The reuse counter of frame `f` (header frames; data frames under a per-frame limit),
    /// into PCM without S2.
    fn write_count(&mut self, m: &mut Media, f: usize) -> R<()> {
        if self.pol.s2 {
            return Ok(());
        }
        let fr = &self.frames[f];
        if fr.header {
            w!(m.pcm_write(format::frame_addr(f) + format::HDR_REUSE_COUNT, &fr.uses.to_le_bytes()));
        } else if self.pol.frame_limit().is_some() {
            let c = fr.uses.min(u16::MAX as u32) as u16;
            w!(m.pcm_write(format::MGR_COUNTS + 2 * f as u64, &c.to_le_bytes()));
        }
        Ok(())
    }

    /// The per-portion reuse counters of data frame `f` (all of them with `q` None), into PCM
    /// without S2 (and without a per-frame limit, whose counters are per frame).
    fn write_pcount(&mut self, m: &mut Media, f: usize, q: Option<usize>) -> R<()> {
        if self.pol.s2 || self.pol.frame_limit().is_some() {
            return Ok(());
        }
        let row = &self.frames[f].puses;
        let (lo, hi) = q.map_or((0, PORTIONS as usize), |q| (q, q + 1));
        let bytes: Vec<u8> = row[lo..hi].iter().flat_map(|c| c.to_le_bytes()).collect();
        w!(m.pcm_write(format::portion_count_addr(f, lo), &bytes));
        Ok(())
    }

    /// Move frame `f` to `st`, keeping presence (active) and reusable (not invalid) bits.
    fn set_state(&mut self, m: &mut Media, f: usize, st: FState) -> R<()> {
        self.frames[f].state = st;
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

    /// Free frame `f` for any use: invalid, no owner, no association.
    fn release(&mut self, m: &mut Media, f: usize) -> R<()> {
        self.frames[f] = Frame { state: self.frames[f].state, ..free_frame() };
        self.set_state(m, f, FState::Invalid)
    }

    /// The first frame, in rotation from `from`, that `ok` accepts.
    fn rotate(&self, from: usize, ok: impl Fn(&Frame) -> bool) -> Option<usize> {
        let n = self.frames.len();
        (0..n - 1).map(|i| 1 + (from - 1 + i) % (n - 1)).find(|&f| ok(&self.frames[f]))
    }

    /// A free frame, in rotation: one with no association first, then one freed by garbage
    /// collection (its associations are cleared now); garbage collection if there is none.
    fn alloc_frame(&mut self, m: &mut Media) -> R<usize> {
        for pass in 0..2 {
            let clean = self.rotate(self.cursor, |fr| fr.state == FState::Invalid && fr.owner == NONE);
            if let Some(f) = clean.or_else(|| self.rotate(self.cursor, |fr| fr.state == FState::Invalid)) {
                self.cursor = 1 + f % (self.frames.len() - 1);
                if self.frames[f].owner != NONE {
                    self.drop_stale(m, f)?;
                }
                return Ok(f);
            }
            if pass == 0 {
                self.gc(m)?;
            }
        }
        Err(JErr::Full)
    }

    /// Frame `f`, freed by garbage collection, is taken for another use: clear the
    /// associations that still name it (a header frame: its slot, and with it every data frame
    /// of the database).
    fn drop_stale(&mut self, m: &mut Media, f: usize) -> R<()> {
        let saved = m.ctx;
        m.ctx = EventKind::Gc;
        self.stats.associations_dropped += 1;
        if self.frames[f].header {
            self.free_header(m, self.frames[f].owner)?;
        } else if self.bug == Some(Bug::StaleAssociationKept) {
            self.release(m, f)?;
        } else {
            self.free_data(m, f)?;
        }
        m.ctx = saved;
        Ok(())
    }

    /// Free the frames in reuse state: all, or `gc_percent` % of them (incremental, INVp),
    /// taken in rotation from where the last collection stopped. Freeing changes the frame's
    /// state only (the paper: "without deleting the contents"); its database keeps the
    /// associations until another use takes the frame (`drop_stale`) and may take it back.
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
        for &f in &cand[..take] {
            self.set_state(m, f, FState::Invalid)?;
            self.gc_cursor = 1 + f % (n - 1);
        }
        self.stats.frames_freed_by_gc += take as u64;
        m.ctx = saved;
        Ok(())
    }

    /// Free data frame `f` (not active): clear the PTRs that name it, then release it.
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
        self.release(m, f)
    }

    /// Free the header frame of slot `s` (not hot) and every data frame of the database: the
    /// slot's valid flag is cleared first, which makes them all unreachable at once.
    fn free_header(&mut self, m: &mut Media, s: usize) -> R<()> {
        let sl = &mut self.slots[s];
        debug_assert!(sl.valid && !sl.open);
        sl.slot_v = flag::set(sl.slot_v, false, self.pol.xor);
        sl.valid = false;
        self.write_slot(m, s)?;
        for f in 1..self.frames.len() {
            if self.frames[f].owner == s {
                self.release(m, f)?;
            }
        }
        let sl = &mut self.slots[s];
        sl.descs.clear();
        sl.by_pg.clear();
        Ok(())
    }

    /// Make the header frame of slot `s` ready for a new journal: its old one (RU), or a
    /// fresh one in rotation (RR, or no header frame yet), which the slot is switched to in one
    /// block write once it is initialised.
    fn header_for(&mut self, m: &mut Media, s: usize) -> R<()> {
        let sl = &self.slots[s];
        if sl.valid && self.pol.reuse {
            let h = sl.frame;
            if self.frames[h].stale() {
                self.stats.reclaimed_after_gc += 1;
            }
            if self.pol.header_limit().is_some_and(|n| self.frames[h].uses >= n) {
                return self.migrate_header(m, s);
            }
            self.frames[h].uses += 1;
            self.write_count(m, h)?;
            return self.set_state(m, h, FState::Active);
        }
        // Under RR the slot may still name the header frame of its last journal (deleted through
        // the presence bits); taking that very frame frees the slot first (`drop_stale`).
        let h = self.alloc_frame(m)?;
        let old = self.slots[s].valid.then_some(self.slots[s].frame);
        self.frames[h] = new_frame(true, s, 1, 0);
        let sl = &mut self.slots[s];
        sl.frame = h;
        sl.hot_byte = 0;
        sl.descs.clear();
        sl.by_pg.clear();
        sl.copy = self.pol.header_copies as usize - 1;
        sl.persisted_count = 0;
        sl.next_fit = 0;
        w!(m.pcm_write(format::frame_addr(h) + format::HDR_HOT, &[0]));
        w!(m.pcm_write(format::frame_addr(h) + format::HDR_DESC_COUNT, &0u16.to_le_bytes()));
        // The header copies are not zeroed: the new journal's generations start above every
        // valid copy the frame still holds (read, not written).
        let mut copies = vec![0u8; (self.pol.header_copies as u64 * format::COPY_BYTES) as usize];
        m.pcm_read(format::copy_addr(h, 0), &mut copies);
        let generation = match format::first_generation(&copies) {
            Some(g) => g,
            None => {
                copies.fill(0);
                w!(m.pcm_write(format::copy_addr(h, 0), &copies));
                0
            }
        };
        self.slots[s].hdr = HeaderCopy { generation, ..HeaderCopy::default() };
        self.write_count(m, h)?;
        self.set_state(m, h, FState::Active)?;
        let sl = &mut self.slots[s];
        sl.valid = true;
        sl.slot_v = flag::set(sl.slot_v, true, self.pol.xor);
        self.write_slot(m, s)?;
        match old {
            Some(o) => self.release(m, o),
            None => Ok(()),
        }
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
        self.frames[g] = new_frame(true, s, 1, 0);
        self.slots[s].frame = g;
        self.write_slot(m, s)?;
        m.ctx = saved;
        self.stats.migrations += 1;
        self.write_count(m, g)?;
        self.set_state(m, g, FState::Active)?;
        self.release(m, h)
    }

    /// SQLite wrote the journal header (offset 0) of a journal that does not exist yet.
    pub fn start(&mut self, m: &mut Media, s: usize, stream: &[u8; STREAM_HDR]) -> R<()> {
        m.ctx = EventKind::JournalMeta;
        self.header_for(m, s)?;
        let n = self.pol.header_copies as usize;
        let sl = &mut self.slots[s];
        sl.copy = (sl.copy + 1) % n;
        sl.hdr = HeaderCopy::from_stream(stream, sl.hdr.generation.wrapping_add(1)).ok_or_else(bad_header)?;
        sl.records.clear();
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
        sl.hdr = HeaderCopy::from_stream(&st, sl.hdr.generation).ok_or_else(bad_header)?;
        let (h, c, b) = (sl.frame, sl.copy, sl.hdr.encode());
        w!(m.pcm_write(format::copy_addr(h, c), &b));
        self.hot_if_magic(m, s)
    }

    fn lookup(&self, s: usize, pgno: u32) -> Option<usize> {
        let i = *self.slots[s].by_pg.get(pgno as usize)?;
        (i != 0).then(|| i as usize - 1)
    }

    /// A page image goes into portion `q` of frame `f`: count the portion's use.
    fn count_use(&mut self, m: &mut Media, f: usize, q: usize) -> R<()> {
        let c = &mut self.frames[f].puses[q];
        *c = c.saturating_add(1);
        self.write_pcount(m, f, Some(q))
    }

    /// SQLite wrote the page number of record `k`: find the descriptor and portion. The page
    /// goes into its old portion if it has one (within the reuse limit), else where
    /// `alloc_portion` places it.
    pub fn record_pgno(&mut self, m: &mut Media, s: usize, k: usize, pgno: u32) -> R<()> {
        m.ctx = EventKind::JournalMeta;
        if k != self.slots[s].records.len() || k >= DESCS as usize {
            return Err(JErr::Protocol(format!("journal record {k} written out of order")));
        }
        let mut shared = None;
        if let Some(d) = self.lookup(s, pgno) {
            if flag::get(self.slots[s].descs[d].v, self.xor()) {
                return Err(JErr::Protocol(format!("page {pgno} journaled twice")));
            }
            let (f, q) = format::split_ptr(self.slots[s].descs[d].ptr);
            debug_assert!(self.frames[f].owner == s && !self.frames[f].header);
            let at_limit = self.pol.portion_limit().is_some_and(|n| self.frames[f].puses[q] as u32 >= n);
            let usable = self.pol.reuse
                && !at_limit
                && match self.frames[f].state {
                    FState::Active => true,
                    _ => self.activate_data(m, s, f)?,
                };
            if usable {
                let (f, q) = format::split_ptr(self.slots[s].descs[d].ptr); // a migration moves it
                self.count_use(m, f, q)?;
                self.slots[s].descs[d].ord = k as u16;
                self.write_desc(m, s, d)?;
                self.slots[s].records.push(d as u16);
                self.stats.records += 1;
                self.stats.reused_records += 1;
                return Ok(());
            }
            if at_limit && self.pol.reuse {
                self.stats.moved_at_portion_limit += 1;
                if self.bug == Some(Bug::PortionLimitShared) {
                    shared = Some((f, (q + 1) % PORTIONS as usize));
                }
            }
        }
        let ptr = match shared {
            Some((f, q)) => {
                if self.frames[f].state != FState::Active {
                    self.set_state(m, f, FState::Active)?;
                }
                self.frames[f].used |= 1u64 << q;
                format::ptr_of(f, q)
            }
            None => self.alloc_portion(m, s)?,
        };
        let (f, q) = format::split_ptr(ptr);
        self.count_use(m, f, q)?;
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

    /// Bring data frame `f` of slot `s` (reuse state, or freed by garbage collection and not
    /// taken) back to active, migrating it first if it reached a per-frame reuse limit
    /// (`RUnF`). False if no frame was free for the migration.
    fn activate_data(&mut self, m: &mut Media, s: usize, f: usize) -> R<bool> {
        let mut f = f;
        if self.frames[f].stale() {
            self.stats.reclaimed_after_gc += 1;
        }
        if self.pol.frame_limit().is_some_and(|n| self.frames[f].uses >= n) {
            let before = self.frames[f].state;
            self.frames[f].state = FState::Active; // pinned against collection
            let g = match self.alloc_frame(m) {
                Ok(g) => g,
                Err(JErr::Full) => {
                    self.frames[f].state = before;
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
        self.frames[g] = new_frame(false, s, 0, used);
        for d in 0..self.slots[s].descs.len() {
            let ptr = self.slots[s].descs[d].ptr;
            if ptr != 0 && format::split_ptr(ptr).0 == f {
                self.slots[s].descs[d].ptr = format::ptr_of(g, format::split_ptr(ptr).1);
                self.write_desc(m, s, d)?;
            }
        }
        m.ctx = saved;
        self.stats.migrations += 1;
        self.release(m, f)
    }

    /// A portion for a page of slot `s` that has no usable old portion, placed next-fit from
    /// the database's first-free pointer: a free portion of the pointer's frame or of another
    /// of the database's own frames in reuse state (or freed by garbage collection and not
    /// taken yet), then of its active frames, then a fresh frame. A free portion is one no
    /// descriptor names, below the per-portion reuse limit; an idle frame at a per-frame limit
    /// is passed over (taking it would migrate it).
    fn alloc_portion(&mut self, m: &mut Media, s: usize) -> R<u16> {
        let (plimit, flimit) = (self.pol.portion_limit(), self.pol.frame_limit());
        let free_in = |fr: &Frame, from: usize| {
            (from..PORTIONS as usize)
                .find(|&q| fr.used >> q & 1 == 0 && plimit.is_none_or(|n| (fr.puses[q] as u32) < n))
        };
        let idle = |fr: &Frame| fr.idle_data_of(s) && flimit.is_none_or(|n| fr.uses < n);
        let active = |fr: &Frame| !fr.header && fr.owner == s && fr.state == FState::Active;
        let nf = self.slots[s].next_fit;
        let (f0, q0) = if nf == 0 { (1, 0) } else { format::split_ptr(nf) };
        let here = (f0 < self.frames.len() && (idle(&self.frames[f0]) || active(&self.frames[f0])))
            .then(|| free_in(&self.frames[f0], q0).map(|q| (f0, q)))
            .flatten();
        let found = here
            .or_else(|| {
                let f = self.rotate(f0, |fr| idle(fr) && free_in(fr, 0).is_some())?;
                Some((f, free_in(&self.frames[f], 0)?))
            })
            .or_else(|| {
                let f = self.rotate(f0, |fr| active(fr) && free_in(fr, 0).is_some())?;
                Some((f, free_in(&self.frames[f], 0)?))
            });
        let (f, q) = match found {
            Some((f, q)) if self.frames[f].state == FState::Active => {
                self.stats.placed_active_frame += 1;
                (f, q)
            }
            Some((f, q)) => {
                self.stats.placed_reuse_frame += 1;
                self.activate_data(m, s, f)?;
                (f, q)
            }
            None => {
                let f = self.alloc_frame(m)?;
                self.frames[f] = new_frame(false, s, 1, 0);
                self.write_count(m, f)?;
                self.write_pcount(m, f, None)?;
                self.set_state(m, f, FState::Active)?;
                self.stats.placed_fresh_frame += 1;
                (f, 0)
            }
        };
        let forget = self.bug == Some(Bug::PlaceTakenPortion) && found.is_some();
        if !forget {
            self.frames[f].used |= 1u64 << q;
        }
        let next = if forget { Some(q) } else { free_in(&self.frames[f], q) };
        let ff = next.map_or(0, |n| format::ptr_of(f, n));
        if ff != self.slots[s].next_fit {
            self.slots[s].next_fit = ff;
            if !self.pol.s2 {
                w!(m.pcm_write(format::frame_addr(self.slots[s].frame) + format::HDR_FIRST_FREE, &ff.to_le_bytes()));
            }
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
        let records = std::mem::take(&mut self.slots[s].records);
        if !self.pol.reuse {
            return self.end_rr(m, s);
        }
        let xor = self.xor();
        for &d in &records {
            let ds = &mut self.slots[s].descs[d as usize];
            ds.v = flag::set(ds.v, false, xor);
            self.write_desc(m, s, d as usize)?;
        }
        for f in 1..self.frames.len() {
            let fr = &self.frames[f];
            if fr.owner == s && fr.state == FState::Active {
                self.set_state(m, f, FState::Reuse)?;
            }
        }
        Ok(())
    }

    /// RR's journal end: the deletion is marked through the presence bits only (the frames go
    /// invalid; nothing in the header frame or the slot is written): the slot keeps naming the
    /// header frame, no longer hot, until the next journal switches it to a fresh frame or
    /// another use takes the frame (`drop_stale` frees the slot first). Its descriptors are
    /// never read again (the rebuild ignores the descriptors of a header frame that is not hot
    /// under RR), so the data frames are free at once.
    fn end_rr(&mut self, m: &mut Media, s: usize) -> R<()> {
        let h = self.slots[s].frame;
        for f in 1..self.frames.len() {
            if self.frames[f].owner == s && f != h {
                self.release(m, f)?;
            }
        }
        let sl = &mut self.slots[s];
        sl.descs.clear();
        sl.by_pg.clear();
        self.set_state(m, h, FState::Invalid)
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
        let mgr_len = if j.pol.s2 { format::MGR_SLOTS + SLOTS as u64 * format::SLOT_BYTES } else { format::MGR_END };
        let mut mgr = vec![0u8; mgr_len as usize];
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
        let o = format::HDR_COPIES as usize;
        let current = format::current_copy(&head[o..o + n_copies * format::COPY_BYTES as usize]);
        let hot = flag::get(hot_byte, xor);
        if hot && current.is_none() {
            return Err(format!("header frame {h}: hot with no valid journal header copy"));
        }
        let (copy, hdr) = current.unwrap_or((n_copies - 1, HeaderCopy::default()));
        // RR never reuses: the descriptors of a deleted journal (not hot) mean nothing, and its
        // header frame is free for any use (`end_rr`).
        let live = hot || self.pol.reuse;
        let mut raw = vec![0u8; if live { nd * format::DESC_BYTES as usize } else { 0 }];
        m.pcm_read(format::desc_addr(h, 0), &mut raw);
        let descs: Vec<Desc> = raw.chunks(format::DESC_BYTES as usize).map(Desc::decode).collect();
        let uses = if self.pol.s2 { 1 } else { count(format::HDR_REUSE_COUNT, 4) as u32 };
        self.frames[h] = new_frame(true, s, uses, 0);
        self.set_state_dram(
            h,
            match (hot, live) {
                (true, _) => FState::Active,
                (false, true) => FState::Reuse,
                (false, false) => FState::Invalid,
            },
        );
        let mut by_pg = Vec::new();
        let mut records: Vec<(u16, u16)> = Vec::new();
        for (d, ds) in descs.iter().enumerate() {
            if ds.ptr == 0 {
                continue;
            }
            let f = self.claim_portion(s, h, d, ds, mgr)?;
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
            next_fit: 0,
            hot_byte,
            slot_v: sl.slot_v,
            persisted_count: nd as u16,
        };
        Ok(())
    }

    /// Rebuilding slot `s` (header frame `h`): the portion its descriptor `d` (`ds`) names is
    /// the slot's, its frame taken with its counts from the manager frame `mgr` if no journal
    /// held it yet. Returns the frame; an error if the descriptor is out of range or the
    /// portion is another journal's or named twice.
    fn claim_portion(&mut self, s: usize, h: usize, d: usize, ds: &Desc, mgr: &[u8]) -> Result<usize, String> {
        let (f, q) = format::split_ptr(ds.ptr);
        if f == 0 || f >= self.frames.len() || f == h {
            return Err(format!("slot {s} descriptor {d}: PTR to frame {f}"));
        }
        if ds.pgno >= format::MAX_PGNO {
            return Err(format!(
                "slot {s} descriptor {d}: page number {} (allowed below {})",
                ds.pgno,
                format::MAX_PGNO
            ));
        }
        let fr = &mut self.frames[f];
        if fr.state != FState::Invalid && (fr.header || fr.owner != s) {
            return Err(format!("frame {f} claimed by two journals"));
        }
        if fr.used >> q & 1 == 1 {
            return Err(format!("portion {f}.{q} referenced twice"));
        }
        if fr.state == FState::Invalid {
            let c = |a: u64| u16::from_le_bytes([mgr[a as usize], mgr[a as usize + 1]]);
            let uses = if self.pol.s2 { 1 } else { c(format::MGR_COUNTS + 2 * f as u64) as u32 };
            *fr = new_frame(false, s, uses, 0);
            if !self.pol.s2 {
                fr.puses = std::array::from_fn(|q| c(format::portion_count_addr(f, q)));
            }
            self.set_state_dram(f, FState::Reuse);
        }
        self.frames[f].used |= 1u64 << q;
        if self.pol.s2 {
            self.frames[f].puses[q] = 1;
        }
        Ok(f)
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
            if !fr.header || fr.owner != s {
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
                if ff.header || ff.owner != s || used[f] >> q & 1 == 1 {
                    return Err(format!("slot {s} descriptor {d}: portion {f}.{q} in {ff:?}"));
                }
                if flag::get(ds.v, xor) && (!sl.open || ff.state != FState::Active) {
                    return Err(format!("slot {s} descriptor {d}: valid outside an open journal"));
                }
                used[f] |= 1 << q;
            }
        }
        for (f, fr) in self.frames.iter().enumerate().skip(1) {
            if !fr.header && fr.owner != NONE && fr.used != used[f] {
                return Err(format!("frame {f}: used {:x} but descriptors reference {:x}", fr.used, used[f]));
            }
            if fr.owner == NONE && fr.state != FState::Invalid {
                return Err(format!("frame {f} {:?} has no owner", fr.state));
            }
            if fr.owner != NONE && !self.slots.get(fr.owner).is_some_and(|s| s.valid) {
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
