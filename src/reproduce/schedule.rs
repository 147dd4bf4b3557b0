//! Running the points on `--jobs` worker threads. Some points must not run beside each other in
//! one process (SQLite keeps process-wide state: [`super::kind::Executor::exclusive`]).
//!
//! With worker processes ([`super::worker`]: each worker thread runs such points in a process of
//! its own), every worker takes the next item whatever it is: the items run in the order given,
//! so the caller puts the longest first and the workers finish together.
//!
//! Without them (a library caller), the exclusive items form one chain through the process. A
//! worker takes the next exclusive item whenever no other worker is running one, and a free item
//! otherwise, so the chain starts at once and runs without a gap while the other workers run the
//! free items beside it; a worker never waits for the chain while free items are left.
//!
//! In both modes a worker skips an item that is `blocked` right now (its run would wait for
//! another worker: [`crate::runner::populating`]) and takes the next one that is not, and waits
//! only when every item left is blocked, by taking the first of them ([`pick`]).
//!
//! Which worker runs a point, and when, changes nothing in its result (each point is a pure
//! function of its job); results are returned in the order of the input.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Run `f(item, worker)` on every item on `jobs` threads (`worker` in `0..jobs`). With
/// `processes`, each worker runs exclusive items in a process of its own and every worker takes
/// the items in order; without, `exclusive[i]` says whether item `i` must not run beside another
/// exclusive item (one chain). Either way a worker passes over an item while `blocked(item)`
/// ([`pick`]). Returns the results in the order of `items`.
pub fn run<T: Sync, R: Send>(
    items: &[T],
    exclusive: &[bool],
    jobs: usize,
    processes: bool,
    blocked: impl Fn(&T) -> bool + Sync,
    f: impl Fn(&T, usize) -> R + Sync,
) -> Vec<R> {
    assert_eq!(items.len(), exclusive.len());
    let pop = |q: &Mutex<VecDeque<usize>>| {
        let mut q = q.lock().unwrap_or_else(|e| e.into_inner());
        let at = pick(&q, |i| blocked(&items[i]))?;
        q.remove(at)
    };
    if processes {
        return in_order(items, jobs, pop, f);
    }
    let chain: Mutex<VecDeque<usize>> = Mutex::new((0..items.len()).filter(|&i| exclusive[i]).collect());
    let free: Mutex<VecDeque<usize>> = Mutex::new((0..items.len()).filter(|&i| !exclusive[i]).collect());
    // Held while an exclusive item runs.
    let running_chain = Mutex::new(());
    on_workers(items.len(), jobs, |w| {
        let i = match running_chain.try_lock() {
            Ok(guard) => match pop(&chain) {
                Some(i) => {
                    let r = f(&items[i], w);
                    drop(guard);
                    Some((i, r))
                }
                None => None,
            },
            Err(_) => None,
        };
        match i {
            Some(done) => Some(done),
            None => match pop(&free) {
                Some(i) => Some((i, f(&items[i], w))),
                None => {
                    // Only the chain is left: wait for the worker running it, then take the next.
                    let _guard = running_chain.lock().unwrap_or_else(|e| e.into_inner());
                    let i = pop(&chain)?;
                    Some((i, f(&items[i], w)))
                }
            },
        }
    })
}

/// The position in `pending` of the item to take next: the first that is not `blocked`, else
/// the first (its run waits: no item is left that would not); `None` when nothing is pending.
fn pick(pending: &VecDeque<usize>, blocked: impl Fn(usize) -> bool) -> Option<usize> {
    pending.iter().position(|&i| !blocked(i)).or((!pending.is_empty()).then_some(0))
}

/// Every worker takes the item that `pop` gives from those left (kept in the order of `items`).
fn in_order<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    pop: impl Fn(&Mutex<VecDeque<usize>>) -> Option<usize> + Sync,
    f: impl Fn(&T, usize) -> R + Sync,
) -> Vec<R> {
    let pending: Mutex<VecDeque<usize>> = Mutex::new((0..items.len()).collect());
    on_workers(items.len(), jobs, |w| {
        let i = pop(&pending)?;
        Some((i, f(&items[i], w)))
    })
}

/// Runs `next(worker)` on `jobs` threads (`worker` in `0..jobs`), each until it gives `None`;
/// every `Some((i, r))` is the result of item `i` of `n`, each item run once. Returns the
/// results in item order.
fn on_workers<R: Send>(n: usize, jobs: usize, next: impl Fn(usize) -> Option<(usize, R)> + Sync) -> Vec<R> {
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..n).map(|_| None).collect());
    let worker = |w: usize| {
        while let Some((i, r)) = next(w) {
            results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
        }
    };
    std::thread::scope(|s| {
        for w in 0..jobs.max(1) {
            let worker = &worker;
            s.spawn(move || worker(w));
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().map(|r| r.expect("every item ran")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn exclusive_items_never_overlap_and_every_result_is_in_input_order() {
        let items: Vec<usize> = (0..40).collect();
        let exclusive: Vec<bool> = items.iter().map(|i| i % 3 == 0).collect();
        let (now, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let out = run(
            &items,
            &exclusive,
            4,
            false,
            |_| false,
            |&i, _| {
                if i % 3 == 0 {
                    let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(2));
                    now.fetch_sub(1, Ordering::SeqCst);
                }
                i * 10
            },
        );
        assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 1, "two exclusive items ran at once");
    }

    #[test]
    fn pick_takes_the_first_item_not_blocked_and_the_first_when_all_are() {
        let pending: VecDeque<usize> = [4, 7, 2, 9].into();
        assert_eq!(pick(&pending, |_| false), Some(0));
        assert_eq!(pick(&pending, |i| i == 4 || i == 7), Some(2));
        assert_eq!(pick(&pending, |i| i != 9), Some(3));
        assert_eq!(pick(&pending, |_| true), Some(0));
        assert_eq!(pick(&VecDeque::new(), |_| false), None);
    }

    #[test]
    fn workers_pass_over_blocked_items_and_still_run_every_item() {
        // Items 1 and 2 are blocked until item 0 is done (as points wait for the populating of
        // their configuration by the first): while one worker runs 0, the other runs 3 and 4.
        let items: Vec<usize> = (0..6).collect();
        for processes in [true, false] {
            let done0 = std::sync::atomic::AtomicBool::new(false);
            let started = std::sync::Mutex::new(Vec::new());
            let out = run(
                &items,
                &[false; 6],
                2,
                processes,
                |&i| (1..3).contains(&i) && !done0.load(Ordering::SeqCst),
                |&i, _| {
                    started.lock().unwrap().push(i);
                    if i == 0 {
                        let t = std::time::Instant::now();
                        while started.lock().unwrap().len() < 3 && t.elapsed().as_secs() < 5 {
                            std::thread::sleep(std::time::Duration::from_millis(1));
                        }
                        done0.store(true, Ordering::SeqCst);
                    }
                    i * 10
                },
            );
            assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
            let mut first = started.lock().unwrap()[..3].to_vec();
            first.sort();
            assert_eq!(first, [0, 3, 4], "processes: {processes}");
        }
    }

    #[test]
    fn one_worker_runs_everything() {
        let items = [1, 2, 3];
        assert_eq!(run(&items, &[true, false, true], 1, false, |_| false, |&x, _| x + 1), vec![2, 3, 4]);
        assert_eq!(run(&items, &[true, false, true], 1, true, |_| false, |&x, w| x + 1 + w), vec![2, 3, 4]);
    }

    #[test]
    fn with_processes_workers_take_items_in_order_and_each_worker_runs_one_at_a_time() {
        let items: Vec<usize> = (0..30).collect();
        let busy: Vec<AtomicUsize> = (0..3).map(|_| AtomicUsize::new(0)).collect();
        let started = std::sync::Mutex::new(Vec::new());
        let out = run(
            &items,
            &vec![true; items.len()],
            3,
            true,
            |_| false,
            |&i, w| {
                started.lock().unwrap().push(i);
                assert_eq!(busy[w].fetch_add(1, Ordering::SeqCst), 0, "worker {w} ran two items at once");
                std::thread::sleep(std::time::Duration::from_millis(1));
                busy[w].fetch_sub(1, Ordering::SeqCst);
                i * 10
            },
        );
        assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(*started.lock().unwrap(), items, "items start in the order given");
    }
}
