//! Real SQLite clients on the pcmjournal extension (docs/your-sqlite-app.md): locsim's own
//! SQLite, the stock `sqlite3` shell and a C program linked with the system libsqlite3 load the
//! library cargo built next to this test, run examples/sql/notes.sql, and their figures are
//! compared with `locsim journal --sql` on the same script; a client killed mid-transaction
//! leaves a database that SQLite reopens consistently with the journal recovered from the PCM
//! image, and an injected journal bug is caught on the same path.
//!
//! The shell is Debian's `sqlite3`, the C client links `libsqlite3-dev`'s library: the tests
//! that use them install them when missing (`testenv::require_packages`) or, where they cannot,
//! are reported ignored with the reason (failed in CI). Their own harness (crates/testenv).

use locsim::journal::replay::{self, OnError};
use locsim::journal::sql_trace::Op;
use locsim::journal::{script, Device, JournalResult, Policy, DEFAULT_FRAMES};
use rusqlite::{ffi, Connection, OpenFlags};
use serde_json::Value;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sql/notes.sql");

/// The extension cargo built with this test (the library's cdylib, next to the test binary).
fn extension() -> PathBuf {
    let deps = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let so = deps.join("libpcmjournal.so");
    assert!(so.exists(), "{} missing: cargo builds it with this test (crate-type cdylib)", so.display());
    so
}

/// The extension's path without `.so`, as `.load` takes it.
fn extension_stem() -> String {
    extension().with_extension("").to_str().unwrap().to_string()
}

fn fresh_dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("pcmjournal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn uri(config: &str, extra: &str) -> String {
    format!("file:app.db?vfs=pcmjournal&pcm_config={config}{extra}")
}

/// `locsim journal --sql SCRIPT --config CONFIG` (seed 1, 32 frames, default devices), through
/// the library function the command runs.
fn locsim_sql(config: &str) -> JournalResult {
    let tr = std::sync::Arc::new(script::parse(&std::fs::read_to_string(SCRIPT).unwrap()).unwrap());
    let p = Policy::parse(config).unwrap();
    locsim::journal::measure(("sql", SCRIPT), &tr, &p, 1, DEFAULT_FRAMES, &Device::default(), OnError::Stop).unwrap()
}

/// The Debian packages `pkgs`, unless what they bring is already here (the `sqlite3` shell on
/// `PATH`, the header of libsqlite3-dev), e.g. on another distribution.
fn sqlite(pkgs: &[&str]) -> testenv::Outcome {
    let shell = || Command::new("sqlite3").arg("--version").output().is_ok_and(|o| o.status.success());
    let header = || Path::new("/usr/include/sqlite3.h").exists();
    let here = pkgs.iter().all(|p| match *p {
        "sqlite3" => shell(),
        "libsqlite3-dev" => header(),
        _ => false,
    });
    if here {
        Ok(())
    } else {
        testenv::require_packages(pkgs)
    }
}

/// The stats JSON of the stock shell after running `sql_lines` (the last line it prints).
fn shell(dir: &Path, commands: &str) -> (bool, String, String) {
    let mut child = Command::new("sqlite3")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sqlite3 shell runs");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(commands.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stats_line(out: &str) -> Value {
    let line = out.lines().rev().find(|l| l.contains("\"journal_records\"")).expect("a stats line");
    serde_json::from_str(line.trim_start_matches("stats ")).unwrap()
}

/// The C client, compiled with the system C compiler against the system libsqlite3.
fn c_client(dir: &Path) -> PathBuf {
    let exe = dir.join("pcm_client");
    let out = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-Wall", "-Werror"])
        .arg(Path::new(ROOT).join("examples/c/pcm_sqlite_client.c"))
        .args(["-lsqlite3", "-o"])
        .arg(&exe)
        .output()
        .expect("cc runs");
    assert!(out.status.success(), "cc (package libsqlite3-dev): {}", String::from_utf8_lossy(&out.stderr));
    exe
}

const COUNTS: [&str; 4] = ["page_writes", "db_page_writes", "journal_records", "journals"];

fn count(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn locsim_count(r: &JournalResult, k: &str) -> u64 {
    match k {
        "page_writes" => r.page_writes,
        "db_page_writes" => r.db_page_writes,
        "journal_records" => r.journal_records,
        "journals" => r.allocator.journals,
        _ => unreachable!(),
    }
}

/// Load the extension into locsim's own (bundled) SQLite and run the script on `dir/app.db`.
fn run_in_bundled_sqlite(dir: &Path, config: &str) -> Value {
    let _g = replay::lock(); // the bundled SQLite's generator is process-wide: one seeder at a time
    let scratch = Connection::open_in_memory().unwrap();
    let path = CString::new(extension().to_str().unwrap()).unwrap();
    // SAFETY: documented C API calls on a live connection; the error string is SQLite's.
    unsafe {
        let mut err = std::ptr::null_mut();
        assert_eq!(ffi::sqlite3_enable_load_extension(scratch.handle(), 1), ffi::SQLITE_OK);
        let rc = ffi::sqlite3_load_extension(scratch.handle(), path.as_ptr(), std::ptr::null(), &mut err);
        assert_eq!(rc, ffi::SQLITE_OK, "load: {:?}", (!err.is_null()).then(|| std::ffi::CStr::from_ptr(err)));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_URI;
    let db = dir.join("app.db");
    let c = Connection::open_with_flags(format!("file:{}?vfs=pcmjournal&pcm_config={config}", db.display()), flags)
        .unwrap();
    c.execute_batch(&std::fs::read_to_string(SCRIPT).unwrap()).unwrap();
    let s: String = c.query_row("SELECT pcm_journal_stats()", [], |r| r.get(0)).unwrap();
    serde_json::from_str(&s).unwrap()
}

fn in_locsims_own_sqlite_the_extension_gives_exactly_the_figures_of_locsim_journal_sql() {
    for config in ["RR-S2X", "RU20-S2X-WH64"] {
        let dir = fresh_dir(&format!("bundled-{config}"));
        let ext = run_in_bundled_sqlite(&dir, config);
        let want = locsim_sql(config);
        println!("{config}: extension {ext}");
        assert_eq!(ext["config"], config);
        assert_eq!(ext["sqlite_version"], rusqlite::version(), "the host is locsim's own SQLite");
        for k in COUNTS {
            assert_eq!(count(&ext, k), locsim_count(&want, k), "{config} {k}");
        }
        assert_eq!(count(&ext, "total_bit_updates"), want.total_bit_updates, "{config}");
        assert_eq!(count(&ext, "max_bit_updates"), want.max_bit_updates, "{config}");
        assert_eq!(count(&ext, "manager_max_bit_updates"), want.manager_max_bit_updates, "{config}");
        assert_eq!(count(&ext, "pcm_block_writes"), want.pcm_block_writes, "{config}");
        assert_eq!(count(&ext, "journal_pcm_ns"), want.journal_pcm_ns, "{config}");
        let e = ext["journal_energy_nj"].as_f64().unwrap();
        assert!((e - want.journal_energy_nj).abs() <= 1e-9 * e, "{config}: {e} vs {}", want.journal_energy_nj);
        assert_eq!(ext["error"], Value::Null);
        assert!(want.total_bit_updates > 1_000_000, "a real workload: {}", want.total_bit_updates);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The stock shell and the C client run the system SQLite (Debian: 3.40), locsim its bundled
/// one (3.46). Both write the same pages: the same rows, the same b-tree, so the journal holds
/// the same records and the counts agree exactly. The page images differ only in bytes SQLite
/// does not read as data: page 1's bytes 96..100 (the version number of the library that last
/// wrote the file) and stale bytes in the free space of pages (the gap between the cell
/// pointers and the cell content, and freeblocks), which the two versions' b-tree code leaves
/// differently. Both are checked below on the final files; the bit updates and block writes
/// those bytes cause differ by well under 0.2 % (on examples/sql/notes.sql: 1 784 of 9.7
/// million bits, 4 of 70 020 blocks). With the same version everything agrees exactly (the
/// test above).
fn the_stock_sqlite3_shell_and_a_c_client_agree_with_locsim_journal_sql() -> testenv::Outcome {
    sqlite(&["sqlite3", "libsqlite3-dev"])?;
    let bundled_dir = fresh_dir("reference-RR-S2X");
    run_in_bundled_sqlite(&bundled_dir, "RR-S2X");
    let reference = std::fs::read(bundled_dir.join("app.db")).unwrap();
    let want = locsim_sql("RR-S2X");

    let dir = fresh_dir("shell");
    let cmds = format!(
        ".load {}\n.open '{}'\n.read {SCRIPT}\n.print\nSELECT pcm_journal_stats();\n",
        extension_stem(),
        uri("RR-S2X", "")
    );
    let (ok, out, err) = shell(&dir, &cmds);
    assert!(ok && err.is_empty(), "{err}");
    let from_shell = stats_line(&out);

    let cdir = fresh_dir("c-client");
    let exe = c_client(&cdir);
    let out =
        Command::new(&exe).current_dir(&cdir).arg(extension()).arg(uri("RR-S2X", "")).arg(SCRIPT).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let from_c = stats_line(&String::from_utf8_lossy(&out.stdout));

    for (who, got, d) in [("shell", &from_shell, &dir), ("C client", &from_c, &cdir)] {
        println!("{who}: {got}");
        let version = got["sqlite_version"].as_str().unwrap();
        for k in COUNTS {
            assert_eq!(count(got, k), locsim_count(&want, k), "{who} {k}");
        }
        let file = std::fs::read(d.join("app.db")).unwrap();
        assert_eq!(file.len(), reference.len(), "{who}");
        let differ: Vec<usize> = (0..file.len()).filter(|&i| file[i] != reference[i]).collect();
        let (bits, blocks) = (count(got, "total_bit_updates"), count(got, "pcm_block_writes"));
        if version == rusqlite::version() {
            assert!(differ.is_empty(), "{who}: same SQLite, same file");
            assert_eq!((bits, blocks), (want.total_bit_updates, want.pcm_block_writes), "{who}");
        } else {
            let unread = |i: &usize| {
                let (pg, off) = (i / 1024, i % 1024);
                (pg == 0 && (96..100).contains(&off))
                    || [&file, &reference].iter().all(|f| free_space(f, pg).iter().any(|r| r.contains(&off)))
            };
            let read: Vec<&usize> = differ.iter().filter(|i| !unread(i)).collect();
            assert!(read.is_empty(), "{who} ({version}): bytes SQLite reads differ: {read:?}");
            let close = |a: u64, b: u64| a.abs_diff(b) * 500 <= b;
            assert!(close(bits, want.total_bit_updates), "{who}: {bits} vs {}", want.total_bit_updates);
            assert!(close(blocks, want.pcm_block_writes), "{who}: {blocks} vs {}", want.pcm_block_writes);
        }
        let digest =
            |p: &Path| replay::digest(&Connection::open_with_flags(p, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap());
        assert_eq!(digest(&d.join("app.db")), digest(&bundled_dir.join("app.db")), "{who}: the same rows");
    }
    assert_eq!(from_shell["total_bit_updates"], from_c["total_bit_updates"], "same SQLite, same figures");
    for d in [bundled_dir, dir, cdir] {
        let _ = std::fs::remove_dir_all(d);
    }
    Ok(())
}

/// Byte ranges of b-tree page `pg` (0-based, 1 KiB pages) that hold no data: the gap between
/// the cell pointer array and the cell content area, and the freeblocks.
fn free_space(file: &[u8], pg: usize) -> Vec<std::ops::Range<usize>> {
    let page = &file[pg * 1024..(pg + 1) * 1024];
    let h = if pg == 0 { 100 } else { 0 };
    let be16 = |o: usize| u16::from_be_bytes([page[o], page[o + 1]]) as usize;
    let header = match page[h] {
        2 | 5 => 12,
        10 | 13 => 8,
        _ => return Vec::new(),
    };
    let content = match be16(h + 5) {
        0 => 65536,
        c => c,
    };
    let gap = h + header + 2 * be16(h + 3)..content;
    let mut out = Vec::new();
    out.push(gap);
    let mut fb = be16(h + 1);
    while fb != 0 && fb + 4 <= 1024 && out.len() < 1024 {
        out.push(fb..fb + be16(fb + 2));
        fb = be16(fb);
    }
    out
}

/// Content digests of the database after the statements `..n` of the script, run by locsim's
/// SQLite on a plain file (no journal model): the oracle of the crash test.
fn digest_after(dir: &Path, statements: &[&str], n: usize) -> u64 {
    let _ = dir;
    let c = Connection::open_in_memory().unwrap();
    c.execute_batch("PRAGMA foreign_keys=OFF").unwrap();
    for s in &statements[..n] {
        c.execute_batch(s).unwrap();
    }
    replay::digest(&c).unwrap()
}

/// The script's statements in order, and for each the range of statements of its transaction.
fn transactions() -> (Vec<String>, Vec<(usize, usize)>) {
    let tr = script::parse(&std::fs::read_to_string(SCRIPT).unwrap()).unwrap();
    let (mut sql, mut tx, mut start) = (Vec::new(), Vec::new(), None);
    for op in &tr.ops {
        let (s, begins, ends) = match op {
            Op::Use(_) => continue,
            Op::Begin => ("BEGIN".to_string(), true, false),
            Op::Commit => ("COMMIT".to_string(), false, true),
            Op::Rollback => ("ROLLBACK".to_string(), false, true),
            Op::Sql(s) => (s.clone(), false, start.is_none()),
        };
        let i = sql.len();
        sql.push(s);
        if begins {
            start = Some(i);
        }
        if ends {
            let b = start.take().unwrap_or(i);
            tx.extend((b..=i).map(|_| (b, i + 1)));
        }
    }
    (sql, tx)
}

/// Kill the C client at its `kill_at`-th database write, reopen with the stock shell, and
/// check: Err describes what is wrong.
fn kill_and_recover(dir: &Path, exe: &Path, config: &str, kill_at: u64, bug: &str) -> Result<u64, String> {
    for f in ["app.db", "app.db-pcm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let extra = format!("&pcm_kill_at={kill_at}{bug}");
    let out =
        Command::new(exe).current_dir(dir).arg(extension()).arg(uri(config, &extra)).arg(SCRIPT).output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(9), "killed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let at: usize = stdout.lines().last().unwrap().trim_start_matches("statement ").parse().unwrap();
    // Recovery: the stock shell opens the database on the extension; SQLite finds the hot
    // journal in the PCM image and rolls it back.
    let cmds = format!(
        ".load {}\n.open '{}'\nPRAGMA integrity_check;\nSELECT pcm_journal_stats();\n",
        extension_stem(),
        uri(config, "")
    );
    let (ok, out, err) = shell(dir, &cmds);
    if !ok || !err.is_empty() {
        return Err(format!("reopen failed: {}", err.trim()));
    }
    if out.lines().next() != Some("ok") {
        return Err(format!("integrity_check: {}", out.lines().next().unwrap_or("")));
    }
    let stats = stats_line(&out);
    if stats["recovered_hot_journal"] != true {
        return Err("no hot journal found in the PCM image".into());
    }
    let (sql, tx) = transactions();
    let (b, e) = tx[at - 1];
    let sql: Vec<&str> = sql.iter().map(String::as_str).collect();
    let c = Connection::open_with_flags(dir.join("app.db"), OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let got = replay::digest(&c).map_err(|e| format!("digest: {e}"))?;
    let (before, after) = (digest_after(dir, &sql, b), digest_after(dir, &sql, e));
    if got != before && got != after {
        return Err(format!(
            "killed in statement {at}: content is neither before ({b}) nor after ({e}) its transaction"
        ));
    }
    Ok(at as u64)
}

fn a_client_killed_mid_transaction_recovers_from_the_pcm_image_and_an_injected_bug_is_caught() -> testenv::Outcome {
    sqlite(&["libsqlite3-dev"])?;
    let dir = fresh_dir("kill");
    let exe = c_client(&dir);
    for kill_at in [301, 1202] {
        let at = kill_and_recover(&dir, &exe, "RU20-S2X-WH64", kill_at, "");
        println!("kill at database write {kill_at}: {at:?}");
        assert!(at.is_ok(), "{at:?}");
    }
    let caught = kill_and_recover(&dir, &exe, "RU20-S2X-WH64", 1202, "&pcm_bug=reuse-live-portion");
    println!("with bug reuse-live-portion: {caught:?}");
    assert!(caught.is_err(), "the injected bug went unnoticed");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn the_library_exports_only_its_entry_point() {
    let out = Command::new("nm").args(["-D", "--defined-only"]).arg(extension()).output().expect("nm (binutils) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let sqlite: Vec<&str> = text.lines().filter(|l| l.contains(" sqlite3")).collect();
    assert_eq!(sqlite.len(), 1, "{sqlite:?}");
    assert!(sqlite[0].ends_with(" T sqlite3_pcmjournal_init"), "{sqlite:?}");
}

/// The example block of docs/your-sqlite-app.md, run as written but for the paths: the
/// artifacts of this build instead of target/release, the repository's examples from a fresh
/// directory. The `locsim` binary is the one `cargo test --workspace` builds next to this test.
fn the_copy_paste_example_of_the_docs_runs() -> testenv::Outcome {
    sqlite(&["sqlite3"])?;
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/your-sqlite-app.md")).unwrap();
    let after = doc.split("## Example").nth(1).expect("an Example section");
    let block = after.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    let profile_dir = extension().parent().unwrap().parent().unwrap().to_path_buf();
    let locsim = profile_dir.join("locsim");
    assert!(locsim.exists(), "{} missing: run the workspace's tests (cargo test --workspace)", locsim.display());
    let examples = format!("{}/examples/", Path::new(ROOT).canonicalize().unwrap().display());
    let script: Vec<String> = block
        .lines()
        .filter(|l| !l.starts_with("cargo build"))
        .map(|l| {
            l.replace("target/release/libpcmjournal", &extension_stem())
                .replace("target/release/locsim", locsim.to_str().unwrap())
                .replace("examples/", &examples)
        })
        .collect();
    assert!(script.iter().any(|l| l.starts_with(".load ")), "{script:?}");
    let dir = fresh_dir("docs-example");
    let out = Command::new("bash").args(["-e", "-c", &script.join("\n")]).current_dir(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let from_locsim: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("locsim.json")).unwrap()).unwrap();
    let from_ext: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("extension.json")).unwrap()).unwrap();
    let want = &from_locsim[1];
    assert_eq!((&want["config"], &from_ext["config"]), (&Value::from("RU20-S2X-WH64"), &Value::from("RU20-S2X-WH64")));
    for k in ["page_writes", "journal_records"] {
        assert_eq!(from_ext[k], want[k], "{k}");
    }
    let (a, b) = (count(&from_ext, "total_bit_updates"), count(want, "total_bit_updates"));
    assert!(a.abs_diff(b) * 500 <= b, "{a} vs {b}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn uri_parameters_are_checked_and_name_what_is_allowed() {
    let from = |kv: &'static [(&'static str, &'static str)]| {
        move |k: &str| kv.iter().find(|(x, _)| *x == k).map(|(_, v)| v.to_string())
    };
    let p = pcmjournal::params(from(&[])).unwrap();
    assert_eq!(
        (p.policy.name.as_str(), p.frames, p.seed, p.bug, p.kill_at),
        (pcmjournal::DEFAULT_CONFIG, 32, 1, None, None)
    );
    let p =
        pcmjournal::params(from(&[("pcm_config", "RR-S2X"), ("pcm_frames", "8"), ("pcm_bug", "reuse-live-portion")]))
            .unwrap();
    assert_eq!(
        (p.policy.name.as_str(), p.frames, p.bug),
        ("RR-S2X", 8, Some(locsim::journal::vfs::Bug::ReuseLivePortion))
    );
    for (kv, want) in [
        (&[("pcm_config", "RU-S3")][..], "pcm_config: "),
        (&[("pcm_frames", "2")][..], "pcm_frames=2: allowed 3..=64"),
        (&[("pcm_seed", "x")][..], "pcm_seed=x: allowed"),
        (&[("pcm_bug", "nope")][..], "pcm_bug nope: unknown; allowed: hot-clear-before-db-sync"),
    ] {
        let kv: &'static [(&str, &str)] = Box::leak(kv.to_vec().into_boxed_slice());
        let e = pcmjournal::params(from(kv)).unwrap_err();
        assert!(e.contains(want), "{e}");
    }
}

fn the_image_header_round_trips_and_a_wrong_file_is_refused() {
    let mut img = pcmjournal::image_header(3, "RU20-S2X-WH64").to_vec();
    img.extend(vec![7u8; 3 * locsim::journal::format::FRAME_BYTES as usize]);
    let (frames, cfg, pcm) = pcmjournal::parse_image(&img).unwrap();
    assert_eq!(
        (frames, cfg.as_str(), pcm.len()),
        (3, "RU20-S2X-WH64", 3 * locsim::journal::format::FRAME_BYTES as usize)
    );
    assert!(pcmjournal::parse_image(&img[..100]).unwrap_err().contains("3 frames need"));
    assert!(pcmjournal::parse_image(b"SQLite format 3\0").unwrap_err().contains("magic"));
}

testenv::tests![
    in_locsims_own_sqlite_the_extension_gives_exactly_the_figures_of_locsim_journal_sql,
    the_stock_sqlite3_shell_and_a_c_client_agree_with_locsim_journal_sql,
    a_client_killed_mid_transaction_recovers_from_the_pcm_image_and_an_injected_bug_is_caught,
    the_library_exports_only_its_entry_point,
    the_copy_paste_example_of_the_docs_runs,
    uri_parameters_are_checked_and_name_what_is_allowed,
    the_image_header_round_trips_and_a_wrong_file_is_refused,
];
