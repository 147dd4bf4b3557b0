use super::*;
use crate::config::Config;
use crate::pmem::Layout;
use crate::protocol::baseline::Baseline;
use crate::types::{BlockId, Cycle};
use crate::workload::user::UserWorkload;
use crate::workload::{WorkloadConfig, WorkloadKind};
use std::sync::{Arc, Mutex};

/// One operation of a scripted transaction.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Compute(u64),
    Lock(u64),
    Store(u64),
    Load(u64),
}

/// Which core ran which operation, in execution order (`"begin"`, `"commit"` or the op).
type Log = Arc<Mutex<Vec<(usize, String)>>>;

/// A transaction per call: begin, the script, commit; each operation logged once it ran.
struct Script {
    core: usize,
    ops: Vec<Op>,
    log: Log,
}

impl UserWorkload for Script {
    fn data_bytes(&self) -> u64 {
        1 << 16
    }
    fn populate(&mut self, _data: &mut [u8]) {}
    fn run_tx(&mut self, pm: &mut dyn Pm, _rng: &mut Rng, _abort: bool) {
        let note = |s: String| self.log.lock().unwrap().push((self.core, s));
        pm.begin();
        note("begin".into());
        for &op in &self.ops {
            match op {
                Op::Compute(n) => pm.compute(n),
                Op::Lock(id) => pm.lock(id),
                Op::Store(a) => pm.store_u64(Addr(a), 1),
                Op::Load(a) => {
                    pm.load_u64(Addr(a));
                }
            }
            note(format!("{op:?}"));
        }
        pm.commit();
        note("commit".into());
    }
}

fn cfg(cores: u32) -> Config {
    Config::build(None, &[format!("machine.cores={cores}")]).unwrap()
}

/// A simulator of `cores` cores under the baseline over a data area of `data_bytes`.
fn sim(cores: u32, data: &[u8], record: bool) -> Sim<Baseline> {
    let layout = Layout::new(data.len() as u64, 64 << 10).with_cores(cores);
    let mut image = vec![0u8; layout.total_bytes() as usize];
    image[..data.len()].copy_from_slice(data);
    Sim::new(Machine::new(&cfg(cores), layout, image, record), Baseline, record)
}

/// The simulator after a scripted run, its log and its outcome.
type Scripted = (Sim<Baseline>, Vec<(usize, String)>, Result<(), String>);

/// Run one scripted transaction per core; the log and the outcome.
fn run_scripts(scripts: &[Vec<Op>]) -> Scripted {
    let n = scripts.len();
    let log: Log = Arc::default();
    let mut s = sim(n as u32, &[0; 1 << 16], false);
    let mut wls: Vec<Workload> = scripts
        .iter()
        .enumerate()
        .map(|(core, ops)| Workload::User(Box::new(Script { core, ops: ops.clone(), log: log.clone() })))
        .collect();
    let mut streams: Vec<_> = (0..n).map(|c| crate::rng::run_streams(1, c)).collect();
    let r = run(&mut s, &mut wls, &mut streams, &vec![1; n], 0.0);
    let log = log.lock().unwrap().clone();
    (s, log, r)
}

fn names(log: &[(usize, String)]) -> Vec<String> {
    log.iter().map(|(c, s)| format!("{c}:{s}")).collect()
}

/// The earliest core runs; a core yields before an operation once its clock has passed another
/// runnable core's (ties to the lower id); an operation is never split; a compute never yields
/// (it only moves the core's own clock).
#[test]
fn the_earliest_core_runs_each_operation_ties_to_the_lower_id() {
    use Op::Compute as C;
    let (s, log, r) = run_scripts(&[vec![C(10), C(10)], vec![C(15), C(1)], vec![C(10), C(0)]]);
    r.unwrap();
    // t=0: cores 0, 1, 2 all at 0: core 0 begins and computes to 20 (a compute does not
    // yield), then at its commit (20) core 1 (0 < 20) begins and computes to 16, and at its
    // commit (16) core 2 (0) begins and computes to 10; core 2 commits at 10, core 1 at 16,
    // core 0 at 20.
    let expected = [
        "0:begin",
        "0:Compute(10)",
        "0:Compute(10)",
        "1:begin",
        "1:Compute(15)",
        "1:Compute(1)",
        "2:begin",
        "2:Compute(10)",
        "2:Compute(0)",
        "2:commit",
        "1:commit",
        "0:commit",
    ];
    assert_eq!(names(&log), expected);
    assert_eq!((0..3).map(|c| s.m.clock_of(c)).collect::<Vec<_>>(), [Cycle::new(20), Cycle::new(16), Cycle::new(10)]);
}

/// A waiter is blocked until the release and resumes at the release cycle, paying its retry:
/// exact cycles of both cores. The cost of each lock-line access (coherence included) is
/// taken from the same accesses replayed on a fresh machine, in the order the scheduler makes
/// them; what is tested is how the scheduler composes them.
#[test]
fn a_lock_waiter_resumes_at_the_release_and_pays_its_retry() {
    use Op::{Compute as C, Lock as L};
    let (s, log, r) = run_scripts(&[vec![L(5), C(100)], vec![C(10), L(5)]]);
    r.unwrap();
    let line = BlockId(s.m.volatile_block0 + 5);
    let mut m = sim(2, &[0; 1 << 16], false).m;
    let cost = |m: &mut Machine, core: usize, at: Cycle| {
        m.switch_core(core);
        m.now = m.now.max(at);
        let t = m.now;
        m.access_block(line, true);
        m.now - t
    };
    // Core 0 takes the lock (a miss); core 1, having computed 10, tries it (blocked).
    let take0 = cost(&mut m, 0, Cycle::ZERO);
    assert!(take0 > Cycle::new(10), "the first take outlasts core 1's compute");
    let try1 = cost(&mut m, 1, Cycle::new(10));
    // Core 0 computes 100, commits and releases the lock.
    let rel0 = cost(&mut m, 0, take0 + Cycle::new(100));
    let release = take0 + Cycle::new(100) + rel0;
    assert_eq!(s.m.clock_of(0), release);
    // Core 1 resumes at the release (or its own clock, if later), retries, commits, releases.
    let resume = (Cycle::new(10) + try1).max(release);
    let retry1 = cost(&mut m, 1, resume);
    let rel1 = cost(&mut m, 1, resume + retry1);
    assert_eq!(s.m.clock_of(1), resume + retry1 + rel1);
    let expected =
        ["0:begin", "0:Lock(5)", "0:Compute(100)", "1:begin", "1:Compute(10)", "0:commit", "1:Lock(5)", "1:commit"];
    assert_eq!(names(&log), expected);
}

#[test]
fn a_store_to_a_line_another_core_is_writing_stops_the_run() {
    use Op::{Compute as C, Store as S};
    let (_, _, r) = run_scripts(&[vec![S(3 * 64), C(100)], vec![C(10), S(3 * 64 + 8)]]);
    let e = r.unwrap_err();
    assert!(e.starts_with("isolation: core 1 stores to line 3 (address 0xc0), written by core 0's"), "{e}");
    // Locked, the same transactions run.
    let (_, _, r) = run_scripts(&[vec![Op::Lock(3), S(3 * 64), C(100)], vec![C(10), Op::Lock(3), S(3 * 64 + 8)]]);
    r.unwrap();
    // The line is free again once the writer has committed: no lock needed after it.
    let (_, _, r) = run_scripts(&[vec![S(3 * 64)], vec![C(1000), S(3 * 64 + 8)]]);
    r.unwrap();
}

#[test]
fn locks_out_of_order_or_out_of_range_stop_the_run() {
    let (_, _, r) = run_scripts(&[vec![Op::Lock(7), Op::Lock(3)], vec![]]);
    assert_eq!(r.unwrap_err(), "core 0 takes lock 3 after lock 7: locks must be taken in ascending order");
    let (_, _, r) = run_scripts(&[vec![], vec![Op::Lock(1 << 20)]]);
    assert_eq!(r.unwrap_err(), "core 1 takes lock 1048576: allowed 0..1024 (the data area's lines)");
    let (_, _, r) = run_scripts(&[vec![Op::Load(0), Op::Lock(2), Op::Lock(2)], vec![Op::Lock(2)]]);
    r.unwrap();
}

/// The workloads that run on several cores.
const MULTICORE: &[WorkloadKind] = &[
    WorkloadKind::Sps,
    WorkloadKind::BTree,
    WorkloadKind::Hash,
    WorkloadKind::RbTree,
    WorkloadKind::Sdg,
    WorkloadKind::Tpcc,
];

/// Small structures (contention on the SPS lines, the trees' splits and merges).
fn small() -> WorkloadConfig {
    let mut c = WorkloadConfig::default();
    c.sps.entries = 512;
    c.sps.swaps_per_tx = 3;
    c.btree.key_space = 4096;
    (c.hash.key_space, c.hash.buckets) = (4096, 64);
    c.rbtree.key_space = 4096;
    (c.sdg.vertices, c.sdg.initial_edges, c.sdg.max_edges) = (256, 1000, 2000);
    // Two warehouses for four cores: two cores share each home warehouse, and New-Order's
    // remote items and Payment's remote customers lock the other one.
    (c.tpcc.warehouses, c.tpcc.scale, c.tpcc.orders_per_warehouse) = ("2".into(), 100, 3000);
    c.validate().unwrap();
    c
}

/// Every multi-core workload: after a 4-core run with contention and aborts, the data area is
/// the initial one with the committed transactions' stores applied in commit order (the
/// serial order strict 2PL promises), the image passes the structural verifier, and the record
/// names each transaction's core and the lines it read.
#[test]
fn a_multicore_run_equals_its_committed_transactions_applied_in_commit_order() {
    use crate::workload::keys::Distribution;
    // The workloads' small configurations, then those with finer locks (a hash allocator per
    // core, four trees) under uniform and zipfian keys, and SDG's vertex locks.
    let mut cases: Vec<(WorkloadKind, WorkloadConfig)> = MULTICORE.iter().map(|&k| (k, small())).collect();
    for distribution in [Distribution::Uniform, Distribution::Zipfian] {
        let mut c = small();
        c.hash.allocators = 4;
        c.hash.keys.distribution = distribution;
        cases.push((WorkloadKind::Hash, c));
        // Partitioned trees: a lock per tree.
        let mut c = small();
        (c.btree.trees, c.rbtree.trees) = (4, 4);
        (c.btree.keys.distribution, c.rbtree.keys.distribution) = (distribution, distribution);
        cases.push((WorkloadKind::BTree, c.clone()));
        cases.push((WorkloadKind::RbTree, c));
    }
    // SDG with an allocator per core: vertex-line locks.
    let mut c = small();
    c.sdg.allocators = 4;
    cases.push((WorkloadKind::Sdg, c));
    for (kind, wc) in cases {
        let mut wl = kind.build(&wc);
        let mut data = vec![0u8; wl.data_bytes().div_ceil(4096) as usize * 4096];
        wl.populate(&mut data);
        let mut s = sim(4, &data, true);
        let mut wls: Vec<Workload> = (0..4).map(|c| wl.for_core(c, 4).unwrap()).collect();
        let mut streams: Vec<_> = (0..4).map(|c| crate::rng::run_streams(7, c)).collect();
        run(&mut s, &mut wls, &mut streams, &split(2000, 4), 0.1).unwrap();
        assert!(s.stats.txs_aborted > 100, "{}: aborts ran", kind.name());
        let o = s.take_oracle().unwrap();
        assert_eq!(o.txs() as u64, s.stats.txs_committed);
        let mut model = data.clone();
        for k in 0..o.txs() {
            o.apply_tx(k, &mut model);
        }
        assert!(model[..] == s.m.arch[..data.len()], "{}: final data area", kind.name());
        wl.verify(&model).unwrap();
        // Every core committed, and each transaction read the lines it wrote (swaps load first).
        assert_eq!(o.tx_core.len(), o.txs());
        for c in 0..4u8 {
            assert!(o.tx_core.iter().filter(|&&x| x == c).count() > 300, "{}: core {c}", kind.name());
        }
        if kind == WorkloadKind::Sps {
            // A swap loads both entries before storing them: every line written was read.
            for k in 0..o.txs() {
                let reads = &o.reads[if k == 0 { 0 } else { o.tx_read_end[k - 1] }..o.tx_read_end[k]];
                assert!(o.tx_blocks(k).all(|b| reads.contains(&(b as u64))), "tx {k}");
            }
        }
        assert_eq!(o.tx_read_end.len(), o.txs());
    }
}

/// The same configuration and seed give the same run, twice: the figures and the recorded
/// writes, acknowledgements and oracle.
#[test]
fn a_multicore_run_is_deterministic() {
    use crate::runner::{execute, RunSpec};
    for &kind in MULTICORE {
        let mut c = cfg(4);
        c.workload = small();
        let spec = RunSpec {
            cfg: c,
            workload: kind,
            protocol: crate::protocol::ProtocolKind::Baseline,
            txs: 3000,
            warmup_txs: 500,
            seed: 3,
            abort_rate: 0.05,
            bug: None,
            record: true,
            tape: false,
            prefault: false,
        };
        let digest = || {
            let out = execute(&spec).unwrap();
            let mut r = out.result;
            r.host_seconds = 0.0;
            r.sim_mem_accesses_per_second = 0.0;
            let rec = out.recorded.unwrap();
            let w: Vec<_> = rec.record.durable.writes.iter().map(|w| (w.durable, w.block, w.data)).collect();
            (serde_json::to_string(&r).unwrap(), w, rec.record.acks.clone(), rec.oracle.bytes, rec.oracle.tx_core)
        };
        let (a, b) = (digest(), digest());
        assert!(a == b, "{}", kind.name());
        assert!(a.0.contains("\"cores\":4"), "{}", a.0);
    }
}

/// Each multi-core protocol runs on 2 cores; one not yet made multi-core, and SQLite, refuse more
/// than one core with one line.
#[test]
fn multicore_runs_refuse_what_is_not_multicore_with_one_line() {
    use crate::protocol::ProtocolKind;
    use crate::runner::{execute, RunSpec};
    let mut c = cfg(2);
    c.workload = small();
    let spec = |workload, protocol| RunSpec {
        cfg: c.clone(),
        workload,
        protocol,
        txs: 10,
        warmup_txs: 0,
        seed: 1,
        abort_rate: 0.0,
        bug: None,
        record: false,
        tape: false,
        prefault: false,
    };
    // Every protocol runs on N cores.
    for &p in ProtocolKind::ALL.iter() {
        let r = execute(&spec(WorkloadKind::Sps, p)).unwrap_or_else(|e| panic!("{}: {e}", p.name()));
        assert_eq!(r.result.cores, Some(2), "{}", p.name());
    }
    let e = execute(&spec(WorkloadKind::Sqlite, ProtocolKind::Baseline)).err().unwrap();
    assert!(e.starts_with("workload sqlite runs on one core: SQLite's own locking serialises writers"), "{e}");
    assert!(!e.contains('\n'));
    for &w in MULTICORE {
        let r = execute(&spec(w, ProtocolKind::Baseline)).unwrap().result;
        assert_eq!((r.txs_committed, r.cores), (10, Some(2)), "{}", w.name());
    }
}
