//! End-to-end tests of the journal with real SQLite (short traces: seconds in all).

use super::media::Timing;
use super::replay::{replay, Setup};
use super::sql_trace::Trace;
use super::*;

fn setup(config: &str, seed: u64) -> Setup {
    Setup {
        policy: Policy::parse(config).unwrap(),
        pcm: PcmConfig::default(),
        timing: Timing::default(),
        frames: DEFAULT_FRAMES,
        seed,
        journal: true,
        bug: None,
        on_error: Default::default(),
    }
}

fn small(app: App, txs: u64) -> Trace {
    apps::generate(app, 1, 3, Some(txs))
}

#[test]
fn real_sqlite_writes_its_journal_into_pcm_frames() {
    let tr = small(App::Tw, 30);
    let r = replay(&tr, &setup("RU-S2X", 1), None, false, false).unwrap();
    let j = &r.world.journal;
    assert_eq!(j.stats.journals, 30, "one journal per transaction");
    assert!(j.stats.records >= 60, "{:?}", j.stats);
    assert!(j.slots.iter().all(|s| !s.hot), "every journal deleted at commit");
    assert!(r.world.media.pcm.wear.total_bit_updates > 0);
    j.check(&r.world.media).unwrap();
}

fn campaign_of(config: &str, frames: u64, txs: u64, crashes: u64, bug: Option<&str>) -> crash::CrashReport {
    let seed = 11;
    println!("crash campaign {config} frames {frames} txs {txs} crashes {crashes} bug {bug:?} seed {seed}");
    let tr = small(App::Kt, txs);
    let s = Setup { frames, bug: bug.map(|b| vfs::Bug::parse(b).unwrap()), ..setup(config, seed) };
    let r = crash::campaign(&tr, &s, crashes, None, bug, 2, false).unwrap();
    for v in r.violation_details.iter().take(3) {
        println!("  violation at event {} ({:?}): {}", v.event, v.kind, v.what);
    }
    r
}

#[test]
fn crashes_anywhere_recover_to_before_or_after_the_interrupted_transaction() {
    for config in ["RU-S2X", "RR", "RU20-S2X-WH64"] {
        let r = campaign_of(config, DEFAULT_FRAMES, 25, 40, None);
        assert_eq!(r.crash_points, 40);
        assert_eq!(r.violations, 0, "{config}: {:?}", r.violation_details.first());
    }
}

#[test]
fn crashes_during_gc_and_migration_recover_too() {
    for config in ["RU2-S2X-WH4-INV25", "RU2-S2", "RR-S2X"] {
        let r = campaign_of(config, 6, 40, 40, None);
        let gc = r.per_kind.iter().find(|(k, _)| *k == media::EventKind::Gc).unwrap().1;
        assert!(gc > 0 || config.starts_with("RR"), "{config}: no GC crash point: {:?}", r.per_kind);
        assert_eq!(r.violations, 0, "{config}: {:?}", r.violation_details.first());
    }
}

#[test]
fn the_checker_catches_the_hot_flag_cleared_before_the_database_sync() {
    let r = campaign_of("RU-S2X", DEFAULT_FRAMES, 25, 40, Some("hot-clear-before-db-sync"));
    assert!(r.violations > 0, "bug not caught");
}

#[test]
fn the_checker_catches_a_portion_shared_by_two_live_records() {
    let r = campaign_of("RU-S2X", DEFAULT_FRAMES, 25, 40, Some("reuse-live-portion"));
    assert!(r.violations > 0, "bug not caught");
}

#[test]
fn crashes_in_placement_per_portion_limits_and_lazy_gc_recover() {
    // 6 frames: placement into reuse-state frames, moves at the portion limit, collections
    // and frames taken back after a collection all happen in 40 transactions.
    for config in ["RU2-S2X", "RU20-S2X-WH64-INV25", "RU2F-S2X", "RR"] {
        let r = campaign_of(config, 6, 40, 40, None);
        assert_eq!(r.violations, 0, "{config}: {:?}", r.violation_details.first());
    }
}

#[test]
fn the_checker_catches_the_placement_gc_and_portion_limit_bugs() {
    for bug in ["place-taken-portion", "stale-association-kept", "portion-limit-shared"] {
        let r = campaign_of("RU2-S2X", 6, 40, 40, Some(bug));
        assert!(r.violations > 0, "{bug} not caught");
    }
}

#[test]
fn a_rolled_back_transaction_reads_its_journal_back_and_crashes_around_it_recover() {
    let tr = rounds();
    let r = replay(&tr, &setup("RU-S2X", 5), None, false, true).unwrap();
    let d = &r.digests[0];
    assert_eq!(d.len(), 7);
    assert_eq!(d[1], d[0], "round 0 rolled back: content unchanged");
    assert_ne!(d[2], d[1], "round 1 committed");
    assert_eq!(r.world.journal.stats.journals, 6);
    r.world.journal.check(&r.world.media).unwrap();
    let c = crash::campaign(&tr, &setup("RU-S2X", 5), 40, None, None, 1, false).unwrap();
    assert_eq!(c.violations, 0, "{:?}", c.violation_details.first());
}

/// A short script with rolled-back and committed transactions (a crash during a rollback is
/// one SQLite may report as a success).
fn rounds() -> Trace {
    let mut text = String::from("@db r.db\nCREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)\n");
    for i in 0..200 {
        text += &format!("INSERT INTO t VALUES({i}, '{}')\n", "x".repeat(i % 50));
    }
    text += "@measure\n";
    for round in 0..6 {
        text += "BEGIN\n";
        text += &format!("UPDATE t SET v = 'round {round}' WHERE id % 7 = {round}\n");
        text += &format!("DELETE FROM t WHERE id = {}\n", 10 + round);
        text += if round % 2 == 0 { "ROLLBACK\n" } else { "COMMIT\n" };
    }
    Trace::parse(&text).unwrap()
}

/// The capturing replay's state before an event equals the state a replay crashed at that
/// event leaves (durable bytes, torn sectors, the counts of transactions): at every event of
/// [`rounds`], and at every 16th of an application trace, for two configurations and seeds
/// whose torn sectors differ.
#[test]
fn a_captured_state_is_the_state_a_crash_run_leaves_at_every_event() {
    for (tr, config, seed, step) in
        [(rounds(), "RU-S2X", 5, 1), (small(App::Kt, 12), "RU20-S2X", 3, 16), (small(App::Kt, 12), "RR", 4, 16)]
    {
        let s = setup(config, seed);
        let _g = replay::lock();
        let first = replay::replay_locked(&tr, &s, None, true, false, None).unwrap();
        let kinds = replay::kinds_of(&first).to_vec();
        assert!(kinds.len() > 50, "{config}: {} events", kinds.len());
        let events: Vec<u64> = (0..kinds.len() as u64).step_by(step).collect();
        let mut captured = Vec::new();
        let mut take = |fresh: &mut Vec<replay::Captured>, _: &[Vec<u64>], _: bool| {
            captured.append(fresh);
            Ok(())
        };
        replay::replay_capturing(&tr, &s, events.clone(), &mut take).unwrap();
        assert_eq!(captured.iter().map(|c| c.event).collect::<Vec<_>>(), events, "{config}");
        for c in &captured {
            assert_eq!(crash::crash_run_agrees(&tr, &s, &kinds, c), Ok(()), "{config} seed {seed} event {}", c.event);
        }
    }
}

/// The guard of a captured state catches a capture that differs from the crash run's state:
/// a byte of the PCM image, a torn sector of a database file, the transactions ended, the one
/// in flight.
#[test]
fn the_crash_run_guard_catches_a_wrong_capture() {
    let tr = small(App::Kt, 12);
    let s = setup("RU20-S2X", 3);
    let _g = replay::lock();
    let first = replay::replay_locked(&tr, &s, None, true, false, None).unwrap();
    let kinds = replay::kinds_of(&first).to_vec();
    // An event inside a transaction (a journal write), after the first transaction ended.
    let k = (kinds.len() / 2..kinds.len()).find(|&k| kinds[k] == media::EventKind::JournalData).unwrap() as u64;
    let mut captured = Vec::new();
    let mut take = |fresh: &mut Vec<replay::Captured>, _: &[Vec<u64>], _: bool| {
        captured.append(fresh);
        Ok(())
    };
    replay::replay_capturing(&tr, &s, vec![k], &mut take).unwrap();
    let c = captured.pop().unwrap();
    assert_eq!(crash::crash_run_agrees(&tr, &s, &kinds, &c), Ok(()));
    let d = c.in_flight.expect("a journal write is inside a transaction");
    for i in 0..4 {
        let mut bad = replay::Captured {
            event: c.event,
            snapshot: c.snapshot.clone(),
            ended: c.ended.clone(),
            in_flight: c.in_flight,
        };
        match i {
            0 => bad.snapshot.pcm[100] ^= 1,
            1 => bad.snapshot.dbs[0].1.push(0),
            2 => bad.ended[d] += 1,
            _ => bad.in_flight = None,
        }
        assert!(crash::crash_run_agrees(&tr, &s, &kinds, &bad).is_err(), "wrong capture {i} not caught");
    }
}

#[test]
fn sqlite_cpu_time_is_its_instructions_at_the_boards_rate_unless_a_constant_replaces_it() {
    let tr = std::sync::Arc::new(apps::generate(App::Kt, 1, 1, Some(20)));
    let p = Policy::parse("RR-S2X").unwrap();
    let m = |dev: &Device| measure(("kt", "1"), &tr, &p, 1, DEFAULT_FRAMES, dev, replay::OnError::Stop).unwrap();
    let measured = m(&Device::default());
    let fixed = m(&Device::build(&[], Some(0)).unwrap());
    let mut host_dev = Device::default();
    host_dev.timing.cpu_time = cpu::CpuTime::HostCalibrated;
    let host = m(&host_dev);
    // ARM: the table's ARM instructions per virtual-machine instruction of kt trace 1 (the
    // journaled row), at the A9's cycles per instruction and 667 MHz.
    let row = cpu::table().iter().find(|r| r.app == "kt" && r.trace == "1" && r.journal).expect("kt 1 row");
    let arm = measured.vm_steps_per_command * row.arm_instructions as f64 / row.vm_steps as f64;
    assert!((measured.arm_instructions_per_command - arm).abs() < 1e-6, "{}", measured.arm_instructions_per_command);
    let want = arm * cpu::A9_CPI_MILLI as f64 / cpu::BOARD_CORE_MHZ as f64;
    assert!((measured.avg_cmd_cpu_ns - want).abs() < 1.0, "{} vs {want}", measured.avg_cmd_cpu_ns);
    assert_eq!(
        (measured.cpu_time_source, fixed.cpu_time_source, host.cpu_time_source),
        ("arm-a9", "constant", "host-calibrated")
    );
    // The host-calibrated variant: the former figure.
    let ps = host.timing.cpu_ps_per_vm_step as f64;
    assert_eq!(ps, (cpu::HOST_CYCLES_PER_VM_STEP * 1_000_000 / cpu::BOARD_CORE_MHZ) as f64);
    let want = host.vm_steps_per_command * ps / 1000.0;
    assert!((host.avg_cmd_cpu_ns - want).abs() < 1.0, "{} vs {want}", host.avg_cmd_cpu_ns);
    assert_eq!(host.arm_instructions_per_command, 0.0);
    assert!(measured.vm_steps_per_command_p10 <= measured.vm_steps_per_command_p90);
    assert_eq!((fixed.avg_cmd_cpu_ns, fixed.vm_steps_per_command), (0.0, measured.vm_steps_per_command));
    // The counted time is CPU + PCM + page-cache copies: the CPU time is its only difference
    // here, and the whole command time adds the syncs to it.
    let d = measured.avg_cmd_counted_ns - fixed.avg_cmd_counted_ns;
    assert!((d - measured.avg_cmd_cpu_ns).abs() < 1.0, "{d}");
    assert!(measured.avg_cmd_latency_ns > measured.avg_cmd_counted_ns + 100_000.0);
    assert_eq!(measured.total_bit_updates, fixed.total_bit_updates);
    assert_eq!(measured.total_bit_updates, host.total_bit_updates);
    assert_eq!(measured.pcm_chunk_program_ns, media::CHUNK_PROGRAM_NS);
}

/// The trace's SQL run against in-memory databases (SQLite's own work, no journal model): host
/// nanoseconds of the measured commands and the virtual-machine instructions they executed.
fn sqlite_alone(tr: &Trace) -> (f64, u64) {
    use super::sql_trace::Op;
    let conns: Vec<rusqlite::Connection> = (0..tr.dbs.len())
        .map(|_| {
            let c = rusqlite::Connection::open_in_memory().unwrap();
            c.execute_batch(replay::SETTINGS).unwrap();
            c
        })
        .collect();
    fn sql(op: &Op) -> Option<&str> {
        match op {
            Op::Use(_) => None,
            Op::Begin => Some("BEGIN"),
            Op::Commit => Some("COMMIT"),
            Op::Rollback => Some("ROLLBACK"),
            Op::Sql(s) => Some(s.as_str()),
        }
    }
    let mut cur = 0;
    for op in &tr.setup {
        match (op, sql(op)) {
            (Op::Use(d), _) => cur = *d,
            (_, Some(s)) => conns[cur].execute_batch(s).unwrap(),
            _ => {}
        }
    }
    let (mut steps, t) = (0u64, std::time::Instant::now());
    for op in &tr.ops {
        match (op, sql(op)) {
            (Op::Use(d), _) => cur = *d,
            (_, Some(s)) => replay::execute_counted(&conns[cur], s, &mut steps).unwrap(),
            _ => {}
        }
    }
    (t.elapsed().as_secs_f64() * 1e9, steps)
}

/// The host's core cycles per SQLite virtual-machine instruction on the journal traces (trace 2
/// of each application, median of 7 runs), the figure behind `cpu::HOST_CYCLES_PER_VM_STEP`.
/// A host timing, so not a test that can fail: run by hand with
/// `cargo test --release -- --ignored sqlite_host_cycles_per_vm_step --nocapture`.
#[test]
#[ignore]
fn sqlite_host_cycles_per_vm_step() {
    let _g = replay::lock();
    let ghz = crate::bench::host_clock_ghz().expect("an x86-64 host (its clock is measured)");
    for (name, app) in App::ALL {
        let tr = apps::generate(app, 2, 1, None);
        let mut ns_per_step: Vec<f64> = (0..7)
            .map(|_| {
                let (ns, steps) = sqlite_alone(&tr);
                ns / steps as f64
            })
            .collect();
        ns_per_step.sort_by(f64::total_cmp);
        let m = ns_per_step[3];
        println!("{name}: {:.2} host ns per VM instruction, {:.1} cycles at {ghz:.2} GHz", m, m * ghz);
    }
}

/// Everything a replay leaves that a figure could read: its counts, the PCM image, the database
/// files, and every figure of [`JournalResult`] beside the no-journal `reference`.
fn replay_figures(tr: &Trace, s: &Setup, dev: &Device, r: replay::Replay, reference: &replay::Replay) -> String {
    let counts = format!("{} {:?} {:?} {:?} {:?}", r.commands, r.ended, r.in_flight, r.errors, r.vm_steps);
    let files: Vec<_> = r.world.media.dbs.iter().map(|d| (d.name.clone(), d.cur.clone(), d.durable.clone())).collect();
    let image = r.world.media.bytes.clone();
    let result = result_of(("app", "1"), tr, s, dev, r, reference).unwrap();
    format!("{counts}\n{files:?}\n{image:?}\n{}", serde_json::to_string(&result).unwrap())
}

#[test]
fn the_calls_recorded_under_one_configuration_replay_every_figure_of_another() {
    let devices = [Device::default(), Device::build(&["pcm.chunk_program_ns=300".into()], Some(0)).unwrap()];
    // Three applications' traces, and one that rolls transactions back (SQLite reads their
    // journals back).
    let traces = [App::Fb, App::Kt, App::Gm].map(|app| (format!("{app:?}"), apps::generate(app, 1, 5, Some(40))));
    for (app, tr) in traces.into_iter().chain([("rounds".to_string(), rounds())]) {
        let recorded =
            |journal| vfs_tape::record(&tr, &Setup { journal, ..setup("RU20-S2X-WH16", 5) }).unwrap().1.unwrap();
        let (with, without) = (recorded(true), recorded(false));
        assert!(with.calls() > without.calls() && without.calls() > 20, "{} {}", with.calls(), without.calls());
        assert!(app != "rounds" || with.journal_reads() > 0, "the rollbacks read their journals");
        for (config, dev) in [("RR", 0), ("RR-S2X", 1), ("RU20-S2X-WH64", 0), ("RU2-S2X-WH64-INV25", 1)] {
            let dev = &devices[dev];
            let s = Setup { pcm: dev.pcm.clone(), timing: dev.timing.clone(), ..setup(config, 5) };
            let n = Setup { journal: false, ..s.clone() };
            let own = replay(&tr, &s, None, false, false).unwrap();
            let own_ref = replay(&tr, &n, None, false, false).unwrap();
            let taped = vfs_tape::replay(&with, &s).unwrap();
            let taped_ref = vfs_tape::replay(&without, &n).unwrap();
            let want = replay_figures(&tr, &s, dev, own, &own_ref);
            assert_eq!(replay_figures(&tr, &s, dev, taped, &taped_ref), want, "{app} {config}");
        }
    }
}

#[test]
fn a_replay_whose_calls_stop_agreeing_with_the_recording_runs_sqlite() {
    // 400 pages of rows, then one transaction that rewrites them all: its journal (400 KiB)
    // fits the default 2 MiB area and not 3 frames (192 KiB), where SQLite's writes fail.
    let tr = Trace::parse(
        "@db big.db\nCREATE TABLE t(k INTEGER PRIMARY KEY, b BLOB)\n\
         WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 400) \
         INSERT INTO t SELECT i, zeroblob(900) FROM c\n@measure\n\
         UPDATE t SET b = randomblob(900)\nINSERT INTO t VALUES (1000, x'00')\n",
    )
    .unwrap();
    let tr = std::sync::Arc::new(tr);
    let roomy = Setup { on_error: replay::OnError::Continue, ..setup("RU20-S2X", 9) };
    let small = Setup { frames: 3, ..roomy.clone() };
    let own = replay(&tr, &small, None, false, false).unwrap();
    assert!(!own.errors.is_empty(), "the small area fills up");
    let (first, t) = vfs_tape::record(&tr, &roomy).unwrap();
    let t = t.unwrap();
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    let err = vfs_tape::replay(&t, &small).err().expect("the calls stop agreeing");
    assert!(err.contains("recorded"), "{err}");
    // Through the kept tape: the replay falls back to SQLite and gives its figures.
    vfs_tape::replay_measured(&tr, &roomy).unwrap();
    assert!(vfs_tape::kept(&tr, &roomy).is_some());
    let fell_back = vfs_tape::replay_measured(&tr, &small).unwrap();
    let n = Setup { journal: false, ..small.clone() };
    let reference = replay(&tr, &n, None, false, false).unwrap();
    let dev = Device::default();
    assert_eq!(
        replay_figures(&tr, &small, &dev, fell_back, &reference),
        replay_figures(&tr, &small, &dev, own, &reference)
    );
}
