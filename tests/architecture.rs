//! Checks of the source tree's shape that keep the architecture as docs/ARCHITECTURE.md draws
//! it: the top-level modules import each other without cycles, and the protocol files share
//! code through their common modules instead of repeating it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

#[path = "../src/testdir.rs"]
mod testdir;
use testdir::TempDir;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src/` belongs to (`src/log/ec.rs` -> `log`).
fn module_of(rel: &Path) -> String {
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// Non-test code of a file, comments removed.
fn code(text: &str) -> String {
    let body = text.split("#[cfg(test)]").next().unwrap();
    body.lines().map(|l| l.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

/// Edges `a -> b`: a file of module `a` names `crate::b` outside test code. Test modules
/// (`tests.rs`, `tests_*.rs`, code after `#[cfg(test)]`) may reach anywhere.
fn import_graph(src: &Path) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let name = f.file_name().unwrap().to_string_lossy();
        let from = module_of(rel);
        if name.starts_with("tests") || from == "lib" || from == "main" {
            continue;
        }
        let text = code(&std::fs::read_to_string(&f).unwrap());
        for (i, _) in text.match_indices("crate::") {
            let to: String = text[i + 7..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !to.is_empty() && to != from {
                g.entry(from.clone()).or_default().entry(to).or_default().insert(rel.display().to_string());
            }
        }
    }
    g
}

/// A cycle in the graph, as a path that returns to its start, if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Option<Vec<String>> {
    fn visit(
        v: &str,
        g: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
        state: &mut HashMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(v.to_string(), 1);
        path.push(v.to_string());
        for w in g.get(v).map(|e| e.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            match state.get(&w).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|x| *x == w).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(w);
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(&w, g, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(v.to_string(), 2);
        None
    }
    let mut state = HashMap::new();
    for v in g.keys() {
        if state.get(v).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(v, g, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn the_top_level_modules_import_each_other_without_cycles() {
    let g = import_graph(&root().join("src"));
    assert!(g.len() > 10, "the scan found the modules: {:?}", g.keys());
    if let Some(cycle) = find_cycle(&g) {
        let why: Vec<String> = cycle
            .windows(2)
            .map(|e| format!("{} -> {} ({})", e[0], e[1], g[&e[0]][&e[1]].iter().next().unwrap()))
            .collect();
        panic!("import cycle between top-level modules: {}", why.join(", "));
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let mut g: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "d")] {
        g.entry(a.into()).or_default().entry(b.into()).or_default().insert("f.rs".into());
    }
    assert_eq!(find_cycle(&g), None);
    g.entry("d".into()).or_default().entry("b".into()).or_default().insert("f.rs".into());
    assert_eq!(find_cycle(&g), Some(vec!["b".into(), "c".into(), "d".into(), "b".into()]));
}

/// Lines that carry code: trimmed, without blank lines, comments, imports, attributes and lone
/// punctuation.
fn significant_lines(text: &str) -> Vec<String> {
    code(text)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("use ")
                && !l.starts_with("#[")
                && l.chars().any(|c| c.is_alphanumeric())
                && !matches!(l.as_str(), "} else {" | "None => {}" | "_ => {}")
        })
        .collect()
}

/// Runs of `n` significant lines that stand in two different files: (file, file, first line).
fn shared_runs(files: &[(String, String)], n: usize) -> Vec<(String, String, String)> {
    let mut seen: HashMap<Vec<String>, String> = HashMap::new();
    let mut found = Vec::new();
    for (name, text) in files {
        let lines = significant_lines(text);
        let mut mine = BTreeSet::new();
        for w in lines.windows(n) {
            if !mine.insert(w.to_vec()) {
                continue;
            }
            match seen.get(w) {
                Some(other) if other != name => found.push((other.clone(), name.clone(), w[0].clone())),
                Some(_) => {}
                None => {
                    seen.insert(w.to_vec(), name.clone());
                }
            }
        }
    }
    found
}

#[test]
fn no_run_of_six_code_lines_is_repeated_between_protocol_files() {
    let dir = root().join("src/protocol");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let files: Vec<(String, String)> = files
        .iter()
        .map(|f| (f.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(f).unwrap()))
        .collect();
    assert!(files.len() >= 8, "the scan found the protocol files");
    let runs = shared_runs(&files, 6);
    assert!(runs.is_empty(), "repeated between protocol files (move it to a shared module): {runs:?}");
}

#[test]
fn the_repetition_check_sees_a_copied_block() {
    let body = "fn f(m: &mut M) {\n    let a = m.x();\n    let b = m.y(a);\n    m.z(b);\n    m.w(a, b);\n    m.v();\n    m.u();\n}\n";
    let files = vec![("a.rs".to_string(), body.to_string()), ("b.rs".to_string(), format!("// other\n{body}"))];
    assert_eq!(shared_runs(&files, 6).len(), 2);
    let files = vec![("a.rs".to_string(), body.to_string()), ("b.rs".to_string(), body.replace("m.w", "m.q"))];
    assert!(shared_runs(&files, 6).is_empty());
}

/// The tracked files (`git ls-files`) that mention a path outside the repository: a user who
/// clones it has only what is tracked, so the model contract is `docs/model.md`.
fn references_outside(root: &Path, needles: &[&str]) -> Vec<String> {
    let out = std::process::Command::new("git").arg("ls-files").current_dir(root).output().expect("git runs");
    let mut found = Vec::new();
    for f in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(text) = std::fs::read_to_string(root.join(f)) else { continue }; // binary or gone
        for n in needles {
            if text.contains(n) {
                found.push(format!("{f}: {n}"));
            }
        }
    }
    found
}

/// What a reference outside the repository looks like (spelled in pieces, so that this file
/// does not contain them itself).
const OUTSIDE: [&str; 2] = [concat!("..", "/shared"), concat!("MODEL", ".md")];

#[test]
fn no_tracked_file_refers_outside_the_repository() {
    let found = references_outside(&root(), &OUTSIDE);
    assert!(found.is_empty(), "tracked files refer outside the repository (use docs/model.md): {found:?}");
    assert!(root().join("docs/model.md").exists());
}

#[test]
fn the_outside_reference_check_finds_one() {
    let d = TempDir::new("outside");
    let git = |args: &[&str]| {
        std::process::Command::new("git").args(args).current_dir(&d).output().expect("git runs");
    };
    git(&["init", "-q"]);
    std::fs::write(d.join("a.md"), format!("the contract is {}/{}\n", OUTSIDE[0], OUTSIDE[1])).unwrap();
    std::fs::write(d.join("b.md"), "nothing here\n").unwrap();
    git(&["add", "a.md", "b.md"]);
    let want: Vec<String> = OUTSIDE.iter().map(|n| format!("a.md: {n}")).collect();
    assert_eq!(references_outside(&d, &OUTSIDE), want);
}

/// `scripts/long_functions.py` and `scripts/module_cycles.py` (run by CI) find what they look
/// for: a limit low enough that `crates/trace` has functions over it, and the cycles of a
/// module graph with one (the script's own example).
#[test]
fn the_source_shape_scripts_find_what_they_look_for() {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("python3").args(args).current_dir(root()).output().expect("python3");
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, listed) = run(&["scripts/long_functions.py", "--max", "20", "crates/trace"]);
    assert_eq!(code, Some(1), "{listed}");
    assert!(listed.lines().all(|l| l.starts_with("crates/trace/src/") && l.ends_with(" lines)")), "{listed}");
    let (code, _) = run(&["scripts/long_functions.py", "--max", "100000", "crates/trace"]);
    assert_eq!(code, Some(0));
    let (code, _) = run(&["scripts/long_functions.py", "--max", "x"]);
    assert_eq!(code, Some(2));
    let (code, out) = run(&["scripts/module_cycles.py", "--self-test"]);
    assert_eq!(code, Some(0), "{out}");
}
