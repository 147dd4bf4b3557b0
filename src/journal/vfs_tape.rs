//! SQLite's calls into the journal VFS recorded once per trace and replayed into every journal
//! configuration.
//!
//! A replay's SQLite is a deterministic function of what it is given: the trace, the seed of
//! its generator (the journal nonce), the connection settings ([`super::replay::SETTINGS`]),
//! the journal mode, and what each VFS call returns to it (the VFS's clock, randomness and
//! sleep are constants: [`crate::workload::sqlite::bridge::vfs`]). The journal configuration (policy, frames, PCM
//! device, timing) is not among them: it decides where and how the journal's bytes are kept,
//! and a correct journal gives SQLite back the same bytes, sizes and result codes under every
//! configuration. So a [`Tape`] keeps the database files that one replay's setup part leaves
//! ([`Recording::measured`]) and every [`Call`] of its measured part, in order, with its
//! arguments (a write's bytes as the runs that differ from a `Base` in the database files)
//! and its [`Outcome`] (a read's bytes as a digest), and a replay under another configuration
//! starts from those files and makes the same calls on its own [`super::vfs::World`] without SQLite,
//! checking call by call that each outcome is the recorded one. If all are, SQLite given those
//! outcomes would have made exactly those calls, and every figure of the replay is what
//! running SQLite gives. If one is not (a journal that fills up under a small area, a
//! defect that changes what SQLite reads back), [`replay`](fn@replay) says where and the
//! caller runs SQLite instead ([`replay_measured`]).
//!
//! A read's bytes are compared by a 64-bit digest: a wrong read that leaves the digest the same
//! goes unnoticed with probability about 2^-64 per read.
//!
//! Only plain replays are recorded and replayed: no crash, no captured states, no oracle
//! digests, no injected defect (those runs exist to exercise the journal itself).

use super::call_record::{base_bytes, decode, digest, Entry, Recording};
use super::media::DbFile;
use super::replay::{self, begin_measured, new_world, OnError, Replay, Setup};
use super::sql_trace::Trace;
use super::vfs_call::{Call, Outcome};
use crate::recent::Recent;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// What the replay loop learned from SQLite beside the calls: [`Replay`]'s counts.
struct Counts {
    commands: u64,
    ended: Vec<u64>,
    in_flight: Option<usize>,
    errors: Vec<String>,
    vm_steps: Vec<u32>,
}

/// One replay's calls and counts.
pub struct Tape {
    rec: Recording,
    /// [`Recording::start`], always there.
    start: Vec<(String, Vec<u8>)>,
    counts: Counts,
}

impl Tape {
    /// The tape of `r`, a plain replay made with a recording on; none if its setup part cannot
    /// be left out ([`Recording::measured`]).
    pub fn of(mut rec: Recording, r: &Replay) -> Option<Tape> {
        let start = rec.start.take()?;
        let counts = Counts {
            commands: r.commands,
            ended: r.ended.clone(),
            in_flight: r.in_flight,
            errors: r.errors.clone(),
            vm_steps: r.vm_steps.clone(),
        };
        Some(Tape { rec, start, counts })
    }

    /// Host bytes the tape holds.
    pub fn host_bytes(&self) -> usize {
        self.rec.steps.len() * std::mem::size_of::<(Entry, Outcome)>()
            + self.rec.bytes.len()
            + self.start.iter().map(|(_, b)| b.len()).sum::<usize>()
            + self.counts.vm_steps.len() * 4
            + self.counts.errors.iter().map(String::len).sum::<usize>()
    }

    /// Calls recorded.
    pub fn calls(&self) -> usize {
        self.rec.steps.len()
    }

    /// Reads of a journal recorded (SQLite reads a journal back to roll its transaction back).
    pub fn journal_reads(&self) -> usize {
        self.rec.steps.iter().filter(|(e, _)| matches!(e, Entry::Read { journal: true, .. })).count()
    }
}

/// Make the calls of `tape` on a new world set up as `setup` says, each checked against its
/// recorded outcome: the replay SQLite would give, or where the calls stop agreeing.
pub fn replay(tape: &Tape, setup: &Setup) -> Result<Replay, String> {
    debug_assert!(setup.bug.is_none(), "a defect's replay is not taped");
    let mut w = new_world(setup);
    let rec = &tape.rec;
    w.media.dbs = tape.start.iter().map(|(name, bytes)| DbFile::new(name, bytes.clone())).collect();
    begin_measured(&mut w, setup, None, false, None);
    let mut scratch = Vec::new();
    let mut at = 0usize;
    for (i, &(e, want)) in rec.steps.iter().enumerate() {
        let name = |n: u32| rec.names[n as usize].as_str();
        let got = match e {
            Entry::Open { name: n, flags } => w.call(Call::Open { name: name(n), flags }),
            Entry::Read { journal, idx, off, len, digest: d } => {
                scratch.resize(len as usize, 0);
                let got = w.call(Call::Read { journal, idx: idx as usize, off, buf: &mut scratch });
                if digest(&scratch) != d {
                    return Err(format!("call {i}: a read returned other bytes than when recorded"));
                }
                got
            }
            Entry::Write { journal, idx, off, len, base, runs } => {
                base_bytes(base, &w.media.dbs, len as usize, &mut scratch);
                decode(&rec.bytes[at..at + runs as usize], &mut scratch);
                at += runs as usize;
                w.call(Call::Write { journal, idx: idx as usize, off, data: &scratch })
            }
            Entry::Truncate { journal, idx, size } => w.call(Call::Truncate { journal, idx: idx as usize, size }),
            Entry::Sync { journal, idx } => w.call(Call::Sync { journal, idx: idx as usize }),
            Entry::FileSize { journal, idx } => w.call(Call::FileSize { journal, idx: idx as usize }),
            Entry::Delete { name: n } => w.call(Call::Delete { name: name(n) }),
            Entry::Access { name: n } => w.call(Call::Access { name: name(n) }),
        };
        if got != want {
            return Err(format!("call {i} ({e:?}): {got:?}, recorded {want:?}"));
        }
    }
    let c = &tape.counts;
    Ok(Replay {
        world: w,
        commands: c.commands,
        ended: c.ended.clone(),
        in_flight: c.in_flight,
        digests: vec![Vec::new(); c.ended.len()],
        snapshot: None,
        at_crash: None,
        errors: c.errors.clone(),
        vm_steps: c.vm_steps.clone(),
    })
}

/// A plain replay of `trace` (no crash, no captured states, no digests), its SQLite calls
/// recorded once per trace, seed and journal mode and replayed without SQLite under every
/// other configuration (this module): the same [`Replay`] as [`replay::replay`] gives.
/// Replays with an injected defect, and those whose calls stop agreeing with the recording,
/// run SQLite.
pub fn replay_measured(trace: &Arc<Trace>, setup: &Setup) -> Result<Replay, String> {
    if setup.bug.is_some() {
        return replay::replay(trace, setup, None, false, false);
    }
    if let Some(tape) = kept(trace, setup) {
        if let Ok(r) = replay(&tape, setup) {
            return Ok(r);
        }
        return replay::replay(trace, setup, None, false, false);
    }
    let (r, tape) = record(trace, setup)?;
    if let Some(tape) = tape {
        keep(trace, setup, tape);
    }
    Ok(r)
}

/// A plain replay of `trace` under `setup` with its SQLite calls recorded (the tape: none if
/// the calls cannot be replayed, [`Tape::of`]).
pub fn record(trace: &Trace, setup: &Setup) -> Result<(Replay, Option<Tape>), String> {
    let (r, rec) = replay::replay_recorded(trace, setup)?;
    let tape = Tape::of(rec, &r);
    Ok((r, tape))
}

/// Bytes of tapes a process keeps for later replays.
pub const KEPT_BYTES: usize = 256 << 20;

/// What makes SQLite's calls the same: the trace, the seed, whether the measured part keeps a
/// journal, and what a rejected statement does.
#[derive(Clone)]
struct Key {
    hash: u64,
    trace: Arc<Trace>,
    seed: u64,
    journal: bool,
    on_error: OnError,
}

/// [`Hasher`] by [`digest`]'s mixing, eight bytes at a time (a trace is megabytes of SQL, and
/// every replay looks its tape up).
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, b: &[u8]) {
        self.0 = self.0.rotate_left(7) ^ digest(b);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Key {
    fn of(trace: &Arc<Trace>, setup: &Setup) -> Key {
        let mut h = WordHasher(0);
        trace.hash(&mut h);
        Key {
            hash: h.finish(),
            trace: trace.clone(),
            seed: setup.seed,
            journal: setup.journal,
            on_error: setup.on_error,
        }
    }

    fn matches(&self, o: &Key) -> bool {
        (self.hash, self.seed, self.journal, self.on_error) == (o.hash, o.seed, o.journal, o.on_error)
            && (Arc::ptr_eq(&self.trace, &o.trace) || self.trace == o.trace)
    }
}

/// Tapes kept by this process, most recently used first.
static TAPES: Recent<Key, Arc<Tape>> = Recent::new();

/// The tape this process keeps for `trace` under `setup`, if any.
pub fn kept(trace: &Arc<Trace>, setup: &Setup) -> Option<Arc<Tape>> {
    // The trace a process shares between its replays is found without hashing it.
    let inputs = (setup.seed, setup.journal, setup.on_error);
    TAPES.get(|k| Arc::ptr_eq(&k.trace, trace) && (k.seed, k.journal, k.on_error) == inputs).or_else(|| {
        let key = Key::of(trace, setup);
        TAPES.get(|k| k.matches(&key))
    })
}

/// Keep `tape`, recorded for `trace` under `setup`; tapes beyond [`KEPT_BYTES`], least recently
/// used first, are dropped.
pub fn keep(trace: &Arc<Trace>, setup: &Setup, tape: Tape) {
    let key = Key::of(trace, setup);
    let mut total = 0;
    let within = |_: &Key, t: &Arc<Tape>| {
        total += t.host_bytes();
        total <= KEPT_BYTES
    };
    TAPES.insert(|k| k.matches(&key), key.clone(), Arc::new(tape), within);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::media::Timing;
    use crate::journal::policy::Policy;
    use crate::journal::vfs::World;
    use crate::pcm::PcmConfig;
    use rusqlite::ffi;

    fn setup() -> Setup {
        Setup {
            policy: Policy::parse("RR").unwrap(),
            pcm: PcmConfig::default(),
            timing: Timing::default(),
            frames: 3,
            seed: 1,
            journal: true,
            bug: None,
            on_error: OnError::Stop,
        }
    }

    fn plain_replay() -> Replay {
        Replay {
            world: new_world(&setup()),
            commands: 0,
            ended: vec![],
            in_flight: None,
            digests: vec![],
            snapshot: None,
            at_crash: None,
            errors: vec![],
            vm_steps: vec![],
        }
    }

    /// A world with database file `a.db` open, recording, after `calls`: its recording marked
    /// at the start of the measured part.
    fn recorded(calls: &[&dyn Fn(&mut World)]) -> (Recording, Vec<DbFile>) {
        let mut w = new_world(&setup());
        w.recording = Some(Recording::default());
        let o = w.call(Call::Open { name: "a.db", flags: ffi::SQLITE_OPEN_MAIN_DB | ffi::SQLITE_OPEN_CREATE });
        assert_eq!(o, Outcome { rc: 0, value: 0 });
        for c in calls {
            c(&mut w);
        }
        w.media.settle();
        let mut rec = w.recording.take().unwrap();
        rec.measured(&w.media.dbs);
        (rec, std::mem::take(&mut w.media.dbs))
    }

    #[test]
    fn a_setup_that_touched_a_journal_is_not_taped() {
        let (rec, _) = recorded(&[
            &|w| assert_eq!(w.call(Call::Write { journal: false, idx: 0, off: 0, data: &[7; 1024] }).rc, 0),
            &|w| assert_eq!(w.call(Call::Access { name: "a.db-journal" }).value, 0),
            &|w| assert_eq!(w.call(Call::Delete { name: "a.db" }).rc, 0),
        ]);
        let t = Tape::of(rec, &plain_replay()).expect("only database calls");
        assert_eq!((t.calls(), t.start.len()), (0, 1), "the files kept in place of the calls");
        assert_eq!(t.start[0].1, vec![7; 1024]);
        let journal_calls: [&dyn Fn(&mut World); 3] = [
            &|w| {
                let o = w.call(Call::Open { name: "a.db-journal", flags: ffi::SQLITE_OPEN_MAIN_JOURNAL });
                assert!(o.value >= 1 << 20, "{o:?}");
            },
            &|w| assert_eq!(w.call(Call::Delete { name: "a.db-journal" }).rc, 0),
            &|w| assert_eq!(w.call(Call::FileSize { journal: true, idx: 0 }).value, 0),
        ];
        for c in journal_calls {
            let (rec, _) = recorded(&[c]);
            assert!(Tape::of(rec, &plain_replay()).is_none());
        }
    }
}
