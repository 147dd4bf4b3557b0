//! A shard file given to `merge` (one shard of one): merged, or a one-line error, and never a
//! temporary file left in the output directory.
#![no_main]
use std::path::PathBuf;

fn dirs() -> &'static (PathBuf, PathBuf) {
    static D: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    D.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("locsim-fuzz-merge-{}", std::process::id()));
        let (shards, out) = (base.join("shards"), base.join("out"));
        std::fs::create_dir_all(&shards).expect("temp dir");
        std::fs::create_dir_all(&out).expect("temp dir");
        (shards, out)
    })
}

libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let (shards, out) = dirs();
    std::fs::write(shards.join("shard-0-of-1.json"), bytes).expect("write the input");
    if let Err(e) = locsim::reproduce::merge(std::slice::from_ref(shards), out) {
        assert!(!e.contains('\n'), "{e}");
    }
    let left = std::fs::read_dir(out)
        .expect("out")
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().starts_with('.')));
    assert_eq!(left.count(), 0, "temporary files left");
});
