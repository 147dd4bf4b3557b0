//! Progress of the sweeps: one indicatif bar per spec on a terminal (completed/total, time left),
//! plain lines otherwise (at each quarter and at the end of a spec), nothing when quiet.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::io::Write;
use std::sync::Mutex;
use std::time::Instant;

pub struct Line {
    name: String,
    done: u64,
    total: u64,
    start: Instant,
}

pub enum Progress {
    Bars(#[allow(dead_code)] MultiProgress, Vec<ProgressBar>),
    Lines(Mutex<Vec<Line>>),
    Quiet,
}

impl Progress {
    /// `sweeps`: name and number of points to run (cached points excluded) of each spec.
    pub fn new(sweeps: &[(String, u64)], quiet: bool) -> Progress {
        use std::io::IsTerminal;
        if quiet {
            return Progress::Quiet;
        }
        if std::io::stdout().is_terminal() {
            let multi = MultiProgress::new();
            let style = ProgressStyle::with_template(
                "{prefix:>22} [{bar:30}] {pos}/{len} points, {elapsed} elapsed, ETA {eta}",
            )
            .expect("valid template")
            .progress_chars("=> ");
            let bars = sweeps
                .iter()
                .map(|(name, total)| {
                    let b = multi.add(ProgressBar::new(*total));
                    b.set_style(style.clone());
                    b.set_prefix(name.clone());
                    b
                })
                .collect();
            return Progress::Bars(multi, bars);
        }
        let lines = sweeps
            .iter()
            .map(|(name, total)| Line { name: name.clone(), done: 0, total: *total, start: Instant::now() })
            .collect();
        Progress::Lines(Mutex::new(lines))
    }

    /// One point of sweep `i` finished.
    pub fn tick(&self, i: usize) {
        match self {
            Progress::Bars(_, bars) => bars[i].inc(1),
            Progress::Lines(lines) => {
                let mut lines = lines.lock().unwrap_or_else(|e| e.into_inner());
                let l = &mut lines[i];
                l.done += 1;
                let quarter = |d: u64| d * 4 / l.total.max(1);
                if quarter(l.done) != quarter(l.done - 1) || l.done == l.total {
                    let el = l.start.elapsed().as_secs_f64();
                    let eta = el / l.done as f64 * (l.total - l.done) as f64;
                    // A closed stdout (`reproduce ... | head`) must not stop the sweep.
                    let _ = writeln!(
                        std::io::stdout().lock(),
                        "{}: {}/{} points, {el:.0} s elapsed, ETA {eta:.0} s",
                        l.name,
                        l.done,
                        l.total
                    );
                }
            }
            Progress::Quiet => {}
        }
    }

    pub fn finish(&self) {
        if let Progress::Bars(_, bars) = self {
            for b in bars {
                b.finish();
            }
        }
    }
}
