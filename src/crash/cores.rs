//! The crash sweep on more than one core: at each crash point, the durable image, recovery,
//! then the oracle for concurrent histories ([`super::concurrent`]), the workload's structural
//! verifier on the whole recovered data area, and a second recovery (docs/multicore.md, "The
//! oracle for concurrent histories").
//!
//! A worker walks its points in time order with one running durable image and one image of the
//! oracle's base (the closure of the acknowledged transactions), so the work at a point grows
//! with the lines the run has written so far, not with the memory. The recovery plan is
//! applied to the running image and undone after the point.

use super::concurrent::{Closure, History};
use super::sweep::{CrashSpec, Part};
use crate::log::head::LogFormat;
use crate::recovery;
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
    /// The durable image at the current point (whole layout) and the next write to land.
    img: Vec<u8>,
    next_write: usize,
    /// The data area of the base's image.
    base: Vec<u8>,
    /// Data lines written by a durable write or by a base transaction so far (the only lines
    /// where the recovered area and the base's image can differ, with the plan's).
    touched: Vec<u32>,
    mark: Vec<bool>,
    data_len: usize,
    /// The workload's incremental verifier, where it has one (and no caller's own check is
    /// given, which needs whole images), and the data area it last saw.
    follower: Option<Box<dyn Follow>>,
    followed: Vec<u8>,
    pub(super) part: Part,
}

impl<'a> CoreSweep<'a> {
    pub(super) fn new(spec: &'a CrashSpec, rec: &'a Recorded, h: &'a History, verifier: &'a Workload) -> Self {
        let data_len = rec.layout.data_bytes as usize;
        CoreSweep {
            spec,
            rec,
            h,
            verifier,
            closure: Closure::new(h),
            img: rec.initial.clone(),
            next_write: 0,
            base: rec.initial[..data_len].to_vec(),
            touched: Vec::new(),
            mark: vec![false; data_len / 64],
            data_len,
            follower: None,
            followed: Vec::new(),
            part: Part::default(),
        }
        .with_follower()
    }

    fn with_follower(mut self) -> Self {
        if self.spec.verify.is_none() {
            if let Some(mut f) = self.verifier.follower() {
                let initial = &self.rec.initial[..self.data_len];
                f.reset(initial);
                self.followed = initial.to_vec();
                self.follower = Some(f);
            }
        }
        self
    }

    /// The structural verdict on the recovered data area `img[..data_len]`: through the
    /// follower, told of the lines that changed since it last looked (only lines in `touched`
    /// can differ from the initial area), else the whole verifier. A broken verdict takes its
    /// message from the whole verifier.
    fn structure(&mut self) -> Result<(), String> {
        let data = &self.img[..self.data_len];
        let Some(f) = &mut self.follower else {
            return self.verifier.verify(data);
        };
        let mut old = Vec::new();
        for &b in &self.touched {
            let r = b as usize * 64..b as usize * 64 + 64;
            if self.followed[r.clone()] != data[r.clone()] {
                old.push((b as usize, <BlockData>::try_from(&self.followed[r.clone()]).expect("a block")));
                self.followed[r.clone()].copy_from_slice(&data[r]);
            }
        }
        if f.changed(data, &old) {
            return Ok(());
        }
        match self.verifier.verify(data) {
            Err(e) => Err(e),
            Ok(()) => Err("the incremental verifier finds the image broken, the whole verifier does not".into()),
        }
    }

    fn touch(&mut self, b: usize) {
        if b < self.mark.len() && !std::mem::replace(&mut self.mark[b], true) {
            self.touched.push(b as u32);
        }
    }

    /// Check crash cycle `t` (not below the previous point of this worker).
    pub(super) fn check_point(&mut self, t: Cycle) {
        let start = Instant::now();
        let writes = &self.rec.record.durable.writes;
        while let Some(w) = writes.get(self.next_write).filter(|w| w.durable <= t) {
            self.img[w.block.range()].copy_from_slice(&w.data);
            self.next_write += 1;
            self.touch(w.block.0 as usize);
        }
        let (a, i) = self.closure.advance(self.h, t);
        for j in 0..self.closure.joined().len() {
            let k = self.closure.joined()[j] as usize;
            self.rec.oracle.apply_tx(k, &mut self.base);
            let blocks: Vec<usize> = self.rec.oracle.tx_blocks(k).collect();
            for b in blocks {
                self.touch(b);
            }
        }
        self.part.following += start.elapsed();
        let start = Instant::now();
        let verdict = self.judge(t);
        self.part.at_points += start.elapsed();
        if let Err((kind, detail)) = verdict {
            self.part.violations += 1;
            *self.part.by_kind.entry(kind.to_string()).or_default() += 1;
            if self.part.first.is_none() {
                self.part.first = Some(super::Violation {
                    kind: kind.into(),
                    seed: self.spec.run.seed,
                    crash_cycle: t,
                    acked: a,
                    issued: i,
                    closest_k: (self.closure.base_len() + self.closure.added().len()) as u64,
                    first_diff_addr: None,
                    differing_blocks: 0,
                    detail,
                    replay: format!("{} --crash-at {t}", self.spec.replay_base),
                    torn: None,
                });
            }
        }
    }

    /// Recover the durable image, check it, and put the image back.
    fn judge(&mut self, t: Cycle) -> Result<(), (&'static str, String)> {
        let format = self.spec.run.protocol.log_format();
        let plan = recovery::recover(format, &self.rec.layout, &self.img).map_err(|e| ("recovery-error", e))?;
        let undo: Vec<(BlockId, BlockData)> =
            plan.writes.iter().map(|(b, _)| (*b, self.img[b.range()].try_into().expect("a block"))).collect();
        for (b, _) in &plan.writes {
            // A data line the plan writes may differ from the base's image from now on.
            self.touch(b.0 as usize);
        }
        recovery::apply(&mut self.img, &plan.writes);
        let verdict = self.check_recovered(t, format);
        for (b, d) in undo.iter().rev() {
            self.img[b.range()].copy_from_slice(d);
        }
        verdict
    }

    /// The checks on the recovered image (`img` has the plan applied): a second recovery
    /// writes nothing new; the data area is the image of a valid set; it is well formed.
    fn check_recovered(&mut self, t: Cycle, format: Option<LogFormat>) -> Result<(), (&'static str, String)> {
        match recovery::recover(format, &self.rec.layout, &self.img) {
            Err(e) => return Err(("idempotence", format!("a second recovery of the recovered image fails: {e}"))),
            Ok(again) => {
                if let Some((b, _)) = again.writes.iter().find(|(b, d)| self.img[b.range()] != d[..]) {
                    return Err(("idempotence", format!("a second recovery changes block {} again", b.0)));
                }
            }
        }
        let (img, base) = (&self.img, &self.base);
        let differing: Vec<u32> = self
            .touched
            .iter()
            .copied()
            .filter(|&b| {
                let r = b as usize * 64..b as usize * 64 + 64;
                img[r.clone()] != base[r]
            })
            .collect();
        self.closure
            .settle(self.h, t, &self.img[..self.data_len], &differing)
            .map_err(|f| ("closure", f.to_string()))?;
        self.structure().map_err(|e| ("structure", e))?;
        if let Some(v) = &self.spec.verify {
            (v.0)(&self.img[..self.data_len]).map_err(|e| ("structure", e))?;
        }
        Ok(())
    }
}
