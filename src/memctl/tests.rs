//! Tests of the controller's timing: bank conflicts, write durability, ADR, and the bounded
//! write queue. Default configuration: 8 banks, 168 cycles per read or write at 1 GHz.

use super::*;

const LAT: Cycle = Cycle::new(168);

fn ctl() -> MemCtl {
    MemCtl::new(&Config::default())
}

fn ctl_with(sets: &[&str]) -> MemCtl {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    MemCtl::new(&Config::build(None, &sets).unwrap())
}

#[test]
fn blocks_are_interleaved_across_banks_by_block_number() {
    let c = ctl();
    for k in 0..32 {
        assert_eq!(c.bank_of(BlockId(k)), (k % 8) as usize);
    }
    let c = ctl_with(&["memory.banks=6"]);
    assert_eq!(c.bank_of(BlockId(7)), 1, "non-power-of-two bank count");
    assert_eq!(c.bank_of(BlockId(12)), 0);
}

#[test]
fn read_to_a_free_bank_takes_the_read_latency() {
    let mut c = ctl();
    assert_eq!(c.read(Cycle::ZERO, BlockId(0)), LAT);
    assert_eq!(c.read(Cycle::new(10), BlockId(1)), LAT + Cycle::new(10));
    assert_eq!(c.reads, 2);
}

#[test]
fn second_read_to_a_busy_bank_waits_for_it() {
    let mut c = ctl();
    let first = c.read(Cycle::ZERO, BlockId(0));
    assert_eq!(c.read(Cycle::new(5), BlockId(8)), first + LAT, "same bank: serialized");
    // Issued exactly when the bank frees: no wait.
    let second = first + LAT;
    assert_eq!(c.read(second, BlockId(16)), second + LAT);
}

#[test]
fn reads_to_different_banks_overlap() {
    let mut c = ctl();
    for k in 0..8 {
        assert_eq!(c.read(Cycle::ZERO, BlockId(k)), LAT, "bank {k}");
    }
    assert_eq!(c.read(Cycle::ZERO, BlockId(8)), LAT * 2, "the ninth shares bank 0");
}

#[test]
fn write_is_durable_when_the_bank_finishes_it() {
    let mut c = ctl();
    let t = c.write(Cycle::new(10), BlockId(3));
    assert_eq!(
        t,
        WriteTiming {
            accepted: Cycle::new(10),
            started: Cycle::new(10),
            done: LAT + Cycle::new(10),
            durable: LAT + Cycle::new(10)
        }
    );
    assert_eq!(c.writes, 1);
    assert_eq!(c.all_writes_done(), LAT + Cycle::new(10));
}

#[test]
fn write_waits_behind_a_read_on_the_same_bank_and_a_read_behind_a_write() {
    let mut c = ctl();
    assert_eq!(c.read(Cycle::ZERO, BlockId(0)), LAT);
    let t = c.write(Cycle::ZERO, BlockId(8));
    assert_eq!((t.accepted, t.done, t.durable), (Cycle::ZERO, LAT * 2, LAT * 2));
    assert_eq!(c.read(Cycle::new(1), BlockId(16)), LAT * 3);
}

#[test]
fn two_writes_to_one_block_complete_in_issue_order() {
    let mut c = ctl();
    let a = c.write(Cycle::ZERO, BlockId(5));
    let b = c.write(Cycle::ZERO, BlockId(5));
    assert_eq!((a.done, b.done), (LAT, LAT * 2));
}

#[test]
fn adr_makes_a_write_durable_when_accepted() {
    let mut c = ctl_with(&["machine.persist_domain=adr"]);
    let t = c.write(Cycle::new(10), BlockId(0));
    assert_eq!(
        t,
        WriteTiming {
            accepted: Cycle::new(10),
            started: Cycle::new(10),
            done: LAT + Cycle::new(10),
            durable: Cycle::new(10)
        }
    );
    let t = c.write(Cycle::new(11), BlockId(8));
    assert_eq!((t.durable, t.done), (Cycle::new(11), LAT * 2 + Cycle::new(10)), "durable before its bank is free");
}

/// Under `adr` a write issued at a cycle before the last acceptance of its bank (another core's
/// write, issued first by a core whose clock is ahead) is accepted at that acceptance, so that
/// two writes of one block become durable in issue order; another bank is not held.
#[test]
fn adr_accepts_a_banks_writes_in_issue_order_when_a_clock_is_behind() {
    let mut c = ctl_with(&["machine.persist_domain=adr"]);
    let ahead = c.write(Cycle::new(500), BlockId(5));
    assert_eq!(ahead.durable, Cycle::new(500));
    let behind = c.write(Cycle::new(300), BlockId(5));
    assert_eq!(
        (behind.accepted, behind.durable, behind.done),
        (Cycle::new(500), Cycle::new(500), Cycle::new(500) + LAT * 2)
    );
    let other = c.write(Cycle::new(300), BlockId(6));
    assert_eq!((other.accepted, other.durable), (Cycle::new(300), Cycle::new(300)));
    // Under `memory` the bank orders completion, and acceptance stays the issue cycle.
    let mut c = ctl();
    c.write(Cycle::new(500), BlockId(5));
    let behind = c.write(Cycle::new(300), BlockId(5));
    assert_eq!((behind.accepted, behind.durable), (Cycle::new(300), Cycle::new(500) + LAT * 2));
}

#[test]
fn full_write_queue_delays_acceptance_until_the_earliest_write_completes() {
    let mut c = ctl_with(&["memory.write_queue_entries=2"]);
    assert_eq!(c.write(Cycle::ZERO, BlockId(0)).done, LAT);
    assert_eq!(c.write(Cycle::new(10), BlockId(1)).done, LAT + Cycle::new(10));
    // Queue full at 20; the earliest in-flight write completes at 168.
    let t = c.write(Cycle::new(20), BlockId(2));
    assert_eq!((t.accepted, t.done, t.durable), (LAT, LAT * 2, LAT * 2));
    assert_eq!(c.queue_full_stall_cycles, LAT - Cycle::new(20));
    // Full again ({178, 336}): the next one waits for 178, not 177, not 336.
    let t = c.write(Cycle::new(170), BlockId(3));
    assert_eq!(t.accepted, LAT + Cycle::new(10));
    assert_eq!(c.queue_full_stall_cycles, LAT - Cycle::new(20) + Cycle::new(8));
}

#[test]
fn write_issued_exactly_when_a_queued_write_completes_is_not_stalled() {
    let mut c = ctl_with(&["memory.write_queue_entries=2"]);
    c.write(Cycle::ZERO, BlockId(0));
    c.write(Cycle::ZERO, BlockId(1));
    let t = c.write(LAT, BlockId(2));
    assert_eq!(t.accepted, LAT);
    assert_eq!(c.queue_full_stall_cycles, Cycle::ZERO);
}

#[test]
fn one_entry_queue_serializes_writes_to_different_banks() {
    let mut c = ctl_with(&["memory.write_queue_entries=1"]);
    let a = c.write(Cycle::ZERO, BlockId(0));
    let b = c.write(Cycle::ZERO, BlockId(1));
    assert_eq!(b.accepted, a.done);
    assert_eq!(b.done, a.done + LAT);
}

#[test]
fn adr_write_stalled_by_a_full_queue_is_durable_at_its_late_acceptance() {
    let mut c = ctl_with(&["memory.write_queue_entries=1", "machine.persist_domain=adr"]);
    c.write(Cycle::ZERO, BlockId(0));
    let t = c.write(Cycle::new(5), BlockId(1));
    assert_eq!((t.accepted, t.durable, t.done), (LAT, LAT, LAT * 2));
}

#[test]
fn all_writes_done_is_the_latest_completion() {
    let mut c = ctl();
    assert_eq!(c.all_writes_done(), Cycle::ZERO);
    c.write(Cycle::ZERO, BlockId(0));
    c.write(Cycle::ZERO, BlockId(8));
    c.write(Cycle::new(50), BlockId(1));
    assert_eq!(c.all_writes_done(), LAT * 2);
}

#[test]
fn latencies_are_converted_from_ns_with_the_core_clock() {
    let c = ctl_with(&["core.freq_mhz=2000", "memory.write_latency_ns=300"]);
    assert_eq!((c.read_cycles(), c.write_cycles()), (LAT * 2, Cycle::new(600)));
    let mut c = ctl_with(&["memory.read_latency_ns=35", "memory.write_latency_ns=95"]);
    assert_eq!(c.read(Cycle::ZERO, BlockId(0)), Cycle::new(35));
    assert_eq!(c.write(Cycle::ZERO, BlockId(0)).done, Cycle::new(35) + Cycle::new(95));
}

/// The write queue as first written: one min-heap of completion cycles, completed writes
/// dropped at every issue (the reference model for the sorted ring).
struct HeapModel {
    bank_free: Vec<Cycle>,
    heap: std::collections::BinaryHeap<std::cmp::Reverse<Cycle>>,
    cap: usize,
    stall: Cycle,
}

impl HeapModel {
    fn write(&mut self, now: Cycle, bank: usize, min_start: Cycle, cycles: Cycle) -> (Cycle, Cycle) {
        while self.heap.peek().is_some_and(|r| r.0 <= now) {
            self.heap.pop();
        }
        let mut accepted = now;
        if self.heap.len() >= self.cap {
            accepted = self.heap.pop().unwrap().0.max(now);
            self.stall += accepted - now;
        }
        let done = accepted.max(self.bank_free[bank]).max(min_start) + cycles;
        self.bank_free[bank] = done;
        self.heap.push(std::cmp::Reverse(done));
        (accepted, done)
    }
}

#[test]
fn the_sorted_write_queue_matches_a_min_heap_model_on_random_traffic() {
    for (seed, banks, cap) in [(1, 8, 32), (2, 8, 1), (3, 6, 5), (4, 1, 3), (5, 16, 64), (6, 3, 2)] {
        let mut c = ctl_with(&[&format!("memory.banks={banks}"), &format!("memory.write_queue_entries={cap}")]);
        let mut m =
            HeapModel { bank_free: vec![Cycle::ZERO; banks], heap: Default::default(), cap, stall: Cycle::ZERO };
        let mut rng = crate::rng::Rng::new(seed);
        let mut now = Cycle::ZERO;
        for step in 0..20_000 {
            // Multiples of 10 cycles: completions often coincide with issue cycles.
            now += Cycle::new(10 * rng.below(4) * rng.below(6));
            let b = BlockId(rng.below(1000));
            if rng.below(5) == 0 {
                let done = c.read(now, b);
                let bank = c.bank_of(b);
                m.bank_free[bank] = now.max(m.bank_free[bank]) + LAT;
                assert_eq!(done, m.bank_free[bank], "seed {seed} step {step}: read");
                continue;
            }
            let (min_start, cycles) = (
                if rng.below(4) == 0 { now + Cycle::new(10 * rng.below(50)) } else { Cycle::ZERO },
                Cycle::new(10 * (5 + rng.below(30))),
            );
            let t = c.write_timed(now, b, min_start, cycles);
            let (accepted, done) = m.write(now, c.bank_of(b), min_start, cycles);
            assert_eq!((t.accepted, t.done), (accepted, done), "seed {seed} step {step}: write at {now}");
            // Every write done by the same cycle (the ring may still hold completed ones).
            let model_all = m.heap.iter().map(|r| r.0).max().unwrap_or(Cycle::ZERO);
            assert_eq!(c.all_writes_done().max(now), model_all.max(now), "seed {seed} step {step}");
        }
        assert_eq!(c.queue_full_stall_cycles, m.stall, "seed {seed}");
        assert!(m.stall > Cycle::ZERO || cap >= 32, "seed {seed}: the queue never filled, the test proves little");
    }
}

#[test]
fn a_cxl_read_adds_the_link_round_trip_and_two_crossings_per_switch() {
    // Direct attach: 168 (bank) + 70 (link); the bank is busy for its own 168 cycles only.
    let mut c = ctl_with(&["memory.attach=cxl"]);
    assert_eq!(c.read(Cycle::new(10), BlockId(0)), Cycle::new(10 + 168 + 70));
    assert_eq!(
        c.read(Cycle::new(10), BlockId(8)),
        Cycle::new(10 + 168 + 168 + 70),
        "same bank: serialized on the bank"
    );
    // Two switches of 35 ns each way: 70 + 2 * 2 * 35 = 210 added.
    let mut c = ctl_with(&["memory.attach=cxl", "memory.cxl_switch_hops=2"]);
    assert_eq!(c.read(Cycle::ZERO, BlockId(1)), Cycle::new(168 + 210));
    // At 2 GHz the ns become cycles: (168 + 70) ns = 476 cycles.
    let mut c = ctl_with(&["memory.attach=cxl", "core.freq_mhz=2000"]);
    assert_eq!(c.read(Cycle::ZERO, BlockId(1)), Cycle::new(336 + 140));
    // `ddr` ignores the CXL keys.
    let mut c = ctl_with(&["memory.cxl_switch_hops=3", "memory.cxl_read_ns=500"]);
    assert_eq!(c.read(Cycle::ZERO, BlockId(1)), LAT);
}

#[test]
fn a_cxl_write_starts_on_its_bank_after_the_link_and_is_durable_at_acceptance_under_adr() {
    let mut c = ctl_with(&["memory.attach=cxl", "memory.cxl_switch_hops=1"]);
    // Accepted at issue; reaches the device 35 + 35 later; programmed for 168.
    let t = c.write(Cycle::new(10), BlockId(3));
    assert_eq!(
        t,
        WriteTiming {
            accepted: Cycle::new(10),
            started: Cycle::new(80),
            done: Cycle::new(248),
            durable: Cycle::new(248)
        }
    );
    assert_eq!(c.queued_at(Cycle::new(247)), 1);
    assert_eq!(c.queued_at(Cycle::new(248)), 0);
    // The bank is busy until 248: the next write to it waits for the bank, not the link.
    let t = c.write(Cycle::new(20), BlockId(11));
    assert_eq!((t.started, t.done), (Cycle::new(248), Cycle::new(416)));
    // A META-style minimum start later than the link's arrival binds.
    let t = c.write_after(Cycle::new(20), BlockId(4), Cycle::new(500));
    assert_eq!(t.started, Cycle::new(500));
    for d in ["gpf", "gpf-no-writeback"] {
        let mut c = ctl_with(&["memory.attach=cxl", &format!("machine.persist_domain={d}")]);
        let t = c.write(Cycle::new(10), BlockId(3));
        assert_eq!((t.accepted, t.started, t.durable), (Cycle::new(10), Cycle::new(45), Cycle::new(10)), "{d}");
    }
}
