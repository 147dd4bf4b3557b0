//! Transaction protocols, each in its own module behind the narrow [`Protocol`] trait.
//!
//! The simulator front end ([`crate::sim::Sim`]) keeps the program's view of memory, the undo
//! information for aborts and the oracle's record; a protocol decides only what the hardware
//! (or the persistence library) does: which cache accesses a load or store makes, where dirty
//! data goes, and what commit writes and waits for. It acknowledges durability with
//! [`Machine::ack_through`].

/// Declares a protocol's event counters: a struct of `u64` fields, all zero at first, and
/// `list`, the (name, count) pairs the run report prints, in declaration order.
macro_rules! counters {
    ($name:ident { $($field:ident),* $(,)? }) => {
        #[derive(Default, Clone, Copy)]
        struct $name {
            $($field: u64,)*
        }

        impl $name {
            fn list(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), self.$field),)*]
            }
        }
    };
}

pub mod barrier;
pub mod group;
#[cfg(test)]
mod multicore_tests;
pub mod redo;
pub mod registry;
pub mod window;

pub use registry::{Build, Descriptor, Registration, Visit};

/// Declares the protocol modules and defines [`ProtocolKind`] from the protocol lines of the
/// registration table (`src/protocols.rs`).
macro_rules! protocol_kinds {
    (formats { $($formats:tt)* } protocols {
        $($(#[$mattr:meta])* $module:ident { $($(#[$attr:meta])* $kind:ident => $reg:ident),+ },)*
    }) => {
        $($(#[$mattr])* pub mod $module;)*

        /// The protocols locsim models (the table in `src/protocols.rs`).
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum ProtocolKind {
            $($($(#[$attr])* $kind,)+)*
        }

        impl ProtocolKind {
            /// Every registered protocol, in the table's order (the order of every listing).
            pub const ALL: &'static [ProtocolKind] = &[$($($(#[$attr])* ProtocolKind::$kind,)+)*];

            /// What the protocol is.
            pub fn desc(self) -> &'static Descriptor {
                match self {
                    $($($(#[$attr])* ProtocolKind::$kind => &$module::$reg.desc,)+)*
                }
            }

            /// Build the protocol from `b` and hand it to `v`.
            pub fn build<V: Visit>(self, b: &Build<'_>, v: V) -> V::Out {
                match self {
                    $($($(#[$attr])* ProtocolKind::$kind => v.visit(($module::$reg.build)(b)),)+)*
                }
            }
        }
    };
}

registration_table!(protocol_kinds);

use crate::machine::Machine;
use crate::pmem::Layout;
use crate::types::{Addr, Cycle};

/// What every protocol implements.
pub trait Protocol {
    /// Write the protocol's initial log area into the initial image (before the run).
    fn format(&self, layout: &Layout, image: &mut [u8]);
    /// A transaction begins.
    fn begin(&mut self, m: &mut Machine);
    /// A transactional load of `[addr, addr+len)`.
    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize);
    /// Called just before a transactional store changes `m.arch` (a protocol that keeps older
    /// versions of blocks, LOC-WAL, copies them here).
    #[inline(always)]
    fn before_store(&mut self, _m: &mut Machine, _addr: Addr, _len: usize) {}
    /// A transactional store of `[addr, addr+len)`; `m.arch` already holds the new bytes.
    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize);
    /// The program commits the running transaction; returns when the program may go on.
    fn commit(&mut self, m: &mut Machine);
    /// The program aborts the running transaction. `m.arch` already holds the old bytes again;
    /// `written` lists the ranges the transaction stored to.
    fn abort(&mut self, m: &mut Machine, written: &[(Addr, u32)]);
    /// Protocol-specific event counters for the run report (name, count since the start).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Invariant: a transaction (window) is acknowledged only once the writes recovery needs to
/// find it committed are durable (`durable`), unless a bug that breaks exactly this is
/// injected on purpose.
#[inline]
pub fn assert_durable_at_ack(now: Cycle, durable: Cycle, bug: Option<Bug>) {
    assert!(
        now >= durable || bug == Some(Bug::AckBeforeDurable),
        "acknowledged at cycle {now}, before its log is durable at {durable}"
    );
}

/// Invariant: the log head only moves forward (a truncation never brings back what an earlier
/// one released). Positions are (group or record, sequence) pairs, compared in order.
#[inline]
pub fn assert_head_advances(previous: (u64, u64), next: (u64, u64)) {
    assert!(next >= previous, "the log head moves back from {previous:?} to {next:?}");
}

/// Deliberate defects, for showing that the crash checker catches them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Bug {
    /// Return from commit before the commit record is durable.
    AckBeforeDurable,
    /// Write the commit record without waiting for the log data blocks (no intra-tx ordering).
    CommitBeforeLog,
    /// Advance the log head past a transaction before its home writes are durable.
    TruncateBeforeCheckpoint,
    /// Write a block group's META without ordering it after the group's data blocks.
    MetaBeforeData,
    /// Count only a transaction's logged blocks and drop its Tx Dependency Pairs (LOC-WAL).
    IgnoreDependencyPairs,
    /// Write an uncommitted line evicted from the NV-LLC to its home location (Kiln).
    EvictUncommittedHome,
    /// Start-Gap: write the registers of a gap move without waiting for the line copy.
    StartGapRegsBeforeCopy,
    /// Coherence: a store does not invalidate the other cores' shared copies, which stay stale
    /// (`Hierarchy::lose_invalidations`).
    LostInvalidation,
    /// A core's log region truncated past its transaction once that transaction is at home,
    /// without waiting for the older transactions of the other cores (H-WAL, EC-WAL).
    TruncateOutOfOrder,
    /// S-WAL truncates a transaction's log at its core's next commit instead of before
    /// returning from commit.
    LazyTruncate,
    /// Proteus: the LPQ drops a transaction's entries when its commit starts, before its lines
    /// are home.
    DropUncommittedEntry,
    /// Proteus: the log-flushes are held back until commit, after the lines they protect.
    StoreBeforeLogFlush,
    /// Proteus: a commit drops every core's entries from the shared LPQ, not only its own.
    CommitDropsOtherCores,
    /// ATOM: a line's in-place write is not held back until its undo entry is durable.
    InPlaceBeforeUndo,
    /// ATOM: the log is freed (the head moved past the transaction) without waiting for its
    /// in-place data to be durable.
    FreeLogBeforeData,
    /// LOC on N cores: a window that read or overwrote a line of another core's window not yet
    /// durable is not made to wait for it (no cross-core dependency enforcement).
    DependentBeforeSource,
    /// HOOP's garbage collection writes home only the lines whose newest version is in the
    /// running core's region and frees only that region.
    GcOwnRegion,
    /// S-Undo: no fence after an undo entry's flush, before the store it protects.
    UndoWithoutFence,
    /// S-Undo: the log is invalidated before the transaction's lines are flushed.
    InvalidateBeforeFlush,
    /// S-Undo: undo entries are written without their check (the unchecked form).
    UncheckedUndoEntry,
}

impl Bug {
    pub const ALL: [Bug; 20] = [
        Bug::AckBeforeDurable,
        Bug::CommitBeforeLog,
        Bug::TruncateBeforeCheckpoint,
        Bug::MetaBeforeData,
        Bug::IgnoreDependencyPairs,
        Bug::EvictUncommittedHome,
        Bug::StartGapRegsBeforeCopy,
        Bug::LostInvalidation,
        Bug::TruncateOutOfOrder,
        Bug::LazyTruncate,
        Bug::DropUncommittedEntry,
        Bug::StoreBeforeLogFlush,
        Bug::CommitDropsOtherCores,
        Bug::InPlaceBeforeUndo,
        Bug::FreeLogBeforeData,
        Bug::DependentBeforeSource,
        Bug::GcOwnRegion,
        Bug::UndoWithoutFence,
        Bug::InvalidateBeforeFlush,
        Bug::UncheckedUndoEntry,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Bug::AckBeforeDurable => "ack-before-durable",
            Bug::CommitBeforeLog => "commit-before-log",
            Bug::TruncateBeforeCheckpoint => "truncate-before-checkpoint",
            Bug::MetaBeforeData => "meta-before-data",
            Bug::IgnoreDependencyPairs => "ignore-dependency-pairs",
            Bug::EvictUncommittedHome => "evict-uncommitted-home",
            Bug::StartGapRegsBeforeCopy => "startgap-regs-before-copy",
            Bug::LostInvalidation => "lost-invalidation",
            Bug::TruncateOutOfOrder => "truncate-out-of-order",
            Bug::LazyTruncate => "lazy-truncate",
            Bug::DropUncommittedEntry => "drop-uncommitted-entry",
            Bug::StoreBeforeLogFlush => "store-before-log-flush",
            Bug::CommitDropsOtherCores => "commit-drops-other-cores",
            Bug::InPlaceBeforeUndo => "in-place-before-undo",
            Bug::FreeLogBeforeData => "free-log-before-data",
            Bug::DependentBeforeSource => "dependent-before-source",
            Bug::GcOwnRegion => "gc-own-region",
            Bug::UndoWithoutFence => "undo-without-fence",
            Bug::InvalidateBeforeFlush => "invalidate-before-flush",
            Bug::UncheckedUndoEntry => "unchecked-undo-entry",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Bug::AckBeforeDurable => {
                "the transaction is acknowledged when its commit record is issued, before it is durable"
            }
            Bug::CommitBeforeLog => "commit record issued before the log blocks it vouches for (no intra-tx ordering)",
            Bug::TruncateBeforeCheckpoint => "log head advanced before the in-place writes are durable",
            Bug::MetaBeforeData => {
                "a block group's META is issued before its data blocks, which follow the acknowledgement"
            }
            Bug::IgnoreDependencyPairs => {
                "TxCnt counts only a transaction's logged blocks and no dependency pairs are written: a transaction whose blocks were coalesced into a later one counts as committed on its own"
            }
            Bug::EvictUncommittedHome => {
                "an uncommitted line evicted from the NV-LLC overwrites its home location instead of going to the fallback log"
            }
            Bug::StartGapRegsBeforeCopy => {
                "a Start-Gap move's registers are written without waiting for its line copy (needs startgap.enabled)"
            }
            Bug::LostInvalidation => {
                "a store does not invalidate other cores' shared copies, whose loads return stale bytes (needs --cores 2 or more)"
            }
            Bug::TruncateOutOfOrder => {
                "a core's log region is truncated past its transaction (the head saying every transaction numbered below is at home) once that transaction's home writes are durable, not those of the older transactions of other cores (needs --cores 2 or more)"
            }
            Bug::LazyTruncate => {
                "S-WAL leaves a transaction's log in place until its core's next commit: harmless on one core, where the region replays in order, but recovery replays it over a newer write of another core (needs --cores 2 or more)"
            }
            Bug::DropUncommittedEntry => {
                "Proteus's log pending queue drops a transaction's undo entries when its commit starts, before its lines are durable at home"
            }
            Bug::StoreBeforeLogFlush => {
                "Proteus's log-flushes are held back until commit, after the lines they protect may be durable at home"
            }
            Bug::CommitDropsOtherCores => {
                "a Proteus commit drops every core's undo entries from the shared log pending queue, other cores' running transactions' too (needs --cores 2 or more)"
            }
            Bug::InPlaceBeforeUndo => {
                "ATOM's controller does not hold a line's in-place write back until its undo entry is durable: new data can reach home with nothing to undo it"
            }
            Bug::FreeLogBeforeData => {
                "ATOM frees a transaction's log without waiting for its in-place data to be durable: a crash leaves part of a committed transaction home"
            }
            Bug::DependentBeforeSource => {
                "a speculation window that read or overwrote another core's line not yet durable becomes durable without waiting for that core's window (needs --cores 2 or more)"
            }
            Bug::GcOwnRegion => {
                "HOOP's garbage collection writes home only the lines whose newest version is in the running core's OOP region and moves only that region's head, whose home_below then also covers other cores' transactions not yet home (needs --cores 2 or more)"
            }
            Bug::UndoWithoutFence => {
                "S-Undo does not fence after flushing an undo entry: the store it protects goes ahead, and its line can be durable at home before the entry that undoes it"
            }
            Bug::InvalidateBeforeFlush => {
                "S-Undo invalidates its log (the head's next generation, flushed and fenced) before flushing the transaction's lines: a crash between leaves part of the transaction home and nothing to undo it"
            }
            Bug::UncheckedUndoEntry => {
                "S-Undo writes its undo entries without their check: recovery cannot tell a torn entry (its first line durable, its second not) from a whole one, and writes the stale second line's bytes home"
            }
        }
    }

    /// Cores a run needs for the defect to matter: 2 for a cross-core defect, which a
    /// single-core run cannot show.
    pub fn min_cores(self) -> u32 {
        match self {
            Bug::TruncateOutOfOrder
            | Bug::LazyTruncate
            | Bug::LostInvalidation
            | Bug::CommitDropsOtherCores
            | Bug::DependentBeforeSource
            | Bug::GcOwnRegion => 2,
            _ => 1,
        }
    }

    /// Parse a bug name valid for `proto`.
    pub fn parse(s: &str, proto: ProtocolKind) -> Result<Bug, String> {
        let bugs = proto.injectable();
        let names = || bugs.iter().map(|b| b.name()).collect::<Vec<_>>().join(", ");
        match bugs.iter().find(|b| b.name() == s) {
            Some(b) => Ok(*b),
            None if proto.bugs().is_empty() => {
                Err(format!("protocol `{}` has no injectable bugs (it makes no durability promise)", proto.name()))
            }
            None => Err(format!("unknown bug `{s}` for protocol `{}`: allowed {}", proto.name(), names())),
        }
    }
}

#[cfg(test)]
mod invariant_tests {
    use super::*;

    #[test]
    fn an_acknowledgement_before_durability_is_caught_unless_injected() {
        assert_durable_at_ack(Cycle::new(200), Cycle::new(200), None);
        assert!(std::panic::catch_unwind(|| assert_durable_at_ack(Cycle::new(199), Cycle::new(200), None)).is_err());
        assert_durable_at_ack(Cycle::new(199), Cycle::new(200), Some(Bug::AckBeforeDurable));
    }

    #[test]
    fn a_log_head_moving_back_is_caught() {
        assert_head_advances((3, 7), (3, 8));
        assert_head_advances((3, 7), (4, 0));
        assert!(std::panic::catch_unwind(|| assert_head_advances((3, 7), (3, 6))).is_err());
        assert!(std::panic::catch_unwind(|| assert_head_advances((3, 7), (2, 9))).is_err());
    }
}
