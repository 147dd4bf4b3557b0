//! What the workspace's tests need from outside Rust, prepared by the tests themselves, and a
//! small test harness that reports a test it could not run as `ignored`, with the reason, never
//! as `ok`. Test-only: a dev-dependency of `locsim` and `pcmjournal-ext`.
//!
//! # Preparing
//!
//! - [`require_packages`]`(&["chromium"])`: each Debian package that `dpkg-query` does not show
//!   installed is installed with `apt-get install` (one `apt-get update` first), when `apt-get`
//!   is on `PATH` and the user is root or has passwordless `sudo`. `Ok(())` once all are
//!   installed; otherwise `Err(`[`Missing`]`)` naming the packages and why.
//! - [`python_venv`]`(requirements)`: a Python virtual environment with the pinned packages of a
//!   requirements file installed by pip, made once and reused: it lives at
//!   `$LOCSIM_TEST_VENV`, or else `${XDG_CACHE_HOME:-$HOME/.cache}/locsim/venv-<key>`, where the
//!   key is a hash of the requirements file and of the interpreter's version (a changed file or
//!   interpreter makes a new one; a finished one is never reinstalled). The interpreter is
//!   `$LOCSIM_PYTHON` or `python3`; without `venv` or `ensurepip` it first asks
//!   [`require_packages`] for `python3` and `python3-venv`.
//!
//! Both take a file lock (`flock`) while they check and install, so test binaries running at
//! once install each thing once and never see it half made. `LOCSIM_TEST_INSTALL=0` turns all
//! installing off: what is already there is used, what is not makes the test skip.
//!
//! # Running: skipped, never `ok`
//!
//! A test file whose tests need such things has `harness = false` in its `[[test]]` entry and
//! ends with [`tests!`], naming its test functions. A test function returns `()` or
//! [`Outcome`]; `Err(Missing)` (usually from `?` on [`require_packages`]) reports it as libtest
//! does an ignored test with a reason:
//!
//! ```text
//! test report_html_renders_every_figure ... ignored, needs chromium: apt-get is not on PATH
//! test result: ok. 0 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.02s
//! ```
//!
//! With `CI` set (not empty, `0` or `false`) a missing dependency fails the test instead: CI
//! must run everything. A new test file, e.g. one needing PMDK's development files:
//!
//! ```text
//! // Cargo.toml: [[test]] name = "pmdk", harness = false
//! fn objects_survive_a_crash() -> testenv::Outcome {
//!     testenv::require_packages(&["libpmemobj-dev"])?;
//!     // ... the test, which panics on a failed check ...
//!     Ok(())
//! }
//! fn the_layout_is_documented() { /* a test that needs nothing: returns () */ }
//! testenv::tests![objects_survive_a_crash, the_layout_is_documented];
//! ```
//!
//! The harness takes libtest's usual arguments (filters, `--exact`, `--skip`, `--list`, `-q`,
//! `--test-threads`, `--ignored`, `--include-ignored`, `--nocapture`); it does not capture the
//! tests' output.
//!
//! # The run's last line
//!
//! `cargo test` runs every test binary, then the doc-tests, crate by crate in name order, and
//! this crate's name sorts last. Each harness binary records the tests it skipped (in this
//! crate's `OUT_DIR`, records of an earlier `cargo test` dropped); under `cfg(doctest)` this
//! crate includes them as one ignored doc-test each, named
//! `skipped::<binary>::<test>::needs_<what>`. So a plain `cargo test --workspace` ends with
//! those names and the line `test result: ok. 0 passed; 0 failed; K ignored; ...`, K the
//! number of tests that did not run for want of something (0 when all ran). The README's test
//! command, `scripts/test.sh`, runs that and closes with one line over every binary naming what
//! was missing: `N passed, M failed, K skipped (needs chromium: 1; needs libpmemobj-dev: 2)`.

mod harness;
mod install;

pub use harness::{run, Outcome, Test};
pub use install::{python_venv, require_packages};

/// Something a test needs and cannot have here: `what` (e.g. `chromium`) and `why` (e.g.
/// `apt-get is not on PATH`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub what: String,
    pub why: String,
}

impl Missing {
    pub fn new(what: impl Into<String>, why: impl Into<String>) -> Missing {
        Missing { what: what.into(), why: why.into() }
    }
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "needs {}: {}", self.what, self.why)
    }
}

/// Whether `CI` is set (to anything but empty, `0` or `false`): a missing dependency then fails.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// `main` of a `harness = false` test file: runs the named test functions (each returning `()`
/// or [`Outcome`]) under [`run`].
#[macro_export]
macro_rules! tests {
    ($($name:ident),+ $(,)?) => {
        fn main() -> std::process::ExitCode {
            $crate::run(vec![$($crate::Test::new(stringify!($name), $name)),+])
        }
    };
}

/// The tests skipped by the last `cargo test`, one ignored doc-test each (see "The run's last
/// line"); written by the harness binaries, empty when they all ran.
#[cfg(doctest)]
pub mod skipped {
    include!(concat!(env!("OUT_DIR"), "/skipped.rs"));
}
