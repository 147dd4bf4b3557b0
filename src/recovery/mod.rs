//! Recovery: a pure function of the durable image and the static layout (MODEL.md section 3).
//!
//! It never sees simulator state. It returns a [`Plan`]: the block writes recovery performs, in
//! the order it performs them (redo writes first, the log head last). Applying the plan to the
//! image gives the recovered image; applying any prefix of it models a crash during recovery,
//! after which recovery must run again to the same result.

pub mod ec;
pub mod kiln;
pub mod loc;
pub mod startgap;
pub mod swal;
pub mod wal;

use crate::log::head::LogFormat;
use crate::pmem::Layout;
use crate::types::{BlockData, BlockId};

/// The writes recovery makes, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub writes: Vec<(BlockId, BlockData)>,
    /// Committed transactions found in the log and redone.
    pub redone_txs: u64,
}

/// Recover an image whose log area has `format` (static configuration: the protocol's log
/// format, `None` for a protocol without a log). `Err` means the image is not recoverable (for
/// example a log head that does not decode), which the crash checker reports as a violation.
pub fn recover(format: Option<LogFormat>, layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    match format {
        None => Ok(Plan::default()),
        Some(LogFormat::HWal) => wal::recover(layout, image),
        Some(LogFormat::Ec) => ec::recover(layout, image),
        Some(LogFormat::Loc) => loc::recover(layout, image),
        Some(LogFormat::Kiln) => kiln::recover(layout, image),
        Some(LogFormat::SWal) => swal::recover(layout, image),
    }
}

/// Apply a plan (or a prefix of it) to an image.
pub fn apply(image: &mut [u8], writes: &[(BlockId, BlockData)]) {
    for (b, d) in writes {
        image[b.range()].copy_from_slice(d);
    }
}
