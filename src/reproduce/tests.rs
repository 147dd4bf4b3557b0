//! Specs, claims, tables and plots with hand-computed values; the whole pipeline on tiny specs:
//! identical CSVs across `--jobs` values, with the cache, and after sharding and merging.

use super::claim::Claim;
use super::grid::Grid;
use super::point::Point;
use super::spec;
use super::table::Table;
use super::*;
use crate::testdir::TempDir;

/// The test specs (also used by `tests/reproduce.rs`).
pub const TINY_BAR: &str = include_str!("../../tests/data/reproduce/tiny-bar.toml");

pub const TINY_LINE: &str = include_str!("../../tests/data/reproduce/tiny-line.toml");

fn tmp_dir(tag: &str) -> TempDir {
    TempDir::new(&format!("reproduce-{tag}"))
}

fn tiny_experiments(tag: &str) -> TempDir {
    let d = tmp_dir(tag);
    std::fs::write(d.join("tiny-bar.toml"), TINY_BAR).expect("write");
    std::fs::write(d.join("tiny-line.toml"), TINY_LINE).expect("write");
    d
}

fn opts(experiments: &Path, out: &Path, jobs: usize, shard: Option<(usize, usize)>) -> Options {
    Options {
        experiments: experiments.into(),
        out: out.into(),
        quick: true,
        only: vec![],
        jobs,
        shard,
        bench: false,
        quiet: true,
        timings: None,
        workers: None,
    }
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display()))
}

#[test]
fn unknown_top_level_key_is_a_one_line_error_naming_it() {
    let text = TINY_BAR.replace("average = true", "average = true\ncolour = \"red\"");
    let e = spec::parse("t", &text, true).unwrap_err();
    assert!(e.contains("colour") && e.starts_with("experiment t:"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn unknown_protocol_is_an_error_listing_the_allowed_names() {
    let text = TINY_BAR.replace("\"ec-wal\"]", "\"ex-wal\"]");
    let e = spec::parse("t", &text, true).unwrap_err();
    assert!(e.contains("unknown protocol `ex-wal`") && e.contains("h-wal") && e.contains("loc-wal"), "{e}");
    assert_eq!(e.lines().count(), 1);
}

#[test]
fn unknown_workload_axis_and_config_key_are_errors() {
    let e = spec::parse("t", &TINY_BAR.replace("[\"sps\"]", "[\"spx\"]"), true).unwrap_err();
    assert!(e.contains("unknown workload `spx`") && e.contains("btree"), "{e}");
    let e = spec::parse("t", &TINY_LINE.replace("workload = [\"sps\"]", "colour = [\"sps\"]"), true).unwrap_err();
    assert!(e.contains("unknown axis `colour`"), "{e}");
    let e = spec::parse("t", &TINY_BAR.replace("\"log.size_bytes\"", "\"log.sise_bytes\""), true).unwrap_err();
    assert!(e.contains("log.sise_bytes") && e.contains("size_bytes"), "{e}");
    let e = spec::parse("t", &TINY_BAR.replace("kind = \"bound\"", "kind = \"bigger\""), true).unwrap_err();
    assert!(e.contains("claim kind `bigger`"), "{e}");
    let e = spec::parse("t", &TINY_BAR.replace("value = 1.0", "value = 1.0\nseries = [\"h-wall\"]"), true).unwrap_err();
    assert!(e.contains("claim `logging is slower than no logging`: unknown protocol `h-wall`"), "{e}");
}

#[test]
fn every_shipped_spec_parses_in_both_modes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
    for quick in [true, false] {
        let specs = spec::load_dir(&dir, &[], quick).unwrap();
        assert!(specs.len() >= 18, "{} specs", specs.len());
        assert!(specs.iter().all(|s| s.pending.is_none()), "every shipped spec runs in this build");
        for s in &specs {
            assert!(!s.claims.is_empty(), "{} states no claim", s.name);
        }
    }
}

#[test]
fn quick_mode_takes_its_run_lengths_and_axis_overrides() {
    let text = TINY_BAR.replace("seeds = [1, 2]", "seeds = [1, 2]\naxes = { protocol = [\"h-wal\"] }");
    let q = spec::parse("t", &text, true).unwrap();
    assert_eq!(
        (q.run.txs, q.run.seeds.clone(), q.axes["protocol"].clone()),
        (60, vec![1, 2], vec!["h-wal".to_string()])
    );
    let f = spec::parse("t", &text, false).unwrap();
    assert_eq!((f.run.txs, f.axes["protocol"].len()), (100, 2));
}

#[test]
fn points_are_the_product_of_the_axes_times_seeds_plus_reference_points() {
    let s = spec::parse("t", TINY_BAR, true).unwrap();
    let pts = s.points();
    assert_eq!(pts.len(), 4); // 1 workload x 2 protocols x 2 seeds
    let all = s.all_points();
    assert_eq!(all.len(), 6); // + baseline for each seed
    assert_eq!(all[4].get("protocol"), Some("baseline"));
    assert_eq!(all[4].seed, 1);
}

fn pt(protocol: &str, workload: &str, seed: u64) -> Point {
    Point { coords: vec![("protocol".into(), protocol.into()), ("workload".into(), workload.into())], seed }
}

#[test]
fn derived_metric_divides_by_the_reference_point_and_grid_averages_seeds() {
    let s = spec::parse("t", TINY_BAR, true).unwrap();
    let n = s.kind.executor().metrics().len();
    // throughput (column 0) per protocol and seed, by hand.
    let thr = |p: &Point| match (p.get("protocol").unwrap(), p.seed) {
        ("baseline", 1) => 200.0,
        ("baseline", 2) => 100.0,
        ("h-wal", 1) => 150.0,
        ("h-wal", 2) => 50.0,
        ("ec-wal", _) => 80.0,
        _ => unreachable!(),
    };
    let t = Table::build(&s, |p| {
        let mut v = vec![Some(1.0); n];
        v[0] = Some(thr(p));
        Some(v)
    })
    .unwrap();
    let norm = n; // the derived column comes after the kind's
    let row = |p: &Point| t.rows.iter().find(|(q, _)| q == p).unwrap().1[norm];
    assert_eq!(row(&pt("h-wal", "sps", 1)), Some(0.75));
    assert_eq!(row(&pt("h-wal", "sps", 2)), Some(0.5));
    assert_eq!(row(&pt("ec-wal", "sps", 2)), Some(0.8));
    assert_eq!(row(&pt("baseline", "sps", 1)), Some(1.0));
    let g = t.grid(&s, "normalized_throughput");
    assert_eq!(g.series, vec!["h-wal", "ec-wal"]); // the baseline is a reference, not shown
    assert_eq!(g.get("sps", "h-wal"), Some(0.625));
    assert_eq!(g.get("sps", "ec-wal"), Some((0.4 + 0.8) / 2.0));
    let csv = t.csv(&s);
    assert!(csv.starts_with("workload,protocol,seed,throughput_tx_per_mcycle,"), "{csv}");
    assert!(csv.lines().nth(1).unwrap().starts_with("sps,h-wal,1,150,"), "{csv}");
    assert!(csv.lines().nth(1).unwrap().ends_with(",0.75"), "{csv}");
}

fn grid(xs: &[&str], series: &[&str], cells: Vec<Vec<Option<f64>>>) -> Grid {
    Grid {
        xs: xs.iter().map(|s| s.to_string()).collect(),
        series: series.iter().map(|s| s.to_string()).collect(),
        cells,
    }
}

/// The claim described by `toml_text`, parsed as part of the tiny spec.
fn claim(toml_text: &str) -> Claim {
    let (head, tail) = TINY_BAR.split_once("[quick]").unwrap();
    let spec_text = format!("{head}\n[[claim]]\ntext = \"c\"\n{toml_text}\n[quick]{tail}");
    spec::parse("t", &spec_text, true).unwrap().claims.pop().unwrap()
}

#[test]
fn order_claim_compares_series_per_x_and_on_average() {
    let g = grid(&["a", "b"], &["h-wal", "ec-wal"], vec![vec![Some(0.5), Some(0.9)], vec![Some(0.6), Some(0.7)]]);
    let every =
        claim("kind = \"order\"\nmetric = \"normalized_throughput\"\na = \"ec-wal\"\nb = \"h-wal\"\nrelation = \">=\"");
    let v = every.evaluate(&g);
    assert_eq!(v.supported, Some(false));
    assert!(v.detail.contains("1/2 hold") && v.detail.contains("fails at b: 0.7000 >= 0.9000"), "{}", v.detail);
    let avg = claim("kind = \"order\"\nmetric = \"normalized_throughput\"\na = \"ec-wal\"\nb = \"h-wal\"\nrelation = \"<=\"\nscope = \"average\"");
    // averages: h-wal 0.7, ec-wal 0.65
    assert_eq!(avg.evaluate(&g).supported, Some(true));
    let tol = claim("kind = \"order\"\nmetric = \"normalized_throughput\"\na = \"ec-wal\"\nb = \"h-wal\"\nrelation = \">=\"\ntolerance = 0.25");
    assert_eq!(tol.evaluate(&g).supported, Some(true), "0.7 >= 0.9 * 0.75");
}

#[test]
fn a_claim_leaves_out_the_exceptions_the_paper_names_and_says_so() {
    let g = grid(&["a", "b"], &["h-wal", "ec-wal"], vec![vec![Some(0.5), Some(0.9)], vec![Some(0.6), Some(0.7)]]);
    let c = claim("kind = \"order\"\nmetric = \"normalized_throughput\"\na = \"ec-wal\"\nb = \"h-wal\"\nrelation = \">=\"\nexcept = [\"b\"]");
    let v = c.evaluate(&g);
    assert_eq!(v.supported, Some(true), "{}", v.detail);
    assert!(v.detail.contains("1/1 hold") && v.detail.contains("excepted as in the paper: b"), "{}", v.detail);
    let mono = claim(
        "kind = \"monotonic\"\nmetric = \"normalized_throughput\"\ndirection = \"increasing\"\nexcept = [\"ec-wal\"]",
    );
    let g = grid(&["a", "b"], &["h-wal", "ec-wal"], vec![vec![Some(0.5), Some(0.9)], vec![Some(0.8), Some(0.7)]]);
    assert_eq!(mono.evaluate(&g).supported, Some(true));
    let all = claim("kind = \"monotonic\"\nmetric = \"normalized_throughput\"\ndirection = \"increasing\"");
    assert_eq!(all.evaluate(&g).supported, Some(false), "without the exception the reversed series fails");
}

#[test]
fn order_claim_along_x_compares_x_values_per_series() {
    let g = grid(&["sps", "btree"], &["baseline"], vec![vec![Some(2.0), Some(90.0)]]);
    let c = claim("kind = \"order\"\nalong = \"x\"\nmetric = \"pset_blocks_per_tx\"\na = \"sps\"\nb = \"btree\"\nrelation = \"<\"");
    assert_eq!(c.evaluate(&g).supported, Some(true));
    // The negative control: the same checker on swapped data says no.
    let swapped = grid(&["sps", "btree"], &["baseline"], vec![vec![Some(90.0), Some(2.0)]]);
    assert_eq!(c.evaluate(&swapped).supported, Some(false));
}

#[test]
fn monotonic_bound_and_ratio_claims_catch_a_single_reversed_step() {
    let rising = grid(
        &["35", "168", "1000"],
        &["h-wal", "ec-wal"],
        vec![vec![Some(1.0), Some(2.0), Some(3.0)], vec![Some(1.0), Some(3.0), Some(6.0)]],
    );
    let mono = claim("kind = \"monotonic\"\nmetric = \"write_traffic\"\ndirection = \"increasing\"");
    assert_eq!(mono.evaluate(&rising).supported, Some(true));
    let mut bent = rising.clone();
    bent.cells[1][2] = Some(2.9);
    let v = mono.evaluate(&bent);
    assert_eq!(v.supported, Some(false));
    assert!(v.detail.contains("3/4 hold") && v.detail.contains("ec-wal 168->1000"), "{}", v.detail);
    let ratio = claim(
        "kind = \"ratio_trend\"\nmetric = \"write_traffic\"\na = \"ec-wal\"\nb = \"h-wal\"\ndirection = \"increasing\"",
    );
    assert_eq!(ratio.evaluate(&rising).supported, Some(true)); // 1, 1.5, 2
    assert_eq!(ratio.evaluate(&bent).supported, Some(false)); // 1, 1.5, 0.967
    let bound =
        claim("kind = \"bound\"\nmetric = \"write_traffic\"\nrelation = \"<=\"\nvalue = 3.0\nseries = [\"h-wal\"]");
    assert_eq!(bound.evaluate(&rising).supported, Some(true));
    let bound_all = claim("kind = \"bound\"\nmetric = \"write_traffic\"\nrelation = \"<=\"\nvalue = 3.0");
    assert_eq!(bound_all.evaluate(&rising).supported, Some(false));
    // `scope = "largest"`: only the largest value counts (ec-wal at 1000: 6; once bent, h-wal at 1000: 3).
    let largest =
        claim("kind = \"bound\"\nmetric = \"write_traffic\"\nrelation = \">=\"\nvalue = 5.0\nscope = \"largest\"");
    let v = largest.evaluate(&rising);
    assert_eq!(v.supported, Some(true));
    assert!(v.detail.contains("1/1 hold") && v.detail.contains("ec-wal 1000: 6.000 >= 5.000"), "{}", v.detail);
    assert_eq!(largest.evaluate(&bent).supported, Some(false));
}

#[test]
fn a_claim_about_missing_data_is_not_evaluated() {
    let g = grid(&["a"], &["h-wal", "ec-wal"], vec![vec![Some(0.5)], vec![None]]);
    let c =
        claim("kind = \"order\"\nmetric = \"normalized_throughput\"\na = \"ec-wal\"\nb = \"h-wal\"\nrelation = \">=\"");
    let v = c.evaluate(&g);
    assert_eq!(v.supported, None);
    assert_eq!(v.detail, "not evaluated: no data for ec-wal at a");
}

#[test]
fn nice_ticks_and_one_bar_per_series_and_group() {
    assert_eq!(svg::ticks(0.93), (1.0, 0.2));
    assert_eq!(svg::ticks(9.5), (10.0, 2.0));
    assert_eq!(svg::ticks(0.0), (1.0, 0.25));
    assert_eq!(
        (svg::tick_text(0.8), svg::tick_text(0.6000000000000001), svg::tick_text(300.0)),
        ("0.8".into(), "0.6".into(), "300".into())
    );
    assert_eq!(svg::tick_text(2.5e7), "2.500e7");
    let g = grid(
        &["a", "b", "c"],
        &["x", "y"],
        vec![vec![Some(1.0), Some(2.0), Some(3.0)], vec![Some(1.0), None, Some(1.0)]],
    );
    let panel = svg::Panel { grid: &g, y_label: "thr (tx/Mcycle)".into(), x_label: "work<load>".into(), average: true };
    let s = svg::figure("T", spec::Chart::Bar, &[panel]);
    // 2 series x (3 groups + average), minus the missing one; y's average is missing too.
    assert_eq!(s.matches("class=\"bar\"").count(), 6);
    assert!(s.contains("thr (tx/Mcycle)") && s.contains("work&lt;load&gt;") && s.contains(">average<"));
}

#[test]
fn csvs_are_identical_across_jobs_and_reused_from_the_cache() {
    let exp = tiny_experiments("jobs");
    let (a, b) = (tmp_dir("jobs-a"), tmp_dir("jobs-b"));
    let sa = reproduce(&opts(&exp, &a, 1, None)).unwrap();
    let sb = reproduce(&opts(&exp, &b, 2, None)).unwrap();
    // tiny-bar: 6 points; tiny-line: 6 points.
    assert_eq!((sa.executed, sa.cached, sb.executed), (12, 0, 12));
    for f in ["tiny-bar.csv", "tiny-line.csv", "tiny-bar.json", "tiny-line.svg", "REPORT.md", "report.html"] {
        assert_eq!(read(&a, f), read(&b, f), "{f} differs between --jobs 1 and 2");
    }
    let again = reproduce(&opts(&exp, &a, 2, None)).unwrap();
    assert_eq!((again.executed, again.cached), (0, 12));
    assert_eq!(read(&a, "tiny-bar.csv"), read(&b, "tiny-bar.csv"));
    let report = read(&a, "REPORT.md");
    assert!(report.contains("| tiny-line (test) | slower memory, lower throughput | supported |"), "{report}");
}

#[test]
fn two_shards_merged_write_the_same_files_as_one_run() {
    let exp = tiny_experiments("shard");
    let (whole, s0, s1, merged) = (tmp_dir("shard-whole"), tmp_dir("shard-0"), tmp_dir("shard-1"), tmp_dir("shard-m"));
    reproduce(&opts(&exp, &whole, 2, None)).unwrap();
    let a = reproduce(&opts(&exp, &s0, 1, Some((0, 2)))).unwrap();
    let b = reproduce(&opts(&exp, &s1, 1, Some((1, 2)))).unwrap();
    assert_eq!(a.executed + b.executed, 12);
    assert!(a.executed > 0 && b.executed > 0);
    let err = merge(&[s0.to_path_buf()], &merged).unwrap_err();
    assert_eq!(err, "merge: shard 1 of 2 is missing");
    merge(&[s0.to_path_buf(), s1.to_path_buf()], &merged).unwrap();
    for f in
        ["tiny-bar.csv", "tiny-line.csv", "tiny-bar.json", "tiny-line.json", "tiny-bar.svg", "REPORT.md", "report.html"]
    {
        assert_eq!(read(&whole, f), read(&merged, f), "{f} differs after merging");
    }
}

#[test]
fn a_spec_with_machines_runs_once_per_machine_and_the_report_sets_their_claims_side_by_side() {
    let text = TINY_BAR.replacen("\n[set]", "\nmachines = [\"paper\", \"overlapped\", \"strictest\"]\n[set]", 1);
    let d = tmp_dir("machines");
    std::fs::write(d.join("tiny-bar.toml"), &text).expect("write");
    let specs = spec::load_dir(&d, &[], true).unwrap();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["tiny-bar", "tiny-bar@overlapped", "tiny-bar@strictest"]);
    assert!(specs[0].set.contains(&"ordering.preset=paper".to_string()));
    assert!(specs[1].set.contains(&"ordering.preset=overlapped".to_string()));
    assert!(specs[2].set.contains(&"ordering.preset=strictest".to_string()));
    assert_eq!((specs[1].base.as_str(), specs[1].machine.as_deref()), ("tiny-bar", Some("overlapped")));
    let e = spec::parse("t", &text.replace("\"strictest\"]", "\"fast\"]"), true).unwrap_err();
    assert!(e.contains("unknown machine `fast`") && e.contains("allowed paper, overlapped, strictest"), "{e}");
    let out = tmp_dir("machines-out");
    reproduce(&opts(&d, &out, 2, None)).unwrap();
    let md = read(&out, "REPORT.md");
    let table = md.split("## Claims on each machine").nth(1).expect("the side-by-side section");
    let claims = spec::parse("t", &text, true).unwrap().claims;
    assert!(!claims.is_empty());
    for c in claims {
        let row = table.lines().find(|l| l.contains(&c.text)).unwrap_or_else(|| panic!("{} missing", c.text));
        assert_eq!(row.matches(" | ").count(), 4, "experiment, claim and three machines: {row}");
    }
    assert!(out.join("tiny-bar@overlapped.csv").exists());
    assert!(read(&out, "report.html").contains("Claims on each machine"));
}

/// `dir/shard-1-of-2.json` rewritten by `edit` (on its JSON) into a fresh directory.
fn edited_shard(tag: &str, from: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> TempDir {
    let mut j: serde_json::Value = serde_json::from_str(&read(from, "shard-1-of-2.json")).unwrap();
    edit(&mut j);
    let d = tmp_dir(tag);
    std::fs::write(d.join("shard-1-of-2.json"), j.to_string()).unwrap();
    d
}

#[test]
fn merge_refuses_a_duplicated_truncated_edited_or_foreign_shard_naming_the_file() {
    let exp = tiny_experiments("refuse");
    let (s0, s1, out) = (tmp_dir("refuse-0"), tmp_dir("refuse-1"), tmp_dir("refuse-out"));
    reproduce(&opts(&exp, &s0, 1, Some((0, 2)))).unwrap();
    reproduce(&opts(&exp, &s1, 1, Some((1, 2)))).unwrap();
    let fails = |dirs: &[&Path], needles: &[&str]| {
        let dirs: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
        let e = merge(&dirs, &out).unwrap_err();
        assert!(!e.contains('\n'), "{e}");
        for n in needles {
            assert!(e.contains(n), "`{n}` missing from: {e}");
        }
    };
    fails(&[&s0, &s0], &["shard-0-of-2.json", "shard 0 of 2 given twice"]);
    let text = read(&s1, "shard-1-of-2.json");
    let cut = tmp_dir("refuse-cut");
    std::fs::write(cut.join("shard-1-of-2.json"), &text[..text.len() / 2]).unwrap();
    fails(&[&s0, &cut], &["shard-1-of-2.json", "not a shard file"]);
    let lacks = edited_shard("refuse-lacks", &s1, |j| {
        let points = j["points"].as_object_mut().unwrap();
        let k = points.keys().next().unwrap().clone();
        points.remove(&k);
    });
    fails(&[&s0, &lacks], &["shard 1 of 2 lacks 1 of its 6 points"]);
    let s0_point = {
        let j: serde_json::Value = serde_json::from_str(&read(&s0, "shard-0-of-2.json")).unwrap();
        j["points"].as_object().unwrap().iter().next().map(|(k, v)| (k.clone(), v.clone())).unwrap()
    };
    let stolen = edited_shard("refuse-stolen", &s1, |j| {
        j["points"].as_object_mut().unwrap().insert(s0_point.0, s0_point.1);
    });
    fails(&[&s0, &stolen], &["shard 1 of 2 holds a point not its own"]);
    let foreign = edited_shard("refuse-foreign", &s1, |j| j["specs"].as_array_mut().unwrap().truncate(1));
    fails(&[&s0, &foreign], &["does not match", "another spec set"]);
    let three = edited_shard("refuse-three", &s1, |j| j["shards"] = 3.into());
    fails(&[&s0, &three], &["shard 1 of 3 does not match"]);
    let beyond = edited_shard("refuse-beyond", &s1, |j| j["shard"] = 7.into());
    fails(&[&s0, &beyond], &["shard 7 of 2: allowed 0 <= I < N"]);
    let zero = edited_shard("refuse-zero", &s1, |j| j["shards"] = 0.into());
    fails(&[&zero], &["shard 1 of 0: allowed 0 <= I < N"]);
    merge(&[s0.to_path_buf(), s1.to_path_buf()], &out).expect("the untouched shards merge");
}

#[test]
fn a_cache_entry_with_too_few_values_is_computed_again() {
    let exp = tiny_experiments("short-cache");
    let out = tmp_dir("short-cache-out");
    reproduce(&opts(&exp, &out, 1, None)).unwrap();
    let csv = read(&out, "tiny-bar.csv");
    let entry = std::fs::read_dir(out.join("cache")).unwrap().next().unwrap().unwrap().path();
    let mut j: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&entry).unwrap()).unwrap();
    j["values"].as_array_mut().unwrap().pop();
    std::fs::write(&entry, j.to_string()).unwrap();
    let again = reproduce(&opts(&exp, &out, 1, None)).unwrap();
    assert_eq!((again.executed, again.cached), (1, 11));
    assert_eq!(read(&out, "tiny-bar.csv"), csv);
}

/// The values of `column` in a CSV written by `reproduce`, row by row.
fn csv_column(csv: &str, column: &str) -> Vec<String> {
    let mut lines = csv.lines();
    let at = lines.next().unwrap().split(',').position(|c| c == column).unwrap_or_else(|| panic!("no {column}"));
    lines.map(|l| l.split(',').nth(at).unwrap().to_string()).collect()
}

#[test]
fn points_that_resolve_alike_run_once_give_equal_values_and_show_in_the_timings() {
    let exp = tmp_dir("alike-exp");
    std::fs::write(exp.join("tiny-bar.toml"), TINY_BAR).unwrap();
    // The same runs, with the log size an axis instead of a fixed override: other texts.
    let alike = TINY_BAR.replace("\"log.size_bytes\" = 1048576\n", "").replace(
        "protocol = [\"h-wal\", \"ec-wal\"]",
        "protocol = [\"h-wal\", \"ec-wal\"]\n\"log.size_bytes\" = [1048576]",
    );
    std::fs::write(exp.join("tiny-bar-alike.toml"), alike).unwrap();
    let out = tmp_dir("alike-out");
    let timings = out.join("timings.csv");
    let s = reproduce(&Options { timings: Some(timings.clone()), ..opts(&exp, &out, 2, None) }).unwrap();
    assert_eq!((s.executed, s.shared, s.cached), (6, 6, 0));
    let (a, b) = (read(&out, "tiny-bar.csv"), read(&out, "tiny-bar-alike.csv"));
    for m in ["throughput_tx_per_mcycle", "normalized_throughput", "cycles"] {
        assert_eq!(csv_column(&a, m), csv_column(&b, m), "{m}");
    }
    let t = read(&out, "timings.csv");
    assert_eq!(t.lines().count(), 13, "{t}");
    assert_eq!(csv_column(&t, "source").iter().filter(|s| *s == "shared").count(), 6, "{t}");
    assert_eq!(csv_column(&t, "source").iter().filter(|s| *s == "run").count(), 6, "{t}");
    let again = reproduce(&opts(&exp, &out, 2, None)).unwrap();
    assert_eq!((again.executed, again.shared, again.cached), (0, 0, 12), "shared points are cached too");
}

/// Every point's values, shared or run, are those of its own run alone.
fn each_point_has_its_own_values(specs: &[spec::Spec], results: &BTreeMap<String, Values>, what: &str) {
    for (t, si, p) in distinct_points(specs) {
        let job = Job { point: &p, set: &specs[si].set, txs: specs[si].run.txs, warmup_txs: specs[si].run.warmup_txs };
        assert_eq!(results[&t], specs[si].kind.executor().run(&job).unwrap(), "{what}, {t}");
    }
}

#[test]
fn points_differing_only_in_knobs_a_run_never_read_take_its_values_and_they_are_the_points_own() {
    let text = TINY_BAR
        .replace("x = \"workload\"", "x = \"ordering\"")
        .replace(
            "workload = [\"sps\"]",
            "workload = [\"sps\"]\nordering = [\"overlapped\", \"commit_flush\", \"flush_cost\", \"conflict\", \"paper\"]",
        )
        .replace("protocol = [\"h-wal\", \"ec-wal\"]", "protocol = [\"s-wal\", \"h-wal\", \"kiln\"]");
    let specs = vec![spec::parse("tiny-ablation", &text, true).unwrap()];
    for jobs in [1, 2] {
        let out = tmp_dir(&format!("reads-{jobs}"));
        let mut summary = Summary::default();
        let (results, _) =
            run_points(&opts(&out, &out, jobs, None), &specs, &mut summary, std::time::Instant::now()).unwrap();
        // 5 steps x 3 protocols x 2 seeds, and the baseline's 2 x 5: the baseline reads no knob;
        // every other protocol reads `write_order` as a transaction begins (whether its writes
        // go in program order, docs/ordering.md), so `paper` differs from the steps before it;
        // S-WAL and Kiln read `flush_cost` besides, H-WAL not `flush_cost` while `commit_flush`
        // is `none`.
        assert_eq!(summary.executed + summary.shared, 40, "{jobs} jobs");
        // 10 distinct runs per seed of the 20 points.
        if jobs == 1 {
            assert_eq!((summary.executed, summary.shared), (20, 20));
        } else {
            // Two workers may both run points of one class before either result is known: at
            // least every distinct run, and some sharing.
            assert!(summary.executed >= 20 && summary.shared > 0, "{jobs} jobs: {summary:?}");
        }
        each_point_has_its_own_values(&specs, &results, &format!("{jobs} jobs"));
    }
}

#[test]
fn points_differing_only_in_the_domain_or_loc_keys_a_run_never_read_take_its_values() {
    let text = TINY_BAR
        .replace("x = \"workload\"", "x = \"machine.persist_domain\"")
        .replace(
            "workload = [\"sps\"]",
            "workload = [\"sps\"]\n\"machine.persist_domain\" = [\"memory\", \"adr\", \"eadr\", \"bbb\"]\nsd = [2, 16]",
        )
        .replace("protocol = [\"h-wal\", \"ec-wal\"]", "protocol = [\"s-wal\", \"h-wal\", \"kiln\", \"loc-wal\"]");
    let specs = vec![spec::parse("tiny-domains", &text, true).unwrap()];
    let out = tmp_dir("domain-reads");
    let mut summary = Summary::default();
    let (results, _) = run_points(&opts(&out, &out, 1, None), &specs, &mut summary, std::time::Instant::now()).unwrap();
    // 5 protocols (the baseline as reference) x 4 domains x 2 degrees x 2 seeds. Per seed the
    // baseline and S-WAL read the domain in full and no `[loc]` key (4 runs each), H-WAL and
    // Kiln only whether the domain covers the queue (2 each), LOC-WAL that and the degree (4).
    assert_eq!((summary.executed, summary.shared), (2 * (4 + 4 + 2 + 2 + 4), 80 - 32));
    each_point_has_its_own_values(&specs, &results, "1 job");
}

#[test]
fn both_reports_list_each_bench_point_as_one_row_of_the_speed_table() {
    let row: crate::bench::BenchRow = serde_json::from_value(serde_json::json!({
        "workload": "sps", "protocol": "h-wal", "txs": 1000, "sim_mem_accesses": 48000,
        "host_seconds": 0.002, "sim_mem_accesses_per_second": 24_049_999.0,
        "sim_mem_requests": 100, "sim_mem_requests_per_second": 50_000.0, "native_seconds": 0.0001,
        "slowdown_vs_native": 20.04, "repeat": 3, "host_cycles_per_access": 124.6,
        "version": "v", "git_rev": "r"
    }))
    .expect("a bench row");
    let prov = report::Provenance { version: "v".into(), git_rev: "r".into(), quick: true };
    let md = report::markdown(&[], &[], Some(std::slice::from_ref(&row)), &prov);
    assert!(md.contains("\n| workload | protocol | Macc/s | slowdown | host cycles / access |\n|---|---|---|---|---|\n| sps | h-wal | 24.0 | 20.0 | 125 |\n"), "{md}");
    let html = report::html(&[], &[], Some(&[row]), &prov);
    assert!(html.contains("<th>host cycles / access</th></tr><tr><td>sps</td><td>h-wal</td><td>24.0</td><td>20.0</td><td>125</td></tr></table>"), "{html}");
}
