"""Sessions: one long-lived instance whose cells share variables and files."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ..errors import WasmRunnerError
from ..grants import collect_files
from ..host_functions import HostCalls, HostFunction, HostFunctions, InvalidFunctions, prepare_program
from ..inputs import check_source, stdin_bytes, upload_path
from ..limits import InvalidLimits, Limits
from ..result import FileOut, Result
from ..wasi import InputSource
from . import wrapper
from .classify import classify
from .guest import WARMUP_SECONDS, Guest, GuestHost, OutputCallback
from .workspace import MAX_FILES_OUT_BYTES, Workspace, write_upload

__all__ = ["Session", "SessionEnded", "SessionHost"]


class SessionEnded(WasmRunnerError, RuntimeError):
    """The session's instance is gone (closed, or ended by a limit)."""


class SessionHost(GuestHost, Protocol):
    """What a session reads of its sandbox: what a guest does, its run folder (or an image's
    guest with its folder), and the fuel for a cell's CPU seconds."""

    def new_workspace(self, limits: Limits, data_dir: Any, out_dir: Any, files: dict[str, bytes] | None,
                      collect_out: bool, placeholders: bool = False) -> Workspace: ...
    def image_guest(self, limits: Limits, data_dir: Any, out_dir: Any, files: dict[str, bytes] | None,
                    collect_out: bool) -> tuple[Guest, Workspace]: ...
    def fuel_for(self, cpu_seconds: float) -> int: ...


class Session:
    """One long-lived instance: each ``run`` is a cell with its own CPU and wall limits.

    A cell that hits its CPU or wall limit, the output cap or crashes the interpreter ends the
    instance (``alive`` becomes False): its state cannot be trusted after a forced stop. A cell
    that raises an exception or calls ``sys.exit`` keeps the session alive.
    """

    def __init__(self, sb: SessionHost, limits: Limits, data_dir: Any, out_dir: Any, files: dict[str, bytes] | None):
        self.sb = sb
        self.limits = limits
        if sb.via_turn:
            self._guest, self._ws = sb.image_guest(limits, data_dir, out_dir, files, collect_out=out_dir is None)
        else:
            self._ws = sb.new_workspace(limits, data_dir, out_dir, files, collect_out=out_dir is None)
            self._guest = Guest(sb, self._ws, limits, wrapper.argv(sb.boot))
        self._lock = threading.Lock()
        self._closed = False
        self.created = time.monotonic()
        self.last_used = self.created

    @property
    def alive(self) -> bool:
        return not self._closed and not self._guest.done.is_set()

    def upload(self, name: str, data: bytes) -> str:
        """Place a file in the session's ``/scratch``; returns its guest path."""
        upload_path(name)
        if not self.alive:
            raise SessionEnded("the session has ended")
        if len(data) > self._ws.quota.room():
            raise ValueError(f"{name!r} ({len(data)} bytes) does not fit in the session's disk quota")
        with self._lock:
            rel = write_upload(Path(self._ws.scratch.host_path), name, data, replace=True)
            self._ws.quota.used_bytes += len(data)
            self._ws.quota.used_files += 1
        return f"/scratch/{rel}"

    def run(
        self,
        code: str,
        *,
        limits: Limits | None = None,
        stdin: bytes | str | None = None,
        on_output: OutputCallback | None = None,
        input_source: InputSource | None = None,
        cancel: threading.Event | None = None,
        display: bool | str = True,
        filename: str | None = None,
        functions: Mapping[str, HostFunction] | HostFunctions | None = None,
    ) -> Result:
        """Run one cell. ``functions``: the app's functions this cell may call (``from host
        import name``), within the cell's host-function limits."""
        t0 = time.perf_counter()
        rt = self.sb.runtime.name
        problem = check_source(code, filename)
        if problem:
            return Result.invalid(problem[0].upper() + problem[1:] + ".", rt)
        try:
            cell = self.limits.tightened(limits) if limits is not None else self.limits
            data = stdin_bytes(stdin)
        except InvalidLimits as e:
            return Result.invalid(f"Invalid limits: {e}.", rt)
        except ValueError as e:
            return Result.invalid(f"Invalid input: {e}.", rt)
        host_functions = None
        if functions is not None:
            if isinstance(code, bytes):
                code = code.decode("utf-8")
            try:
                host_functions, code, filename = prepare_program(functions, code, filename, display, cell)
            except InvalidFunctions as e:
                return Result.invalid(f"Invalid functions: {e}.", rt)
        with self._lock:
            if not self.alive:
                raise SessionEnded("the session has ended")
            g = self._guest
            io = g.io
            io.reports.clear()
            io.stdout.reset(cell.stdout_bytes, on_output)
            io.stderr.reset(cell.stderr_bytes, on_output)
            io.stdin, io.stdin_pos, io.input_source, io.cancel = data, 0, input_source, cancel
            io.quota.refused = False
            io.host_call = None if host_functions is None else HostCalls(host_functions, cell, io)
            io.submit(wrapper.job(code, cell, self.sb.fuel_for(cell.cpu_seconds), filename,
                                  once=False, session=True, display=display,
                                  memory_cap=self.sb.memory_cap(cell)))
            # wait for the cell's report (the wrapper flips to the control channel) or the end
            hard_stop = time.monotonic() + WARMUP_SECONDS + cell.wall_seconds + 5.0
            while not g.done.wait(0.01):
                if io.reports and io.control:
                    break
                if cancel is not None and cancel.is_set():
                    io.stop("cancelled")
                if io.past(hard_stop):
                    io.stop("timeout")
            io.host_call = None  # between cells no code runs: nothing to call
            res = classify(g, cell, t0, rt, cell_done=not g.done.is_set())
            self.last_used = time.monotonic()
            if self._ws.out is not None:
                res.files = [FileOut(p, c) for p, c in collect_files(self._ws.out, MAX_FILES_OUT_BYTES)]
            return res

    def close(self) -> None:
        """End the instance and remove its folders."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._guest.cancel()
            self._guest.done.wait(5.0)
            self._ws.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
