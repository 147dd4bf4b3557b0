//! SQLite: LevelDB's SQLite benchmark (`db_bench_sqlite3`, Table II "database benchmark on
//! SQLite") run by real SQLite on a database file in the simulated persistent data area.
//!
//! The table is the benchmark's `test (key blob, value blob, PRIMARY KEY(key))`: a rowid table
//! plus its primary-key index. A transaction is `BEGIN`, `rows_per_tx` statements
//! `REPLACE INTO test (key, value) VALUES (?, ?)` with 16-byte keys (`%016d` of the key number)
//! and 100-byte values, then `COMMIT` (or `ROLLBACK` when aborted). That SQLite transaction is
//! exactly one storage transaction of the protocol: `pm.begin()` before `BEGIN`, `pm.commit()`
//! after `COMMIT`. Key order follows the `mode`: `fillseq` (new keys in increasing order after
//! the populated ones), `fillrandom` (uniform keys from the whole 16-digit key space: almost
//! always new rows at random places) or `overwrite` (uniform keys among the populated rows).
//!
//! # Layout in persistent memory
//!
//! The data area is one [`bridge::Region`] at address 0: bytes 0..8 the file size (u64, little
//! endian), 8..64 zero, then the database file from byte 64 (`src/workload/sqlite/bridge.rs`). A page of `page_size_bytes` therefore covers exactly
//! `page_size_bytes / 64` blocks, and SQLite writes whole pages: the P-Set of a transaction is
//! about 16 blocks (at 1 KiB pages) per page it dirties, plus the size block when the file grows.
//! Populate writes 65,536 rows in key order: a 9.9 MiB file; random overwrites grow it to a
//! steady 14.8 MiB (48 MiB of capacity leave room for about 30,000 transactions of the fill
//! modes).
//!
//! # P-Set and the batch size
//!
//! A random `REPLACE` dirties about 2.6 pages: the index leaf of its key, the table leaf of the
//! old row, the table's last leaf (the new rowid), and rebalancing. `rows_per_tx` = 7 gives a
//! measured P-Set of 290 blocks after a short warm-up and 328.5 after the default 20,000
//! warm-up transactions (6 rows: 285, 8 rows: 374 at steady state), around Table II's 309.34.
//!
//! # SQLite settings (each set explicitly when the connection opens)
//!
//! - `journal_mode=OFF`: atomicity comes from the protocol, not from SQLite's rollback journal.
//!   An aborted transaction runs `ROLLBACK`, which in this mode puts SQLite's pager into its
//!   error state; SQLite then discards its whole page cache as soon as the last page reference
//!   is dropped (`pager_unlock`, in exclusive mode too), so no stale page survives; `pm.abort()`
//!   then rolls the data area back. The model-based test reads the data area after every
//!   transaction, aborted ones included.
//! - `locking_mode=EXCLUSIVE`, `synchronous=OFF`: as in the LevelDB benchmark's tuning
//!   (exclusive lock, no syncs); with the exclusive lock SQLite updates the file change counter
//!   once per connection instead of at every commit.
//! - `page_size` = `page_size_bytes` (default 1024, the benchmark's page size and the default of
//!   SQLite 3.7.17, the version of the paper).
//! - `cache_size` = `cache_pages` (default 16 pages) and `cache_spill=OFF`: SQLite's page cache
//!   is host memory the simulator does not see, so it is kept small: it holds the pages one
//!   statement pins (two root-to-leaf paths, page 1, a rebalance's siblings) and the hot roots,
//!   and nearly every other page read comes from simulated memory. Dirty pages are never spilled
//!   before commit, so each dirty page is written once, at `COMMIT`.
//! - `temp_store=MEMORY`: the statement journal stays in host memory (the VFS opens no other
//!   file).
//!
//! # The compute constant
//!
//! SQLite's CPU work is charged after every statement (`BEGIN`, each `REPLACE`, `COMMIT` /
//! `ROLLBACK`) as its virtual-machine step count (`SQLITE_STMTSTATUS_VM_STEP`, read and reset)
//! times `compute_cycles_per_vm_step`. A `REPLACE` of an existing key runs 20 opcodes: `Init`,
//! `Transaction`, `Goto`, 2 `OpenWrite`, 2 `Variable`, `NewRowid`, `SCopy`, `IntCopy`, 2
//! `MakeRecord`, `NoConflict`, `IdxRowid`, `NotExists`, 2 `Delete`, `IdxInsert`, `Insert`,
//! `Halt`; `BEGIN` and `COMMIT` add 6 together, so a default transaction is 146 steps. Seven of
//! the opcodes do b-tree work (root-to-leaf descents with binary search and record comparison,
//! cell removal and insertion, rebalancing, page-cache look-ups); the others move registers.
//!
//! The constant is the mean number of instructions SQLite executes per step in this workload,
//! counted with an instruction counter (valgrind's callgrind) rather than by hand, because the
//! b-tree opcodes dominate and their cost depends on the tree: the release build (SQLite 3.46
//! compiled at -O3 for x86-64), default configuration, `Native` back end, 20,000 warm-up
//! transactions (the default warm-up of `locsim run`), then 1,000 transactions = 146,000 steps:
//!
//! | instructions | |
//! |---|---|
//! | inside `sqlite3_step` | 214,222,072 |
//! | minus the VFS callbacks `xRead` and `xWrite` (their loads and stores are the simulated accesses) | -28,236,797 |
//! | plus binding the key and value (`sqlite3_bind_blob`), `sqlite3_reset`, `sqlite3_stmt_status` | +4,254,000 |
//! | SQLite's own work | 190,239,275 |
//! | per step (/ 146,000) | 1,303 |
//!
//! Default: 1,300. Every instruction counts one cycle, the loads and stores SQLite makes to its
//! own heap and page cache included: that memory is host memory the simulator does not model,
//! and it is small enough (16 pages, a few statements) to be treated as L1 hits. Right after
//! populate (1,000 warm-up transactions) the same count gives 1,023 per step: the freshly filled
//! tree is dense and rebalances less; the default measured region follows the 20,000-transaction
//! warm-up, so the steady-state figure is the one used. The constant is a count, not tuned to
//! any result.
//!
//! # Verifier
//!
//! [`Sqlite::verify`] opens the data area read-only through the same VFS (a back end that reads
//! the borrowed slice in place) and checks:
//! the size header is a whole number of pages within the region; the page size is the
//! configured one; `PRAGMA integrity_check` answers `ok` (b-tree structure, freelist, every
//! index entry matches its row); `test` holds between `rows` and `file size / 116` rows. The
//! content itself is compared with the oracle byte for byte by the crash checker. Its
//! incremental form for the crash checker, which reads SQLite's file format directly, is
//! [`SqliteFollow`] (`sqlite/sqlite_follow.rs`).

pub mod bridge;
mod sqlite_follow;

pub use sqlite_follow::SqliteFollow;

use super::native::Native;
use super::Pm;
use crate::rng::Rng;
use bridge::{with_pm, Region};
use rusqlite::{Connection, StatementStatus};
use serde::{Deserialize, Serialize};

/// Key bytes (`%016d`), as in the LevelDB benchmark.
pub const KEY_BYTES: usize = 16;
/// Value bytes, as in the LevelDB benchmark.
pub const VALUE_BYTES: usize = 100;
/// Rows per transaction while populating (the benchmark's batch size).
const POPULATE_BATCH_ROWS: u64 = 1000;
/// Seed of the values written by populate.
const POPULATE_SEED: u64 = 0x5143_4C49_5445;
/// Size of the 16-digit key space (`fillrandom`).
const KEY_SPACE: u64 = 10_000_000_000_000_000;

const REPLACE: &str = "REPLACE INTO test (key, value) VALUES (?1, ?2)";
const CREATE: &str = "CREATE TABLE test (key blob, value blob, PRIMARY KEY(key))";

/// Which keys the measured transactions write (LevelDB benchmark phases).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SqliteMode {
    /// New keys in increasing order, after the populated ones (the table grows at its end).
    Fillseq,
    /// Uniform keys from the 16-digit key space (new rows at random places; the table grows).
    Fillrandom,
    /// Uniform keys among the populated rows (every statement replaces an existing row).
    Overwrite,
}

/// Parameters of the SQLite workload.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SqliteConfig {
    /// Rows in the table after populate (keys `0..rows`), a count.
    pub rows: u64,
    /// `REPLACE` statements per transaction, a count.
    pub rows_per_tx: u64,
    /// Which keys the measured transactions write (`fillseq`, `fillrandom`, `overwrite`).
    pub mode: SqliteMode,
    /// SQLite page size in bytes (a power of two, 512..=65536).
    pub page_size_bytes: u64,
    /// SQLite page cache size in pages (host memory, not simulated).
    pub cache_pages: u64,
    /// Largest size of the database file in bytes; the data area is this plus a 64-byte header.
    pub file_capacity_bytes: u64,
    /// Cycles charged per SQLite virtual-machine step: instructions SQLite executes per step,
    /// VFS I/O excluded (the module doc gives the count).
    pub compute_cycles_per_vm_step: u64,
}

impl Default for SqliteConfig {
    fn default() -> Self {
        SqliteConfig {
            rows: 65_536,
            rows_per_tx: 7,
            mode: SqliteMode::Overwrite,
            page_size_bytes: 1024,
            cache_pages: 16,
            file_capacity_bytes: 48 << 20,
            compute_cycles_per_vm_step: 1300,
        }
    }
}

/// Populated bytes per row the capacity must at least allow (a sequentially filled row takes
/// about 150 bytes of pages at 1 KiB pages; growth during the run needs more).
const MIN_CAPACITY_PER_ROW: u64 = 256;

impl SqliteConfig {
    /// Range checks; one-line errors naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        let err = |k: &str, v: u64, allowed: &str| Err(format!("workload.sqlite.{k} = {v}: allowed {allowed}"));
        if !(1..=(1 << 26)).contains(&self.rows) {
            return err("rows", self.rows, "1..=67108864");
        }
        if !(1..=100_000).contains(&self.rows_per_tx) {
            return err("rows_per_tx", self.rows_per_tx, "1..=100000");
        }
        let p = self.page_size_bytes;
        if !(512..=65536).contains(&p) || !p.is_power_of_two() {
            return err("page_size_bytes", p, "a power of two in 512..=65536");
        }
        if !(1..=1_000_000).contains(&self.cache_pages) {
            return err("cache_pages", self.cache_pages, "1..=1000000");
        }
        let c = self.file_capacity_bytes;
        let min = (self.rows * MIN_CAPACITY_PER_ROW).next_multiple_of(p).max(16 * p);
        if c < min || !c.is_multiple_of(p) || c > (1 << 36) {
            return err(
                "file_capacity_bytes",
                c,
                &format!("a multiple of page_size_bytes in {min}..=2^36 (256 bytes per row)"),
            );
        }
        if self.compute_cycles_per_vm_step > 1_000_000 {
            let v = self.compute_cycles_per_vm_step;
            return err("compute_cycles_per_vm_step", v, "0..=1000000");
        }
        Ok(())
    }
}

/// One row the workload writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub key: [u8; KEY_BYTES],
    pub value: [u8; VALUE_BYTES],
}

impl Row {
    /// Key number `k` formatted as the benchmark does (`%016d`), and a value drawn from `rng`.
    fn draw(k: u64, rng: &mut Rng) -> Row {
        let mut key = [0u8; KEY_BYTES];
        key.copy_from_slice(format!("{:016}", k % KEY_SPACE).as_bytes());
        let mut value = [0u8; VALUE_BYTES];
        for chunk in value.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes()[..chunk.len()]);
        }
        Row { key, value }
    }
}

/// The SQLite workload: volatile driver state only (the connection, whose page cache is
/// SQLite's own, and the next key of `fillseq`).
pub struct Sqlite {
    cfg: SqliteConfig,
    conn: Option<Connection>,
    /// `fillseq`: the key number of the next row (advanced only by committed transactions).
    next_seq_key: u64,
}

impl Sqlite {
    pub fn new(cfg: &SqliteConfig) -> Sqlite {
        Sqlite { cfg: cfg.clone(), conn: None, next_seq_key: cfg.rows }
    }

    /// A copy of a driver that has not opened its connection yet (populating opens its own
    /// and closes it): its state is then plain data. `None` once it has.
    pub fn without_connection(&self) -> Option<Sqlite> {
        self.conn.is_none().then(|| Sqlite { cfg: self.cfg.clone(), conn: None, next_seq_key: self.next_seq_key })
    }

    /// The database file's region: the whole data area.
    fn region(&self) -> Region {
        Region { base: 0, capacity_bytes: self.cfg.file_capacity_bytes }
    }

    pub fn data_bytes(&self) -> u64 {
        self.region().end()
    }

    /// The rows of the next transaction (advances `rng` exactly as [`Sqlite::run_tx`] does).
    pub fn draw_batch(&self, rng: &mut Rng) -> Vec<Row> {
        (0..self.cfg.rows_per_tx)
            .map(|i| {
                let k = match self.cfg.mode {
                    SqliteMode::Fillseq => self.next_seq_key + i,
                    SqliteMode::Fillrandom => rng.below(KEY_SPACE),
                    SqliteMode::Overwrite => rng.below(self.cfg.rows),
                };
                Row::draw(k, rng)
            })
            .collect()
    }

    /// Create the table and insert rows `0..rows` in key order, in transactions of
    /// `POPULATE_BATCH_ROWS`, through a `Native` back end over `data` (in place).
    pub fn populate(&mut self, data: &mut [u8]) {
        let region = self.region();
        assert!(data.len() as u64 >= region.end(), "sqlite: data area too small");
        let mut pm = Native::new(data);
        pm.begin();
        pm.store(crate::types::Addr(region.base), &[0u8; 8]); // an empty file
        pm.commit();
        let conn = with_pm(&mut pm, || open_configured(region, &self.cfg)).unwrap_or_else(|e| panic!("{e}"));
        let k = self.cfg.compute_cycles_per_vm_step;
        pm.begin();
        statement(&conn, &mut pm, CREATE, None, k);
        pm.commit();
        let mut rng = Rng::new(POPULATE_SEED);
        let mut next = 0;
        while next < self.cfg.rows {
            let end = (next + POPULATE_BATCH_ROWS).min(self.cfg.rows);
            let batch: Vec<Row> = (next..end).map(|k| Row::draw(k, &mut rng)).collect();
            write_batch(&conn, &mut pm, &batch, false, k);
            next = end;
        }
        drop(conn);
    }

    /// One SQLite transaction of `rows_per_tx` `REPLACE` statements = one storage transaction.
    pub fn run_tx<P: Pm>(&mut self, pm: &mut P, rng: &mut Rng, abort: bool) {
        let batch = self.draw_batch(rng);
        if self.conn.is_none() {
            let (region, cfg) = (self.region(), &self.cfg);
            let conn = with_pm(pm, || open_configured(region, cfg));
            self.conn = Some(conn.unwrap_or_else(|e| panic!("{e}")));
        }
        let conn = self.conn.as_ref().expect("opened above");
        write_batch(conn, pm, &batch, abort, self.cfg.compute_cycles_per_vm_step);
        if !abort && self.cfg.mode == SqliteMode::Fillseq {
            self.next_seq_key += batch.len() as u64;
        }
    }

    /// Structural check of a data area; never panics on garbage.
    pub fn verify(&self, data: &[u8]) -> Result<(), String> {
        let region = self.region();
        let page = self.cfg.page_size_bytes;
        let size = match region.recorded_size(data) {
            Some(s) if (data.len() as u64) >= region.end() => s,
            _ => return Err(format!("sqlite: data area of {} bytes too small", data.len())),
        };
        if size == 0 || size > region.capacity_bytes || !size.is_multiple_of(page) {
            return Err(format!(
                "sqlite: file size header {size} is not a whole number of {page}-byte pages \
                 in 1..={}",
                region.capacity_bytes
            ));
        }
        // Reads stop at the file size; the connection is read-only: SQLite reads the borrowed
        // area in place (no copy).
        let mut pm = Image(&data[..(region.file_start() + size) as usize]);
        with_pm(&mut pm, || check_database(region, page, self.cfg.rows, size)).map_err(|e| one_line(&e))
    }
}

/// A read-only back end over a borrowed data area, for the verifier's read-only connection.
struct Image<'a>(&'a [u8]);

impl Pm for Image<'_> {
    fn begin(&mut self) {}
    fn commit(&mut self) {}
    fn abort(&mut self) {}
    fn load(&mut self, addr: crate::types::Addr, buf: &mut [u8]) {
        let a = addr.0 as usize;
        buf.copy_from_slice(&self.0[a..a + buf.len()]);
    }
    fn store(&mut self, _: crate::types::Addr, _: &[u8]) {
        panic!("sqlite verifier: a store through the read-only connection");
    }
    fn compute(&mut self, _: u64) {}
    fn last_durable_tx(&self) -> u64 {
        0
    }
}

/// Open the file in `region` and apply the settings of the module doc. Inside `with_pm`.
fn open_configured(region: Region, cfg: &SqliteConfig) -> Result<Connection, String> {
    let conn = bridge::open(region, false)?;
    let settings = format!(
        "PRAGMA page_size = {}; PRAGMA synchronous = OFF; PRAGMA cache_size = {};
         PRAGMA cache_spill = OFF; PRAGMA temp_store = MEMORY;",
        cfg.page_size_bytes, cfg.cache_pages
    );
    let e = |e: rusqlite::Error| format!("sqlite: configuring the connection: {e}");
    conn.execute_batch(&settings).map_err(e)?;
    for (pragma, want) in [("locking_mode", "exclusive"), ("journal_mode", "off")] {
        let got: String = conn.query_row(&format!("PRAGMA {pragma} = {want}"), [], |r| r.get(0)).map_err(e)?;
        if got != want {
            return Err(format!("sqlite: PRAGMA {pragma} answered {got}, wanted {want}"));
        }
    }
    Ok(conn)
}

/// Run one statement (with a row's key and value bound, if given) and charge its VM steps.
fn statement(conn: &Connection, pm: &mut dyn Pm, sql: &str, row: Option<&Row>, k: u64) {
    let steps = with_pm(pm, || -> rusqlite::Result<i32> {
        let mut st = conn.prepare_cached(sql)?;
        match row {
            Some(r) => st.execute((&r.key[..], &r.value[..]))?,
            None => st.execute([])?,
        };
        Ok(st.reset_status(StatementStatus::VmStep))
    })
    .unwrap_or_else(|e| panic!("sqlite: `{sql}` failed: {e} (workload.sqlite.file_capacity_bytes too small?)"));
    pm.compute(steps as u64 * k);
}

/// `BEGIN`, one `REPLACE` per row, `COMMIT` or `ROLLBACK`, inside one storage transaction.
fn write_batch(conn: &Connection, pm: &mut dyn Pm, rows: &[Row], abort: bool, k: u64) {
    pm.begin();
    statement(conn, pm, "BEGIN", None, k);
    for r in rows {
        statement(conn, pm, REPLACE, Some(r), k);
    }
    if abort {
        statement(conn, pm, "ROLLBACK", None, k);
        pm.abort();
    } else {
        statement(conn, pm, "COMMIT", None, k);
        pm.commit();
    }
}

/// The checks of [`Sqlite::verify`] that need SQLite. Inside `with_pm`.
fn check_database(region: Region, page: u64, rows: u64, size: u64) -> Result<(), String> {
    let conn = bridge::open(region, true)?;
    let e = |e: rusqlite::Error| format!("sqlite: {}", one_line(&e.to_string()));
    // A cache as large as the file: integrity_check looks every row up in the index.
    conn.execute_batch(&format!("PRAGMA cache_size = -{}", size.div_ceil(1024))).map_err(e)?;
    let got: u64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).map_err(e)?;
    if got != page {
        return Err(format!("sqlite: page size {got}, configured {page}"));
    }
    let mut st = conn.prepare("PRAGMA integrity_check").map_err(e)?;
    let report: Vec<String> = st.query_map([], |r| r.get(0)).and_then(|it| it.collect()).map_err(e)?;
    if report != ["ok"] {
        let first: Vec<&str> = report.iter().take(3).map(|s| s.as_str()).collect();
        return Err(format!("sqlite: integrity_check: {}", one_line(&first.join("; "))));
    }
    let n: u64 = conn.query_row("SELECT count(*) FROM test", [], |r| r.get(0)).map_err(e)?;
    let max = size / (KEY_BYTES + VALUE_BYTES) as u64;
    if n < rows || n > max {
        return Err(format!("sqlite: table test holds {n} rows, expected {rows}..={max}"));
    }
    Ok(())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn small(mode: SqliteMode) -> SqliteConfig {
        SqliteConfig {
            rows: 300,
            rows_per_tx: 4,
            mode,
            page_size_bytes: 1024,
            cache_pages: 16,
            file_capacity_bytes: 256 << 10,
            compute_cycles_per_vm_step: 1,
        }
    }

    fn populated(cfg: &SqliteConfig) -> (Sqlite, Vec<u8>) {
        let mut w = Sqlite::new(cfg);
        let mut mem = vec![0u8; w.data_bytes() as usize];
        w.populate(&mut mem);
        (w, mem)
    }

    /// The table as read from a data area (through a fresh connection over a copy).
    fn dump(w: &Sqlite, data: &[u8]) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut pm = Native::new(data.to_vec());
        with_pm(&mut pm, || {
            let conn = bridge::open(w.region(), true).unwrap();
            let mut st = conn.prepare("SELECT key, value FROM test").unwrap();
            let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
            rows.map(|r| r.unwrap()).collect()
        })
    }

    fn populated_model(rows: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut rng = Rng::new(POPULATE_SEED);
        (0..rows)
            .map(|k| {
                let r = Row::draw(k, &mut rng);
                (r.key.to_vec(), r.value.to_vec())
            })
            .collect()
    }

    fn model_run(mode: SqliteMode, seed: u64, txs: u64) {
        let cfg = small(mode);
        let (mut w, mem) = populated(&cfg);
        let mut model = populated_model(cfg.rows);
        assert_eq!(dump(&w, &mem), model, "after populate");
        let mut pm = Native::new(mem);
        let (mut ops, mut aborts) = (Rng::new(seed), Rng::new(seed ^ 0xAB));
        for t in 0..txs {
            let abort = aborts.chance(0.2);
            let batch = w.draw_batch(&mut ops.clone());
            w.run_tx(&mut pm, &mut ops, abort);
            if !abort {
                for r in batch {
                    model.insert(r.key.to_vec(), r.value.to_vec());
                }
            }
            let got = dump(&w, &pm.mem);
            assert!(got == model, "seed {seed} mode {mode:?}: table differs after tx {t} (abort {abort})");
            w.verify(&pm.mem).unwrap_or_else(|e| panic!("seed {seed} mode {mode:?} tx {t}: {e}"));
        }
    }

    #[test]
    fn overwrites_match_a_btreemap_model_after_every_transaction_with_aborts() {
        model_run(SqliteMode::Overwrite, 11, 60);
    }

    #[test]
    fn sequential_fills_match_a_btreemap_model_after_every_transaction_with_aborts() {
        model_run(SqliteMode::Fillseq, 12, 40);
    }

    #[test]
    fn random_fills_match_a_btreemap_model_after_every_transaction_with_aborts() {
        model_run(SqliteMode::Fillrandom, 13, 40);
    }

    #[test]
    fn the_same_seed_writes_the_same_bytes() {
        let cfg = small(SqliteMode::Overwrite);
        let run = || {
            let (mut w, mem) = populated(&cfg);
            let mut pm = Native::new(mem);
            let mut rng = Rng::new(5);
            for t in 0..10 {
                w.run_tx(&mut pm, &mut rng, t % 4 == 1);
            }
            pm.mem
        };
        assert!(run() == run());
    }

    #[test]
    fn verifier_rejects_a_page_overwritten_with_garbage() {
        let (w, mut mem) = populated(&small(SqliteMode::Overwrite));
        w.verify(&mem).unwrap();
        let size = Region { base: 0, capacity_bytes: 0 }.recorded_size(&mem).unwrap();
        let page = (size / 1024) / 2; // a page in the middle of the file
        let at = (bridge::HEADER_BYTES + page * 1024) as usize;
        let mut rng = Rng::new(99);
        for b in &mut mem[at..at + 1024] {
            *b = rng.next_u64() as u8;
        }
        let e = w.verify(&mem).unwrap_err();
        assert!(e.starts_with("sqlite: "), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn verifier_rejects_a_bad_size_header_and_a_broken_file_header() {
        let (w, mem) = populated(&small(SqliteMode::Overwrite));
        let mut bad = mem.clone();
        bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(w.verify(&bad).unwrap_err().contains("file size header"));
        let mut bad = mem.clone();
        bad[64..80].fill(b'x'); // "SQLite format 3\0" gone
        let e = w.verify(&bad).unwrap_err();
        assert!(e.contains("not a database"), "{e}");
        assert!(w.verify(&mem[..100]).is_err(), "a short area is an error, not a panic");
    }

    #[test]
    fn verifier_rejects_a_table_with_a_lost_row() {
        let (w, mem) = populated(&small(SqliteMode::Overwrite));
        // Delete one row through SQLite itself: a consistent database, one row short.
        let mut pm = Native::new(mem);
        with_pm(&mut pm, || {
            let c = bridge::open(w.region(), false).unwrap();
            c.execute_batch("PRAGMA journal_mode=OFF; DELETE FROM test WHERE rowid = 7;").unwrap();
        });
        let e = w.verify(&pm.mem).unwrap_err();
        assert!(e.contains("299 rows"), "{e}");
    }

    #[test]
    fn config_errors_name_the_key_and_the_allowed_range() {
        let mut c = SqliteConfig::default();
        c.validate().unwrap();
        c.page_size_bytes = 1000;
        assert!(c.validate().unwrap_err().starts_with("workload.sqlite.page_size_bytes = 1000: allowed"));
        let c = SqliteConfig { file_capacity_bytes: 1 << 20, ..Default::default() };
        assert!(c.validate().unwrap_err().starts_with("workload.sqlite.file_capacity_bytes"));
        let t = toml::to_string(&SqliteConfig::default()).unwrap();
        assert!(t.contains("mode = \"overwrite\""), "{t}");
        assert!(toml::from_str::<SqliteConfig>(&format!("{t}\nnope = 1")).is_err());
    }
}
