"""``Runner``: a job admitted through its ``Gate``, its blocking sandbox call run on a worker thread
(cancelled when the awaiting task is), how it ended recorded (``on_done``); the sandboxes, a
runtime's readiness and the memory a run holds. The ``Executor`` is one (with its ``SessionStore``,
which uses a runner for its sessions' calls).

A run waiting for interactive input gives its slot back meanwhile (``admission.Parking``:
``Gate.park``, ``Gate.resume``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict, TypeVar, Unpack

from ..admission.gate import Gate
from ..admission.parking import Parking
from ..limits import Limits
from ..result import Result, Status
from .job import Job
from .policy import PolicyLike
from .refusal import Refused

__all__ = ["MemoryFor", "OnDone", "PoolFor", "Prepare", "Runner", "RunnerOptions", "SandboxFor"]

log = logging.getLogger("wasm_runner.execution")

T = TypeVar("T")


OnDone = Callable[[Job, Result, float], None]  # the job, how it ended, seconds it waited for a slot
PoolFor = Callable[[Any, PolicyLike], "str | None"]  # (sandbox, policy) -> warm pool name
SandboxFor = Callable[[str, "str | None"], Any]  # (runtime, image) -> sandbox
Prepare = Callable[[str, "str | None"], Awaitable[None]]  # (runtime, image): ready, or Refused
MemoryFor = Callable[[PolicyLike, str, Limits], int]  # (policy, runtime, limits) -> MB to hold


def _default_sandbox_for(runtime: str, image: str | None) -> Any:
    # the core sandbox; imported late so faces load fast
    from ..sandbox import default_sandbox

    return default_sandbox(runtime, image if runtime == "default" else None)


def _memory_limit(policy: PolicyLike, runtime: str, limits: Limits) -> int:
    return limits.memory_mb


class RunnerOptions(TypedDict, total=False):
    """A ``Runner``'s keywords (and so an ``Executor``'s); each is optional."""

    gate: Gate | None  # admits runs; None: every run is admitted
    on_done: OnDone | None  # told of every finished run
    pool_for: PoolFor | None  # a warm pool for a run, or None
    memory_for: MemoryFor | None  # the memory a run holds in the gate (default: its memory limit)
    prepare: Prepare | None  # returns once a runtime's sandbox is ready, or raises Refused
    workers: int  # worker threads (8)


class Runner:
    """Admitted runs on worker threads, for one server (or one local face).

    ``sandbox_for(runtime, image)`` returns the sandbox of a runtime and image (default: the
    process-wide ones); ``gate`` admits runs (None: no admission); ``on_done(job, result, waited)``
    records every finished run (metrics, audit); ``pool_for(sandbox, policy)`` names a warm pool or
    None; ``memory_for(policy, runtime, limits)`` is what a run or session holds of the gate's
    memory budget (default: its memory limit); ``prepare(runtime, image)`` returns once that
    sandbox is ready or raises ``Refused`` (the server's ``warmup.Warmup``: runs wait while their
    runtime is compiled in the background; default: none, the first run compiles it).
    """

    def __init__(self, sandbox_for: SandboxFor | None = None, **options: Unpack[RunnerOptions]) -> None:
        self.sandbox_for = sandbox_for or _default_sandbox_for
        self.gate = options.get("gate")
        self.on_done = options.get("on_done")
        self.pool_for = options.get("pool_for")
        self.memory_for = options.get("memory_for") or _memory_limit
        self.prepare = options.get("prepare")
        self._active: set[threading.Event] = set()  # cancel events of running guests
        self._threads_lock = threading.Lock()
        self._in_threads = 0
        self._pool = ThreadPoolExecutor(max_workers=options.get("workers", 8), thread_name_prefix="wasm-guest")

    async def ready(self, runtime: str, image: str | None) -> None:
        """Wait until the sandbox of ``runtime`` and ``image`` is ready, or ``Refused``."""
        if self.prepare is not None:
            await self.prepare(runtime, image)

    async def admit_and_run(
        self,
        job: Job,
        call: Callable[[threading.Event, Any], Result],
        *,
        memory_mb: int,
        cancel: threading.Event | None = None,
        on_admitted: Callable[[], None] | None = None,
        input_source: Any = None,
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
        source = input_source
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
        if self.on_done is None:
            return
        try:
            self.on_done(job, result, waited)
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
