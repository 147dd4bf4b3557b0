//! Seeded generators of SQL traces for the four mobile applications of the paper's Table III.
//! Every parameter and where it comes from is in docs/journal.md ("Workload generators").
//!
//! Each database file holds the same two tables: `item` (one row per message, tweet, chat line
//! or mail, with a thread, a timestamp, a flags counter and a text body; indexed by thread and
//! time) and `meta` (small counters the application keeps, e.g. sync state). A transaction is
//! one user or sync action on one database: a few inserts, flag updates of recent rows, a
//! deletion of the oldest row, and a counter update in `meta`.

use super::sql_trace::{Op, Trace};
use crate::recent::{at_most, Recent};
use crate::rng::Rng;

/// The applications of Table III.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum App {
    Fb,
    Tw,
    Kt,
    Gm,
}

/// Generator parameters of one application.
#[derive(Clone, Debug)]
pub struct AppModel {
    pub code: &'static str,
    /// Database files for traces 1..=4.
    pub dbs: [usize; 4],
    /// Transactions for traces 1..=4.
    pub txs: [u64; 4],
    /// Rows per database file before the measured part.
    pub initial_rows: u64,
    /// Bytes of a text body, inclusive range.
    pub body_bytes: (u64, u64),
    /// Statements of a transaction besides the `meta` update, inclusive range.
    pub stmts_per_tx: (u64, u64),
    /// Probability that a statement is an insert, an update; the rest are deletes.
    pub p_insert: f64,
    pub p_update: f64,
    /// Conversation threads per database.
    pub threads: u64,
    /// Updates pick one of this many most recent rows...
    pub recent_rows: u64,
    /// ...except this fraction, which pick any live row (an old message read, an old post liked).
    pub p_old_update: f64,
}

impl App {
    pub const ALL: [(&'static str, App); 4] = [("fb", App::Fb), ("tw", App::Tw), ("kt", App::Kt), ("gm", App::Gm)];

    pub fn parse(s: &str) -> Result<App, String> {
        App::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|&(_, a)| a)
            .ok_or_else(|| format!("--app {s}: allowed fb, tw, kt, gm"))
    }

    pub fn code(self) -> &'static str {
        self.model().code
    }

    pub fn model(self) -> AppModel {
        match self {
            App::Fb => AppModel {
                code: "fb",
                dbs: [13, 14, 15, 16],
                txs: [200, 700, 1600, 3000],
                initial_rows: 400,
                body_bytes: (40, 400),
                stmts_per_tx: (1, 3),
                p_insert: 0.5,
                p_update: 0.4,
                threads: 40,
                recent_rows: 30,
                p_old_update: 0.5,
            },
            App::Tw => AppModel {
                code: "tw",
                dbs: [3, 4, 5, 6],
                txs: [170, 650, 1400, 2650],
                initial_rows: 2500,
                body_bytes: (20, 140),
                stmts_per_tx: (1, 4),
                p_insert: 0.6,
                p_update: 0.35,
                threads: 200,
                recent_rows: 50,
                p_old_update: 0.5,
            },
            App::Kt => AppModel {
                code: "kt",
                dbs: [3, 4, 5, 6],
                txs: [220, 830, 1850, 3500],
                initial_rows: 2500,
                body_bytes: (5, 80),
                stmts_per_tx: (1, 2),
                p_insert: 0.7,
                p_update: 0.25,
                threads: 30,
                recent_rows: 20,
                p_old_update: 0.5,
            },
            App::Gm => AppModel {
                code: "gm",
                dbs: [3, 4, 5, 6],
                txs: [175, 670, 1470, 2750],
                initial_rows: 1500,
                body_bytes: (100, 800),
                stmts_per_tx: (1, 3),
                p_insert: 0.4,
                p_update: 0.5,
                threads: 60,
                recent_rows: 40,
                p_old_update: 0.5,
            },
        }
    }
}

fn body(rng: &mut Rng, (lo, hi): (u64, u64)) -> String {
    let n = lo + rng.below(hi - lo + 1);
    const WORDS: [&str; 16] = [
        "ok", "see", "you", "photo", "link", "lol", "thanks", "meet", "at", "the", "new", "post", "reply", "great",
        "now", "?",
    ];
    let mut s = String::with_capacity(n as usize + 8);
    while (s.len() as u64) < n {
        s.push_str(WORDS[rng.below(16) as usize]);
        s.push(' ');
    }
    s.truncate(n as usize);
    s
}

/// Pick a database: file `i` with weight 1 / (i + 1) (a few files take most writes).
fn pick_db(rng: &mut Rng, n: usize) -> usize {
    let total: f64 = (1..=n).map(|i| 1.0 / i as f64).sum();
    let mut x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
    for i in 0..n {
        x -= 1.0 / (i + 1) as f64;
        if x < 0.0 {
            return i;
        }
    }
    n - 1
}

/// Traces a process keeps for later replays ([`generated`]).
const KEPT_TRACES: usize = 16;

/// [`generate`]'s trace at its own transaction count, shared by the replays of one process
/// (a reproduction replays each trace under many configurations, and a long trace takes tens
/// of milliseconds to generate); the `KEPT_TRACES` used last are kept.
pub fn generated(app: App, trace: u32, seed: u64) -> std::sync::Arc<Trace> {
    static KEPT: Recent<(App, u32, u64), std::sync::Arc<Trace>> = Recent::new();
    let key = (app, trace, seed);
    let make = || (key, std::sync::Arc::new(generate(app, trace, seed, None)));
    KEPT.get_or_insert(|k| *k == key, make, at_most(KEPT_TRACES))
}

/// The trace `trace` (1..=4) of `app`, from `seed`; `txs` overrides the transaction count.
pub fn generate(app: App, trace: u32, seed: u64, txs: Option<u64>) -> Trace {
    let p = app.model();
    let ti = (trace.clamp(1, 4) - 1) as usize;
    let n_db = p.dbs[ti];
    let mut rng = Rng::derive(seed, 0x4A50 + (app as u64) * 8 + trace as u64);
    let mut t = Trace::default();
    let mut next_id = vec![0u64; n_db];
    let mut low_id = vec![1u64; n_db];
    let mut ts = 1_000_000u64;
    for (d, next) in next_id.iter_mut().enumerate() {
        let i = t.db(&format!("{}{}_{:02}.db", p.code, trace, d));
        t.setup.push(Op::Use(i));
        for s in [
            "CREATE TABLE item(id INTEGER PRIMARY KEY, thread INTEGER, ts INTEGER, flags INTEGER, body TEXT)",
            "CREATE INDEX item_thread ON item(thread, ts)",
            "CREATE TABLE meta(k INTEGER PRIMARY KEY, v INTEGER)",
        ] {
            t.setup.push(Op::Sql(s.into()));
        }
        t.setup.push(Op::Begin);
        for k in 0..4 {
            t.setup.push(Op::Sql(format!("INSERT INTO meta VALUES({k}, 0)")));
        }
        for _ in 0..p.initial_rows {
            *next += 1;
            ts += 1 + rng.below(1000);
            let b = body(&mut rng, p.body_bytes);
            t.setup.push(Op::Sql(format!("INSERT INTO item VALUES({next}, {}, {ts}, 0, '{b}')", rng.below(p.threads))));
        }
        t.setup.push(Op::Commit);
    }
    let mut cur = usize::MAX;
    for _ in 0..txs.unwrap_or(p.txs[ti]) {
        let d = pick_db(&mut rng, n_db);
        if d != cur {
            t.ops.push(Op::Use(d));
            cur = d;
        }
        t.ops.push(Op::Begin);
        let n = p.stmts_per_tx.0 + rng.below(p.stmts_per_tx.1 - p.stmts_per_tx.0 + 1);
        for _ in 0..n {
            ts += 1 + rng.below(1000);
            let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let live = next_id[d] + 1 - low_id[d];
            if x < p.p_insert || live < 10 {
                next_id[d] += 1;
                let b = body(&mut rng, p.body_bytes);
                t.ops.push(Op::Sql(format!(
                    "INSERT INTO item VALUES({}, {}, {ts}, 0, '{b}')",
                    next_id[d],
                    rng.below(p.threads)
                )));
            } else if x < p.p_insert + p.p_update {
                let id = if rng.chance(p.p_old_update) {
                    low_id[d] + rng.below(live)
                } else {
                    next_id[d] - rng.below(p.recent_rows.min(live))
                };
                t.ops.push(Op::Sql(format!("UPDATE item SET flags = flags + 1, ts = {ts} WHERE id = {id}")));
            } else {
                t.ops.push(Op::Sql(format!("DELETE FROM item WHERE id = {}", low_id[d])));
                low_id[d] += 1;
            }
        }
        t.ops.push(Op::Sql(format!("UPDATE meta SET v = v + 1 WHERE k = {}", rng.below(4))));
        t.ops.push(Op::Commit);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_is_fixed_by_its_seed_and_has_the_papers_file_counts() {
        let a = generate(App::Fb, 1, 5, Some(20));
        assert_eq!(a, generate(App::Fb, 1, 5, Some(20)));
        assert_ne!(a, generate(App::Fb, 1, 6, Some(20)));
        assert_eq!(a.dbs.len(), 13);
        assert_eq!(generate(App::Gm, 4, 1, Some(1)).dbs.len(), 6);
        assert_eq!(a.ops.iter().filter(|o| **o == Op::Begin).count(), 20);
        assert!(Trace::parse(&a.to_text()).is_ok());
    }
}
