"""Warm pools: instances started and pre-warmed ahead of time, each used for exactly one run.

A slot is a guest that has started, imported its profile's modules (say numpy and pandas) and
is blocked on the control channel waiting for a program. ``take`` hands one over; budgets (fuel,
deadline, memory cap) are armed at the hand-over, on the guest's own thread, so warm-up never
counts against a run. A taken slot is never returned: after its run it is destroyed and a
background thread warms a replacement, one at a time and only while fewer runs are active than
there are cores, so refilling never starves running jobs. ``take`` never waits: an empty pool
answers None and the caller starts a fresh instance.

Isolation: every slot starts from the same pristine snapshot, runs the same warm-up code and no
user code before its hand-over, so no run sees anything another run wrote, defined or imported.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Protocol

from ..grants import DiskQuota
from ..limits import Limits
from . import wrapper
from .guest import Guest, GuestHost, busy, restore_priority
from .workspace import Workspace, extra_grant, place_files

__all__ = ["WARM_TIMEOUT_S", "PoolHost", "WarmPool", "bind_slot"]

WARM_TIMEOUT_S = 120.0


class PoolHost(GuestHost, Protocol):
    """What a pool reads of its sandbox: what a guest does, and a run folder for each slot."""

    def new_workspace(self, limits: Limits, data_dir: str | os.PathLike[str] | None,
                      out_dir: str | os.PathLike[str] | None, files: dict[str, bytes] | None,
                      collect_out: bool, placeholders: bool = False) -> Workspace: ...


class WarmPool:
    def __init__(self, sb: PoolHost, name: str, *, size: int, preload: tuple[str, ...], memory_mb: int):
        if not 0 <= size <= 64:
            raise ValueError("pool size must be between 0 and 64")
        self.sb = sb
        self.name = name
        self.size = size
        self.preload = tuple(preload)
        self.limits = Limits(memory_mb=memory_mb).validate()
        self._ready: list[Guest] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self.taken = 0
        self.misses = 0
        self.warmed = 0
        self.failed = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._refill, name=f"wasm-runner-pool-{self.name}", daemon=True)
        self._thread.start()

    @property
    def ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def take(self) -> Guest | None:
        """A warm, never-used slot, or None at once when none is ready."""
        with self._lock:
            while self._ready:
                g = self._ready.pop(0)
                if not g.done.is_set():
                    self.taken += 1
                    self._wake.set()
                    return g
            self.misses += 1
        self._wake.set()
        return None

    def wait_ready(self, count: int | None = None, timeout: float = WARM_TIMEOUT_S) -> bool:
        """Block until ``count`` slots (default: the pool's size) are warm; for tests and bench."""
        want = self.size if count is None else count
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.ready >= want:
                return True
            time.sleep(0.02)
        return False

    def _refill(self) -> None:
        while not self._closed:
            if self.ready >= self.size or busy():
                self._wake.wait(0.2)
                self._wake.clear()
                continue
            ws = self.sb.new_workspace(self.limits, None, None, None, False, placeholders=True)
            g = Guest(self.sb, ws, self.limits, wrapper.argv(self.sb.boot), nice=True)
            g.io.submit({"kind": "warm", "preload": list(self.preload)})
            if g.io.wait_idle(WARM_TIMEOUT_S) and not self._closed:
                restore_priority(g.native_id)  # warm: its run must not wait behind others
                self.warmed += 1
                with self._lock:
                    self._ready.append(g)
            else:
                self.failed += 1
                g.cancel()
                g.done.wait(5.0)
                ws.close()
                time.sleep(0.5)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10.0)
        with self._lock:
            slots, self._ready = self._ready, []
        for g in slots:
            g.cancel()
            g.done.wait(5.0)
            g.ws.close()


def bind_slot(guest: Guest, limits: Limits, data_dir: Any, out_dir: Any,
              files: dict[str, bytes] | None, collect_out: bool) -> None:
    """Give a warm slot this run's grants, quota and caps before the program is handed over."""
    ws, io = guest.ws, guest.io
    io.reports.clear()
    if files:
        place_files(Path(ws.scratch.host_path), files)
    io.rebind("/data", extra_grant(ws, "/data", data_dir, writable=False))
    out = extra_grant(ws, "/out", out_dir, writable=True)
    if out is not None or not collect_out:  # with collect_out alone the slot's own /out serves
        io.rebind("/out", out)
        ws.out = out
    quota = DiskQuota(limits.disk_bytes, int(limits.max_files))
    for f in io.fds.values():
        if f.preopen is not None and f.grant is not None and f.grant.writable:
            quota.count_existing(f.grant)
    io.quota = quota
    ws.quota = quota
    io.stdout.cap, io.stderr.cap = limits.stdout_bytes, limits.stderr_bytes
    guest.limits = limits
