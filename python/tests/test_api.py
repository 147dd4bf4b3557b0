"""The package against the command line: equal results, equal error lines, determinism."""

import math
import os
import textwrap

import pandas as pd
import pytest

import locsim

PROTOCOLS = ["baseline", "s-wal", "h-wal", "ec-wal", "loc-wal", "kiln", "loc-kiln"]
# Every workload at a small size (the comparison is of the two ways in, not of the sizes).
SMALL = {
    "sps": {"workload.sps.entries": 4096},
    "btree": {"workload.btree.key_space": 8192},
    "hash": {"workload.hash.key_space": 8192, "workload.hash.buckets": 4096},
    "rbtree": {"workload.rbtree.key_space": 8192},
    "sdg": {"workload.sdg.vertices": 1024, "workload.sdg.initial_edges": 4096, "workload.sdg.max_edges": 8192},
    "sqlite": {"workload.sqlite.rows": 1024},
}


def same(a, b):
    """Equal as JSON values, a missing number (NaN) standing for null."""
    if isinstance(a, float) and math.isnan(a):
        return b is None
    return a == b


def clean(rev):
    """The git revision without `-dirty`: the wheel and the binary are two builds, and a file
    edited between them marks one of them dirty."""
    return rev.removesuffix("-dirty")


def assert_rows_equal(df, objs):
    assert len(df) == len(objs)
    assert list(df.columns) == list(objs[0].keys())
    for row, obj in zip(df.to_dict("records"), objs):
        for k, v in obj.items():
            if k == "git_rev":
                assert clean(row[k]) == clean(v)
            elif k not in locsim.HOST_TIMINGS:
                assert same(row[k], v), (obj["workload"], obj["protocol"], k, row[k], v)


@pytest.mark.parametrize("workload", list(SMALL))
def test_run_equals_the_cli_json_for_every_protocol(workload, cli_json):
    sets = SMALL[workload]
    df = locsim.run(workload, PROTOCOLS, txs=300, warmup_txs=100, seed=3, set=sets)
    args = ["run", "-w", workload, "-p", ",".join(PROTOCOLS), "--txs", "300", "--warmup-txs", "100", "--seed", "3"]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    assert_rows_equal(df, cli_json(args))
    assert df["normalized_throughput"].iloc[0] == 1.0


def test_the_readme_example_equals_the_cli(cli_json):
    df = locsim.run("btree", ["h-wal", "loc-wal"])
    assert_rows_equal(df, cli_json(["run", "-w", "btree", "-p", "h-wal,loc-wal"]))
    assert list(df["protocol"]) == ["h-wal", "loc-wal"]


@pytest.mark.parametrize(
    "kwargs,args",
    [
        (dict(workload="nope", protocols=["h-wal"]), ["run", "--workload", "nope", "--protocol", "h-wal"]),
        (dict(workload="sps", protocols="h-wal,paxos"), ["run", "--workload", "sps", "--protocol", "h-wal,paxos"]),
        (dict(workload="sps", protocols=["h-wal"], set={"memory.nope": 1}),
         ["run", "--workload", "sps", "--protocol", "h-wal", "--set", "memory.nope=1"]),
        (dict(workload="sps", protocols=["h-wal"], set={"memory.banks": 0}),
         ["run", "--workload", "sps", "--protocol", "h-wal", "--set", "memory.banks=0"]),
        (dict(workload="sps", protocols=["loc-wal"], sd=33), ["run", "--workload", "sps", "--protocol", "loc-wal", "--sd", "33"]),
        (dict(workload="sps", protocols=["h-wal"], abort_rate=2.0),
         ["run", "--workload", "sps", "--protocol", "h-wal", "--abort-rate", "2.0"]),
    ],
)
def test_a_bad_input_raises_value_error_with_the_cli_line(kwargs, args, cli):
    status, _, err = cli(args)
    assert status == 2
    with pytest.raises(ValueError) as e:
        locsim.run(**kwargs)
    assert str(e.value) == err.strip()
    assert "\n" not in str(e.value)


def test_a_missing_file_raises_file_not_found_with_the_cli_line(cli):
    status, _, err = cli(["run", "--workload", "sps", "--config", "/nonexistent/m.toml"])
    assert status == 2
    with pytest.raises(FileNotFoundError) as e:
        locsim.run("sps", config="/nonexistent/m.toml")
    assert str(e.value) == err.strip()
    with pytest.raises(FileNotFoundError):
        locsim.crash_check(trace="/nonexistent/t.trace", protocol="h-wal")


def test_help_says_what_the_cli_help_says(cli):
    _, out, _ = cli(["run", "--help"])
    doc = locsim.run.__doc__
    for line in out.splitlines():
        if line.strip():
            assert line.strip() in doc, line
    _, out, _ = cli(["crashtest", "--help"])
    assert "--inject-bug" in locsim.crash_check.__doc__ and "--exhaustive" in out


def test_sweep_rows_are_the_same_whatever_jobs():
    grid = {
        "workload": ["sps", "hash"],
        "protocol": ["h-wal", "loc-wal"],
        "memory.write_latency_ns": [95, 300],
        "txs": [200],
        "warmup_txs": [50],
        "workload.sps.entries": [4096],
        "workload.hash.key_space": [8192],
    }
    one = locsim.sweep(grid, jobs=1, progress=False)
    four = locsim.sweep(grid, jobs=4, progress=True)
    timings = [c for c in locsim.HOST_TIMINGS if c in one.columns]
    pd.testing.assert_frame_equal(one.drop(columns=timings), four.drop(columns=timings))
    assert len(one) == 8
    assert list(one["protocol"][:2]) == ["h-wal", "h-wal"] and list(one["memory.write_latency_ns"][:2]) == [95, 300]
    assert list(one["workload"]) == ["sps"] * 4 + ["hash"] * 4
    assert (one["mem_latency_ns"] == one["memory.write_latency_ns"]).all() or "mem_latency_ns" in one


def test_crash_check_equals_the_cli_and_names_the_replay(cli_json):
    r = locsim.crash_check("sps", "h-wal", txs=100, crashes=50, set={"workload.sps.entries": 4096})
    assert r.ok and r.violations == 0 and r.first_violation is None
    j = cli_json(["crashtest", "-w", "sps", "-p", "h-wal", "--txs", "100", "--crashes", "50",
                  "--set", "workload.sps.entries=4096"])
    for k, v in j.items():
        if k == "git_rev":
            assert clean(r.to_dict()[k]) == clean(v)
        elif k not in locsim.HOST_TIMINGS:
            assert r.to_dict()[k] == v, k
    bad = locsim.crash_check("sps", "h-wal", txs=100, crashes=200, inject_bug="commit-before-log",
                             set={"workload.sps.entries": 4096})
    assert bad.violations > 0 and not bad.ok
    v = bad.first_violation
    assert v.replay.startswith("locsim crashtest --workload sps --protocol h-wal") and "--crash-at" in v.replay
    again = bad.replay()
    assert again.crash_points == 1 and again.violations >= 1


def test_journal_with_your_own_sql_and_its_crash_check(cli_json, tmp_path):
    sql = textwrap.dedent("""\
        CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT);
        BEGIN;
        INSERT INTO t VALUES(1, 'one');
        INSERT INTO t VALUES(2, 'two');
        COMMIT;
        UPDATE t SET v = 'uno' WHERE k = 1;
        DELETE FROM t WHERE k = 2;
        """)
    df = locsim.journal(sql=sql, configs=["RR", "RU-S2X"])
    path = tmp_path / "app.sql"
    path.write_text(sql)
    j = cli_json(["journal", "--sql", str(path), "--config", "RR,RU-S2X"])
    assert list(df["config"]) == ["RR", "RU-S2X"]
    for row, obj in zip(df.to_dict("records"), j):
        for k in ("total_bit_updates", "max_bit_updates", "energy_nj", "page_writes", "avg_cmd_latency_ns"):
            assert row[k] == obj[k], k
    r = locsim.journal_crash_check(sql_file=path, config="RU-S2X", crashes=40)
    assert r.ok and r.crash_points > 0
    a = locsim.journal("fb", ["RR", "RU20-S2X"], txs=30)
    assert a["total_bit_updates_vs_rr"].iloc[0] == 1.0


def test_journal_crash_check_catches_an_injected_bug():
    r = locsim.journal_crash_check("fb", "RU-S2X", txs=30, crashes=200, inject_bug="hot-clear-before-db-sync")
    assert r.violations > 0 and "--crash-at" in r.first_violation.replay


def test_reproduce_returns_each_figures_table_and_claims(tmp_path):
    exp = tmp_path / "experiments"
    exp.mkdir()
    (exp / "tiny-sd.toml").write_text(textwrap.dedent("""\
        title = "Speculation degree, small"
        figure = "test"
        kind = "sim"
        x = "sd"
        series = "protocol"
        chart = "line"
        metrics = ["write_traffic"]

        [set]
        "workload.sps.entries" = 4096

        [axes]
        workload = ["sps"]
        protocol = ["loc-wal"]
        sd = [1, 16]

        [[claim]]
        text = "Write traffic falls as the speculation degree grows"
        kind = "monotonic"
        metric = "write_traffic"
        series = ["loc-wal"]
        direction = "decreasing"
        tolerance = 0.01

        [quick]
        txs = 300
        warmup_txs = 100
        seeds = [1]

        [full]
        txs = 600
        warmup_txs = 100
        seeds = [1]
        """))
    figs = locsim.reproduce(quick=True, out=tmp_path / "out", experiments=exp, jobs=2)
    f = figs["tiny-sd"]
    assert list(f.table["sd"].astype(int)) == [1, 16]
    assert "write_traffic" in f.table.columns
    assert f.claims["verdict"].iloc[0] in ("supported", "not supported") and f.provenance["txs"] == 300
    assert os.path.exists(f.svg)


def test_the_gil_is_released_while_simulating():
    """Another Python thread runs while a simulation does: a thread sleeping 50 ms wakes long
    before the simulation returns (with the GIL held by the run it would wake only after)."""
    import threading
    import time

    done = []

    def simulate():
        locsim.run("rbtree", ["h-wal"], txs=10000, warmup_txs=0, set={"workload.rbtree.key_space": 65536})
        done.append(time.perf_counter())

    t = threading.Thread(target=simulate)
    t.start()
    time.sleep(0.05)
    woke = time.perf_counter()
    t.join()
    assert woke < done[0] - 0.05, (woke, done[0])


def test_trace_core_argument_writes_core_records_that_locsim_checks(tmp_path):
    path = tmp_path / "cores.trace"
    t = locsim.Trace(4096, path, base=0x1000, text=True)
    t.init(0x1000, b"\x01")
    t.begin()  # core 0
    t.store_u64(0x1000, 2)
    t.commit()
    t.begin(core=2)
    assert t.load_u64(0x1000, core=2) == 2
    t.store(0x1040, b"\x07" * 8)
    t.compute(10)
    t.commit()
    t.compute(5, core=2)
    t.begin(core=1)
    t.store_u64(0x1080, 3)
    t.abort()
    t.load(0x1000, 8)  # outside a transaction: core 0
    with pytest.raises(ValueError, match="a transaction runs on one core"):
        t.begin(core=3)
        t.compute(1, core=1)
    t.commit()
    with pytest.raises(ValueError, match="core 65536: allowed 0..=65535"):
        t.begin(core=65536)
    t.close()
    lines = [l for l in path.read_text().splitlines() if l.split()[0] in ("locsim-trace", "core", "begin")]
    assert lines == ["locsim-trace 2", "begin", "core 2", "begin", "core 1", "begin", "core 0", "core 3", "begin"]
    # The decoder checks each core against the machine's: one line naming the record.
    with pytest.raises(ValueError, match=r"trace line \d+ \(byte offset \d+\): core 2: allowed 0\.\.=0 \(--cores 1\)"):
        locsim.run(protocols="h-wal", trace=path)


def test_a_single_core_python_trace_has_no_core_record_and_runs(tmp_path):
    path = tmp_path / "one.trace"
    with locsim.Trace(4096, path, text=True) as t:
        t.begin(core=0)
        t.store_u64(0, 1)
        t.commit()
    assert "core" not in path.read_text()
    df = locsim.run(protocols="h-wal", trace=path)
    assert int(df["txs_committed"][0]) == 1


def test_a_temporary_trace_file_goes_with_its_trace():
    import gc

    t = locsim.Trace(64)
    t.begin()
    t.store_u64(0, 7)
    t.commit()
    t.close()
    path = t.path
    assert os.path.exists(path)
    del t
    gc.collect()
    assert not os.path.exists(path)
