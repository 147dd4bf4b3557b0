//! A user's SQL script as a journal trace (`locsim journal --sql FILE`).
//!
//! The form is what the SQLite shell's `.read` accepts, restricted so that every line has one
//! meaning for the journal model:
//!
//! - SQL statements, each ended by `;`. Statements are split where SQLite's own
//!   `sqlite3_complete` says a statement ends, so a statement may span lines, a line may hold
//!   several statements, and `;` inside strings, comments and `CREATE TRIGGER ... END;` bodies
//!   does not split. `--` and `/* */` comments and blank lines are allowed anywhere.
//! - `.open NAME` (or `.open 'file:NAME?vfs=pcmjournal'`, the URI the extension is opened with,
//!   of which only NAME counts): the following statements go to database file NAME. Before the
//!   first `.open` they go to `app.db`. Several databases are several journals in the same PCM
//!   area, as with the built-in traces. No other dot-command is accepted.
//! - `BEGIN [DEFERRED | IMMEDIATE | EXCLUSIVE] [TRANSACTION]` ... `COMMIT | END | ROLLBACK`
//!   delimit transactions; any other statement outside them is its own transaction. `SAVEPOINT`
//!   and `RELEASE` only inside `BEGIN ... COMMIT`.
//!
//! Refused, each with its line number: text that is not UTF-8 or holds a NUL byte, a statement
//! that does not start with an SQL statement keyword (the file is not SQL), a last statement
//! with no `;`, `ATTACH`/`DETACH` (a transaction over two attached databases needs a
//! super-journal, which the model does not implement: use `.open`), and the pragmas the model
//! sets itself (`journal_mode`, `page_size`, `synchronous`, `cache_spill`, `temp_store`,
//! `locking_mode`, `mmap_size`). The whole script is measured: there is no setup part (a
//! recorded trace, docs/journal.md, has one).

use super::sql_trace::{Op, Trace};
use std::ffi::CString;

/// Database the statements before the first `.open` go to.
pub const DEFAULT_DB: &str = "app.db";

/// First keywords of the SQL statements SQLite accepts.
const STATEMENT_KEYWORDS: [&str; 23] = [
    "ALTER",
    "ANALYZE",
    "ATTACH",
    "BEGIN",
    "COMMIT",
    "CREATE",
    "DELETE",
    "DETACH",
    "DROP",
    "END",
    "EXPLAIN",
    "INSERT",
    "PRAGMA",
    "REINDEX",
    "RELEASE",
    "REPLACE",
    "ROLLBACK",
    "SAVEPOINT",
    "SELECT",
    "UPDATE",
    "VACUUM",
    "VALUES",
    "WITH",
];

/// Pragmas whose value the journal model fixes (docs/your-sqlite-app.md).
pub const FIXED_PRAGMAS: [&str; 7] =
    ["journal_mode", "page_size", "synchronous", "cache_spill", "temp_store", "locking_mode", "mmap_size"];

/// True if `sql` is one or more complete SQL statements (SQLite's `sqlite3_complete`).
fn complete(sql: &str) -> bool {
    let Ok(c) = CString::new(sql) else { return false };
    // SAFETY: a NUL-terminated string; sqlite3_complete only reads it.
    unsafe { rusqlite::ffi::sqlite3_complete(c.as_ptr()) != 0 }
}

/// The statement without leading blanks and comments.
fn strip_leading_comments(mut s: &str) -> &str {
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix("--") {
            s = rest.split_once('\n').map_or("", |(_, r)| r);
        } else if let Some(rest) = s.strip_prefix("/*") {
            s = rest.split_once("*/").map_or("", |(_, r)| r);
        } else {
            return s;
        }
    }
}

/// Upper-cased words of `s` (letters, digits and `_`), at most `n`.
fn words(s: &str, n: usize) -> Vec<String> {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

/// The database name of an `.open` argument: NAME, 'NAME', "NAME" or a `file:NAME?...` URI.
fn open_target(arg: &str) -> Option<String> {
    let a = arg.trim();
    let a = a.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')).unwrap_or(a);
    let a = a.strip_prefix('"').and_then(|x| x.strip_suffix('"')).unwrap_or(a);
    let a = a.strip_prefix("file:").map_or(a, |u| u.split(['?', '#']).next().unwrap_or(""));
    let ok = !a.is_empty() && a.len() <= 40 && a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    ok.then(|| a.to_string())
}

/// Parse a SQL script (module docs) into a trace with no setup part; errors name the line.
pub fn parse(text: &str) -> Result<Trace, String> {
    if let Some(i) = text.find('\0') {
        let line = text[..i].matches('\n').count() + 1;
        return Err(format!("--sql: line {line}: NUL byte: not a text file of SQL statements"));
    }
    let mut t = Trace::default();
    let mut in_tx = false;
    let mut buf = String::new();
    let mut buf_line = 0usize;
    let mut statements = 0usize;
    let mut cur_db: Option<usize> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if strip_leading_comments(&buf).is_empty() && line.trim_start().starts_with('.') {
            let cmd = line.trim();
            let (name, arg) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
            if name != ".open" {
                return Err(format!("--sql: line {n}: dot-command {name} not supported; allowed: .open NAME"));
            }
            let db = open_target(arg).ok_or_else(|| {
                format!(
                    "--sql: line {n}: .open {}: allowed a name of 1..=40 of [A-Za-z0-9_.] (or file:NAME?...)",
                    arg.trim()
                )
            })?;
            if in_tx {
                return Err(format!("--sql: line {n}: .open inside a transaction"));
            }
            let d = t.db(&db);
            cur_db = Some(d);
            t.ops.push(Op::Use(d));
            t.lines.push(n);
            buf.clear();
            continue;
        }
        for ch in line.chars() {
            if !ch.is_whitespace() && strip_leading_comments(&buf).is_empty() {
                buf_line = n;
            }
            buf.push(ch);
            if ch == ';' && complete(&buf) {
                let stmt = std::mem::take(&mut buf);
                if cur_db.is_none() {
                    let d = t.db(DEFAULT_DB);
                    cur_db = Some(d);
                    t.ops.push(Op::Use(d));
                    t.lines.push(buf_line);
                }
                if let Some(op) = classify(&stmt, buf_line, &mut in_tx)? {
                    t.ops.push(op);
                    t.lines.push(buf_line);
                    statements += 1;
                }
            }
        }
        buf.push('\n');
    }
    let left = strip_leading_comments(&buf).trim_end();
    if !left.is_empty() {
        classify(&format!("{left};"), buf_line, &mut in_tx.clone())?;
        let what: String = left.lines().next().unwrap_or("").chars().take(40).collect();
        return Err(format!("--sql: line {buf_line}: statement not ended by ';': '{what}'"));
    }
    if in_tx {
        return Err("--sql: the script ends inside a transaction (BEGIN with no COMMIT)".into());
    }
    if statements == 0 {
        return Err("--sql: no SQL statements".into());
    }
    Ok(t)
}

/// The trace command of one complete statement (None: only comments).
fn classify(stmt: &str, n: usize, in_tx: &mut bool) -> Result<Option<Op>, String> {
    let body = strip_leading_comments(stmt);
    let body = body.trim_end().trim_end_matches(';').trim_end();
    if body.is_empty() {
        return Ok(None);
    }
    let w = words(body, 4);
    let first = w.first().map(String::as_str).unwrap_or("");
    let shown: String = body.lines().next().unwrap_or("").chars().take(40).collect();
    let bad = |why: String| Err(format!("--sql: line {n}: {why}: '{shown}'"));
    if !body.starts_with(|c: char| c.is_ascii_alphabetic()) || !STATEMENT_KEYWORDS.contains(&first) {
        return bad(format!("not an SQL statement (allowed first words: {})", STATEMENT_KEYWORDS.join(" ")));
    }
    let rest: Vec<&str> = w.iter().skip(1).map(String::as_str).collect();
    let only_transaction = |r: &[&str]| r.is_empty() || r == ["TRANSACTION"];
    match first {
        "ATTACH" | "DETACH" => {
            bad("ATTACH/DETACH not supported (a transaction over two databases needs a super-journal); use .open NAME lines".into())
        }
        "PRAGMA" => match rest.first() {
            Some(p) if FIXED_PRAGMAS.iter().any(|f| f.eq_ignore_ascii_case(p)) && body.contains(['=', '(']) => {
                bad(format!("PRAGMA {} is set by the journal model (fixed: {})", p.to_lowercase(), FIXED_PRAGMAS.join(", ")))
            }
            _ => Ok(Some(Op::Sql(body.to_string()))),
        },
        "BEGIN" => {
            let r = match rest.first() {
                Some(&("DEFERRED" | "IMMEDIATE" | "EXCLUSIVE")) => &rest[1..],
                _ => &rest[..],
            };
            if !only_transaction(r) {
                return bad("unrecognised BEGIN".into());
            }
            if *in_tx {
                return bad("BEGIN inside a transaction".into());
            }
            *in_tx = true;
            Ok(Some(Op::Begin))
        }
        "COMMIT" | "END" | "ROLLBACK" if only_transaction(&rest) => {
            if !*in_tx {
                return bad("COMMIT or ROLLBACK outside a transaction".into());
            }
            *in_tx = false;
            Ok(Some(if first == "ROLLBACK" { Op::Rollback } else { Op::Commit }))
        }
        "SAVEPOINT" | "RELEASE" | "ROLLBACK" if !*in_tx => {
            bad("SAVEPOINT, RELEASE and ROLLBACK TO only inside BEGIN ... COMMIT".into())
        }
        _ => Ok(Some(Op::Sql(body.to_string()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_where_sqlite_says_they_end() {
        let text = "-- app\nCREATE TABLE t(x, y);\nINSERT INTO t VALUES(1,\n 'a;b'); INSERT INTO t VALUES(2, 'c');\n\
                    BEGIN IMMEDIATE;\nCREATE TRIGGER g AFTER INSERT ON t BEGIN\n  UPDATE t SET y = 'z;' WHERE x = 0;\nEND;\n\
                    /* c */ COMMIT;\n.open 'file:b.db?vfs=pcmjournal'\nCREATE TABLE u(a);\n";
        let t = parse(text).unwrap();
        assert_eq!(t.dbs, vec!["app.db", "b.db"]);
        let sql: Vec<&Op> = t.ops.iter().collect();
        assert_eq!(sql.len(), 9, "{sql:?}");
        assert_eq!(t.ops[2], Op::Sql("INSERT INTO t VALUES(1,\n 'a;b')".into()));
        assert_eq!(t.ops[4], Op::Begin);
        assert!(matches!(&t.ops[5], Op::Sql(s) if s.ends_with("WHERE x = 0;\nEND")));
        assert_eq!(t.ops[6], Op::Commit);
        assert_eq!(t.lines, vec![2, 2, 3, 4, 5, 6, 9, 10, 11]);
    }

    #[test]
    fn what_is_not_a_script_is_refused_with_its_line() {
        for (text, want) in [
            ("hello world\n", "line 1: not an SQL statement"),
            ("SELECT 1;\nSELECT 2\n", "line 2: statement not ended by ';'"),
            ("SELECT 1;\nhello world;\n", "line 2: not an SQL statement"),
            ("\u{89}PNG\0\0", "line 1: NUL byte"),
            ("BEGIN;\nSELECT 1;\n", "ends inside a transaction"),
            ("COMMIT;\n", "line 1: COMMIT or ROLLBACK outside"),
            ("ATTACH 'x.db' AS x;\n", "line 1: ATTACH/DETACH not supported"),
            ("PRAGMA page_size=4096;\n", "line 1: PRAGMA page_size is set by the journal model"),
            ("SAVEPOINT a;\n", "line 1: SAVEPOINT, RELEASE and ROLLBACK TO only inside"),
            (".tables\n", "line 1: dot-command .tables not supported"),
            (".open a/b.db\n", "line 1: .open a/b.db: allowed"),
            ("-- nothing\n", "no SQL statements"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
        assert!(parse("BEGIN;\nSAVEPOINT a;\nROLLBACK TO a;\nRELEASE a;\nCOMMIT;\nPRAGMA page_size;\n").is_ok());
    }
}
