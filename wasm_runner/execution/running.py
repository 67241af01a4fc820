"""``Runner``: a job admitted through its ``Gate``, its blocking sandbox call run on a worker thread
(cancelled when the awaiting task is), how it ended recorded (its ``Recorder``); the sandboxes, a
runtime's readiness and the memory a run holds are its ``SandboxProvider``'s. The ``Executor`` is
one (with its ``SessionStore``, which uses a runner for its sessions' calls).

Its two collaborators are Protocols, so that the parts above (the server's
``sandbox.provider.ServerSandboxes``, ``observability.RunRecord``) are handed in, never imported:
``LocalSandboxes`` (the process-wide sandboxes, no pools, no warm-up) and ``OneSandbox`` (one
sandbox for everything: the CLI) are the providers of the faces without a server.

A run waiting for interactive input gives its slot back meanwhile (``admission.Parking``:
``Gate.park``, ``Gate.resume``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar, Unpack

from ..admission.gate import Gate
from ..admission.parking import Parking
from ..limits import Limits
from ..result import Result, Status
from .job import Job
from .policy import PolicyLike
from .refusal import Refused

if TYPE_CHECKING:
    from ..sandbox.core import Sandbox
    from ..wasi.guestio import InputSource

__all__ = ["LocalSandboxes", "OneSandbox", "Recorder", "Runner", "RunnerOptions", "SandboxProvider", "SessionFacts"]

log = logging.getLogger("wasm_runner.execution")

T = TypeVar("T")


class SandboxProvider(Protocol):
    """Where a runner's jobs run: the sandbox of a runtime and image, a warm pool on it for a
    policy, the memory a run holds of the gate's budget, and readiness (the server's:
    ``sandbox.provider.ServerSandboxes``)."""

    def sandbox_for(self, runtime: str, image: str | None) -> Sandbox:
        """The sandbox of ``runtime`` and ``image`` (blocking: may load or compile it)."""
        ...

    def pool_for(self, sandbox: Sandbox, policy: PolicyLike) -> str | None:
        """The warm pool of ``policy`` on ``sandbox``, or None."""
        ...

    def memory_for(self, policy: PolicyLike, runtime: str, limits: Limits) -> int:
        """The MB a run (or session) of ``policy`` on ``runtime`` holds of the memory budget."""
        ...

    async def ready(self, runtime: str, image: str | None) -> None:
        """Return once the sandbox of ``runtime`` and ``image`` is ready, or raise ``Refused``."""
        ...


class SessionFacts(Protocol):
    """What a session's record names (a ``sessions.LiveSession`` has them)."""

    @property
    def id(self) -> str: ...

    @property
    def tenant(self) -> str: ...

    @property
    def profile(self) -> PolicyLike: ...


class Recorder(Protocol):
    """The record of every finished run and of a session's fork, snapshot or resume (the
    server's: ``observability.RunRecord``, metrics and the audit log)."""

    def record(self, job: Job, result: Result, waited: float) -> None:
        """``job`` ended as ``result`` after waiting ``waited`` seconds for a slot."""
        ...

    def session_event(self, event: str, live: SessionFacts | None, fields: dict[str, str]) -> None:
        """A session's (``live``: a ``sessions.LiveSession``, or None for a saved state) event."""
        ...


class LocalSandboxes:
    """The process-wide sandboxes (``sandbox.default_sandbox``), no warm pools, a run holds its
    memory limit, nothing to wait for (the first run compiles its runtime)."""

    def sandbox_for(self, runtime: str, image: str | None) -> Sandbox:
        from ..sandbox import default_sandbox  # imported late so faces load fast

        return default_sandbox(runtime, image if runtime == "default" else None)

    def pool_for(self, sandbox: Sandbox, policy: PolicyLike) -> str | None:
        return None

    def memory_for(self, policy: PolicyLike, runtime: str, limits: Limits) -> int:
        return limits.memory_mb

    async def ready(self, runtime: str, image: str | None) -> None:
        return None


class OneSandbox(LocalSandboxes):
    """Everything runs in this one sandbox (the CLI, tests)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox

    def sandbox_for(self, runtime: str, image: str | None) -> Sandbox:
        return self.sandbox


class RunnerOptions(TypedDict, total=False):
    """A ``Runner``'s keywords (and so an ``Executor``'s); each is optional."""

    gate: Gate | None  # admits runs; None: every run is admitted
    recorder: Recorder | None  # told of every finished run (and session event)
    workers: int  # worker threads (8)


class Runner:
    """Admitted runs on worker threads, for one server (or one local face).

    ``sandboxes`` is its ``SandboxProvider`` (default ``LocalSandboxes``: the process-wide ones);
    ``gate`` admits runs (None: no admission); ``recorder`` records every finished run (metrics,
    audit; None: no record).
    """

    def __init__(self, sandboxes: SandboxProvider | None = None, **options: Unpack[RunnerOptions]) -> None:
        self.sandboxes: SandboxProvider = sandboxes or LocalSandboxes()
        self.gate = options.get("gate")
        self.recorder = options.get("recorder")
        self._active: set[threading.Event] = set()  # cancel events of running guests
        self._threads_lock = threading.Lock()
        self._in_threads = 0
        self._pool = ThreadPoolExecutor(max_workers=options.get("workers", 8), thread_name_prefix="wasm-guest")

    async def ready(self, runtime: str, image: str | None) -> None:
        """Wait until the sandbox of ``runtime`` and ``image`` is ready, or ``Refused``."""
        await self.sandboxes.ready(runtime, image)

    async def admit_and_run(
        self,
        job: Job,
        call: Callable[[threading.Event, InputSource | None], Result],
        *,
        memory_mb: int,
        cancel: threading.Event | None = None,
        on_admitted: Callable[[], None] | None = None,
        input_source: InputSource | None = None,
    ) -> Result:
        """Wait for a slot (holding ``memory_mb`` of the budget), run ``call(cancel, source)`` on a
        worker thread, record the result. The slot is freed when the thread returns, also after a
        cancel. ``source`` is ``input_source`` (interactive input) wrapped so that the run gives
        its slot back while it waits for input (``Gate.park``, ``Gate.resume``)."""
        cancel = cancel or threading.Event()
        queued_at = time.monotonic()
        slot = await self.gate.acquire(job.tenant, memory_mb) if self.gate is not None else None
        waited = time.monotonic() - queued_at
        if on_admitted is not None:
            on_admitted()
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        self._active.add(cancel)
        source: InputSource | None = input_source
        parking = None
        if input_source is not None and slot is not None and self.gate is not None:
            parking = source = Parking(input_source, self.gate, slot, job.tenant, loop, cancel)
        future = loop.run_in_executor(self._pool, self._guarded, lambda: call(cancel, source))

        def finished(fut: asyncio.Future[Result]) -> None:
            self._active.discard(cancel)
            if slot is not None:
                slot.release()
            ok = not fut.cancelled() and fut.exception() is None
            if self.gate is not None:  # run time, without the time spent waiting for input
                thinking = fut.result().input_wait_ms / 1000 if ok else 0.0
                self.gate.note_duration(time.monotonic() - started - thinking)
            if ok:
                resumed = parking.resume_seconds if parking is not None else 0.0
                self._record(job, fut.result(), waited + resumed)

        future.add_done_callback(finished)
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            cancel.set()
            raise

    def _guarded(self, call: Callable[[], Result]) -> Result:
        with self._threads_lock:
            self._in_threads += 1
        try:
            return call()
        except Refused:
            raise
        except Exception as exc:  # a sandbox bug must not take the server down
            log.exception("sandbox call failed")
            return Result(status=Status.INTERNAL_ERROR, message=f"internal error: {exc}")
        finally:
            with self._threads_lock:
                self._in_threads -= 1

    def _record(self, job: Job, result: Result, waited: float) -> None:
        if self.recorder is None:
            return
        try:
            self.recorder.record(job, result, waited)
        except Exception:
            log.exception("recording a finished run failed")

    @property
    def guests_in_threads(self) -> int:
        """Sandbox calls executing on worker threads right now (counted by the threads)."""
        with self._threads_lock:
            return self._in_threads

    async def call(self, fn: Callable[[], T]) -> T:
        """Run a short blocking call (session set-up, upload, close) on the worker pool."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def cancel_running(self) -> None:
        """Cancel every running guest (each run ends and is answered as cancelled)."""
        for cancel in list(self._active):
            cancel.set()

    def shutdown(self) -> None:
        """Cancel every running guest and stop the worker pool."""
        self.cancel_running()
        self._pool.shutdown(wait=False, cancel_futures=True)
