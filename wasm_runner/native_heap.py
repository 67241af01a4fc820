"""The C heap of a long-running server: few glibc arenas, and freed memory handed back when idle.

A server runs every guest on a thread of its own and decodes, encodes and compiles on others.
glibc's ``malloc`` gives threads that contend for the heap arenas of their own (up to 8 per core),
each grown to the peak of what its threads once held; freed chunks stay in the arena, split among
what is still in use, and are not returned to the system. Measured on ``wasm-runner serve``
(docs/performance.md, "Memory over a day of classes"): after each 30-student class the RSS stayed
~25 MB higher, in these arenas, while the Python heap (tracemalloc) stayed flat.

So ``serve`` (``limit_arenas``, before its threads start) caps the arenas at ``ARENA_MAX``, and its
lifetime task calls ``trim`` (glibc's ``malloc_trim(0)``: free pages of every arena back to the
system) every ``TRIM_SECONDS`` while no run is in flight. An operator's ``MALLOC_ARENA_MAX`` wins.
Elsewhere than glibc both are no-ops answering False.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from functools import cache

__all__ = ["ARENA_MAX", "TRIM_SECONDS", "limit_arenas", "trim"]

ARENA_MAX = 2  # the main arena and one for all other threads
TRIM_SECONDS = 30.0
_M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)


@cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name)
    if not hasattr(libc, "malloc_trim") or not hasattr(libc, "mallopt"):
        return None  # musl and others
    return libc


def limit_arenas(most: int = ARENA_MAX) -> bool:
    """Cap glibc's arenas at ``most`` for arenas created from now on; False where there is no
    glibc or the operator set ``MALLOC_ARENA_MAX`` (theirs applies)."""
    libc = _glibc()
    if libc is None or os.environ.get("MALLOC_ARENA_MAX"):
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, most))


def trim() -> bool:
    """Hand the free pages of every arena back to the system; False where there is no glibc."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True
