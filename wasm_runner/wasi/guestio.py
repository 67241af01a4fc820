"""The host side of one guest instance (``GuestIO``): fd table, grants, quota, output streams,
stdin, the control channel and why the run must stop.

Host calls find their ``GuestIO`` through the calling thread: every guest runs on a thread of its
own, which sets ``current.io`` before it enters wasm.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import wasmtime as wt

from ..errors import WasmRunnerError
from ..grants import DiskQuota, Grant
from ..tiers import FLUSH_SECONDS
from .abi import CallerMem, Fault, Mem
from .control import ControlChannel
from .fdtable import Fd, initial_table

__all__ = ["GuestIO", "InputSource", "StopRun", "Stream", "current", "current_io", "memory"]


PACE_S = FLUSH_SECONDS  # the wrapper's pace flag: every 50 ms of its CPU time (the tiers' window) ...
PACE_WALL_S = 0.2  # ... or 200 ms of wall time, whichever comes first
INPUT_POLL_S = 0.1  # how often a wait for input looks for a cancel (it sleeps in between)


class InputSource(Protocol):
    """Interactive stdin: ``read`` returns bytes, ``b""`` at end of input, ``None`` when nothing
    arrived within ``timeout`` seconds (the run keeps waiting, up to its deadline)."""

    def read(self, max_bytes: int, timeout: float) -> bytes | None: ...


@dataclass
class Stream:
    """One output stream with its cap. ``on_chunk`` streams what is written, as it is written."""

    name: str
    cap: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    truncated: bool = False
    on_chunk: Callable[[str, bytes], None] | None = None

    def write(self, data: bytes) -> bool:
        """Keep what fits under the cap; False when the cap was reached (the run must stop)."""
        room = self.cap - self.size
        if len(data) > room:
            data = data[: max(room, 0)]
            self.truncated = True
        if data:
            self.chunks.append(data)
            self.size += len(data)
            if self.on_chunk is not None:
                try:
                    self.on_chunk(self.name, data)
                except Exception:  # a face's callback must not break the guest
                    self.on_chunk = None
        return not self.truncated

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    def reset(self, cap: int, on_chunk: Callable[[str, bytes], None] | None) -> None:
        self.chunks, self.size, self.truncated, self.cap, self.on_chunk = [], 0, False, cap, on_chunk


class StopRun(WasmRunnerError):
    """Recorded on a GuestIO when a host call decides the run must end (never raised into wasm)."""


class GuestIO(ControlChannel):
    """The host side of one guest instance: fd table, grants, quota, streams, stdin, control."""

    def __init__(self, grants: list[Grant], quota: DiskQuota, argv: list[str]):
        super().__init__()
        self.argv = [a.encode() for a in argv]
        self.env: list[bytes] = [b"LANG=C.UTF-8", b"HOME=/scratch", b"PYTHONHASHSEED=0"]
        self.grants = grants
        self.quota = quota
        self.fds: dict[int, Fd] = initial_table(grants)
        self.next_fd = len(self.fds)
        self.stdout = Stream("stdout", 1 << 20)
        self.stderr = Stream("stderr", 1 << 20)
        self.stdin: bytes = b""
        self.stdin_pos = 0
        self.input_source: InputSource | None = None
        self.memory: wt.Memory | None = None
        # run state
        self.deadline: float = float("inf")
        self.cancel: threading.Event | None = None
        self.stop_reason: str | None = None  # "timeout", "output", "cancelled", "internal", "exit"
        self.exit_code: int | None = None
        self.internal_error: str | None = None
        # interactive input: time blocked waiting for it is not run time (see read_stdin)
        self.input_wait_seconds: float = 300.0  # the bound on one wait (limits.input_wait_seconds)
        self.input_wait_s = 0.0  # total time this job waited for input
        self.waiting_since: float | None = None  # set while blocked waiting for input
        # the wrapper's pace flag (host address; see ControlChannel.take_report), set every PACE_S
        self.tick_host: int | None = None
        self.tick_last = 0.0
        self.tick_cpu = 0.0

    # ---- the run's end -------------------------------------------------------------------
    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason

    def should_stop(self) -> str | None:
        if self.stop_reason is not None:
            return self.stop_reason
        now = time.monotonic()
        if self.tick_host is not None:
            # the wrapper's pace flag: PACE_S of the guest's CPU time passed (its pace, whatever
            # the host's load), or PACE_WALL_S of wall time (output never waits longer)
            cpu = time.thread_time()
            if cpu - self.tick_cpu >= PACE_S:  # 1: a measure of its pace, and output is due
                ctypes.memset(self.tick_host, 1, 1)
                self.tick_last, self.tick_cpu = now, cpu
            elif now - self.tick_last >= PACE_WALL_S:  # 2: output is due (a loaded host)
                ctypes.memset(self.tick_host, 2, 1)
                self.tick_last = now
        if self.cancel is not None and self.cancel.is_set():
            self.stop("cancelled")
        elif now >= self.deadline:
            self.stop("timeout")
        return self.stop_reason

    def past(self, hard_stop: float) -> bool:
        """Whether a last-resort stop time has passed, not counting time spent waiting for
        input (that wait has its own bound, ``input_wait_seconds``)."""
        if self.waiting_since is not None:
            return False
        return time.monotonic() > hard_stop + self.input_wait_s

    def rebind(self, guest_path: str, grant: Grant | None) -> None:
        """Point the preopen at ``guest_path`` to another host folder, or hide it (``None``).

        Used by warm pools before a run is handed over: the guest's libc only knows the fd
        number, and every path is resolved through the grant at call time.
        """
        for f in list(self.fds.values()):
            if f.preopen == guest_path:
                if f.host_fd >= 0:
                    os.close(f.host_fd)
                if grant is None:
                    f.host_fd, f.grant, f.kind = -1, None, "hidden"
                else:
                    f.host_fd, f.grant, f.kind = os.dup(grant.root_fd), grant, "dir"

    def close(self) -> None:
        for f in self.fds.values():
            if f.host_fd >= 0:
                try:
                    os.close(f.host_fd)
                except OSError:
                    pass
        self.fds.clear()

    # ---- stdin once the program runs ---------------------------------------------------------
    def read_stdin(self, want: int) -> bytes:
        """Up to ``want`` bytes of the program's stdin: job frames while in the control phase,
        else the input source (waiting up to the deadline), else what was given up front."""
        if self.call_answer:
            return self.read_answer(want)
        if self.control:
            return self.read_control(want)
        if self.input_source is not None:
            return self._wait_for_input(want)
        data = self.stdin[self.stdin_pos : self.stdin_pos + want]
        self.stdin_pos += len(data)
        return data


    def _wait_for_input(self, want: int) -> bytes:
        """Block (holding no CPU) until the input source has data. The wait does not count
        toward the wall-clock limit: the deadline moves by the time waited. One wait longer
        than ``input_wait_seconds`` ends the run (``input_wait``): the input was abandoned."""
        source = self.input_source
        assert source is not None
        start = time.monotonic()
        give_up = start + self.input_wait_seconds
        self.waiting_since = start
        try:
            while True:
                if self.stop_reason is not None or (self.cancel is not None and self.cancel.is_set()):
                    self.should_stop()
                    return b""
                now = time.monotonic()
                if now >= give_up:
                    self.stop("input_wait")
                    return b""
                got = source.read(want, min(INPUT_POLL_S, give_up - now))
                if got is not None:
                    return got
        finally:
            waited = time.monotonic() - start
            self.waiting_since = None
            self.input_wait_s += waited
            self.deadline += waited


current = threading.local()


def current_io() -> GuestIO:
    """The ``GuestIO`` of the guest running on this thread."""
    return current.io  # type: ignore[no-any-return]


def memory(caller: wt.Caller | Mem) -> Mem:
    """Bounds-checked access to the calling guest's memory (a ``Mem`` given directly is used as is:
    host calls can be driven without an instance)."""
    if isinstance(caller, Mem):
        return caller
    io = current_io()
    if io.memory is None:
        got = caller.get("memory")
        if not isinstance(got, wt.Memory):
            raise Fault()
        io.memory = got
    return CallerMem(caller, io.memory)
