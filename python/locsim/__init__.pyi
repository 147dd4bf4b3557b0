"""locsim from Python: the simulator, its crash checker and the PCM SQLite journal (docs/python.md)."""

import os
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd

__version__: str
GIT_REV: str
HOST_TIMINGS: Tuple[str, ...]
"""The fields that are host timings; every other field is deterministic."""

PathLike = Union[str, "os.PathLike[str]"]
Verify = Callable[[bytes], Optional[str]]

def run(
    workload: Optional[str] = None,
    protocols: Union[str, Sequence[str]] = "baseline,s-wal,h-wal",
    *,
    cores: int = 1,
    txs: Optional[int] = None,
    warmup_txs: Optional[int] = None,
    seed: int = 1,
    abort_rate: float = 0.0,
    config: Optional[PathLike] = None,
    set: Optional[Mapping[str, Any]] = None,
    sd: Optional[int] = None,
    mem_latency_ns: Optional[int] = None,
    trace: Union[PathLike, "Trace", None] = None,
) -> pd.DataFrame:
    """Simulate a workload under one or more protocols: ``locsim run ... --json`` as a
    DataFrame, one row per protocol, the JSON contract's columns."""

def sweep(grid: Mapping[str, Any], *, jobs: Optional[int] = None, progress: bool = True) -> pd.DataFrame:
    """Run the Cartesian product of parameter lists (``run``'s keywords or ``--set`` keys):
    one DataFrame, rows in the product's order whatever ``jobs`` is, a tqdm progress bar."""

class Violation:
    """One violation: ``kind``, ``crash_cycle`` (or ``event``), ``detail``, ``replay``, ..."""

    kind: str
    replay: str
    def __getattr__(self, name: str) -> Any: ...
    def to_dict(self) -> Dict[str, Any]:
        """The violation's fields as the JSON has them."""

class CrashReport:
    """A crash check's report: every JSON field an attribute; ``first_violation``; ``ok``."""

    violations: int
    crash_points: int
    first_violation: Optional[Violation]
    def __getattr__(self, name: str) -> Any: ...
    @property
    def ok(self) -> bool:
        """No violation found."""
    def to_dict(self) -> Dict[str, Any]:
        """The report's fields as the JSON has them."""
    def replay(self, violation: Optional[Violation] = None) -> "CrashReport":
        """Check only the crash point of ``violation`` (default: the first) again."""

def crash_check(
    workload: Optional[str] = None,
    protocol: Optional[str] = None,
    *,
    trace: Union[PathLike, "Trace", None] = None,
    crashes: int = 1000,
    exhaustive: bool = False,
    crash_at: Optional[int] = None,
    atomicity: int = 64,
    txs: Optional[int] = None,
    warmup_txs: int = 0,
    inject_bug: Optional[str] = None,
    seed: int = 1,
    abort_rate: float = 0.0,
    threads: Optional[int] = None,
    config: Optional[PathLike] = None,
    set: Optional[Mapping[str, Any]] = None,
    sd: Optional[int] = None,
    mem_latency_ns: Optional[int] = None,
    verify: Optional[Verify] = None,
) -> CrashReport:
    """Inject crashes, recover, check: ``locsim crashtest ... --json`` as a ``CrashReport``;
    ``verify(image) -> None | str`` adds a structural check of each recovered data area."""

def journal(
    app: Optional[str] = None,
    configs: Union[str, Sequence[str], None] = None,
    *,
    trace: int = 1,
    sql: Optional[str] = None,
    sql_file: Optional[PathLike] = None,
    trace_file: Optional[PathLike] = None,
    seed: int = 1,
    frames: Optional[int] = None,
    txs: Optional[int] = None,
    set: Optional[Mapping[str, Any]] = None,
    cpu_ns_per_command: Optional[int] = None,
    on_error: str = "stop",
) -> pd.DataFrame:
    """Real SQLite with its journal in PCM: ``locsim journal ... --json``, one row per configuration."""

def journal_crash_check(
    app: Optional[str] = None,
    config: Optional[str] = None,
    *,
    trace: int = 1,
    sql: Optional[str] = None,
    sql_file: Optional[PathLike] = None,
    trace_file: Optional[PathLike] = None,
    crashes: int = 1000,
    crash_at: Optional[int] = None,
    inject_bug: Optional[str] = None,
    seed: int = 1,
    frames: Optional[int] = None,
    txs: Optional[int] = None,
    threads: Optional[int] = None,
    on_error: str = "stop",
) -> CrashReport:
    """Crash the PCM journal, recover with SQLite, check: ``locsim journal-crashtest ... --json``."""

class Figure:
    """One experiment of ``reproduce``: its table, claims' verdicts, provenance and SVG."""

    name: str
    title: str
    figure: str
    table: pd.DataFrame
    claims: pd.DataFrame
    provenance: Dict[str, Any]
    svg: str

def reproduce(
    only: Union[str, Sequence[str], None] = None,
    quick: bool = True,
    out: PathLike = "results",
    *,
    jobs: Optional[int] = None,
    experiments: PathLike = "experiments",
    bench: bool = False,
) -> Dict[str, Figure]:
    """Regenerate the papers' figures (``locsim reproduce``): ``{name: Figure}``."""

class Trace:
    """A writer of your program's transactions in the trace format (docs/formats/trace.md)."""

    base: int
    size: int
    def __init__(self, size: int, path: Optional[PathLike] = None, *, base: int = 0, warmup: int = 0,
                 text: bool = False) -> None: ...
    @property
    def path(self) -> str:
        """The trace file."""
    @property
    def closed(self) -> bool:
        """Whether the trace has ended."""
    def init(self, addr: int, data: bytes) -> None:
        """Initial content at ``addr`` (before the first transaction; not a store)."""
    def begin(self, core: int = 0) -> None:
        """TxBegin."""
    def load(self, addr: int, n: int, core: Optional[int] = None) -> bytes:
        """A load of ``n`` bytes at ``addr``: the bytes the program's stores left there."""
    def load_u64(self, addr: int, core: Optional[int] = None) -> int:
        """A load of the little-endian u64 at ``addr``."""
    def store(self, addr: int, data: bytes) -> None:
        """A store of ``data`` at ``addr`` (inside a transaction)."""
    def store_u64(self, addr: int, value: int) -> None:
        """A store of ``value`` as a little-endian u64 at ``addr``."""
    def compute(self, cycles: int, core: Optional[int] = None) -> None:
        """``cycles`` core cycles of non-memory work."""
    def commit(self) -> None:
        """TxCommit."""
    def abort(self) -> None:
        """TxAbort: the transaction's stores are undone."""
    def image(self) -> bytes:
        """The region's current bytes."""
    def close(self) -> None:
        """End the trace."""
    def __enter__(self) -> "Trace": ...
    def __exit__(self, *exc: Any) -> None: ...
