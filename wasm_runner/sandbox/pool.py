"""Warm pools: instances started and pre-warmed ahead of time, each used for exactly one run.

A slot is a guest that has started, imported its profile's modules (say numpy and pandas) and
is blocked on the control channel waiting for a program. ``take`` hands one over; budgets (fuel,
deadline, memory cap) are armed at the hand-over, on the guest's own thread, so warm-up never
counts against a run. A taken slot is never returned: after its run it is destroyed and a
background thread warms a replacement, one at a time, only in the gaps between the sandbox's runs
(from ``SETTLE_S`` after the last one ended, so the caller's own work with the result goes first)
and while fewer guests are active than there are cores, so refilling never slows a running job. ``take`` never starts a second
instance where one is already on its way: with no slot ready it takes the one being warmed (and
waits for it, which is never longer than starting a fresh instance would take, since that one
started earlier); only with nothing ready or warming does it answer None, and the caller starts a
fresh instance.

Every sandbox keeps a small ``plain`` pool by default (``DEFAULT_PRESTART`` slots, the
``WASM_RUNNER_PRESTART`` environment variable, ``Sandbox(prestart=N)``): runs that name no pool
take an instance started ahead of time.

Isolation: every slot starts from the same pristine snapshot, runs the same warm-up code and no
user code before its hand-over, so no run sees anything another run wrote, defined or imported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..environment import PRESTART
from ..grants import DiskQuota
from ..limits import Limits
from .guest import Guest, busy, restore_priority
from .workspace import extra_grant, place_files

__all__ = ["DEFAULT_PRESTART", "MAX_PRESTART", "SETTLE_S", "WARM_BOUND_S", "WARM_TIMEOUT_S", "WarmPool", "bind_slot",
           "default_prestart"]

WARM_TIMEOUT_S = 120.0  # how long a run waits for the slot being warmed that it claimed (normal priority then)
# How long a refill lets a slot warm before giving it up (a stuck warm-up must not hold the refill
# forever). Warming runs at a lower priority, so on a machine busy with other work it takes many
# times its CPU time: a bound of WARM_TIMEOUT_S failed the same preload again and again beside two
# CPU hogs, and the pool never filled (loaded run 5, issue 22).
WARM_BOUND_S = 600.0
# a refill starts this long after the sandbox's last run ended (no run in flight since): what
# the caller does with the result (its JSON, the HTTP response) must not wait for the interpreter
# lock behind the refill's host Python (docs/performance.md, the fast path)
SETTLE_S = 0.01
DEFAULT_PRESTART = 2  # plain instances every sandbox keeps started ahead of time
MAX_PRESTART = 8


def default_prestart() -> int:
    """How many plain instances a sandbox keeps started when not told: ``WASM_RUNNER_PRESTART``
    (0 to ``MAX_PRESTART``; 0 turns prestarting off), else ``DEFAULT_PRESTART``."""
    return PRESTART.whole(DEFAULT_PRESTART, MAX_PRESTART)


@dataclass(eq=False)
class _Warming:
    """The slot the refill thread is warming; a ``take`` that finds nothing ready claims it."""

    guest: Guest
    claimed: bool = False
    handed: Future[Guest | None] = field(default_factory=Future)


class WarmPool:
    def __init__(self, name: str, start_slot: Callable[[Limits], Guest], runs_in_flight: Callable[[], int], *,
                 size: int, preload: tuple[str, ...], memory_mb: int, refill: bool = True):
        """``start_slot(limits)``: a fresh guest started at low priority in a run folder of its
        own (the sandbox's, ``nice``); ``runs_in_flight()``: the sandbox's runs between their start
        and their result (a refill waits for none). ``refill=False``: warm ``size`` slots once and
        no more (a process that runs once)."""
        if not 0 <= size <= 64:
            raise ValueError("pool size must be between 0 and 64")
        self._start_slot = start_slot
        self._runs_in_flight = runs_in_flight
        self.name = name
        self.size = size
        self.preload = tuple(preload)
        self.limits = Limits(memory_mb=memory_mb).validate()
        self._ready: list[Guest] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._warming: _Warming | None = None
        self._to_warm: int | None = None if refill else size
        self._last_end = 0.0  # when a run of the sandbox last ended (``nudge``)
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

    def nudge(self) -> None:
        """A run of the sandbox ended: the refill thread goes on ``SETTLE_S`` from now."""
        self._last_end = time.monotonic()
        self._wake.set()

    @property
    def warming(self) -> bool:
        """Whether a slot is being started and warmed right now."""
        with self._lock:
            return self._warming is not None

    def take(self) -> Guest | None:
        """A warm, never-used slot; else the one being warmed (claimed, waited for); else None
        at once."""
        with self._lock:
            while self._ready:
                g = self._ready.pop(0)
                if not g.done.is_set():
                    self.taken += 1
                    self._wake.set()
                    return g
            warming = self._warming
            if warming is not None and not warming.claimed:
                warming.claimed = True
            else:
                warming = None
                self.misses += 1
        self._wake.set()
        if warming is None:
            return None
        if warming.guest.native_id is not None:  # a run waits on it now: normal priority
            restore_priority(warming.guest.native_id)
        try:
            handed = warming.handed.result(WARM_TIMEOUT_S)
        except FutureTimeout:
            handed = None
        with self._lock:
            if handed is None and not warming.handed.done():
                warming.claimed = False  # given up: when warm, it goes to the pool as usual
            elif handed is None and warming.handed.result() is not None:
                handed = warming.handed.result()  # handed over as the wait ended
            if handed is None:
                self.misses += 1
            else:
                self.taken += 1
        return handed

    def wait_ready(self, count: int | None = None, timeout: float = WARM_BOUND_S) -> bool:
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
            if self._to_warm == 0:
                return
            # Not while a run of this sandbox is in flight: starting an instance is mostly host
            # Python (the GIL), and each of the run's own host calls would then wait up to a
            # switch interval (5 ms) for it: a refill fills the gaps between runs, and under
            # continuous load runs start their own instance, as without a pool.
            if self.ready >= self.size or busy() or self._runs_in_flight():
                self._wake.wait(0.2)
                self._wake.clear()
                continue
            settle = self._last_end + SETTLE_S - time.monotonic()
            if settle > 0:  # the run that just ended: its caller's work goes first
                self._wake.wait(settle)
                self._wake.clear()
                continue
            if self._to_warm is not None:
                self._to_warm -= 1
            g = self._start_slot(self.limits)
            warming = _Warming(g)
            with self._lock:
                self._warming = warming
            g.io.submit({"kind": "warm", "preload": list(self.preload)})
            ok = g.io.wait_idle(WARM_BOUND_S) and not self._closed
            with self._lock:
                self._warming = None
                if ok and not warming.claimed:
                    self._ready.append(g)
                # to the run that claimed it, if one did (None: that run starts a fresh one)
                warming.handed.set_result(g if ok and warming.claimed else None)
            if ok:
                if g.native_id is not None:
                    restore_priority(g.native_id)  # warm: its run must not wait behind others
                self.warmed += 1
            else:
                self.failed += 1
                g.cancel()
                g.done.wait(5.0)
                g.ws.close()
                time.sleep(0.5)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        with self._lock:
            warming = self._warming
        if warming is not None and not warming.claimed:  # not left warming up to WARM_BOUND_S
            warming.guest.cancel()
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
