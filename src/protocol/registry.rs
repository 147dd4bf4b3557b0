//! The protocols locsim models, registered in one table.
//!
//! Each protocol's own file declares one [`Registration`]: what the protocol is (its
//! [`Descriptor`]: command-line name, log format, flags, injectable bugs, layout needs) and how
//! it is built. The registration table (`src/protocols.rs`), one line per protocol, is the only
//! list of protocols: it defines [`ProtocolKind`] (in `src/protocol/mod.rs`), and the runner, the command line (`--protocol`,
//! `crashtest --list-bugs`), the checker and the tests read every per-protocol fact through
//! [`ProtocolKind::desc`] and build every protocol through [`ProtocolKind::build`]. No other
//! code matches on protocols (`protocols_are_named_only_in_the_registration_table` checks it).
//!
//! Building keeps static dispatch: [`ProtocolKind::build`] hands the concrete protocol to a
//! [`Visit`], whose `visit` is generic over it, so the simulator it drives is monomorphised per
//! protocol as before; the descriptor is read when a run is set up, never per access.

use super::{Bug, Protocol, ProtocolKind};
use crate::config::Config;
use crate::log::head::LogFormat;
use crate::pmem::Layout;

/// What a protocol is, as the rest of locsim reads it.
#[derive(Debug)]
pub struct Descriptor {
    /// Its name on the command line and in the results.
    pub name: &'static str,
    /// The format of its memory log, which recovery reads (`None`: no log).
    pub log_format: Option<LogFormat>,
    /// Does it persist through the core's own stores, flushes and fences (software)? Under
    /// `machine.persist_domain = eadr | bbb` its stores are then durable once performed and its
    /// flushes cost nothing; a hardware protocol's lines stay under its own hardware, which the
    /// power-fail drain leaves alone (src/machine/persist.rs, docs/machine.md).
    pub stores_persist: bool,
    /// Does it speculate (has a speculation degree, `loc.speculation_degree`)?
    pub speculates: bool,
    /// The deliberate defects that can be injected into it (negative controls); each one's
    /// description and the cores it needs are [`Bug::describe`] and [`Bug::min_cores`].
    pub bugs: &'static [Bug],
    /// The `[loc]` keys it reads (of [`crate::runner::LOC_READS`]); the others are reported
    /// unread.
    pub reads: &'static [&'static str],
    /// Its layout from the plain one (data, log regions, Start-Gap's lines): the state it keeps
    /// beyond them (Kiln's NV-LLC records, Proteus's log pending queue), or one line saying
    /// which setting it cannot run with.
    pub layout: fn(Layout, &Config) -> Result<Layout, String>,
}

impl Descriptor {
    /// The plain layout, for a protocol that keeps no state beyond its log.
    pub fn plain_layout(layout: Layout, _cfg: &Config) -> Result<Layout, String> {
        Ok(layout)
    }
}

/// What building a protocol reads: the configuration, the final layout, the injected bug.
pub struct Build<'a> {
    pub cfg: &'a Config,
    pub layout: &'a Layout,
    pub bug: Option<Bug>,
}

/// One protocol's registration, declared in its own file: its descriptor and its constructor.
pub struct Registration<P> {
    pub desc: Descriptor,
    pub build: fn(&Build<'_>) -> P,
}

/// What is done with a protocol once built: `visit` is generic over the protocol's type, so a
/// simulator driven from it dispatches statically.
pub trait Visit {
    type Out;
    fn visit<P: Protocol + 'static>(self, p: P) -> Self::Out;
}

impl ProtocolKind {
    pub fn name(self) -> &'static str {
        self.desc().name
    }

    /// The format of the protocol's memory log, which recovery reads (`None`: no log).
    pub fn log_format(self) -> Option<LogFormat> {
        self.desc().log_format
    }

    /// [`Descriptor::stores_persist`].
    pub fn stores_persist(self) -> bool {
        self.desc().stores_persist
    }

    /// Does the protocol speculate (has a speculation degree)?
    pub fn speculates(self) -> bool {
        self.desc().speculates
    }

    /// The deliberate defects that can be injected into this protocol (negative controls).
    pub fn bugs(self) -> &'static [Bug] {
        self.desc().bugs
    }

    pub fn parse(s: &str) -> Result<ProtocolKind, String> {
        ProtocolKind::ALL.iter().copied().find(|p| p.name() == s).ok_or_else(|| {
            let names: Vec<_> = ProtocolKind::ALL.iter().map(|p| p.name()).collect();
            format!("unknown protocol `{s}`: allowed {}", names.join(", "))
        })
    }

    /// The registered protocols' names, comma-separated (the `--protocol` help).
    pub fn names() -> String {
        ProtocolKind::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
    }

    /// Every defect `crashtest --inject-bug` accepts for this protocol: its own, and, for a
    /// protocol with bugs, those of the machine below it (the Start-Gap controller, the
    /// coherence protocol).
    pub fn injectable(self) -> Vec<Bug> {
        let machine: &[Bug] =
            if self.bugs().is_empty() { &[] } else { &[Bug::StartGapRegsBeforeCopy, Bug::LostInvalidation] };
        self.bugs().iter().chain(machine).copied().collect()
    }
}
