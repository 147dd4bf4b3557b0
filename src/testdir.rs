//! A scratch directory for tests, removed when dropped (kept when the test panics, to be
//! looked at). The library's unit tests use it as `crate::testdir`, integration tests with
//! `#[path = "../src/testdir.rs"] mod testdir;`.

use std::path::{Path, PathBuf};

/// A fresh, empty directory `locsim-{name}-{pid}` under the host's temporary directory.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("locsim-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        TempDir(d)
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
