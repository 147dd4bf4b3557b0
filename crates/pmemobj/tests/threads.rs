//! Two threads' transactions on one pool, interleaved step by step (each waits on the other
//! through a channel), through the library's C entry points: a transaction that ends while
//! another thread's is open leaves that one's uncommitted bytes out of the trace, and an
//! aborted transaction's allocation does not take back the heap other threads allocated from
//! meanwhile. The trace, replayed in its order, gives the pool's bytes at close.

use locsim_pmemobj::{
    locsim_tx_begin, pmemobj_alloc, pmemobj_alloc_usable_size, pmemobj_close, pmemobj_create, pmemobj_direct,
    pmemobj_root, pmemobj_tx_abort, pmemobj_tx_add_range, pmemobj_tx_alloc, pmemobj_tx_commit, pmemobj_tx_end,
    pmemobj_type_num, PMEMoid,
};
use locsim_trace::{Decoder, Record};
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::mpsc::channel;

/// A pool handle sent to another thread.
#[derive(Clone, Copy)]
struct Pop(*mut c_void);
// SAFETY: the library's pool handles are process-wide (PMDK's are used from every thread).
unsafe impl Send for Pop {}

fn create(name: &str) -> (PathBuf, Pop) {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let c = CString::new(path.to_str().unwrap()).unwrap();
    let pop = pmemobj_create(c.as_ptr(), c"threads".as_ptr(), 8 << 20, 0o600);
    assert!(!pop.is_null(), "pmemobj_create {}", path.display());
    (path, Pop(pop))
}

fn begin(pop: Pop) {
    // SAFETY: no parameters (n = 0): the arrays are not read.
    let r = unsafe {
        locsim_tx_begin(pop.0, std::ptr::null_mut(), 0, std::ptr::null(), std::ptr::null(), std::ptr::null())
    };
    assert_eq!(r, 0);
}

/// Write `v` at byte `at` of the object `oid`.
fn poke(oid: PMEMoid, at: usize, v: &[u8]) {
    let p = pmemobj_direct(oid) as *mut u8;
    // SAFETY: inside the object (the callers' offsets are below its size).
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p.add(at), v.len()) };
}

/// A transaction of a trace: committed, and its stores (address, bytes).
type Tx = (bool, Vec<(u64, Vec<u8>)>);

/// A trace's transactions in stream order.
fn transactions(trace: &Path) -> Vec<Tx> {
    let mut d = Decoder::new(std::fs::File::open(trace).unwrap()).unwrap();
    let (mut out, mut stores) = (Vec::new(), Vec::new());
    while let Some(r) = d.next_record().unwrap() {
        match r {
            Record::Store { addr, bytes } => stores.push((addr, bytes.to_vec())),
            Record::Commit => out.push((true, std::mem::take(&mut stores))),
            Record::Abort => out.push((false, std::mem::take(&mut stores))),
            _ => {}
        }
    }
    out
}

/// Assert that the trace, its committed stores applied in order, gives the pool's bytes.
fn replays_to_pool(pool: &Path) {
    let bytes = std::fs::read(pool).unwrap();
    let mut image = vec![0u8; bytes.len()];
    for (committed, stores) in transactions(&PathBuf::from(format!("{}.trace", pool.display()))) {
        for (a, b) in stores.iter().filter(|_| committed) {
            image[*a as usize..*a as usize + b.len()].copy_from_slice(b);
        }
    }
    let first = (0..bytes.len()).find(|&i| image[i] != bytes[i]);
    assert_eq!(first, None, "{}: the trace's bytes differ from the pool's", pool.display());
}

/// Two threads, step by step: thread A begins a transaction and runs `open` in it; while A's
/// transaction is open, thread B begins one, runs `commit` in it and commits it; then A aborts
/// its own. Returns what `open` and `commit` returned.
fn abort_after_other_commits<A: Send + 'static, B: Send + 'static>(
    pop: Pop,
    open: impl FnOnce() -> A + Send + 'static,
    commit: impl FnOnce() -> B + Send + 'static,
) -> (A, B) {
    let (ready_tx, ready) = channel();
    let (go_tx, go) = channel();
    let a = std::thread::spawn(move || {
        begin(pop);
        let out = open();
        ready_tx.send(()).unwrap();
        go.recv().unwrap();
        pmemobj_tx_abort(0);
        pmemobj_tx_end();
        out
    });
    let b = std::thread::spawn(move || {
        ready.recv().unwrap();
        begin(pop);
        let out = commit();
        pmemobj_tx_commit();
        assert_eq!(pmemobj_tx_end(), 0);
        go_tx.send(()).unwrap();
        out
    });
    (a.join().unwrap(), b.join().unwrap())
}

#[test]
fn a_transaction_leaves_out_the_ranges_another_threads_open_transaction_added() {
    let (path, pop) = create("inflight");
    let root = pmemobj_root(pop.0, 256);
    abort_after_other_commits(
        pop,
        move || {
            assert_eq!(pmemobj_tx_add_range(root, 0, 8), 0);
            poke(root, 0, &[0xaa; 8]);
        },
        move || {
            // The whole root is this transaction's touched range (reached through
            // pmemobj_direct), its first 8 bytes included, which the other thread's transaction
            // holds.
            assert_eq!(pmemobj_tx_add_range(root, 64, 8), 0);
            poke(root, 64, &[0xbb; 8]);
        },
    );
    pmemobj_close(pop.0);
    let txs = transactions(&PathBuf::from(format!("{}.trace", path.display())));
    let mine = txs.iter().find(|t| t.1.iter().any(|s| s.1.contains(&0xbb))).expect("the committed transaction");
    assert!(mine.0);
    let held = root.off..root.off + 8;
    assert!(
        mine.1.iter().all(|(at, b)| *at + b.len() as u64 <= held.start || *at >= held.end),
        "the committed transaction carries the open one's bytes: {:?}",
        mine.1
    );
    assert!(!txs.iter().any(|t| t.0 && t.1.iter().any(|s| s.1.contains(&0xaa))), "an aborted store committed");
    assert!(txs.iter().any(|t| !t.0 && t.1.iter().any(|s| s.1.contains(&0xaa))), "the aborted transaction's store");
    replays_to_pool(&path);
}

#[test]
fn an_aborted_transaction_frees_its_allocation_and_keeps_other_threads_allocations() {
    let (path, pop) = create("abortalloc");
    let (x, y) = abort_after_other_commits(
        pop,
        || {
            let x = pmemobj_tx_alloc(100, 1);
            assert_ne!(x.off, 0);
            x
        },
        || {
            let y = pmemobj_tx_alloc(100, 2);
            poke(y, 0, &[0xcc; 100]);
            y
        },
    );
    assert_ne!(x.off, y.off);
    // The committed object stays allocated; later allocations never hand it out again.
    for _ in 0..4 {
        let mut o = PMEMoid::default();
        assert_eq!(pmemobj_alloc(pop.0, &mut o, 100, 3, None, std::ptr::null_mut()), 0);
        assert_ne!(o.off, y.off, "the committed object handed out again");
        poke(o, 0, &[0xdd; 100]);
    }
    assert_eq!((pmemobj_type_num(y), pmemobj_alloc_usable_size(y)), (2, 112));
    // SAFETY: the object's 100 bytes.
    let kept = unsafe { std::slice::from_raw_parts(pmemobj_direct(y) as *const u8, 100) };
    assert!(kept.iter().all(|&c| c == 0xcc));
    // The aborted one is free.
    assert_eq!(pmemobj_alloc_usable_size(x), 0);
    pmemobj_close(pop.0);
    let txs = transactions(&PathBuf::from(format!("{}.trace", path.display())));
    assert_eq!(txs.iter().filter(|t| !t.0).count(), 1);
    replays_to_pool(&path);
}
