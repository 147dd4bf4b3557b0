"""The Rust extension of locsim (python/src/lib.rs); use the package ``locsim`` instead."""

from typing import Callable, Optional, Sequence, Tuple

def call(args: Sequence[str], verify: Optional[Callable[[bytes], Optional[str]]] = None) -> str:
    """Run ``locsim ARGS...`` and return what it prints with ``--json``, as JSON text."""

def help(command: str) -> str:
    """The ``--help`` text of a locsim command."""

def version() -> Tuple[str, str]:
    """locsim's version and git revision."""

class Trace:
    """A trace writer (docs/formats/trace.md) keeping the region's bytes."""

    def __init__(self, path: str, size: int, base: int = 0, warmup: int = 0, text: bool = False) -> None: ...
    @property
    def path(self) -> str:
        """The trace file."""
    @property
    def closed(self) -> bool:
        """Whether the trace has ended."""
    def init(self, addr: int, data: bytes) -> None:
        """Initial content at ``addr``."""
    def begin(self) -> None:
        """TxBegin."""
    def load(self, addr: int, n: int) -> bytes:
        """A load of ``n`` bytes at ``addr``."""
    def load_u64(self, addr: int) -> int:
        """A load of the little-endian u64 at ``addr``."""
    def store(self, addr: int, data: bytes) -> None:
        """A store of ``data`` at ``addr``."""
    def store_u64(self, addr: int, value: int) -> None:
        """A store of a little-endian u64 at ``addr``."""
    def compute(self, cycles: int) -> None:
        """Non-memory work of ``cycles`` core cycles."""
    def commit(self) -> None:
        """TxCommit."""
    def abort(self) -> None:
        """TxAbort."""
    def image(self) -> bytes:
        """The region's current bytes."""
    def close(self) -> None:
        """End the trace."""
