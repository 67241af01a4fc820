"""native_heap: glibc's arenas capped, and freed C memory handed back by a trim.

Each check runs in a fresh interpreter (the arena limit applies to arenas created after it, and
this test process has its own), which reads its arenas from glibc's ``malloc_info`` report and
its RSS from /proc.
"""

from __future__ import annotations

import ctypes.util
import json
import subprocess
import sys
import textwrap

import pytest

from wasm_runner import native_heap

pytestmark = pytest.mark.skipif(
    ctypes.util.find_library("c") is None or not sys.platform.startswith("linux"),
    reason="glibc's arenas are a Linux/glibc matter",
)

# Eight threads alive at once, each holding C memory: glibc gives each a new arena of its own
# until its limit is reached. The arenas are then counted from glibc's own malloc_info report.
_ARENAS = textwrap.dedent("""
    import ctypes, ctypes.util, json, os, sys, tempfile, threading
    from wasm_runner import native_heap
    limited = native_heap.limit_arenas(2) if sys.argv[1] == "limit" else None
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.fopen.restype = ctypes.c_void_p
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    all_in, done = threading.Barrier(9), threading.Event()
    def hold():
        block = libc.malloc(4096)
        all_in.wait()
        done.wait()
        libc.free(ctypes.c_void_p(block))
    threads = [threading.Thread(target=hold) for _ in range(8)]
    for t in threads:
        t.start()
    all_in.wait()
    path = os.path.join(tempfile.mkdtemp(), "info.xml")
    f = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, f)
    libc.fclose(f)
    done.set()
    for t in threads:
        t.join()
    print(json.dumps({"limited": limited, "arenas": open(path).read().count("<heap nr=")}))
""")

# 64 MiB of small blocks malloc'd and freed on a thread (its own arena), all but the last one so
# the arena cannot shrink from its top: the pages stay in the process until a trim.
_TRIM = textwrap.dedent("""
    import ctypes, ctypes.util, json, threading
    from wasm_runner import native_heap
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    def churn():
        blocks = [libc.malloc(16384) for _ in range(4096)]
        for b in blocks:
            libc.memset(b, 1, 16384)
        for b in blocks[:-1]:
            libc.free(b)
    t = threading.Thread(target=churn)
    t.start()
    t.join()
    held = rss()
    trimmed = native_heap.trim()
    print(json.dumps({"trimmed": trimmed, "held": held, "after": rss()}))
""")


def _run(script: str, *args: str) -> dict[str, int]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)}  # no MALLOC_ARENA_MAX
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                         check=True, timeout=120, env=env)
    return json.loads(out.stdout)


def test_limit_arenas_caps_the_arenas_of_many_threads_holding_memory() -> None:
    free = _run(_ARENAS, "free")
    limited = _run(_ARENAS, "limit")
    assert free["arenas"] > 2  # without the cap, the eight threads got arenas of their own
    assert limited["limited"] is True
    assert limited["arenas"] <= 2


def test_an_operators_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert native_heap.limit_arenas() is False


def test_trim_hands_freed_memory_back_to_the_system() -> None:
    seen = _run(_TRIM)
    assert seen["trimmed"] is True
    assert seen["held"] - seen["after"] >= 32 << 20  # of the 64 MiB freed, at least half returned
