//! The one-core oracle: the recovered data area must equal `S_k`, the data area after the
//! first `k` committed transactions, for some `A(t) <= k <= I(t)` (docs/model.md section 5).

use super::{same_block, Oracle};
use crate::crash::{guard_due, CrashSpec, UserVerify, ViolationKind};
use crate::hostmem::Sparse;
use crate::runner::Recorded;
use crate::types::{blocks_of, Addr, BlockData, Cycle};
use crate::workload::follow::Follow;
use crate::workload::Workload;
use std::time::{Duration, Instant};

/// Flags of a data block in [`Prefix`]'s running difference: it differs between the image and
/// the oracle; it is queued to be compared again.
const DIFFERS: u8 = 1;
const QUEUED: u8 = 2;

/// The prefix oracle of one worker: `S_k` kept as an image, advanced monotonically in time.
pub(in crate::crash) struct Prefix<'a> {
    spec: &'a CrashSpec,
    rec: &'a Recorded,
    /// The workload's structural verifier (one per worker: a workload need not be `Sync`).
    verifier: &'a Workload,
    /// S_oracle_k: the data area after the first `oracle_k` committed transactions.
    oracle: Vec<u8>,
    oracle_k: usize,
    data_len: usize,
    /// The running difference between the engine's data area and `oracle`: `differs[b] &
    /// DIFFERS` says data block `b` differs, `ndiff` counts such blocks. Every write to either
    /// side (a durable write, an oracle transaction, a recovery plan and its rollback) queues
    /// the blocks it lands in (`unsettled`, flagged `QUEUED`), and each queued block is
    /// compared once before the next comparison ([`Prefix::settle`]), so "recovered data ==
    /// S_k" is `ndiff == 0`; a whole comparison at the 1st, 8th, 64th, ... comparison guards
    /// this bookkeeping.
    differs: Vec<u8>,
    unsettled: Vec<u32>,
    ndiff: usize,
    compares: u64,
    /// The structural verdict on S_k, per k, once computed. When the prefix rule holds the
    /// recovered data area equals S_k byte for byte, so the verifier's verdict depends on k
    /// alone: each distinct recovered image is verified once.
    verdicts: Vec<Option<Result<(), String>>>,
    /// The incremental verifier, where the workload has one ([`crate::workload::follow`]): it
    /// follows the oracle's own data area, hearing of the blocks changed since it last looked
    /// (`changed`: each block once, `changed_mark[b] == mark_stamp`, with its content then)
    /// whenever the oracle holds an S_k whose verdict is wanted ([`Prefix::verdict_here`]);
    /// `synced`: it has taken the oracle whole once.
    follower: Option<Box<dyn Follow>>,
    synced: bool,
    changed: Vec<(usize, BlockData)>,
    changed_mark: Vec<u32>,
    mark_stamp: u32,
    /// Verdicts the follower gave; a whole check confirms them at the 64th, 4096th, ...
    followed: u64,
    /// Reused buffers: the undo of tentative oracle transactions.
    tentative: Vec<(u64, u32, usize)>,
    tentative_bytes: Vec<u8>,
    /// Time the follower took since the engine last asked ([`Oracle::take_lazy`]).
    lazy: Duration,
}

impl<'a> Prefix<'a> {
    /// `sparse`: the non-zero pages of `rec.initial`; `shared`: other workers run beside this
    /// one (the arrays read at random places before they are written are then committed at the
    /// start, [`crate::hostmem::commit_zeroed`]).
    pub(in crate::crash) fn new(
        spec: &'a CrashSpec,
        rec: &'a Recorded,
        verifier: &'a Workload,
        sparse: &Sparse,
        shared: bool,
    ) -> Prefix<'a> {
        let data_len = rec.layout.data_bytes as usize;
        let commit = |mut v: Vec<u8>| {
            if shared {
                crate::hostmem::commit_zeroed(&mut v, 0);
            }
            v
        };
        let mut changed_mark = vec![0; data_len.div_ceil(64)];
        if shared {
            crate::hostmem::commit_zeroed(&mut changed_mark, 0);
        }
        Prefix {
            spec,
            rec,
            verifier,
            oracle: sparse.copy(&rec.initial[..data_len]),
            oracle_k: 0,
            data_len,
            differs: commit(vec![0; data_len / 64]),
            unsettled: Vec::new(),
            ndiff: 0,
            compares: 0,
            verdicts: vec![None; rec.oracle.txs() + 1],
            // A caller's own check sees whole images: no incremental verifier then.
            follower: if spec.verify.is_none() { verifier.follower() } else { None },
            synced: false,
            changed: Vec::new(),
            changed_mark,
            mark_stamp: 1,
            followed: 0,
            tentative: Vec::new(),
            tentative_bytes: Vec::new(),
            lazy: Duration::ZERO,
        }
    }

    /// Write bytes of the oracle's data area, keeping the running difference and, once the
    /// follower has looked, each block's content as it last saw it.
    fn set_oracle(&mut self, addr: u64, bytes: &[u8]) {
        if self.synced {
            for b in blocks_of(Addr(addr), bytes.len()) {
                let b = b.0 as usize;
                if self.changed_mark[b] != self.mark_stamp {
                    self.changed_mark[b] = self.mark_stamp;
                    let mut before = [0u8; 64];
                    let r = b * 64..(b * 64 + 64).min(self.data_len);
                    before[..r.len()].copy_from_slice(&self.oracle[r]);
                    self.changed.push((b, before));
                }
            }
        }
        self.oracle[addr as usize..addr as usize + bytes.len()].copy_from_slice(bytes);
        for b in blocks_of(Addr(addr), bytes.len()) {
            self.img_changed(b.0 as usize);
        }
    }

    /// Compare each queued block, bringing `ndiff` up to date.
    fn settle(&mut self, img: &[u8]) {
        let mut queued = std::mem::take(&mut self.unsettled);
        for &b in &queued {
            let b = b as usize;
            let r = b * 64..b * 64 + 64;
            let (was, now) = (self.differs[b] & DIFFERS != 0, !same_block(&img[r.clone()], &self.oracle[r]));
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

    /// Does the recovered data area `img` equal the oracle's current S_k?
    fn same_data(&mut self, img: &[u8]) -> bool {
        self.settle(img);
        self.compares += 1;
        let same = self.ndiff == 0;
        if guard_due(self.compares, 3) {
            let whole = img[..self.data_len] == self.oracle[..];
            assert_eq!(same, whole, "crash checker: the running difference missed a change");
        }
        same
    }

    /// The smallest k in a..=i with recovered data == S_k.
    /// S_k's verdict is recorded while the oracle holds it ([`Prefix::verdict_here`]).
    fn matching_k(&mut self, img: &[u8], a: u64, i: u64) -> Option<u64> {
        if self.same_data(img) {
            self.verdict_here(a as usize);
            return Some(a);
        }
        let rec = self.rec;
        let (mut undo, mut bytes) = (std::mem::take(&mut self.tentative), std::mem::take(&mut self.tentative_bytes));
        let mut found = None;
        for k in a..i {
            for (addr, new) in rec.oracle.tx_stores(k as usize) {
                let r = addr as usize..addr as usize + new.len();
                undo.push((addr, new.len() as u32, bytes.len()));
                bytes.extend_from_slice(&self.oracle[r]);
                self.set_oracle(addr, new);
            }
            if self.same_data(img) {
                self.verdict_here(k as usize + 1);
                found = Some(k + 1);
                break;
            }
        }
        while let Some((addr, len, off)) = undo.pop() {
            self.set_oracle(addr, &bytes[off..off + len as usize]);
        }
        bytes.clear();
        (self.tentative, self.tentative_bytes) = (undo, bytes);
        found
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
        let start = Instant::now();
        let sound = match std::mem::replace(&mut self.synced, true) {
            true => f.changed(&self.oracle, &self.changed),
            false => f.reset(&self.oracle),
        };
        self.lazy += start.elapsed();
        self.follower = Some(f);
        self.changed.clear();
        self.mark_stamp = self.mark_stamp.wrapping_add(1);
        if self.mark_stamp == 0 {
            self.changed_mark.fill(0);
            self.mark_stamp = 1;
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
}

impl Oracle for Prefix<'_> {
    const RECOVERS_RECOVERED: bool = false;
    const NAMES_LOWEST_BLOCK: bool = false;

    /// Data block `b` of the image or the oracle changed: compare it again before the next
    /// comparison (once, however often it changes before then).
    #[inline]
    fn img_changed(&mut self, b: usize) {
        let Some(f) = self.differs.get_mut(b) else { return }; // outside the data area
        if *f & QUEUED == 0 {
            *f |= QUEUED;
            self.unsettled.push(b as u32);
        }
    }

    /// Start loading block `b`'s line in the oracle, its difference flag and its follower mark.
    #[inline]
    fn prefetch(&self, b: usize) {
        if let (Some(d), Some(o), Some(m)) = (self.differs.get(b), self.oracle.get(b * 64), self.changed_mark.get(b)) {
            crate::hostmem::prefetch(d);
            crate::hostmem::prefetch(o);
            crate::hostmem::prefetch(m);
        }
    }

    /// A(t) and I(t) from the record; the oracle moves to S_A(t).
    fn advance(&mut self, t: Cycle) -> (u64, u64) {
        let rec = self.rec;
        let r = &rec.record;
        let i = r.commit_called.partition_point(|&c| c <= t) as u64;
        let a = r.acks.partition_point(|&(c, _)| c <= t);
        let a = if a == 0 { 0 } else { r.acks[a - 1].1 };
        while (self.oracle_k as u64) < a {
            if self.oracle_k + 1 < rec.oracle.txs() {
                for b in rec.oracle.tx_blocks(self.oracle_k + 1) {
                    self.prefetch(b);
                }
            }
            for (addr, bytes) in rec.oracle.tx_stores(self.oracle_k) {
                self.set_oracle(addr, bytes);
            }
            self.oracle_k += 1;
        }
        (a, i)
    }

    /// The prefix rule, then S_k's structural verdict.
    fn judge(&mut self, img: &[u8], _t: Cycle, a: u64, i: u64) -> Result<(), (ViolationKind, String)> {
        let Some(k) = self.matching_k(img, a, i) else {
            return Err((ViolationKind::Prefix, format!("recovered data equals no S_k with {a} <= k <= {i}")));
        };
        let k = k as usize;
        let verdict = match self.verdicts.get(k) {
            Some(v) => v.clone().expect("verdict recorded"),
            None => self.verify(&img[..self.data_len]),
        };
        verdict.map_err(|e| (ViolationKind::Structure, e))
    }

    /// The k in a..=i whose S_k differs from `recovered` in the fewest blocks.
    fn closest(&self, recovered: &[u8], a: u64, i: u64) -> (u64, Option<u64>, u64) {
        let mut oracle = self.oracle.clone();
        let mut best = (a, None, u64::MAX);
        for k in a..=i {
            if k > a {
                self.rec.oracle.apply_tx(k as usize - 1, &mut oracle);
            }
            let (first, n) = crate::crash::difference(recovered, &oracle);
            if n < best.2 {
                best = (k, first, n);
            }
        }
        best
    }

    fn take_lazy(&mut self) -> Duration {
        std::mem::take(&mut self.lazy)
    }
}
