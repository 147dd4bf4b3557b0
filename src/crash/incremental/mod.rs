//! The crash checker's incremental recoverers: what the engine keeps between crash points so
//! that recovering the next durable image costs what changed since, for the log formats whose
//! whole recovery dominates a point (docs/crash-checker.md, "Cost"). Each is an
//! `IncrementalRecovery`, chosen by log format (`for_format`); each must give what the
//! format's pure recovery ([`crate::recovery::recover`], a function of the durable image alone)
//! gives, and compares itself with it on the 1st, 8th, 64th, ... use.
//!
//! - [`kiln`]: Kiln's and LOC-Kiln's recovery kept up to date block by block ([`kiln::Tracker`]);
//! - [`hoop`]: HOOP's recovery resumed from the regions it last scanned ([`hoop::Cache`],
//!   `hoop::Recoverer`).

pub mod hoop;
pub mod kiln;

use super::overlay::Overlay;
use crate::log::head::LogFormat;
use crate::pmem::Layout;
use crate::recovery::Plan;
use crate::types::{BlockData, BlockId};

/// What an incremental recoverer answers for the durable image at a point.
pub(crate) enum Recovered {
    /// The whole plan, made from what the recoverer kept; the engine lays its redo writes in
    /// place of the overlay laid now. `guard`: this use is the 1st, 8th, 64th, ...: a whole
    /// recovery of the durable image, the overlay taken away, must agree.
    Plan(Result<Plan, String>, bool),
    /// The plan's redo writes changed only at the homes the engine was handed (each with the
    /// block whose data the plan writes there last, `None`: no longer written); `whole`, when
    /// the recoverer began following the image at this point, is the whole plan, to be laid
    /// first. `redo` and `writes` count the plan's redo writes and all its writes.
    Homes { whole: Option<Plan>, redo: usize, writes: usize },
}

/// A recoverer that follows the durable image from point to point (module documentation).
/// The engine tells it of every block the durable image changes and asks it for the recovery
/// of the durable image at each point.
pub(crate) trait IncrementalRecovery: Send {
    /// Block `b` of the durable image changed; `img` is the logical image with it landed.
    fn land(&mut self, layout: &Layout, b: BlockId, img: &[u8]);

    /// Host cache hint: a write of `data` to block `b` lands soon. No effect on results.
    fn prefetch(&self, _b: BlockId, _data: &BlockData) {}

    /// The durable image changed in ways [`IncrementalRecovery::land`] did not hear of.
    fn forget(&mut self, layout: &Layout);

    /// The recovery of the durable image `img`, over whose data area `overlay` lays the last
    /// plan's redo writes (the durable content of a block is `overlay.durable_in(img, b)`);
    /// the homes it names (with [`Recovered::Homes`]) are pushed to `changed`. `None`: the
    /// recoverer cannot follow this image; the engine recovers it whole.
    fn recover(
        &mut self,
        layout: &Layout,
        img: &[u8],
        overlay: &Overlay,
        changed: &mut Vec<(BlockId, Option<BlockId>)>,
    ) -> Option<Recovered>;

    /// After the homes of [`Recovered::Homes`] are laid: on the 1st, 8th, 64th, ... call, a
    /// whole recovery of `img` must make `redo` redo writes, its last write to each block being
    /// what `overlay` lays there, and lay nothing else.
    fn check_laid(&mut self, _layout: &Layout, _img: &[u8], _overlay: &Overlay, _redo: usize) {}

    /// Recovery of an image this recoverer has not heard of (the recovered image, or the
    /// durable image with a prefix of a plan laid: a crash during recovery).
    fn recover_other(&mut self, layout: &Layout, img: &[u8]) -> Result<Plan, String>;

    /// A crash during recovery after `cut <= redo` of `plan`'s writes, recovered again through
    /// what the recoverer keeps, nothing written: true when it makes `plan` again (the engine
    /// then need not check the whole way). `plan` is the plan of the last
    /// [`IncrementalRecovery::recover`].
    fn same_again(
        &mut self,
        _layout: &Layout,
        _img: &[u8],
        _plan: &Plan,
        _cut_redo: (usize, usize),
        _overlay: &Overlay,
    ) -> bool {
        false
    }
}

/// The incremental recoverer of `format`, if it has one (`gap`: a Start-Gap view rewrites the
/// log area behind a recoverer's back, so none follows it).
pub(crate) fn for_format(
    format: Option<LogFormat>,
    layout: &Layout,
    gap: bool,
) -> Option<Box<dyn IncrementalRecovery>> {
    if gap {
        return None;
    }
    match format? {
        LogFormat::Kiln => Some(Box::new(kiln::Tracking::default())),
        LogFormat::Hoop => Some(Box::new(hoop::Recoverer::new(layout))),
        _ => None,
    }
}
