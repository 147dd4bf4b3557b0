//! A process's most recently used values, by key: the lists through which runs in one process
//! share work (populated workloads, SQLite's recorded calls, the journal's recorded VFS calls,
//! generated journal traces). A value is kept at the front when used; after an insertion the
//! list keeps its front as far as its owner's budget allows (a count, or the bytes held).

use std::sync::Mutex;

/// Values by key, most recently used first.
pub struct Recent<K, V>(Mutex<Vec<(K, V)>>);

impl<K, V: Clone> Recent<K, V> {
    pub const fn new() -> Self {
        Recent(Mutex::new(Vec::new()))
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<(K, V)>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of the first key `is` accepts (now the most recent), if any.
    pub fn get(&self, is: impl Fn(&K) -> bool) -> Option<V> {
        let mut l = self.list();
        let i = l.iter().position(|(k, _)| is(k))?;
        let e = l.remove(i);
        let v = e.1.clone();
        l.insert(0, e);
        Some(v)
    }

    /// The value of the first key `is` accepts, or else `make`'s entry inserted (made with the
    /// list held, so that two users of one key make it once); then the list cut where `keep`,
    /// called on the entries most recent first, first refuses one.
    pub fn get_or_insert(
        &self,
        is: impl Fn(&K) -> bool,
        make: impl FnOnce() -> (K, V),
        keep: impl FnMut(&K, &V) -> bool,
    ) -> V {
        let mut l = self.list();
        let e = match l.iter().position(|(k, _)| is(k)) {
            Some(i) => l.remove(i),
            None => make(),
        };
        let v = e.1.clone();
        l.insert(0, e);
        cut(&mut l, keep);
        v
    }

    /// Insert `k` with `v` in place of the entries `is` accepts; then cut as
    /// [`Recent::get_or_insert`] does.
    pub fn insert(&self, is: impl Fn(&K) -> bool, k: K, v: V, keep: impl FnMut(&K, &V) -> bool) {
        let mut l = self.list();
        l.retain(|(k, _)| !is(k));
        l.insert(0, (k, v));
        cut(&mut l, keep);
    }

    /// Every value kept, most recent first.
    pub fn values(&self) -> Vec<V> {
        self.list().iter().map(|(_, v)| v.clone()).collect()
    }

    /// `f` of the value of the first key `is` accepts, without using it.
    pub fn peek<R>(&self, is: impl Fn(&K) -> bool, f: impl FnOnce(&V) -> R) -> Option<R> {
        self.list().iter().find(|(k, _)| is(k)).map(|(_, v)| f(v))
    }
}

impl<K, V: Clone> Default for Recent<K, V> {
    fn default() -> Self {
        Recent::new()
    }
}

/// Keep at most `n` entries (a [`Recent`] budget).
pub fn at_most<K, V>(n: usize) -> impl FnMut(&K, &V) -> bool {
    let mut seen = 0;
    move |_, _| {
        seen += 1;
        seen <= n
    }
}

fn cut<K, V>(l: &mut Vec<(K, V)>, mut keep: impl FnMut(&K, &V) -> bool) {
    let n = l.iter().position(|(k, v)| !keep(k, v)).unwrap_or(l.len());
    l.truncate(n);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Against a model (a deque, most recent first) over a seeded mix of gets, inserts and
    /// get-or-inserts with a count budget and a size budget.
    #[test]
    fn the_list_is_the_models_most_recently_used_entries_within_the_budget() {
        let mut rng = crate::rng::Rng::new(5);
        for bytes_budget in [false, true] {
            let r: Recent<u64, u64> = Recent::new();
            let mut model: VecDeque<(u64, u64)> = VecDeque::new();
            let budget = |model: &mut VecDeque<(u64, u64)>| {
                let mut total = 0;
                let n = if bytes_budget {
                    model.iter().position(|&(_, v)| {
                        total += v;
                        total > 40
                    })
                } else {
                    (model.len() > 4).then_some(4)
                };
                model.truncate(n.unwrap_or(model.len()));
            };
            let keep = |bytes: bool| {
                let mut total = 0;
                let mut n = 0;
                move |_: &u64, v: &u64| {
                    total += v;
                    n += 1;
                    if bytes {
                        total <= 40
                    } else {
                        n <= 4
                    }
                }
            };
            for step in 0..2000 {
                let k = rng.below(9);
                let v = rng.below(15) + 1;
                match rng.below(3) {
                    0 => {
                        let want = model.iter().position(|e| e.0 == k).map(|i| {
                            let e = model.remove(i).unwrap();
                            model.push_front(e);
                            e.1
                        });
                        assert_eq!(r.get(|&x| x == k), want, "step {step}");
                    }
                    1 => {
                        r.insert(|&x| x == k, k, v, keep(bytes_budget));
                        model.retain(|e| e.0 != k);
                        model.push_front((k, v));
                        budget(&mut model);
                    }
                    _ => {
                        let got = r.get_or_insert(|&x| x == k, || (k, v), keep(bytes_budget));
                        let want = match model.iter().position(|e| e.0 == k) {
                            Some(i) => model.remove(i).unwrap(),
                            None => (k, v),
                        };
                        model.push_front(want);
                        budget(&mut model);
                        assert_eq!(got, want.1, "step {step}");
                    }
                }
                let list: Vec<(u64, u64)> = r.list().clone();
                assert_eq!(list, model.iter().copied().collect::<Vec<_>>(), "step {step}");
                assert_eq!(r.peek(|&x| x == k, |&v| v), model.iter().find(|e| e.0 == k).map(|e| e.1));
                assert_eq!(r.values(), model.iter().map(|e| e.1).collect::<Vec<_>>());
            }
        }
        let mut keep = at_most::<u8, u8>(2);
        assert!(keep(&0, &0) && keep(&0, &0) && !keep(&0, &0));
    }
}
