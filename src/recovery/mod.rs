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

use crate::pmem::Layout;
use crate::protocol::ProtocolKind;
use crate::types::{BlockData, BlockId};

/// The writes recovery makes, in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub writes: Vec<(BlockId, BlockData)>,
    /// Committed transactions found in the log and redone.
    pub redone_txs: u64,
}

/// Recover an image written by `proto`. `Err` means the image is not recoverable (for example
/// a log head that does not decode), which the crash checker reports as a violation.
pub fn recover(proto: ProtocolKind, layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    match proto {
        ProtocolKind::Baseline => Ok(Plan::default()),
        ProtocolKind::HWal => wal::recover(layout, image),
        ProtocolKind::EcWal => ec::recover(layout, image),
        ProtocolKind::LocWal => loc::recover(layout, image),
        ProtocolKind::Kiln | ProtocolKind::LocKiln => kiln::recover(layout, image),
        ProtocolKind::SWal => swal::recover(layout, image),
    }
}

/// Apply a plan (or a prefix of it) to an image.
pub fn apply(image: &mut [u8], writes: &[(BlockId, BlockData)]) {
    for (b, d) in writes {
        image[b.range()].copy_from_slice(d);
    }
}
