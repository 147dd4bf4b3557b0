//! report.html of `locsim reproduce` rendered by headless Chromium: every figure drawn, no
//! console error. Chromium is Debian's `chromium`, installed by the test when it is missing
//! (`testenv::require_packages`); where it cannot be, the test is reported ignored with the
//! reason (failed in CI). Its own harness (crates/testenv).

use std::path::PathBuf;
use std::process::Command;

#[path = "../src/testdir.rs"]
mod testdir;
use testdir::TempDir;

/// The small SPS specs of tests/reproduce.rs: a bar chart and a line chart.
const TINY: &str = include_str!("data/reproduce/tiny-bar.toml");
const TINY_LINE: &str = include_str!("data/reproduce/tiny-line.toml");

fn chromium() -> Option<PathBuf> {
    let candidates = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

fn report_html_renders_every_figure_in_headless_chromium_without_console_errors() -> testenv::Outcome {
    if chromium().is_none() {
        testenv::require_packages(&["chromium"])?;
    }
    let browser = chromium().expect("chromium installed but not at /usr/bin/chromium");
    let exp = TempDir::new("cli-reproduce-html-exp");
    for (name, text) in [("tiny-bar", TINY), ("tiny-line", TINY_LINE)] {
        std::fs::write(exp.join(format!("{name}.toml")), text).expect("write spec");
    }
    let out = TempDir::new("cli-reproduce-html");
    let o = Command::new(env!("CARGO_BIN_EXE_locsim"))
        .args(["reproduce", "--quick", "--no-bench", "--experiments"])
        .args([exp.as_os_str(), "--out".as_ref(), out.as_os_str()])
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let profile = TempDir::new("cli-reproduce-chromium-profile");
    let url = format!("file://{}", out.join("report.html").display());
    let run = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"])
        .args(["--disable-background-networking", "--disable-component-update", "--disable-sync"])
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(&url)
        .output()
        .expect("chromium starts");
    let dom = String::from_utf8_lossy(&run.stdout);
    let log = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "chromium failed: {log}");
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    let body = dom.split("<body").nth(1).and_then(|b| b.split('>').next()).expect("a body element");
    assert!(!body.contains("data-errors"), "script errors: {body}");
    assert!(body.contains("data-figures=\"2\""), "{body}");
    assert!(body.contains("data-figures-rendered=\"2\""), "a figure did not render: {body}");
    Ok(())
}

testenv::tests![report_html_renders_every_figure_in_headless_chromium_without_console_errors];
