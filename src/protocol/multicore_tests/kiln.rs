//! A hand-driven multi-core bench for the protocols of docs/multicore.md (Kiln), without the
//! scheduler: transactions are begun, stored to, read and committed on chosen cores
//! (`Machine::switch_core`), the oracle's record is kept here (per committed transaction its
//! core and stores, in global commit order), and [`Bench::check_prefixes`] recovers the
//! durable image at every cycle at which a write became durable and compares the data area
//! with the expected images exactly.

use crate::config::Config;
use crate::log::head::LogFormat;
use crate::log::nvllc;
use crate::machine::Machine;
use crate::pmem::Layout;
use crate::protocol::kiln::Kiln;
use crate::protocol::{Bug, Build, Protocol, Registration};
use crate::recovery;
use crate::rng::Rng;
use crate::types::{blocks_of, Addr, BlockId, Cycle};

/// A store: address and bytes.
type Store = (u64, Vec<u8>);
/// A running transaction's store: address, new bytes, old bytes (for abort).
type Undoable = (u64, Vec<u8>, Vec<u8>);

/// The protocol under test on a machine of several cores, and what the program did.
pub struct Bench<P: Protocol> {
    pub m: Machine,
    pub p: P,
    format: LogFormat,
    initial: Vec<u8>,
    /// Per core: its running transaction's stores (address, bytes) and their undo bytes.
    running: Vec<Option<Vec<Undoable>>>,
    /// Committed transactions in global commit order: (core, stores, commit-call cycle).
    pub committed: Vec<(usize, Vec<Store>, Cycle)>,
    /// Per core: the global indices of its committed transactions, in its commit order.
    per_core: Vec<Vec<usize>>,
    /// Per data block: the cycle its last writer's commit (or abort) returned, when its lock
    /// was released; a transaction touching the block takes the lock no earlier.
    released: Vec<Cycle>,
}

/// Configuration with `cores` cores and the given `key=value` settings.
pub fn cfg(cores: u32, sets: &[&str]) -> Config {
    let mut all = vec![format!("machine.cores={cores}")];
    all.extend(sets.iter().map(|s| s.to_string()));
    Config::build(None, &all).unwrap()
}

/// A Kiln bench: 32 KiB of data, a 64 KiB log split among the cores, the NV-LLC of `cfg`.
pub fn kiln(cfg: &Config, bug: Option<Bug>) -> Bench<Kiln> {
    bench(&crate::protocol::kiln::KILN, cfg, bug)
}

/// A LOC-Kiln bench (`kiln` with speculation windows of `sd` committed transactions).
pub fn loc_kiln(cfg: &Config, sd: u32, bug: Option<Bug>) -> Bench<Kiln> {
    let mut cfg = cfg.clone();
    cfg.loc.speculation_degree = sd;
    bench(&crate::protocol::kiln::LOC_KILN, &cfg, bug)
}

/// A bench of the protocol `reg` registers, laid out and built as the runner does.
fn bench(reg: &Registration<Kiln>, cfg: &Config, bug: Option<Bug>) -> Bench<Kiln> {
    let layout = Layout::new(32 << 10, 64 << 10).with_cores(cfg.machine.cores);
    let layout = (reg.desc.layout)(layout, cfg).expect("a Kiln layout");
    let p = (reg.build)(&Build { cfg, layout: &layout, bug });
    Bench::new(cfg, layout, p, reg.desc.log_format.expect("Kiln logs"))
}

impl<P: Protocol> Bench<P> {
    pub fn new(cfg: &Config, layout: Layout, p: P, format: LogFormat) -> Bench<P> {
        let mut initial = vec![0u8; layout.total_bytes() as usize];
        // A recognisable initial data area, so that a lost write shows.
        for (i, x) in initial[..layout.data_bytes as usize].iter_mut().enumerate() {
            *x = (i * 7 + 3) as u8;
        }
        p.format(&layout, &mut initial);
        let m = Machine::new(cfg, layout, initial.clone(), true);
        let cores = m.cores();
        let released = vec![Cycle::ZERO; (layout.data_bytes / 64) as usize];
        Bench {
            m,
            p,
            format,
            initial,
            running: vec![None; cores],
            committed: Vec::new(),
            per_core: vec![Vec::new(); cores],
            released,
        }
    }

    pub fn begin(&mut self, c: usize) {
        self.m.switch_core(c);
        assert!(self.running[c].is_none(), "core {c}: nested transaction");
        self.running[c] = Some(Vec::new());
        self.p.begin(&mut self.m);
    }

    /// A store of `data` at `addr` by core `c`'s running transaction.
    pub fn store(&mut self, c: usize, addr: u64, data: &[u8]) {
        self.m.switch_core(c);
        self.lock(addr, data.len());
        let (a, n) = (addr as usize, data.len());
        self.p.before_store(&mut self.m, Addr(addr), n);
        let old = self.m.arch[a..a + n].to_vec();
        self.m.arch[a..a + n].copy_from_slice(data);
        self.running[c].as_mut().expect("store outside a transaction").push((addr, data.to_vec(), old));
        self.p.store(&mut self.m, Addr(addr), n);
    }

    /// Take the locks of `[addr, addr+len)`: wait until their last writer released them.
    fn lock(&mut self, addr: u64, len: usize) {
        for b in blocks_of(Addr(addr), len) {
            self.m.wait_until(self.released[b.0 as usize]);
        }
    }

    /// Release the locks of the blocks `stores` wrote (the running core's commit or abort
    /// returned).
    fn release(&mut self, stores: &[Store]) {
        for (a, d) in stores {
            for b in blocks_of(Addr(*a), d.len()) {
                self.released[b.0 as usize] = self.m.now;
            }
        }
    }

    /// Core `c` takes lock `id`, a volatile line after the layout (as the scheduler's locks
    /// are): an access outside the protocol, whose LLC miss can push out tagged lines.
    pub fn lock_line(&mut self, c: usize, id: u64) {
        self.m.switch_core(c);
        let b = BlockId(self.m.volatile_block0 + id);
        self.m.access_block(b, true);
    }

    pub fn load(&mut self, c: usize, addr: u64, len: usize) {
        self.m.switch_core(c);
        self.lock(addr, len);
        self.p.load(&mut self.m, Addr(addr), len);
    }

    pub fn commit(&mut self, c: usize) {
        self.m.switch_core(c);
        let stores = self.running[c].take().expect("commit outside a transaction");
        self.m.txs_committed += 1;
        self.m.note_commit_called();
        self.per_core[c].push(self.committed.len());
        let stores: Vec<Store> = stores.into_iter().map(|(a, d, _)| (a, d)).collect();
        let called = self.m.now;
        self.p.commit(&mut self.m);
        self.release(&stores);
        self.committed.push((c, stores, called));
    }

    pub fn abort(&mut self, c: usize) {
        self.m.switch_core(c);
        let stores = self.running[c].take().expect("abort outside a transaction");
        for (a, _, old) in stores.iter().rev() {
            self.m.arch[*a as usize..*a as usize + old.len()].copy_from_slice(old);
        }
        let written: Vec<(Addr, u32)> = stores.iter().map(|(a, d, _)| (Addr(*a), d.len() as u32)).collect();
        self.p.abort(&mut self.m, &written);
        let stores: Vec<Store> = stores.into_iter().map(|(a, d, _)| (a, d)).collect();
        self.release(&stores);
    }

    /// Is core `c` in a transaction?
    pub fn in_tx(&self, c: usize) -> bool {
        self.running[c].is_some()
    }

    /// Blocks written by running transactions of cores other than `c` (their locks).
    pub fn locked_by_others(&self, c: usize) -> Vec<u64> {
        let mut v = Vec::new();
        for (_, r) in self.running.iter().enumerate().filter(|(o, _)| *o != c) {
            for (a, d, _) in r.iter().flatten() {
                v.extend(blocks_of(Addr(*a), d.len()).map(|b| b.0));
            }
        }
        v
    }

    /// The data area after the first `k` transactions of the global commit order.
    fn image_after(&self, k: usize) -> Vec<u8> {
        let mut d = self.initial[..self.m.layout.data_bytes as usize].to_vec();
        for (_, stores, _) in &self.committed[..k] {
            for (a, bytes) in stores {
                d[*a as usize..*a as usize + bytes.len()].copy_from_slice(bytes);
            }
        }
        d
    }

    /// Crash at every cycle at which a write became durable (and at the end): the recovered
    /// data area must equal the image after a prefix `k` of the global commit order that
    /// holds every transaction acknowledged by then and only transactions whose commit was
    /// called by then; recovering the recovered image again changes nothing. Returns the
    /// number of crash points checked, or the first violation.
    pub fn check_prefixes(&mut self) -> Result<usize, String> {
        self.m.quiesce();
        let mut rec = self.m.record.take().expect("recording");
        rec.durable.finish();
        let layout = self.m.layout;
        let data = layout.data_bytes as usize;
        let prefixes: Vec<Vec<u8>> = (0..=self.committed.len()).map(|k| self.image_after(k)).collect();
        let mut cycles: Vec<Cycle> = rec.durable.writes.iter().map(|w| w.durable).collect();
        cycles.insert(0, Cycle::ZERO);
        cycles.dedup();
        let mut img = self.initial.clone();
        let mut next = 0;
        for &t in &cycles {
            while next < rec.durable.writes.len() && rec.durable.writes[next].durable <= t {
                let w = &rec.durable.writes[next];
                img[w.block.range()].copy_from_slice(&w.data);
                next += 1;
            }
            // Acknowledged by t: per core, the largest count acknowledged at or before t.
            let mut acked = vec![0usize; self.per_core.len()];
            for (i, &(at, n)) in rec.acks.iter().enumerate() {
                if at <= t {
                    let c = rec.ack_cores[i] as usize;
                    acked[c] = acked[c].max(n as usize);
                }
            }
            let must = (0..acked.len()).filter(|&c| acked[c] > 0).map(|c| self.per_core[c][acked[c] - 1] + 1).max();
            let may = self.committed.iter().take_while(|x| x.2 <= t).count();
            let plan = recovery::recover(Some(self.format), &layout, &img).map_err(|e| format!("cycle {t}: {e}"))?;
            let mut r = img.clone();
            recovery::apply(&mut r, &plan.writes);
            let k = (0..=self.committed.len()).find(|&k| prefixes[k][..] == r[..data]);
            match k {
                Some(k) if k >= must.unwrap_or(0) && k <= may => {}
                Some(k) => {
                    return Err(format!(
                        "cycle {t}: recovered the first {k} transactions; acknowledged need {must:?}, called {may}"
                    ))
                }
                None => {
                    let diff = |k: usize| {
                        (0..data / 64)
                            .filter(|&b| prefixes[k][b * 64..b * 64 + 64] != r[b * 64..b * 64 + 64])
                            .collect::<Vec<_>>()
                    };
                    let k = (0..=self.committed.len()).min_by_key(|&k| diff(k).len()).unwrap();
                    let writers = |b: usize| {
                        (0..self.committed.len())
                            .filter(|&i| self.committed[i].1.iter().any(|(a, _)| *a as usize / 64 == b))
                            .map(|i| (i, self.committed[i].0))
                            .collect::<Vec<_>>()
                    };
                    let d: Vec<_> = diff(k)
                        .into_iter()
                        .map(|b| {
                            (
                                b,
                                writers(b),
                                (0..=self.committed.len())
                                    .filter(|&j| prefixes[j][b * 64..b * 64 + 64] == r[b * 64..b * 64 + 64])
                                    .collect::<Vec<_>>(),
                            )
                        })
                        .collect();
                    return Err(format!("cycle {t}: the recovered data area is no prefix of the commit order (nearest: the first {k}, blocks differing and their writers (tx, core): {d:?})"));
                }
            }
            let again =
                recovery::recover(Some(self.format), &layout, &r).map_err(|e| format!("cycle {t}: again: {e}"))?;
            let mut r2 = r.clone();
            recovery::apply(&mut r2, &again.writes);
            if r2[..data] != r[..data] {
                return Err(format!("cycle {t}: recovering twice changes the data area"));
            }
        }
        self.m.record = Some(rec);
        Ok(cycles.len())
    }
}

/// A seeded random interleaving on `cores` cores, run on the core whose clock is earliest
/// (ties: lowest id), as the scheduler does: each core runs transactions of 1..=`max_blocks`
/// block stores over a data area of `blocks` blocks, reads lines others committed, sometimes
/// aborts; a block written by another core's running transaction is never touched
/// (isolation by strict two-phase locking). Before a store it may take a lock line (one per
/// data block), whose miss can evict tagged lines outside the protocol's accesses.
pub fn random_run<P: Protocol>(b: &mut Bench<P>, seed: u64, txs: usize, blocks: u64, max_blocks: u64) {
    let mut rng = Rng::new(seed);
    let cores = b.m.cores();
    let mut left = vec![0u64; cores];
    let mut done = 0;
    while done < txs || (0..cores).any(|c| b.in_tx(c)) {
        let c = (0..cores).min_by_key(|&c| (b.m.clock_of(c), c)).unwrap();
        if !b.in_tx(c) {
            if done >= txs {
                // Let this core idle past the others so they can finish.
                b.m.switch_core(c);
                b.m.compute(Cycle::new(1000));
                continue;
            }
            b.begin(c);
            left[c] = 1 + rng.below(max_blocks);
            done += 1;
            continue;
        }
        if left[c] == 0 {
            if rng.chance(0.1) {
                b.abort(c);
            } else {
                b.commit(c);
            }
            continue;
        }
        left[c] -= 1;
        let locked = b.locked_by_others(c);
        let blk = loop {
            let x = rng.below(blocks);
            if !locked.contains(&x) {
                break x;
            }
        };
        if rng.chance(0.3) {
            b.lock_line(c, blk);
        }
        if rng.chance(0.3) {
            b.load(c, blk * 64, 64);
        }
        let off = rng.below(48);
        let bytes: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.below(256) as u8).collect();
        b.store(c, blk * 64 + off, &bytes);
    }
}

#[test]
fn kiln_on_three_cores_recovers_a_prefix_of_the_global_commit_order_at_every_crash_cycle() {
    let cfg = cfg(3, &[]);
    let mut b = kiln(&cfg, None);
    // Core 0 writes blocks 1 and 2, core 1 block 3, core 2 block 4, all in flight at once.
    b.begin(0);
    b.store(0, 64, &[1; 8]);
    b.begin(1);
    b.store(1, 3 * 64, &[2; 8]);
    b.begin(2);
    b.store(2, 4 * 64, &[3; 8]);
    b.store(0, 2 * 64, &[4; 8]);
    b.commit(0);
    // Core 1 reads and overwrites core 0's committed (registered) line: it goes home first.
    b.load(1, 64, 8);
    b.store(1, 64 + 8, &[5; 8]);
    b.abort(2);
    b.commit(1);
    b.begin(2);
    b.store(2, 4 * 64, &[6; 8]);
    b.commit(2);
    let points = b.check_prefixes().unwrap();
    assert!(points >= 5, "{points} crash points");
    let r = b.m.record.as_ref().unwrap();
    assert_eq!(r.ack_cores, vec![0, 1, 2], "each commit acknowledged by its own core, synchronously");
    assert_eq!(r.acks.iter().map(|a| a.1).collect::<Vec<_>>(), vec![1, 1, 1]);
    assert_eq!(b.p.counters().iter().find(|c| c.0 == "old_version_writebacks").unwrap().1, 1);
}

#[test]
fn kiln_on_two_to_sixteen_cores_survives_random_interleavings_with_overflowing_transactions() {
    // A 4 KiB NV-LLC of 4 ways: transactions of up to 40 blocks overflow into their cores'
    // fallback-log regions, while other cores' transactions are in flight.
    let tiny = ["l1.size_bytes=1024", "l2.size_bytes=2048", "llc.size_bytes=4096", "llc.ways=4"];
    let adr = [&tiny[..], &["machine.persist_domain=adr"]].concat();
    // And 16 cores (the BLK-TAG's fourth CID bit), one seed; and under `adr`, where a write is
    // durable once accepted (docs/machine.md, "Order of one block's writes").
    for (cores, seeds, sets) in
        [(2, 0..6, &tiny[..]), (3, 0..6, &tiny), (4, 0..6, &tiny), (16, 0..1, &tiny), (4, 0..6, &adr)]
    {
        for seed in seeds {
            let cfg = cfg(cores, sets);
            let mut b = kiln(&cfg, None);
            random_run(&mut b, seed, 60, 256, 40);
            let points = b.check_prefixes().unwrap_or_else(|e| panic!("{cores} cores, seed {seed}: {e}"));
            let logged = b.p.counters().iter().find(|c| c.0 == "fallback_log_blocks").unwrap().1;
            assert!(logged > 20, "{cores} cores, seed {seed}: {logged} fallback-log blocks");
            assert!(points > 1000, "{cores} cores, seed {seed}: {points} crash points");
        }
    }
}

#[test]
fn kiln_bugs_are_caught_on_several_cores() {
    let tiny = ["l1.size_bytes=1024", "l2.size_bytes=2048", "llc.size_bytes=4096", "llc.ways=4"];
    for (bug, sets) in [(Bug::AckBeforeDurable, &[][..]), (Bug::EvictUncommittedHome, &tiny[..])] {
        let cfg = cfg(3, sets);
        let mut b = kiln(&cfg, Some(bug));
        random_run(&mut b, 1, 60, 256, 40);
        assert!(b.check_prefixes().is_err(), "{} not caught on 3 cores", bug.name());
    }
}

/// LOC-Kiln on two cores (docs/multicore.md, "LOC-Kiln on N cores"): core 1 reads a line of
/// core 0's open window (committed, not registered): the dependency is noted and core 0's
/// window is registered (its binding and the register move, it is acknowledged) before the
/// load, on core 1's time; core 1's window registers later, on its own. Every crash cycle
/// recovers a prefix of the global commit order. Under `dependent-before-source` core 1's
/// window registers while core 0's is open, which no prefix explains.
#[test]
fn loc_kiln_registers_a_source_window_before_its_dependent_on_another_core() {
    let cfg = cfg(2, &[]);
    let run = |bug| {
        let mut b = loc_kiln(&cfg, 2, bug);
        b.begin(0);
        b.store(0, 64, &[1; 8]);
        b.commit(0);
        b.begin(1);
        b.load(1, 64, 8);
        let loaded_at = b.m.now;
        b.store(1, 2 * 64, &[2; 8]);
        b.commit(1);
        b.begin(1);
        b.store(1, 3 * 64, &[3; 8]);
        b.commit(1);
        (b, loaded_at)
    };
    let (mut b, loaded_at) = run(None);
    let count = |b: &Bench<Kiln>, name: &str| b.p.counters().iter().find(|c| c.0 == name).unwrap().1;
    assert_eq!(count(&b, "cross_core_deps"), 1);
    assert_eq!(count(&b, "forced_closes"), 1);
    assert_eq!(count(&b, "forced_closes_mid_tx"), 0, "core 0 was between transactions");
    assert_eq!(count(&b, "windows"), 2, "core 0's forced close, core 1's full window");
    {
        let r = b.m.record.as_ref().unwrap();
        // Core 0's transaction is acknowledged first, before core 1's load returned; core 1's
        // two at its window's end.
        assert_eq!(r.ack_cores, vec![0, 1]);
        assert_eq!(r.acks.iter().map(|a| a.1).collect::<Vec<_>>(), vec![1, 2]);
        assert!(r.acks[0].0 <= loaded_at && r.acks[1].0 > loaded_at, "{:?}, load at {loaded_at}", r.acks);
    }
    // The NV-LLC: the register at the last global number; each core's binding at its last
    // registered transaction (core-local, global).
    let nv0 = b.m.layout.nvllc_block0();
    let slots = (cfg.llc_cache().size_bytes / 64) as usize;
    let nv = |k: u64| crate::pmem::read_block(&b.m.nvm, BlockId(nv0.0 + k));
    assert_eq!(nvllc::Register::decode(&nv(0)), Some(nvllc::Register { committed: 3, applied: 0 }));
    assert_eq!(nvllc::Binding::decode(&nv(nvllc::binding_block(slots, 0))), Some(nvllc::Binding { local: 1, seq: 1 }));
    assert_eq!(nvllc::Binding::decode(&nv(nvllc::binding_block(slots, 1))), Some(nvllc::Binding { local: 2, seq: 3 }));
    let points = b.check_prefixes().unwrap();
    assert!(points >= 3, "{points} crash points");
    // Injected: no forced close; core 1's window (which read core 0's line) registers alone.
    let (mut b, _) = run(Some(Bug::DependentBeforeSource));
    assert_eq!(count(&b, "forced_closes"), 0);
    let e = b.check_prefixes().expect_err("dependent-before-source is caught");
    assert!(e.contains("no prefix"), "{e}");
}
