//! The crash checker's incremental recoverers: what a sweep keeps between crash points so that
//! recovering the next durable image costs what changed since, for the log formats whose whole
//! recovery dominates a point (docs/crash-checker.md, "Cost"). Each must give what the format's
//! pure recovery ([`crate::recovery::recover`], a function of the durable image alone) gives;
//! the sweeps compare them with it on the 1st, 8th, 64th, ... use.
//!
//! - [`kiln`]: Kiln's and LOC-Kiln's recovery kept up to date block by block ([`kiln::Tracker`]);
//! - [`hoop`]: HOOP's recovery resumed from the regions it last scanned ([`hoop::Cache`],
//!   `hoop::Recoverer`).

pub mod hoop;
pub mod kiln;
