"""Sessions: one long-lived instance whose cells share variables and files."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import WasmRunnerError
from ..grants import collect_files
from ..network import NetworkCalls, RunNetwork
from ..host_functions import HostCalls, HostFunction, HostFunctions, InvalidFunctions, prepare_program
from ..inputs import check_source, stdin_bytes, upload_path
from ..limits import InvalidLimits, Limits
from ..result import FileOut, Result
from ..wasi import InputSource
from . import wrapper
from .classify import classify
from .guest import WARMUP_SECONDS, Guest, OutputCallback
from .sealing import default_secret, seal
from .session_state import (
    PAGE as PAGE_BYTES,
    Reference,
    SnapshotFailed,
    State,
    capture,
    note_of,
    parse,
    restore_files,
    restore_io,
    restore_memory,
)
from .workspace import MAX_FILES_OUT_BYTES, Workspace, write_upload

__all__ = ["REST_SECONDS", "Restore", "Session", "SessionEnded", "SessionHost", "StartGuest"]

REST_SECONDS = 30.0  # how long a snapshot or a resume waits for the instance to come to rest


class SessionEnded(WasmRunnerError, RuntimeError):
    """The session's instance is gone (closed, or ended by a limit)."""


Restore = Callable[[Guest, Any, Any], None]  # (guest, store, memory): a saved session's state put back
# (limits, data_dir, out_dir, files, collect_out, rest, restore) -> the guest started and its run folder
StartGuest = Callable[[Limits, Any, Any, "dict[str, bytes] | None", bool, bool, "Restore | None"],
                      "tuple[Guest, Workspace]"]


@dataclass(frozen=True)
class SessionHost:
    """What a session uses of the sandbox that opens it (``core.Sandbox``): its runtime's name,
    whether its instances rest between cells (they can then be saved), a guest started with its
    run folder, the fuel for a cell's CPU seconds, the store's memory cap for a cell's limits,
    and what snapshots are made against (a never-run instance, the image's identity)."""

    runtime: str
    rests: bool
    start_guest: StartGuest
    fuel_for: Callable[[float], int]
    memory_cap: Callable[[Limits], int]
    snapshot_reference: Callable[[], Reference]
    snapshot_image: str


class Session:
    """One long-lived instance: each ``run`` is a cell with its own CPU and wall limits.

    A cell that hits its CPU or wall limit, the output cap or crashes the interpreter ends the
    instance (``alive`` becomes False): its state cannot be trusted after a forced stop. A cell
    that raises an exception or calls ``sys.exit`` keeps the session alive.
    """

    def __init__(self, host: SessionHost, limits: Limits, data_dir: Any, out_dir: Any,
                 files: dict[str, bytes] | None, restore: State | None = None):
        self.host = host
        self.limits = limits
        self._dirs = (data_dir, out_dir)
        # what the snapshot it was resumed from noted (``snapshot(note=...)``); empty otherwise
        self.note: dict[str, int] = note_of(restore) if restore is not None else {}
        # a reactor's session rests between cells (its instance returns to the host): it can be
        # saved (``snapshot``) and resumed (``Sandbox.resume``); a command runtime's cannot
        rest = host.rests
        failed: list[BaseException] = []
        restore_fn = None
        if restore is not None:
            def restore_fn(g: Guest, store: Any, mem: Any) -> None:
                try:
                    roots = {gr.guest_path: Path(gr.host_path) for gr in g.ws.grants
                             if gr.guest_path in ("/scratch", "/tmp")}
                    restore_files(restore, roots, g.io.quota)
                    restore_memory(restore, store, mem)
                    restore_io(restore, g.io)
                except BaseException as e:
                    failed.append(e)
                    raise
        self._guest, self._ws = host.start_guest(limits, data_dir, out_dir, files, out_dir is None, rest, restore_fn)
        if rest and restore is None:
            self._guest.io.submit({"kind": "rest"})  # the wrapper starts, then rests at once
        if restore is not None:
            g = self._guest
            while not g.resting.wait(0.02):
                if g.done.is_set():
                    self._ws.close()
                    if failed:
                        raise failed[0]
                    raise SnapshotFailed(f"the snapshot could not be restored ({g.outcome.trap})")
        self._lock = threading.Lock()
        self._reseed = False  # a fork's copy: its next cell reseeds random, numpy and tempfile
        self._closed = False
        self.created = time.monotonic()
        self.last_used = self.created

    @property
    def alive(self) -> bool:
        return not self._closed and not self._guest.done.is_set()

    @property
    def can_snapshot(self) -> bool:
        """Whether ``snapshot`` can save it: its runtime's instance rests between cells (the
        default runtime's; a command runtime's, ``small``, cannot be saved)."""
        return bool(self._guest.rest)

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
        network: RunNetwork | None = None,
    ) -> Result:
        """Run one cell. ``functions``: the app's functions this cell may call (``from host
        import name``), within the cell's host-function limits. ``network``: where the cell may
        connect (``network.RunNetwork``, its caps per cell; none: the network is off)."""
        t0 = time.perf_counter()
        rt = self.host.runtime
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
        if isinstance(code, bytes):
            code = code.decode("utf-8")
        net = network or RunNetwork(())
        try:
            host_functions, code, filename = prepare_program(functions, code, filename, display, cell,
                                                             (net.on, net.off))
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
            io.host_call = NetworkCalls(net, io, None if host_functions is None else HostCalls(host_functions, cell, io))
            job = wrapper.job(code, cell, self.host.fuel_for(cell.cpu_seconds), filename,
                              once=False, session=True, display=display,
                              memory_cap=self.host.memory_cap(cell))
            if g.rest:
                job["rest"] = True
            if self._reseed:
                job["reseed"], self._reseed = True, False
            io.submit(job)
            cell_no = g.wake() if g.rest else 0
            # wait for the cell's report (the wrapper flips to the control channel) or the end
            hard_stop = time.monotonic() + WARMUP_SECONDS + cell.wall_seconds + 5.0
            while not g.done.wait(0.01):
                # the cell ended when the wrapper reported AND came back for its next job (or to
                # rest): a report the program forged on fd 0 ends nothing while it still runs
                if io.reports and io.control and (io.idle or (cell_no and g.cells_returned >= cell_no)):
                    break
                if cell_no and g.cells_returned >= cell_no and not io.reports:
                    g.cancel()  # the wrapper came back without a report: the instance is not trusted
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

    def _capture(self, note: Mapping[str, int] | None = None) -> bytes:
        """The state's body (``session_state``) of this resting session; under ``_lock``."""
        if not self.alive:
            raise SessionEnded("the session has ended")
        g = self._guest
        if not g.rest:
            raise SnapshotFailed(f"sessions of the {self.host.runtime} runtime cannot be saved")
        ref = self.host.snapshot_reference()
        out: list[bytes] = []

        def take(store: Any) -> None:
            extra: dict[str, Any] = {"runtime": self.host.runtime}
            if note:
                extra["note"] = dict(note)
            out.append(capture(ref, store, g.io, self.limits.to_dict(), extra))

        if not g.at_rest(take, REST_SECONDS):
            raise SnapshotFailed("the session did not come to rest (it ended or is still busy)")
        return out[0]

    def fork(self, copies: int = 1, *, keep_seeds: bool = False,
             folders: Sequence[tuple[Any, Any]] | None = None) -> list[Session]:
        """``copies`` new sessions, each continuing from this one's state now (as
        ``snapshot`` and ``resume`` would, without sealing), independent of it and of each
        other. Each copy's next cell reseeds ``random``, numpy's global generator and
        ``tempfile``'s names from fresh entropy unless ``keep_seeds``. A copy has its own
        ``/scratch`` and ``/tmp`` (copied) and this session's ``data_dir`` and ``out_dir``, or
        ``folders[i]`` (``(data_dir, out_dir)``, the same grants as this session's) for copy i."""
        if not 1 <= copies <= 64:
            raise ValueError("copies must be between 1 and 64")
        if folders is not None and len(folders) != copies:
            raise ValueError("folders must name one (data_dir, out_dir) per copy")
        with self._lock:
            body = self._capture()
        state = parse(body, self.host.memory_cap(self.limits) // PAGE_BYTES + 1)
        made: list[Session] = []
        try:
            for i in range(copies):
                dirs = folders[i] if folders is not None else self._dirs
                s = Session(self.host, self.limits, *dirs, None, restore=state)
                s._reseed = not keep_seeds
                made.append(s)
        except BaseException:
            for s in made:
                s.close()
            raise
        return made

    def snapshot(self, *, owner: str = "", secret: bytes | None = None, compress: bool = True,
                 profile: str = "", note: Mapping[str, int] | None = None, user: str = "",
                 expires_at: float | None = None) -> bytes:
        """The session's state as a sealed snapshot (``sealing``): its memory (variables,
        imported modules, random state), the files in ``/scratch`` and ``/tmp``, the files it
        keeps open and its limits. ``Sandbox.resume`` with the same ``owner`` and ``secret``
        (default: ``sealing.default_secret()``) continues it exactly; the session itself goes on.
        It is Zstandard-compressed before it is encrypted (about 2.3 times smaller; a few ms each
        way, docs/performance.md); ``compress=False`` keeps it as it is.
        ``profile`` (a server's profile the session runs under) and its runtime are recorded in
        the snapshot's authenticated header (``sealing.read_label``). ``note`` (at most 8 names
        with whole numbers) is kept in it too and is the resumed session's ``note``.
        ``user`` (a user of ``owner``) and ``expires_at`` (Unix seconds) bind it further: it then
        resumes only for that user and only until then (``sealing``, format version 6).
        Raises ``SnapshotFailed`` when it cannot be saved (ended, busy past ``REST_SECONDS``,
        a link in its folders...)."""
        with self._lock:
            body = self._capture(note)
        return seal(body, owner=owner, secret=default_secret() if secret is None else secret,
                    image=self.host.snapshot_image, compress=compress, profile=profile,
                    runtime=self.host.runtime, user=user, expires_at=expires_at)

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
