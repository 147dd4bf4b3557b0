//! One set-associative cache level with true LRU, stored as dense arrays indexed by
//! slot = set * ways + way: a u32 tag per line (the block number: the papers' ADDR is a 32-bit
//! block number, so memory is at most 256 GB), and the rest of a line's state packed in one
//! 8-byte record ([`Line`]): a dirty bit, the hierarchy's links to the line's copies in the
//! neighbouring levels, and a u32 `aux` (the LLC's transaction tag) sharing its place with the
//! link out, which the LLC does not have (one host cache miss per line touched instead of one
//! per array, and a small host footprint: the default hierarchy's state is about 260 KB, which
//! stays in a 512 KB host L2 cache beside the program's data). Up to 16 ways.
//!
//! Recency is one u64 per set: sixteen 4-bit way numbers, most recently used first. The LRU
//! victim is the last of them (O(1)); a hit moves its way to the front and an invalidation
//! moves it to the back, each with a few shifts and masks. Valid lines therefore always precede
//! invalid ones in this order, and an insert fills a free way before it evicts.
//!
//! The arrays are allocated once, in [`SetAssoc::new`], with a power-of-two number of entries
//! (the slots rounded up; the rounding, only for a way count that is not a power of two, is
//! never used): every access masks its index with `slot_mask` (or the set with `set_mask`), so
//! that it is in range whatever [`Slot`] a caller passes, without a bounds check. A slot of a
//! set is below `sets * ways`; out-of-range slots are caught by `debug_assert!`s.
//!
//! A 16-way set's tags are one host cache line, compared four at a time with SSE2 (part of
//! every x86_64; other targets use a plain loop). A [`Slot`] stays valid until its line is
//! evicted or invalidated: lines never move between ways.

use crate::config::CacheConfig;
use crate::types::{BlockId, Cycle};

const INVALID: u32 = u32::MAX;
/// Tag bit marking an older version of a block (LOC's multi-versioned LLC): such a line occupies
/// a way of its block's set but never matches a look-up. Block numbers stay below 2^31 there.
pub const VERSION_BIT: u32 = 1 << 31;
/// Nibble `i` holds `i` (the order of a fresh set: way 0 first).
const IDENTITY: u64 = 0xFEDC_BA98_7654_3210;
const ONES: u64 = 0x1111_1111_1111_1111;
const HIGHS: u64 = 0x8888_8888_8888_8888;

/// Index of a line frame in a [`SetAssoc`] (set * ways + way).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Slot(pub usize);

impl Slot {
    /// "No slot".
    pub const NONE: Slot = Slot(usize::MAX);
}

/// A line pushed out by [`SetAssoc::insert`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub block: BlockId,
    pub dirty: bool,
    pub aux: u32,
    /// The line was an older version of `block` ([`SetAssoc::insert_version`]).
    pub version: bool,
}

/// A set-associative, LRU cache level holding tags and state.
pub struct SetAssoc {
    /// The level keeps an auxiliary tag per line (the LLC; [`SetAssoc::new`]), or a link to the
    /// line's copy in the next level out (L1, L2; [`SetAssoc::new_inner`]): they share a place.
    keeps_aux: bool,
    ways: usize,
    way_shift: u32,
    /// `ways - 1` if `ways` is a power of two (a slot's set is then `s >> way_shift`, its way
    /// `s & way_mask`), else `usize::MAX` (a division).
    way_mask: usize,
    set_mask: u64,
    /// Entries of `tags` and `lines` minus one (their length is a power of two; see the module
    /// docs), and the number of slots in use (`sets * ways`).
    slot_mask: usize,
    slots: usize,
    /// Nibbles of `order` in use (`4 * ways` low bits) and the shift of the last one.
    used: u64,
    last_shift: u32,
    /// The arrays are never resized and start on a host cache line ([`HostLines`]): a core
    /// switch ([`SetAssoc::swap_lines`]) moves a pointer and a length per array.
    tags: HostLines<u32>,
    /// Per line, everything but the tag in one host cache line's worth of place (the tags stay
    /// apart, to be compared four at a time).
    lines: HostLines<Line>,
    order: HostLines<u64>,
    /// Look-up latency in cycles.
    pub latency: Cycle,
}

/// A line's state besides its tag, in 8 bytes: `a` is the auxiliary tag in a level that keeps
/// one (the LLC, kept at 0 until set) or else the `up` link (the slot of the line's copy in the
/// next level out); `d` holds the `down` link (the slot of its copy in the next level in,
/// [`NO_LINK`] when there is none) in bits 0-30 and the dirty bit in bit 31.
#[derive(Copy, Clone, Debug)]
pub(super) struct Line {
    a: u32,
    d: u32,
}

const DIRTY_BIT: u32 = 1 << 31;

/// "No linked slot" (see [`SetAssoc::up`]). Links are slots, below 2^31 - 1 (at most 2^30
/// lines per level: `Config::validate` bounds the sizes).
pub const NO_LINK: u32 = DIRTY_BIT - 1;

impl Line {
    /// A line just filled by the hierarchy: no down link, with `a` (its up link, or aux 0).
    #[inline(always)]
    pub(super) fn fresh(a: u32, dirty: bool) -> Line {
        Line { a, d: NO_LINK | (dirty as u32) << 31 }
    }
    #[inline(always)]
    pub(super) fn dirty(&self) -> bool {
        self.d & DIRTY_BIT != 0
    }
    #[inline(always)]
    pub(super) fn down(&self) -> u32 {
        self.d & NO_LINK
    }
    /// The up link of a line of an inner level, or the aux tag of an LLC line.
    #[inline(always)]
    pub(super) fn up_or_aux(&self) -> u32 {
        self.a
    }
    #[inline(always)]
    fn set_dirty(&mut self, v: bool) {
        self.d = self.d & !DIRTY_BIT | (v as u32) << 31;
    }
    #[inline(always)]
    fn set_down(&mut self, v: u32) {
        debug_assert!(v <= NO_LINK, "link {v} out of range");
        self.d = self.d & DIRTY_BIT | v;
    }
}

/// A fixed-length array whose first entry starts a host cache line (64 bytes): a set's
/// entries at an index that is a multiple of its width then lie in the fewest host lines (a
/// 16-way set's tags, or an 8-way set's [`Line`]s, in exactly one; the allocator aligns a
/// plain boxed slice only to 16 bytes, so a set could straddle two or three host lines). Stored
/// as 64-byte-aligned chunks of 16 entries and read through the chunks' pointer: the same code
/// as a boxed slice's unchecked index. Moved by a pointer and a length.
struct HostLines<T: Copy> {
    chunks: Box<[Chunk<T>]>,
}

/// 16 entries of a [`HostLines`], aligned to a host cache line.
#[derive(Copy, Clone)]
#[repr(C, align(64))]
struct Chunk<T: Copy>([T; 16]);

impl<T: Copy> HostLines<T> {
    /// At least `n` entries, each `v`.
    fn new(v: T, n: usize) -> Self {
        // The entries are read as one array across chunks: no padding may lie between them.
        assert_eq!(std::mem::size_of::<Chunk<T>>(), 16 * std::mem::size_of::<T>());
        HostLines { chunks: vec![Chunk([v; 16]); n.div_ceil(16)].into_boxed_slice() }
    }

    /// Entry `i`.
    ///
    /// # Safety
    /// `i` is below the `n` of [`HostLines::new`].
    #[inline(always)]
    unsafe fn get(&self, i: usize) -> &T {
        &*(self.chunks.as_ptr() as *const T).add(i)
    }

    /// Entry `i`, mutable.
    ///
    /// # Safety
    /// As for [`HostLines::get`].
    #[inline(always)]
    unsafe fn get_mut(&mut self, i: usize) -> &mut T {
        &mut *(self.chunks.as_mut_ptr() as *mut T).add(i)
    }

    /// The `len` entries from `start`.
    ///
    /// # Safety
    /// `start + len` is at most the `n` of [`HostLines::new`].
    #[inline(always)]
    unsafe fn run(&self, start: usize, len: usize) -> &[T] {
        std::slice::from_raw_parts((self.chunks.as_ptr() as *const T).add(start), len)
    }

    /// Every entry (at least the `n` of [`HostLines::new`]).
    fn as_slice(&self) -> &[T] {
        // SAFETY: the chunks are `repr(C)` arrays of 16 `T`s laid end to end.
        unsafe { self.run(0, self.chunks.len() * 16) }
    }
}

/// Mask of the low `bits` bits (`bits` may be 64).
#[inline(always)]
fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

impl SetAssoc {
    /// An empty level whose lines have a u32 auxiliary tag, initially 0 (the LLC's transaction
    /// tag), and no up link.
    pub fn new(cfg: &CacheConfig) -> SetAssoc {
        SetAssoc::build(cfg, true)
    }

    /// An empty inner level (L1, L2): its lines have an up link, and no auxiliary tag.
    pub fn new_inner(cfg: &CacheConfig) -> SetAssoc {
        SetAssoc::build(cfg, false)
    }

    fn build(cfg: &CacheConfig, keeps_aux: bool) -> SetAssoc {
        let lines = (cfg.size_bytes / 64) as usize;
        let ways = cfg.ways as usize;
        let sets = lines / ways;
        assert!(sets.is_power_of_two() && (1..=16).contains(&ways), "validated by Config::validate");
        assert!(lines <= 1 << 30, "validated by Config::validate: slots fit a link");
        // Never resized afterwards: the unchecked accesses below rely on these lengths.
        let entries = lines.next_power_of_two();
        SetAssoc {
            keeps_aux,
            ways,
            way_shift: ways.next_power_of_two().trailing_zeros(),
            way_mask: if ways.is_power_of_two() { ways - 1 } else { usize::MAX },
            set_mask: sets as u64 - 1,
            slot_mask: entries - 1,
            slots: lines,
            used: low_mask(4 * ways as u32),
            last_shift: 4 * (ways as u32 - 1),
            tags: HostLines::new(INVALID, entries),
            lines: HostLines::new(Line::fresh(if keeps_aux { 0 } else { NO_LINK }, false), entries),
            order: HostLines::new(IDENTITY, sets),
            latency: cfg.latency_cycles,
        }
    }

    /// Exchange the lines of two levels of one configuration (a core switch: every core's L1,
    /// and every core's L2, share their geometry and latency, so only the three arrays move,
    /// not the whole level).
    #[inline(always)]
    pub(super) fn swap_lines(&mut self, other: &mut SetAssoc) {
        debug_assert!(
            (self.keeps_aux, self.ways, self.slots, self.latency)
                == (other.keeps_aux, other.ways, other.slots, other.latency)
        );
        std::mem::swap(&mut self.tags, &mut other.tags);
        std::mem::swap(&mut self.lines, &mut other.lines);
        std::mem::swap(&mut self.order, &mut other.order);
    }

    /// Number of line frames.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Number of valid line frames whose dirty bit is set (a scan: for the warm-up's steady-state
    /// test, not the access path).
    pub fn dirty_lines(&self) -> usize {
        (0..self.slots).filter(|&s| self.tag(s) != INVALID && self.line(s).dirty()).count()
    }

    /// `s` as an index of `tags` and `lines`: masked into range (the identity for a slot below
    /// `slots`).
    #[inline(always)]
    fn at(&self, s: usize) -> usize {
        debug_assert!(s < self.slots, "slot {s} out of range");
        s & self.slot_mask
    }

    #[inline(always)]
    fn tag(&self, s: usize) -> u32 {
        let i = self.at(s);
        // SAFETY: i <= slot_mask < the entries of `tags` (set in `new`, never resized).
        unsafe { *self.tags.get(i) }
    }

    #[inline(always)]
    fn tag_mut(&mut self, s: usize) -> &mut u32 {
        let i = self.at(s);
        // SAFETY: as in `tag`.
        unsafe { self.tags.get_mut(i) }
    }

    #[inline(always)]
    fn line(&self, s: usize) -> &Line {
        let i = self.at(s);
        // SAFETY: i <= slot_mask < the entries of `lines` (set in `new`, never resized).
        unsafe { self.lines.get(i) }
    }

    #[inline(always)]
    fn line_mut(&mut self, s: usize) -> &mut Line {
        let i = self.at(s);
        // SAFETY: as in `line`.
        unsafe { self.lines.get_mut(i) }
    }

    /// The recency order of `set`, masked into range (the identity for a set below `sets`).
    #[inline(always)]
    fn order_mut(&mut self, set: usize) -> &mut u64 {
        debug_assert!(set as u64 <= self.set_mask);
        let i = set & self.set_mask as usize;
        // SAFETY: i <= set_mask < the entries of `order` (set in `new`, never resized).
        unsafe { self.order.get_mut(i) }
    }

    #[inline(always)]
    fn set_of(&self, b: BlockId) -> usize {
        (b.0 & self.set_mask) as usize
    }

    #[inline(always)]
    fn set_of_slot(&self, s: usize) -> (usize, usize) {
        if self.way_mask != usize::MAX {
            (s >> self.way_shift, s & self.way_mask)
        } else {
            (s / self.ways, s % self.ways)
        }
    }

    /// Rank (0 = most recent) of `way` in a set's order.
    #[inline(always)]
    fn rank(order: u64, way: usize) -> u32 {
        let x = order ^ (way as u64).wrapping_mul(ONES);
        // Lowest zero nibble of x: exact for the lowest one (borrows only run upwards).
        let z = x.wrapping_sub(ONES) & !x & HIGHS;
        z.trailing_zeros() / 4
    }

    /// Make `way` the most recently used of its set.
    #[inline(always)]
    pub(super) fn touch(&mut self, set: usize, way: usize) {
        let order = self.order_mut(set);
        let o = *order;
        if o & 0xF == way as u64 {
            // Already the most recent (rank 0), as on most repeated hits: no rank to compute.
            return;
        }
        let r = SetAssoc::rank(o, way);
        // 1 <= r <= 15: `m << 4` wraps to 0 at r = 15, so `above` is then empty, without a branch.
        let m = 1u64 << (4 * r);
        let below = o & (m - 1);
        let above = o & !(m << 4).wrapping_sub(1);
        *order = above | (below << 4) | way as u64;
    }

    /// Make `way` the least recently used of its set.
    #[inline(always)]
    fn demote(&mut self, set: usize, way: usize) {
        let (used, last_shift) = (self.used, self.last_shift);
        let order = self.order_mut(set);
        let o = *order;
        let r = SetAssoc::rank(o, way);
        // r <= 15, so 4 * r < 64; `after` shifts by 4 * (r + 1) <= 64 in two steps.
        let below = o & ((1u64 << (4 * r)) - 1);
        let after = ((o & used) >> (4 * r)) >> 4;
        *order = (o & !used) | below | (after << (4 * r)) | ((way as u64) << last_shift);
    }

    /// Find a block without touching LRU state.
    #[inline(always)]
    pub fn find(&self, b: BlockId) -> Option<Slot> {
        self.find_way(b).map(|(set, way)| Slot(set * self.ways + way))
    }

    /// The set and way holding `b`, if any.
    #[inline(always)]
    pub(super) fn find_way(&self, b: BlockId) -> Option<(usize, usize)> {
        debug_assert!(b.0 < INVALID as u64, "block numbers are 32-bit");
        let set = self.set_of(b);
        let start = set * self.ways;
        // SAFETY: set < sets, so start + ways <= sets * ways <= the entries of `tags` (set in
        // `new`, never resized).
        let tags = unsafe { self.tags.run(start, self.ways) };
        find_tag(tags, b.0 as u32).map(|w| (set, w))
    }

    /// The slot of `way` in `set`.
    #[inline(always)]
    pub(super) fn slot_of(&self, set: usize, way: usize) -> usize {
        set * self.ways + way
    }

    /// Make the line in `s` the most recently used.
    #[inline(always)]
    pub fn touch_slot(&mut self, s: Slot) {
        let (set, way) = self.set_of_slot(s.0);
        self.touch(set, way);
    }

    /// Find a block and make it most recently used.
    #[inline(always)]
    pub fn lookup(&mut self, b: BlockId) -> Option<Slot> {
        let (set, way) = self.find_way(b)?;
        self.touch(set, way);
        Some(Slot(set * self.ways + way))
    }

    /// Insert a block that is not present (clean, most recently used, aux 0). Returns its slot
    /// and the least recently used line if the set was full.
    #[inline(always)]
    pub fn insert(&mut self, b: BlockId) -> (Slot, Option<Evicted>) {
        debug_assert!(self.find(b).is_none());
        self.insert_tag(b, b.0 as u32)
    }

    /// Insert an older version of `b` (which stays cached as the current version) into another
    /// way of its set: dirty, with transaction tag `aux`, invisible to look-ups.
    pub fn insert_version(&mut self, b: BlockId, aux: u32) -> (Slot, Option<Evicted>) {
        debug_assert!(b.0 < VERSION_BIT as u64 - 1, "versioned block numbers are 31-bit");
        let (s, ev) = self.insert_tag(b, b.0 as u32 | VERSION_BIT);
        debug_assert!(self.keeps_aux);
        let l = self.line_mut(s.0);
        l.a = aux;
        l.set_dirty(true);
        (s, ev)
    }

    /// Is the line in `s` the older version of `b` inserted by [`SetAssoc::insert_version`]?
    #[inline(always)]
    pub fn is_version_of(&self, s: Slot, b: BlockId) -> bool {
        self.tag(s.0) == b.0 as u32 | VERSION_BIT
    }

    /// The hierarchy's fill: put `b` into the least recently used way of its set, most
    /// recently used, with state `new` (links included). Returns its slot and the tag and state
    /// of the line it replaced (`tag` is not a valid tag if the way was free), each read once.
    #[inline(always)]
    pub(super) fn replace_lru(&mut self, b: BlockId, new: Line) -> (usize, Option<(u32, Line)>) {
        debug_assert!(self.find(b).is_none());
        let set = self.set_of(b);
        let way = self.take_lru_way(set);
        let s = set * self.ways + way;
        let tag = std::mem::replace(self.tag_mut(s), b.0 as u32);
        // A free way's state is not read (often the way an inclusion victim of this same miss
        // just left).
        let old = (tag != INVALID).then(|| (tag, *self.line(s)));
        *self.line_mut(s) = new;
        (s, old)
    }

    /// The line a fill of block `b` would push out now, if `b` is not cached and its set is
    /// full: its block and whether it may be dirty. A look only, nothing changes (the PCM
    /// device's host hint at an announced access, [`crate::machine::Machine::will_access`]).
    #[inline]
    pub fn victim_for(&self, b: BlockId) -> Option<(BlockId, bool)> {
        if self.find_way(b).is_some() {
            return None;
        }
        self.lru_line(self.set_of(b))
    }

    /// The line the next fill of the set holding slot `s` pushes out, if the set is full: its
    /// block (an older version's included) and whether it may be dirty (dirty here, or with a
    /// copy in the next level in). A look only, nothing changes: the PCM device's host hint
    /// ([`crate::machine::Machine`] prefetches the bytes that line's write-back will read).
    #[inline]
    pub fn next_victim(&self, s: Slot) -> Option<(BlockId, bool)> {
        self.lru_line(self.set_of_slot(s.0).0)
    }

    /// The least recently used line of `set`, if the set is full: its block and whether it may
    /// be dirty (dirty here, or with a copy in the next level in).
    #[inline(always)]
    fn lru_line(&self, set: usize) -> Option<(BlockId, bool)> {
        let o = self.order.as_slice()[set & self.set_mask as usize];
        let slot = set * self.ways + ((o >> self.last_shift) & 0xF) as usize;
        let t = self.tag(slot);
        let l = self.line(slot);
        (t != INVALID).then(|| (BlockId((t & !VERSION_BIT) as u64), l.dirty() || l.down() != NO_LINK))
    }

    /// The least recently used way of `set`, made the most recently used.
    #[inline(always)]
    fn take_lru_way(&mut self, set: usize) -> usize {
        let (used, last_shift) = (self.used, self.last_shift);
        let order = self.order_mut(set);
        let o = *order;
        let way = ((o >> last_shift) & 0xF) as usize;
        // The way was the last in recency order: shifting the order one place moves every other
        // way down one rank and drops it, then it goes in front.
        *order = (o & !used) | ((o << 4) & used) | way as u64;
        way
    }

    /// An inner copy of the line in `s` left: forget the link to it, and mark the line dirty
    /// if the copy was.
    #[inline(always)]
    pub(super) fn unlink_down(&mut self, s: usize, dirty: bool) {
        debug_assert!(self.tag(s) != INVALID);
        let l = self.line_mut(s);
        let was_dirty = l.dirty();
        l.set_dirty(was_dirty || dirty);
        l.set_down(NO_LINK);
    }

    #[inline(always)]
    fn insert_tag(&mut self, b: BlockId, tag: u32) -> (Slot, Option<Evicted>) {
        let set = self.set_of(b);
        let way = self.take_lru_way(set);
        let s = set * self.ways + way;
        debug_assert!(self.keeps_aux);
        let w = std::mem::replace(self.tag_mut(s), tag);
        let l = self.line_mut(s);
        let victim = (w != INVALID).then_some(Evicted {
            block: BlockId((w & !VERSION_BIT) as u64),
            dirty: l.dirty(),
            aux: l.a,
            version: w & VERSION_BIT != 0,
        });
        l.set_dirty(false);
        l.a = 0;
        (Slot(s), victim)
    }

    /// Drop the line in `s`; returns its dirty bit and aux.
    #[inline(always)]
    pub fn invalidate_slot(&mut self, s: Slot) -> (bool, u32) {
        debug_assert!(self.tag(s.0) != INVALID);
        let keeps_aux = self.keeps_aux;
        let l = self.line_mut(s.0);
        let (dirty, aux) = (l.dirty(), if keeps_aux { l.a } else { 0 });
        l.set_dirty(false);
        if keeps_aux {
            l.a = 0;
        }
        *self.tag_mut(s.0) = INVALID;
        let (set, way) = self.set_of_slot(s.0);
        self.demote(set, way);
        (dirty, aux)
    }

    /// Drop a block if present; returns its dirty bit and aux.
    #[inline(always)]
    pub fn invalidate(&mut self, b: BlockId) -> Option<(bool, u32)> {
        let s = self.find(b)?;
        Some(self.invalidate_slot(s))
    }

    #[inline(always)]
    pub fn dirty(&self, s: Slot) -> bool {
        self.line(s.0).dirty()
    }

    #[inline(always)]
    pub fn set_dirty(&mut self, s: Slot, d: bool) {
        debug_assert!(self.tag(s.0) != INVALID);
        self.line_mut(s.0).set_dirty(d);
    }

    /// The auxiliary tag of a line (a level built with [`SetAssoc::new`]).
    #[inline(always)]
    pub fn aux(&self, s: Slot) -> u32 {
        debug_assert!(self.keeps_aux, "an inner level keeps no aux tag");
        self.line(s.0).a
    }

    #[inline(always)]
    pub fn set_aux(&mut self, s: Slot, v: u32) {
        debug_assert!(self.keeps_aux, "an inner level keeps no aux tag");
        self.line_mut(s.0).a = v;
    }

    /// The slot of this line's copy in the next level out (towards memory), or [`NO_LINK`].
    #[inline(always)]
    pub fn up(&self, s: usize) -> u32 {
        debug_assert!(!self.keeps_aux, "the outermost level has no up link");
        self.line(s).a
    }

    /// The slot of this line's copy in the next level in (towards the core), or [`NO_LINK`].
    #[inline(always)]
    pub fn down(&self, s: usize) -> u32 {
        self.line(s).down()
    }

    #[inline(always)]
    pub fn set_down(&mut self, s: usize, v: u32) {
        self.line_mut(s).set_down(v);
    }

    /// The down link of a line, which is cleared.
    #[inline(always)]
    pub fn take_down(&mut self, s: usize) -> u32 {
        let l = self.line_mut(s);
        let down = l.down();
        l.d |= NO_LINK;
        down
    }

    /// The word a level without inner links keeps in a line's down-link place (the shared
    /// LLC's directory entry, `coherence.rs`), at most 31 bits; 0 on a line just filled or
    /// inserted ([`Line::fresh`] leaves the link empty, which reads as 0).
    #[inline(always)]
    pub(super) fn word(&self, s: usize) -> u32 {
        self.line(s).down() ^ NO_LINK
    }

    /// Set the word of [`SetAssoc::word`] (the dirty bit is kept).
    #[inline(always)]
    pub(super) fn set_word(&mut self, s: usize, w: u32) {
        self.line_mut(s).set_down(w ^ NO_LINK);
    }

    /// Mark the line in `s` dirty if `dirty` (an inner copy that left was), keeping its link or
    /// word.
    #[inline(always)]
    pub(super) fn or_dirty(&mut self, s: usize, dirty: bool) {
        debug_assert!(self.tag(s) != INVALID);
        self.line_mut(s).d |= (dirty as u32) << 31;
    }

    /// Does slot `s` hold the current copy of `b`? (A look-up of `b` would find `s`.)
    #[inline(always)]
    pub fn holds(&self, s: Slot, b: BlockId) -> bool {
        self.tag(s.0) == b.0 as u32
    }

    /// The block in a slot, if valid.
    pub fn block_at(&self, s: Slot) -> Option<BlockId> {
        let t = self.tag(s.0);
        (t != INVALID).then_some(BlockId(t as u64))
    }

    /// Valid blocks of the set that holds `b`, most recently used first (tests, debugging).
    pub fn set_contents(&self, b: BlockId) -> Vec<BlockId> {
        let set = self.set_of(b);
        let o = self.order.as_slice()[set];
        (0..self.ways).filter_map(|r| self.block_at(Slot(set * self.ways + ((o >> (4 * r)) & 0xF) as usize))).collect()
    }
}

/// The way of `set` holding `tag`, if any. The default geometries' widths (2, 8 and 16 ways)
/// are handled inline without a loop; the others out of line, so that the code inlined into
/// every look-up stays short.
#[inline(always)]
fn find_tag(set: &[u32], tag: u32) -> Option<usize> {
    if let [t0, t1] = *set {
        return if t0 == tag {
            Some(0)
        } else if t1 == tag {
            Some(1)
        } else {
            None
        };
    }
    #[cfg(target_arch = "x86_64")]
    if set.len() == 16 || set.len() == 8 {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; the 16-byte loads at u32 offsets 0 and
        // 4 (and 8 and 12 when the length is 16) lie inside `set`, and loads are unaligned.
        let mask = unsafe {
            let key = _mm_set1_epi32(tag as i32);
            let eq = |c: usize| _mm_cmpeq_epi32(_mm_loadu_si128(set.as_ptr().add(4 * c) as *const __m128i), key);
            // The compare results (0 or -1 per way) are narrowed to one byte per way, in way
            // order, and gathered by one movemask.
            let lo = _mm_packs_epi32(eq(0), eq(1));
            let hi = if set.len() == 16 { _mm_packs_epi32(eq(2), eq(3)) } else { _mm_setzero_si128() };
            _mm_movemask_epi8(_mm_packs_epi16(lo, hi)) as u64
        };
        return (mask != 0).then(|| mask.trailing_zeros() as usize);
    }
    find_tag_other(set, tag)
}

/// [`find_tag`] for the other widths.
#[inline(never)]
fn find_tag_other(set: &[u32], tag: u32) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if set.len().is_multiple_of(4) {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; every 16-byte load lies inside `set`
        // (its length is a multiple of 4 u32, and `c < set.len() / 4`), and loads are unaligned.
        let mask = unsafe {
            let key = _mm_set1_epi32(tag as i32);
            let mut mask = 0u64;
            for c in 0..set.len() / 4 {
                let eq = _mm_cmpeq_epi32(_mm_loadu_si128(set.as_ptr().add(4 * c) as *const __m128i), key);
                mask |= (_mm_movemask_ps(_mm_castsi128_ps(eq)) as u64) << (4 * c);
            }
            mask
        };
        return (mask != 0).then(|| mask.trailing_zeros() as usize);
    }
    set.iter().position(|&t| t == tag)
}

#[cfg(test)]
mod find_tag_tests {
    use super::find_tag;
    use crate::rng::Rng;

    #[test]
    fn find_tag_agrees_with_a_linear_search_for_every_set_width() {
        let mut rng = Rng::new(7);
        for ways in 1..=16usize {
            for _ in 0..2000 {
                // Small tag values, so that hits, misses and repeated tags all occur.
                let set: Vec<u32> = (0..ways).map(|_| rng.below(24) as u32).collect();
                let tag = rng.below(24) as u32;
                assert_eq!(
                    find_tag(&set, tag),
                    set.iter().position(|&t| t == tag),
                    "ways {ways}, set {set:?}, tag {tag}"
                );
            }
        }
    }
}
