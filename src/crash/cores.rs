//! The crash sweep on more than one core: at each crash point, the durable image, recovery,
//! then the oracle for concurrent histories ([`super::concurrent`]), the workload's structural
//! verifier on the recovered data area, and a second recovery (docs/multicore.md, "The oracle
//! for concurrent histories").
//!
//! A worker walks its points in time order with one running durable image and one image of the
//! oracle's base (the closure of the acknowledged transactions). The work at a point is
//! proportional to what changed since the worker's previous point, as in the one-core sweep
//! (`sweep.rs`):
//! - the lines where the recovered data area differs from the base's image are kept as a
//!   running set: a line is compared again only when a durable write, a base transaction, the
//!   recovery plan or its undo changed it;
//! - the workload's incremental verifier hears only of the lines that changed since it last
//!   looked;
//! - recovery runs again only when a durable write outside the data area has landed since the
//!   last plan (for every log format whose recovery reads no data block,
//!   [`recovery::reads_data_area`]); otherwise the last plan is the plan. On the 1st, 8th,
//!   64th, ... reuse a whole recovery runs anyway and must agree;
//! - the second recovery is skipped when the plan writes only data blocks under such a
//!   format: it reads the same log area, so it makes the same plan, and laying it again changes
//!   nothing (it still runs on the 1st, 8th, 64th, ... such point);
//! - under HOOP, whose recovery reads the home blocks it replays into, through the scan cache:
//!   the plan's redo writes stay laid over the data area from point to point ([`Overlay`]),
//!   recovery reads the home blocks from under them, and only the blocks where the new plan
//!   differs from the last are laid again ([`CoreSweep::judge_laid`]); a crash after a prefix
//!   of the redo writes is recovered again through the cache as well;
//! - under Kiln and LOC-Kiln, whose every point's durable writes reach the NV-LLC and whose
//!   plan writes every committed line home, the plan is kept up to date block by block
//!   ([`super::incremental::kiln::Tracker`]) and its redo writes stay laid over the data area from point
//!   to point ([`Overlay`]); only the homes whose outcome changed are laid again
//!   ([`CoreSweep::judge_tracked`]).
//!
//! Otherwise the plan is applied to the running image and undone after the point. Torn writes
//! (`--atomicity` below 64) are the one-core sweep's states ([`super::torn`]): each is landed in
//! the running image, checked like the clean state, and landed back.

use super::concurrent::{Closure, History};
use super::gapview::GapView;
use super::guard_due;
use super::incremental::hoop::Recoverer;
use super::overlay::{Overlaid, Overlay};
use super::torn;
use super::{CrashSpec, Part, ViolationKind};
use crate::hostmem::Sparse;
use crate::log::head::LogFormat;
use crate::recovery::{self, Plan};
use crate::rng::Rng;
use crate::runner::Recorded;
use crate::types::{BlockData, BlockId, Cycle};
use crate::workload::follow::Follow;
use crate::workload::Workload;
use std::time::Instant;

/// One worker of the N-core sweep.
pub(super) struct CoreSweep<'a> {
    spec: &'a CrashSpec,
    rec: &'a Recorded,
    h: &'a History,
    verifier: &'a Workload,
    closure: Closure,
    /// The durable image at the current point (whole layout, logical) and the next write to
    /// land; with Start-Gap, the physical image the writes it owns land in, from which the log
    /// area of `img` is brought up to date before recovery.
    img: Vec<u8>,
    next_write: usize,
    phys: Option<GapView>,
    /// The data area of the base's image.
    base: Vec<u8>,
    data_len: usize,
    /// The running set of data lines where `img` and `base` differ (`diff`, and each line's
    /// place there plus one, 0 when out), as of the last [`CoreSweep::settle`]; the lines changed since,
    /// to compare again (each once: `queued`).
    diff: Vec<u32>,
    diff_at: Vec<u32>,
    unsettled: Vec<u32>,
    queued: Vec<bool>,
    /// `diff` in line order, handed to the oracle.
    sorted: Vec<u32>,
    /// The workload's incremental verifier, where it has one (and no caller's own check is
    /// given, which needs whole images), the data area it last saw, and the lines of `img`
    /// changed since (each once: `seen`).
    follower: Option<Box<dyn Follow>>,
    followed: Vec<u8>,
    unseen: Vec<u32>,
    seen: Vec<bool>,
    /// The last recovery plan, whether a durable write outside the data area has landed since
    /// it was made, and the counts of plan reuses, of skipped second recoveries and of
    /// decided crashes during recovery (for the guards).
    last_plan: Option<Plan>,
    outside_written: bool,
    reuses: u64,
    skipped: u64,
    prefixes: u64,
    /// What the plan overwrote, to put back after the point.
    undo: Vec<(BlockId, BlockData)>,
    /// Kiln's recovery kept up to date block by block ([`super::incremental::kiln::Tracker`]), where the
    /// format is Kiln's and no Start-Gap view rewrites the log area (`trackable`): while it
    /// follows the image, the plan's redo writes stay laid over `img`'s data area (`overlay`)
    /// from point to point, and a point lays only the homes whose outcome changed
    /// ([`CoreSweep::track`]). Whether building one may succeed now (not after a failed try
    /// until a block outside the data area lands); its uses (the 1st, 8th, 64th, ... compared with a whole
    /// recovery); the homes it re-derives.
    tracker: Option<super::incremental::kiln::Tracker>,
    trackable: bool,
    tracker_retry: bool,
    tracked: u64,
    retrack: Vec<(BlockId, Option<BlockId>)>,
    overlay: Overlay,
    /// Recovery, through HOOP's scan cache where it applies ([`Recoverer`]): told of
    /// every durable write; the second recoveries (of the recovered image, and of one with a
    /// prefix of the plan laid) run on images the cache has not heard of.
    recoverer: Recoverer,
    /// The longest time a write of the run spent in service (for torn writes).
    max_service: Cycle,
    /// The cut-short GPF fault ([`super::gpf`]).
    gpf_cut: Option<super::gpf::GpfCut<'a>>,
    pub(super) part: Part,
}

impl<'a> CoreSweep<'a> {
    /// A worker over `rec`; `sparse` lists the pages of `rec.initial` that are not all zero
    /// (its images are copied page by page, the zero pages left to the kernel).
    pub(super) fn new(
        spec: &'a CrashSpec,
        rec: &'a Recorded,
        h: &'a History,
        verifier: &'a Workload,
        sparse: &Sparse,
    ) -> Self {
        let data_len = rec.layout.data_bytes as usize;
        let lines = data_len / 64;
        let phys = GapView::new(&spec.run.cfg.startgap, &rec.layout, || sparse.copy(&rec.initial));
        let recoverer = Recoverer::new(spec.run.protocol.log_format(), &rec.layout, phys.is_some());
        let trackable = spec.run.protocol.log_format() == Some(LogFormat::Kiln) && phys.is_none();
        // The overlay of the Kiln tracker and of HOOP's scan cache (`judge_laid`).
        let laid = trackable || recoverer.caches();
        let mut over_at = vec![(0, 0); if laid { lines } else { 0 }];
        // Read at random before written there: committed now (see `Sweep::new`).
        crate::hostmem::commit_zeroed(&mut over_at, (0, 0));
        CoreSweep {
            spec,
            rec,
            h,
            verifier,
            closure: Closure::new(h),
            img: sparse.copy(&rec.initial),
            next_write: 0,
            phys,
            base: sparse.copy(&rec.initial[..data_len]),
            data_len,
            diff: Vec::new(),
            diff_at: vec![0; lines],
            unsettled: Vec::new(),
            queued: vec![false; lines],
            sorted: Vec::new(),
            follower: None,
            followed: Vec::new(),
            unseen: Vec::new(),
            seen: Vec::new(),
            last_plan: None,
            outside_written: true,
            reuses: 0,
            skipped: 0,
            prefixes: 0,
            undo: Vec::new(),
            tracker: None,
            trackable,
            tracker_retry: trackable,
            tracked: 0,
            retrack: Vec::new(),
            overlay: Overlay::new(over_at),
            recoverer,
            max_service: if spec.atomicity < 64 { torn::max_service(&rec.record.durable.writes) } else { Cycle::ZERO },
            gpf_cut: super::gpf::for_run(spec, rec),
            part: Part::default(),
        }
        .with_follower(sparse)
    }

    fn with_follower(mut self, sparse: &Sparse) -> Self {
        if self.spec.verify.is_none() {
            if let Some(mut f) = self.verifier.follower() {
                let initial = &self.rec.initial[..self.data_len];
                f.reset(initial);
                self.followed = sparse.copy(initial);
                self.seen = vec![false; self.data_len / 64];
                self.follower = Some(f);
            }
        }
        self
    }

    /// Data line `b` of `base` changed (or of `img`: [`CoreSweep::set_img`]): compare it again
    /// before the next look at the difference.
    #[inline]
    fn requeue(&mut self, b: usize) {
        if let Some(q) = self.queued.get_mut(b) {
            if !std::mem::replace(q, true) {
                self.unsettled.push(b as u32);
            }
        }
    }

    /// Write block `b` of `img`, telling the running difference and the follower.
    #[inline]
    fn set_img(&mut self, b: BlockId, data: &BlockData) {
        self.img[b.range()].copy_from_slice(data);
        let i = b.0 as usize;
        self.requeue(i);
        if let Some(s) = self.seen.get_mut(i) {
            if !std::mem::replace(s, true) {
                self.unseen.push(i as u32);
            }
        }
    }

    /// Compare the queued lines, bringing the running difference up to date, and lay it out
    /// in line order in `sorted` (the oracle's answer is the same for any order; its message
    /// names lines in the order it is given them, so the order is fixed).
    fn settle(&mut self) {
        let mut queued = std::mem::take(&mut self.unsettled);
        for &b in &queued {
            let b = b as usize;
            self.queued[b] = false;
            let r = b * 64..b * 64 + 64;
            let now = self.img[r.clone()] != self.base[r];
            match (self.diff_at[b] != 0, now) {
                (false, true) => {
                    self.diff.push(b as u32);
                    self.diff_at[b] = self.diff.len() as u32;
                }
                (true, false) => {
                    let at = self.diff_at[b] as usize - 1;
                    self.diff.swap_remove(at);
                    self.diff_at[b] = 0;
                    if let Some(&moved) = self.diff.get(at) {
                        self.diff_at[moved as usize] = at as u32 + 1;
                    }
                }
                _ => {}
            }
        }
        queued.clear();
        self.unsettled = queued;
        self.sorted.clear();
        self.sorted.extend_from_slice(&self.diff);
        self.sorted.sort_unstable();
    }

    /// The structural verdict on the recovered data area `img[..data_len]`: through the
    /// follower, told of the lines that changed since it last looked, else the whole verifier.
    /// A broken verdict takes its message from the whole verifier.
    fn structure(&mut self) -> Result<(), String> {
        let data = &self.img[..self.data_len];
        let Some(f) = &mut self.follower else {
            return self.verifier.verify(data);
        };
        let mut old = Vec::new();
        for &b in &self.unseen {
            self.seen[b as usize] = false;
            let r = b as usize * 64..b as usize * 64 + 64;
            if self.followed[r.clone()] != data[r.clone()] {
                old.push((b as usize, <BlockData>::try_from(&self.followed[r.clone()]).expect("a block")));
                self.followed[r.clone()].copy_from_slice(&data[r]);
            }
        }
        self.unseen.clear();
        if f.changed(data, &old) {
            return Ok(());
        }
        match self.verifier.verify(data) {
            Err(e) => Err(e),
            Ok(()) => Err("the incremental verifier finds the image broken, the whole verifier does not".into()),
        }
    }

    /// Check crash cycle `t` (not below the previous point of this worker): its clean durable
    /// state, then below 64-byte atomicity each of its torn states ([`torn::variants`]).
    pub(super) fn check_point(&mut self, t: Cycle) {
        let start = Instant::now();
        let rec = self.rec;
        let writes = &rec.record.durable.writes;
        while let Some(w) = writes.get(self.next_write).filter(|w| w.durable <= t) {
            self.land(w.block, &w.data);
            self.next_write += 1;
        }
        let (a, i) = self.closure.advance(self.h, t);
        for j in 0..self.closure.joined().len() {
            let k = self.closure.joined()[j] as usize;
            rec.oracle.apply_tx(k, &mut self.base);
            for b in rec.oracle.tx_blocks(k) {
                self.requeue(b);
            }
        }
        self.part.following += start.elapsed();
        let start = Instant::now();
        self.check_state(t, a, i, None);
        if self.spec.atomicity < 64 {
            self.check_torn(t, a, i);
        }
        if let Some(s) = self.gpf_cut.as_mut().and_then(|c| c.state(t)) {
            // The cut-short GPF's state, checked as a torn state is.
            self.part.gpf_states += 1;
            let clean: Vec<(BlockId, BlockData)> = s.blocks.iter().map(|(b, _)| (*b, self.durable_block(*b))).collect();
            for (b, d) in &s.blocks {
                self.land(*b, d);
            }
            self.check_state(t, a, i, Some(s.describe));
            for (b, d) in clean.iter().rev() {
                self.land(*b, d);
            }
        }
        self.part.at_points += start.elapsed();
    }

    /// A block write becomes durable: in the physical image with Start-Gap; for a block under
    /// the overlay, in the overlay's record of the durable content; else in `img`.
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
                self.overlay_off();
            }
        } else if self.trackable {
            // A tracker may follow the image again once its log or NV-LLC state has changed
            // (a build fails only where recovery would).
            self.tracker_retry |= !self.rec.layout.is_data(b);
        }
    }

    /// A block of the durable image (physical with Start-Gap; under the overlay, its record).
    fn durable_block(&self, b: BlockId) -> BlockData {
        match &self.phys {
            Some(view) if view.holds(b) => view.block(b),
            _ => match self.overlay.durable(b) {
                Some(d) => *d,
                None => self.img[b.range()].try_into().expect("a block"),
            },
        }
    }

    /// Check each torn state of crash point `t` like the clean one: land the torn blocks,
    /// check, land the clean blocks back.
    fn check_torn(&mut self, t: Cycle, a: u64, i: u64) {
        let writes = &self.rec.record.durable.writes;
        let flight: Vec<_> = torn::in_flight(writes, self.next_write, t, self.max_service)
            .into_iter()
            .map(|j| (&writes[j], self.durable_block(writes[j].block)))
            .collect();
        let states = torn::variants(&flight, self.spec.atomicity, self.spec.exhaustive, self.spec.run.seed, t);
        for s in states {
            let clean: Vec<(BlockId, BlockData)> = s.blocks.iter().map(|(b, _)| (*b, self.durable_block(*b))).collect();
            for (b, d) in &s.blocks {
                self.land(*b, d);
            }
            self.part.torn_states += 1;
            self.check_state(t, a, i, Some(s.describe));
            for (b, d) in clean.iter().rev() {
                self.land(*b, d);
            }
        }
    }

    /// Judge the durable image as it stands (`torn`: the torn state it is, if one) and record
    /// a violation.
    fn check_state(&mut self, t: Cycle, a: u64, i: u64, torn: Option<String>) {
        let Err((kind, detail)) = self.judge(t) else { return };
        self.part.violations += 1;
        *self.part.by_kind.entry(kind).or_default() += 1;
        if self.part.first.is_none() {
            let (first_diff_addr, differing_blocks) = self.difference_from_closest();
            self.part.first = Some(super::Violation {
                kind,
                seed: self.spec.run.seed,
                crash_cycle: t,
                acked: a,
                issued: i,
                closest_k: (self.closure.base_len() + self.closure.added().len()) as u64,
                first_diff_addr,
                differing_blocks,
                detail,
                replay: format!("{} --crash-at {t}", self.spec.replay_base),
                torn,
            });
        }
    }

    /// For the report: where the recovered data area differs from the image of the set the
    /// oracle came closest with (the base and [`Closure::added`], `closest_k` transactions).
    /// Once per worker, at its first violation: it recovers and builds that image afresh.
    fn difference_from_closest(&self) -> (Option<u64>, u64) {
        let layout = &self.rec.layout;
        let plan = recovery::recover(self.spec.run.protocol.log_format(), layout, &self.img).unwrap_or_default();
        let mut recovered = self.img[..self.data_len].to_vec();
        for (b, d) in plan.writes.iter().filter(|(b, _)| layout.is_data(*b)) {
            recovered[b.range()].copy_from_slice(d);
        }
        let mut closest = self.base.clone();
        for &k in self.closure.added() {
            self.rec.oracle.apply_tx(k as usize, &mut closest);
        }
        super::difference(&recovered, &closest)
    }

    /// The recovery plan of the durable image `img`: the last one when it still holds (see the
    /// module's comment), else a whole recovery.
    fn plan(&mut self, format: Option<LogFormat>) -> Result<Plan, String> {
        let (layout, img) = (&self.rec.layout, &self.img);
        if let Some(plan) =
            super::reuse_plan(&mut self.last_plan, self.outside_written, &mut self.reuses, format, layout, img)
        {
            return Ok(plan);
        }
        let plan = self.recoverer.recover(&self.rec.layout, &self.img, false);
        self.outside_written = plan.is_err();
        plan
    }

    /// Judge the durable image through HOOP's scan cache: recovered with the last plan still
    /// laid over the data area (the home blocks read from under it) and the new plan's redo
    /// writes laid in its place ([`Overlaid::overlay_update`]), so that a point costs what
    /// changed in the plan rather than twice its length; the data area of `img` is then the
    /// recovered one, checked as it stands, and stays laid for the next point. Its writes
    /// outside the data area (the heads) are made for the second recovery of the recovered
    /// image and undone. On the 1st, 8th, 64th, ... use a whole recovery of the durable image,
    /// the overlay taken away, must agree. An error leaves the overlay away.
    fn judge_laid(&mut self, t: Cycle, format: Option<LogFormat>) -> Result<(), (ViolationKind, String)> {
        let (layout, img, overlay) = (&self.rec.layout, &self.img, &self.overlay);
        let (plan, guard) = self.recoverer.recover_under(layout, img, |b| overlay.durable_in(img, b));
        let plan = self.lay_recovered(plan, guard, format).map_err(|e| (ViolationKind::RecoveryError, e))?;
        let laid = plan.writes.iter().take_while(|(b, _)| self.rec.layout.is_data(*b)).count();
        self.check_plan(t, format, &plan, laid)
    }

    /// Lay `plan`'s writes past the first `laid` (which the image already holds), check the
    /// recovered image, put those blocks back, and check a crash during recovery.
    fn check_plan(
        &mut self,
        t: Cycle,
        format: Option<LogFormat>,
        plan: &Plan,
        laid: usize,
    ) -> Result<(), (ViolationKind, String)> {
        let mut undo = std::mem::take(&mut self.undo);
        undo.clear();
        for (b, d) in &plan.writes[laid..] {
            undo.push((*b, self.img[b.range()].try_into().expect("a block")));
            self.set_img(*b, d);
        }
        let mut verdict = self.check_recovered(t, format, plan);
        for (b, d) in undo.iter().rev() {
            self.set_img(*b, d);
        }
        self.undo = undo;
        if verdict.is_ok() {
            verdict = self.interrupted(t, format, plan).map_err(|e| (ViolationKind::Idempotence, e));
        }
        verdict
    }

    /// Recover the durable image, check it, and put the image back.
    fn judge(&mut self, t: Cycle) -> Result<(), (ViolationKind, String)> {
        let format = self.spec.run.protocol.log_format();
        if let Some(view) = &mut self.phys {
            view.refresh(&self.rec.layout, &mut self.img).map_err(|e| (ViolationKind::RecoveryError, e))?;
        }
        if self.recoverer.caches() {
            return self.judge_laid(t, format);
        }
        if self.trackable {
            if let Some(verdict) = self.judge_tracked(t, format) {
                return verdict;
            }
        }
        let plan = self.plan(format).map_err(|e| (ViolationKind::RecoveryError, e))?;
        let verdict = self.check_plan(t, format, &plan, 0);
        if !recovery::reads_data_area(format) {
            self.last_plan = Some(plan);
        }
        verdict
    }

    /// A crash during recovery: the durable image D (`img`, or under HOOP's scan cache `img`
    /// with `plan` laid over it, [`CoreSweep::judge_laid`]) with a random prefix of `plan`'s
    /// writes, recovered again, must end where the whole plan did (the one-core sweep's check,
    /// same draw). A prefix of data writes alone under a format whose recovery reads no data
    /// line leaves the log as it was, so recovering again makes the same plan: that case, and
    /// the whole plan (the second recovery of `check_recovered`), run only on the 1st, 8th,
    /// 64th, ... such point. Under HOOP's scan cache a prefix of data writes is recovered
    /// again through the cache, with nothing written ([`Recoverer::same_again`]).
    /// `img` is as it was on return.
    fn interrupted(&mut self, t: Cycle, format: Option<LogFormat>, plan: &Plan) -> Result<(), String> {
        let layout = &self.rec.layout;
        let n = plan.writes.len();
        let cut = Rng::derive(self.spec.run.seed ^ 0x1DE0, t.get()).below(n as u64 + 1) as usize;
        let redo = plan.writes.iter().position(|(b, _)| !layout.is_data(*b)).unwrap_or(n);
        let decided = (cut == n || (cut <= redo && !recovery::reads_data_area(format))) && {
            self.prefixes += 1;
            !guard_due(self.prefixes, 3)
        };
        if decided {
            return Ok(());
        }
        let (img, overlay) = (&self.img, &self.overlay);
        if self.recoverer.same_again(layout, img, plan, (cut, redo), |b| overlay.durable_in(img, b)) {
            return Ok(());
        }
        // The whole way from D: the overlay of `judge_laid` taken away and laid again after.
        let laid = !self.overlay.is_empty();
        if laid {
            self.overlay_off();
        }
        let verdict = self.recover_after(cut, plan);
        if laid {
            self.overlay_on(plan);
        }
        verdict
    }

    /// `img` (the durable image D) with the first `cut` writes of `plan` laid, recovered
    /// again, must end where the whole plan did: each block the plan writes holds its last
    /// write there, every other block the second recovery writes D's content. `img` is D again
    /// on return.
    fn recover_after(&mut self, cut: usize, plan: &Plan) -> Result<(), String> {
        let layout = &self.rec.layout;
        let n = plan.writes.len();
        // What the whole recovery leaves in each block it writes (its last write there).
        let mut want: Vec<(BlockId, BlockData)> = plan.writes.iter().rev().copied().collect();
        want.sort_by_key(|(b, _)| b.0);
        want.dedup_by_key(|(b, _)| b.0);
        let mut undo = Vec::with_capacity(cut);
        for (b, d) in &plan.writes[..cut] {
            undo.push((*b, self.img[b.range()].try_into().expect("a block")));
            self.set_img(*b, d);
        }
        let result = self
            .recoverer
            .recover(layout, &self.img, true)
            .map_err(|e| format!("second recovery after a crash at recovery write {cut} of {n} failed: {e}"));
        let mut verdict = result.as_ref().map(|_| ()).map_err(|e| e.clone());
        if let Ok(again) = &result {
            for (b, d) in &again.writes {
                undo.push((*b, self.img[b.range()].try_into().expect("a block")));
                self.set_img(*b, d);
            }
            // Blocks the whole recovery writes hold its last write; the others, D's content
            // (the first record of them in `undo`).
            let wrong = want.iter().map(|(b, _)| *b).chain(again.writes.iter().map(|(b, _)| *b)).find(|b| {
                let now = &self.img[b.range()];
                match want.binary_search_by_key(&b.0, |(w, _)| w.0) {
                    Ok(j) => now != want[j].1,
                    Err(_) => undo.iter().find(|(u, _)| u == b).is_some_and(|(_, d)| now != d),
                }
            });
            if let Some(b) = wrong {
                verdict = Err(format!(
                    "after a crash at recovery write {cut} of {n}, recovering again leaves block {} different",
                    b.0
                ));
            }
        }
        for (b, d) in undo.iter().rev() {
            self.set_img(*b, d);
        }
        verdict
    }

    /// The checks on the recovered image (`img` has `plan` applied): a second recovery
    /// writes nothing new; the data area is the image of a valid set; it is well formed.
    fn check_recovered(
        &mut self,
        t: Cycle,
        format: Option<LogFormat>,
        plan: &Plan,
    ) -> Result<(), (ViolationKind, String)> {
        let layout = &self.rec.layout;
        let same_again = !recovery::reads_data_area(format) && plan.writes.iter().all(|(b, _)| layout.is_data(*b)) && {
            self.skipped += 1;
            !guard_due(self.skipped, 3)
        };
        if !same_again {
            match self.recoverer.recover(layout, &self.img, true) {
                Err(e) => {
                    return Err((
                        ViolationKind::Idempotence,
                        format!("a second recovery of the recovered image fails: {e}"),
                    ))
                }
                Ok(again) => {
                    if let Some((b, _)) = again.writes.iter().find(|(b, d)| self.img[b.range()] != d[..]) {
                        return Err((
                            ViolationKind::Idempotence,
                            format!("a second recovery changes block {} again", b.0),
                        ));
                    }
                }
            }
        }
        self.check_data(t)
    }

    /// The checks on the recovered data area (`img[..data_len]`): the image of a valid set,
    /// well formed.
    fn check_data(&mut self, t: Cycle) -> Result<(), (ViolationKind, String)> {
        self.settle();
        self.closure
            .settle(self.h, t, &self.img[..self.data_len], &self.sorted)
            .map_err(|f| (ViolationKind::Closure, f.to_string()))?;
        self.structure().map_err(|e| (ViolationKind::Structure, e))?;
        if let Some(v) = &self.spec.verify {
            (v.0)(&self.img[..self.data_len]).map_err(|e| (ViolationKind::Structure, e))?;
        }
        Ok(())
    }

    /// Judge the durable image through the Kiln tracker: `None` where no tracker follows it
    /// (the caller recovers whole). On a point where one is built, the whole plan is laid as
    /// the overlay; after, the homes whose outcome changed since the last point. The data area
    /// of `img` is then the recovered one, and is checked as it stands. The crash during
    /// recovery is drawn as the one-core sweep draws it (a random cut of the plan's writes):
    /// a cut inside the redo writes leaves the log and the NV-LLC state as they were, so
    /// recovering again makes the same plan and ends where the first did (it still runs on the
    /// 1st, 8th, 64th, ... such cut); a cut past them, the whole plan included (the second
    /// recovery of the recovered image), is recovered again from the durable image.
    fn judge_tracked(&mut self, t: Cycle, format: Option<LogFormat>) -> Option<Result<(), (ViolationKind, String)>> {
        let mut plan = None;
        if self.tracker.is_none() {
            if !std::mem::take(&mut self.tracker_retry) {
                return None;
            }
            self.tracker = super::incremental::kiln::Tracker::new(&self.rec.layout, &self.img);
            self.tracker.as_ref()?;
            let Ok(whole) = self.recoverer.recover(&self.rec.layout, &self.img, false) else {
                self.tracker = None;
                return None;
            };
            self.overlay_on(&whole);
            // The plans of the untracked path are not followed from here on.
            self.last_plan = None;
            plan = Some(whole);
        }
        let redo = self.track();
        let n = self.tracker.as_ref().expect("tracking").plan_writes();
        if let Err(e) = self.check_data(t) {
            return Some(Err(e));
        }
        let cut = Rng::derive(self.spec.run.seed ^ 0x1DE0, t.get()).below(n as u64 + 1) as usize;
        let decided = cut <= redo && {
            self.prefixes += 1;
            !guard_due(self.prefixes, 3)
        };
        if decided {
            return Some(Ok(()));
        }
        let plan = plan.unwrap_or_else(|| {
            recovery::recover(format, &self.rec.layout, &self.img)
                .expect("crash checker: the Kiln tracker follows an image recovery rejects")
        });
        self.overlay_off();
        let verdict = self.recover_after(cut, &plan).map_err(|e| (ViolationKind::Idempotence, e));
        self.overlay_on(&plan);
        Some(verdict)
    }

    /// Lay the homes whose outcome changed since the last point over the data area (or take
    /// them away), and return the plan's redo count. On the 1st, 8th, 64th, ... use a whole
    /// recovery must make as many redo writes, its last write to each block being what the
    /// overlay holds there, and lay nothing else.
    fn track(&mut self) -> usize {
        let tracker = self.tracker.as_mut().expect("tracking");
        let mut retrack = std::mem::take(&mut self.retrack);
        tracker.take_dirty(|home, from| retrack.push((home, from)));
        let redo = tracker.redo_writes();
        for &(home, from) in &retrack {
            let data = from.map(|f| <BlockData>::try_from(&self.img[f.range()]).expect("a block"));
            self.overlay_set(home, data);
        }
        retrack.clear();
        self.retrack = retrack;
        self.tracked += 1;
        if guard_due(self.tracked, 3) {
            self.check_tracker(redo);
        }
        redo
    }
}

impl Overlaid for CoreSweep<'_> {
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
        CoreSweep::set_img(self, b, data)
    }
    fn layout(&self) -> &crate::pmem::Layout {
        &self.rec.layout
    }
}
