"""A diagnosis of what a long-running server's memory holds, off unless an operator asks.

With ``WASM_RUNNER_MEMORY_REPORT=DIR`` in its environment, ``wasm-runner serve`` starts
``tracemalloc`` (25 frames) and, on each ``SIGUSR1``, writes ``DIR/memory-<pid>-<n>.txt``: the
process's RSS, live objects counted by type (and the change since the previous report), the
Python allocations that grew most since the previous report grouped by traceback, and the RSS
before and after glibc's ``malloc_trim(0)`` (how much was freed memory the allocator kept).

    WASM_RUNNER_MEMORY_REPORT=/tmp/mem wasm-runner serve ... &
    kill -USR1 <pid>        # after each class; diff the reports

tracemalloc slows every allocation and holds its own records: a diagnosis, never the default.
"""

from __future__ import annotations

import gc
import os
import signal
import time
import tracemalloc
from collections import Counter
from pathlib import Path
from types import FrameType

from ..environment import MEMORY_REPORT
from ..native_heap import trim

__all__ = ["MemoryReporter", "install_from_environment", "rss_bytes"]

_FRAMES = 25
_TOP = 25


def rss_bytes() -> int:
    """This process's resident set size in bytes (0 where /proc is missing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MemoryReporter:
    """Writes one report per call of ``write``, each compared with the one before."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._count = 0
        self._snapshot: tracemalloc.Snapshot | None = None
        self._types: Counter[str] = Counter()
        if not tracemalloc.is_tracing():
            tracemalloc.start(_FRAMES)

    def write(self) -> Path:
        """Collect, compare with the previous report, trim, and write a report; returns its path."""
        self._count += 1
        gc.collect()
        types = Counter(type(o).__qualname__ for o in gc.get_objects())
        snapshot = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__),)
        )
        traced, peak = tracemalloc.get_traced_memory()
        lines = [
            f"report {self._count} at {time.strftime('%H:%M:%S', time.gmtime())} UTC",
            f"rss {rss_bytes() >> 20} MB; tracemalloc {traced >> 20} MB (peak {peak >> 20} MB)",
            "",
            "objects by type (count, change since the previous report):",
        ]
        for name, n in types.most_common(40):
            lines.append(f"  {n:>9} {n - self._types.get(name, 0):>+9}  {name}")
        grown = sorted(
            ((n - self._types.get(name, 0), name) for name, n in types.items()), reverse=True
        )
        lines += ["", "types that grew most:"]
        lines += [f"  {d:>+9}  {name}" for d, name in grown[:25] if d > 0]
        if self._snapshot is not None:
            lines += ["", "Python allocations that grew most (by traceback):"]
            for stat in snapshot.compare_to(self._snapshot, "traceback")[:_TOP]:
                lines.append(
                    f"  {stat.size_diff / 1024:>+10.1f} KiB {stat.count_diff:>+8} blocks"
                    f" (now {stat.size / 1024:.1f} KiB)"
                )
                lines += [f"      {frame}" for frame in stat.traceback.format()[-12:]]
        self._snapshot = snapshot
        self._types = types
        before = rss_bytes()
        trimmed = trim()
        after = rss_bytes()
        lines += [
            "",
            f"malloc_trim(0): {'done' if trimmed else 'not available'}; "
            f"rss {before >> 20} MB -> {after >> 20} MB",
        ]
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"memory-{os.getpid()}-{self._count}.txt"
        path.write_text("\n".join(lines) + "\n")
        return path


def install_from_environment() -> MemoryReporter | None:
    """Start the reporter on ``SIGUSR1`` when ``WASM_RUNNER_MEMORY_REPORT`` names a directory."""
    directory = MEMORY_REPORT.text()
    if not directory or not hasattr(signal, "SIGUSR1"):
        return None
    reporter = MemoryReporter(Path(directory))

    def on_signal(signum: int, frame: FrameType | None) -> None:
        reporter.write()

    signal.signal(signal.SIGUSR1, on_signal)
    return reporter
