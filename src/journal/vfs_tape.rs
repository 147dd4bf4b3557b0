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
//! starts from those files and makes the same calls on its own [`World`] without SQLite,
//! checking call by call that each outcome is the recorded one. If all are, SQLite given those
//! outcomes would have made exactly those calls, and every figure of the replay is what
//! running SQLite gives. If one is not (a journal that fills up under a small area, a
//! defect that changes what SQLite reads back), [`replay`] says where and the caller runs
//! SQLite instead ([`super::replay::replay_measured`]).
//!
//! A read's bytes are compared by a 64-bit digest: a wrong read that leaves the digest the same
//! goes unnoticed with probability about 2^-64 per read.
//!
//! Only plain replays are recorded and replayed: no crash, no captured states, no oracle
//! digests, no injected defect (those runs exist to exercise the journal itself).

use super::media::DbFile;
use super::replay::{begin_measured, new_world, OnError, Replay, Setup};
use super::sql_trace::Trace;
use super::vfs::{Call, Outcome, World};
use crate::recent::Recent;
use std::hash::{Hash, Hasher};
use std::os::raw::c_int;
use std::sync::Arc;

/// A recorded call: [`Call`] with its buffers kept as a digest (reads) or in the tape's byte
/// buffer (writes, in call order), and names as an index into the tape's names.
#[derive(Clone, Copy, Debug)]
enum Entry {
    Open {
        name: u32,
        flags: c_int,
    },
    Read {
        journal: bool,
        idx: u32,
        off: u64,
        len: u32,
        digest: u64,
    },
    /// `len` bytes: `base`'s bytes where the `runs` (the next bytes of the tape's byte buffer)
    /// do not say otherwise ([`encode`]).
    Write {
        journal: bool,
        idx: u32,
        off: u64,
        len: u32,
        base: Base,
        runs: u32,
    },
    Truncate {
        journal: bool,
        idx: u32,
        size: u64,
    },
    Sync {
        journal: bool,
        idx: u32,
    },
    FileSize {
        journal: bool,
        idx: u32,
    },
    Delete {
        name: u32,
    },
    Access {
        name: u32,
    },
}

/// What a recorded write's bytes are kept against: zeros, or the bytes of a database file at an
/// offset at the time of the write (past the file's end: zeros). The database files are the
/// same at every call of every replay of a tape (only the calls change them, and those are the
/// recorded ones), so a write's bytes come back exactly whatever base was chosen; a good base
/// makes the runs short: a database page written over its old version, a journal record's
/// page image read from the database.
#[derive(Clone, Copy, Debug)]
enum Base {
    Zero,
    Db { db: u32, off: u64 },
}

/// `base`'s bytes (`len` of them) from the database files `dbs`, into `out`.
fn base_bytes(base: Base, dbs: &[DbFile], len: usize, out: &mut Vec<u8>) {
    out.clear();
    if let Base::Db { db, off } = base {
        let cur = &dbs[db as usize].cur;
        let from = (off as usize).min(cur.len());
        out.extend_from_slice(&cur[from..(from + len).min(cur.len())]);
    }
    out.resize(len, 0);
}

/// Append to `out` the runs that turn `base` into `data` (same length): for each, the gap
/// since the last run's end and the run's length (LEB128), then its bytes. Differing bytes
/// fewer than [`RUN_GAP`] apart share a run.
fn encode(base: &[u8], data: &[u8], out: &mut Vec<u8>) {
    let mut at = 0;
    let mut i = 0;
    while i < data.len() {
        i = first_difference(base, data, i);
        if i == data.len() {
            break;
        }
        let start = i;
        let mut end = i + 1;
        let mut j = end;
        while j < data.len() && j < end + RUN_GAP {
            if data[j] != base[j] {
                end = j + 1;
            }
            j += 1;
        }
        leb128(out, (start - at) as u64);
        leb128(out, (end - start) as u64);
        out.extend_from_slice(&data[start..end]);
        at = end;
        i = end;
    }
}

/// The first index at or after `i` where `base` and `data` (same length) differ, or their
/// length. Eight bytes at a time: a database page written over its old version differs in a
/// few places, and the equal stretches between are most of what [`encode`] reads.
fn first_difference(base: &[u8], data: &[u8], mut i: usize) -> usize {
    let word = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    while i + 8 <= data.len() {
        let x = word(base, i) ^ word(data, i);
        if x != 0 {
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < data.len() && data[i] == base[i] {
        i += 1;
    }
    i
}

/// Equal bytes between two differing ones that [`encode`] keeps in one run (a run's header
/// costs two bytes or more).
const RUN_GAP: usize = 4;

/// Apply the runs [`encode`] made to `buf` (the base's bytes).
fn decode(mut runs: &[u8], buf: &mut [u8]) {
    let mut at = 0;
    while !runs.is_empty() {
        let gap = read_leb128(&mut runs) as usize;
        let n = read_leb128(&mut runs) as usize;
        at += gap;
        buf[at..at + n].copy_from_slice(&runs[..n]);
        runs = &runs[n..];
        at += n;
    }
}

fn leb128(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_leb128(b: &mut &[u8]) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let x = b[0];
        *b = &b[1..];
        v |= ((x & 0x7f) as u64) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// The calls of a replay in progress ([`World::recording`]).
#[derive(Default)]
pub struct Recording {
    steps: Vec<(Entry, Outcome)>,
    bytes: Vec<u8>,
    names: Vec<String>,
    /// The database files (name, bytes) at the start of the measured part, where the steps
    /// begin ([`Recording::measured`]); none if the setup's calls cannot be left out.
    start: Option<Vec<(String, Vec<u8>)>>,
    scratch: Vec<u8>,
}

/// A recorded write's entry, made by [`Recording::before`].
pub struct EntryOf(Entry);

impl Recording {
    fn name(&mut self, n: &str) -> u32 {
        let i = self.names.iter().position(|m| m == n).unwrap_or_else(|| {
            self.names.push(n.to_string());
            self.names.len() - 1
        });
        i as u32
    }

    /// Before `c` is carried out on `w`: a write's entry, its bytes kept against a base in
    /// `w`'s database files as they are now.
    pub fn before(&mut self, c: &Call<'_>, w: &World) -> Option<EntryOf> {
        let Call::Write { journal, idx, off, data } = *c else { return None };
        let base = if journal { w.journal_page_source(idx, off, data.len()) } else { Some((idx, off)) };
        let base = base.map_or(Base::Zero, |(db, off)| Base::Db { db: db as u32, off });
        base_bytes(base, &w.media.dbs, data.len(), &mut self.scratch);
        let before = self.bytes.len();
        encode(&self.scratch, data, &mut self.bytes);
        let runs = (self.bytes.len() - before) as u32;
        Some(EntryOf(Entry::Write { journal, idx: idx as u32, off, len: data.len() as u32, base, runs }))
    }

    /// Keep `c`, carried out with `out` (`written`: what [`Recording::before`] made of it).
    pub fn push(&mut self, c: &Call<'_>, out: Outcome, written: Option<EntryOf>) {
        if let Some(EntryOf(e)) = written {
            self.steps.push((e, out));
            return;
        }
        let e = match c {
            Call::Open { name, flags } => Entry::Open { name: self.name(name), flags: *flags },
            Call::Read { journal, idx, off, buf } => Entry::Read {
                journal: *journal,
                idx: *idx as u32,
                off: *off,
                len: buf.len() as u32,
                digest: digest(buf),
            },
            Call::Write { .. } => unreachable!("a write's entry is made before it is carried out"),
            Call::Truncate { journal, idx, size } => {
                Entry::Truncate { journal: *journal, idx: *idx as u32, size: *size }
            }
            Call::Sync { journal, idx } => Entry::Sync { journal: *journal, idx: *idx as u32 },
            Call::FileSize { journal, idx } => Entry::FileSize { journal: *journal, idx: *idx as u32 },
            Call::Delete { name } => Entry::Delete { name: self.name(name) },
            Call::Access { name } => Entry::Access { name: self.name(name) },
        };
        self.steps.push((e, out));
    }

    /// Mark the start of the measured part, where the database files are `dbs` (settled). If no
    /// setup call touched a journal, the setup's calls changed nothing but the database files
    /// (every other effect of a database call is a statistic that the start of the measured
    /// part clears), so the tape keeps the files' bytes in place of those calls; if one did
    /// (no trace's setup does: it runs with `journal_mode=OFF`), nothing is taped.
    pub fn measured(&mut self, dbs: &[DbFile]) {
        let journal = |(e, _): &(Entry, Outcome)| match *e {
            Entry::Open { flags, .. } => flags & rusqlite::ffi::SQLITE_OPEN_MAIN_JOURNAL != 0,
            Entry::Read { journal, .. }
            | Entry::Write { journal, .. }
            | Entry::Truncate { journal, .. }
            | Entry::Sync { journal, .. }
            | Entry::FileSize { journal, .. } => journal,
            Entry::Delete { name } => self.names[name as usize].ends_with(super::vfs::SUFFIX),
            Entry::Access { .. } => false,
        };
        if !self.steps.iter().any(journal) {
            debug_assert!(dbs.iter().all(|d| d.durable == d.cur), "settled");
            self.start = Some(dbs.iter().map(|d| (d.name.clone(), d.cur.clone())).collect());
        }
        self.steps.clear();
        self.bytes.clear();
    }
}

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

/// A 64-bit digest of `b` (eight bytes at a time, then the tail and the length).
fn digest(b: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mix = |h: u64, x: u64| (h ^ x).wrapping_mul(K).rotate_left(31);
    let words = b.chunks_exact(8);
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    let h = words.fold(0x243f_6a88_85a3_08d3, |h, w| mix(h, u64::from_le_bytes(w.try_into().expect("8"))));
    mix(mix(h, u64::from_le_bytes(tail)), b.len() as u64)
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
    use crate::pcm::PcmConfig;
    use crate::rng::Rng;
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

    #[test]
    fn runs_rebuild_any_bytes_from_any_base_and_few_changes_stay_small() {
        let mut rng = Rng::new(3);
        for len in [0usize, 1, 5, 28, 1024] {
            for changes in [0u64, 1, 3, 40, 2000] {
                let base: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                let mut data = base.clone();
                for _ in 0..changes.min(len as u64 * 2) {
                    let i = rng.below(len as u64) as usize;
                    data[i] = rng.below(256) as u8;
                }
                let mut runs = vec![];
                encode(&base, &data, &mut runs);
                let mut back = base.clone();
                decode(&runs, &mut back);
                assert_eq!(back, data, "len {len} changes {changes}");
                if changes <= 3 {
                    assert!(runs.len() <= 3 * (2 + 1 + RUN_GAP), "{} bytes of runs", runs.len());
                }
            }
        }
        // The word-wise skip finds what a byte-wise one finds: differences at every offset
        // within and across words, at the ends, and none.
        let bytewise = |base: &[u8], data: &[u8], i: usize| (i..data.len()).find(|&j| data[j] != base[j]);
        for len in [0usize, 1, 7, 8, 9, 16, 23, 64] {
            let base: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
            for at in 0..=len {
                let mut data = base.clone();
                if let Some(x) = data.get_mut(at) {
                    *x ^= 1 << rng.below(8);
                }
                for from in 0..=len {
                    let want = bytewise(&base, &data, from).unwrap_or(len);
                    assert_eq!(first_difference(&base, &data, from), want, "len {len} at {at} from {from}");
                }
            }
        }
        let mut big = vec![];
        leb128(&mut big, 1 << 40);
        assert_eq!(read_leb128(&mut &big[..]), 1 << 40);
    }

    #[test]
    fn the_digest_tells_apart_bytes_lengths_and_positions() {
        let a = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_ne!(digest(&a), digest(&a[..8]));
        assert_ne!(digest(&[0; 8]), digest(&[0; 16]));
        let mut b = a;
        b.swap(0, 8);
        assert_ne!(digest(&a), digest(&b));
        assert_eq!(digest(&a), digest(&a.clone()));
    }
}
