//! The crash checker (docs/model.md section 5).
//!
//! One recorded run gives the initial image, every NVM write with the cycle it became durable,
//! the cycle each commit was called and the acknowledgement timeline, and the oracle log (the
//! workload's own stores per committed transaction, recorded before the protocol saw them).
//!
//! For each crash cycle `t`, in increasing order, the checker:
//! 1. advances the durable image to `t` (initial image + writes durable at or before `t`);
//! 2. runs recovery, a pure function of that image ([`crate::recovery::recover`]);
//! 3. requires the recovered data area to equal `S_k` for some `A(t) <= k <= I(t)`;
//! 4. runs the workload's structural verifier on it;
//! 5. crashes recovery itself after a random prefix of its writes, recovers again, and requires
//!    the same result (idempotence).
//!
//! Crash cycles. The durable image only changes when a write becomes durable, so the distinct
//! crash states are the boundaries between durable writes. For every state the checker uses
//! two cycles: the first at which the state holds (fewest transactions issued) and the last
//! (most acknowledged), which are the two hardest for the prefix rule. `--exhaustive` checks all
//! of these candidate cycles; `--crashes N` checks N of them drawn uniformly without
//! replacement (a state that lasts a single cycle has one candidate, so it is drawn half as
//! often as the others). A uniform draw over all cycles would mostly land in long idle
//! stretches and revisit the same few states.
//!
//! Not checked: anything the durable image does not contain (volatile state is lost by
//! definition), and timing: a protocol that is correct but slow passes.

pub mod concurrent;
mod cores;
mod gapview;
pub mod gpf;
mod overlay;
mod sweep;
pub mod torn;

pub use sweep::{check, check_run, CrashReport, CrashSpec, GpfCutReport, UserVerify, Violation};

/// The guards of incremental bookkeeping (a whole comparison, a whole verification or a crash
/// run of its own beside the incremental answer) run at the `n`-th use when `n` is a power of
/// `2^shift`, so that they cost a whole pass a logarithmic number of times.
pub(crate) fn guard_due(n: u64, shift: u32) -> bool {
    n.is_power_of_two() && n.trailing_zeros().is_multiple_of(shift)
}

/// The last recovery plan `last` when it is still the plan of the durable image `img`: no
/// durable write outside the data area has landed since it was made (`outside_written`) and
/// recovery of `format` reads no data block ([`crate::recovery::reads_data_area`]: the plan is
/// then a function of the log area alone). On the 1st, 8th, 64th, ... reuse (`reuses` counts
/// them) a whole recovery runs anyway and must agree. `None` leaves `last` as it was.
pub(crate) fn reuse_plan(
    last: &mut Option<crate::recovery::Plan>,
    outside_written: bool,
    reuses: &mut u64,
    format: Option<crate::log::head::LogFormat>,
    layout: &crate::pmem::Layout,
    img: &[u8],
) -> Option<crate::recovery::Plan> {
    if outside_written || crate::recovery::reads_data_area(format) {
        return None;
    }
    let plan = last.take()?;
    *reuses += 1;
    if guard_due(*reuses, 3) {
        let fresh = crate::recovery::recover(format, layout, img);
        assert!(fresh.as_ref() == Ok(&plan), "crash checker: recovery read the data area");
    }
    Some(plan)
}

/// Recovery of a sweep's durable image, through HOOP's scan cache ([`crate::recovery::hoop::Cache`])
/// where the format is HOOP's and no Start-Gap view rewrites the log area behind the cache's
/// back: the cache is told of every durable write ([`Recoverer::land`]), and a recovery of an
/// image the cache has not heard of (the recovered image, or one with a prefix of a plan laid)
/// goes through a copy of it. On the 1st, 8th, 64th, ... cached recovery a whole recovery runs
/// beside it and must agree. Other formats recover whole.
pub(crate) struct Recoverer {
    format: Option<crate::log::head::LogFormat>,
    hoop: Option<crate::recovery::hoop::Cache>,
    copy: crate::recovery::hoop::Cache,
    uses: u64,
    /// The length, the redone transactions and the last write's block of the plan the cache's
    /// last recovery made, if it made one: [`Recoverer::same_again`] relies on being given
    /// that plan, and checks it by these.
    last: Option<(usize, u64, u64)>,
}

/// What [`Recoverer`] remembers of a plan (`Recoverer::last`).
fn mark(plan: Option<&crate::recovery::Plan>) -> Option<(usize, u64, u64)> {
    let p = plan?;
    Some((p.writes.len(), p.redone_txs, p.writes.last().map_or(u64::MAX, |(b, _)| b.0)))
}

impl Recoverer {
    /// For `format` over `layout`; `gap`: a Start-Gap view refreshes the log area.
    pub(crate) fn new(
        format: Option<crate::log::head::LogFormat>,
        layout: &crate::pmem::Layout,
        gap: bool,
    ) -> Recoverer {
        let hoop = (format == Some(crate::log::head::LogFormat::Hoop) && !gap)
            .then(|| crate::recovery::hoop::Cache::new(layout));
        Recoverer { format, hoop, copy: crate::recovery::hoop::Cache::default(), uses: 0, last: None }
    }

    /// Block `b` of the durable image changed.
    #[inline]
    pub(crate) fn land(&mut self, layout: &crate::pmem::Layout, b: crate::types::BlockId) {
        if let Some(cache) = &mut self.hoop {
            cache.land(layout, b);
        }
    }

    /// The durable image changed in ways [`Recoverer::land`] did not hear of: scan afresh.
    pub(crate) fn forget(&mut self, layout: &crate::pmem::Layout) {
        if let Some(cache) = &mut self.hoop {
            *cache = crate::recovery::hoop::Cache::new(layout);
        }
        self.last = None;
    }

    /// Is HOOP's scan cache in use ([`Recoverer::recover_under`])?
    pub(crate) fn caches(&self) -> bool {
        self.hoop.is_some()
    }

    /// Recovery of the durable image through HOOP's scan cache ([`Recoverer::caches`]), its
    /// data blocks read through `home` (the durable content of block `b`) while `img`'s data
    /// area may hold the last plan laid over it. The second value says whether this use is the
    /// 1st, 8th, 64th, ...: the caller then runs a whole recovery of the durable image, which
    /// must agree (it alone can take its overlay away).
    pub(crate) fn recover_under(
        &mut self,
        layout: &crate::pmem::Layout,
        img: &[u8],
        home: impl Fn(crate::types::BlockId) -> crate::types::BlockData,
    ) -> (Result<crate::recovery::Plan, String>, bool) {
        let cache = self.hoop.as_mut().expect("recover_under: HOOP's scan cache in use");
        let plan = crate::recovery::hoop::recover_cached_with(layout, img, cache, home);
        self.uses += 1;
        self.last = mark(plan.as_ref().ok());
        (plan, guard_due(self.uses, 3))
    }

    /// The check of a crash during recovery through HOOP's scan cache, for a crash after
    /// `cut <= redo` of `plan`'s writes (all to the data area, in increasing block order, as
    /// HOOP's plans are) over the durable image whose home block `b` is `durable(b)` and whose
    /// log area is `img`'s: the second recovery, of that image with those writes made, runs
    /// through the cache with the image's home blocks read as it has them (the prefix's from
    /// `plan`, the others through `durable`) and its log area, which the prefix leaves as it
    /// was, from `img`; nothing is written. True when it makes `plan` again: recovering from
    /// there then ends where the first recovery did, which is what the whole check would find.
    /// False, for the caller to check the whole way, when it makes another plan, when the cache
    /// is not in use or the prefix has another shape, and on the 1st, 8th, 64th, ... use of the
    /// cache (its guard). The prefix's blocks are reported to the cache as changed before this
    /// recovery and again after it, so that the next one reads them from the durable image.
    /// `plan` is the plan the cache's last recovery made (as the sweeps call it, right after
    /// [`Recoverer::recover_under`]; checked by its length, redone transactions and last block,
    /// false otherwise), so that a recovery that finds it again need not make it and compare
    /// ([`crate::recovery::hoop::recover_cached_again`]).
    pub(crate) fn same_again(
        &mut self,
        layout: &crate::pmem::Layout,
        img: &[u8],
        plan: &crate::recovery::Plan,
        (cut, redo): (usize, usize),
        durable: impl Fn(crate::types::BlockId) -> crate::types::BlockData,
    ) -> bool {
        // `plan` must be the cache's last plan: a recovery that finds it again says so.
        if !self.caches() || cut > redo || self.last != mark(Some(plan)) {
            return false;
        }
        let prefix = &plan.writes[..cut];
        if !prefix.windows(2).all(|w| w[0].0 .0 < w[1].0 .0) {
            return false;
        }
        for (b, _) in prefix {
            self.land(layout, *b);
        }
        // The recovery reads the prefix's blocks first, in its (increasing) order, as the cache
        // heard of them: the entry after the last one found is looked at before a search.
        let next = std::cell::Cell::new(0);
        let home = |b: crate::types::BlockId| {
            let j = match prefix.get(next.get()) {
                Some((x, _)) if *x == b => next.get(),
                _ => match prefix.binary_search_by_key(&b.0, |(x, _)| x.0) {
                    Ok(j) => j,
                    Err(_) => return durable(b),
                },
            };
            next.set(j + 1);
            prefix[j].1
        };
        let cache = self.hoop.as_mut().expect("checked above");
        let again = crate::recovery::hoop::recover_cached_again(layout, img, cache, home);
        self.uses += 1;
        let guard = guard_due(self.uses, 3);
        for (b, _) in prefix {
            self.land(layout, *b);
        }
        match again {
            // `plan` again, known without making it.
            Ok(None) => !guard,
            Ok(Some(p)) => {
                self.last = mark(Some(&p));
                !guard && p == *plan
            }
            Err(_) => {
                self.last = None;
                false
            }
        }
    }

    /// Recovery of `img`: the durable image (`second` false), or an image the cache has not
    /// heard of (`second`).
    pub(crate) fn recover(
        &mut self,
        layout: &crate::pmem::Layout,
        img: &[u8],
        second: bool,
    ) -> Result<crate::recovery::Plan, String> {
        let Some(cache) = &mut self.hoop else { return crate::recovery::recover(self.format, layout, img) };
        let plan = if second {
            self.copy.clone_from(cache);
            crate::recovery::hoop::recover_cached(layout, img, &mut self.copy)
        } else {
            let plan = crate::recovery::hoop::recover_cached(layout, img, cache);
            self.last = mark(plan.as_ref().ok());
            plan
        };
        self.uses += 1;
        if guard_due(self.uses, 3) {
            let whole = crate::recovery::recover(self.format, layout, img);
            assert!(whole == plan, "crash checker: HOOP's scan cache disagrees with a whole recovery");
        }
        plan
    }
}

/// A progress bar on standard error (states checked, states per second, the message set by the
/// caller, time left) when standard error is a terminal; `None` otherwise. Shared by
/// `crashtest` and `journal-crashtest`.
pub(crate) fn progress_bar(total: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "[{bar:30}] {pos}/{len} states, {per_sec}, {msg}, {elapsed} elapsed, ETA {eta}",
    )
    .expect("valid template")
    .progress_chars("=> ");
    bar.set_style(style);
    Some(bar)
}
