//! `trivial`: the protocol that proves the recipe "Add a protocol" of docs/ARCHITECTURE.md.
//!
//! It exists only in the crate's own unit tests (`#[cfg(test)]` at every place the recipe
//! names), so the compiler checks that the list is complete: a new `match` on
//! [`super::ProtocolKind`] anywhere fails to build until it handles `Trivial` too, and the test
//! `the_add_a_protocol_recipe_names_every_place_trivial_is_added` fails until the recipe names
//! that file. Its behaviour is H-WAL's, under its own name: what it checks is the plumbing
//! (command-line name, log format, injectable bugs, construction, figures, crash checking).
//! Its multi-core part is H-WAL's too (per-core state, log regions, global commit order;
//! `ProtocolKind::multicore`), crash-checked on several cores with its cross-core bug by
//! `src/protocol/multicore_tests.rs`.

use super::h_wal::HWal;
use super::{Bug, Protocol};
use crate::log::head::LogFormat;
use crate::machine::Machine;
use crate::pmem::Layout;
use crate::types::Addr;

/// What `trivial` is and how it is built (its line in the table of `registry.rs`).
pub static TRIVIAL: super::Registration<Trivial> = super::Registration {
    desc: super::Descriptor {
        name: "trivial",
        log_format: Some(LogFormat::HWal),
        stores_persist: false,
        speculates: false,
        bugs: &[Bug::AckBeforeDurable, Bug::CommitBeforeLog, Bug::TruncateOutOfOrder],
        reads: &[],
        layout: super::Descriptor::plain_layout,
    },
    build: |b| Trivial(HWal::new(b.layout, b.bug)),
};

pub struct Trivial(HWal);

impl Protocol for Trivial {
    fn format(&self, layout: &Layout, image: &mut [u8]) {
        self.0.format(layout, image);
    }
    fn begin(&mut self, m: &mut Machine) {
        self.0.begin(m);
    }
    fn load(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        self.0.load(m, addr, len);
    }
    fn store(&mut self, m: &mut Machine, addr: Addr, len: usize) {
        self.0.store(m, addr, len);
    }
    fn commit(&mut self, m: &mut Machine) {
        self.0.commit(m);
    }
    fn abort(&mut self, m: &mut Machine, written: &[(Addr, u32)]) {
        self.0.abort(m, written);
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.0.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::super::ProtocolKind;
    use crate::config::Config;
    use crate::crash::{check, CrashSpec};
    use crate::runner::{execute, RunSpec};
    use crate::workload::WorkloadKind;

    fn spec(bug: Option<super::Bug>) -> RunSpec {
        let mut cfg = Config::default();
        cfg.workload.sps.entries = 1 << 12;
        RunSpec {
            cfg,
            workload: WorkloadKind::Sps,
            protocol: ProtocolKind::parse("trivial").expect("registered by name"),
            txs: 200,
            warmup_txs: 0,
            seed: 7,
            abort_rate: 0.1,
            bug,
            record: true,
            tape: false,
            prefault: false,
        }
    }

    #[test]
    fn a_protocol_added_by_the_recipe_runs_and_is_crash_checked() {
        let out = execute(&spec(None)).expect("runs");
        assert_eq!(out.result.protocol, "trivial");
        assert!(out.result.txs_committed > 150 && out.result.log_write_bytes > 0, "{:?}", out.result);
        let crash = |run| CrashSpec::new(run, 300);
        let report = check(&crash(spec(None))).expect("checks");
        assert!(report.crash_points >= 300 && report.violations == 0, "{report:?}");
        let bug = super::Bug::parse("commit-before-log", ProtocolKind::Trivial).expect("its bugs");
        let report = check(&crash(spec(Some(bug)))).expect("checks");
        assert!(report.violations > 0, "the injected bug is caught: {report:?}");
    }

    #[test]
    fn the_add_a_protocol_recipe_names_every_place_trivial_is_added() {
        let root = env!("CARGO_MANIFEST_DIR");
        let doc = std::fs::read_to_string(format!("{root}/docs/ARCHITECTURE.md")).unwrap();
        let recipe = doc.split("## Add a protocol").nth(1).expect("docs/ARCHITECTURE.md has the recipe");
        let recipe = recipe.split("\n## ").next().unwrap();
        let mut places = Vec::new();
        for dir in ["src", "src/protocol", "src/log", "src/recovery", "src/crash", "src/cli", "src/reproduce"] {
            for e in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
                let p = e.unwrap().path();
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                if rel.ends_with(".rs") && rel != "src/protocol/trivial.rs" && text.contains("Trivial") {
                    places.push(rel);
                }
            }
        }
        assert!(places.len() >= 2, "found {places:?}");
        for p in &places {
            assert!(recipe.contains(p.as_str()), "the recipe in docs/ARCHITECTURE.md does not name `{p}`");
        }
    }
}
