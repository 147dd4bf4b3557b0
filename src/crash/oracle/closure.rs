//! The N-core oracle: the recovered data area must be the image of a set of transactions
//! closed under each core's order and dependence that holds every acknowledged one
//! ([`crate::crash::concurrent`], docs/multicore.md, "The oracle for concurrent histories").

use super::Oracle;
use crate::crash::concurrent::{self, History};
use crate::crash::{CrashSpec, ViolationKind};
use crate::hostmem::Sparse;
use crate::runner::Recorded;
use crate::types::{BlockData, Cycle};
use crate::workload::follow::Follow;
use crate::workload::Workload;

/// The closure oracle of one worker: the image of its base (the closure of the transactions
/// acknowledged so far, which only grows) and the running set of lines where the engine's data
/// area differs from it, which is all the fixpoint above the base needs to look at.
pub(in crate::crash) struct Closure<'a> {
    spec: &'a CrashSpec,
    rec: &'a Recorded,
    h: &'a History,
    verifier: &'a Workload,
    closure: concurrent::Closure,
    /// The data area of the base's image.
    base: Vec<u8>,
    data_len: usize,
    /// The running set of data lines where the image and `base` differ (`diff`, and each
    /// line's place there plus one, 0 when out), as of the last [`Closure::settle`]; the lines
    /// changed since, to compare again (each once: `queued`).
    diff: Vec<u32>,
    diff_at: Vec<u32>,
    unsettled: Vec<u32>,
    queued: Vec<bool>,
    /// `diff` in line order, handed to the fixpoint.
    sorted: Vec<u32>,
    /// The workload's incremental verifier, where it has one (and no caller's own check is
    /// given, which needs whole images), the data area it last saw, and the lines of the image
    /// changed since (each once: `seen`).
    follower: Option<Box<dyn Follow>>,
    followed: Vec<u8>,
    unseen: Vec<u32>,
    seen: Vec<bool>,
}

impl<'a> Closure<'a> {
    /// A worker's oracle over `h` (the history of `rec`, indexed once for every worker);
    /// `sparse` lists the pages of `rec.initial` that are not all zero.
    pub(in crate::crash) fn new(
        spec: &'a CrashSpec,
        rec: &'a Recorded,
        h: &'a History,
        verifier: &'a Workload,
        sparse: &Sparse,
    ) -> Closure<'a> {
        let data_len = rec.layout.data_bytes as usize;
        let lines = data_len / 64;
        let mut oracle = Closure {
            spec,
            rec,
            h,
            verifier,
            closure: concurrent::Closure::new(h),
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
        };
        if spec.verify.is_none() {
            if let Some(mut f) = verifier.follower() {
                let initial = &rec.initial[..data_len];
                f.reset(initial);
                oracle.followed = sparse.copy(initial);
                oracle.seen = vec![false; lines];
                oracle.follower = Some(f);
            }
        }
        oracle
    }

    /// Data line `b` of `base` or of the image changed: compare it again before the next look
    /// at the difference.
    #[inline]
    fn requeue(&mut self, b: usize) {
        if let Some(q) = self.queued.get_mut(b) {
            if !std::mem::replace(q, true) {
                self.unsettled.push(b as u32);
            }
        }
    }

    /// Compare the queued lines, bringing the running difference up to date, and lay it out
    /// in line order in `sorted` (the fixpoint's answer is the same for any order; its message
    /// names lines in the order it is given them, so the order is fixed).
    fn settle(&mut self, img: &[u8]) {
        let mut queued = std::mem::take(&mut self.unsettled);
        for &b in &queued {
            let b = b as usize;
            self.queued[b] = false;
            let r = b * 64..b * 64 + 64;
            let now = img[r.clone()] != self.base[r];
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

    /// The structural verdict on the recovered data area `data`: through the follower, told
    /// of the lines that changed since it last looked, else the whole verifier. A broken
    /// verdict takes its message from the whole verifier.
    fn structure(&mut self, data: &[u8]) -> Result<(), String> {
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
}

impl Oracle for Closure<'_> {
    const RECOVERS_RECOVERED: bool = true;
    const NAMES_LOWEST_BLOCK: bool = true;

    /// Line `b` of the image changed: the running difference and the follower hear of it.
    #[inline]
    fn img_changed(&mut self, b: usize) {
        self.requeue(b);
        if let Some(s) = self.seen.get_mut(b) {
            if !std::mem::replace(s, true) {
                self.unseen.push(b as u32);
            }
        }
    }

    /// Every transaction acknowledged by `t` joins the base, closed, and is applied to its
    /// image.
    fn advance(&mut self, t: Cycle) -> (u64, u64) {
        let (a, i) = self.closure.advance(self.h, t);
        for j in 0..self.closure.joined().len() {
            let k = self.closure.joined()[j] as usize;
            self.rec.oracle.apply_tx(k, &mut self.base);
            for b in self.rec.oracle.tx_blocks(k) {
                self.requeue(b);
            }
        }
        (a, i)
    }

    /// The closure rule, then the structural verdicts.
    fn judge(&mut self, img: &[u8], t: Cycle, _a: u64, _i: u64) -> Result<(), (ViolationKind, String)> {
        let data = &img[..self.data_len];
        self.settle(data);
        self.closure.settle(self.h, t, data, &self.sorted).map_err(|f| (ViolationKind::Closure, f.to_string()))?;
        self.structure(data).map_err(|e| (ViolationKind::Structure, e))?;
        if let Some(v) = &self.spec.verify {
            (v.0)(data).map_err(|e| (ViolationKind::Structure, e))?;
        }
        Ok(())
    }

    /// The set the fixpoint came closest with: the base and [`concurrent::Closure::added`].
    fn closest(&self, recovered: &[u8], _a: u64, _i: u64) -> (u64, Option<u64>, u64) {
        let mut closest = self.base.clone();
        for &k in self.closure.added() {
            self.rec.oracle.apply_tx(k as usize, &mut closest);
        }
        let (first, n) = crate::crash::difference(recovered, &closest);
        ((self.closure.base_len() + self.closure.added().len()) as u64, first, n)
    }
}
