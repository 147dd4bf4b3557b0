//! The Python package (python/, docs/python.md): maturin builds the wheel, a fresh virtual
//! environment installs it, pytest runs python/tests against this build's `locsim` binary, and
//! the notebook examples/notebooks/protocols.ipynb runs top to bottom.
//!
//! It needs python3 with venv and pip, and the packages of python/requirements-dev.txt: the
//! test makes a virtual environment with them once and reuses it (`testenv::python_venv`, which
//! says where); where that cannot be done it is reported ignored with the reason (failed in CI).
//! Its own harness (crates/testenv).
//!
//! The wheel is built with the `wheel` profile (quick's settings: no LTO, incremental) in this
//! target directory: the outer cargo holds the lock of the profile it tests while its tests
//! run, so the wheel has a profile of its own (a full build the first time, incremental after).

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_locsim");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(last) = String::from_utf8_lossy(&out.stdout).lines().rev().find(|l| !l.trim().is_empty()) {
        eprintln!("{what}: {last}");
    }
}

fn the_python_package_builds_installs_passes_its_tests_and_runs_the_notebook() -> testenv::Outcome {
    let tools = testenv::python_venv(&Path::new(ROOT).join("python/requirements-dev.txt"))?;
    let python = tools.join("bin/python");

    let bin = Path::new(BIN);
    let target = bin.parent().and_then(Path::parent).expect("target/<profile>/locsim");
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("python");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let wheels = work.join("wheels");
    // maturin resolves the crate's dependencies for every platform (`cargo metadata`), where the
    // build of the tests fetched this host's only: fetch the others as that build did (nothing
    // to fetch once they are here), so that the wheel itself builds offline.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo).current_dir(ROOT).args(["fetch", "--locked"]), "cargo fetch");
    run(
        Command::new(&python)
            .args(["-m", "maturin", "build", "--profile", "wheel", "--offline", "-m"])
            .arg(Path::new(ROOT).join("python/Cargo.toml"))
            .arg("--out")
            .arg(&wheels)
            .arg("--target-dir")
            .arg(target),
        "maturin build",
    );
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("a wheel");
    assert!(wheel.to_string_lossy().contains("abi3"), "{}: not an abi3 wheel", wheel.display());

    // A fresh environment: the wheel installed in it, the test tools of the cached one on its
    // path (a .pth file naming that one's site-packages).
    let venv = work.join("venv");
    run(Command::new(&python).args(["-m", "venv"]).arg(&venv), "python -m venv");
    let py = venv.join("bin/python");
    let site = |p: &Path| {
        let out = Command::new(p).args(["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).output();
        PathBuf::from(String::from_utf8_lossy(&out.expect("python runs").stdout).trim())
    };
    std::fs::write(site(&py).join("locsim-test-tools.pth"), format!("{}\n", site(&python).display())).unwrap();
    run(Command::new(&py).args(["-m", "pip", "install", "-q", "--no-deps", "--no-index"]).arg(&wheel), "pip install");

    // Outside the source tree, so `import locsim` is the installed package.
    let common = |c: &mut Command| {
        c.current_dir(&work).env("LOCSIM_BIN", BIN).env("MPLBACKEND", "Agg").env_remove("PYTHONPATH");
    };
    let mut pytest = Command::new(&py);
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib"])
        .arg(Path::new(ROOT).join("python/tests"));
    common(&mut pytest);
    run(&mut pytest, "pytest python/tests");

    let nb = Path::new(ROOT).join("examples/notebooks/protocols.ipynb");
    let script = format!(
        "import nbformat, nbclient\n\
         nb = nbformat.read({nb:?}, as_version=4)\n\
         nbclient.NotebookClient(nb, timeout=900, kernel_name='python3', resources={{'metadata': {{'path': {work:?}}}}}).execute()\n\
         print('notebook: %d cells run' % len(nb.cells))\n",
        nb = nb.display().to_string(),
        work = work.display().to_string()
    );
    let mut notebook = Command::new(&py);
    notebook.args(["-c", &script]);
    common(&mut notebook);
    run(&mut notebook, "the notebook");
    Ok(())
}

testenv::tests![the_python_package_builds_installs_passes_its_tests_and_runs_the_notebook];
