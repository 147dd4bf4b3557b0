//! The overlay: recovery's redo writes laid over the data area of a worker's durable image, so
//! that the image's data area is the recovered one while durable writes keep landing (a write
//! to a block under the overlay goes to the overlay's record of the durable content, which
//! taking the overlay away restores). The cost of a point is then what changed in the plan
//! since the last one, not the plan's length (`Engine::lay` in `engine.rs`).

use crate::log::head::LogFormat;
use crate::pmem::Layout;
use crate::recovery::Plan;
use crate::types::{BlockData, BlockId};

/// Blocks laid over an image, each with the durable content under it.
pub(crate) struct Overlay {
    /// The durable content under each laid block, in laying order.
    under: Vec<(BlockId, BlockData)>,
    /// Per data block: its entry in `under`, valid when stamped `gen` (a stamp, so that taking
    /// the overlay away clears nothing per block).
    at: Vec<(u32, u32)>,
    gen: u32,
    /// Scratch of [`Overlaid::overlay_update`]: per entry of `under`, whether the new plan
    /// lays its block too.
    kept: Vec<bool>,
}

impl Overlay {
    /// An empty overlay over `at.len()` data blocks (`at` all `(0, 0)`, committed or not as
    /// the caller needs).
    pub(crate) fn new(at: Vec<(u32, u32)>) -> Overlay {
        Overlay { under: Vec::new(), at, gen: 1, kept: Vec::new() }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.under.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
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

    /// The block of entry `i` of `under`.
    fn block_at(&self, i: usize) -> BlockId {
        self.under[i].0
    }

    /// Is block `b` under the overlay?
    #[inline]
    pub(crate) fn covers(&self, b: BlockId) -> bool {
        self.entry(b).is_some()
    }

    /// The durable content under block `b`, if it is laid.
    #[inline]
    pub(crate) fn durable(&self, b: BlockId) -> Option<&BlockData> {
        self.entry(b).map(|i| &self.under[i].1)
    }

    /// The durable content of block `b` of `img` (the image this overlay is laid over): its
    /// record if `b` is laid, else `img`'s block.
    #[inline]
    pub(crate) fn durable_in(&self, img: &[u8], b: BlockId) -> BlockData {
        self.durable(b).copied().unwrap_or_else(|| crate::pmem::read_block(img, b))
    }

    /// The durable content under block `b` to write, if it is laid.
    #[inline]
    pub(crate) fn durable_mut(&mut self, b: BlockId) -> Option<&mut BlockData> {
        self.entry(b).map(|i| &mut self.under[i].1)
    }

    /// Lay block `b`, whose durable content is `d`, unless it is laid already (its first
    /// record stays: what taking the overlay away restores).
    #[inline]
    pub(crate) fn cover(&mut self, b: BlockId, d: impl FnOnce() -> BlockData) {
        if !self.covers(b) {
            self.at[b.0 as usize] = (self.gen, self.under.len() as u32);
            self.under.push((b, d()));
        }
    }

    /// Take block `b` out of the overlay: its durable content, if it was laid.
    pub(crate) fn uncover(&mut self, b: BlockId) -> Option<BlockData> {
        let at = self.entry(b)?;
        let (_, d) = self.under.swap_remove(at);
        self.at[b.0 as usize] = (0, 0);
        if let Some(&(moved, _)) = self.under.get(at) {
            self.at[moved.0 as usize].1 = at as u32;
        }
        Some(d)
    }

    /// The blocks laid, in laying order.
    pub(crate) fn blocks(&self) -> impl Iterator<Item = BlockId> + '_ {
        self.under.iter().map(|(b, _)| *b)
    }

    /// Host cache hint: start loading block `b`'s entry. No effect on results.
    #[inline]
    pub(crate) fn prefetch(&self, b: usize) {
        if let Some(e) = self.at.get(b) {
            crate::hostmem::prefetch(e);
        }
    }

    /// Take the overlay away: its entries in laying order, for the caller to write each
    /// block's durable content back, last laid first, and to hand back ([`Overlay::reuse`]).
    pub(crate) fn take(&mut self) -> Vec<(BlockId, BlockData)> {
        self.gen = self.gen.wrapping_add(1);
        if self.gen == 0 {
            self.at.fill((0, 0));
            self.gen = 1;
        }
        std::mem::take(&mut self.under)
    }

    /// The vector [`Overlay::take`] gave, emptied, for the next laying.
    pub(crate) fn reuse(&mut self, mut v: Vec<(BlockId, BlockData)>) {
        v.clear();
        if self.under.is_empty() {
            self.under = v;
        }
    }
}

/// An image with an [`Overlay`] over it: the laying. The engine writes its image through its
/// own bookkeeping (`set_img`: the oracle hears of each block written).
pub(crate) trait Overlaid {
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

    /// Lay the redo writes of `plan` in place of the overlay laid now, writing only the blocks
    /// whose content changes: a block both lay keeps its durable record and is written only if
    /// `plan` lays other bytes there, a block only the old overlay lays gets its durable
    /// content back. The image and the overlay then stand as [`Overlaid::overlay_off`] and
    /// [`Overlaid::overlay_on`] would leave them (but for the order of the overlay's entries),
    /// at the cost of what changed between the two plans (consecutive crash states differ in a
    /// few blocks) rather than twice the plan's length, and the oracle hears only of the blocks
    /// written.
    fn overlay_update(&mut self, plan: &Plan) {
        let before = self.overlay().len();
        let mut kept = std::mem::take(&mut self.overlay_mut().kept);
        kept.clear();
        kept.resize(before, false);
        for (b, d) in &plan.writes {
            if !self.layout().is_data(*b) {
                break;
            }
            match self.overlay().entry(*b) {
                Some(i) => {
                    if i < before {
                        kept[i] = true;
                    }
                    if self.img()[b.range()] != d[..] {
                        self.set_img(*b, d);
                    }
                }
                None => {
                    let under = self.img_block(*b);
                    self.overlay_mut().cover(*b, || under);
                    self.set_img(*b, d);
                }
            }
        }
        // From the back: `uncover` moves the last entry into the place it frees, and every
        // entry past `i` has been seen (kept, or laid just now).
        for i in (0..before).rev() {
            if !kept[i] {
                let b = self.overlay().block_at(i);
                if let Some(d) = self.overlay_mut().uncover(b) {
                    self.set_img(b, &d);
                }
            }
        }
        self.overlay_mut().kept = kept;
    }

    /// After a recovery of the durable image made with the overlay still laid (an incremental
    /// recoverer reading the home blocks from under it,
    /// [`super::incremental::IncrementalRecovery::recover`]): on the recoverer's guard use
    /// (`guard`), a whole recovery of the durable image (the overlay taken away) must agree;
    /// then `plan` is laid in the old one's place ([`Overlaid::overlay_update`]), or on an
    /// error the overlay is taken away.
    fn lay_recovered(
        &mut self,
        plan: Result<Plan, String>,
        guard: bool,
        format: Option<LogFormat>,
    ) -> Result<Plan, String> {
        if guard {
            self.overlay_off();
            let whole = crate::recovery::recover(format, self.layout(), self.img());
            assert!(whole == plan, "crash checker: an incremental recoverer disagrees with a whole recovery");
        }
        match &plan {
            Ok(p) => self.overlay_update(p),
            Err(_) => self.overlay_off(),
        }
        plan
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// An image with an overlay, counting the blocks written.
    struct Laid {
        layout: Layout,
        img: Vec<u8>,
        overlay: Overlay,
        written: usize,
    }

    impl Laid {
        fn new(layout: Layout, img: &[u8]) -> Laid {
            let blocks = (layout.data_bytes / 64) as usize;
            Laid { layout, img: img.to_vec(), overlay: Overlay::new(vec![(0, 0); blocks]), written: 0 }
        }

        /// A durable write, as the engine lands one: under the overlay, into its record.
        fn land(&mut self, b: BlockId, d: &BlockData) {
            match self.overlay.durable_mut(b) {
                Some(x) => *x = *d,
                None => self.set_img(b, d),
            }
        }
    }

    impl Overlaid for Laid {
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
            self.img[b.range()].copy_from_slice(data);
            self.written += 1;
        }
        fn layout(&self) -> &Layout {
            &self.layout
        }
    }

    /// `overlay_update` leaves the image and the durable records as taking the overlay away
    /// and laying the new plan do, over seeded plans (repeated blocks, blocks of the last plan
    /// kept with the same or other bytes, a write outside the data area ending the redo
    /// writes) and durable writes landing between them; and it writes fewer blocks (a plan
    /// here repeats a third of the last one's writes; a crash check's consecutive plans share
    /// most of theirs).
    #[test]
    fn updating_the_overlay_equals_taking_it_away_and_laying_the_new_plan() {
        let layout = Layout::new(32 * 64, 4096);
        let mut rng = Rng::new(11);
        let mut img = vec![0u8; layout.total_bytes() as usize];
        img.iter_mut().for_each(|x| *x = rng.next_u64() as u8);
        let (mut a, mut b) = (Laid::new(layout, &img), Laid::new(layout, &img));
        let block = |rng: &mut Rng| {
            let mut d = [0u8; 64];
            d[rng.below(64) as usize] = 1 + rng.below(255) as u8;
            d
        };
        let mut last: Vec<(BlockId, BlockData)> = Vec::new();
        let mut updates = 0;
        for step in 0..3000 {
            for _ in 0..rng.below(3) {
                let (x, d) = (BlockId(rng.below(32)), block(&mut rng));
                a.land(x, &d);
                b.land(x, &d);
            }
            let mut writes: Vec<(BlockId, BlockData)> = Vec::new();
            for _ in 0..rng.below(12) {
                let w = match (rng.below(3), last.is_empty()) {
                    (0, false) => last[rng.below(last.len() as u64) as usize],
                    (1, false) => (last[rng.below(last.len() as u64) as usize].0, block(&mut rng)),
                    _ => (BlockId(rng.below(32)), block(&mut rng)),
                };
                writes.push(w);
            }
            if rng.chance(0.3) {
                writes.push((layout.log_block0(), block(&mut rng)));
                writes.push((BlockId(rng.below(32)), block(&mut rng)));
            }
            let plan = Plan { writes, redone_txs: 0 };
            let before = a.written;
            a.overlay_update(&plan);
            updates += a.written - before;
            b.overlay_off();
            b.overlay_on(&plan);
            assert!(a.img == b.img, "step {step}: the laid images");
            assert_eq!(a.overlay.len(), b.overlay.len(), "step {step}: blocks laid");
            for x in (0..32).map(BlockId) {
                assert_eq!(a.overlay.durable(x), b.overlay.durable(x), "step {step}: block {} under the overlay", x.0);
            }
            if rng.chance(0.1) {
                a.overlay_off();
                b.overlay_off();
                assert!(a.img == b.img, "step {step}: the durable images");
            }
            last = plan.writes;
        }
        assert!(
            updates * 4 < b.written * 3,
            "the update writes {updates} blocks, taking away and laying {}",
            b.written
        );
    }
}
