//! The replayer: runs a [`Trace`] through real SQLite on the journal VFS, counts commands and
//! transactions, and optionally records the content digest of a database after each of its
//! transactions (the crash checker's oracle).

use super::alloc::Journal;
use super::media::{EventKind, Media, Snapshot, Timing};
use super::policy::Policy;
use super::sql_trace::{Op, Trace};
use super::vfs::{self, Bug, Recording, World};
use crate::pcm::PcmConfig;
use rusqlite::{Connection, OpenFlags};
use std::sync::Mutex;

/// SQLite's generator and the thread-local world make a replay exclusive per process.
static LOCK: Mutex<()> = Mutex::new(());

/// Hold the replay lock (for code that installs its own world).
pub fn lock() -> std::sync::MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a replay runs on.
#[derive(Clone, Debug)]
pub struct Setup {
    pub policy: Policy,
    pub pcm: PcmConfig,
    pub timing: Timing,
    /// Frames of the PCM journal area (64 KiB each; the paper: 2 MB = 32).
    pub frames: u64,
    pub seed: u64,
    /// False: the measured part runs with `journal_mode=OFF` (the no-journal reference).
    pub journal: bool,
    pub bug: Option<Bug>,
    /// What a measured statement that SQLite rejects does to the run.
    pub on_error: OnError,
}

/// What a statement that SQLite rejects does (`--on-error`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum OnError {
    /// The run fails with the statement's line and SQLite's message.
    #[default]
    Stop,
    /// The error is recorded (line and message) and the run goes on with the next statement.
    Continue,
}

impl OnError {
    pub fn parse(s: &str) -> Result<OnError, String> {
        match s {
            "stop" => Ok(OnError::Stop),
            "continue" => Ok(OnError::Continue),
            _ => Err(format!("--on-error {s}: allowed stop, continue")),
        }
    }
}

/// Result of one replay.
pub struct Replay {
    pub world: World,
    /// Commands (trace lines) executed in the measured part.
    pub commands: u64,
    /// Per database: transactions ended (committed or rolled back) in the measured part.
    pub ended: Vec<u64>,
    /// The database of the transaction in progress at the end (at the crash).
    pub in_flight: Option<usize>,
    /// Per database: content digest after setup and after each transaction (when recorded).
    pub digests: Vec<Vec<u64>>,
    pub snapshot: Option<Snapshot>,
    /// With a crash: the transactions ended per database before the command during which it
    /// happened, and the database whose transaction that command belongs to. (Not `ended` and
    /// `in_flight`: SQLite may report success for a command whose I/O failed at the crash, a
    /// rollback's, and the loop then goes on to the next command that fails, counting the
    /// transaction ended and, after an I/O-free `BEGIN`, the next one in flight.)
    pub at_crash: Option<(Vec<u64>, Option<usize>)>,
    /// Statements SQLite rejected (with `OnError::Continue`): line and message.
    pub errors: Vec<String>,
    /// Per command of the measured part: the virtual-machine instructions SQLite executed
    /// (`execute_counted`).
    pub vm_steps: Vec<u32>,
}

/// The connection settings the journal model needs: 1 KiB pages, the journal written and synced
/// in the shape [`super::vfs`] translates (no cache spill, full sync, statement journals in
/// memory), freed content not zeroed (the bundled SQLite's default, which Debian's build
/// changes). The loadable extension applies the same string to its connections.
pub const SETTINGS: &str = "PRAGMA page_size=1024; PRAGMA synchronous=FULL; PRAGMA cache_spill=OFF; \
                            PRAGMA secure_delete=OFF; PRAGMA temp_store=MEMORY; PRAGMA cache_size=4000;";

fn open(name: &str) -> Result<Connection, String> {
    crate::workload::sqlite::bridge::before_open();
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let c = Connection::open_with_flags_and_vfs(name, flags, vfs::VFS_NAME).map_err(|e| format!("open {name}: {e}"))?;
    c.execute_batch(SETTINGS).map_err(|e| format!("{name}: settings: {e}"))?;
    Ok(c)
}

fn set_mode(c: &Connection, mode: &str) -> Result<(), String> {
    let got: String =
        c.query_row(&format!("PRAGMA journal_mode={mode}"), [], |r| r.get(0)).map_err(|e| e.to_string())?;
    if got.eq_ignore_ascii_case(mode) {
        Ok(())
    } else {
        Err(format!("journal_mode {mode} refused (got {got})"))
    }
}

/// FNV-1a digest of every row of every table, tables in name order, rows sorted by all their
/// columns (so `WITHOUT ROWID` tables too).
pub fn digest(c: &Connection) -> Result<u64, String> {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let mut eat = |b: &[u8]| {
        for &x in b {
            h = (h ^ x as u64).wrapping_mul(0x100_0000_01b3);
        }
    };
    let e = |e: rusqlite::Error| e.to_string();
    let mut st = c.prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").map_err(e)?;
    let tables: Vec<String> = st.query_map([], |r| r.get(0)).map_err(e)?.collect::<Result<_, _>>().map_err(e)?;
    for t in tables {
        eat(t.as_bytes());
        let n = c.prepare(&format!("SELECT * FROM \"{t}\"")).map_err(e)?.column_count();
        let order: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        let mut st = c.prepare(&format!("SELECT * FROM \"{t}\" ORDER BY {}", order.join(", "))).map_err(e)?;
        let mut rows = st.query([]).map_err(e)?;
        while let Some(r) = rows.next().map_err(e)? {
            for i in 0..n {
                use rusqlite::types::ValueRef::*;
                match r.get_ref(i).map_err(e)? {
                    Null => eat(&[0]),
                    Integer(v) => eat(&[&[1], &v.to_le_bytes()[..]].concat()),
                    Real(v) => eat(&[&[2], &v.to_le_bytes()[..]].concat()),
                    Text(s) | Blob(s) => {
                        eat(&[3]);
                        eat(&(s.len() as u64).to_le_bytes());
                        eat(s);
                    }
                }
            }
        }
    }
    Ok(h)
}

/// Replay `trace`. `crash_at`: crash at that event of the measured part. `kinds`: record the
/// kind of every event. `digests`: record the oracle digests.
pub fn replay(
    trace: &Trace,
    setup: &Setup,
    crash_at: Option<u64>,
    kinds: bool,
    digests: bool,
) -> Result<Replay, String> {
    let _g = lock();
    replay_locked(trace, setup, crash_at, kinds, digests, None)
}

/// A crash state taken during a replay without crashing ([`Media::capture_at`]): the event
/// before which it was taken, the durable state, and the counts a crash there leaves
/// ([`Replay::at_crash`]): the transactions ended per database before the command that made
/// the event, and the database whose transaction that command belongs to.
pub struct Captured {
    pub event: u64,
    pub snapshot: Snapshot,
    pub ended: Vec<u64>,
    pub in_flight: Option<usize>,
}

/// What a capturing replay hands its caller after every command of the measured part (outside
/// any SQLite call): the states captured during the command, the oracle digests so far (as
/// [`Replay::digests`]), and whether the trace has ended.
pub type OnCommand<'a> = &'a mut dyn FnMut(&mut Vec<Captured>, &[Vec<u64>], bool) -> Result<(), String>;

/// Replay `trace` once, recording the kinds of its events and the oracle digests, and capture
/// the crash state before each of `events` (sorted, distinct) without crashing: one pass in
/// place of a crash run per event. The caller holds [`lock`]; `on_command` may run other
/// threads' SQLite between commands (this thread's world stays installed).
pub fn replay_capturing(
    trace: &Trace,
    setup: &Setup,
    events: Vec<u64>,
    on_command: OnCommand,
) -> Result<Replay, String> {
    replay_locked(trace, setup, None, true, true, Some((events, on_command)))
}

/// [`replay`] with the lock held by the caller (other threads' replays are excluded, and this
/// one may be run on a helper thread of the lock's holder).
pub fn replay_locked(
    trace: &Trace,
    setup: &Setup,
    crash_at: Option<u64>,
    kinds: bool,
    digests: bool,
    capture: Option<(Vec<u64>, OnCommand)>,
) -> Result<Replay, String> {
    Ok(replay_world(trace, setup, crash_at, kinds, digests, capture, false)?.0)
}

/// A plain replay of `trace` under `setup` with its SQLite calls recorded
/// ([`super::vfs_tape::record`] makes the tape of it).
pub fn replay_recorded(trace: &Trace, setup: &Setup) -> Result<(Replay, Recording), String> {
    let _g = lock();
    let (r, rec) = replay_world(trace, setup, None, false, false, None, true)?;
    Ok((r, rec.expect("recorded")))
}

/// The world a replay under `setup` starts from: the media with a formatted journal area, and
/// the journal's (empty) structures.
pub(super) fn new_world(setup: &Setup) -> World {
    let mut media = Media::new(&setup.pcm, setup.frames, setup.timing.clone());
    Journal::format(&mut media);
    World::new(media, Journal::new(setup.policy.clone(), setup.frames as usize), None)
}

#[allow(clippy::too_many_arguments)]
fn replay_world(
    trace: &Trace,
    setup: &Setup,
    crash_at: Option<u64>,
    kinds: bool,
    digests: bool,
    capture: Option<(Vec<u64>, OnCommand)>,
    record: bool,
) -> Result<(Replay, Option<Recording>), String> {
    vfs::register()?;
    vfs::seed_sqlite_prng(setup.seed);
    let mut world = new_world(setup);
    world.recording = record.then(Recording::default);
    vfs::install(world);
    let r = replay_inner(trace, setup, crash_at, kinds, digests, capture);
    let mut world = vfs::take();
    let recording = world.recording.take();
    let (commands, ended, in_flight, digests, errors, at_crash, vm_steps) = r?;
    let snapshot = world.media.snapshot.take();
    Ok((Replay { world, commands, ended, in_flight, digests, snapshot, at_crash, errors, vm_steps }, recording))
}

/// The end of the setup part: the database files made durable, the statistics cleared, the
/// crash armed, the states to capture and the event kinds to record set, the defect switched
/// on; a recording notes where it happened.
pub(super) fn begin_measured(
    w: &mut World,
    setup: &Setup,
    crash_at: Option<u64>,
    kinds: bool,
    capture: Option<Vec<u64>>,
) {
    w.media.settle();
    w.media.reset_stats();
    w.journal.stats = Default::default();
    w.db_page_writes = 0;
    w.media.arm(crash_at, setup.seed);
    if let Some(events) = capture {
        w.media.capture_at(events);
    }
    w.media.kinds = kinds.then(Vec::new);
    w.bug = setup.bug;
    w.journal.bug = setup.bug;
    if let Some(r) = &mut w.recording {
        r.measured(&w.media.dbs);
    }
}

/// Commands, transactions ended per database, the database in flight, the digests, the errors,
/// the counts at the crash ([`Replay::at_crash`]), the VM instructions per command.
type Counts = (u64, Vec<u64>, Option<usize>, Vec<Vec<u64>>, Vec<String>, Option<(Vec<u64>, Option<usize>)>, Vec<u32>);

/// Run `sql` as `Connection::execute_batch` does (each statement prepared and stepped once,
/// then finalized) and return the virtual-machine instructions SQLite executed for it
/// (`SQLITE_STMTSTATUS_VM_STEP`, counted up to an error too): a deterministic count of
/// SQLite's own work per command.
pub(crate) fn execute_counted(c: &Connection, sql: &str, steps: &mut u64) -> rusqlite::Result<()> {
    let mut batch = rusqlite::Batch::new(c, sql);
    while let Some(mut st) = batch.next()? {
        let stepped = st.raw_query().next().map(|_| ());
        *steps += st.get_status(rusqlite::StatementStatus::VmStep).max(0) as u64;
        stepped?;
    }
    Ok(())
}

/// What [`set_up`] leaves: a connection per database (opened ones), each database's digests,
/// and the database the setup left in use.
type SetUp = (Vec<Option<Connection>>, Vec<Vec<u64>>, usize);

/// Open every database of `trace` and run its setup commands without a journal; then the
/// journal mode of the measured region, and each database's first digest if `dig`.
fn set_up(trace: &Trace, setup: &Setup, dig: bool) -> Result<SetUp, String> {
    let mut conns: Vec<Option<Connection>> = (0..trace.dbs.len()).map(|_| None).collect();
    let mut cur = 0usize;
    let sql_err = |i: usize, e: rusqlite::Error| format!("trace setup command {i}: {e}");
    for (i, op) in trace.setup.iter().enumerate() {
        match op {
            Op::Use(d) => {
                cur = *d;
                if conns[cur].is_none() {
                    let c = open(&trace.dbs[cur])?;
                    set_mode(&c, "off")?;
                    conns[cur] = Some(c);
                }
            }
            Op::Begin => conns[cur].as_ref().expect("@db first").execute_batch("BEGIN").map_err(|e| sql_err(i, e))?,
            Op::Commit => conns[cur].as_ref().expect("@db first").execute_batch("COMMIT").map_err(|e| sql_err(i, e))?,
            Op::Rollback => {
                conns[cur].as_ref().expect("@db first").execute_batch("ROLLBACK").map_err(|e| sql_err(i, e))?
            }
            Op::Sql(s) => conns[cur].as_ref().expect("@db first").execute_batch(s).map_err(|e| sql_err(i, e))?,
        }
    }
    for (d, c) in conns.iter_mut().enumerate() {
        if c.is_none() {
            let cn = open(&trace.dbs[d])?;
            set_mode(&cn, "off")?;
            *c = Some(cn);
        }
    }
    let mut out_digests = vec![Vec::new(); trace.dbs.len()];
    for (d, c) in conns.iter().enumerate() {
        set_mode(c.as_ref().expect("opened"), if setup.journal { "delete" } else { "off" })?;
        if dig {
            out_digests[d].push(digest(c.as_ref().expect("opened"))?);
        }
    }
    Ok((conns, out_digests, cur))
}

/// The message of measured command `i` (`sql`) that failed with `e`: its line, its start, and
/// the VFS's own error if it has one.
fn command_error(trace: &Trace, i: usize, sql: &str, e: rusqlite::Error, vfs_err: Option<String>) -> String {
    let at = trace.lines.get(i).map_or(format!("trace command {i}"), |n| format!("line {n}"));
    let shown: String = sql.chars().take(60).collect::<String>().replace('\n', " ");
    format!("{at} ({shown}): {e}{}", vfs_err.map(|m| format!(" ({m})")).unwrap_or_default())
}

fn replay_inner(
    trace: &Trace,
    setup: &Setup,
    crash_at: Option<u64>,
    kinds: bool,
    dig: bool,
    mut capture: Option<(Vec<u64>, OnCommand)>,
) -> Result<Counts, String> {
    let (conns, mut out_digests, mut cur) = set_up(trace, setup, dig)?;
    let events = capture.as_mut().map(|(events, _)| std::mem::take(events));
    vfs::with(|w| begin_measured(w, setup, crash_at, kinds, events));
    let mut ended = vec![0u64; trace.dbs.len()];
    let mut in_flight = None;
    let mut fresh: Vec<Captured> = Vec::new();
    let mut at_crash = None;
    let (mut commands, mut errors, mut vm_steps) = (0u64, Vec::new(), Vec::new());
    for (i, op) in trace.ops.iter().enumerate() {
        let (sql, ends) = match op {
            Op::Use(d) => {
                cur = *d;
                continue;
            }
            Op::Begin => {
                in_flight = Some(cur);
                ("BEGIN", false)
            }
            Op::Commit => ("COMMIT", true),
            Op::Rollback => ("ROLLBACK", true),
            Op::Sql(s) => {
                let auto = in_flight.is_none();
                if auto {
                    in_flight = Some(cur);
                }
                (s.as_str(), auto)
            }
        };
        if let Some((_, hook)) = &mut capture {
            hook(&mut fresh, &out_digests, false)?;
        }
        commands += 1;
        let c = conns[cur].as_ref().expect("opened");
        let mut steps = 0u64;
        let done = execute_counted(c, sql, &mut steps);
        vm_steps.push(steps.min(u32::MAX as u64) as u32);
        if crash_at.is_some() && at_crash.is_none() && vfs::with(|w| w.media.crashed()) {
            at_crash = Some((ended.clone(), in_flight));
        }
        if capture.is_some() {
            take_captured(&mut fresh, &ended, in_flight);
        }
        if let Err(e) = done {
            let (crashed, err) = vfs::with(|w| (w.media.crashed(), w.error.clone()));
            if crashed {
                break;
            }
            let msg = command_error(trace, i, sql, e, err);
            if setup.on_error == OnError::Stop {
                return Err(msg);
            }
            errors.push(msg);
            if ends && !matches!(op, Op::Commit | Op::Rollback) {
                in_flight = None;
            }
            continue;
        }
        if ends {
            ended[cur] += 1;
            in_flight = None;
            if dig {
                out_digests[cur].push(digest(c)?);
            }
        }
    }
    if let Some((_, hook)) = &mut capture {
        hook(&mut fresh, &out_digests, true)?;
    }
    drop(conns);
    Ok((commands, ended, in_flight, out_digests, errors, at_crash, vm_steps))
}

/// The states captured during the command just run: a crash there stops the loop there, with
/// `ended` and `in_flight` as they are now. Handed over before the next command, once the
/// digests of the transactions this one ends are recorded.
fn take_captured(fresh: &mut Vec<Captured>, ended: &[u64], in_flight: Option<usize>) {
    let taken = vfs::with(|w| std::mem::take(&mut w.media.captured));
    fresh.extend(taken.into_iter().map(|(event, snapshot)| Captured {
        event,
        snapshot,
        ended: ended.to_vec(),
        in_flight,
    }));
}

/// Event kinds recorded by a replay (empty if not recorded).
pub fn kinds_of(r: &Replay) -> &[EventKind] {
    r.world.media.kinds.as_deref().unwrap_or(&[])
}
