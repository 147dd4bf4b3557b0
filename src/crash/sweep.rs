//! The sweep over crash points; see the module documentation of [`crate::crash`].

use crate::recovery::{self, Plan};
use crate::rng::Rng;
use crate::runner::{execute, Recorded, RunSpec, GIT_REV, VERSION};
use crate::startgap::Geometry;
use crate::types::{blocks_of, Addr, BlockData, BlockId, Cycle};

/// Every this many comparisons, the checker also compares the whole data area and asserts that
/// the touched-block comparison agrees (a guard on its own bookkeeping).
const FULL_COMPARE_EVERY: u64 = 64;
use serde::Serialize;
use std::time::Instant;

/// What to check.
#[derive(Clone, Debug)]
pub struct CrashSpec {
    pub run: RunSpec,
    /// Number of crash points to draw (ignored with `exhaustive` or `crash_at`).
    pub crashes: u64,
    pub exhaustive: bool,
    /// Check exactly this crash cycle (replay of a reported violation).
    pub crash_at: Option<Cycle>,
    /// The command line that reproduces the run, without crash-point options.
    pub replay_base: String,
}

/// One violation, with what is needed to replay it.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// `prefix`, `structure`, `idempotence` or `recovery-error`.
    pub kind: String,
    pub seed: u64,
    pub crash_cycle: Cycle,
    /// A(t): transactions acknowledged durable at the crash.
    pub acked: u64,
    /// I(t): transactions whose commit had been called.
    pub issued: u64,
    /// The k in A..=I whose S_k differs from the recovered image in the fewest blocks.
    pub closest_k: u64,
    /// First byte address where the recovered data area differs from S_closest_k.
    pub first_diff_addr: Option<u64>,
    pub differing_blocks: u64,
    pub detail: String,
    pub replay: String,
}

/// The result of `locsim crashtest`.
#[derive(Clone, Debug, Serialize)]
pub struct CrashReport {
    pub workload: String,
    pub protocol: String,
    pub inject_bug: Option<String>,
    pub seed: u64,
    pub txs_committed: u64,
    pub durable_writes: u64,
    /// Distinct durable images during the run (one more than the distinct durability cycles).
    pub durable_states: u64,
    /// Crash cycles worth checking: the first and the last cycle of each durable state.
    pub candidate_crash_cycles: u64,
    pub crash_points: u64,
    pub violations: u64,
    pub violations_by_kind: std::collections::BTreeMap<String, u64>,
    pub first_violation: Option<Violation>,
    pub states_per_second: f64,
    pub check_seconds: f64,
    pub version: &'static str,
    pub git_rev: &'static str,
    pub config_hash: String,
}

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

/// Every distinct crash cycle: for each durable state, its first and last cycle.
fn candidate_cycles(rec: &Recorded) -> Vec<Cycle> {
    let w = &rec.record.durable.writes;
    let mut times: Vec<Cycle> = w.iter().map(|x| x.durable).collect();
    times.dedup();
    let end = rec.end_cycle.max(times.last().copied().unwrap_or(0)) + 1;
    let mut c = Vec::with_capacity(2 * times.len() + 2);
    c.push(0);
    for (i, &d) in times.iter().enumerate() {
        if i == 0 && d > 0 {
            c.push(d - 1);
        }
        c.push(d);
        let next = times.get(i + 1).copied().unwrap_or(end + 1);
        if next - 1 > d {
            c.push(next - 1);
        }
    }
    // The end of the run: every transaction issued and acknowledged, every write durable.
    c.push(end);
    c.sort_unstable();
    c.dedup();
    c
}

fn durable_states(rec: &Recorded) -> u64 {
    let w = &rec.record.durable.writes;
    1 + w.windows(2).filter(|p| p[0].durable != p[1].durable).count() as u64 + u64::from(!w.is_empty())
}

fn choose_points(spec: &CrashSpec, cands: &[Cycle]) -> Vec<Cycle> {
    if let Some(t) = spec.crash_at {
        return vec![t];
    }
    if spec.exhaustive || spec.crashes as usize >= cands.len() {
        return cands.to_vec();
    }
    let mut idx: Vec<usize> = (0..cands.len()).collect();
    let mut rng = Rng::derive(spec.run.seed, 0xC4A5);
    let n = spec.crashes as usize;
    for i in 0..n {
        let j = i + rng.below((idx.len() - i) as u64) as usize;
        idx.swap(i, j);
    }
    let mut pts: Vec<Cycle> = idx[..n].iter().map(|&i| cands[i]).collect();
    pts.sort_unstable();
    pts
}

/// Run the workload with recording and check every chosen crash point.
pub fn check(spec: &CrashSpec) -> Result<CrashReport, String> {
    let mut run = spec.run.clone();
    run.record = true;
    let out = execute(&run)?;
    let rec = out.recorded.expect("recording was on");
    let cands = candidate_cycles(&rec);
    let points = choose_points(spec, &cands);
    let started = Instant::now();
    let mut sweep = Sweep::new(spec, &rec);
    for &t in &points {
        sweep.check_point(t);
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(CrashReport {
        workload: run.workload.name().into(),
        protocol: run.protocol.name().into(),
        inject_bug: run.bug.map(|b| b.name().to_string()),
        seed: run.seed,
        txs_committed: rec.oracle.txs() as u64,
        durable_writes: rec.record.durable.writes.len() as u64,
        durable_states: durable_states(&rec),
        candidate_crash_cycles: cands.len() as u64,
        crash_points: points.len() as u64,
        violations: sweep.violations,
        violations_by_kind: sweep.by_kind,
        first_violation: sweep.first,
        states_per_second: points.len() as f64 / secs.max(1e-9),
        check_seconds: secs,
        version: VERSION,
        git_rev: GIT_REV,
        config_hash: run.cfg.hash_hex(),
    })
}

/// State carried across crash points (all advanced monotonically in time).
struct Sweep<'a> {
    spec: &'a CrashSpec,
    rec: &'a Recorded,
    /// The durable image in the protocols' (logical) layout: what recovery reads.
    img: Vec<u8>,
    /// With Start-Gap: the durable physical image the writes land in, from which the log area
    /// of `img` is rebuilt ([`recovery::startgap::logical_log`]) when it has changed.
    phys: Option<(Geometry, Vec<u8>)>,
    log_stale: bool,
    /// Start-Gap: the registers the log area of `img` was built under, and the physical log
    /// blocks written since (the view is updated line by line while the registers stay).
    view_regs: Option<crate::startgap::Registers>,
    log_written: Vec<BlockId>,
    rebuilds: u64,
    next_write: usize,
    /// S_oracle_k: the data area after the first `oracle_k` committed transactions.
    oracle: Vec<u8>,
    oracle_k: usize,
    data_len: usize,
    /// Data blocks that a durable write, an oracle transaction or a recovery plan has touched:
    /// everywhere else the recovered image and every S_k equal the initial image, so only these
    /// are compared (with a full comparison every `FULL_COMPARE_EVERY` points as a cross-check).
    touched: Vec<u32>,
    is_touched: Vec<bool>,
    compares: u64,
    violations: u64,
    by_kind: std::collections::BTreeMap<String, u64>,
    first: Option<Violation>,
}

impl<'a> Sweep<'a> {
    fn new(spec: &'a CrashSpec, rec: &'a Recorded) -> Sweep<'a> {
        let data_len = rec.layout.data_bytes as usize;
        let geom = Geometry::of(&spec.run.cfg.startgap, &rec.layout);
        let logical_len = rec.layout.total_bytes() as usize;
        Sweep {
            spec,
            rec,
            img: rec.initial[..logical_len].to_vec(),
            phys: geom.map(|g| (g, rec.initial.clone())),
            log_stale: geom.is_some(),
            view_regs: None,
            log_written: Vec::new(),
            rebuilds: 0,
            next_write: 0,
            oracle: rec.initial[..data_len].to_vec(),
            oracle_k: 0,
            data_len,
            touched: Vec::new(),
            is_touched: vec![false; data_len / 64],
            compares: 0,
            violations: 0,
            by_kind: Default::default(),
            first: None,
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

    fn check_point(&mut self, t: Cycle) {
        let writes = &self.rec.record.durable.writes;
        while self.next_write < writes.len() && writes[self.next_write].durable <= t {
            let w = &writes[self.next_write];
            match &mut self.phys {
                Some((geom, phys)) if geom.holds(w.block) => {
                    phys[w.block.range()].copy_from_slice(&w.data);
                    self.log_stale = true;
                    if w.block != geom.regs_block() {
                        self.log_written.push(w.block);
                    }
                }
                _ => self.img[w.block.range()].copy_from_slice(&w.data),
            }
            self.touch(w.block);
            self.next_write += 1;
        }
        let (a, i) = self.bounds(t);
        while (self.oracle_k as u64) < a {
            self.touch_tx(self.oracle_k);
            self.rec.oracle.apply_tx(self.oracle_k, &mut self.oracle);
            self.oracle_k += 1;
        }
        if let Err(e) = self.logical_view() {
            return self.violation("recovery-error", t, a, i, e);
        }
        let proto = self.spec.run.protocol;
        let plan = match recovery::recover(proto.log_format(), &self.rec.layout, &self.img) {
            Ok(p) => p,
            Err(e) => return self.violation("recovery-error", t, a, i, e),
        };
        for (b, _) in &plan.writes {
            self.touch(*b);
        }
        let mut undo = Undo::default();
        undo.apply(&mut self.img, &plan.writes);
        let verdict = self.judge(a, i);
        undo.rollback(&mut self.img);
        let verdict = verdict.and_then(|()| self.idempotence(t, &plan).map_err(|e| ("idempotence", e)));
        if let Err((kind, detail)) = verdict {
            self.violation(kind, t, a, i, detail);
        }
    }

    /// Start-Gap: bring the log area of `self.img` up to the physical durable image, line by line
    /// (the lines written and the lines moved since the last view), else rebuilt whole; every
    /// `FULL_COMPARE_EVERY` updates a whole rebuild checks the line-by-line bookkeeping.
    fn logical_view(&mut self) -> Result<(), String> {
        let Some((geom, phys)) = &self.phys else { return Ok(()) };
        if !self.log_stale {
            return Ok(());
        }
        self.rebuilds += 1;
        let updated = self
            .view_regs
            .and_then(|r| recovery::startgap::update_logical_log(geom, &r, phys, &self.log_written, &mut self.img));
        self.view_regs = updated;
        if updated.is_some() && self.rebuilds.is_multiple_of(FULL_COMPARE_EVERY) {
            let full = recovery::startgap::logical_image(geom, phys).expect("registers decoded");
            let log =
                self.rec.layout.log_base as usize..(self.rec.layout.log_base + self.rec.layout.log_bytes) as usize;
            assert!(full[log.clone()] == self.img[log], "crash checker: start-gap view bookkeeping");
        }
        if updated.is_none() {
            self.view_regs = Some(recovery::startgap::logical_log(geom, phys, &mut self.img)?);
        }
        self.log_written.clear();
        self.log_stale = false;
        Ok(())
    }

    /// Checks on the recovered image (`self.img` has the plan applied).
    fn judge(&mut self, a: u64, i: u64) -> Result<(), (&'static str, String)> {
        if self.matching_k(a, i).is_none() {
            return Err(("prefix", format!("recovered data equals no S_k with {a} <= k <= {i}")));
        }
        self.rec.workload.verify(&self.img[..self.data_len]).map_err(|e| ("structure", e))
    }

    /// The smallest k in a..=i with recovered data == S_k.
    fn matching_k(&mut self, a: u64, i: u64) -> Option<u64> {
        for k in a..i {
            self.touch_tx(k as usize);
        }
        if self.same_data() {
            return Some(a);
        }
        let mut undo: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut found = None;
        for k in a..i {
            for (addr, bytes) in self.rec.oracle.tx_stores(k as usize) {
                let r = addr as usize..addr as usize + bytes.len();
                undo.push((addr, self.oracle[r.clone()].to_vec()));
                self.oracle[r].copy_from_slice(bytes);
            }
            if self.same_data() {
                found = Some(k + 1);
                break;
            }
        }
        for (addr, old) in undo.into_iter().rev() {
            self.oracle[addr as usize..addr as usize + old.len()].copy_from_slice(&old);
        }
        found
    }

    /// Mark a data block as possibly different from the initial image.
    #[inline]
    fn touch(&mut self, b: BlockId) {
        if let Some(t) = self.is_touched.get_mut(b.0 as usize) {
            if !*t {
                *t = true;
                self.touched.push(b.0 as u32);
            }
        }
    }

    /// Mark the blocks that committed transaction `k` stores to.
    fn touch_tx(&mut self, k: usize) {
        let rec = self.rec;
        for (addr, bytes) in rec.oracle.tx_stores(k) {
            for b in blocks_of(Addr(addr), bytes.len()) {
                self.touch(b);
            }
        }
    }

    /// Does the (recovered) data area equal the oracle's current S_k?
    fn same_data(&mut self) -> bool {
        let (img, oracle) = (&self.img[..self.data_len], &self.oracle[..]);
        let sparse = self.touched.iter().all(|&b| {
            let r = b as usize * 64..b as usize * 64 + 64;
            img[r.clone()] == oracle[r]
        });
        self.compares += 1;
        if self.compares % FULL_COMPARE_EVERY == 1 {
            assert_eq!(sparse, img == oracle, "crash checker: touched-block bookkeeping missed a difference");
        }
        sparse
    }

    /// Crash recovery after a random prefix of its writes, recover again: the result must equal
    /// the one of an uninterrupted recovery. Called with `self.img` = the durable image D.
    fn idempotence(&mut self, t: Cycle, plan: &Plan) -> Result<(), String> {
        let n = plan.writes.len();
        let cut = Rng::derive(self.spec.run.seed ^ 0x1DE0, t).below(n as u64 + 1) as usize;
        let mut undo = Undo::default();
        undo.apply(&mut self.img, &plan.writes[..cut]);
        let result = match recovery::recover(self.spec.run.protocol.log_format(), &self.rec.layout, &self.img) {
            Err(e) => Err(format!("second recovery after a crash at recovery write {cut} of {n} failed: {e}")),
            Ok(p2) => {
                // Expected final content: the last write of the first plan, else D itself
                // (blocks outside the first plan are untouched by its prefix, so read them now).
                let mut expect: Vec<(BlockId, BlockData)> = Vec::with_capacity(n + p2.writes.len());
                for (b, _) in plan.writes.iter().chain(&p2.writes) {
                    let v = match plan.writes.iter().rposition(|(x, _)| x == b) {
                        Some(j) => plan.writes[j].1,
                        None => self.img[b.range()].try_into().unwrap(),
                    };
                    expect.push((*b, v));
                }
                undo.apply(&mut self.img, &p2.writes);
                expect.iter().find(|(b, v)| self.img[b.range()] != v[..]).map_or(Ok(()), |(b, _)| {
                    Err(format!(
                        "after a crash at recovery write {cut} of {n}, recovering again leaves block {} different",
                        b.0
                    ))
                })
            }
        };
        undo.rollback(&mut self.img);
        result
    }

    fn violation(&mut self, kind: &str, t: Cycle, a: u64, i: u64, detail: String) {
        self.violations += 1;
        *self.by_kind.entry(kind.to_string()).or_default() += 1;
        if self.first.is_some() {
            return;
        }
        let (closest_k, first_diff_addr, differing_blocks) = self.closest(t, a, i);
        self.first = Some(Violation {
            kind: kind.into(),
            seed: self.spec.run.seed,
            crash_cycle: t,
            acked: a,
            issued: i,
            closest_k,
            first_diff_addr,
            differing_blocks,
            detail,
            replay: format!("{} --crash-at {t}", self.spec.replay_base),
        });
    }

    /// For the report: which S_k the recovered image is closest to, and where it differs.
    fn closest(&mut self, _t: Cycle, a: u64, i: u64) -> (u64, Option<u64>, u64) {
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
            let (mut n, mut first) = (0u64, None);
            for (bi, (x, y)) in self.img[..self.data_len].chunks(64).zip(oracle.chunks(64)).enumerate() {
                if x != y {
                    n += 1;
                    if first.is_none() {
                        let off = x.iter().zip(y).position(|(p, q)| p != q).unwrap_or(0);
                        first = Some((bi * 64 + off) as u64);
                    }
                }
            }
            if n < best.2 {
                best = (k, first, n);
            }
        }
        undo.rollback(&mut self.img);
        best
    }
}
