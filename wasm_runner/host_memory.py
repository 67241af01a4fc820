"""How much memory this host gives the process, and the server's default memory budget from it.

The default ``memory_budget_mb`` is half of that memory (the rest is the server process, its
compiled modules, the page cache and everything else on the host), and never below
``MIN_BUDGET_MB``. "That memory" is the smaller of the machine's physical memory and the
cgroup limit the process runs under (a container's ``memory.max`` with cgroup v2, or
``memory.limit_in_bytes`` with v1), so a server in a 3 GiB container budgets 1.5 GiB, not half of
the node. Replicas started together by ``wasm-runner cluster`` on one host divide it
(``default_memory_budget_mb(shares=N)``).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["MIN_BUDGET_MB", "available_memory_mb", "default_memory_budget_mb"]

MIN_BUDGET_MB = 1024
_CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),                       # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),     # cgroup v1
)


def _physical_mb() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1 << 20)
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup_mb() -> int | None:
    for path in _CGROUP_LIMITS:
        try:
            raw = path.read_text().strip()
        except OSError:
            continue
        if raw.isdigit():  # "max" (v2) or a huge number (v1) means no limit
            value = int(raw) // (1 << 20)
            if value < (1 << 40):
                return value
    return None


def available_memory_mb() -> int | None:
    """The memory this process may use in MB: physical memory or its cgroup's limit, whichever
    is smaller; None when neither can be read."""
    known = [v for v in (_physical_mb(), _cgroup_mb()) if v]
    return min(known) if known else None


def default_memory_budget_mb(shares: int = 1) -> int:
    """Half of ``available_memory_mb()`` divided among ``shares`` servers on this host, at
    least ``MIN_BUDGET_MB`` (2048 when the host's memory cannot be read)."""
    available = available_memory_mb()
    if available is None:
        return 2048
    return max(MIN_BUDGET_MB, available // 2 // max(1, shares))
