//! `trivial`: the protocol that proves the recipe "Add a protocol" of docs/ARCHITECTURE.md.
//!
//! It exists only in the crate's own unit tests and is added exactly as the recipe says: this
//! file (its [`TRIVIAL`] registration and its `impl Protocol`) and its line in the registration
//! table (`src/protocols.rs`, under `#[cfg(test)]`); it reuses H-WAL's log format, so it needs
//! no recovery module and no format page. Its behaviour is H-WAL's, under its own name: what it
//! checks is the plumbing (command-line name, injectable bugs, construction, figures, crash
//! checking on one core and on several). The tests below run it and crash-check it reached by
//! name only, and check that the recipe names every place it is added and at most four, and
//! that no code outside the table decides per protocol.

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
    use super::super::multicore_tests::{crash_check, out_of_order_scenario};
    use super::super::{Bug, ProtocolKind};
    use crate::config::Config;
    use crate::crash::{check, CrashSpec};
    use crate::runner::{execute, RunSpec};
    use crate::workload::WorkloadKind;

    fn trivial() -> ProtocolKind {
        ProtocolKind::parse("trivial").expect("registered by name")
    }

    fn spec(bug: Option<Bug>) -> RunSpec {
        let mut cfg = Config::default();
        cfg.workload.sps.entries = 1 << 12;
        RunSpec {
            cfg,
            workload: WorkloadKind::Sps,
            protocol: trivial(),
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
        let bug = Bug::parse("commit-before-log", trivial()).expect("its bugs");
        let report = check(&crash(spec(Some(bug)))).expect("checks");
        assert!(report.violations > 0, "the injected bug is caught: {report:?}");
    }

    #[test]
    fn a_protocol_added_by_the_recipe_runs_on_several_cores_and_its_cross_core_bug_is_caught() {
        crash_check(trivial(), 3, 0..2, None).unwrap();
        let bug = Bug::parse("truncate-out-of-order", trivial()).expect("its bugs");
        assert_eq!(bug.min_cores(), 2);
        assert!(out_of_order_scenario(trivial(), Some(bug)).is_err());
    }

    /// The source files under `dir` (recursively), as (path from the crate root, text).
    fn sources(root: &str, dir: &str, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                sources(root, &rel, out);
            } else if rel.ends_with(".rs") {
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }

    /// A file's code outside its tests, comment lines dropped: nothing for a test file, else
    /// what comes before its first `#[cfg(test)]` module.
    fn non_test_code(path: &str, text: &str) -> String {
        let name = path.rsplit('/').next().unwrap();
        if name.starts_with("tests") || path.contains("_tests") || path.starts_with("tests/") {
            return String::new();
        }
        let code = text.split("#[cfg(test)]\nmod ").next().unwrap();
        code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
    }

    /// Does `code` decide on one protocol: a `ProtocolKind` variant in a pattern (a match arm,
    /// an or-pattern, `matches!`) or compared with `==` / `!=`?
    fn decides_per_protocol(code: &str) -> Option<String> {
        let variant = |rest: &str| rest.starts_with(|c: char| c.is_ascii_uppercase()) && !rest.starts_with("ALL");
        for (i, _) in code.match_indices("ProtocolKind::").filter(|(i, _)| variant(&code[i + 14..])) {
            let before = code[..i].trim_end();
            let tail = &code[i + 14..];
            let after = tail[tail.find(|c: char| !c.is_alphanumeric()).unwrap_or(tail.len())..].trim_start();
            let line = code[..i].rsplit('\n').next().unwrap().to_string() + &tail[..tail.find('\n').unwrap_or(0)];
            let pattern = after.starts_with("=>") || after.starts_with('|') || before.ends_with('|');
            let compared = ["==", "!="].iter().any(|op| before.ends_with(op) || after.starts_with(op));
            if pattern || compared || line.contains("matches!(") {
                return Some(line);
            }
        }
        None
    }

    #[test]
    fn the_add_a_protocol_recipe_names_every_place_trivial_is_added_and_no_more_than_four() {
        let root = env!("CARGO_MANIFEST_DIR");
        let doc = std::fs::read_to_string(format!("{root}/docs/ARCHITECTURE.md")).unwrap();
        let recipe = doc.split("## Add a protocol").nth(1).expect("docs/ARCHITECTURE.md has the recipe");
        let recipe = recipe.split("\n## ").next().unwrap();
        let steps: Vec<&str> = recipe.lines().filter(|l| l.starts_with(|c: char| c.is_ascii_digit())).collect();
        assert!((2..=4).contains(&steps.len()), "the recipe has {} places: {steps:?}", steps.len());
        let mut files = Vec::new();
        sources(root, "src", &mut files);
        let names_trivial = |code: &str| {
            ["Trivial", "TRIVIAL", "trivial {", "trivial::", "mod trivial"].iter().any(|w| code.contains(w))
        };
        let mut places = Vec::new();
        for (path, text) in &files {
            let code: String = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
            if path != "src/protocol/trivial.rs" && names_trivial(&code) {
                places.push(path.clone());
            }
        }
        assert_eq!(places, ["src/protocols.rs"], "trivial is added in its file and the table only");
        for p in places.iter().map(String::as_str).chain(["src/protocol/<name>.rs"]) {
            assert!(recipe.contains(p), "the recipe in docs/ARCHITECTURE.md does not name `{p}`");
        }
    }

    #[test]
    fn protocols_are_named_only_in_the_registration_table() {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut files = Vec::new();
        for dir in ["src", "tests", "examples"] {
            sources(root, dir, &mut files);
        }
        assert!(files.len() > 50, "{} files", files.len());
        for (path, text) in &files {
            let code = non_test_code(path, text);
            assert!(decides_per_protocol(&code).is_none(), "{path} decides per protocol: {:?}", decides_per_protocol(&code));
            // Tests may expect per protocol, but never match over protocols.
            let arms = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
            if let Some(line) = decides_per_protocol(&arms).filter(|l| !l.contains("==") && !l.contains("!=")) {
                panic!("{path} matches over protocols: {line}");
            }
        }
        // The detector itself: each way of deciding per protocol is seen (the examples are
        // built so that this file's own text holds none).
        let k = "ProtocolKind::";
        for bad in [
            format!("match p {{ {k}HWal => 1, _ => 2 }}"),
            format!("{k}Kiln | {k}LocKiln => x"),
            format!("if p == {k}LocKiln {{"),
            format!("matches!(self, {k}LocWal)"),
        ] {
            assert!(decides_per_protocol(&bad).is_some(), "{bad}");
        }
        assert!(decides_per_protocol(&format!("protocol: {k}Baseline,\n{k}ALL.iter()")).is_none());
    }
}
