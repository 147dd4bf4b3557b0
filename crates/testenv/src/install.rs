//! Debian packages with apt-get, a Python venv with pip; each under a file lock.

use crate::Missing;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// `Err(why)` when `LOCSIM_TEST_INSTALL=0` turns installing off.
fn installing_allowed() -> Result<(), String> {
    match std::env::var("LOCSIM_TEST_INSTALL") {
        Ok(v) if v.trim() == "0" => Err("installing is turned off (LOCSIM_TEST_INSTALL=0)".into()),
        _ => Ok(()),
    }
}

/// The first executable `name` in a directory of `PATH`.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// An exclusive `flock` on `path` (created if absent), released when dropped.
struct Lock(File);

impl Lock {
    fn take(path: &Path) -> Lock {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        f.lock().unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
        Lock(f)
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

/// The last non-empty line of a command's standard error (or output), to name a failure.
fn last_line(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    let text = if err.trim().is_empty() { String::from_utf8_lossy(&out.stdout) } else { err };
    text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("no output").to_string()
}

/// Whether dpkg shows Debian package `pkg` installed.
fn installed(pkg: &str) -> Result<bool, String> {
    let Some(dpkg) = on_path("dpkg-query") else {
        return Err("dpkg-query is not on PATH (not a Debian system)".into());
    };
    let out = Command::new(dpkg).args(["-W", "-f=${db:Status-Status}", pkg]).output().map_err(|e| e.to_string())?;
    Ok(out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "installed")
}

fn absent(pkgs: &[&str]) -> Result<Vec<String>, Missing> {
    let mut v = Vec::new();
    for p in pkgs {
        match installed(p) {
            Ok(true) => {}
            Ok(false) => v.push(p.to_string()),
            Err(why) => return Err(Missing::new(pkgs.join(", "), why)),
        }
    }
    Ok(v)
}

/// Makes sure the Debian packages `pkgs` are installed: those missing are installed with
/// `apt-get` (after one `apt-get update` per process) when it is on `PATH` and the user is root
/// or has passwordless `sudo`, and installing is not turned off (`LOCSIM_TEST_INSTALL=0`).
/// Under a lock shared by every test binary, so two of them never install at once.
pub fn require_packages(pkgs: &[&str]) -> Result<(), Missing> {
    let todo = absent(pkgs)?;
    if todo.is_empty() {
        return Ok(());
    }
    let what = todo.join(", ");
    let missing = |why: String| Missing::new(what.clone(), why);
    installing_allowed().map_err(missing)?;
    let apt = on_path("apt-get").ok_or_else(|| missing("apt-get is not on PATH".into()))?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let sudo = !root;
    if sudo && !Command::new("sudo").args(["-n", "true"]).output().is_ok_and(|o| o.status.success()) {
        return Err(missing("not root and no passwordless sudo".into()));
    }
    let _lock = Lock::take(&std::env::temp_dir().join("locsim-testenv-apt.lock"));
    let todo = absent(pkgs)?; // another test binary may have installed them meanwhile
    if todo.is_empty() {
        return Ok(());
    }
    let apt_get = |args: &[&str]| -> Result<(), String> {
        let mut c = if sudo { Command::new("sudo") } else { Command::new(&apt) };
        if sudo {
            c.arg("-n").arg(&apt);
        }
        let out = c
            .args(["-o", "DPkg::Lock::Timeout=600", "-q", "-y"])
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| format!("apt-get: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("apt-get {} failed: {}", args[0], last_line(&out)))
        }
    };
    let start = Instant::now();
    eprintln!("testenv: installing Debian packages {} (apt-get install)", todo.join(", "));
    static UPDATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !UPDATED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        apt_get(&["update"]).map_err(missing)?;
    }
    let mut install = vec!["install"];
    install.extend(todo.iter().map(String::as_str));
    apt_get(&install).map_err(missing)?;
    let left = absent(pkgs)?;
    if !left.is_empty() {
        return Err(Missing::new(left.join(", "), "still not installed after apt-get install"));
    }
    eprintln!("testenv: installed {} in {:.0?}", todo.join(", "), start.elapsed());
    Ok(())
}

/// FNV-1a, 64 bits: a stable hash (the same on every toolchain) for the venv's key.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// The interpreter's version and real path, when it has venv and ensurepip.
fn probe(python: &str) -> Option<String> {
    let script = "import sys, os, venv, ensurepip; print('%d.%d.%d %s' % (sys.version_info[:3] + (os.path.realpath(sys.executable),)))";
    let out = Command::new(python).args(["-c", script]).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The directory of the cached venv of `requirements` made with the interpreter `probe` named.
fn venv_dir(requirements: &[u8], probed: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("LOCSIM_TEST_VENV") {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let mut key = requirements.to_vec();
    key.push(0);
    key.extend_from_slice(probed.as_bytes());
    cache.join("locsim").join(format!("venv-{:016x}", fnv1a(&key)))
}

/// Marks a venv whose every package installed; a directory without it is remade.
const COMPLETE: &str = ".locsim-complete";

/// A Python virtual environment with the packages of the pip requirements file `requirements`
/// installed, made once and reused (see the crate's documentation for where). Returns its
/// directory; its interpreter is `<dir>/bin/python`.
pub fn python_venv(requirements: &Path) -> Result<PathBuf, Missing> {
    let python = std::env::var("LOCSIM_PYTHON").unwrap_or_else(|_| "python3".into());
    let name =
        requirements.file_name().map_or_else(|| requirements.display().to_string(), |n| n.to_string_lossy().into());
    let base = format!("{python} with venv and pip");
    let probed = match probe(&python) {
        Some(p) => p,
        None => {
            require_packages(&["python3", "python3-venv"]).map_err(|m| Missing::new(base.clone(), m.to_string()))?;
            probe(&python).ok_or_else(|| {
                Missing::new(base.clone(), "python3-venv is installed but venv or ensurepip is not importable")
            })?
        }
    };
    let version: Vec<u32> = probed.split(['.', ' ']).take(2).filter_map(|x| x.parse().ok()).collect();
    if version < vec![3, 9] {
        return Err(Missing::new("python >= 3.9", format!("{python} is {probed}")));
    }
    let text = std::fs::read(requirements).unwrap_or_else(|e| panic!("{}: {e}", requirements.display()));
    let dir = venv_dir(&text, &probed);
    let done = dir.join(COMPLETE);
    if done.exists() {
        return Ok(dir);
    }
    let what = format!("a Python venv with the packages of {name}");
    installing_allowed().map_err(|why| Missing::new(what.clone(), why))?;
    let mut lock = dir.clone().into_os_string();
    lock.push(".lock");
    let _lock = Lock::take(Path::new(&lock));
    if done.exists() {
        return Ok(dir); // made by another test binary while this one waited
    }
    let start = Instant::now();
    eprintln!("testenv: making {} (python -m venv, pip install -r {name})", dir.display());
    let _ = std::fs::remove_dir_all(&dir);
    let fail = |step: &str, out: std::io::Result<Output>| -> Result<(), Missing> {
        match out {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(Missing::new(what.clone(), format!("{step} failed: {}", last_line(&o)))),
            Err(e) => Err(Missing::new(what.clone(), format!("{step}: {e}"))),
        }
    };
    fail("python -m venv", Command::new(&python).args(["-m", "venv"]).arg(&dir).output())?;
    fail(
        "pip install",
        Command::new(dir.join("bin/python"))
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
            .arg(requirements)
            .output(),
    )?;
    std::fs::write(&done, &text).unwrap_or_else(|e| panic!("{}: {e}", done.display()));
    eprintln!("testenv: made {} in {:.0?}", dir.display(), start.elapsed());
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_the_published_function() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn the_venv_key_follows_the_requirements_and_the_interpreter() {
        if std::env::var_os("LOCSIM_TEST_VENV").is_some() {
            return;
        }
        let a = venv_dir(b"pandas==1\n", "3.11.7 /usr/bin/python3.11");
        assert_eq!(a, venv_dir(b"pandas==1\n", "3.11.7 /usr/bin/python3.11"));
        assert_ne!(a, venv_dir(b"pandas==2\n", "3.11.7 /usr/bin/python3.11"));
        assert_ne!(a, venv_dir(b"pandas==1\n", "3.12.1 /usr/bin/python3.12"));
        assert!(a.to_string_lossy().contains("/locsim/venv-"), "{}", a.display());
    }

    #[test]
    fn a_package_that_does_not_exist_is_not_installed() {
        if on_path("dpkg-query").is_some() {
            assert_eq!(installed("locsim-no-such-package"), Ok(false));
            assert_eq!(installed("dpkg"), Ok(true));
        } else {
            assert!(installed("dpkg").unwrap_err().contains("dpkg-query"));
        }
    }
}
