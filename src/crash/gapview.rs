//! Start-Gap under the crash checker (docs/formats/startgap.md): the durable writes to the log
//! area and the register block are physical, recovery reads the logical log. The engine
//! (`Engine` in `engine.rs`) keeps its durable image in the logical layout and routes the
//! writes Start-Gap owns here; before each recovery the log area of its image is brought up to
//! the physical image ([`GapView::refresh`]).

use crate::pmem::Layout;
use crate::recovery;
use crate::startgap::{Geometry, Registers};
use crate::types::{BlockData, BlockId};

pub(super) struct GapView {
    geom: Geometry,
    /// The durable physical image (the whole layout; only the blocks Start-Gap owns are read).
    phys: Vec<u8>,
    /// A block Start-Gap owns was written since the last refresh.
    stale: bool,
    /// The registers the logical log was built under, and the physical log lines written since
    /// (the view is updated line by line while the registers stay).
    regs: Option<Registers>,
    written: Vec<BlockId>,
    refreshes: u64,
}

impl GapView {
    /// The view of a run under `layout` with Start-Gap on (`None` when it is off); `phys`: the
    /// initial physical image.
    pub(super) fn new(
        cfg: &crate::startgap::StartGapConfig,
        layout: &Layout,
        phys: impl FnOnce() -> Vec<u8>,
    ) -> Option<GapView> {
        Geometry::of(cfg, layout).map(|geom| GapView {
            geom,
            phys: phys(),
            stale: true,
            regs: None,
            written: Vec::new(),
            refreshes: 0,
        })
    }

    /// Is `b` one of the blocks Start-Gap owns (the log lines, the spare line, the registers)?
    #[inline]
    pub(super) fn holds(&self, b: BlockId) -> bool {
        self.geom.holds(b)
    }

    /// The durable content of block `b`, which Start-Gap owns.
    pub(super) fn block(&self, b: BlockId) -> BlockData {
        self.phys[b.range()].try_into().expect("a block")
    }

    /// A write to block `b`, which Start-Gap owns, becomes durable.
    pub(super) fn land(&mut self, b: BlockId, data: &BlockData) {
        self.phys[b.range()].copy_from_slice(data);
        self.stale = true;
        if b != self.geom.regs_block() {
            self.written.push(b);
        }
    }

    /// Bring the log area of `img` (logical layout `layout`) up to the physical durable image,
    /// line by line (the lines written and the lines moved since the last refresh), else
    /// rebuilt whole; at the 1st, 2nd, 4th, 8th, ... update a whole rebuild checks the
    /// line-by-line bookkeeping. An error: the registers do not decode (recovery's error).
    pub(super) fn refresh(&mut self, layout: &Layout, img: &mut [u8]) -> Result<(), String> {
        if !self.stale {
            return Ok(());
        }
        self.refreshes += 1;
        let (geom, phys) = (&self.geom, &self.phys);
        let updated =
            self.regs.and_then(|r| recovery::startgap::update_logical_log(geom, &r, phys, &self.written, img));
        self.regs = updated;
        if updated.is_some() && self.refreshes.is_power_of_two() {
            let full = recovery::startgap::logical_image(geom, phys).expect("registers decoded");
            let log = layout.log_base as usize..(layout.log_base + layout.log_bytes) as usize;
            assert!(full[log.clone()] == img[log], "crash checker: start-gap view bookkeeping");
        }
        if updated.is_none() {
            self.regs = Some(recovery::startgap::logical_log(geom, phys, img)?);
        }
        self.written.clear();
        self.stale = false;
        Ok(())
    }
}
