//! Result files written whole or not at all: every file locsim writes as a result (reproduce's
//! CSV, JSON, SVG, REPORT.md, report.html, shard files and cache entries, `trace-gen --output`)
//! goes through here. The bytes go to a temporary file in the same directory, named
//! `.NAME.tmp-PID-N`, which is renamed over `NAME` once complete (a rename within one directory
//! is atomic on POSIX file systems), so a process killed at any moment leaves either the old file,
//! the new one, or no file; never a truncated one. A temporary file of a killed process stays
//! behind under its dot name and is ignored by every reader; a file dropped without
//! [`OutFile::commit`] removes its temporary file.
//!
//! Left out: `fsync` of the file and its directory (durability across a power failure of the
//! host), which a result file does not need: a rerun writes it again.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files of one process (threads write result files at once).
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A result file being written: [`Write`] into it, then [`OutFile::commit`].
pub struct OutFile {
    path: PathBuf,
    tmp: PathBuf,
    file: Option<BufWriter<File>>,
}

/// The temporary name of `path`: same directory, a leading dot, the process id and a counter.
fn temp_of(path: &Path) -> PathBuf {
    let name = path.file_name().map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

impl OutFile {
    /// Start writing `path` (its directory must exist). Errors name the path.
    pub fn create(path: &Path) -> Result<OutFile, String> {
        let tmp = temp_of(path);
        let f = File::create(&tmp).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(OutFile { path: path.to_path_buf(), tmp, file: Some(BufWriter::new(f)) })
    }

    /// Finish: flush and rename over the destination.
    pub fn commit(mut self) -> Result<(), String> {
        let f = self.file.take().expect("not yet committed");
        let err = |e: std::io::Error| format!("{}: {e}", self.path.display());
        f.into_inner().map_err(|e| err(e.into_error()))?;
        std::fs::rename(&self.tmp, &self.path).map_err(err)
    }
}

impl Write for OutFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.as_mut().expect("not yet committed").write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.as_mut().expect("not yet committed").flush()
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Write `bytes` to `path` atomically (see the module comment). Errors name the path.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<(), String> {
    let mut f = OutFile::create(path)?;
    f.write_all(bytes.as_ref()).map_err(|e| format!("{}: {e}", path.display()))?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> crate::testdir::TempDir {
        crate::testdir::TempDir::new(&format!("outfile-{tag}"))
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn a_file_appears_only_when_committed_and_replaces_the_old_one_whole() {
        let d = dir("commit");
        let p = d.join("a.csv");
        write(&p, "old\n").unwrap();
        let mut f = OutFile::create(&p).unwrap();
        f.write_all(b"new, longer\n").unwrap();
        f.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "old\n", "visible before commit");
        assert_eq!(names(&d).len(), 2, "the temporary file sits beside it: {:?}", names(&d));
        f.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "new, longer\n");
        assert_eq!(names(&d), ["a.csv"]);
    }

    #[test]
    fn a_file_dropped_unfinished_leaves_the_old_file_and_no_temporary() {
        let d = dir("drop");
        let p = d.join("b.json");
        write(&p, "{}").unwrap();
        let mut f = OutFile::create(&p).unwrap();
        f.write_all(b"{\"half\":").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "{}");
        assert_eq!(names(&d), ["b.json"]);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_file() {
        let d = dir("missing").join("nowhere");
        let e = write(&d.join("c.svg"), "x").unwrap_err();
        assert!(e.contains("c.svg") && !e.contains('\n'), "{e}");
    }
}
