//! Running the points on `--jobs` worker threads. Some points must not run beside each other in
//! one process (SQLite keeps process-wide state: [`super::kind::Executor::exclusive`]); they form
//! one chain, the longest serial part of a reproduction. A worker takes the next exclusive point
//! whenever no other worker is running one, and a free point otherwise, so the chain starts at
//! once and runs without a gap while the other workers run the free points beside it; a worker
//! never waits for the chain while free points are left.
//!
//! Which worker runs a point, and when, changes nothing in its result (each point is a pure
//! function of its job); results are returned in the order of the input.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Run `f` on every item on `jobs` threads; `exclusive[i]` says whether item `i` must not run
/// beside another exclusive item. Returns the results in the order of `items`.
pub fn run<T: Sync, R: Send>(items: &[T], exclusive: &[bool], jobs: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    assert_eq!(items.len(), exclusive.len());
    let chain: Mutex<VecDeque<usize>> = Mutex::new((0..items.len()).filter(|&i| exclusive[i]).collect());
    let free: Mutex<VecDeque<usize>> = Mutex::new((0..items.len()).filter(|&i| !exclusive[i]).collect());
    // Held while an exclusive item runs.
    let running_chain = Mutex::new(());
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let pop = |q: &Mutex<VecDeque<usize>>| q.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
    let worker = || loop {
        let i = match running_chain.try_lock() {
            Ok(guard) => match pop(&chain) {
                Some(i) => {
                    let r = f(&items[i]);
                    drop(guard);
                    Some((i, r))
                }
                None => None,
            },
            Err(_) => None,
        };
        let (i, r) = match i {
            Some(done) => done,
            None => match pop(&free) {
                Some(i) => (i, f(&items[i])),
                None => {
                    // Only the chain is left: wait for the worker running it, then take the next.
                    let _guard = running_chain.lock().unwrap_or_else(|e| e.into_inner());
                    match pop(&chain) {
                        Some(i) => (i, f(&items[i])),
                        None => return,
                    }
                }
            },
        };
        results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
    };
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(worker);
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
        let out = run(&items, &exclusive, 4, |&i| {
            if i % 3 == 0 {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(2));
                now.fetch_sub(1, Ordering::SeqCst);
            }
            i * 10
        });
        assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 1, "two exclusive items ran at once");
    }

    #[test]
    fn one_worker_runs_everything() {
        let items = [1, 2, 3];
        assert_eq!(run(&items, &[true, false, true], 1, |&x| x + 1), vec![2, 3, 4]);
    }
}
