//! SQL command traces: the in-memory form, and the text format users bring real traces in.
//!
//! ```text
//! # comment (blank lines too are ignored)
//! @db NAME        following commands go to database file NAME (created on first use)
//! @measure        end of the setup part: what follows is replayed with the PCM journal and measured
//! BEGIN | COMMIT | ROLLBACK
//! any other line: one SQL statement (outside BEGIN..COMMIT it is its own transaction)
//! ```
//!
//! The setup part (before `@measure`) builds the initial database files, with no journal; it
//! plays the role of the paper's "initial database file". Database names are 1..=40 bytes of
//! `[A-Za-z0-9_.]`.

/// One trace command.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Use(usize),
    Begin,
    Commit,
    Rollback,
    Sql(String),
}

/// A trace: database names, the setup commands and the measured commands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Trace {
    pub dbs: Vec<String>,
    pub setup: Vec<Op>,
    pub ops: Vec<Op>,
    /// Source line of each measured command (empty for generated traces): errors name it.
    pub lines: Vec<usize>,
}

impl Trace {
    /// Index of database `name`, added if new.
    pub fn db(&mut self, name: &str) -> usize {
        match self.dbs.iter().position(|d| d == name) {
            Some(i) => i,
            None => {
                self.dbs.push(name.to_string());
                self.dbs.len() - 1
            }
        }
    }

    /// Parse the text format; errors name the line.
    pub fn parse(text: &str) -> Result<Trace, String> {
        let mut t = Trace::default();
        let mut measured = false;
        let mut in_tx = false;
        let mut have_db = false;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let bad =
                |why: &str| format!("trace line {}: {why}: '{}'", i + 1, line.chars().take(60).collect::<String>());
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let op = if let Some(name) = line.strip_prefix("@db ") {
                let name = name.trim();
                let ok = !name.is_empty()
                    && name.len() <= 40
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
                if !ok {
                    return Err(bad("database name must be 1..=40 of [A-Za-z0-9_.]"));
                }
                if in_tx {
                    return Err(bad("@db inside a transaction"));
                }
                have_db = true;
                Op::Use(t.db(name))
            } else if line == "@measure" {
                if measured || in_tx {
                    return Err(bad("@measure twice or inside a transaction"));
                }
                measured = true;
                continue;
            } else if line.starts_with('@') {
                return Err(bad("unknown directive; allowed: @db NAME, @measure"));
            } else {
                let upper = line.trim_end_matches(';').to_ascii_uppercase();
                match upper.as_str() {
                    "BEGIN" | "BEGIN TRANSACTION" => {
                        if in_tx {
                            return Err(bad("BEGIN inside a transaction"));
                        }
                        in_tx = true;
                        Op::Begin
                    }
                    "COMMIT" | "END" | "ROLLBACK" => {
                        if !in_tx {
                            return Err(bad("COMMIT or ROLLBACK outside a transaction"));
                        }
                        in_tx = false;
                        if upper == "ROLLBACK" {
                            Op::Rollback
                        } else {
                            Op::Commit
                        }
                    }
                    _ => Op::Sql(line.to_string()),
                }
            };
            if !have_db {
                return Err(bad("a command before the first @db"));
            }
            if measured {
                t.ops.push(op);
                t.lines.push(i + 1);
            } else {
                t.setup.push(op);
            }
        }
        if in_tx {
            return Err("trace: ends inside a transaction".into());
        }
        if !measured {
            return Err("trace: no @measure line".into());
        }
        Ok(t)
    }

    /// The text form (parses back to the same trace).
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let emit = |ops: &[Op], out: &mut String| {
            for op in ops {
                match op {
                    Op::Use(i) => out.push_str(&format!("@db {}\n", self.dbs[*i])),
                    Op::Begin => out.push_str("BEGIN\n"),
                    Op::Commit => out.push_str("COMMIT\n"),
                    Op::Rollback => out.push_str("ROLLBACK\n"),
                    Op::Sql(s) => {
                        out.push_str(s);
                        out.push('\n');
                    }
                }
            }
        };
        emit(&self.setup, &mut out);
        out.push_str("@measure\n");
        emit(&self.ops, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_round_trips() {
        let text = "# x\n@db a.db\nCREATE TABLE t(x)\n@measure\nBEGIN\nINSERT INTO t VALUES(1)\nCOMMIT\n@db b.db\nINSERT INTO t VALUES(2)\n";
        let t = Trace::parse(text).unwrap();
        assert_eq!(t.dbs, vec!["a.db", "b.db"]);
        assert_eq!(t.setup, vec![Op::Use(0), Op::Sql("CREATE TABLE t(x)".into())]);
        assert_eq!(t.ops.len(), 5);
        assert_eq!(t.lines, vec![5, 6, 7, 8, 9]);
        let back = Trace::parse(&t.to_text()).unwrap();
        assert_eq!((&back.dbs, &back.setup, &back.ops), (&t.dbs, &t.setup, &t.ops));
    }

    #[test]
    fn malformed_traces_name_the_line() {
        for (text, want) in [
            ("CREATE TABLE t(x)\n@measure\n", "line 1: a command before the first @db"),
            ("@db a\n@measure\nBEGIN\n", "ends inside a transaction"),
            ("@db a\n@measure\nCOMMIT\n", "line 3: COMMIT or ROLLBACK outside"),
            ("@db a/b\n", "line 1: database name"),
            ("@db a\n@nope\n", "line 2: unknown directive"),
            ("@db a\nSELECT 1\n", "no @measure"),
        ] {
            let e = Trace::parse(text).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
