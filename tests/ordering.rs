//! The strict-ordering machine (`[ordering]`, docs/ordering.md): every protocol recovers under
//! `paper`, under `strictest` and under each knob alone, every injected bug is still caught, the
//! knobs change what they should, and `overlapped` spelled out knob by knob is the default
//! machine.

mod common;

use common::*;
use locsim::crash::{check, CrashReport, CrashSpec};
use locsim::protocol::{Bug, ProtocolKind};
use locsim::runner::execute;
use locsim::types::Cycle;
use locsim::workload::WorkloadKind;

/// Every protocol that promises durability (all but the baseline).
fn protocols() -> impl Iterator<Item = ProtocolKind> {
    ProtocolKind::ALL.iter().copied().filter(|p| !p.bugs().is_empty())
}

/// Caches small enough that transactions overflow the LLC: tagged lines are evicted, so the
/// conflict rule and the fallback paths run.
const SMALL_CACHES: [&str; 3] = ["l1.size_bytes=4096", "l2.size_bytes=8192", "llc.size_bytes=16384"];

/// A B+tree of 2^14 keys (populated in a few milliseconds) besides `small_cfg`.
const SMALL_BTREE: &str = "workload.btree.key_space=16384";

fn crash(w: WorkloadKind, p: ProtocolKind, sets: &[&str], crashes: u64, bug: Option<Bug>) -> CrashReport {
    let sets: Vec<&str> = sets.iter().copied().chain([SMALL_BTREE]).collect();
    let mut run = spec(small_cfg(&sets), p, 200, 11, bug);
    run.workload = w;
    check(&CrashSpec { threads: 2, ..CrashSpec::new(run, crashes) }).unwrap()
}

#[test]
fn every_protocol_recovers_on_the_papers_machine() {
    for w in [WorkloadKind::Sps, WorkloadKind::BTree] {
        for p in protocols() {
            for caches in [&[][..], &SMALL_CACHES[..]] {
                let mut sets = vec!["ordering.preset=paper"];
                sets.extend_from_slice(caches);
                let r = crash(w, p, &sets, 200, None);
                assert_eq!(r.violations, 0, "{w:?} {p:?} {sets:?}: {:?}", r.first_violation);
                assert!(r.crash_points >= 200, "{w:?} {p:?}: {} points", r.crash_points);
            }
        }
    }
}

#[test]
fn every_protocol_recovers_on_the_strictest_machine() {
    for w in [WorkloadKind::Sps, WorkloadKind::BTree] {
        for p in protocols() {
            let r = crash(w, p, &["ordering.preset=strictest"], 120, None);
            assert_eq!(r.violations, 0, "{w:?} {p:?} strictest: {:?}", r.first_violation);
        }
    }
}

#[test]
fn every_knob_alone_keeps_every_protocol_recoverable() {
    let knobs = [
        "ordering.commit_flush=clean",
        "ordering.commit_flush=invalidate",
        "ordering.flush_cost=per-level",
        "ordering.write_order=accepted",
        "ordering.write_order=durable",
        "ordering.phase_barrier=first-write",
        "ordering.phase_barrier=begin",
        "ordering.conflict=transaction",
    ];
    for knob in knobs {
        for p in protocols() {
            let mut sets = vec![knob];
            sets.extend_from_slice(&SMALL_CACHES);
            let r = crash(WorkloadKind::BTree, p, &sets, 80, None);
            assert_eq!(r.violations, 0, "{p:?} {knob}: {:?}", r.first_violation);
        }
    }
}

#[test]
fn every_injected_bug_is_still_caught_on_the_papers_machine() {
    for p in protocols() {
        // A cross-core defect needs more than one core (the multi-core crash tests show it).
        // S-Undo's undo-without-fence shows only on the PCM device with a direct-mapped LLC
        // (tests/s_undo.rs, docs/protocols/s-undo.md).
        for &bug in p.bugs().iter().filter(|b| b.min_cores() == 1 && b.name() != "undo-without-fence") {
            // Kiln's evict-uncommitted-home needs a transaction larger than the LLC.
            let caught = [WorkloadKind::Sps, WorkloadKind::BTree].iter().any(|&w| {
                [&[][..], &SMALL_CACHES[..]].iter().any(|caches| {
                    let mut sets = vec!["ordering.preset=paper"];
                    sets.extend_from_slice(caches);
                    crash(w, p, &sets, 600, Some(bug)).violations > 0
                })
            });
            assert!(caught, "{p:?}: {} not caught under ordering.preset=paper", bug.name());
        }
    }
}

fn run(p: ProtocolKind, sets: &[&str]) -> locsim::runner::RunResult {
    let sets: Vec<&str> = sets.iter().copied().chain([SMALL_BTREE]).collect();
    let mut s = spec(small_cfg(&sets), p, 400, 3, None);
    s.record = false;
    s.workload = WorkloadKind::BTree;
    execute(&s).unwrap().result
}

#[test]
fn overlapped_spelled_out_knob_by_knob_is_the_default_machine() {
    let spelled = [
        "ordering.preset=paper",
        "ordering.commit_flush=none",
        "ordering.flush_cost=llc-write",
        "ordering.write_order=as-issued",
        "ordering.phase_barrier=none",
        "ordering.conflict=line",
    ];
    for p in protocols() {
        let (a, b) = (run(p, &[]), run(p, &spelled));
        assert_eq!((a.cycles, a.mem_write_bytes, a.mem_reads), (b.cycles, b.mem_write_bytes, b.mem_reads), "{p:?}");
        assert_eq!(b.ordering.preset, "paper");
        assert!(b.ordering.knobs.is_empty(), "{:?}", b.ordering.knobs);
    }
}

#[test]
fn each_mechanism_costs_where_it_should() {
    use ProtocolKind::*;
    let counter = |r: &locsim::runner::RunResult, k: &str| r.protocol_counters.get(k).copied().unwrap_or(0);
    // The conflict rule forces a transaction's other lines to the log and out of the cache
    // when one is evicted: they are read again (the cycles may go either way: what is logged
    // early is not logged at commit).
    let mut sets = vec!["ordering.conflict=transaction"];
    sets.extend_from_slice(&SMALL_CACHES);
    for p in [HWal, EcWal] {
        let (line, tx) = (run(p, &SMALL_CACHES), run(p, &sets));
        assert_eq!(counter(&line, "forced_to_log"), 0);
        assert!(counter(&tx, "forced_to_log") > 0, "{p:?}");
        assert!(tx.mem_reads > line.mem_reads, "{p:?}");
    }
    // The phase barrier waits for the previous transaction's checkpoint; LOC-WAL only between
    // windows, so it waits less per transaction.
    let barrier = |p| run(p, &["ordering.phase_barrier=begin"]).ordering.barrier_stall_cycles;
    let (h, l) = (barrier(HWal), barrier(LocWal));
    assert!(h > Cycle::ZERO && l < h, "h-wal {h}, loc-wal {l}");
    // The commit flush is paid per line; Kiln's flush uses the same price list.
    let flush = run(HWal, &["ordering.commit_flush=clean", "ordering.flush_cost=per-level"]);
    assert!(flush.ordering.commit_flush_cycles > Cycle::ZERO);
    assert!(run(Kiln, &["ordering.flush_cost=per-level"]).cycles > run(Kiln, &[]).cycles);
    // Writes in program order, each after the previous is durable, serialise H-WAL's commit.
    assert!(run(HWal, &["ordering.write_order=durable"]).cycles > run(HWal, &[]).cycles);
    // The papers' machine as a whole is slower for every protocol that orders.
    for p in [SWal, HWal, EcWal, LocWal] {
        assert!(run(p, &["ordering.preset=paper"]).cycles > run(p, &[]).cycles, "{p:?}");
    }
    // Its strictest reading is slower still for the protocols whose writes it serialises.
    for p in [HWal, EcWal, LocWal] {
        let (paper, strictest) = (run(p, &["ordering.preset=paper"]), run(p, &["ordering.preset=strictest"]));
        assert!(strictest.cycles > paper.cycles, "{p:?}");
    }
}

/// Every value of each knob, in the order of `locsim::ordering::KNOBS`.
const VALUES: [(&str, &[&str]); 6] = [
    ("commit_flush", &["none", "clean", "invalidate"]),
    ("flush_cost", &["llc-write", "per-level"]),
    ("write_order", &["as-issued", "accepted", "durable"]),
    ("phase_barrier", &["none", "first-write", "begin"]),
    ("conflict", &["line", "transaction"]),
    ("log_order", &["exempt-ec-loc", "program"]),
];

/// A run of `w` under `p` with `sets`: its figures (as JSON, without the host's timings and the
/// label of the ordering it ran on) and the knobs it never read.
fn figures(w: WorkloadKind, p: ProtocolKind, sets: &[String]) -> (serde_json::Value, Vec<&'static str>) {
    let sets: Vec<&str> = sets.iter().map(String::as_str).chain([SMALL_BTREE]).collect();
    let mut s = spec(small_cfg(&sets), p, 150, 5, None);
    (s.record, s.workload) = (false, w);
    let out = execute(&s).unwrap();
    let mut v = serde_json::to_value(&out.result).unwrap();
    let o = v.as_object_mut().unwrap();
    for k in ["host_seconds", "sim_mem_accesses_per_second", "config_hash", "git_rev"] {
        o.remove(k);
    }
    let ord = o.get_mut("ordering").and_then(|v| v.as_object_mut()).unwrap();
    for k in ["preset", "knobs"] {
        ord.remove(k);
    }
    let unread =
        locsim::ordering::KNOBS.iter().map(|(k, _)| *k).filter(|k| out.unread.contains(&format!("ordering.{k}")));
    (v, unread.collect())
}

/// `Err` naming the first value of a knob in `unread` that changes the figures of the run with
/// `sets`: a run that never read a knob must give the same figures whatever its value.
fn unread_knobs_change_nothing(
    w: WorkloadKind,
    p: ProtocolKind,
    sets: &[String],
    unread: &[&str],
) -> Result<(), String> {
    let (base, _) = figures(w, p, sets);
    for (knob, values) in VALUES.iter().filter(|(k, _)| unread.contains(k)) {
        for v in *values {
            let mut with = sets.to_vec();
            with.push(format!("ordering.{knob}={v}"));
            if figures(w, p, &with).0 != base {
                return Err(format!("{w:?} {p:?} {sets:?}: ordering.{knob}={v} changes the figures"));
            }
        }
    }
    Ok(())
}

#[test]
fn a_run_gives_the_same_figures_whatever_the_knobs_it_never_read() {
    let machines: [&[&str]; 4] = [&[], &SMALL_CACHES, &["machine.cores=2"], &["loc.speculation_degree=2"]];
    let mut read_somewhere = 0u32;
    for w in [WorkloadKind::Sps, WorkloadKind::BTree] {
        for &p in ProtocolKind::ALL {
            for preset in ["overlapped", "paper", "strictest"] {
                for m in machines {
                    let sets: Vec<String> = [format!("ordering.preset={preset}")]
                        .into_iter()
                        .chain(m.iter().map(|s| s.to_string()))
                        .collect();
                    let (_, unread) = figures(w, p, &sets);
                    for (i, (k, _)) in VALUES.iter().enumerate() {
                        read_somewhere |= u32::from(!unread.contains(k)) << i;
                    }
                    if p == ProtocolKind::Baseline {
                        assert_eq!(unread.len(), VALUES.len(), "the baseline orders nothing: {unread:?}");
                    }
                    unread_knobs_change_nothing(w, p, &sets, &unread).unwrap();
                }
            }
        }
    }
    assert_eq!(read_somewhere, 0b111111, "every knob is read by some run");
}

#[test]
fn a_knob_read_but_reported_unread_is_caught() {
    use ProtocolKind::*;
    let paper = vec!["ordering.preset=paper".to_string()];
    for (p, knob) in [(HWal, "commit_flush"), (SWal, "flush_cost"), (HWal, "phase_barrier"), (Kiln, "flush_cost")] {
        let (_, unread) = figures(WorkloadKind::BTree, p, &paper);
        assert!(!unread.contains(&knob), "{p:?} reads {knob}");
        let e = unread_knobs_change_nothing(WorkloadKind::BTree, p, &paper, &[knob]).unwrap_err();
        assert!(e.contains(&format!("ordering.{knob}=")), "{e}");
    }
    // Under `overlapped` H-WAL flushes nothing at commit, so the price of a flush is never read.
    let (_, unread) = figures(WorkloadKind::BTree, HWal, &["ordering.preset=overlapped".to_string()]);
    assert!(unread.contains(&"flush_cost"), "{unread:?}");
}
