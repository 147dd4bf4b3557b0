"""Shared fixtures: the command line the package is compared with (``LOCSIM_BIN``, set by the
Rust harness tests/python.rs to the `locsim` binary of the same build)."""

import json
import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def cli():
    """``cli(args) -> (status, stdout, stderr)`` of the locsim binary."""
    binary = os.environ.get("LOCSIM_BIN")
    if not binary:
        pytest.fail("LOCSIM_BIN is not set: run the Python tests through `cargo test --test python`")

    def run(args):
        p = subprocess.run([binary] + list(args), capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    return run


@pytest.fixture(scope="session")
def cli_json(cli):
    """``cli_json(args)``: the parsed ``--json`` output of a command that succeeds."""

    def run(args):
        status, out, err = cli(list(args) + ["--json"])
        assert status in (0, 1), err
        return json.loads(out)

    return run
