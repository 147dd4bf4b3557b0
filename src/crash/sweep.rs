//! The sweep over crash points; see the module documentation of [`crate::crash`].

use super::gapview::GapView;
use super::incremental::hoop::Recoverer;
use super::overlay::{Overlaid, Overlay};
use super::{difference, guard_due, torn, CrashSpec, Part, UserVerify, Violation, ViolationKind};
use crate::hostmem::Sparse;
use crate::log::head::LogFormat;
use crate::recovery::{self, Plan};
use crate::rng::Rng;
use crate::runner::Recorded;
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};
use crate::workload::follow::Follow;
use crate::workload::Workload;

use std::time::{Duration, Instant};

/// How many durable writes ahead of the one landing the sweep starts loading the lines the
/// next landings touch (a host cache hint; no effect on results).
const LOOK_AHEAD: usize = 8;

/// Flags of a data block in [`Sweep`]'s running difference: it differs between the image and
/// the oracle; it is queued to be compared again.
const DIFFERS: u8 = 1;
const QUEUED: u8 = 2;

/// Block writes applied to an image, kept so they can be rolled back.
#[derive(Default)]
struct Undo(Vec<(BlockId, BlockData)>);

impl Undo {
    fn apply(&mut self, img: &mut [u8], writes: &[(BlockId, BlockData)]) {
        for (b, d) in writes {
            self.0.push((*b, img[b.range()].try_into().unwrap()));
            img[b.range()].copy_from_slice(d);
        }
    }
    fn rollback(&mut self, img: &mut [u8]) {
        while let Some((b, d)) = self.0.pop() {
            img[b.range()].copy_from_slice(&d);
        }
    }
}

/// Two 64-byte blocks are equal: eight word compares, inlined (a slice comparison calls
/// `memcmp`, whose call costs more than the compare at this size).
#[inline(always)]
fn same_block(x: &[u8], y: &[u8]) -> bool {
    let (x, y): (&BlockData, &BlockData) = (x.try_into().unwrap(), y.try_into().unwrap());
    let w = |b: &BlockData, i: usize| u64::from_ne_bytes(b[8 * i..8 * i + 8].try_into().unwrap());
    (0..8).fold(0, |acc, i| acc | (w(x, i) ^ w(y, i))) == 0
}

/// State carried across crash points (all advanced monotonically in time).
///
/// The cost of a crash point is what changed since the previous one (durable writes, oracle
/// transactions) plus what recovery reads and writes; nothing here grows with the length of the
/// run (docs/performance.md, "Crash checking").
pub(super) struct Sweep<'a> {
    spec: &'a CrashSpec,
    rec: &'a Recorded,
    /// The workload's structural verifier (one per worker: a workload need not be `Sync`).
    verifier: &'a Workload,
    /// The durable image in the protocols' (logical) layout: what recovery reads.
    img: Vec<u8>,
    /// With Start-Gap: the durable physical image the writes it owns land in, from which the
    /// log area of `img` is brought up to date before recovery.
    phys: Option<GapView>,
    next_write: usize,
    /// S_oracle_k: the data area after the first `oracle_k` committed transactions.
    oracle: Vec<u8>,
    oracle_k: usize,
    data_len: usize,
    /// The running difference between the data area of `img` and `oracle`: `differs[b] &
    /// DIFFERS` says data block `b` differs, `ndiff` counts such blocks. Every write to either
    /// side (a durable write, an oracle transaction, a recovery plan and its rollback) queues
    /// the blocks it lands in (`unsettled`, flagged `QUEUED`), and each queued block is
    /// compared once before the next comparison ([`Sweep::settle`]), so "recovered data ==
    /// S_k" is `ndiff == 0`; a whole comparison at the 1st, 8th, 64th, ... comparison guards
    /// this bookkeeping.
    differs: Vec<u8>,
    unsettled: Vec<u32>,
    ndiff: usize,
    compares: u64,
    /// The last write of the current recovery plan to each block: `plan_last[b] = (gen, index)`
    /// is valid when `gen == plan_gen` (a stamp, so that no per-point clearing is needed).
    plan_last: Vec<(u32, u32)>,
    plan_gen: u32,
    /// The last recovery plan, and whether a durable write outside the data area has landed
    /// since (see [`Sweep::plan`]); plans reused, and cuts inside the redo writes, so far.
    last_plan: Option<Plan>,
    outside_written: bool,
    /// Kiln's recovery kept up to date block by block ([`super::incremental::kiln::Tracker`]), in place of
    /// `last_plan` while it can follow the image; whether building one may succeed now (not
    /// after a failed try until the log area is written); its uses (the 1st, 8th, 64th, ...
    /// compared with a whole recovery); the homes it re-derives.
    tracker: Option<super::incremental::kiln::Tracker>,
    /// Whether this check uses a tracker at all (Kiln's log format, no Start-Gap).
    trackable: bool,
    tracker_retry: bool,
    /// Recovery, through HOOP's scan cache where it applies ([`Recoverer`]): told of
    /// every durable write; the idempotence check's second recovery runs on an image the cache
    /// has not heard of (the plan's writes reach no slice, only homes and heads, which the
    /// cache compares).
    recoverer: Recoverer,
    tracked: u64,
    retrack: Vec<(BlockId, Option<BlockId>)>,
    /// The overlay (see [`Sweep::plan`]): D's content under each redo write laid over `img`.
    overlay: Overlay,
    reuses: u64,
    redo_prefixes: u64,
    /// The structural verdict on S_k, per k, once computed. When the prefix rule holds the
    /// recovered data area equals S_k byte for byte, so the verifier's verdict depends on k
    /// alone: each distinct recovered image is verified once.
    verdicts: Vec<Option<Result<(), String>>>,
    /// The incremental verifier, where the workload has one ([`crate::workload::follow`]): it
    /// follows the oracle's own data area, hearing of the blocks changed since it last looked
    /// (`vold`: each block once, `vmark[b] == vstamp`, with its content then) whenever the
    /// oracle holds an S_k whose verdict is wanted ([`Sweep::verdict_here`]); `synced`: it has
    /// taken the oracle whole once.
    follower: Option<Box<dyn Follow>>,
    synced: bool,
    vold: Vec<(usize, BlockData)>,
    vmark: Vec<u32>,
    vstamp: u32,
    /// Verdicts the follower gave; a whole check confirms them at the 64th, 4096th, ...
    followed: u64,
    /// Reused buffers: the undo of tentative oracle transactions, of a plan, of a second plan,
    /// the blocks only a second plan writes.
    oracle_undo: Vec<(u64, u32, usize)>,
    oracle_undo_bytes: Vec<u8>,
    plan_undo: Vec<(BlockId, BlockData)>,
    second_undo: Vec<(BlockId, BlockData)>,
    outside: Vec<(BlockId, BlockData)>,
    /// Torn writes: the longest service time of a write, and the torn state being checked
    /// (for the violation report).
    max_service: Cycle,
    /// The cut-short GPF fault ([`super::gpf`]).
    gpf_cut: Option<super::gpf::GpfCut<'a>>,
    torn_now: Option<String>,
    /// What this worker found, and its time ([`super::WorkerSeconds`]).
    pub(super) part: Part,
    /// The part of `following` done lazily at the current point ([`Sweep::lazily`]).
    heard: Duration,
}

impl<'a> Sweep<'a> {
    /// `sparse`: the non-zero pages of `rec.initial` (workers copy only those); `shared`: other
    /// workers run beside this one.
    pub(super) fn new(
        spec: &'a CrashSpec,
        rec: &'a Recorded,
        verifier: &'a Workload,
        sparse: &Sparse,
        shared: bool,
    ) -> Sweep<'a> {
        let data_len = rec.layout.data_bytes as usize;
        let phys = GapView::new(&spec.run.cfg.startgap, &rec.layout, || sparse.copy(&rec.initial));
        let trackable = spec.run.protocol.log_format() == Some(LogFormat::Kiln) && phys.is_none();
        let recoverer = Recoverer::new(spec.run.protocol.log_format(), &rec.layout, phys.is_some());
        let logical_len = rec.layout.total_bytes() as usize;
        // Arrays read at random places before they are written there: committed when other
        // workers run. Otherwise a page read first maps the kernel's shared zero page, and the
        // write that later replaces it interrupts every other worker to flush its TLB
        // (`hostmem::commit_zeroed`; at two workers this took half of their time at the points).
        // Not `plan_last`, which only plans reach: committing its 8 bytes per block of the
        // whole layout cost more at the start than it saved.
        fn commit<T: Copy>(mut v: Vec<T>, zero: T, shared: bool) -> Vec<T> {
            if shared {
                crate::hostmem::commit_zeroed(&mut v, zero);
            }
            v
        }
        Sweep {
            spec,
            rec,
            verifier,
            img: sparse.copy(&rec.initial[..logical_len]),
            phys,
            next_write: 0,
            oracle: sparse.copy(&rec.initial[..data_len]),
            oracle_k: 0,
            data_len,
            differs: commit(vec![0; data_len / 64], 0, shared),
            unsettled: Vec::new(),
            ndiff: 0,
            compares: 0,
            plan_last: vec![(0, 0); logical_len / 64],
            plan_gen: 0,
            last_plan: None,
            outside_written: true,
            tracker: None,
            trackable,
            tracker_retry: trackable,
            recoverer,
            tracked: 0,
            retrack: Vec::new(),
            overlay: Overlay::new(commit(vec![(0, 0); data_len / 64], (0, 0), shared)),
            reuses: 0,
            redo_prefixes: 0,
            verdicts: vec![None; rec.oracle.txs() + 1],
            // A caller's own check sees whole images: no incremental verifier then.
            follower: if spec.verify.is_none() { verifier.follower() } else { None },
            synced: false,
            vold: Vec::new(),
            vmark: commit(vec![0; data_len.div_ceil(64)], 0, shared),
            vstamp: 1,
            followed: 0,
            oracle_undo: Vec::new(),
            oracle_undo_bytes: Vec::new(),
            plan_undo: Vec::new(),
            second_undo: Vec::new(),
            outside: Vec::new(),
            // A pass over every write of the run: only where torn states are checked.
            max_service: if spec.atomicity < 64 { torn::max_service(&rec.record.durable.writes) } else { Cycle::ZERO },
            gpf_cut: super::gpf::for_run(spec, rec),
            torn_now: None,
            part: Part::default(),
            heard: Duration::ZERO,
        }
    }

    /// A(t) and I(t).
    fn bounds(&self, t: Cycle) -> (u64, u64) {
        let r = &self.rec.record;
        let i = r.commit_called.partition_point(|&c| c <= t) as u64;
        let a = r.acks.partition_point(|&(c, _)| c <= t);
        let a = if a == 0 { 0 } else { r.acks[a - 1].1 };
        (a, i)
    }

    pub(super) fn check_point(&mut self, t: Cycle) {
        let rec = self.rec;
        let writes = &rec.record.durable.writes;
        let (a, i) = self.bounds(t);
        let start = Instant::now();
        if self.next_write == 0 && !self.synced {
            self.catch_up(t, a);
        }
        while self.next_write < writes.len() && writes[self.next_write].durable <= t {
            if let Some(ahead) = writes.get(self.next_write + LOOK_AHEAD) {
                self.prefetch_block(ahead.block.0 as usize);
                if let Some(tracker) = &self.tracker {
                    tracker.prefetch(ahead.block, &ahead.data);
                }
            }
            let w = &writes[self.next_write];
            self.land(w.block, &w.data);
            self.next_write += 1;
        }
        while (self.oracle_k as u64) < a {
            if self.oracle_k + 1 < rec.oracle.txs() {
                for b in rec.oracle.tx_blocks(self.oracle_k + 1) {
                    self.prefetch_block(b);
                }
            }
            for (addr, bytes) in rec.oracle.tx_stores(self.oracle_k) {
                self.set_oracle(addr, bytes);
            }
            self.oracle_k += 1;
        }
        let followed = Instant::now();
        self.part.following += followed - start;
        self.check_state(t, a, i);
        if self.spec.atomicity < 64 {
            self.check_torn(t, a, i);
        }
        if let Some(s) = self.gpf_cut.as_mut().and_then(|c| c.state(t)) {
            self.part.gpf_states += 1;
            self.check_variant(s, t, a, i);
        }
        // Less the following done lazily at the point, counted already ([`Sweep::lazily`]).
        self.part.at_points += followed.elapsed().saturating_sub(std::mem::take(&mut self.heard));
    }

    /// A worker's first point (before the follower has looked at the oracle): the oracle moves
    /// to S_`a` and the writes durable by `t` land at once, the last one to each block only
    /// (found walking them backwards), instead of one by one; the running difference is then
    /// brought up to date once per block either changed. Nothing else is laid over the image
    /// yet (no overlay, no tracker), so this is what landing each would leave. Not with
    /// Start-Gap, whose physical image keeps a list of the log lines written.
    fn catch_up(&mut self, t: Cycle, a: u64) {
        let (rec, writes) = (self.rec, &self.rec.record.durable.writes);
        let end = writes.partition_point(|w| w.durable <= t);
        if self.phys.is_some() || !self.overlay.is_empty() || self.tracker.is_some() {
            return;
        }
        // Per block: bit 0, a later durable write has landed; bit 1, listed in `changed`.
        let mut state = vec![0u8; self.img.len() / 64];
        let mut changed = Vec::new();
        for j in self.oracle_k..a as usize {
            for (addr, bytes) in rec.oracle.tx_stores(j) {
                self.oracle[addr as usize..addr as usize + bytes.len()].copy_from_slice(bytes);
                for b in blocks_of(Addr(addr), bytes.len()) {
                    let s = &mut state[b.0 as usize];
                    if *s & 2 == 0 {
                        *s |= 2;
                        changed.push(b.0 as usize);
                    }
                }
            }
        }
        self.oracle_k = a as usize;
        for w in writes[..end].iter().rev() {
            let s = &mut state[w.block.0 as usize];
            if *s & 1 == 0 {
                *s |= 1;
                if *s & 2 == 0 {
                    *s |= 2;
                    changed.push(w.block.0 as usize);
                }
                self.img[w.block.range()].copy_from_slice(&w.data);
            }
        }
        for b in changed {
            self.refresh(b);
        }
        self.recoverer.forget(&rec.layout);
        self.outside_written |= end > 0;
        self.next_write = end;
    }

    /// Check each torn state of crash point `t` ([`torn::variants`]) like the clean one: land
    /// the torn blocks in the durable image, [`Sweep::check_state`], land the clean blocks back.
    fn check_torn(&mut self, t: Cycle, a: u64, i: u64) {
        let rec = self.rec;
        let writes = &rec.record.durable.writes;
        let flight: Vec<_> = torn::in_flight(writes, self.next_write, t, self.max_service)
            .into_iter()
            .map(|j| (&writes[j], self.durable_block(writes[j].block)))
            .collect();
        let states = torn::variants(&flight, self.spec.atomicity, self.spec.exhaustive, self.spec.run.seed, t);
        for s in states {
            self.part.torn_states += 1;
            self.check_variant(s, t, a, i);
        }
    }

    /// Check one variant of crash point `t` (a torn state, a cut-short GPF) like the clean
    /// state: land its blocks in the durable image, [`Sweep::check_state`], land the clean
    /// blocks back.
    fn check_variant(&mut self, s: torn::TornState, t: Cycle, a: u64, i: u64) {
        let clean: Vec<(BlockId, BlockData)> = s.blocks.iter().map(|(b, _)| (*b, self.durable_block(*b))).collect();
        for (b, d) in &s.blocks {
            self.land(*b, d);
        }
        self.torn_now = Some(s.describe);
        self.check_state(t, a, i);
        self.torn_now = None;
        for (b, d) in clean.iter().rev() {
            self.land(*b, d);
        }
    }

    /// A block of the durable image: physical with Start-Gap, the overlay's record of D for a
    /// block under the overlay ([`Sweep::plan`]).
    fn durable_block(&self, b: BlockId) -> BlockData {
        match &self.phys {
            Some(view) if view.holds(b) => view.block(b),
            _ => match self.overlay.durable(b) {
                Some(d) => *d,
                None => self.img[b.range()].try_into().unwrap(),
            },
        }
    }

    /// A block write becomes durable: in the physical image with Start-Gap; for a block under
    /// the overlay, in the overlay's record of D (its first entry for the block, which taking
    /// the overlay away restores last); else in `img`.
    fn land(&mut self, b: BlockId, data: &BlockData) {
        self.outside_written |= !self.rec.layout.is_data(b);
        match &mut self.phys {
            Some(view) if view.holds(b) => view.land(b, data),
            _ => match self.overlay.durable_mut(b) {
                Some(d) => *d = *data,
                None => self.set_img(b, data),
            },
        }
        self.recoverer.land(&self.rec.layout, b);
        if let Some(tracker) = &mut self.tracker {
            if !tracker.land(b, &self.img) {
                self.tracker = None;
                self.tracker_retry = true;
            }
        } else if self.trackable {
            // A tracker may follow the image again once its log or NV-LLC state has changed
            // (a build fails only where recovery would, and recovery reads both).
            self.tracker_retry |= !self.rec.layout.is_data(b);
        }
    }

    /// Recover the durable image as it stands and judge the result (A(t) = `a`, I(t) = `i`).
    fn check_state(&mut self, t: Cycle, a: u64, i: u64) {
        let rec = self.rec;
        if let Err(e) = self.logical_view() {
            return self.violation(ViolationKind::RecoveryError, t, a, i, e);
        }
        // The recovery plan, or with the Kiln tracker the count of its redo writes (the plan
        // itself is made only when the idempotence check below needs it).
        let (plan, redo, writes) = match self.track() {
            Some(redo) => (None, redo, redo + 2),
            None => match self.plan() {
                Ok(p) => {
                    let redo = p.writes.iter().position(|(b, _)| !rec.layout.is_data(*b)).unwrap_or(p.writes.len());
                    let n = p.writes.len();
                    (Some(p), redo, n)
                }
                Err(e) => return self.violation(ViolationKind::RecoveryError, t, a, i, e),
            },
        };
        // The data area of `img` holds the plan's redo writes (the overlay, see `plan`): judge
        // the recovered image as it stands.
        let cut = Rng::derive(self.spec.run.seed ^ 0x1DE0, t.0).below(writes as u64 + 1) as usize;
        let mut verdict = self.judge(a, i);
        // A prefix of redo writes alone leaves every block recovery reads as it was (when it
        // reads no data block, see `plan`), so recovering again makes the same plan and ends
        // where the first recovery did: the check can only fail when the prefix reaches past
        // the redo writes. It still runs on the 1st, 8th, 64th, ... such prefix.
        let decided = cut <= redo && !recovery::reads_data_area(self.spec.run.protocol.log_format()) && {
            self.redo_prefixes += 1;
            !guard_due(self.redo_prefixes, 3)
        };
        let mut plan = plan;
        if verdict.is_ok() && !decided {
            let plan = plan.get_or_insert_with(|| {
                recovery::recover(self.spec.run.protocol.log_format(), &rec.layout, &self.img)
                    .expect("crash checker: the Kiln tracker follows an image recovery rejects")
            });
            if !self.same_again_laid(plan, cut, redo) {
                // Back to the durable image D, then D with the plan's first `cut` writes.
                self.overlay_off();
                let mut undo = Undo(std::mem::take(&mut self.plan_undo));
                undo.apply(&mut self.img, &plan.writes[..cut]);
                verdict = self.idempotence(plan, cut).map_err(|e| (ViolationKind::Idempotence, e));
                undo.rollback(&mut self.img);
                self.plan_undo = undo.0;
                self.overlay_on(plan);
            }
        }
        if self.tracker.is_none() {
            self.last_plan = plan;
        }
        if let Err((kind, detail)) = verdict {
            self.violation(kind, t, a, i, detail);
        }
    }

    /// The recovery plan of the durable image, with its redo writes laid over the data area
    /// of `img` (the overlay: `img`'s data area is then the recovered one, and durable writes
    /// to blocks under it go to the overlay's record of D, [`Sweep::land`]).
    ///
    /// Recovery of every log format but S-WAL's reads no block of the data area
    /// ([`recovery::reads_data_area`]: its plan is a function of the log area and Kiln's NV-LLC
    /// state alone), so it may run on `img` with the overlay in place, and when every durable
    /// write since the last plan landed in the data area, the last plan is the plan and its
    /// overlay stays: the cost of such a point does not depend on the plan's length. On the
    /// 1st, 8th, 64th, ... reuse recovery runs anyway and must agree.
    fn plan(&mut self) -> Result<Plan, String> {
        let format = self.spec.run.protocol.log_format();
        let reads = recovery::reads_data_area(format);
        let (layout, img) = (&self.rec.layout, &self.img);
        if let Some(plan) =
            super::reuse_plan(&mut self.last_plan, self.outside_written, &mut self.reuses, format, layout, img)
        {
            return Ok(plan);
        }
        self.outside_written = false;
        let cached = self.recoverer.caches();
        let plan = match cached {
            true => self.recover_laid(),
            false => {
                if reads {
                    self.overlay_off();
                }
                let plan = self.recover(false);
                self.overlay_off();
                plan
            }
        };
        match plan {
            Ok(plan) => {
                if !cached {
                    self.overlay_on(&plan);
                }
                if std::mem::take(&mut self.tracker_retry) {
                    self.tracker = super::incremental::kiln::Tracker::new(&self.rec.layout, &self.img);
                }
                Ok(plan)
            }
            Err(e) => {
                self.outside_written = true;
                Err(e)
            }
        }
    }

    /// Recovery of the durable image through HOOP's scan cache with the last plan still laid
    /// (the home blocks read from under it), and the new plan laid in its place
    /// ([`Overlaid::overlay_update`]: a point costs what changed in the plan, not twice its
    /// length). On the 1st, 8th, 64th, ... use a whole recovery of the durable image, the
    /// overlay taken away, must agree. An error leaves the overlay away.
    fn recover_laid(&mut self) -> Result<Plan, String> {
        let (layout, img, overlay) = (&self.rec.layout, &self.img, &self.overlay);
        let (plan, guard) = self.recoverer.recover_under(layout, img, |b| overlay.durable_in(img, b));
        self.lay_recovered(plan, guard, self.spec.run.protocol.log_format())
    }

    /// The check of a crash during recovery after `cut` of `plan`'s writes through HOOP's
    /// scan cache, the overlay left laid ([`Recoverer::same_again`]); false for the
    /// caller to check the whole way.
    fn same_again_laid(&mut self, plan: &Plan, cut: usize, redo: usize) -> bool {
        let (img, overlay) = (&self.img, &self.overlay);
        self.recoverer.same_again(&self.rec.layout, img, plan, (cut, redo), |b| overlay.durable_in(img, b))
    }

    /// Recovery of `img` as it stands (`second`: an image the scan cache has not heard of,
    /// see [`Recoverer`]).
    fn recover(&mut self, second: bool) -> Result<Plan, String> {
        self.recoverer.recover(&self.rec.layout, &self.img, second)
    }

    /// The Kiln tracker in use for this point: lay the homes whose outcome changed since the
    /// last point over the data area (or take them away), and return the plan's redo count.
    fn track(&mut self) -> Option<usize> {
        self.tracker.as_ref()?;
        let redo = self.lazily(|s| {
            let tracker = s.tracker.as_mut().expect("checked above");
            let mut retrack = std::mem::take(&mut s.retrack);
            tracker.take_dirty(|home, from| retrack.push((home, from)));
            let redo = tracker.redo_writes();
            for &(home, from) in &retrack {
                let data = from.map(|f| <BlockData>::try_from(&s.img[f.range()]).unwrap());
                s.overlay_set(home, data);
            }
            retrack.clear();
            s.retrack = retrack;
            redo
        });
        self.tracked += 1;
        if guard_due(self.tracked, 3) {
            self.check_tracker(redo);
        }
        Some(redo)
    }

    /// Run `f`, following done lazily at a point (the incremental verifier hearing of the
    /// blocks changed since it last looked, the Kiln tracker laying the homes changed since the
    /// last point over the image): its time counts as following ([`WorkerSeconds`]).
    fn lazily<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        let start = Instant::now();
        let out = f(self);
        let took = start.elapsed();
        (self.part.following, self.heard) = (self.part.following + took, self.heard + took);
        out
    }

    /// Write a block of `img`, keeping the running difference.
    #[inline]
    fn set_img(&mut self, b: BlockId, data: &BlockData) {
        let at: &mut BlockData = (&mut self.img[b.range()]).try_into().expect("a whole block");
        *at = *data;
        self.refresh(b.0 as usize);
    }

    /// Write bytes of the oracle's data area, keeping the running difference and, once the
    /// follower has looked, each block's content as it last saw it.
    fn set_oracle(&mut self, addr: u64, bytes: &[u8]) {
        if self.synced {
            for b in blocks_of(Addr(addr), bytes.len()) {
                let b = b.0 as usize;
                if self.vmark[b] != self.vstamp {
                    self.vmark[b] = self.vstamp;
                    let mut before = [0u8; 64];
                    let r = b * 64..(b * 64 + 64).min(self.data_len);
                    before[..r.len()].copy_from_slice(&self.oracle[r]);
                    self.vold.push((b, before));
                }
            }
        }
        self.oracle[addr as usize..addr as usize + bytes.len()].copy_from_slice(bytes);
        for b in blocks_of(Addr(addr), bytes.len()) {
            self.refresh(b.0 as usize);
        }
    }

    /// Host cache hint: start loading what landing a write to block `b` (or an oracle store
    /// to it) touches: its line in `img`, and for a data block its line in the oracle, its
    /// difference flag, its follower mark and its overlay entry. No effect on results.
    #[inline]
    fn prefetch_block(&self, b: usize) {
        if let Some(x) = self.img.get(b * 64) {
            crate::hostmem::prefetch(x);
        }
        if let (Some(d), Some(o), Some(m)) = (self.differs.get(b), self.oracle.get(b * 64), self.vmark.get(b)) {
            crate::hostmem::prefetch(d);
            crate::hostmem::prefetch(o);
            crate::hostmem::prefetch(m);
            self.overlay.prefetch(b);
        }
    }

    /// Data block `b` of `img` or `oracle` changed: compare it again before the next
    /// comparison (once, however often it changes before then).
    #[inline]
    fn refresh(&mut self, b: usize) {
        let Some(f) = self.differs.get_mut(b) else { return }; // outside the data area
        if *f & QUEUED == 0 {
            *f |= QUEUED;
            self.unsettled.push(b as u32);
        }
    }

    /// Compare each queued block, bringing `ndiff` up to date.
    fn settle(&mut self) {
        let mut queued = std::mem::take(&mut self.unsettled);
        for &b in &queued {
            let b = b as usize;
            let r = b * 64..b * 64 + 64;
            let (was, now) = (self.differs[b] & DIFFERS != 0, !same_block(&self.img[r.clone()], &self.oracle[r]));
            self.differs[b] = if now { DIFFERS } else { 0 };
            if now != was {
                if now {
                    self.ndiff += 1;
                } else {
                    self.ndiff -= 1;
                }
            }
        }
        queued.clear();
        self.unsettled = queued;
    }

    /// Start-Gap: bring the log area of `self.img` up to the physical durable image.
    fn logical_view(&mut self) -> Result<(), String> {
        match &mut self.phys {
            Some(view) => view.refresh(&self.rec.layout, &mut self.img),
            None => Ok(()),
        }
    }

    /// Checks on the recovered image (`self.img` has the plan applied).
    fn judge(&mut self, a: u64, i: u64) -> Result<(), (ViolationKind, String)> {
        let Some(k) = self.matching_k(a, i) else {
            return Err((ViolationKind::Prefix, format!("recovered data equals no S_k with {a} <= k <= {i}")));
        };
        let k = k as usize;
        let verdict = match self.verdicts.get(k) {
            Some(v) => v.clone().expect("verdict recorded"),
            None => self.verify(&self.img[..self.data_len]),
        };
        verdict.map_err(|e| (ViolationKind::Structure, e))
    }

    /// The oracle holds S_k (and the recovered data area equals it): record S_k's verdict if
    /// none is yet, through the follower where the workload has one (it hears of every block
    /// the oracle changed since it last looked, however the oracle moved: forward through
    /// transactions, or back from a tentative one), else from the whole verifier. A "broken"
    /// verdict of the follower takes its message from the whole verifier, which must agree; a
    /// "sound" one is confirmed by the whole verifier at the 64th, 4096th, ... time (the
    /// followers' model-based tests compare every verdict, `follow::check::agrees`).
    fn verdict_here(&mut self, k: usize) {
        if !self.verdicts.get(k).is_some_and(|v| v.is_none()) {
            return;
        }
        let Some(mut f) = self.follower.take() else {
            let verdict = self.verify(&self.oracle);
            self.verdicts[k] = Some(verdict);
            return;
        };
        // The first verdict this worker wants takes S_k whole.
        let sound = self.lazily(|s| match std::mem::replace(&mut s.synced, true) {
            true => f.changed(&s.oracle, &s.vold),
            false => f.reset(&s.oracle),
        });
        self.follower = Some(f);
        self.vold.clear();
        self.vstamp = self.vstamp.wrapping_add(1);
        if self.vstamp == 0 {
            self.vmark.fill(0);
            self.vstamp = 1;
        }
        self.record(k, sound);
    }

    /// The whole structural check of a data area: the workload's verifier, then the library
    /// caller's own check if the spec has one.
    fn verify(&self, data: &[u8]) -> Result<(), String> {
        self.verifier.verify(data)?;
        match &self.spec.verify {
            Some(UserVerify(f)) => f(data),
            None => Ok(()),
        }
    }

    /// Record the follower's verdict on S_j (the oracle's data area).
    fn record(&mut self, j: usize, sound: bool) {
        if self.verdicts[j].is_some() {
            return;
        }
        let verdict = if sound {
            self.followed += 1;
            if self.followed > 1 && guard_due(self.followed, 6) {
                assert_eq!(
                    self.verifier.verify(&self.oracle),
                    Ok(()),
                    "crash checker: the incremental verifier missed a fault in S_{j}"
                );
            }
            Ok(())
        } else {
            let whole = self.verifier.verify(&self.oracle);
            assert!(
                whole.is_err(),
                "crash checker: the incremental verifier rejects S_{j}, the whole verifier does not"
            );
            whole
        };
        self.verdicts[j] = Some(verdict);
    }

    /// The smallest k in a..=i with recovered data == S_k.
    /// S_k's verdict is recorded while the oracle holds it ([`Sweep::verdict_here`]).
    fn matching_k(&mut self, a: u64, i: u64) -> Option<u64> {
        if self.same_data() {
            self.verdict_here(a as usize);
            return Some(a);
        }
        let rec = self.rec;
        let (mut undo, mut bytes) =
            (std::mem::take(&mut self.oracle_undo), std::mem::take(&mut self.oracle_undo_bytes));
        let mut found = None;
        for k in a..i {
            for (addr, new) in rec.oracle.tx_stores(k as usize) {
                let r = addr as usize..addr as usize + new.len();
                undo.push((addr, new.len() as u32, bytes.len()));
                bytes.extend_from_slice(&self.oracle[r]);
                self.set_oracle(addr, new);
            }
            if self.same_data() {
                self.verdict_here(k as usize + 1);
                found = Some(k + 1);
                break;
            }
        }
        while let Some((addr, len, off)) = undo.pop() {
            self.set_oracle(addr, &bytes[off..off + len as usize]);
        }
        bytes.clear();
        (self.oracle_undo, self.oracle_undo_bytes) = (undo, bytes);
        found
    }

    /// Does the (recovered) data area equal the oracle's current S_k?
    fn same_data(&mut self) -> bool {
        self.settle();
        self.compares += 1;
        let same = self.ndiff == 0;
        if guard_due(self.compares, 3) {
            let whole = self.img[..self.data_len] == self.oracle[..];
            assert_eq!(same, whole, "crash checker: the running difference missed a change");
        }
        same
    }

    /// Crash recovery after a random prefix of its writes, recover again: the result must equal
    /// the one of an uninterrupted recovery. Called with `self.img` = the durable image D with
    /// the first `cut` writes of `plan` applied.
    ///
    /// Expected final content of a block: the last write of the first plan to it, else D's
    /// (blocks outside the first plan are untouched by its prefix). The last write per block is
    /// found through `plan_last`, so this costs the two plans' lengths.
    fn idempotence(&mut self, plan: &Plan, cut: usize) -> Result<(), String> {
        let n = plan.writes.len();
        self.plan_gen = self.plan_gen.wrapping_add(1);
        if self.plan_gen == 0 {
            self.plan_last.fill((0, 0));
            self.plan_gen = 1;
        }
        let generation = self.plan_gen;
        for (j, (b, _)) in plan.writes.iter().enumerate() {
            self.plan_last[b.0 as usize] = (generation, j as u32);
        }
        let mut undo = Undo(std::mem::take(&mut self.second_undo));
        let result = match self.recover(true) {
            Err(e) => Err(format!("second recovery after a crash at recovery write {cut} of {n} failed: {e}")),
            Ok(p2) => {
                // Blocks only the second plan writes must keep D's content: read it first.
                let mut outside = std::mem::take(&mut self.outside);
                outside.extend(
                    p2.writes
                        .iter()
                        .filter(|(b, _)| self.plan_last[b.0 as usize].0 != generation)
                        .map(|(b, _)| (*b, <BlockData>::try_from(&self.img[b.range()]).unwrap())),
                );
                undo.apply(&mut self.img, &p2.writes);
                let in_plan =
                    plan.writes.iter().map(|(b, _)| (*b, &plan.writes[self.plan_last[b.0 as usize].1 as usize].1));
                let mut expected = in_plan.chain(outside.iter().map(|(b, d)| (*b, d)));
                let differs = expected.find(|(b, v)| !same_block(&self.img[b.range()], &v[..]));
                let result = differs.map_or(Ok(()), |(b, _)| {
                    Err(format!(
                        "after a crash at recovery write {cut} of {n}, recovering again leaves block {} different",
                        b.0
                    ))
                });
                outside.clear();
                self.outside = outside;
                result
            }
        };
        undo.rollback(&mut self.img);
        self.second_undo = undo.0;
        result
    }

    fn violation(&mut self, kind: ViolationKind, t: Cycle, a: u64, i: u64, detail: String) {
        self.part.violations += 1;
        *self.part.by_kind.entry(kind).or_default() += 1;
        if self.part.first.is_some() {
            return;
        }
        let (closest_k, first_diff_addr, differing_blocks) = self.closest(t, a, i);
        self.part.first = Some(Violation {
            kind,
            seed: self.spec.run.seed,
            crash_cycle: t,
            acked: a,
            issued: i,
            closest_k,
            first_diff_addr,
            differing_blocks,
            detail,
            replay: format!("{} --crash-at {t}", self.spec.replay_base),
            torn: self.torn_now.clone(),
        });
    }

    /// For the report: which S_k the recovered image is closest to, and where it differs.
    fn closest(&mut self, _t: Cycle, a: u64, i: u64) -> (u64, Option<u64>, u64) {
        let overlaid = match self.tracker.is_some() {
            // The tracker's overlay is the whole recovery's outcome (`check_tracker`).
            true => recovery::recover(self.spec.run.protocol.log_format(), &self.rec.layout, &self.img).ok(),
            false => self.last_plan.take(),
        };
        self.overlay_off();
        let found = self.closest_from_durable(a, i);
        if let Some(plan) = overlaid {
            self.overlay_on(&plan);
            if self.tracker.is_none() {
                self.last_plan = Some(plan);
            }
        }
        found
    }

    /// [`Sweep::closest`] with `img` the durable image.
    fn closest_from_durable(&mut self, a: u64, i: u64) -> (u64, Option<u64>, u64) {
        let plan =
            recovery::recover(self.spec.run.protocol.log_format(), &self.rec.layout, &self.img).unwrap_or_default();
        let mut undo = Undo::default();
        undo.apply(&mut self.img, &plan.writes);
        let mut oracle = self.oracle.clone();
        let mut best = (a, None, u64::MAX);
        for k in a..=i {
            if k > a {
                self.rec.oracle.apply_tx(k as usize - 1, &mut oracle);
            }
            let (first, n) = difference(&self.img[..self.data_len], &oracle);
            if n < best.2 {
                best = (k, first, n);
            }
        }
        undo.rollback(&mut self.img);
        best
    }
}

impl Overlaid for Sweep<'_> {
    fn overlay(&self) -> &Overlay {
        &self.overlay
    }
    fn overlay_mut(&mut self) -> &mut Overlay {
        &mut self.overlay
    }
    fn img(&self) -> &[u8] {
        &self.img
    }
    fn set_img(&mut self, b: BlockId, data: &BlockData) {
        Sweep::set_img(self, b, data)
    }
    fn layout(&self) -> &crate::pmem::Layout {
        &self.rec.layout
    }
}

#[cfg(test)]
mod tests {
    use super::super::dispatch::{check_recorded, estimate_line};
    use super::*;
    use crate::config::Config;
    use crate::protocol::ProtocolKind;
    use crate::runner::{execute, RunSpec};
    use crate::workload::WorkloadKind;

    /// The exhaustive check's estimate: the whole time at the rate so far, and what is left.
    #[test]
    fn the_exhaustive_estimate_extrapolates_the_rate_so_far() {
        let line = estimate_line(600_000, 10_000, Duration::from_secs(1));
        assert_eq!(line, "exhaustive: about 60 s in all at 10000 states/s so far (59 s left)");
        let line = estimate_line(5_000_000, 1_000, Duration::from_secs(2));
        assert_eq!(line, "exhaustive: about 2.8 h in all at 500 states/s so far (2.8 h left)");
        let line = estimate_line(1_200_000, 2_000, Duration::from_secs(1));
        assert_eq!(line, "exhaustive: about 10 min in all at 2000 states/s so far (10 min left)");
    }

    /// Data blocks no committed transaction writes.
    fn untouched(rec: &Recorded) -> impl Fn(u64) -> bool {
        let mut touched = vec![false; rec.layout.data_bytes as usize / 64 + 1];
        for k in 0..rec.oracle.txs() {
            for (addr, bytes) in rec.oracle.tx_stores(k) {
                blocks_of(Addr(addr), bytes.len()).for_each(|b| touched[b.0 as usize] = true);
            }
        }
        move |addr| !touched[addr as usize / 64]
    }

    /// A recorded 150-transaction H-WAL run of `workload` (10 % aborts) whose check at 60
    /// points on two workers finds nothing: what the structural-defect tests damage.
    fn sound_run(cfg: Config, workload: WorkloadKind) -> (CrashSpec, RunSpec, Recorded) {
        let run = RunSpec {
            cfg,
            workload,
            protocol: ProtocolKind::HWal,
            txs: 150,
            warmup_txs: 0,
            seed: 3,
            abort_rate: 0.1,
            bug: None,
            record: true,
            tape: false,
            prefault: false,
        };
        let mut spec = CrashSpec::new(run.clone(), 60);
        spec.threads = 2;
        let rec = execute(&run).unwrap().recorded.unwrap();
        assert_eq!(check_recorded(&spec, &run, &rec).violations, 0, "{workload:?}: sound run");
        (spec, run, rec)
    }

    fn rd(d: &[u8], at: u64) -> u64 {
        u64::from_le_bytes(d[at as usize..at as usize + 8].try_into().unwrap())
    }

    /// A structural defect that the prefix rule cannot see: the same damage, in a part of the
    /// structure no transaction writes, in the initial image of both the durable image and the
    /// oracle, so every recovered image equals some S_k and every S_k is broken. The
    /// structural verifier must report it at every crash point, through the incremental
    /// verifiers (sdg: a degree off by one; hash: an entry's key moved to another bucket;
    /// btree: two keys of a leaf swapped), whose broken verdicts the whole verifier confirms;
    /// without the damage, none.
    #[test]
    fn a_structural_defect_the_prefix_rule_misses_is_caught_at_every_point() {
        for workload in [WorkloadKind::Sdg, WorkloadKind::Hash, WorkloadKind::BTree] {
            let mut cfg = Config::default();
            cfg.workload.sdg.vertices = 16384;
            cfg.workload.sdg.initial_edges = 32768;
            cfg.workload.sdg.max_edges = 65536;
            (cfg.workload.hash.key_space, cfg.workload.hash.buckets) = (8192, 2048);
            let (spec, run, mut rec) = sound_run(cfg, workload);
            let free = untouched(&rec);
            let d = &mut rec.initial;
            let (at, value) = match workload {
                // The degree of a vertex whose table entry no transaction writes.
                WorkloadKind::Sdg => {
                    let v = (0..16384u64).rev().find(|v| free(64 + 16 * v)).unwrap();
                    (64 + 16 * v + 8, rd(d, 64 + 16 * v + 8) + 1)
                }
                // The key of an untouched first entry of an untouched bucket: the next key.
                WorkloadKind::Hash => {
                    let b = (0..2048u64)
                        .rev()
                        .find(|b| free(64 + 8 * b) && rd(d, 64 + 8 * b) != 0 && free(rd(d, 64 + 8 * b)));
                    let e = rd(d, 64 + 8 * b.unwrap());
                    (e, rd(d, e) ^ 1)
                }
                // Two keys of an untouched leaf swapped (keys at +16, +24; the kind at +0).
                _ => {
                    let leaf = (0..rec.layout.data_bytes / 4096 - 1)
                        .map(|i| 4096 + 4096 * i)
                        .find(|&n| (n..n + 4096).step_by(64).all(&free) && rd(d, n) as u32 == 1 && rd(d, n) >> 32 >= 2)
                        .unwrap();
                    let (k0, k1) = (rd(d, leaf + 16), rd(d, leaf + 24));
                    d[leaf as usize + 24..leaf as usize + 32].copy_from_slice(&k0.to_le_bytes());
                    (leaf + 16, k1)
                }
            };
            d[at as usize..at as usize + 8].copy_from_slice(&value.to_le_bytes());
            let r = check_recorded(&spec, &run, &rec);
            assert_eq!(r.violations, r.crash_points, "{workload:?}: every point");
            assert_eq!(r.violations_by_kind.get(&ViolationKind::Structure), Some(&r.violations), "{workload:?}: {r:?}");
        }
    }

    /// TPC-C: O_OL_CNT of district 1's first order (populated delivered, never written by a
    /// transaction) one more in the initial image breaks consistency condition 4 in every S_k:
    /// every crash point is a `structure` violation, named by the TPC-C verifier.
    #[test]
    fn a_broken_tpcc_consistency_condition_is_caught_at_every_point() {
        let mut cfg = Config::default();
        let t = &mut cfg.workload.tpcc;
        (t.warehouses, t.scale, t.orders_per_warehouse) = ("1".into(), 100, 1000);
        let (spec, run, mut rec) = sound_run(cfg, WorkloadKind::Tpcc);
        let crate::workload::Workload::Tpcc(t) = WorkloadKind::Tpcc.build(&run.cfg.workload) else { unreachable!() };
        let at = t.first_order_line_count_at();
        assert!(untouched(&rec)(at));
        rec.initial[at as usize] += 1;
        let r = check_recorded(&spec, &run, &rec);
        assert_eq!(r.violations, r.crash_points);
        assert_eq!(r.violations_by_kind.get(&ViolationKind::Structure), Some(&r.violations), "{r:?}");
        assert!(format!("{r:?}").contains("district 1: consistency condition 4"), "{r:?}");
    }

    /// The same for the SQLite workload, through its follower: a key byte of a row on a table
    /// leaf no transaction writes, in the initial image, so that the index no longer matches
    /// the table in any S_k (integrity_check: "row missing from index"). Every crash point is a
    /// `structure` violation; without the damage, none.
    #[test]
    fn a_structural_defect_in_the_sqlite_database_is_caught_at_every_point() {
        let mut cfg = Config::default();
        cfg.workload.sqlite.rows = 2000;
        cfg.workload.sqlite.file_capacity_bytes = 1 << 20;
        let (spec, run, mut rec) = sound_run(cfg, WorkloadKind::Sqlite);
        let free = untouched(&rec);
        let d = &mut rec.initial;
        let size = rd(d, 0);
        // A table leaf (page type 0x0D) none of whose blocks a transaction writes.
        let page = |p: u64| 64 + (p - 1) * 1024;
        let leaf = (2..=size / 1024)
            .find(|&p| d[page(p) as usize] == 0x0D && (page(p)..page(p) + 1024).step_by(64).all(&free))
            .expect("an untouched table leaf");
        // Its first cell: payload size (1 byte: 120), rowid (varint), record header (4 bytes),
        // then the key.
        let at = page(leaf) as usize;
        let mut c = u16::from_be_bytes([d[at + 8], d[at + 9]]) as usize + at + 1;
        while d[c] >= 0x80 {
            c += 1;
        }
        d[c + 1 + 4 + 15] ^= 1;
        let r = check_recorded(&spec, &run, &rec);
        assert_eq!(r.violations, r.crash_points, "every point");
        assert_eq!(r.violations_by_kind.get(&ViolationKind::Structure), Some(&r.violations), "{r:?}");
        let detail = r.first_violation.map(|v| v.detail).unwrap_or_default();
        assert!(detail.contains("index"), "{detail}");
    }
}
