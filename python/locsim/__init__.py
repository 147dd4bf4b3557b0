"""locsim from Python: the simulator, its crash checker and the PCM SQLite journal.

Every call runs the command line's own code (the same parsing, checks and results; see
docs/python.md): ``run`` is ``locsim run ... --json`` as a pandas DataFrame, one row per
protocol, with the JSON contract's column names; ``crash_check`` is ``locsim crashtest``
as a report object; ``journal`` and ``journal_crash_check`` are ``locsim journal`` and
``locsim journal-crashtest``; ``reproduce`` regenerates the papers' figures; ``sweep`` runs
the Cartesian product of parameter lists on a thread pool; ``Trace`` writes a program's
transactions as a trace (docs/formats/trace.md) that ``run`` and ``crash_check`` replay.

A bad argument raises ``ValueError`` (``FileNotFoundError`` for a missing file) whose
message is the one line the command line prints on standard error. The simulator runs
with the GIL released, so threads run several simulations at once.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import pandas as pd

from . import _native

__all__ = [
    "run",
    "sweep",
    "crash_check",
    "journal",
    "journal_crash_check",
    "reproduce",
    "Trace",
    "CrashReport",
    "Violation",
    "Figure",
    "HOST_TIMINGS",
    "__version__",
]

__version__, GIT_REV = _native.version()

#: The fields that are host timings: they differ from run to run; every other field is the
#: same for the same version, configuration and seed (the README's CLI contract).
HOST_TIMINGS = (
    "host_seconds",
    "sim_mem_accesses_per_second",
    "states_per_second",
    "check_seconds",
    "worker_seconds",
)

PathLike = Union[str, "os.PathLike[str]"]


def _value(v: Any) -> str:
    """A ``--set`` value as the command line takes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _machine(config: Optional[PathLike], set: Optional[Mapping[str, Any]], sd: Optional[int],
             mem_latency_ns: Optional[int]) -> List[str]:
    """The options every machine-building command shares (``--config``, ``--set``, ...)."""
    args: List[str] = []
    if config is not None:
        args += ["--config", os.fspath(config)]
    for k, v in (set or {}).items():
        args += ["--set", f"{k}={_value(v)}"]
    if sd is not None:
        args += ["--sd", str(sd)]
    if mem_latency_ns is not None:
        args += ["--mem-latency-ns", str(mem_latency_ns)]
    return args


def _opt(args: List[str], flag: str, v: Any) -> None:
    if v is not None:
        args += [flag, _value(v)]


def _names(v: Union[str, Sequence[str]]) -> str:
    return v if isinstance(v, str) else ",".join(v)


def _call(args: List[str], verify: Optional[Callable[[bytes], Optional[str]]] = None) -> Any:
    return json.loads(_native.call(args, verify))


def _trace_path(trace: Union[PathLike, "Trace"]) -> str:
    if isinstance(trace, Trace):
        trace.close()
        return trace.path
    return os.fspath(trace)


def run(workload: Optional[str] = None, protocols: Union[str, Sequence[str]] = "baseline,s-wal,h-wal", *,
        cores: int = 1, txs: Optional[int] = None, warmup_txs: Optional[int] = None, seed: int = 1,
        abort_rate: float = 0.0, config: Optional[PathLike] = None, set: Optional[Mapping[str, Any]] = None,
        sd: Optional[int] = None, mem_latency_ns: Optional[int] = None,
        trace: Union[PathLike, "Trace", None] = None) -> pd.DataFrame:
    """Simulate a workload under one or more protocols: ``locsim run ... --json``.

    Returns a DataFrame with one row per protocol, in the order given, and the JSON
    contract's columns (``workload``, ``protocol``, ``cycles``, ``throughput_tx_per_mcycle``,
    ``normalized_throughput``, ``write_traffic``, ..., ``version``, ``git_rev``,
    ``config_hash``); docs/python.md says what each means.

    workload: a built-in workload (sps, btree, hash, rbtree, sdg, sqlite), or None with trace.
    protocols: a list or a comma-separated string (``--protocol``).
    cores: the simulated cores; locsim models one in-order core, so 1 is the only value.
    txs, warmup_txs, seed, abort_rate, sd, mem_latency_ns: ``--txs``, ``--warmup-txs``,
    ``--seed``, ``--abort-rate``, ``--sd``, ``--mem-latency-ns``.
    config: a TOML file (``--config``); set: ``{key: value}``, each a ``--set key=value``.
    trace: a ``Trace`` or a trace file to replay instead of a workload (``--trace``).
    """
    if cores != 1:
        raise ValueError(f"cores {cores}: allowed 1 (locsim models one in-order core)")
    args = ["run", "--protocol", _names(protocols), "--seed", str(seed)]
    if trace is not None:
        args += ["--trace", _trace_path(trace)]
    if workload is not None:
        args += ["--workload", workload]
    _opt(args, "--txs", txs)
    _opt(args, "--warmup-txs", warmup_txs)
    if abort_rate:
        args += ["--abort-rate", _value(abort_rate)]
    args += _machine(config, set, sd, mem_latency_ns)
    return pd.DataFrame.from_records(_call(args))


# The keywords of `run` a sweep's grid may name; any other key is a `--set` key.
_RUN_KEYS = ("workload", "protocol", "protocols", "txs", "warmup_txs", "seed", "abort_rate", "sd",
             "mem_latency_ns", "config", "trace")


def sweep(grid: Mapping[str, Any], *, jobs: Optional[int] = None, progress: bool = True) -> pd.DataFrame:
    """Run the Cartesian product of parameter lists: one DataFrame, one row per point.

    grid: ``{name: list of values}`` (a single value is a list of one). A name is one of
    ``run``'s keywords (``workload``, ``protocol``, ``txs``, ``warmup_txs``, ``seed``,
    ``abort_rate``, ``sd``, ``mem_latency_ns``, ``config``, ``trace``) or any ``--set`` key
    (``memory.write_latency_ns``, ``loc.speculation_degree``, ...). Each point is one ``run``
    of one protocol; the rows come in the order of the product (the first name varies
    slowest), whatever ``jobs`` is, and the DataFrame has one more column per ``--set`` key
    of the grid, holding its value. jobs: worker threads (default: the cores); the GIL is
    released while a point simulates. progress: a tqdm bar (drawn in notebooks too).
    """
    axes = {k: (list(v) if isinstance(v, (list, tuple, range)) else [v]) for k, v in grid.items()}
    for k, v in axes.items():
        if not v:
            raise ValueError(f"sweep: {k}: empty list")
    names = list(axes)
    points = [dict(zip(names, vals)) for vals in itertools.product(*axes.values())]

    def one(point: Dict[str, Any]) -> pd.DataFrame:
        kw = {k: v for k, v in point.items() if k in _RUN_KEYS}
        sets = {k: v for k, v in point.items() if k not in _RUN_KEYS}
        if "protocol" in kw:
            kw["protocols"] = kw.pop("protocol")
        df = run(set=sets, **kw)
        for k, v in sets.items():
            df[k] = v
        return df

    jobs = jobs or os.cpu_count() or 1
    if jobs < 1:
        raise ValueError(f"sweep: jobs {jobs}: allowed 1 or more")
    bar = None
    if progress:
        import warnings

        with warnings.catch_warnings():  # without ipywidgets, tqdm.auto warns and draws text
            warnings.simplefilter("ignore")
            from tqdm.auto import tqdm
        bar = tqdm(total=len(points), desc="locsim sweep", unit="point")
    frames: List[pd.DataFrame] = []
    try:
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for df in pool.map(one, points):  # in the points' order
                frames.append(df)
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return pd.concat(frames, ignore_index=True)


class Violation:
    """One violation of a crash check: ``kind``, ``crash_cycle`` (or ``event``), ``detail``,
    ``replay`` (the command line that replays exactly this crash), ... as the JSON has them."""

    def __init__(self, fields: Mapping[str, Any]):
        self.__dict__.update(fields)

    def to_dict(self) -> Dict[str, Any]:
        """The violation's fields as the JSON has them."""
        return dict(self.__dict__)

    def __repr__(self) -> str:
        what = getattr(self, "detail", None) or getattr(self, "what", "")
        return f"Violation({getattr(self, 'kind', '?')}: {what}; replay: {getattr(self, 'replay', '')})"


class CrashReport:
    """The report of a crash check, as ``locsim crashtest --json`` (or ``journal-crashtest``)
    prints it: every field is an attribute (``violations``, ``crash_points``,
    ``violations_by_kind``, ...); ``first_violation`` is a ``Violation`` or None; ``ok`` is
    True when there is no violation. ``replay(violation)`` checks just that crash point again,
    with the same arguments (``verify`` included)."""

    def __init__(self, fields: Mapping[str, Any], rerun: Optional[Callable[[int], "CrashReport"]] = None):
        self.__dict__.update(fields)
        first = fields.get("first_violation")
        if first is None and fields.get("violation_details"):
            first = fields["violation_details"][0]
        self.first_violation = Violation(first) if first is not None else None
        self._fields = dict(fields)
        self._rerun = rerun

    @property
    def ok(self) -> bool:
        """No violation found."""
        return self.violations == 0

    def to_dict(self) -> Dict[str, Any]:
        """The report's fields as the JSON has them."""
        return dict(self._fields)

    def replay(self, violation: Optional[Violation] = None) -> "CrashReport":
        """Check only the crash point of ``violation`` (default: the first one) again."""
        v = violation or self.first_violation
        if v is None:
            raise ValueError("replay: the report has no violation")
        if self._rerun is None:
            raise ValueError("replay: run the violation's `replay` command line")
        return self._rerun(getattr(v, "crash_cycle", getattr(v, "event", None)))

    def __repr__(self) -> str:
        what = getattr(self, "protocol", None) or getattr(self, "config", "")
        return (f"CrashReport({getattr(self, 'workload', 'journal')} / {what}: {self.crash_points} crash points, "
                f"{self.violations} violations)")


def crash_check(workload: Optional[str] = None, protocol: Optional[str] = None, *,
                trace: Union[PathLike, "Trace", None] = None, crashes: int = 1000, exhaustive: bool = False,
                crash_at: Optional[int] = None, atomicity: int = 64, txs: Optional[int] = None,
                warmup_txs: int = 0, inject_bug: Optional[str] = None, seed: int = 1, abort_rate: float = 0.0,
                threads: Optional[int] = None, config: Optional[PathLike] = None,
                set: Optional[Mapping[str, Any]] = None, sd: Optional[int] = None,
                mem_latency_ns: Optional[int] = None,
                verify: Optional[Callable[[bytes], Optional[str]]] = None) -> CrashReport:
    """Inject crashes, recover each durable image, check it: ``locsim crashtest ... --json``.

    workload or trace (a ``Trace`` or a trace file), protocol: what to check. crashes,
    exhaustive, crash_at, atomicity, txs, warmup_txs, inject_bug, seed, abort_rate, threads,
    config, set, sd, mem_latency_ns: the command's options (``--crashes``, ...).
    verify: ``f(image: bytes) -> None | str``, a structural check of your own, called on
    each recovered data area (the region's bytes) besides the prefix rule: a string is a
    ``structure`` violation, reported and replayable like the built-in verifiers'.
    Returns a ``CrashReport``.
    """
    if protocol is None:
        raise ValueError("crash_check: protocol is required")
    args = ["crashtest", "--protocol", protocol, "--seed", str(seed), "--crashes", str(crashes),
            "--atomicity", str(atomicity)]
    if trace is not None:
        args += ["--trace", _trace_path(trace)]
    if workload is not None:
        args += ["--workload", workload]
    if exhaustive:
        args.append("--exhaustive")
    _opt(args, "--crash-at", crash_at)
    _opt(args, "--txs", txs)
    if warmup_txs:
        args += ["--warmup-txs", str(warmup_txs)]
    _opt(args, "--inject-bug", inject_bug)
    if abort_rate:
        args += ["--abort-rate", _value(abort_rate)]
    _opt(args, "--threads", threads)
    args += _machine(config, set, sd, mem_latency_ns)
    kw = dict(workload=workload, protocol=protocol, trace=trace, crashes=crashes, exhaustive=exhaustive,
              atomicity=atomicity, txs=txs, warmup_txs=warmup_txs, inject_bug=inject_bug, seed=seed,
              abort_rate=abort_rate, threads=threads, config=config, set=set, sd=sd,
              mem_latency_ns=mem_latency_ns, verify=verify)
    return CrashReport(_call(args, verify), lambda cycle: crash_check(crash_at=cycle, **kw))


def _remove_file(path: str) -> None:
    """Remove ``path`` if it is still there (a temporary trace, when its ``Trace`` is gone)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _call_with_sql(args: List[str], sql: Optional[str]) -> Any:
    """``_call(args)``, with ``sql`` (SQL text) written to a temporary file ``--sql`` names."""
    if sql is None:
        return _call(args)
    fd, path = tempfile.mkstemp(prefix="locsim-sql-", suffix=".sql")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(sql)
        return _call(args + ["--sql", path])
    finally:
        os.unlink(path)


def _journal_source(app: Optional[str], trace: int, sql_file: Optional[PathLike],
                    trace_file: Optional[PathLike], txs: Optional[int]) -> List[str]:
    args: List[str] = []
    if sql_file is not None:
        args += ["--sql", os.fspath(sql_file)]
    if trace_file is not None:
        args += ["--trace-file", os.fspath(trace_file)]
    if app is not None:
        args += ["--app", app, "--trace", str(trace)]
    _opt(args, "--txs", txs)
    return args


def journal(app: Optional[str] = None, configs: Union[str, Sequence[str], None] = None, *, trace: int = 1,
            sql: Optional[str] = None, sql_file: Optional[PathLike] = None,
            trace_file: Optional[PathLike] = None, seed: int = 1, frames: Optional[int] = None,
            txs: Optional[int] = None, set: Optional[Mapping[str, Any]] = None,
            cpu_ns_per_command: Optional[int] = None, on_error: str = "stop") -> pd.DataFrame:
    """Real SQLite with its rollback journal in PCM: ``locsim journal ... --json``.

    Returns a DataFrame with one row per configuration (``config``, ``total_bit_updates``,
    ``max_bit_updates``, ``energy_nj``, ``avg_cmd_latency_ns``, ...).
    app: fb, tw, kt or gm with ``trace`` 1..4; or ``sql``, your own SQL statements as text
    (``sql_file``: a file of them), or ``trace_file``, a recorded trace. configs: a list or a
    comma-separated string of Table IV's configurations (default: the command's list). seed,
    frames, txs, cpu_ns_per_command, on_error: the command's options; set: ``{pcm.key: value}``.
    """
    args = ["journal"] + _journal_source(app, trace, sql_file, trace_file, txs)
    if configs is not None:
        args += ["--config", _names(configs)]
    args += ["--seed", str(seed), "--on-error", on_error]
    _opt(args, "--frames", frames)
    _opt(args, "--cpu-ns-per-command", cpu_ns_per_command)
    for k, v in (set or {}).items():
        args += ["--set", f"{k}={_value(v)}"]
    return pd.DataFrame.from_records(_call_with_sql(args, sql))


def journal_crash_check(app: Optional[str] = None, config: Optional[str] = None, *, trace: int = 1,
                        sql: Optional[str] = None, sql_file: Optional[PathLike] = None,
                        trace_file: Optional[PathLike] = None, crashes: int = 1000,
                        crash_at: Optional[int] = None, inject_bug: Optional[str] = None, seed: int = 1,
                        frames: Optional[int] = None, txs: Optional[int] = None, threads: Optional[int] = None,
                        on_error: str = "stop") -> CrashReport:
    """Crash the PCM journal, recover with SQLite, check: ``locsim journal-crashtest ... --json``.

    app/trace, sql (SQL text), sql_file or trace_file: as in ``journal``; config: one
    configuration of Table IV. Returns a ``CrashReport`` (``violations`` a count,
    ``violation_details`` the list, ``first_violation`` the first with its ``replay``).
    """
    if config is None:
        raise ValueError("journal_crash_check: config is required")
    args = ["journal-crashtest"] + _journal_source(app, trace, sql_file, trace_file, txs)
    args += ["--config", config, "--crashes", str(crashes), "--seed", str(seed), "--on-error", on_error]
    _opt(args, "--crash-at", crash_at)
    _opt(args, "--inject-bug", inject_bug)
    _opt(args, "--frames", frames)
    _opt(args, "--threads", threads)
    kw = dict(app=app, config=config, trace=trace, sql=sql, sql_file=sql_file, trace_file=trace_file,
              crashes=crashes, inject_bug=inject_bug, seed=seed, frames=frames, txs=txs, threads=threads,
              on_error=on_error)
    return CrashReport(_call_with_sql(args, sql), lambda event: journal_crash_check(crash_at=event, **kw))


class Figure:
    """One experiment of ``reproduce``: ``name``, ``title``, ``figure`` (the paper's),
    ``table`` (a DataFrame: the axis columns, ``seed``, the metric columns; the CSV's rows),
    ``claims`` (a DataFrame: ``text``, ``metric``, ``verdict``, ``supported``, ``detail``),
    ``provenance`` (version, git_rev, mode, seeds, txs, config_hash, ...), ``svg`` (a path)."""

    def __init__(self, doc: Mapping[str, Any], out: str):
        self.name: str = doc["name"]
        self.title: str = doc.get("title", "")
        self.figure: str = doc.get("figure", "")
        self.provenance: Dict[str, Any] = doc["provenance"]
        self.claims = pd.DataFrame.from_records(doc["claims"], columns=["text", "metric", "verdict", "supported",
                                                                        "detail"])
        self.table = pd.DataFrame.from_records(doc["rows"])
        self.svg = os.path.join(out, f"{self.name}.svg")

    def __repr__(self) -> str:
        return f"Figure({self.name}: {len(self.table)} rows, {len(self.claims)} claims)"


def reproduce(only: Union[str, Sequence[str], None] = None, quick: bool = True, out: PathLike = "results", *,
              jobs: Optional[int] = None, experiments: PathLike = "experiments",
              bench: bool = False) -> Dict[str, Figure]:
    """Regenerate the papers' figures: ``locsim reproduce``.

    only: spec names (file stems in ``experiments``); quick: short run lengths; out: the
    output directory (CSV, JSON, SVG, REPORT.md, report.html as the command writes them);
    jobs: worker threads; experiments: the specs' directory (the repository's
    ``experiments/``); bench: measure simulator speed for the report too. Returns
    ``{name: Figure}`` for each experiment written, with its table and its claims' verdicts.
    """
    out = os.fspath(out)
    args = ["reproduce", "--out", out, "--experiments", os.fspath(experiments)]
    if quick:
        args.append("--quick")
    if only is not None:
        args += ["--only", _names(only)]
    _opt(args, "--jobs", jobs)
    if not bench:
        args.append("--no-bench")
    summary = _call(args)
    figures = {}
    for name in summary["written"]:
        with open(os.path.join(out, f"{name}.json")) as f:
            figures[name] = Figure(json.load(f), out)
    return figures


class Trace:
    """A writer of your program's transactions in the trace format (docs/formats/trace.md),
    which ``run(trace=...)`` and ``crash_check(trace=...)`` replay.

    ``Trace(size, path=None, base=0, warmup=0, text=False)``: a region of ``size`` bytes from
    address ``base`` (the data area a crash check compares and ``verify`` sees), the first
    ``warmup`` transactions left out of the figures; ``path`` None writes a temporary file,
    removed when the ``Trace`` object is garbage collected.
    Then ``init`` (initial content), ``begin``, ``load``/``load_u64`` (return the bytes the
    program's stores left), ``store``/``store_u64``, ``compute``, ``commit``, ``abort``
    (undoes the transaction's stores), ``close`` (also done by ``run``/``crash_check`` and at
    the end of a ``with`` block). ``image()`` is the region's current bytes.

    Cores: ``begin(core=c)`` makes a transaction core ``c``'s (default 0), and its loads,
    stores and computes with it; a ``load`` or ``compute`` outside a transaction takes
    ``core=`` too (default 0). The trace lists transactions in the order written, which
    must be a serial order of your program; replay it with as many cores (``--cores``) as
    the highest core named plus one.
    """

    def __init__(self, size: int, path: Optional[PathLike] = None, *, base: int = 0, warmup: int = 0,
                 text: bool = False):
        if path is None:
            fd, tmp = tempfile.mkstemp(prefix="locsim-", suffix=".trace")
            os.close(fd)
            path = tmp
            weakref.finalize(self, _remove_file, tmp)
        self._t = _native.Trace(os.fspath(path), size, base, warmup, text)
        self.base = base
        self.size = size

    @property
    def path(self) -> str:
        """The trace file."""
        return self._t.path

    @property
    def closed(self) -> bool:
        """Whether the trace has ended."""
        return self._t.closed

    def init(self, addr: int, data: bytes) -> None:
        """Initial content at ``addr`` (before the first transaction; not a store)."""
        self._t.init(addr, data)

    def begin(self, core: int = 0) -> None:
        """TxBegin of a transaction of core ``core``."""
        self._t.begin(core)

    def load(self, addr: int, n: int, core: Optional[int] = None) -> bytes:
        """A load of ``n`` bytes at ``addr``: the bytes the program's stores left there.
        ``core``: outside a transaction, the core that loads (default 0); inside one, the
        transaction's."""
        return self._t.load(addr, n, core)

    def load_u64(self, addr: int, core: Optional[int] = None) -> int:
        """A load of the little-endian u64 at ``addr`` (``core`` as for ``load``)."""
        return self._t.load_u64(addr, core)

    def store(self, addr: int, data: bytes) -> None:
        """A store of ``data`` at ``addr`` (inside a transaction)."""
        self._t.store(addr, data)

    def store_u64(self, addr: int, value: int) -> None:
        """A store of ``value`` as a little-endian u64 at ``addr`` (inside a transaction)."""
        self._t.store_u64(addr, value)

    def compute(self, cycles: int, core: Optional[int] = None) -> None:
        """``cycles`` core cycles of non-memory work (``core`` as for ``load``)."""
        self._t.compute(cycles, core)

    def commit(self) -> None:
        """TxCommit."""
        self._t.commit()

    def abort(self) -> None:
        """TxAbort: the transaction's stores are undone."""
        self._t.abort()

    def image(self) -> bytes:
        """The region's current bytes."""
        return self._t.image()

    def close(self) -> None:
        """End the trace (a second call does nothing)."""
        self._t.close()

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.close()

    def __repr__(self) -> str:
        return f"Trace({self.path}, {self.size} bytes from {self.base:#x}{', closed' if self.closed else ''})"


def _cli_help(fn: Callable[..., Any], command: str) -> None:
    """Append the command line's ``--help`` to ``fn``'s docstring: the options its keywords name."""
    fn.__doc__ = (fn.__doc__ or "") + (
        f"\n    The command line's help (``locsim {command} --help``), whose options the keywords name:\n\n"
        + "\n".join("    " + line if line else "" for line in _native.help(command).splitlines())
        + "\n"
    )


for _fn, _cmd in ((run, "run"), (crash_check, "crashtest"), (journal, "journal"),
                  (journal_crash_check, "journal-crashtest"), (reproduce, "reproduce")):
    _cli_help(_fn, _cmd)
del _fn, _cmd
