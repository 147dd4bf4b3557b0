//! The docs, the code's comments and the experiment specs say what is and why as of now: a reader
//! who clones the repository cannot open the project's issue tracker, and history lives in git.
//! So no tracked file under docs/, src/, experiments/, tests/, scripts/ or README.md cites an
//! issue by number ("issue" and a number), a commit by its hash (the 7 - 12 hex digits of an
//! abbreviated hash, or the 40 of a full one) or a date of work (YYYY-MM-DD, or a day, a month's
//! name and a year in either order of day and month); and
//! docs/performance.md, a reference rather than a notebook, stays within 500 lines.
//!
//! Data is not flagged: a hex number in the code carries its `0x` (or `0b`) prefix, a byte string
//! is 16 digits or more, and a token without both a digit and a letter a-f is not a hash. Papers
//! are cited by authors, venue and year, without a day.

#[path = "../src/testdir.rs"]
mod testdir;
use std::path::{Path, PathBuf};
use testdir::TempDir;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the rules hold.
const SCOPE: [&str; 6] = ["docs", "src", "experiments", "tests", "scripts", "README.md"];

/// The longest docs/performance.md may be, in lines.
const PERFORMANCE_MAX_LINES: usize = 500;

/// "issue", "issues" (any case), optional spaces and `#`, then a digit.
fn issue_citations(line: &str) -> Vec<String> {
    let lower = line.to_ascii_lowercase();
    let b = lower.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find("issue") {
        let start = from + i;
        from = start + 5;
        if start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_') {
            continue;
        }
        let mut j = start + 5;
        if j < b.len() && b[j] == b's' {
            j += 1;
        }
        let word_end = j;
        while j < b.len() && (b[j] == b' ' || b[j] == b'#') {
            j += 1;
        }
        if j > word_end && j < b.len() && b[j].is_ascii_digit() {
            let mut k = j;
            while k < b.len() && b[k].is_ascii_digit() {
                k += 1;
            }
            found.push(line[start..k].to_string());
        }
    }
    found
}

/// Tokens shaped like a git hash: 7 - 12 or 40 lowercase hex digits with at least one digit and
/// one letter, standing alone (not part of a longer word or number, not after `0x` or `0b`).
fn hash_like(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !word(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && word(b[i]) {
            i += 1;
        }
        let tok = &line[start..i];
        let hex = tok.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
        let prefixed = tok.starts_with("0b") || (start >= 2 && &b[start - 2..start] == b"0x");
        let shaped = (7..=12).contains(&tok.len()) || tok.len() == 40;
        if hex
            && shaped
            && !prefixed
            && tok.bytes().any(|c| c.is_ascii_digit())
            && tok.bytes().any(|c| c.is_ascii_alphabetic())
        {
            found.push(tok.to_string());
        }
    }
    found
}

/// Dates `YYYY-MM-DD` (years 1900 - 2099, months 01 - 12, days 01 - 31).
fn dates(line: &str) -> Vec<String> {
    let b = line.as_bytes();
    let d = |i: usize| b[i].is_ascii_digit();
    let num = |i: usize, n: usize| line[i..i + n].parse::<u32>().unwrap();
    let mut found = Vec::new();
    for s in 0..b.len().saturating_sub(9) {
        let alone_before = s == 0 || !b[s - 1].is_ascii_alphanumeric();
        let alone_after = s + 10 == b.len() || !b[s + 10].is_ascii_alphanumeric();
        let shape = (0..4).all(|k| d(s + k))
            && b[s + 4] == b'-'
            && d(s + 5)
            && d(s + 6)
            && b[s + 7] == b'-'
            && d(s + 8)
            && d(s + 9);
        if alone_before && alone_after && shape {
            let (y, m, day) = (num(s, 4), num(s + 5, 2), num(s + 8, 2));
            if (1900..2100).contains(&y) && (1..=12).contains(&m) && (1..=31).contains(&day) {
                found.push(line[s..s + 10].to_string());
            }
        }
    }
    found
}

/// Dates written with a month's name (in full or its three-letter abbreviation, capitalised):
/// day, month, year or month, day, year (a comma allowed after the day); day 1 - 31, year
/// 1900 - 2099. A month and a year alone ("HPCA, February 2017") are a citation, not a date of
/// work.
fn named_dates(line: &str) -> Vec<String> {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    let month = |w: &str| MONTHS.iter().any(|m| w == *m || (w.len() == 3 && m.starts_with(w)));
    let day = |w: &str| w.len() <= 2 && w.parse::<u32>().is_ok_and(|d| (1..=31).contains(&d));
    let year = |w: &str| w.len() == 4 && w.parse::<u32>().is_ok_and(|y| (1900..2100).contains(&y));
    let words: Vec<&str> = line.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let mut found = Vec::new();
    for w in words.windows(3) {
        if (day(w[0]) && month(w[1]) && year(w[2])) || (month(w[0]) && day(w[1]) && year(w[2])) {
            found.push(w.join(" "));
        }
    }
    found
}

/// Every violation in the tracked files of `SCOPE` under `root`, as `path:line: what`.
fn violations(root: &Path) -> Vec<String> {
    let out =
        std::process::Command::new("git").arg("ls-files").args(SCOPE).current_dir(root).output().expect("git runs");
    let mut found = Vec::new();
    for f in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(text) = std::fs::read_to_string(root.join(f)) else { continue }; // binary or gone
        for (n, line) in text.lines().enumerate() {
            let at = |kind: &str, what: String| format!("{f}:{}: {kind} `{what}`", n + 1);
            found.extend(issue_citations(line).into_iter().map(|w| at("an issue number", w)));
            found.extend(hash_like(line).into_iter().map(|w| at("a commit hash", w)));
            found.extend(dates(line).into_iter().map(|w| at("a date", w)));
            found.extend(named_dates(line).into_iter().map(|w| at("a date", w)));
        }
        if f == "docs/performance.md" && text.lines().count() > PERFORMANCE_MAX_LINES {
            found.push(format!("{f}: {} lines, more than {PERFORMANCE_MAX_LINES}", text.lines().count()));
        }
    }
    found
}

#[test]
fn docs_code_and_specs_cite_no_issue_number_commit_hash_or_date() {
    let found = violations(&root());
    assert!(
        found.is_empty(),
        "say what is and why (state the requirement, cite the paper by authors, venue, year and \
         section); history lives in git:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_rules_flag_citations_and_history_and_leave_data_alone() {
    // The flagged examples are assembled at run time, so that this file does not contain them.
    let hash = format!("{}{}", "c1e3", "228");
    assert_eq!(issue_citations(&format!("as issue {} states", 41)), vec![format!("issue {}", 41)]);
    assert_eq!(issue_citations(&format!("Issues #{} and", 7)), vec![format!("Issues #{}", 7)]);
    assert!(issue_citations("issue_phys(3); the controller may issue writes").is_empty());
    assert_eq!(hash_like(&format!("the binary of commit {hash}, before")), vec![hash.clone()]);
    assert_eq!(
        hash_like(&format!("locsim 0.1.0 ({}{})", "affc1e", "06b04b")),
        vec![format!("{}{}", "affc1e", "06b04b")]
    );
    assert!(hash_like("store 0x10008 2a00000000000000; mask 0b11111; 0x1e3228a; decade 1234567").is_empty());
    assert_eq!(dates(&format!("measured on {}-{}-07", 2026, 12)), vec![format!("{}-{}-07", 2026, 12)]);
    assert!(dates("Joshi et al., HPCA 2017, pages 361-372; 2026-13-01; x2026-12-07").is_empty());
    let (dec, december) = (String::from("Dec"), format!("{}ember", "Dec"));
    assert_eq!(named_dates(&format!("measured on {} {december} {}", 7, 2026)), vec![format!("7 {december} {}", 2026)]);
    assert_eq!(named_dates(&format!("run of {dec} {}, {}", 7, 2026)), vec![format!("{dec} 7 {}", 2026)]);
    assert!(named_dates("Joshi et al., MICRO 2015, December 2015; May 40 2026; 7 Decade 2026; Table 3 2026").is_empty());
}

#[test]
fn the_check_fails_on_an_injected_citation_and_a_long_performance_page() {
    let d = TempDir::new("docs-references");
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(&d).output().expect("git runs");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q"]);
    std::fs::create_dir_all(d.join("docs")).unwrap();
    std::fs::create_dir_all(d.join("experiments")).unwrap();
    std::fs::write(d.join("docs/a.md"), format!("The mechanism follows issue {}.\n", 41)).unwrap();
    std::fs::write(d.join("docs/performance.md"), "a line\n".repeat(PERFORMANCE_MAX_LINES + 1)).unwrap();
    std::fs::write(d.join("experiments/x.toml"), format!("# measured at {}{} on {}-{}-07\n", "c1e3", "228", 2026, 12))
        .unwrap();
    std::fs::write(d.join("notes.md"), format!("issue {}, outside the scope\n", 41)).unwrap();
    git(&["add", "."]);
    let want = vec![
        format!("docs/a.md:1: an issue number `issue {}`", 41),
        format!("docs/performance.md: {} lines, more than {PERFORMANCE_MAX_LINES}", PERFORMANCE_MAX_LINES + 1),
        format!("experiments/x.toml:1: a commit hash `{}{}`", "c1e3", "228"),
        format!("experiments/x.toml:1: a date `{}-{}-07`", 2026, 12),
    ];
    assert_eq!(violations(&d), want);
    std::fs::write(d.join("docs/a.md"), "The mechanism follows Joshi et al., HPCA 2017.\n").unwrap();
    std::fs::write(d.join("docs/performance.md"), "a line\n".repeat(PERFORMANCE_MAX_LINES)).unwrap();
    std::fs::write(d.join("experiments/x.toml"), "# measured on the Intel Xeon\n").unwrap();
    assert!(violations(&d).is_empty());
}
