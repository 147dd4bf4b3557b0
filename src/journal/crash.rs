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
use super::trace::Trace;
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

/// Run `crashes` crash points of `trace` under `setup` (or only event `only`).
pub fn campaign(
    trace: &Trace,
    setup: &Setup,
    crashes: u64,
    only: Option<u64>,
    bug_name: Option<&str>,
) -> Result<CrashReport, String> {
    let oracle = replay::replay(trace, setup, None, true, true)?;
    let kinds = replay::kinds_of(&oracle).to_vec();
    let points = match only {
        Some(k) if k >= kinds.len() as u64 => {
            return Err(format!("--crash-at {k}: allowed 0..{} (events of this run)", kinds.len()))
        }
        Some(k) => vec![k],
        None if kinds.is_empty() => Vec::new(),
        None => choose(&kinds, crashes, setup.seed),
    };
    let mut per_kind: Vec<(EventKind, u64)> = EVENT_KINDS.iter().map(|&k| (k, 0)).collect();
    let mut violations = Vec::new();
    for &k in &points {
        let kind = kinds[k as usize];
        per_kind.iter_mut().find(|(x, _)| *x == kind).expect("kind").1 += 1;
        if let Err(what) = check_point(trace, setup, k, &kinds, &oracle.digests) {
            violations.push(Violation {
                event: k,
                kind,
                what,
                replay: format!("--config {} --crash-at {k} --seed {}", setup.policy.name, setup.seed),
            });
        }
    }
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

/// Crash at event `k`, recover, check. Err describes the violation.
pub fn check_point(
    trace: &Trace,
    setup: &Setup,
    k: u64,
    kinds: &[EventKind],
    digests: &[Vec<u64>],
) -> Result<(), String> {
    let run = replay::replay(trace, setup, Some(k), true, false)?;
    let got = replay::kinds_of(&run);
    if got.len() as u64 != k || got != &kinds[..k as usize] {
        return Err(format!("crash run diverged from the oracle run ({} events before the crash)", got.len()));
    }
    let snap = run.snapshot.ok_or("crash point not reached")?;
    let mut media = Media::from_snapshot(&setup.pcm, &snap, setup.timing.clone());
    let journal = Journal::rebuild(&mut media, setup.policy.clone()).map_err(|e| format!("rebuild: {e}"))?;
    let _g = replay::lock();
    vfs::install(World { media, journal, bug: None, error: None, db_page_writes: 0 });
    let r = verify(trace, &run.ended, run.in_flight, digests);
    let w = vfs::take();
    r?;
    if let Some(s) = w.journal.slots.iter().find(|s| s.hot) {
        return Err(format!("journal of {} still hot after recovery", s.name));
    }
    w.journal.check(&w.media).map_err(|e| format!("metadata after recovery: {e}"))
}

fn verify(trace: &Trace, ended: &[u64], in_flight: Option<usize>, digests: &[Vec<u64>]) -> Result<(), String> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    for (d, name) in trace.dbs.iter().enumerate() {
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
