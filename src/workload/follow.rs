//! Incremental structural verification: a verifier that follows a data area through the blocks
//! each transaction changes, instead of walking the whole structure again.
//!
//! The crash checker needs the workload's structural verdict on S_k for many k (every distinct
//! k a crash point recovers to). S_k and S_{k+1} differ in the few blocks transaction k+1
//! wrote, so a [`Follow`] keeps what a whole check would compute (counts, per-vertex lists,
//! ...) and updates only what those blocks affect. Its contract: after [`Follow::reset`] on a
//! data area and any sequence of [`Follow::changed`] calls, the verdict equals
//! `verify(data).is_ok()` of the workload's whole verifier on the same bytes. Only the verdict
//! is incremental: when it says "broken", the crash checker runs the whole verifier for the
//! message (and asserts that it agrees), and it compares the two on a doubling schedule when
//! the verdict is "sound" (docs/performance.md, "Crash checking").

use crate::types::{Addr, BlockData};
use crate::workload::slab::Slab;

/// A structural verifier that follows a data area (see the module documentation).
pub trait Follow {
    /// Take `data` whole; returns the verdict on it.
    fn reset(&mut self, data: &[u8]) -> bool;
    /// `old` lists each data-area block that changed since the previous call, once, with its
    /// content before the change; `data` is the area after. Returns the verdict on `data`.
    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool;
}

/// The follower of a structure partitioned into copies ([`super::Partitions`]): `one()` is one
/// copy's follower; with one copy, that follower itself.
pub fn parts(p: super::Partitions, one: impl Fn() -> Box<dyn Follow>) -> Box<dyn Follow> {
    if p.n == 1 {
        return one();
    }
    Box::new(PartsFollow {
        p,
        each: (0..p.n).map(|_| one()).collect(),
        ok: vec![false; p.n as usize],
        old: vec![Vec::new(); p.n as usize],
    })
}

/// Each copy's follower, fed the blocks of its own copy, rebased to its first block.
struct PartsFollow {
    p: super::Partitions,
    each: Vec<Box<dyn Follow>>,
    ok: Vec<bool>,
    /// Scratch: per copy, its changed blocks.
    old: Vec<Vec<(usize, BlockData)>>,
}

impl Follow for PartsFollow {
    fn reset(&mut self, data: &[u8]) -> bool {
        if (data.len() as u64) < self.p.bytes() {
            return false;
        }
        for t in 0..self.p.n {
            self.ok[t as usize] = self.each[t as usize].reset(self.p.slice(data, t));
        }
        self.ok.iter().all(|&x| x)
    }
    fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> bool {
        let per = (self.p.stride / 64) as usize;
        for &(b, d) in old {
            if let Some(o) = self.old.get_mut(b / per) {
                o.push((b % per, d));
            }
        }
        for t in 0..self.p.n as usize {
            if !self.old[t].is_empty() {
                self.ok[t] = self.each[t].changed(self.p.slice(data, t as u64), &self.old[t]);
                self.old[t].clear();
            }
        }
        self.ok.iter().all(|&x| x)
    }
}

/// Per-root lists in one arena (a follower's per-vertex or per-bucket payload), so that taking a
/// data area whole allocates nothing per root: a list that grows moves to the end of the arena,
/// and the arena is compacted once the space left behind outweighs the live entries.
///
/// Each root's record (where its list is) also holds the owner's own per-root fields `R`
/// ([`Spans::extra`]): the record is loaded anyway when the root's list is, so fields kept
/// there cost no cache miss of their own (the per-root arrays are MBs, reached at random).
pub(crate) struct Spans<T, R = ()> {
    items: Vec<T>,
    /// Per root: its list's start in `items`, its length, and its other fields.
    span: Vec<Span<R>>,
    live: usize,
}

#[derive(Clone, Copy, Default)]
struct Span<R> {
    start: u32,
    len: u32,
    extra: R,
}

impl<T: Copy, R: Copy + Default> Spans<T, R> {
    pub fn new(roots: usize) -> Spans<T, R> {
        Spans { items: Vec::new(), span: vec![Span::default(); roots], live: 0 }
    }

    /// Every list empty, every root's fields default.
    pub fn clear(&mut self) {
        self.items.clear();
        self.span.fill(Span::default());
        self.live = 0;
    }

    /// Host cache hint: start loading root `r`'s record. No effect on results.
    #[inline]
    pub fn prefetch_root(&self, r: usize) {
        if let Some(x) = self.span.get(r) {
            crate::hostmem::prefetch(x);
        }
    }

    /// Host cache hint: start loading root `r`'s list (its record is read). No effect on
    /// results.
    #[inline]
    pub fn prefetch(&self, r: usize) {
        crate::hostmem::prefetch(&self.span[r]);
        if let Some(x) = self.items.get(self.span[r].start as usize) {
            crate::hostmem::prefetch(x);
        }
    }

    pub fn get(&self, r: usize) -> &[T] {
        let Span { start, len, .. } = self.span[r];
        &self.items[start as usize..(start + len) as usize]
    }

    /// Root `r`'s own fields.
    #[inline]
    pub fn extra(&self, r: usize) -> &R {
        &self.span[r].extra
    }

    #[inline]
    pub fn extra_mut(&mut self, r: usize) -> &mut R {
        &mut self.span[r].extra
    }

    /// Empty root `r`'s list; its entries stay readable through the returned range of
    /// [`Spans::at`] until the next [`Spans::set`].
    pub fn forget(&mut self, r: usize) -> std::ops::Range<usize> {
        let sp = &mut self.span[r];
        let (start, len) = (sp.start, std::mem::take(&mut sp.len));
        self.live -= len as usize;
        start as usize..(start + len) as usize
    }

    /// The arena's entry `i` (from a range of [`Spans::forget`]).
    pub fn at(&self, i: usize) -> T {
        self.items[i]
    }

    /// Replace root `r`'s list.
    pub fn set(&mut self, r: usize, new: &[T]) {
        let Span { start, len, .. } = self.span[r];
        self.live = self.live - len as usize + new.len();
        if new.len() <= len as usize {
            self.items[start as usize..start as usize + new.len()].copy_from_slice(new);
            self.span[r].len = new.len() as u32;
            return;
        }
        if self.items.len() + new.len() > 2 * self.live + 4096 {
            self.compact();
        }
        (self.span[r].start, self.span[r].len) = (self.items.len() as u32, new.len() as u32);
        self.items.extend_from_slice(new);
        assert!(self.items.len() <= u32::MAX as usize, "follower lists beyond 2^32 entries");
    }

    /// Move every live list to the front, in root order.
    fn compact(&mut self) {
        let mut items = Vec::with_capacity(2 * self.live + 4096);
        for sp in &mut self.span {
            let start = std::mem::replace(&mut sp.start, items.len() as u32);
            items.extend_from_slice(&self.items[start as usize..(start + sp.len) as usize]);
        }
        self.items = items;
    }
}

/// Per-root lists of `u32` (a follower's per-vertex neighbour lists), each in a cache line of
/// its own when it has at most [`Lines::INLINE`] entries (most have), else in a [`Spans`]
/// arena: reading a short list is then one cache miss, where a [`Spans`] list costs two
/// dependent ones (the root's record, then the list, which may straddle two lines).
pub(crate) struct Lines {
    line: Vec<Line>,
    long: Spans<u32>,
}

/// A root's list: its length and, when it has at most [`Lines::INLINE`] entries, the entries.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line {
    len: u32,
    ids: [u32; Lines::INLINE],
}

impl Lines {
    pub const INLINE: usize = 15;
    const EMPTY: Line = Line { len: 0, ids: [0; Lines::INLINE] };

    pub fn new(roots: usize) -> Lines {
        Lines { line: vec![Lines::EMPTY; roots], long: Spans::new(roots) }
    }

    /// Every list empty.
    pub fn clear(&mut self) {
        self.line.fill(Lines::EMPTY);
        self.long.clear();
    }

    /// Host cache hint: start loading root `r`'s line. No effect on results.
    #[inline]
    pub fn prefetch(&self, r: usize) {
        if let Some(x) = self.line.get(r) {
            crate::hostmem::prefetch(x);
        }
    }

    /// Host cache hint: start loading root `r`'s list if it is not in its line (the line is
    /// read). No effect on results.
    #[inline]
    pub fn prefetch_long(&self, r: usize) {
        if self.line[r].len as usize > Lines::INLINE {
            self.long.prefetch(r);
        }
    }

    pub fn get(&self, r: usize) -> &[u32] {
        let line = &self.line[r];
        match line.ids.get(..line.len as usize) {
            Some(short) => short,
            None => self.long.get(r),
        }
    }

    /// Replace root `r`'s list.
    pub fn set(&mut self, r: usize, new: &[u32]) {
        let line = &mut self.line[r];
        if new.len() <= Lines::INLINE {
            if line.len as usize > Lines::INLINE {
                self.long.set(r, &[]);
            }
            line.ids[..new.len()].copy_from_slice(new);
        } else {
            self.long.set(r, new);
        }
        line.len = new.len() as u32;
    }
}

/// Per-node summaries of a tree's subtrees, kept by the tree followers (red-black tree, B+tree):
/// a node's summary (`None`: stale) and the parent it was last evaluated under (slot + 1; 0 =
/// the root pointer). Invariant the followers keep: every node inside a kept summary has its
/// `up` leading inside that subtree to the summary's node, so marking from a changed node
/// upwards reaches every summary that read it.
pub(crate) struct Subtrees<S> {
    nodes: Vec<Node<S>>,
    /// With [`Subtrees::with_walks`]: what marking stale did since the owner last took it.
    walks: Option<Walks>,
    /// Nodes whose evaluation met a child pointer to a slot beyond the slab's bump (invalid
    /// now, valid once the bump grows past it).
    beyond_bump: Vec<u32>,
    /// Longer than any sound tree's height: a longer `up` chain exists only in a broken image.
    chain: usize,
}

/// The trace of marking stale ([`Subtrees::stale`] and what calls it), for a follower whose
/// parents re-fold only the children whose summaries changed (the B+tree's, whose inner nodes
/// have hundreds of children): each node a walk started at (its own content changed, or a
/// child of it was adopted elsewhere: fold it whole), each (parent, child) step of a walk
/// (re-check that child), and whether every summary was dropped.
#[derive(Default)]
pub(crate) struct Walks {
    pub starts: Vec<u32>,
    pub steps: Vec<(u32, u32)>,
    pub all: bool,
}

/// One node's summary and parent link side by side (a parent's evaluation reads both for
/// every child). Not aligned to a host line: the red-black tree's 48-byte records would grow to
/// 64, and its whole takes were measured 10-15 % slower with them.
#[derive(Clone, Copy)]
struct Node<S> {
    sum: Option<S>,
    up: u32,
}

impl<S: Copy> Subtrees<S> {
    pub fn new(nodes: usize, max_height: usize) -> Subtrees<S> {
        Subtrees {
            nodes: vec![Node { sum: None, up: 0 }; nodes],
            walks: None,
            beyond_bump: Vec::new(),
            chain: 4 * max_height,
        }
    }

    /// Like [`Subtrees::new`], keeping the trace of marking stale ([`Walks`]).
    pub fn with_walks(nodes: usize, max_height: usize) -> Subtrees<S> {
        Subtrees { walks: Some(Walks::default()), ..Subtrees::new(nodes, max_height) }
    }

    /// The trace of marking stale since the owner last emptied it (with
    /// [`Subtrees::with_walks`]).
    pub fn walks(&mut self) -> Option<&mut Walks> {
        self.walks.as_mut()
    }

    /// Node `slot`'s summary, if kept.
    #[inline]
    pub fn sum(&self, slot: usize) -> Option<S> {
        self.nodes[slot].sum
    }

    /// Keep node `slot`'s summary.
    #[inline]
    pub fn keep(&mut self, slot: usize, sum: S) {
        self.nodes[slot].sum = Some(sum);
    }

    /// Forget every summary (keeping the parents).
    pub fn forget_sums(&mut self) {
        for n in &mut self.nodes {
            n.sum = None;
        }
        if let Some(w) = &mut self.walks {
            w.all = true;
        }
    }

    /// Forget every summary and parent.
    pub fn clear(&mut self) {
        self.nodes.fill(Node { sum: None, up: 0 });
        self.beyond_bump.clear();
        if let Some(w) = &mut self.walks {
            w.all = true;
        }
    }

    /// The node at `slot` read a child pointer to a slot the slab has not handed out yet.
    pub fn beyond_bump(&mut self, slot: usize) {
        self.beyond_bump.push(slot as u32);
    }

    /// The slab's bump grew: a child beyond the old bump may be handed out now.
    pub fn bump_grew(&mut self) {
        for s in std::mem::take(&mut self.beyond_bump) {
            self.stale(s as usize);
        }
    }

    /// Mark `slot` and every node above it (as last adopted) stale. The whole chain: a node
    /// may be stale while one above it, evaluated on in the same pass, holds a summary. A
    /// chain longer than any sound tree's height drops every summary.
    pub fn stale(&mut self, mut slot: usize) {
        if let Some(w) = &mut self.walks {
            w.starts.push(slot as u32);
        }
        for _ in 0..self.chain {
            self.nodes[slot].sum = None;
            match self.nodes[slot].up {
                0 => return,
                p => {
                    if let Some(w) = &mut self.walks {
                        w.steps.push((p - 1, slot as u32));
                    }
                    slot = p as usize - 1
                }
            }
        }
        self.forget_sums();
    }

    /// Host cache hint: start loading node `slot`'s summary and parent link. No effect on
    /// results.
    #[inline]
    pub fn prefetch(&self, slot: usize) {
        if let Some(n) = self.nodes.get(slot) {
            crate::hostmem::prefetch(n);
        }
    }

    /// `parent` (slot + 1, 0 for the root pointer) reads the node at `slot`: if another node
    /// read it last, that node's summary (and those above) may no longer hold.
    pub fn adopt(&mut self, slot: usize, parent: u32) {
        let up = self.nodes[slot].up;
        if up != parent {
            if up != 0 {
                self.stale(up as usize - 1);
            }
            self.nodes[slot].up = parent;
        }
    }
}

/// A slab's free list as [`Slab::used_in`] walks it, kept by a follower: well formed or not,
/// which slots are on it, how many. Kept tail first, so that a change near the head (the
/// list is LIFO: an allocation pops, a free pushes) re-walks only up to the first slot whose
/// rest of the list no changed block touches, and splices the rest.
pub(crate) struct FreeList {
    pub ok: bool,
    pub on: Vec<bool>,
    pub len: u64,
    /// The walked slots, tail first, and each slot's index there (`u32::MAX`: not listed).
    rev: Vec<u32>,
    pos: Vec<u32>,
    /// The bump the list was walked under (validity depends on it).
    bump: u64,
    fresh: Vec<u32>,
}

impl FreeList {
    pub fn new(slab: &Slab) -> FreeList {
        let c = slab.capacity as usize;
        FreeList {
            ok: true,
            on: crate::hostmem::committed(c),
            len: 0,
            rev: Vec::new(),
            pos: vec![u32::MAX; c],
            bump: u64::MAX,
            fresh: Vec::new(),
        }
    }

    /// Host cache hint: start loading what [`FreeList::update`] reads of `slot` when its block
    /// changed. No effect on results.
    #[inline]
    pub fn prefetch(&self, slot: usize) {
        if let Some(x) = self.pos.get(slot) {
            crate::hostmem::prefetch(x);
        }
    }

    /// Bring the list up to `data` after the blocks in `old` changed (all of it when `old` is
    /// `None`); `flip(slot, now_on)` hears of every slot whose membership changes.
    pub fn update(
        &mut self,
        data: &[u8],
        slab: &Slab,
        bump: u64,
        old: Option<&[(usize, BlockData)]>,
        mut flip: impl FnMut(usize, bool),
    ) {
        let meta = slab.meta.0 as usize;
        let slot_of = |at: u64| (at.wrapping_sub(slab.base.0) / slab.slot_bytes) as usize;
        // The smallest tail index of a listed slot whose block changed: the list from the
        // head down to it must be walked again, the rest is kept.
        let mut keep = match old {
            Some(_) if self.ok && bump == self.bump => self.rev.len() as u32,
            _ => 0,
        };
        let mut head_moved = keep == 0;
        for (b, before) in old.unwrap_or(&[]) {
            let at = *b as u64 * 64;
            if *b == meta / 64 && before[meta % 64..meta % 64 + 8] != data[meta..meta + 8] {
                head_moved = true;
            }
            if at >= slab.base.0 && at < slab.base.0 + slab.bytes() {
                keep = keep.min(self.pos[slot_of(at)]);
            }
        }
        if !head_moved && keep == self.rev.len() as u32 {
            return;
        }
        self.bump = bump;
        // Walk from the head to a slot of the kept part (splice) or the end.
        (self.ok, self.fresh) = (bump <= slab.capacity, std::mem::take(&mut self.fresh));
        self.fresh.clear();
        let mut at = le64(data, meta);
        let mut splice = 0;
        while self.ok && at != 0 {
            let slot = slot_of(at);
            if !slab.contains(Addr(at)) || slot as u64 >= bump || self.fresh.len() as u64 + splice as u64 >= bump {
                self.ok = false;
                break;
            }
            if self.pos[slot] < keep {
                splice = self.pos[slot] + 1;
                break;
            }
            self.fresh.push(slot as u32);
            at = le64(data, at as usize);
        }
        let dropped = self.rev.split_off(splice as usize);
        for &s in &dropped {
            self.pos[s as usize] = u32::MAX;
        }
        for &s in self.fresh.iter().rev() {
            self.pos[s as usize] = self.rev.len() as u32;
            self.rev.push(s);
        }
        for &s in &self.fresh {
            if !std::mem::replace(&mut self.on[s as usize], true) {
                flip(s as usize, true);
            }
        }
        for &s in &dropped {
            if self.pos[s as usize] == u32::MAX && std::mem::replace(&mut self.on[s as usize], false) {
                flip(s as usize, false);
            }
        }
        self.len = self.rev.len() as u64;
    }
}

/// The part of a follower shared by the workloads whose structure is a table of roots (SDG's
/// vertices, the hash table's buckets), each heading a list of slab slots: the free list as
/// [`Slab::used_in`] walks it, which slots each root's list reaches, and the counts the whole
/// verifiers derive from them. A workload's follower walks a root's list through
/// [`SlabLists::begin`], [`SlabLists::step`] and [`SlabLists::end`], and keeps its own
/// per-root payload (neighbour sets, keys) beside.
pub(crate) struct SlabLists {
    pub slab: Slab,
    /// Roots: `roots` entries of `root_bytes` bytes from `table_at` (one block holds whole
    /// entries).
    pub roots: u64,
    table_at: u64,
    root_bytes: u64,
    pub bump: u64,
    free: FreeList,
    /// Per root: the slots its walk reached, and (in the same record) its [`RootState`].
    slots: Spans<u32, RootState>,
    /// The roots whose own checks fail (some perhaps no longer), and how many do.
    bad_list: Vec<u32>,
    nbad: u64,
    /// Per slot, one record: what walks and free-list changes read of a slot together.
    per_slot: Vec<SlotState>,
    /// Slots reached by a second list; slots both reached and free; slots reached in total.
    shared: u64,
    overlap: u64,
    reached: u64,
    /// The walk in progress: its slots, and the stamp that marks a slot reached by it
    /// ([`SlotState::mark`]) to find a slot reached twice.
    walk: Vec<u32>,
    stamp: u32,
    /// The stamp marking the roots queued in this call ([`RootState::queued`]), and those roots.
    qstamp: u32,
    todo: Vec<u32>,
}

/// A root's fields of a [`SlabLists`], kept in its record of the slot lists ([`Spans`]): a
/// walk, queueing and releasing a root read them together with its list's place.
#[derive(Clone, Copy, Default)]
#[repr(align(8))]
struct RootState {
    /// The stamp of the last call that queued the root.
    queued: u32,
    /// Its own checks fail.
    bad: bool,
}

/// A slab slot's fields of a [`SlabLists`], in one record (16 bytes: one cache line holds it
/// whole), because the slots a walk reaches are at random in arrays of MBs: how many lists
/// reach the slot and one of them, the stamp of the walk that reached it last, and whether it
/// is on the free list (a copy of [`FreeList::on`], kept here so that claiming a slot reads
/// no other line).
#[derive(Clone, Copy, Default)]
#[repr(align(16))]
struct SlotState {
    claims: u32,
    owner: u32,
    mark: u32,
    free: bool,
}

/// What [`SlabLists::changed`] asks of the caller.
pub(crate) enum Rewalk {
    /// Walk these roots again.
    Roots(Vec<u32>),
    /// The bump moved back: start again from the whole area.
    Reset,
}

impl SlabLists {
    pub fn new(slab: Slab, roots: u64, table_at: u64, root_bytes: u64) -> SlabLists {
        let (r, c) = (roots as usize, slab.capacity as usize);
        assert!(64 % root_bytes == 0 && table_at.is_multiple_of(64), "a block holds whole root entries");
        assert!(root_bytes.is_multiple_of(8), "root entries are compared as 8-byte words");
        SlabLists {
            slab,
            roots,
            table_at,
            root_bytes,
            bump: 0,
            free: FreeList::new(&slab),
            slots: Spans::new(r),
            bad_list: Vec::new(),
            nbad: 0,
            per_slot: vec![SlotState::default(); c],
            shared: 0,
            overlap: 0,
            reached: 0,
            walk: Vec::new(),
            stamp: 0,
            qstamp: 0,
            todo: Vec::new(),
        }
    }

    /// Take `data` whole: the free list now; the caller then walks every root.
    pub fn reset(&mut self, data: &[u8]) {
        *self = SlabLists::new(self.slab, self.roots, self.table_at, self.root_bytes);
        self.bump = le64(data, self.slab.meta.0 as usize + 8);
        self.walk_free(data, None);
    }

    /// The checks every such verifier makes: the free list is well formed, every list passes
    /// its own checks, no slot is reached twice or both reached and free, and the slots
    /// reached are exactly those in use.
    pub fn sound(&self) -> bool {
        self.free.ok
            && self.nbad == 0
            && self.shared == 0
            && self.overlap == 0
            && self.reached == self.bump - self.free.len
    }

    /// The slab slot at byte address `at`, if it is the first byte of a handed-out slot.
    pub fn handed_out(&self, at: u64) -> Option<usize> {
        let slot = (at.wrapping_sub(self.slab.base.0) / self.slab.slot_bytes) as usize;
        (self.slab.contains(Addr(at)) && (slot as u64) < self.bump).then_some(slot)
    }

    /// Host cache hint: start loading what walking the slot at byte address `at` touches (its
    /// bytes in `data` and its per-slot state here). No effect on results.
    #[inline]
    pub fn prefetch_slot(&self, data: &[u8], at: u64) {
        if let Some(slot) = self.handed_out(at) {
            if let Some(x) = data.get(at as usize) {
                crate::hostmem::prefetch(x);
            }
            crate::hostmem::prefetch(&self.per_slot[slot]);
        }
    }

    /// Host cache hint: start loading root `r`'s record (where its slot list is, its own
    /// fields). No effect on results.
    #[inline]
    pub fn prefetch_root(&self, r: u32) {
        self.slots.prefetch_root(r as usize);
    }

    /// Bring the free list up to `data` (`old`: the blocks changed; `None`: walk it whole),
    /// keeping `overlap` (slots both reached and free).
    fn walk_free(&mut self, data: &[u8], old: Option<&[(usize, BlockData)]>) {
        let (state, overlap) = (&mut self.per_slot, &mut self.overlap);
        self.free.update(data, &self.slab, self.bump, old, |slot, on| {
            state[slot].free = on;
            if state[slot].claims > 0 {
                if on {
                    *overlap += 1;
                } else {
                    *overlap -= 1;
                }
            }
        });
    }

    /// Start walking root `r` again: forget what its last walk reached.
    pub fn begin(&mut self, r: u32) {
        self.release(r);
        self.walk.clear();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.per_slot.iter_mut().for_each(|s| s.mark = 0);
            self.stamp = 1;
        }
    }

    /// Forget the slots root `r`'s last walk reached (their claims).
    fn release(&mut self, r: u32) {
        for i in self.slots.forget(r as usize) {
            let slot = self.slots.at(i) as usize;
            let st = &mut self.per_slot[slot];
            st.claims -= 1;
            match st.claims {
                0 => self.overlap -= u64::from(st.free),
                n => {
                    self.shared -= 1;
                    if n == 1 && st.owner == r {
                        // Only in a broken image: find the list that still reaches it.
                        let rest =
                            (0..self.roots as u32).find(|&u| self.slots.get(u as usize).contains(&(slot as u32)));
                        self.per_slot[slot].owner = rest.expect("a claimed slot is in some list");
                    }
                }
            }
            self.reached -= 1;
        }
    }

    /// The walk follows a link to `at`: false if it is not a handed-out slot or the walk had
    /// reached it already (a cycle).
    pub fn step(&mut self, at: u64) -> bool {
        self.handed_out(at).is_some_and(|slot| self.visit(slot))
    }

    /// The walk reaches `slot`; false if it had already (a cycle).
    fn visit(&mut self, slot: usize) -> bool {
        if self.per_slot[slot].mark == self.stamp {
            return false;
        }
        self.per_slot[slot].mark = self.stamp;
        self.walk.push(slot as u32);
        true
    }

    /// The walk of root `r` is over; `ok`: its own checks pass.
    pub fn end(&mut self, r: u32, ok: bool) {
        let walk = std::mem::take(&mut self.walk);
        for &slot in &walk {
            let st = &mut self.per_slot[slot as usize];
            st.claims += 1;
            if st.claims == 1 {
                st.owner = r;
                self.overlap += u64::from(st.free);
            } else {
                self.shared += 1;
            }
        }
        self.reached += walk.len() as u64;
        self.slots.set(r as usize, &walk);
        self.walk = walk;
        let bad = &mut self.slots.extra_mut(r as usize).bad;
        if ok == *bad {
            *bad = !ok;
            if ok {
                self.nbad -= 1;
            } else {
                self.nbad += 1;
                self.bad_list.push(r);
            }
        }
    }

    fn queue(&mut self, r: u32) {
        let queued = &mut self.slots.extra_mut(r as usize).queued;
        if *queued != self.qstamp {
            *queued = self.qstamp;
            self.todo.push(r);
        }
    }

    /// The roots whose walk reads changed bytes (its entry of the root table, a block of a slot
    /// its list reaches), and the failing roots a larger bump may repair; walks the free
    /// list again when a block it reads changed. Block 0 holds the slab's metadata.
    pub fn changed(&mut self, data: &[u8], old: &[(usize, BlockData)]) -> Rewalk {
        self.qstamp = self.qstamp.wrapping_add(1);
        if self.qstamp == 0 {
            (0..self.roots as usize).for_each(|r| self.slots.extra_mut(r).queued = 0);
            self.qstamp = 1;
        }
        let meta_block = self.slab.meta.0 / 64;
        let table_end = self.table_at + self.root_bytes * self.roots;
        let slab_end = self.slab.base.0 + self.slab.bytes();
        self.prefetch_changed(old, table_end, slab_end);
        for (b, before) in old {
            let (b, at) = (*b, *b as u64 * 64);
            if b as u64 == meta_block {
                let bump = le64(data, self.slab.meta.0 as usize + 8);
                if bump < self.bump {
                    return Rewalk::Reset;
                }
                if bump > self.bump {
                    self.bump = bump;
                    for i in 0..self.bad_list.len() {
                        let r = self.bad_list[i];
                        if self.slots.extra(r as usize).bad {
                            self.queue(r);
                        }
                    }
                }
            }
            if at >= self.table_at && at < table_end {
                // Only the roots whose own entry changed: a block holds several.
                let first = (at - self.table_at) / self.root_bytes;
                for r in first..(first + 64 / self.root_bytes).min(self.roots) {
                    let entry = (self.table_at + r * self.root_bytes) as usize;
                    let mut words = (0..self.root_bytes as usize).step_by(8);
                    if !words.all(|i| le64(before, entry - b * 64 + i) == le64(data, entry + i)) {
                        self.queue(r as u32);
                    }
                }
            } else if at >= self.slab.base.0 && at < slab_end {
                let slot = ((at - self.slab.base.0) / self.slab.slot_bytes) as usize;
                match self.per_slot[slot].claims {
                    0 => {}
                    1 => self.queue(self.per_slot[slot].owner),
                    _ => {
                        for r in 0..self.roots as u32 {
                            if self.slots.get(r as usize).contains(&(slot as u32)) {
                                self.queue(r);
                            }
                        }
                    }
                }
            }
        }
        self.walk_free(data, Some(old));
        if !self.bad_list.is_empty() {
            let slots = &self.slots;
            self.bad_list.retain(|&r| slots.extra(r as usize).bad);
            self.bad_list.sort_unstable();
            self.bad_list.dedup();
        }
        Rewalk::Roots(self.release_queued())
    }

    /// The records [`SlabLists::changed`] reads (cache hints only): a root's of a changed entry
    /// of the table (those of its block's first and last root span all of them), a slot's of a
    /// changed slab block.
    #[inline]
    fn prefetch_changed(&self, old: &[(usize, BlockData)], table_end: u64, slab_end: u64) {
        for &(b, _) in old {
            let at = b as u64 * 64;
            if at >= self.table_at && at < table_end {
                let first = (at - self.table_at) / self.root_bytes;
                self.prefetch_root(first as u32);
                self.prefetch_root((first + 64 / self.root_bytes - 1).min(self.roots - 1) as u32);
            } else if at >= self.slab.base.0 && at < slab_end {
                let slot = ((at - self.slab.base.0) / self.slab.slot_bytes) as usize;
                crate::hostmem::prefetch(&self.per_slot[slot]);
                self.free.prefetch(slot);
            }
        }
    }

    /// Every queued root lets go of its slots before any is walked again: a slot that moved
    /// from one list to another is then claimed once, whichever list is walked first (else it
    /// would look reached twice in between, and finding its other list is a search). Cache
    /// hints first, in stages so that each stage's misses overlap: the roots' lists (their
    /// records were read when queued), then their slots' records. Returns the queued roots.
    #[inline]
    fn release_queued(&mut self) -> Vec<u32> {
        let todo = std::mem::take(&mut self.todo);
        for &r in &todo {
            self.slots.prefetch(r as usize);
        }
        for &r in &todo {
            for &slot in self.slots.get(r as usize) {
                crate::hostmem::prefetch(&self.per_slot[slot as usize]);
            }
        }
        for &r in &todo {
            self.release(r);
        }
        todo
    }
}

/// A little-endian u64 of a data area.
#[inline]
pub(crate) fn le64(data: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(data[at..at + 8].try_into().unwrap())
}

#[cfg(test)]
pub(crate) mod check {
    //! Model-based test helper: a follower against the whole verifier over a real run's
    //! states and over random damage.
    use super::Follow;
    use crate::rng::Rng;
    use crate::types::BlockData;
    use crate::workload::native::Native;
    use crate::workload::{WorkloadConfig, WorkloadKind};

    /// Run `txs` transactions of `kind` natively; after each (every fourth together with the
    /// next), and after random damage to a few blocks (undone again), the follower's verdict
    /// must equal the whole verifier's.
    /// Returns how many damaged states the verifier rejected (the damage must matter).
    pub fn agrees(kind: WorkloadKind, cfg: &WorkloadConfig, txs: usize, seed: u64) -> usize {
        let mut w = kind.build(cfg);
        let mut data = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut data);
        let verifier = kind.build(cfg);
        let mut f = verifier.follower().expect("the workload has a follower");
        assert!(f.reset(&data));
        let mut pm = Native::new(data);
        let mut rng = Rng::new(seed);
        let mut damage = Rng::new(seed ^ 0xDA);
        let mut prev = pm.mem.clone();
        let mut rejected = 0;
        for t in 0..txs {
            w.run_tx(&mut pm, &mut rng, t % 7 == 3);
            if t % 4 == 1 {
                // The follower hears of this transaction's blocks with the next one's, as the
                // crash checker tells it of every transaction up to the next S_k it wants.
                continue;
            }
            let now = pm.mem.clone();
            let old = diff(&prev, &now);
            let got = f.changed(&now, &old);
            assert_eq!(got, verifier.verify(&now).is_ok(), "tx {t}: follower and verifier disagree");
            // Damage: a few bytes of blocks the transaction touched, or of random blocks.
            let mut bad = now.clone();
            for _ in 0..1 + damage.below(3) {
                let b = if !old.is_empty() && damage.chance(0.7) {
                    old[damage.below(old.len() as u64) as usize].0
                } else {
                    damage.below(bad.len() as u64 / 64) as usize
                };
                // Half the time the low bits of an 8-byte word: small fields (colours,
                // counts, degrees, the slab's bump) as well as pointers and keys.
                let (at, bit) = match damage.chance(0.5) {
                    true => (b * 64 + 8 * damage.below(8) as usize, damage.below(2)),
                    false => (b * 64 + damage.below(64) as usize, damage.below(8)),
                };
                let at = at.min(bad.len() - 1);
                bad[at] ^= 1 << bit;
            }
            let old_bad = diff(&now, &bad);
            let verdict = verifier.verify(&bad).is_ok();
            rejected += usize::from(!verdict);
            assert_eq!(f.changed(&bad, &old_bad), verdict, "tx {t}: damaged state, follower and verifier disagree");
            assert!(f.changed(&now, &diff(&bad, &now)), "tx {t}: undoing the damage");
            prev = now;
        }
        rejected
    }

    /// The blocks that differ between `a` and `b`, with `a`'s content.
    pub fn diff(a: &[u8], b: &[u8]) -> Vec<(usize, BlockData)> {
        a.chunks(64)
            .zip(b.chunks(64))
            .enumerate()
            .filter(|(_, (x, y))| x != y)
            .map(|(i, (x, _))| {
                let mut block = [0u8; 64];
                block[..x.len()].copy_from_slice(x);
                (i, block)
            })
            .collect()
    }

    /// Lists kept in their line or in the arena, as they grow and shrink across
    /// [`super::Lines::INLINE`], read back as set.
    #[test]
    fn lines_read_back_what_was_set() {
        let mut lines = super::Lines::new(8);
        let mut model = vec![Vec::new(); 8];
        let mut rng = Rng::new(5);
        for _ in 0..4000 {
            let r = rng.below(8) as usize;
            let n = rng.below(2 * super::Lines::INLINE as u64 + 2) as usize;
            model[r] = (0..n).map(|_| rng.next_u64() as u32).collect();
            lines.set(r, &model[r]);
            assert!((0..8).all(|r| lines.get(r) == model[r]));
        }
        lines.clear();
        assert!((0..8).all(|r| lines.get(r).is_empty()));
    }

    /// Keep the helper honest: a follower that ignores changes is caught.
    #[test]
    #[should_panic(expected = "disagree")]
    fn a_follower_that_ignores_changes_is_caught() {
        struct Lazy(Box<dyn Follow>);
        impl Follow for Lazy {
            fn reset(&mut self, data: &[u8]) -> bool {
                self.0.reset(data)
            }
            fn changed(&mut self, _: &[u8], _: &[(usize, BlockData)]) -> bool {
                true
            }
        }
        let mut cfg = WorkloadConfig::default();
        cfg.sps.entries = 256;
        let kind = WorkloadKind::Sps;
        let verifier = kind.build(&cfg);
        let mut w = kind.build(&cfg);
        let mut data = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut data);
        let mut f = Lazy(verifier.follower().unwrap());
        f.reset(&data);
        let mut bad = data.clone();
        bad[8] = bad[0];
        let old = diff(&data, &bad);
        assert_eq!(f.changed(&bad, &old), verifier.verify(&bad).is_ok(), "disagree");
    }
}
