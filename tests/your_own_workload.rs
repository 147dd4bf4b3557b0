//! docs/your-own-workload.md: every `sh` block runs as written (with `locsim` the binary under
//! test, in an empty directory), and the replay it writes equals the built-in run.

use serde_json::Value;
use std::process::Command;

#[test]
fn the_copy_paste_examples_of_the_page_run() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/your-own-workload.md")).unwrap();
    let mut blocks = Vec::new();
    let mut cur: Option<String> = None;
    for line in page.lines() {
        match (&mut cur, line) {
            (None, "```sh") => cur = Some(String::new()),
            (Some(b), "```") => {
                blocks.push(std::mem::take(b));
                cur = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(blocks.len() >= 2, "the page has its sh blocks");
    let dir = format!("{}/doc-{}", env!("CARGO_TARGET_TMPDIR"), std::process::id());
    std::fs::create_dir_all(&dir).unwrap();
    for b in &blocks {
        let script = format!("set -euo pipefail\nlocsim() {{ '{}' \"$@\"; }}\n{b}", env!("CARGO_BIN_EXE_locsim"));
        let out = Command::new("bash").arg("-c").arg(&script).current_dir(&dir).output().unwrap();
        assert!(
            out.status.success(),
            "block failed:\n{b}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let read =
        |f: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(format!("{dir}/{f}")).unwrap()).unwrap() };
    let (replay, builtin) = (read("replay.json"), read("builtin.json"));
    for (r, b) in replay.as_array().unwrap().iter().zip(builtin.as_array().unwrap()) {
        for f in ["cycles", "mem_write_bytes", "txs_committed"] {
            assert_eq!(r[f], b[f], "{f}");
        }
    }
}
