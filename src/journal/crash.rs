//! The crash checker of the PCM journal: replay a trace, crash at a chosen event, rebuild the
//! DRAM metadata from the durable PCM image, reopen every database with real SQLite (which
//! finds a hot journal and rolls it back by itself), and check:
//!
//! - `PRAGMA integrity_check` is `ok` for every database file;
//! - each database's content equals the oracle's state after its last ended transaction, or,
//!   for the database of the interrupted transaction, after that transaction (never a mix);
//! - after SQLite's recovery no journal is hot, and the rebuilt DRAM metadata agrees with the
//!   PCM image ([`Journal::check`]).
//!
//! Crash points are drawn per event kind in turn (journal data, journal metadata, GC and
//! migration, database write, database sync), so mid-journal-write, mid-database-write and
//! mid-GC crashes are all covered whenever the run has such events. The oracle run and every
//! crash run are the same deterministic replay, which is checked: the crash run must reach
//! the chosen event with the same event kind.
//!
//! Not checked: crashes during the setup part; crashes during recovery itself (recovery's own
//! repairs are idempotent by construction, argued in docs/journal-format.md, not tested).

use super::alloc::Journal;
use super::media::{EventKind, Media, EVENT_KINDS};
use super::replay::{self, digest, Setup};
use super::sql_trace::Trace;
use super::vfs::{self, World};
use crate::rng::Rng;
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

/// One violation.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    pub event: u64,
    pub kind: EventKind,
    pub what: String,
    pub replay: String,
}

/// Result of a crash campaign.
#[derive(Clone, Debug, Serialize)]
pub struct CrashReport {
    pub config: String,
    pub seed: u64,
    pub events: u64,
    pub crash_points: u64,
    pub per_kind: Vec<(EventKind, u64)>,
    pub violations: u64,
    /// The first violations (at most 10).
    pub violation_details: Vec<Violation>,
    pub bug: Option<String>,
    pub version: &'static str,
    pub git_rev: &'static str,
}

/// Choose `n` crash events, cycling over the kinds present.
pub fn choose(kinds: &[EventKind], n: u64, seed: u64) -> Vec<u64> {
    let mut by: Vec<Vec<u64>> = vec![Vec::new(); EVENT_KINDS.len()];
    for (i, k) in kinds.iter().enumerate() {
        by[EVENT_KINDS.iter().position(|x| x == k).expect("kind")].push(i as u64);
    }
    let present: Vec<&Vec<u64>> = by.iter().filter(|v| !v.is_empty()).collect();
    let mut rng = Rng::derive(seed, 0xC2A5);
    let mut pts: Vec<u64> = (0..n)
        .map(|i| {
            let v = present[(i as usize) % present.len()];
            v[rng.below(v.len() as u64) as usize]
        })
        .collect();
    pts.sort_unstable();
    pts
}

/// Run `crashes` crash points of `trace` under `setup` (or only event `only`), their checks on
/// `threads` workers (the report does not depend on it).
///
/// Two replays in all, not one per point: the first records the kinds of the events (from which
/// the points are drawn); the second records the oracle digests and captures, before each
/// chosen event, the durable state that a crash there leaves ([`replay::replay_capturing`]).
/// Captured states are checked in batches, the replay paused between two commands, each worker
/// on its own world; SQLite's generator is saved and restored around a batch, so the replay
/// draws its journal nonces as if alone. A captured state is what a run crashed at its event
/// holds: the same replay up to there, the same generator for the torn sectors, the counts of
/// the transactions as the crash leaves them ([`replay::Replay::at_crash`]). A crash run of
/// its own guards this at the 1st, 8th, 64th, ... point (and at `only`): it must reach the
/// event through the same kinds of events and leave the same state and counts, or the point is
/// a violation, as any point's was when each had its own crash run.
pub fn campaign(
    trace: &Trace,
    setup: &Setup,
    crashes: u64,
    only: Option<u64>,
    bug_name: Option<&str>,
    threads: usize,
    progress: bool,
) -> Result<CrashReport, String> {
    let _g = replay::lock();
    let first = replay::replay_locked(trace, setup, None, true, false, None)?;
    let kinds = replay::kinds_of(&first).to_vec();
    drop(first);
    let points = match only {
        Some(k) if k >= kinds.len() as u64 => {
            return Err(format!("--crash-at {k}: allowed 0..{} (events of this run)", kinds.len()))
        }
        Some(k) => vec![k],
        None if kinds.is_empty() => Vec::new(),
        None => choose(&kinds, crashes, setup.seed),
    };
    let mut events = points.clone();
    events.dedup();
    let mut verdicts: Vec<(u64, Result<(), String>)> = Vec::with_capacity(events.len());
    if !events.is_empty() {
        let threads = threads.max(1);
        let mut batch = Batch {
            trace,
            setup,
            kinds: &kinds,
            events: &events,
            threads,
            pending: Vec::new(),
            spares: Vec::new(),
            bar: progress.then(|| crate::crash::progress_bar(events.len() as u64)).flatten().inspect(|b| {
                b.set_message("0 failing");
            }),
            verdicts: &mut verdicts,
        };
        let mut on_command = |fresh: &mut Vec<replay::Captured>, digests: &[Vec<u64>], end: bool| {
            batch.pending.append(fresh);
            batch.check_ready(digests, end);
            Ok(())
        };
        let second = replay::replay_capturing(trace, setup, events.clone(), &mut on_command);
        if let Some(bar) = &batch.bar {
            bar.finish_and_clear();
        }
        if replay::kinds_of(&second?) != &kinds[..] {
            return Err("journal-crashtest: two replays of the trace made different events".into());
        }
    }
    verdicts.sort_by_key(|v| v.0);
    debug_assert_eq!(verdicts.iter().map(|v| v.0).collect::<Vec<_>>(), events);
    let (per_kind, violations) = tally(&points, &kinds, &verdicts, setup);
    Ok(CrashReport {
        config: setup.policy.name.clone(),
        seed: setup.seed,
        events: kinds.len() as u64,
        crash_points: points.len() as u64,
        per_kind,
        violations: violations.len() as u64,
        violation_details: violations.into_iter().take(10).collect(),
        bug: bug_name.map(str::to_string),
        version: crate::runner::VERSION,
        git_rev: crate::runner::GIT_REV,
    })
}

/// Per event kind, the crash points at events of that kind; and a violation per point whose
/// event's verdict failed (`verdicts` sorted by event, one per distinct event of `points`).
fn tally(
    points: &[u64],
    kinds: &[EventKind],
    verdicts: &[(u64, Result<(), String>)],
    setup: &Setup,
) -> (Vec<(EventKind, u64)>, Vec<Violation>) {
    let mut per_kind: Vec<(EventKind, u64)> = EVENT_KINDS.iter().map(|&k| (k, 0)).collect();
    let mut violations = Vec::new();
    for &k in points {
        let kind = kinds[k as usize];
        per_kind.iter_mut().find(|(x, _)| *x == kind).expect("kind").1 += 1;
        let at = verdicts.partition_point(|v| v.0 < k);
        if let Err(what) = &verdicts[at].1 {
            violations.push(Violation {
                event: k,
                kind,
                what: what.clone(),
                replay: format!("--config {} --crash-at {k} --seed {}", setup.policy.name, setup.seed),
            });
        }
    }
    (per_kind, violations)
}

/// Captured states waiting for their check, and the checks made so far.
struct Batch<'a> {
    trace: &'a Trace,
    setup: &'a Setup,
    kinds: &'a [EventKind],
    threads: usize,
    /// The distinct events captured, in order (a guard's number is its place here).
    events: &'a [u64],
    pending: Vec<replay::Captured>,
    /// The progress bar of the distinct events checked (`--crashes` draws with replacement).
    bar: Option<indicatif::ProgressBar>,
    /// Each worker's media, done with, to make the next state's from ([`Media::from_snapshot_reusing`]).
    spares: Vec<Option<Media>>,
    verdicts: &'a mut Vec<(u64, Result<(), String>)>,
}

impl Batch<'_> {
    /// Check the pending states whose oracle digests are all recorded (the one after the
    /// transaction in flight too), once there are enough of them to keep every worker busy, or
    /// all at the end of the trace.
    fn check_ready(&mut self, digests: &[Vec<u64>], end: bool) {
        let ready = |c: &replay::Captured| end || c.in_flight.is_none_or(|d| digests[d].len() as u64 > c.ended[d] + 1);
        let n = self.pending.iter().filter(|c| ready(c)).count();
        if n == 0 || (!end && n < BATCH_PER_THREAD * self.threads) {
            return;
        }
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending).into_iter().partition(|c| ready(c));
        self.pending = later;
        let (trace, setup, kinds) = (self.trace, self.setup, self.kinds);
        let chunk = now.len().div_ceil(self.threads);
        let spares = &mut self.spares;
        spares.resize_with(self.threads, || None);
        let found: Vec<Result<(), String>> = vfs::keeping_sqlite_prng(|| {
            std::thread::scope(|s| {
                let workers: Vec<_> = now
                    .chunks(chunk)
                    .zip(spares.iter_mut())
                    .map(|(part, spare)| {
                        s.spawn(move || {
                            let mut out = Vec::with_capacity(part.len());
                            for c in part {
                                let (v, media) = check_captured(trace, setup, c, digests, spare.take());
                                *spare = Some(media);
                                out.push(v);
                            }
                            out
                        })
                    })
                    .collect();
                workers.into_iter().flat_map(|w| w.join().expect("journal crash-check worker panicked")).collect()
            })
        });
        for (c, v) in now.iter().zip(found) {
            // A guarded point whose crash run disagrees is a violation of its own (checked first,
            // as when every point had its own crash run).
            let nth = self.events.partition_point(|&e| e < c.event) as u64 + 1;
            let guarded = crate::crash::guard_due(nth, 3);
            let v = match guarded {
                true => crash_run_agrees(trace, setup, kinds, c).and(v),
                false => v,
            };
            self.verdicts.push((c.event, v));
        }
        if let Some(bar) = &self.bar {
            bar.set_position(self.verdicts.len() as u64);
            bar.set_message(format!("{} failing", self.verdicts.iter().filter(|v| v.1.is_err()).count()));
        }
    }
}

/// Captured states checked per worker in a batch (the batch's snapshots are held at once).
const BATCH_PER_THREAD: usize = 8;

/// The guard of a captured state: a replay crashed at its event, on a thread of its own (its
/// own world; SQLite's generator is restored after it), reaches the event through the same
/// kinds of events as the oracle and leaves the same state.
pub(super) fn crash_run_agrees(
    trace: &Trace,
    setup: &Setup,
    kinds: &[EventKind],
    c: &replay::Captured,
) -> Result<(), String> {
    let k = c.event;
    let run = vfs::keeping_sqlite_prng(|| {
        std::thread::scope(|s| s.spawn(|| replay::replay_locked(trace, setup, Some(k), true, false, None)).join())
    })
    .expect("journal crash run panicked")?;
    let got = replay::kinds_of(&run);
    if got.len() as u64 != k || got != &kinds[..k as usize] {
        return Err(format!("crash run diverged from the oracle run ({} events before the crash)", got.len()));
    }
    let counts = run.at_crash.as_ref().map(|(e, f)| (e, *f));
    let same = run.snapshot.as_ref() == Some(&c.snapshot) && counts == Some((&c.ended, c.in_flight));
    if !same {
        return Err("crash run left another state than the replay captured at its event".into());
    }
    Ok(())
}

/// Check a captured crash state: rebuild the journal's metadata from it, reopen every database
/// with real SQLite on this thread's world (its media made from `spare`, media done with, if
/// any). Err describes the violation; the media are returned for the next state.
fn check_captured(
    trace: &Trace,
    setup: &Setup,
    c: &replay::Captured,
    digests: &[Vec<u64>],
    spare: Option<Media>,
) -> (Result<(), String>, Media) {
    let timing = setup.timing.clone();
    let mut media = match spare {
        Some(old) => Media::from_snapshot_reusing(old, &c.snapshot, timing),
        None => Media::from_snapshot(&setup.pcm, &c.snapshot, timing),
    };
    let journal = match Journal::rebuild(&mut media, setup.policy.clone()) {
        Ok(j) => j,
        Err(e) => return (Err(format!("rebuild: {e}")), media),
    };
    vfs::install(World::new(media, journal, None));
    let r = verify(trace, &c.ended, c.in_flight, digests);
    let w = vfs::take();
    let r = r.and_then(|()| match w.journal.slots.iter().find(|s| s.hot) {
        Some(s) => Err(format!("journal of {} still hot after recovery", s.name)),
        None => w.journal.check(&w.media).map_err(|e| format!("metadata after recovery: {e}")),
    });
    (r, w.media)
}

fn verify(trace: &Trace, ended: &[u64], in_flight: Option<usize>, digests: &[Vec<u64>]) -> Result<(), String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    for (d, name) in trace.dbs.iter().enumerate() {
        crate::workload::sqlite::bridge::before_open();
        let c = Connection::open_with_flags_and_vfs(name, flags, vfs::VFS_NAME).map_err(|e| format!("{name}: {e}"))?;
        c.execute_batch("PRAGMA temp_store=MEMORY").map_err(|e| e.to_string())?;
        let ok: String = c
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| format!("{name}: integrity_check: {e}"))?;
        if ok != "ok" {
            return Err(format!("{name}: integrity_check: {}", ok.replace('\n', "; ")));
        }
        let h = digest(&c).map_err(|e| format!("{name}: {e}"))?;
        let before = ended[d] as usize;
        let mut allowed = vec![digests[d][before]];
        if in_flight == Some(d) {
            if let Some(&after) = digests[d].get(before + 1) {
                allowed.push(after);
            }
        }
        if !allowed.contains(&h) {
            return Err(format!(
                "{name}: content is neither the state after transaction {before} nor after the interrupted one"
            ));
        }
    }
    Ok(())
}
