//! The overlay of both sweeps: recovery's redo writes laid over the data area of a worker's
//! durable image, so that the image's data area is the recovered one while durable writes
//! keep landing (a write to a block under the overlay goes to the overlay's record of the
//! durable content, which taking the overlay away restores). The cost of a point is then what
//! changed in the plan since the last one, not the plan's length ([`super::sweep`]'s
//! `Sweep::plan`, [`super::cores`]' `CoreSweep::track`).

use crate::log::head::LogFormat;
use crate::pmem::Layout;
use crate::recovery::Plan;
use crate::types::{BlockData, BlockId};

/// Blocks laid over an image, each with the durable content under it.
pub(super) struct Overlay {
    /// The durable content under each laid block, in laying order.
    under: Vec<(BlockId, BlockData)>,
    /// Per data block: its entry in `under`, valid when stamped `gen` (a stamp, so that taking
    /// the overlay away clears nothing per block).
    at: Vec<(u32, u32)>,
    gen: u32,
}

impl Overlay {
    /// An empty overlay over `at.len()` data blocks (`at` all `(0, 0)`, committed or not as
    /// the caller needs).
    pub(super) fn new(at: Vec<(u32, u32)>) -> Overlay {
        Overlay { under: Vec::new(), at, gen: 1 }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.under.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.under.len()
    }

    /// The entry of block `b` in `under`, if it is laid.
    #[inline]
    fn entry(&self, b: BlockId) -> Option<usize> {
        match self.at.get(b.0 as usize) {
            Some(&(g, i)) if g == self.gen => Some(i as usize),
            _ => None,
        }
    }

    /// Is block `b` under the overlay?
    #[inline]
    pub(super) fn covers(&self, b: BlockId) -> bool {
        self.entry(b).is_some()
    }

    /// The durable content under block `b`, if it is laid.
    #[inline]
    pub(super) fn durable(&self, b: BlockId) -> Option<&BlockData> {
        self.entry(b).map(|i| &self.under[i].1)
    }

    /// The durable content under block `b` to write, if it is laid.
    #[inline]
    pub(super) fn durable_mut(&mut self, b: BlockId) -> Option<&mut BlockData> {
        self.entry(b).map(|i| &mut self.under[i].1)
    }

    /// Lay block `b`, whose durable content is `d`, unless it is laid already (its first
    /// record stays: what taking the overlay away restores).
    #[inline]
    pub(super) fn cover(&mut self, b: BlockId, d: impl FnOnce() -> BlockData) {
        if !self.covers(b) {
            self.at[b.0 as usize] = (self.gen, self.under.len() as u32);
            self.under.push((b, d()));
        }
    }

    /// Take block `b` out of the overlay: its durable content, if it was laid.
    pub(super) fn uncover(&mut self, b: BlockId) -> Option<BlockData> {
        let at = self.entry(b)?;
        let (_, d) = self.under.swap_remove(at);
        self.at[b.0 as usize] = (0, 0);
        if let Some(&(moved, _)) = self.under.get(at) {
            self.at[moved.0 as usize].1 = at as u32;
        }
        Some(d)
    }

    /// Host cache hint: start loading block `b`'s entry. No effect on results.
    #[inline]
    pub(super) fn prefetch(&self, b: usize) {
        if let Some(e) = self.at.get(b) {
            crate::hostmem::prefetch(e);
        }
    }

    /// Take the overlay away: its entries in laying order, for the caller to write each
    /// block's durable content back, last laid first, and to hand back ([`Overlay::reuse`]).
    pub(super) fn take(&mut self) -> Vec<(BlockId, BlockData)> {
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.at.fill((0, 0));
            self.gen = 1;
        }
        std::mem::take(&mut self.under)
    }

    /// The vector [`Overlay::take`] gave, emptied, for the next laying.
    pub(super) fn reuse(&mut self, mut v: Vec<(BlockId, BlockData)>) {
        v.clear();
        if self.under.is_empty() {
            self.under = v;
        }
    }
}

/// A sweep with an [`Overlay`] over its image: the laying, one home for both sweeps; each
/// sweep writes its image through its own bookkeeping (`set_img`: the running difference, the
/// follower's marks).
pub(super) trait Overlaid {
    fn overlay(&self) -> &Overlay;
    fn overlay_mut(&mut self) -> &mut Overlay;
    /// The image as it stands (logical, the overlay laid).
    fn img(&self) -> &[u8];
    /// Write block `b` of the image.
    fn set_img(&mut self, b: BlockId, data: &BlockData);
    fn layout(&self) -> &Layout;

    /// Block `b` of the image as it stands.
    fn img_block(&self, b: BlockId) -> BlockData {
        self.img()[b.range()].try_into().expect("a block")
    }

    /// The guard of the Kiln tracker ([`crate::recovery::kiln::Tracker`]), which keeps the
    /// overlay up to date: a whole recovery of the image (Kiln's reads no data block, so the
    /// overlay does not change it) makes `redo` redo writes, its last write to each block is
    /// what the overlay lays there, and the overlay lays nothing else.
    fn check_tracker(&self, redo: usize) {
        let layout = self.layout();
        let whole = crate::recovery::recover(Some(LogFormat::Kiln), layout, self.img())
            .expect("crash checker: the Kiln tracker follows an image recovery rejects");
        let n = whole.writes.iter().position(|(b, _)| !layout.is_data(*b)).unwrap_or(whole.writes.len());
        assert_eq!(n, redo, "crash checker: the Kiln tracker's count of redo writes");
        let mut last: Vec<(BlockId, BlockData)> = whole.writes[..n].iter().rev().copied().collect();
        last.sort_by_key(|(b, _)| b.0);
        last.dedup_by_key(|(b, _)| b.0);
        for (b, d) in &last {
            let laid = self.overlay().covers(*b);
            assert!(laid && self.img()[b.range()] == d[..], "crash checker: the Kiln tracker's block {}", b.0);
        }
        let laid = self.overlay().len();
        assert_eq!(last.len(), laid, "crash checker: the Kiln tracker lays blocks recovery does not write");
    }

    /// Lay the redo writes of `plan` (those before its first write outside the data area) over
    /// the data area of the image, recording the durable content under them.
    fn overlay_on(&mut self, plan: &Plan) {
        debug_assert!(self.overlay_mut().is_empty());
        for (b, d) in &plan.writes {
            if !self.layout().is_data(*b) {
                break;
            }
            let under = self.img_block(*b);
            self.overlay_mut().cover(*b, || under);
            self.set_img(*b, d);
        }
    }

    /// Lay `data` over block `b` of the data area (`None`: take the overlay away from `b`).
    fn overlay_set(&mut self, b: BlockId, data: Option<BlockData>) {
        match data {
            Some(d) => {
                let under = self.img_block(b);
                self.overlay_mut().cover(b, || under);
                self.set_img(b, &d);
            }
            None => {
                if let Some(d) = self.overlay_mut().uncover(b) {
                    self.set_img(b, &d);
                }
            }
        }
    }

    /// Take the overlay away: the image is the durable image again.
    fn overlay_off(&mut self) {
        let under = self.overlay_mut().take();
        for (b, d) in under.iter().rev() {
            self.set_img(*b, d);
        }
        self.overlay_mut().reuse(under);
    }
}
