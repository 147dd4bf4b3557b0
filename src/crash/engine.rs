//! The crash-checking engine: one worker's walk over its crash points, in increasing time
//! (see the module documentation of [`crate::crash`] for what a point checks).
//!
//! The engine owns what every checker shares: the durable image (durable writes landing in
//! it, the durable content of a block, torn states and the cut-short GPF's states), the
//! recovery plan of each state (one source: an incremental recoverer where the log format has
//! one, [`super::incremental`], else the last plan while it still holds, else a whole
//! recovery), the plan's redo writes laid over the data area ([`Overlay`]), and the checks of
//! recovery itself (a crash during recovery, recovered again). The one varying part is the
//! [`Oracle`]: which data areas the recovered one may equal (a prefix on one core, a closed
//! set on N cores, [`super::oracle`]).
//!
//! The cost of a crash point is what changed since the previous one (durable writes, oracle
//! transactions) plus what recovery reads and writes; nothing here grows with the length of the
//! run (docs/performance.md, "Crash checking").

use super::gapview::GapView;
use super::incremental::{IncrementalRecovery, Recovered};
use super::oracle::{same_block, Oracle};
use super::overlay::{Overlaid, Overlay};
use super::{guard_due, torn, CrashSpec, Part, Violation, ViolationKind};
use crate::hostmem::Sparse;
use crate::log::head::LogFormat;
use crate::pmem::read_block;
use crate::recovery::{self, Plan};
use crate::rng::Rng;
use crate::runner::Recorded;
use crate::types::{BlockData, BlockId, Cycle};
use std::time::{Duration, Instant};

/// How many durable writes ahead of the one landing the engine starts loading the lines the
/// next landings touch (a host cache hint; no effect on results).
const LOOK_AHEAD: usize = 8;

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

/// The recovery of a durable state as laid over the image: the plan (absent when an
/// incremental recoverer followed the image without making one), the count of its redo writes
/// (those to the data area, which come first) and of all its writes, and whether an
/// incremental recoverer laid only the homes that changed.
struct Laid {
    plan: Option<Plan>,
    redo: usize,
    writes: usize,
    tracked: bool,
}

impl Laid {
    fn of(plan: Plan, layout: &crate::pmem::Layout) -> Laid {
        let writes = plan.writes.len();
        let redo = plan.writes.iter().position(|(b, _)| !layout.is_data(*b)).unwrap_or(writes);
        Laid { plan: Some(plan), redo, writes, tracked: false }
    }
}

/// One worker of the crash checker, with oracle `O`.
pub(super) struct Engine<'a, O: Oracle> {
    spec: &'a CrashSpec,
    rec: &'a Recorded,
    format: Option<LogFormat>,
    oracle: O,
    /// The durable image in the protocols' (logical) layout: what recovery reads; its data
    /// area holds the current plan's redo writes ([`Overlay`]).
    img: Vec<u8>,
    /// With Start-Gap: the durable physical image the writes it owns land in, from which the
    /// log area of `img` is brought up to date before recovery.
    phys: Option<GapView>,
    next_write: usize,
    data_len: usize,
    overlay: Overlay,
    /// The format's incremental recoverer, if it has one; the homes it hands over.
    incremental: Option<Box<dyn IncrementalRecovery>>,
    changed_homes: Vec<(BlockId, Option<BlockId>)>,
    /// The last plan, and whether a durable write outside the data area has landed since
    /// ([`super::reuse_plan`]); plans reused so far.
    last_plan: Option<Plan>,
    outside_written: bool,
    reuses: u64,
    /// Crashes during recovery decided without recovering again, and second recoveries of the
    /// recovered image skipped, so far (each still runs on the 1st, 8th, 64th, ...).
    decided: u64,
    skipped: u64,
    /// The last write of the plan being checked to each block: `plan_last[b] = (stamp, index)`
    /// is valid when `stamp == plan_stamp` (so that no per-point clearing is needed).
    plan_last: Vec<(u32, u32)>,
    plan_stamp: u32,
    /// Reused buffers: the undo of a plan's prefix, of a second plan, of the plan's writes
    /// past its redo writes; the blocks only a second plan writes.
    plan_undo: Vec<(BlockId, BlockData)>,
    second_undo: Vec<(BlockId, BlockData)>,
    rest_undo: Vec<(BlockId, BlockData)>,
    outside: Vec<(BlockId, BlockData)>,
    /// Torn writes: the longest service time of a write; the torn (or cut-short GPF) state
    /// being checked, for the violation report.
    max_service: Cycle,
    gpf_cut: Option<super::gpf::GpfCut<'a>>,
    torn_now: Option<String>,
    /// What this worker found, and its time ([`super::WorkerSeconds`]).
    pub(super) part: Part,
    /// The part of `following` done lazily at the current point.
    lazy: Duration,
}

impl<'a, O: Oracle> Engine<'a, O> {
    /// `sparse`: the non-zero pages of `rec.initial` (workers copy only those); `shared`: other
    /// workers run beside this one.
    pub(super) fn new(spec: &'a CrashSpec, rec: &'a Recorded, oracle: O, sparse: &Sparse, shared: bool) -> Self {
        let data_len = rec.layout.data_bytes as usize;
        let phys = GapView::new(&spec.run.cfg.startgap, &rec.layout, || sparse.copy(&rec.initial));
        let format = spec.run.protocol.log_format();
        let incremental = super::incremental::for_format(format, &rec.layout, phys.is_some());
        let logical_len = rec.layout.total_bytes() as usize;
        // Read at random places before it is written there: committed when other workers run.
        // Otherwise a page read first maps the kernel's shared zero page, and the write that
        // later replaces it interrupts every other worker to flush its TLB
        // (`hostmem::commit_zeroed`). Not `plan_last`, which only plans reach: committing its 8
        // bytes per block of the whole layout cost more at the start than it saved.
        let mut overlay_at = vec![(0, 0); data_len / 64];
        if shared {
            crate::hostmem::commit_zeroed(&mut overlay_at, (0, 0));
        }
        Engine {
            spec,
            rec,
            format,
            oracle,
            img: sparse.copy(&rec.initial[..logical_len]),
            phys,
            next_write: 0,
            data_len,
            overlay: Overlay::new(overlay_at),
            incremental,
            changed_homes: Vec::new(),
            last_plan: None,
            outside_written: true,
            reuses: 0,
            decided: 0,
            skipped: 0,
            plan_last: vec![(0, 0); logical_len / 64],
            plan_stamp: 0,
            plan_undo: Vec::new(),
            second_undo: Vec::new(),
            rest_undo: Vec::new(),
            outside: Vec::new(),
            // A pass over every write of the run: only where torn states are checked.
            max_service: if spec.atomicity < 64 { torn::max_service(&rec.record.durable.writes) } else { Cycle::ZERO },
            gpf_cut: super::gpf::for_run(spec, rec),
            torn_now: None,
            part: Part::default(),
            lazy: Duration::ZERO,
        }
    }

    /// Check crash cycle `t` (not below the previous point of this worker): its clean durable
    /// state, then below 64-byte atomicity each of its torn states ([`torn::variants`]), then
    /// the cut-short GPF's state if checked.
    pub(super) fn check_point(&mut self, t: Cycle) {
        let start = Instant::now();
        self.land_until(t);
        let (a, i) = self.oracle.advance(t);
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
        let lazy = std::mem::take(&mut self.lazy) + self.oracle.take_lazy();
        self.part.following += lazy;
        self.part.at_points += followed.elapsed().saturating_sub(lazy);
    }

    /// Land every durable write up to cycle `t`.
    fn land_until(&mut self, t: Cycle) {
        let writes = &self.rec.record.durable.writes;
        if self.next_write == 0 && self.phys.is_none() && self.overlay.is_empty() {
            self.land_at_once(t);
        }
        while self.next_write < writes.len() && writes[self.next_write].durable <= t {
            if let Some(ahead) = writes.get(self.next_write + LOOK_AHEAD) {
                self.prefetch(ahead.block, &ahead.data);
            }
            let w = &writes[self.next_write];
            self.land(w.block, &w.data);
            self.next_write += 1;
        }
    }

    /// A worker's first landing (nothing laid over the image yet): the writes durable by `t`
    /// land at once, the last one to each block only (found walking them backwards), instead of
    /// one by one; the oracle hears of each data block changed once, and the incremental
    /// recoverer starts afresh. Not with Start-Gap, whose physical image keeps a list of the log
    /// lines written.
    fn land_at_once(&mut self, t: Cycle) {
        let writes = &self.rec.record.durable.writes;
        let end = writes.partition_point(|w| w.durable <= t);
        if end == 0 {
            return;
        }
        let mut landed = vec![false; self.img.len() / 64];
        for w in writes[..end].iter().rev() {
            let b = w.block.0 as usize;
            if !std::mem::replace(&mut landed[b], true) {
                self.img[w.block.range()].copy_from_slice(&w.data);
                self.oracle.img_changed(b);
            }
        }
        if let Some(inc) = &mut self.incremental {
            inc.forget(&self.rec.layout);
        }
        self.outside_written = true;
        self.next_write = end;
    }

    /// Host cache hint: start loading what landing `data` at block `b` touches. No effect on
    /// results.
    #[inline]
    fn prefetch(&self, b: BlockId, data: &BlockData) {
        let i = b.0 as usize;
        if let Some(x) = self.img.get(i * 64) {
            crate::hostmem::prefetch(x);
        }
        self.oracle.prefetch(i);
        self.overlay.prefetch(i);
        if let Some(inc) = &self.incremental {
            inc.prefetch(b, data);
        }
    }

    /// A block write becomes durable: in the physical image with Start-Gap; for a block under
    /// the overlay, in the overlay's record of the durable content (its first entry for the
    /// block, which taking the overlay away restores last); else in `img`.
    fn land(&mut self, b: BlockId, data: &BlockData) {
        let layout = &self.rec.layout;
        self.outside_written |= !layout.is_data(b);
        match &mut self.phys {
            Some(view) if view.holds(b) => view.land(b, data),
            _ => match self.overlay.durable_mut(b) {
                Some(d) => *d = *data,
                None => self.set_img(b, data),
            },
        }
        if let Some(inc) = &mut self.incremental {
            inc.land(layout, b, &self.img);
        }
    }

    /// A block of the durable image: physical with Start-Gap, the overlay's record for a block
    /// under the overlay, else `img`'s.
    fn durable_block(&self, b: BlockId) -> BlockData {
        match &self.phys {
            Some(view) if view.holds(b) => view.block(b),
            _ => match self.overlay.durable(b) {
                Some(d) => *d,
                None => read_block(&self.img, b),
            },
        }
    }

    /// Write a block of `img`, telling the oracle.
    #[inline]
    fn set_img(&mut self, b: BlockId, data: &BlockData) {
        let at: &mut BlockData = (&mut self.img[b.range()]).try_into().expect("a whole block");
        *at = *data;
        self.oracle.img_changed(b.0 as usize);
    }

    /// Check each torn state of crash point `t` ([`torn::variants`]) like the clean one.
    fn check_torn(&mut self, t: Cycle, a: u64, i: u64) {
        let writes = &self.rec.record.durable.writes;
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
    /// state: land its blocks in the durable image, [`Engine::check_state`], land the clean
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

    /// Check the durable image as it stands (A(t) = `a`, I(t) = `i`) and record a violation.
    fn check_state(&mut self, t: Cycle, a: u64, i: u64) {
        if let Err((kind, detail)) = self.recover_and_judge(t, a, i) {
            self.violation(kind, t, a, i, detail);
        }
    }

    /// Recover the durable image, judge the recovered one, and check a crash during recovery.
    fn recover_and_judge(&mut self, t: Cycle, a: u64, i: u64) -> Result<(), (ViolationKind, String)> {
        if let Some(view) = &mut self.phys {
            view.refresh(&self.rec.layout, &mut self.img).map_err(|e| (ViolationKind::RecoveryError, e))?;
        }
        let laid = self.lay().map_err(|e| (ViolationKind::RecoveryError, e))?;
        let verdict = self.judge(t, a, i, &laid);
        self.last_plan = if laid.tracked { None } else { laid.plan };
        verdict
    }

    /// The recovery plan of the durable image, its redo writes laid over the data area of `img`
    /// (the overlay: `img`'s data area is then the recovered one, and durable writes to blocks
    /// under it go to the overlay's record of the durable content, [`Engine::land`]): through
    /// the format's incremental recoverer where it follows the image, else [`Engine::lay_whole`].
    fn lay(&mut self) -> Result<Laid, String> {
        let Some(mut inc) = self.incremental.take() else { return self.lay_whole() };
        let mut changed = std::mem::take(&mut self.changed_homes);
        let laid = match inc.recover(&self.rec.layout, &self.img, &self.overlay, &mut changed) {
            None => None,
            Some(Recovered::Plan(plan, guard)) => {
                Some(self.lay_recovered(plan, guard, self.format).map(|p| Laid::of(p, &self.rec.layout)))
            }
            Some(Recovered::Homes { whole, redo, writes }) => {
                if let Some(w) = &whole {
                    self.overlay_off();
                    self.overlay_on(w);
                }
                let start = Instant::now();
                for &(home, from) in &changed {
                    let data = from.map(|f| read_block(&self.img, f));
                    self.overlay_set(home, data);
                }
                self.lazy += start.elapsed();
                inc.check_laid(&self.rec.layout, &self.img, &self.overlay, redo);
                Some(Ok(Laid { plan: whole, redo, writes, tracked: true }))
            }
        };
        changed.clear();
        self.changed_homes = changed;
        self.incremental = Some(inc);
        laid.unwrap_or_else(|| self.lay_whole())
    }

    /// The last plan when it is still the plan ([`super::reuse_plan`]: recovery of a log format
    /// that reads no block of the data area, [`recovery::reads_data_area`], may run with the
    /// overlay in place, and when every durable write since the last plan landed in the data
    /// area the last plan is the plan and its overlay stays: the cost of such a point does not
    /// depend on the plan's length), else a whole recovery laid in place of the last.
    fn lay_whole(&mut self) -> Result<Laid, String> {
        let (format, layout) = (self.format, &self.rec.layout);
        if let Some(plan) =
            super::reuse_plan(&mut self.last_plan, self.outside_written, &mut self.reuses, format, layout, &self.img)
        {
            return Ok(Laid::of(plan, layout));
        }
        self.outside_written = false;
        if recovery::reads_data_area(format) {
            self.overlay_off();
        }
        let plan = recovery::recover(format, layout, &self.img);
        self.overlay_off();
        match plan {
            Ok(plan) => {
                self.overlay_on(&plan);
                Ok(Laid::of(plan, &self.rec.layout))
            }
            Err(e) => {
                self.outside_written = true;
                Err(e)
            }
        }
    }

    /// Judge the recovered image (the oracle's rule and the structural verifiers, and under
    /// [`Oracle::RECOVERS_RECOVERED`] first a second recovery of it), then check a crash
    /// during recovery after a random prefix of the plan's writes. A prefix of redo writes
    /// alone leaves every block recovery reads as it was (when it reads no data block), so
    /// recovering again makes the same plan and ends where the first recovery did: that
    /// crash, and under [`Oracle::RECOVERS_RECOVERED`] the crash after the whole plan, are
    /// decided, and still checked on the 1st, 8th, 64th, ... such point.
    fn judge(&mut self, t: Cycle, a: u64, i: u64, laid: &Laid) -> Result<(), (ViolationKind, String)> {
        let cut = Rng::derive(self.spec.run.seed ^ 0x1DE0, t.get()).below(laid.writes as u64 + 1) as usize;
        let again = O::RECOVERS_RECOVERED && !laid.tracked;
        match (again, &laid.plan) {
            (true, Some(plan)) => self.judge_with_log_writes(t, a, i, plan, laid.redo)?,
            _ => self.oracle.judge(&self.img[..self.data_len], t, a, i)?,
        }
        let reads = recovery::reads_data_area(self.format);
        let decided = ((cut <= laid.redo && !reads) || (again && cut == laid.writes)) && {
            self.decided += 1;
            !guard_due(self.decided, 3)
        };
        if decided {
            return Ok(());
        }
        let whole;
        let plan = match &laid.plan {
            Some(plan) => plan,
            None => {
                whole = recovery::recover(self.format, &self.rec.layout, &self.img)
                    .expect("crash checker: an incremental recoverer follows an image recovery rejects");
                &whole
            }
        };
        self.crash_during_recovery(plan, cut, laid.redo).map_err(|e| (ViolationKind::Idempotence, e))
    }

    /// The recovered image whole: `plan`'s writes past its `redo` redo writes (the log's) laid
    /// too, a second recovery of it must write nothing new, then the oracle judges its data
    /// area; the log writes are taken back.
    fn judge_with_log_writes(
        &mut self,
        t: Cycle,
        a: u64,
        i: u64,
        plan: &Plan,
        redo: usize,
    ) -> Result<(), (ViolationKind, String)> {
        let mut undo = std::mem::take(&mut self.rest_undo);
        for (b, d) in &plan.writes[redo..] {
            undo.push((*b, read_block(&self.img, *b)));
            self.set_img(*b, d);
        }
        let verdict =
            self.recover_recovered(plan).and_then(|()| self.oracle.judge(&self.img[..self.data_len], t, a, i));
        for (b, d) in undo.iter().rev() {
            self.set_img(*b, d);
        }
        undo.clear();
        self.rest_undo = undo;
        verdict
    }

    /// A second recovery of the recovered image (`img` with all of `plan` laid) must write
    /// nothing new. Skipped when the plan writes only data blocks under a format whose
    /// recovery reads none (it reads the same log area, so it makes the same plan, and laying
    /// it again changes nothing), but on the 1st, 8th, 64th, ... such point.
    fn recover_recovered(&mut self, plan: &Plan) -> Result<(), (ViolationKind, String)> {
        let layout = &self.rec.layout;
        let same = !recovery::reads_data_area(self.format) && plan.writes.iter().all(|(b, _)| layout.is_data(*b)) && {
            self.skipped += 1;
            !guard_due(self.skipped, 3)
        };
        if same {
            return Ok(());
        }
        match self.recover_other() {
            Err(e) => Err((ViolationKind::Idempotence, format!("a second recovery of the recovered image fails: {e}"))),
            Ok(again) => match again.writes.iter().find(|(b, d)| self.img[b.range()] != d[..]) {
                Some((b, _)) => {
                    Err((ViolationKind::Idempotence, format!("a second recovery changes block {} again", b.0)))
                }
                None => Ok(()),
            },
        }
    }

    /// Recovery of `img` as it stands, an image the incremental recoverer has not heard of.
    fn recover_other(&mut self) -> Result<Plan, String> {
        match &mut self.incremental {
            Some(inc) => inc.recover_other(&self.rec.layout, &self.img),
            None => recovery::recover(self.format, &self.rec.layout, &self.img),
        }
    }

    /// A crash during recovery after the first `cut` of `plan`'s writes (`redo` of them are
    /// redo writes), recovered again, must end where the whole plan did: through the
    /// incremental recoverer where it can tell ([`IncrementalRecovery::same_again`]), else
    /// the whole way from the durable image D (the overlay taken away and laid again after).
    fn crash_during_recovery(&mut self, plan: &Plan, cut: usize, redo: usize) -> Result<(), String> {
        if let Some(inc) = &mut self.incremental {
            if inc.same_again(&self.rec.layout, &self.img, plan, (cut, redo), &self.overlay) {
                return Ok(());
            }
        }
        self.overlay_off();
        let mut undo = Undo(std::mem::take(&mut self.plan_undo));
        undo.apply(&mut self.img, &plan.writes[..cut]);
        let verdict = self.recover_again(plan, cut);
        undo.rollback(&mut self.img);
        self.plan_undo = undo.0;
        self.overlay_on(plan);
        verdict
    }

    /// `img` (the durable image D with the first `cut` writes of `plan` applied) recovered
    /// again must end where an uninterrupted recovery did: each block `plan` writes holds its
    /// last write there, every other block the second recovery writes D's content (blocks
    /// outside the first plan are untouched by its prefix). The last write per block is found
    /// through `plan_last`, so this costs the two plans' lengths. `img` is as it was on return.
    fn recover_again(&mut self, plan: &Plan, cut: usize) -> Result<(), String> {
        let n = plan.writes.len();
        self.plan_stamp = self.plan_stamp.wrapping_add(1);
        if self.plan_stamp == 0 {
            self.plan_last.fill((0, 0));
            self.plan_stamp = 1;
        }
        let stamp = self.plan_stamp;
        for (j, (b, _)) in plan.writes.iter().enumerate() {
            self.plan_last[b.0 as usize] = (stamp, j as u32);
        }
        let second = match self.recover_other() {
            Err(e) => return Err(format!("second recovery after a crash at recovery write {cut} of {n} failed: {e}")),
            Ok(p) => p,
        };
        // Blocks only the second plan writes must keep D's content: read it first.
        let mut outside = std::mem::take(&mut self.outside);
        outside.extend(
            second
                .writes
                .iter()
                .filter(|(b, _)| self.plan_last[b.0 as usize].0 != stamp)
                .map(|(b, _)| (*b, read_block(&self.img, *b))),
        );
        let mut undo = Undo(std::mem::take(&mut self.second_undo));
        undo.apply(&mut self.img, &second.writes);
        let img = &self.img;
        let expected = |b: &BlockId| &plan.writes[self.plan_last[b.0 as usize].1 as usize].1;
        let mut wrong_in_plan =
            plan.writes.iter().map(|(b, _)| *b).filter(|b| !same_block(&img[b.range()], expected(b)));
        let wrong = match O::NAMES_LOWEST_BLOCK {
            true => wrong_in_plan.min_by_key(|b| b.0),
            false => wrong_in_plan.next(),
        };
        let wrong = wrong.or_else(|| outside.iter().find(|(b, d)| !same_block(&img[b.range()], d)).map(|(b, _)| *b));
        let verdict = wrong.map_or(Ok(()), |b| {
            Err(format!(
                "after a crash at recovery write {cut} of {n}, recovering again leaves block {} different",
                b.0
            ))
        });
        undo.rollback(&mut self.img);
        self.second_undo = undo.0;
        outside.clear();
        self.outside = outside;
        verdict
    }

    fn violation(&mut self, kind: ViolationKind, t: Cycle, a: u64, i: u64, detail: String) {
        self.part.violations += 1;
        *self.part.by_kind.entry(kind).or_default() += 1;
        if self.part.first.is_some() {
            return;
        }
        let recovered = self.recovered_afresh();
        let (closest_k, first_diff_addr, differing_blocks) = self.oracle.closest(&recovered, a, i);
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

    /// For a violation's report (once per worker): the data area a whole recovery of the
    /// durable image makes (the durable image's own if recovery fails). The overlay is taken
    /// away for it and laid back as it was.
    fn recovered_afresh(&mut self) -> Vec<u8> {
        let laid: Vec<(BlockId, BlockData)> = self.overlay.blocks().map(|b| (b, read_block(&self.img, b))).collect();
        self.overlay_off();
        let layout = &self.rec.layout;
        let plan = recovery::recover(self.format, layout, &self.img).unwrap_or_default();
        let mut data = self.img[..self.data_len].to_vec();
        for (b, d) in plan.writes.iter().filter(|(b, _)| layout.is_data(*b)) {
            data[b.range()].copy_from_slice(d);
        }
        for (b, d) in laid {
            self.overlay_set(b, Some(d));
        }
        data
    }
}

impl<O: Oracle> Overlaid for Engine<'_, O> {
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
        Engine::set_img(self, b, data)
    }
    fn layout(&self) -> &crate::pmem::Layout {
        &self.rec.layout
    }
}

#[cfg(test)]
mod tests {
    use super::super::concurrent::History;
    use super::super::dispatch::{candidate_cycles, check_recorded, estimate_line};
    use super::super::oracle::{closure::Closure, prefix::Prefix};
    use super::*;
    use crate::config::Config;
    use crate::protocol::{Bug, ProtocolKind};
    use crate::runner::{execute, RunSpec};
    use crate::types::{blocks_of, Addr};
    use crate::workload::WorkloadKind;
    use std::collections::BTreeMap;

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

    /// The violations of one point, by kind, with `prefix` counted as `closure`.
    fn found_at(
        now: &BTreeMap<ViolationKind, u64>,
        before: &BTreeMap<ViolationKind, u64>,
    ) -> BTreeMap<ViolationKind, u64> {
        let as_closure = |k: ViolationKind| if k == ViolationKind::Prefix { ViolationKind::Closure } else { k };
        now.iter()
            .map(|(k, n)| (as_closure(*k), n - before.get(k).copied().unwrap_or(0)))
            .filter(|&(_, n)| n > 0)
            .collect()
    }

    /// With one core every closed set of transactions is a prefix (docs/model.md section 5):
    /// the engine with the closure oracle finds, at every candidate crash point of a one-core
    /// run, a `closure` violation exactly where the prefix oracle finds a `prefix` one, and the
    /// same other violations. Over a sound run and runs with an injected bug, through a whole
    /// recovery (H-WAL) and each incremental recoverer (Kiln's tracker, HOOP's scan cache).
    #[test]
    fn with_one_core_the_closure_oracle_finds_what_the_prefix_oracle_finds() {
        let cases = [
            (ProtocolKind::HWal, None),
            (ProtocolKind::HWal, Some(Bug::AckBeforeDurable)),
            (ProtocolKind::Kiln, Some(Bug::AckBeforeDurable)),
            (ProtocolKind::Hoop, Some(Bug::CommitBeforeLog)),
        ];
        for (protocol, bug) in cases {
            let run = RunSpec {
                cfg: Config::default(),
                workload: WorkloadKind::Sps,
                protocol,
                txs: 200,
                warmup_txs: 0,
                seed: 5,
                abort_rate: 0.0,
                bug,
                record: true,
                tape: false,
                prefault: false,
            };
            let spec = CrashSpec::new(run.clone(), 0);
            let rec = execute(&run).unwrap().recorded.unwrap();
            let sparse = Sparse::of(&rec.initial);
            let verifier = run.workload.build(&run.cfg.workload);
            let h = History::new(&rec.oracle, &rec.record, &rec.initial[..rec.layout.data_bytes as usize]);
            let prefix = Prefix::new(&spec, &rec, &verifier, &sparse, false);
            let mut by_prefix = Engine::new(&spec, &rec, prefix, &sparse, false);
            let closure = Closure::new(&spec, &rec, &h, &verifier, &sparse);
            let mut by_closure = Engine::new(&spec, &rec, closure, &sparse, false);
            let mut points_found = 0;
            for t in candidate_cycles(&rec) {
                let before = (by_prefix.part.by_kind.clone(), by_closure.part.by_kind.clone());
                by_prefix.check_point(t);
                by_closure.check_point(t);
                let found = found_at(&by_prefix.part.by_kind, &before.0);
                assert_eq!(found, found_at(&by_closure.part.by_kind, &before.1), "{protocol:?}, {bug:?}, at {t}");
                points_found += usize::from(!found.is_empty());
            }
            assert_eq!(points_found > 0, bug.is_some(), "{protocol:?}, {bug:?}: {points_found} points violate");
        }
    }
}
