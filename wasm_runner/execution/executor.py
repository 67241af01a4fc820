"""``Executor``: the one way every face reaches guests. It admits a ``Job`` (its ``Gate``), runs the
blocking sandbox call on a worker thread (cancelled when the awaiting task is), records how it
ended (``on_done``) and keeps the one ``SessionStore``.

A run waiting for interactive input gives its slot back meanwhile (``_Parking``: ``Gate.park``,
``Gate.resume``). ``run_sync`` is the same call on the caller's thread for code without an event
loop (the CLI).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ..host_functions import InvalidFunctions
from ..limits import Limits
from ..result import Result, Status
from .gate import Claims, Gate, Ticket
from .job import Job, OutputCallback
from .policy import CallerLike, PolicyLike
from .refusal import Refused
from .sessions import SessionListener, SessionStore

__all__ = ["Executor", "MemoryFor", "OnDone", "PoolFor", "Prepare", "SandboxFor"]

log = logging.getLogger("wasm_runner.execution")

T = TypeVar("T")


OnDone = Callable[[Job, Result, float], None]  # the job, how it ended, seconds it waited for a slot
PoolFor = Callable[[Any, PolicyLike], "str | None"]  # (sandbox, policy) -> warm pool name
SandboxFor = Callable[[str, "str | None"], Any]  # (runtime, image) -> sandbox
Prepare = Callable[[str, "str | None"], Awaitable[None]]  # (runtime, image): ready, or Refused
MemoryFor = Callable[[PolicyLike, str, Limits], int]  # (policy, runtime, limits) -> MB to hold


class _Parking:
    """The input source of an admitted run: while the guest waits for input its slot is parked
    (``Gate.park``); when input arrives it takes a slot again (``Gate.resume``) before the guest
    reads it. ``read`` runs on the guest's thread; the gate lives on the event loop."""

    def __init__(
        self,
        source: Any,
        gate: Gate,
        ticket: Ticket,
        tenant: CallerLike,
        loop: asyncio.AbstractEventLoop,
        cancel: threading.Event,
    ) -> None:
        self.source = source
        self.gate = gate
        self.ticket = ticket
        self.tenant = tenant
        self.loop = loop
        self.cancel = cancel
        self.parked = False
        self.resume_seconds = 0.0  # time spent waiting for a slot after input arrived

    def read(self, max_bytes: int, timeout: float) -> bytes | None:
        got: bytes | None
        if not self.parked:
            got = self.source.read(max_bytes, 0.0)
            if got is not None:
                return got  # input was there: no wait, nothing to park
            self.parked = self._park()
        got = self.source.read(max_bytes, timeout)
        if got is not None and self.parked:
            self.parked = False
            if not self._resume():
                return b""  # cancelled (or the server stops) while waiting for a slot
        return got

    def _park(self) -> bool:
        async def park() -> bool:
            return self.gate.park(self.ticket)

        try:
            return asyncio.run_coroutine_threadsafe(park(), self.loop).result()
        except Exception:  # the loop is gone (shutdown): keep the slot
            log.debug("could not park a run waiting for input", exc_info=True)
            return False

    def _resume(self) -> bool:
        started = time.monotonic()
        try:
            fut = asyncio.run_coroutine_threadsafe(
                self.gate.resume(self.ticket, self.tenant), self.loop
            )
        except RuntimeError:  # the loop is closed
            return False
        try:
            while True:
                try:
                    fut.result(timeout=0.05)
                    return True
                except TimeoutError:
                    if self.cancel.is_set():
                        fut.cancel()
                        return False
                except Exception:  # cancelled on the loop (shutdown), or a gate failure
                    log.warning("a parked run could not resume", exc_info=True)
                    return False
        finally:
            self.resume_seconds += time.monotonic() - started


def _default_sandbox_for(runtime: str, image: str | None) -> Any:
    # the core sandbox; imported late so faces load fast
    from ..sandbox import default_sandbox

    return default_sandbox(runtime, image if runtime == "default" else None)


def _memory_limit(policy: PolicyLike, runtime: str, limits: Limits) -> int:
    return limits.memory_mb


class Executor:
    """Runs jobs and keeps sessions for one server (or one local face).

    ``sandbox_for(runtime, image)`` returns the sandbox of a runtime and image (default: the
    process-wide ones); ``gate`` admits runs (None: no admission); ``on_done(job, result, waited)``
    records every finished run (metrics, audit); ``pool_for(sandbox, policy)`` names a warm pool or
    None; ``memory_for(policy, runtime, limits)`` is what a run or session holds of the gate's
    memory budget (default: its memory limit); ``prepare(runtime, image)`` returns once that
    sandbox is ready or raises ``Refused`` (the server's ``warmup.Warmup``: runs wait while their
    runtime is compiled in the background; default: none, the first run compiles it).
    ``sessions`` is its one ``SessionStore`` (``max_sessions``, ``session_*``: its caps and expiry;
    ``session_listener`` is told of every session, ``session_claims`` counts them across processes).
    """

    def __init__(
        self,
        sandbox_for: SandboxFor | None = None,
        *,
        gate: Gate | None = None,
        on_done: OnDone | None = None,
        pool_for: PoolFor | None = None,
        memory_for: MemoryFor | None = None,
        prepare: Prepare | None = None,
        workers: int = 8,
        max_sessions: int = 16,
        session_idle_seconds: float = 900.0,
        session_max_lifetime_seconds: float = 3600.0,
        session_listener: SessionListener | None = None,
        session_claims: Claims | None = None,
    ) -> None:
        self.sandbox_for = sandbox_for or _default_sandbox_for
        self.gate = gate
        self.on_done = on_done
        self.pool_for = pool_for
        self.memory_for = memory_for or _memory_limit
        self.prepare = prepare
        self._active: set[threading.Event] = set()  # cancel events of running guests
        self._threads_lock = threading.Lock()
        self._in_threads = 0
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="wasm-guest")
        self.sessions = SessionStore(
            self,
            max_sessions=max_sessions,
            idle_seconds=session_idle_seconds,
            max_lifetime_seconds=session_max_lifetime_seconds,
            listener=session_listener,
            claims=session_claims,
        )

    # -- the one place a fresh-instance run reaches the sandbox ------------------------------
    def _sandbox_call(
        self,
        job: Job,
        cancel: threading.Event,
        on_output: OutputCallback | None,
        input_source: Any,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Result:
        sandbox = self.sandbox_for(job.runtime, job.profile.image)
        data_dir = job.profile.data_dir
        try:
            functions = job.host_functions(loop)
        except InvalidFunctions as exc:
            return Result.invalid(f"Invalid functions: {exc}.", job.runtime)
        return sandbox.run(  # type: ignore[no-any-return]
            job.code,
            stdin=job.stdin,
            limits=job.limits,
            data_dir=str(data_dir) if data_dir else None,
            out_dir=job.out_dir,
            files=job.files or None,
            collect_out=job.profile.files_out,
            filename=job.filename,
            display=job.display,
            on_output=on_output,
            input_source=input_source,
            cancel=cancel,
            pool=self.pool_for(sandbox, job.profile) if self.pool_for else None,
            functions=functions,
        )

    async def run(
        self,
        job: Job,
        *,
        on_output: OutputCallback | None = None,
        input_source: Any = None,
        cancel: threading.Event | None = None,
        on_admitted: Callable[[], None] | None = None,
    ) -> Result:
        """Admit ``job`` and run it in a fresh instance. Raises ``Refused`` when there is no room;
        calls ``on_admitted`` once it has a slot. Cancelling the awaiting task cancels the guest."""
        await self.ready(job.runtime, job.profile.image)
        loop = asyncio.get_running_loop()  # where the job's coroutine functions run
        return await self.admit_and_run(
            job,
            lambda c, source: self._sandbox_call(job, c, on_output, source, loop),
            memory_mb=self.memory_for(job.profile, job.runtime, job.limits),
            cancel=cancel,
            on_admitted=on_admitted,
            input_source=input_source,
        )

    async def run_with(
        self,
        job: Job,
        call: Callable[[Any, str | None, threading.Event], Result],
        *,
        cancel: threading.Event | None = None,
    ) -> Result:
        """Admit ``job`` and run ``call(sandbox, pool, cancel)`` in place of its one run: work of
        more than one instance (an exercise's test check: the student's and the test's) that is
        still one job for admission, caps, metrics and the audit log."""
        def sandbox_call(c: threading.Event, _source: Any) -> Result:
            sandbox = self.sandbox_for(job.runtime, job.profile.image)
            return call(sandbox, self.pool_for(sandbox, job.profile) if self.pool_for else None, c)

        await self.ready(job.runtime, job.profile.image)
        return await self.admit_and_run(job, sandbox_call,
                                        memory_mb=self.memory_for(job.profile, job.runtime, job.limits),
                                        cancel=cancel)

    async def ready(self, runtime: str, image: str | None) -> None:
        """Wait until the sandbox of ``runtime`` and ``image`` is ready, or ``Refused``."""
        if self.prepare is not None:
            await self.prepare(runtime, image)

    def run_sync(
        self,
        job: Job,
        *,
        on_output: OutputCallback | None = None,
        input_source: Any = None,
        cancel: threading.Event | None = None,
    ) -> Result:
        """``run`` on the calling thread, for code without an event loop (the CLI, scripts).

        Only for an executor without a gate: a server's admission queue lives on its event loop.
        """
        if self.gate is not None:
            raise RuntimeError("this executor admits runs on its event loop: use `await run(job)`")
        cancel = cancel or threading.Event()
        result = self._guarded(lambda: self._sandbox_call(job, cancel, on_output, input_source))
        self._record(job, result, 0.0)
        return result

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
            parking = source = _Parking(input_source, self.gate, slot, job.tenant, loop, cancel)
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
