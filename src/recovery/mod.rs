//! Recovery: a pure function of the durable image and the static layout (docs/model.md section 3).
//!
//! It never sees simulator state. It returns a [`Plan`]: the block writes recovery performs, in
//! the order it performs them (redo writes first, the log head last). Applying the plan to the
//! image gives the recovered image; applying any prefix of it models a crash during recovery,
//! after which recovery must run again to the same result.

pub mod startgap;

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

/// Defines, from the format lines of the registration table (`src/protocols.rs`), each format's
/// recovery module and the dispatch to its `recover`.
macro_rules! recovery_modules {
    (formats { $($format:ident = $code:literal => $module:ident $($reads:ident)?,)* } protocols { $($protocols:tt)* }) => {
        $(pub mod $module;)*

        /// The recovery of `format`: its module's `recover`.
        fn recover_format(format: LogFormat, layout: &Layout, image: &[u8]) -> Result<Plan, String> {
            match format {
                $(LogFormat::$format => $module::recover(layout, image),)*
            }
        }

        /// Does the recovery of `format` read the data area (`reads_data_area` on its line)?
        fn format_reads_data_area(format: LogFormat) -> bool {
            match format {
                $(LogFormat::$format => recovery_modules!(@reads $($reads)?),)*
            }
        }
    };
    (@reads reads_data_area) => {
        true
    };
    (@reads) => {
        false
    };
}

registration_table!(recovery_modules);

/// Recover an image whose log area has `format` (static configuration: the protocol's log
/// format, `None` for a protocol without a log). `Err` means the image is not recoverable (for
/// example a log head that does not decode), which the crash checker reports as a violation.
pub fn recover(format: Option<LogFormat>, layout: &Layout, image: &[u8]) -> Result<Plan, String> {
    let plan = match format {
        None => Ok(Plan::default()),
        Some(f) => recover_format(f, layout, image),
    }?;
    plan.assert_well_formed(layout);
    Ok(plan)
}

/// Whether recovery of `format` reads blocks of the data area. S-WAL's redo records hold the
/// bytes of single stores, and HOOP's slices single words, which recovery merges into the home
/// block it reads; every other format logs whole blocks, and its plan is a function of the log
/// area (and Kiln's NV-LLC state) alone. The crash checker relies on the `false` answers
/// (`Engine::lay`, `src/crash/engine.rs`); `recovery_never_reads_the_data_area` in
/// `tests/recovery_scenarios.rs` checks both answers.
pub fn reads_data_area(format: Option<LogFormat>) -> bool {
    format.is_some_and(format_reads_data_area)
}

impl Plan {
    /// The shape every recovery keeps: each write lies in the image, and the redo writes (to
    /// the data area) all come before any write outside it (the log head, Kiln's NV-LLC
    /// state), so that a crash during recovery never leaves the log marked empty with data
    /// still to redo.
    pub fn assert_well_formed(&self, layout: &Layout) {
        let blocks = layout.total_bytes() / 64;
        let mut past_data = false;
        for (b, _) in &self.writes {
            assert!(b.0 < blocks, "recovery writes block {} outside the image ({blocks} blocks)", b.0);
            if layout.is_data(*b) {
                assert!(!past_data, "recovery redoes block {} after writing outside the data area", b.0);
            } else {
                past_data = true;
            }
        }
    }
}

/// A head whose `start` or `start_seq` lies within `span` of 2^64 is corrupt: no log gets
/// there (both start at 0 or 1 and grow by one per block, byte, group or transaction), and the
/// scan that follows adds up to `span` to them.
pub(crate) fn head_in_range(head: &crate::log::head::LogHead, log0: BlockId, span: u64) -> Result<(), String> {
    if head.start.checked_add(span).is_none() || head.start_seq.checked_add(span).is_none() {
        return Err(format!(
            "corrupt log at block {}: start {} or start_seq {} within {span} of 2^64",
            log0.0, head.start, head.start_seq
        ));
    }
    Ok(())
}

/// The plan of a log kept as one region per core whose recoveries are independent (the undo
/// logs, ATOM's and S-Undo's): each region's own writes, then every region's new head.
pub(crate) fn per_core_regions(
    layout: &crate::pmem::Layout,
    image: &[u8],
    region: impl Fn(&crate::pmem::Layout, &[u8], usize, &mut Plan) -> Result<(BlockId, BlockData), String>,
) -> Result<Plan, String> {
    let mut plan = Plan::default();
    let mut heads = Vec::new();
    for c in 0..layout.cores as usize {
        heads.push(region(layout, image, c, &mut plan)?);
    }
    plan.writes.extend(heads);
    Ok(plan)
}

/// The head of an undo log's region at `log0`: it decodes, is of `format`, and starts at 0 (an
/// undo log is rewritten from its first entry by every transaction).
pub(crate) fn undo_head(
    image: &[u8],
    log0: BlockId,
    format: crate::log::head::LogFormat,
    name: &str,
) -> Result<crate::log::head::LogHead, String> {
    let head = crate::log::head::LogHead::decode(&image[log0.range()])
        .ok_or_else(|| format!("corrupt log at block {}: log head does not decode", log0.0))?;
    if head.format != format {
        return Err(format!("corrupt log at block {}: log head format {:?}, expected {format:?}", log0.0, head.format));
    }
    if head.start != 0 {
        return Err(format!("corrupt log at block {}: {name}'s head has start {}, expected 0", log0.0, head.start));
    }
    head_in_range(&head, log0, 1)?;
    Ok(head)
}

/// Apply a plan (or a prefix of it) to an image.
pub fn apply(image: &mut [u8], writes: &[(BlockId, BlockData)]) {
    for (b, d) in writes {
        image[b.range()].copy_from_slice(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(blocks: &[u64]) -> Plan {
        Plan { writes: blocks.iter().map(|&b| (BlockId(b), [0; 64])).collect(), redone_txs: 0 }
    }

    #[test]
    fn a_plan_redoes_data_before_it_touches_the_log() {
        let layout = Layout::new(64 * 64, 64 * 1024);
        plan(&[3, 5, 64]).assert_well_formed(&layout);
        let r = std::panic::catch_unwind(|| plan(&[3, 64, 5]).assert_well_formed(&layout));
        assert!(r.is_err(), "a redo write after the log head is caught");
        let r = std::panic::catch_unwind(|| plan(&[3, 1 << 30]).assert_well_formed(&layout));
        assert!(r.is_err(), "a write outside the image is caught");
    }
}

#[cfg(test)]
pub(crate) mod tests_damage;
