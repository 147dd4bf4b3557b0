//! The journal's injectable defects (`journal --inject-bug`), each shown caught by the crash
//! checker; the allocator and the VFS both switch on them.

/// A defect that can be switched on to show the crash checker catches it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Bug {
    /// Clear the hot-journal flag when the database file is synced, before its pages are
    /// durable (the commit point moved too early).
    HotClearBeforeDbSync,
    /// Hand out a portion still holding a record of the live journal (journaled data lost).
    ReuseLivePortion,
    /// Placement into a free portion of the database's own reuse-state frames forgets to mark
    /// the portion taken, so the next new page of the journal is placed on it too.
    PlaceTakenPortion,
    /// A frame freed by garbage collection is taken for another use without clearing the
    /// descriptor PTRs that still name it (the kept association outlives the frame).
    StaleAssociationKept,
    /// A page at its portion's reuse limit moves to the next portion of the same frame without
    /// checking that portion is free.
    PortionLimitShared,
}

impl Bug {
    pub const ALL: [(&'static str, Bug); 5] = [
        ("hot-clear-before-db-sync", Bug::HotClearBeforeDbSync),
        ("reuse-live-portion", Bug::ReuseLivePortion),
        ("place-taken-portion", Bug::PlaceTakenPortion),
        ("stale-association-kept", Bug::StaleAssociationKept),
        ("portion-limit-shared", Bug::PortionLimitShared),
    ];

    pub fn parse(s: &str) -> Result<Bug, String> {
        Bug::ALL.iter().find(|(n, _)| *n == s).map(|&(_, b)| b).ok_or_else(|| {
            let names: Vec<&str> = Bug::ALL.iter().map(|(n, _)| *n).collect();
            format!("--inject-bug {s}: unknown; allowed: {}", names.join(", "))
        })
    }
}
