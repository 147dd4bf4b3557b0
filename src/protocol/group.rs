//! The Eager Commit block group as the hardware fills it (`loc-extended.txt` 3.2, the log
//! format in [`crate::log::ec`]): what EC-WAL, LOC-WAL and Kiln's fallback log share.
//!
//! The log area after its head block is a ring of groups of [`GROUP_BLOCKS`] blocks: seven
//! data slots, then the META block that names them. A group is identified by its SID, which
//! only grows; SID `s` lives at ring position `s % groups`. A group may be reused once the
//! truncation past it is durable.
//!
//! The ordering rule every user keeps: a group's META is started so late that it completes
//! after every data write of the group (and after whatever else the caller names), whatever
//! the device's latencies, and under a persistence domain that covers the write queue it is
//! not accepted before they are durable, whichever core writes it ([`Group::write_meta`]).
//! Recovery trusts a slot only if the META names it, so a durable META always vouches for
//! durable data.

use super::Bug;
use crate::log::ec::{BlkTag, Meta, DATA_SLOTS, GROUP_BLOCKS};
use crate::machine::Machine;
use crate::memctl::WriteTiming;
use crate::pmem::{Layout, WriteKind};
use crate::types::{BlockData, BlockId, Cycle};

/// A block group being filled.
pub struct Group {
    pub sid: u64,
    /// First block of the group.
    pub at: BlockId,
    pub tags: [Option<BlkTag>; DATA_SLOTS],
    /// Slots filled.
    pub n: usize,
    /// Latest completion cycle of the group's data writes: its META completes after it.
    pub data_done: Cycle,
    /// Latest cycle at which a data write of the group became durable: under a domain that
    /// covers the write queue (durable once accepted) its META is not accepted before it.
    pub data_durable: Cycle,
    /// Tags changed since the META was last written.
    pub stale: bool,
}

impl Group {
    pub fn is_full(&self) -> bool {
        self.n == DATA_SLOTS
    }

    /// Take the next slot for `tag`: (slot index, log block).
    pub fn push(&mut self, tag: BlkTag) -> (usize, BlockId) {
        assert!(self.n < DATA_SLOTS, "a full group takes no block");
        let slot = self.n;
        self.tags[slot] = Some(tag);
        self.n += 1;
        self.stale = true;
        (slot, BlockId(self.at.0 + slot as u64))
    }

    /// The group's META must follow a write that completes at `done` and is durable at
    /// `durable`: one of its data writes, or (LOC-WAL's pair groups) every log write of the
    /// window.
    pub fn note_data(&mut self, done: Cycle, durable: Cycle) {
        self.data_done = self.data_done.max(done);
        self.data_durable = self.data_durable.max(durable);
    }

    /// Write the group's META, started so that it completes after every write noted with
    /// [`Group::note_data`]: a write started later than another's completion minus the shortest
    /// write latency (`min_write_cycles`) completes after it. Under the injected
    /// `meta-before-data` it starts at once. Under a domain that covers the write queue it is
    /// also accepted no earlier than the data became durable: a core whose clock is behind the
    /// data's writer (logging another core's evicted line into that core's group) would
    /// otherwise make the META durable first. Waits until the controller accepts it.
    pub fn write_meta(&mut self, m: &mut Machine, min_write_cycles: Cycle, bug: Option<Bug>) -> WriteTiming {
        let after = match bug {
            Some(Bug::MetaBeforeData) => Cycle::ZERO,
            _ => (self.data_done + Cycle::new(1)).saturating_sub(min_write_cycles),
        };
        if bug != Some(Bug::MetaBeforeData) {
            m.durable_after_accepted(self.data_durable);
        }
        let meta = Meta { sid: self.sid, tags: self.tags };
        let checked = m.meta_checksum;
        let encode = || if checked { meta.encode_checked() } else { meta.encode() };
        let t = m.write_encoded_after(BlockId(self.at.0 + DATA_SLOTS as u64), WriteKind::LogMeta, after, encode);
        // The rule every user relies on: the META completes after every data write it names.
        assert!(
            t.done > self.data_done || bug == Some(Bug::MetaBeforeData),
            "META of group {} done at {} before its data ({})",
            self.sid,
            t.done,
            self.data_done
        );
        m.wait_until(t.accepted);
        self.stale = false;
        t
    }
}

/// Write a data block into log block `at`: `data`, or the program's current bytes of `home`.
/// Waits until the controller accepts it.
pub fn write_data(m: &mut Machine, at: BlockId, home: BlockId, data: Option<&BlockData>) -> WriteTiming {
    let t = issue_data(m, at, home, data);
    m.wait_until(t.accepted);
    t
}

/// [`write_data`] without the wait: the write is handed to the controller, which accepts it at
/// the cycle its ordered stream allows (Speculative Persistence's per-transaction streams under
/// `ordering.log_order = program`, in flight together).
pub fn issue_data(m: &mut Machine, at: BlockId, home: BlockId, data: Option<&BlockData>) -> WriteTiming {
    match data {
        Some(d) => m.write_encoded(at, WriteKind::LogData, || *d),
        None => m.write_from_arch(at, WriteKind::LogData, home),
    }
}

/// The ring of block groups in the log area, and which of them may be reused.
pub struct GroupRing {
    /// The log head block (the ring starts one block after it).
    pub log0: BlockId,
    /// Groups in the ring.
    pub groups: u64,
    /// SID of the next group to open.
    pub next_sid: u64,
    /// Groups before this SID are known free (their truncation is durable).
    safe_sid: u64,
    /// What fills the ring, for the error when it overflows ("a transaction", ...).
    what: &'static str,
}

impl GroupRing {
    pub fn new(layout: &Layout, what: &'static str) -> GroupRing {
        GroupRing::region(layout, 0, what)
    }

    /// The ring of core `c`'s log region (`Layout::log_region`; with one core, the log area).
    pub fn region(layout: &Layout, c: usize, what: &'static str) -> GroupRing {
        let (log0, blocks) = layout.log_region(c);
        let groups = (blocks - 1) / GROUP_BLOCKS;
        assert!(groups > 0, "the log region holds at least one block group");
        GroupRing { log0, groups, next_sid: 0, safe_sid: 0, what }
    }

    /// The next group reuses a place in the ring (every group since `safe_sid` is in use).
    pub fn full(&self) -> bool {
        self.next_sid - self.safe_sid >= self.groups
    }

    /// Open the next group. `truncated`: the SID past which truncations have been issued;
    /// when the ring is full, the controller first drains (`drain`: every issued write becomes
    /// durable, so those truncations are) or, without it, `truncated` must already be durable.
    /// A ring too small for what must stay in it is a fatal configuration error of the run.
    pub fn open(&mut self, m: &mut Machine, truncated: u64, drain: bool) -> Group {
        if self.full() {
            if drain {
                m.quiesce();
            }
            self.safe_sid = truncated;
            if self.full() {
                let (what, groups) = (self.what, self.groups);
                m.fatal.get_or_insert_with(|| {
                    format!("log.size_bytes too small: {what} needs more than {groups} block groups")
                });
            }
        }
        let sid = self.next_sid;
        self.next_sid += 1;
        let at = BlockId(self.log0.0 + 1 + GROUP_BLOCKS * (sid % self.groups));
        Group {
            sid,
            at,
            tags: [None; DATA_SLOTS],
            n: 0,
            data_done: Cycle::ZERO,
            data_durable: Cycle::ZERO,
            stale: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn machine() -> Machine {
        let layout = Layout::new(64 * 1024, 64 * 1024);
        Machine::new(&Config::default(), layout, vec![0; layout.total_bytes() as usize], false)
    }

    /// A group whose data write queues behind two writes on its bank, then its META.
    fn meta_after_busy_data(min_write_cycles: Cycle) -> WriteTiming {
        let mut m = machine();
        let mut ring = GroupRing::new(&m.layout, "a test");
        let mut g = ring.open(&mut m, 0, true);
        let (_, at) = g.push(BlkTag::default());
        for _ in 0..2 {
            m.write_block(at, WriteKind::LogData, [0; 64]);
        }
        let t = write_data(&mut m, at, BlockId(0), None);
        g.note_data(t.done, t.durable);
        g.write_meta(&mut m, min_write_cycles, None)
    }

    #[test]
    fn the_meta_completes_after_its_data() {
        let t = meta_after_busy_data(Cycle::new(168));
        assert_eq!(t.done, Cycle::new(168) * 3 + Cycle::new(1), "started one cycle after the data's start");
    }

    #[test]
    #[should_panic(expected = "before its data")]
    fn a_meta_started_too_early_is_caught() {
        // Breaking the rule on purpose: a shortest write latency longer than the device's
        // lets the META start (and complete) before the data it names.
        meta_after_busy_data(Cycle::new(168) * 3);
    }
}
