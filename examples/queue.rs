//! A user's own workload through the library API: a persistent linked-list queue, written
//! against the `Pm` trait the built-in workloads use, run under every protocol and
//! crash-checked (docs/your-own-workload.md).
//!
//! `cargo run --release --example queue [TXS]`
//!
//! Layout of the data area: block 0 holds the queue's head, tail and length and the free
//! list's head (u64 each, little-endian; offsets of 64-byte nodes, 0 = none); nodes follow,
//! each `next` (u64) and `value` (u64). An enqueue takes a node from the free list, fills it
//! and links it after the tail; a dequeue unlinks the head and returns it to the free list.
//! Every field is read through `pm` inside the transaction, so an aborted transaction leaves
//! nothing behind in host memory.

use locsim::api::{check_run, execute_with, Addr, Config, CrashSpec, Pm, ProtocolKind, Rng, RunSpec, UserWorkload};
use locsim::api::{Workload, WorkloadKind};

const HEAD: Addr = Addr(0);
const TAIL: Addr = Addr(8);
const LEN: Addr = Addr(16);
const FREE: Addr = Addr(24);
const NODE: u64 = 64;

/// A queue of at most `nodes` u64 values.
struct Queue {
    nodes: u64,
}

impl Queue {
    fn node(i: u64) -> u64 {
        NODE * (i + 1)
    }

    fn enqueue(&self, pm: &mut dyn Pm, value: u64) {
        let n = pm.load_u64(FREE);
        if n == 0 {
            return; // full
        }
        let after = pm.load_u64(Addr(n));
        pm.store_u64(FREE, after);
        pm.store_u64(Addr(n), 0);
        pm.store_u64(Addr(n + 8), value);
        match pm.load_u64(TAIL) {
            0 => pm.store_u64(HEAD, n),
            t => pm.store_u64(Addr(t), n),
        }
        pm.store_u64(TAIL, n);
        let len = pm.load_u64(LEN);
        pm.store_u64(LEN, len + 1);
    }

    fn dequeue(&self, pm: &mut dyn Pm) -> Option<u64> {
        let h = pm.load_u64(HEAD);
        if h == 0 {
            return None;
        }
        let value = pm.load_u64(Addr(h + 8));
        let next = pm.load_u64(Addr(h));
        pm.store_u64(HEAD, next);
        if next == 0 {
            pm.store_u64(TAIL, 0);
        }
        let free = pm.load_u64(FREE);
        pm.store_u64(Addr(h), free);
        pm.store_u64(FREE, h);
        let len = pm.load_u64(LEN);
        pm.store_u64(LEN, len - 1);
        Some(value)
    }
}

impl UserWorkload for Queue {
    fn data_bytes(&self) -> u64 {
        Queue::node(self.nodes)
    }

    fn populate(&mut self, data: &mut [u8]) {
        // Every node on the free list, in order.
        data[24..32].copy_from_slice(&Queue::node(0).to_le_bytes());
        for i in 0..self.nodes {
            let next = if i + 1 < self.nodes { Queue::node(i + 1) } else { 0 };
            let at = Queue::node(i) as usize;
            data[at..at + 8].copy_from_slice(&next.to_le_bytes());
        }
    }

    fn run_tx(&mut self, pm: &mut dyn Pm, rng: &mut Rng, abort: bool) {
        pm.begin();
        // A few operations per transaction, more enqueues while the queue is short.
        for _ in 0..1 + rng.below(4) {
            let len = pm.load_u64(LEN);
            if rng.below(self.nodes) >= len {
                self.enqueue(pm, rng.next_u64());
            } else {
                self.dequeue(pm);
            }
            pm.compute(20);
        }
        if abort {
            pm.abort();
        } else {
            pm.commit();
        }
    }
}

fn main() -> Result<(), String> {
    let txs: u64 = std::env::args().nth(1).map_or(Ok(2000), |s| s.parse()).map_err(|e| format!("TXS: {e}"))?;
    let cfg = Config::build(None, &[]).map_err(|e| e.0)?;
    let queue = || Workload::User(Box::new(Queue { nodes: 4096 }));
    for &protocol in ProtocolKind::ALL {
        let spec = RunSpec {
            cfg: cfg.clone(),
            workload: WorkloadKind::User,
            protocol,
            txs,
            warmup_txs: 0,
            seed: 1,
            abort_rate: 0.05,
            bug: None,
            record: false,
            tape: false,
            prefault: false,
        };
        let r = execute_with(&spec, queue())?.result;
        print!(
            "{:<9} {:>6} txs {:>10} cycles  write traffic {:>5.2}",
            r.protocol, r.txs_committed, r.cycles, r.write_traffic
        );
        // Crash-check the protocols that promise durability: a recorded run, then the sweep.
        if !protocol.bugs().is_empty() {
            let crash = CrashSpec::new(RunSpec { record: true, ..spec }, 300);
            let report = check_run(&crash, execute_with(&crash.run, queue())?)?;
            print!("  crash check: {} points, {} violations", report.crash_points, report.violations);
            if report.violations > 0 {
                println!();
                return Err(format!("{}: {:?}", protocol.name(), report.first_violation));
            }
        }
        println!();
    }
    Ok(())
}
