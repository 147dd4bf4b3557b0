//! Start-Gap on the log area (docs/formats/startgap.md): the controller's ordering of a gap
//! move in exact cycles, wear of a hot log line against no levelling, crash consistency of every
//! logging protocol with the log moving under it, and the checker catching a misordered move.

use locsim::config::Config;
use locsim::machine::Machine;
use locsim::pmem::{Layout, WriteKind};
use locsim::types::{BlockId, Cycle};
use serde_json::Value;
use std::process::Command;

fn config(sets: &[&str]) -> Config {
    Config::build(None, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
}

/// One 4 KiB data page (blocks 0..64), 16 log lines (blocks 64..80); with Start-Gap on the
/// layout reserves the spare line 80 and the register block 81.
fn small_machine(cfg: &Config, record: bool) -> Machine {
    let layout = Layout::new(4096, 16 * 64);
    let layout =
        if cfg.startgap.enabled { layout.with_startgap(locsim::startgap::Geometry::EXTRA_BYTES) } else { layout };
    Machine::new(cfg, layout, vec![0; layout.total_bytes() as usize], record)
}

fn ordered_move(bug: bool) -> Vec<(u64, u64, WriteKind)> {
    // 1024 banks: every block its own bank, so only the ordering rules delay a write.
    let cfg = config(&["memory.banks=1024", "startgap.enabled=true", "startgap.psi_writes=1"]);
    let mut m = small_machine(&cfg, true);
    m.sg.as_mut().unwrap().bug_regs_before_copy = bug;
    let g = m.sg.as_ref().unwrap().geom;
    // A logical line not placed on physical line 15, the first move's source.
    let l = (0..16).find(|&l| g.physical_line(&m.sg.as_ref().unwrap().regs, l) != 15).unwrap();
    m.write_block(BlockId(64 + l), WriteKind::LogData, [1; 64]);
    m.now = Cycle::new(1);
    m.write_block(BlockId(64 + l), WriteKind::LogData, [2; 64]);
    m.record.as_ref().unwrap().durable.writes.iter().map(|w| (w.block.0, w.durable.get(), w.kind)).collect()
}

#[test]
fn a_gap_move_copies_then_persists_registers_then_releases_log_writes() {
    let w = ordered_move(false);
    // The write (168), the copy 79 -> 80 after its read (168 + 168), the registers after the
    // copy is durable (336 + 168); the next log write, issued at cycle 1, starts at 504.
    assert_eq!(w[0].1, 168);
    assert_eq!((w[1].0, w[1].1, w[1].2), (80, 336, WriteKind::WearLevel));
    assert_eq!((w[2].0, w[2].1, w[2].2), (81, 504, WriteKind::WearLevel));
    assert_eq!(w[3].1, 672);
    // Its own move copies line 78 into 79 once the registers (504) are durable: 672.
    assert_eq!((w[4].0, w[4].1), (79, 672));
    assert_eq!((w[5].0, w[5].1), (81, 840));
}

#[test]
fn the_injected_bug_persists_registers_before_the_copy() {
    let w = ordered_move(true);
    assert_eq!((w[1].0, w[1].1), (80, 336));
    assert_eq!((w[2].0, w[2].1), (81, 168), "registers durable before the copy they point to");
}

/// After `writes` writes alternating all-zero and all-one bytes to one logical log line
/// (differential write: every cell programmed every write), with psi = 100: the most programmed
/// cell of the log area, the log area's total, and the programs of bit 0 of the register
/// block's move count.
fn hot_line_wear(startgap: bool, writes: u64) -> (u64, u64, u64) {
    let on = format!("startgap.enabled={startgap}");
    let cfg = config(&["memory.device=pcm", "pcm.write_mode=diff", &on, "startgap.psi_writes=100"]);
    let mut m = small_machine(&cfg, false);
    for i in 0..writes {
        let t = m.write_block(BlockId(64), WriteKind::LogHead, [if i % 2 == 0 { 0xFF } else { 0 }; 64]);
        m.now = t.accepted;
    }
    let p = m.pcm.as_mut().unwrap();
    let log = p.wear.regions().into_iter().find(|r| r.name == "log").unwrap();
    let moves_bit0 = p.wear.count(81 * 64 * 8 + 32 * 8, false);
    (log.max_bit_updates, log.total_bit_updates, moves_bit0)
}

#[test]
fn start_gap_spreads_a_hot_log_line_over_every_physical_line() {
    let writes = 100_000;
    let (off_max, off_total, _) = hot_line_wear(false, writes);
    assert_eq!((off_max, off_total), (writes, writes * 512));
    let (on_max, on_total, regs) = hot_line_wear(true, writes);
    // The hot line stays on one physical line for (N + 1) * psi = 1 700 writes, then the gap
    // passes it; 17 physical lines share it: about writes / 17 = 5 882 each. Require an 8-fold
    // fall of the hottest cell.
    println!("max programs per cell: {off_max} without Start-Gap, {on_max} with (total {on_total})");
    assert!(on_max * 8 < off_max, "with Start-Gap {on_max}, without {off_max}");
    assert!(on_max >= writes / 17, "wear cannot fall below an even spread: {on_max}");
    assert!(on_total >= off_total, "moves add writes, never remove them");
    // The register block is rewritten at every move: bit 0 of the move count flips each time.
    assert_eq!(regs, writes / 100);
}

fn locsim(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_locsim")).args(args).output().expect("runs");
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), v, String::from_utf8_lossy(&out.stderr).into_owned())
}

const MOVING_LOG: [&str; 10] = [
    "--set",
    "workload.sps.entries=65536",
    "--set",
    "log.size_bytes=65536",
    "--set",
    "memory.device=pcm",
    "--set",
    "startgap.enabled=true",
    "--set",
    "startgap.psi_writes=4",
];

#[test]
fn every_logging_protocol_recovers_with_the_log_moving_under_it() {
    for p in ["s-wal", "h-wal", "ec-wal"] {
        assert_recovers("sps", p, "400", &MOVING_LOG);
    }
}

/// `locsim crashtest` of `txs` transactions and as many crash points, 10 % aborted: no
/// violation.
fn assert_recovers(workload: &str, protocol: &str, txs: &str, settings: &[&str]) {
    let mut args = vec!["crashtest", "--workload", workload, "--protocol", protocol, "--txs", txs, "--crashes", txs];
    args.extend_from_slice(&["--abort-rate", "0.1", "--json"]);
    args.extend_from_slice(settings);
    let (code, v, err) = locsim(&args);
    assert_eq!((code, v["violations"].as_u64()), (Some(0), Some(0)), "{protocol}: {} {err}", v["first_violation"]);
    assert_eq!(v["crash_points"].as_u64(), txs.parse().ok());
}

/// Kiln and LOC-Kiln log only what does not fit in the non-volatile LLC: small caches send
/// much of each B+tree transaction to the fallback log, which Start-Gap moves while the NV-LLC
/// state sits after the log area's reserve (docs/formats/startgap.md).
const KILN_MOVING_LOG: [&str; 14] = [
    "--set",
    "log.size_bytes=262144",
    "--set",
    "memory.device=pcm",
    "--set",
    "startgap.enabled=true",
    "--set",
    "startgap.psi_writes=1",
    "--set",
    "l1.size_bytes=4096",
    "--set",
    "l2.size_bytes=8192",
    "--set",
    "llc.size_bytes=16384",
];

#[test]
fn kiln_and_loc_kiln_recover_with_their_fallback_log_moving_under_them() {
    for p in ["kiln", "loc-kiln"] {
        assert_recovers("btree", p, "300", &KILN_MOVING_LOG);
        // The log did move: the run wrote the fallback log and made gap moves.
        let mut run = vec!["run", "--workload", "btree", "--protocol", p, "--txs", "300", "--json"];
        run.extend_from_slice(&KILN_MOVING_LOG);
        let (code, v, err) = locsim(&run);
        assert_eq!(code, Some(0), "{err}");
        let kinds = &v[0]["mem_write_bytes_by_kind"];
        assert!(kinds["log_data"].as_u64().unwrap() > 64 * 1000, "{p}: {kinds}");
        assert!(kinds["wear_level"].as_u64().unwrap() > 64 * 1000, "{p}: {kinds}");
    }
}

/// On four cores the remap is the one controller's, shared by every core (the lock lines,
/// volatile, are past the layout and never reach it); the N-core checker reads the log through
/// the same remap (docs/multicore.md, "The oracle for concurrent histories"). Each core's log
/// region moves, and a misordered move is still caught.
#[test]
fn logs_recover_on_four_cores_with_the_log_moving_under_them_and_a_misordered_move_is_caught() {
    let four = ["--cores", "4"];
    for p in ["s-wal", "loc-wal"] {
        assert_recovers("sps", p, "300", &[&MOVING_LOG[..], &four].concat());
    }
    assert_recovers("btree", "kiln", "200", &[&KILN_MOVING_LOG[..], &four].concat());
    let mut args = vec!["crashtest", "--workload", "sps", "--protocol", "h-wal", "--txs", "600", "--exhaustive"];
    args.extend_from_slice(&["--inject-bug", "startgap-regs-before-copy", "--json"]);
    args.extend_from_slice(&[&MOVING_LOG[..], &four].concat());
    let psi = args.iter().position(|a| *a == "startgap.psi_writes=4").unwrap();
    args[psi] = "startgap.psi_writes=1";
    let (code, v, _) = locsim(&args);
    assert_eq!(code, Some(1), "the checker must fail: {v}");
    assert!(v["violations"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["first_violation"]["kind"], "recovery-error", "{v}");
}

#[test]
fn crash_checker_catches_registers_persisted_before_the_line_copy() {
    for p in ["s-wal", "h-wal", "ec-wal"] {
        let mut args = vec!["crashtest", "--workload", "sps", "--protocol", p, "--txs", "600", "--exhaustive"];
        args.extend_from_slice(&["--inject-bug", "startgap-regs-before-copy", "--json"]);
        args.extend_from_slice(&MOVING_LOG);
        *args.last_mut().unwrap() = "startgap.psi_writes=1";
        let (code, v, _) = locsim(&args);
        assert_eq!(code, Some(1), "{p}: the checker must fail");
        assert!(v["violations"].as_u64().unwrap() > 0, "{p}: {v}");
    }
}

#[test]
fn start_gap_settings_are_checked() {
    let (code, _, err) = locsim(&["config", "--set", "startgap.psi_writes=0"]);
    assert_eq!((code, err.trim()), (Some(2), "error: startgap.psi_writes = 0: allowed 1..=1000000"));
    let (code, _, err) = locsim(&["config", "--set", "startgap.gap=3"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("allowed at `startgap`: enabled, psi_writes"), "{err}");
    let args = ["crashtest", "--workload", "sps", "--protocol", "h-wal", "--inject-bug", "startgap-regs-before-copy"];
    let (code, _, err) = locsim(&args);
    assert_eq!(code, Some(2));
    assert!(err.contains("needs startgap.enabled = true") && err.trim().lines().count() == 1, "{err}");
}
