"""One way into the sandbox for every face: ``Executor`` runs ``Job``s and keeps ``SessionStore``.

Every face describes a guest run as a ``Job`` (who asks, under which policy, what code and input)
and hands it to an ``Executor``:

- the HTTP service (run, stream, WebSocket, sessions) and the MCP tools mounted at ``/mcp`` share
  the server's executor, whose ``Gate`` is the server's admission (``max_running``, queue, memory
  budget, per-key concurrency) and whose ``on_done`` writes the metrics and the audit log;
- the MCP tools over stdio, the CLI and Python callers use an executor without a gate (no server:
  nothing to share), which still runs every guest the same way and keeps sessions under caps.

``Executor.run`` admits a job, runs the blocking sandbox call on a worker thread (cancelled when
the awaiting task is), and reports how it ended; ``Executor.run_sync`` is the same call on the
caller's thread for code without an event loop (the CLI). ``SessionStore`` is the one session
manager: per-key and global caps, memory held in the gate for a session's whole life, one call at
a time, idle and lifetime expiry.

This is a core module: it imports no web or MCP framework. A refusal is a ``Refused`` (status,
stable code, one plain sentence) that the HTTP face answers as JSON and the MCP face as a tool
error.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .errors import WasmRunnerError
from .host_functions import CallRecord, CallTally, HostFunction, HostFunctions, InvalidFunctions, as_host_functions
from .limits import Limits
from .result import FileOut, Result, Status

log = logging.getLogger("wasm_runner.execution")

__all__ = [
    "Caller", "CallerLike", "Claims", "Executor", "Gate", "Job", "LiveSession", "Policy",
    "PolicyLike", "Refused", "SessionListener", "SessionStore", "Ticket",
]  # fmt: skip

T = TypeVar("T")
OutputCallback = Callable[[str, bytes], None]


class Refused(WasmRunnerError):
    """A request that cannot be served now or at all: an HTTP-like status, a stable code, and one
    plain sentence the caller can act on (``headers`` such as ``Retry-After`` for the HTTP face)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}


# -- who asks, under which policy ----------------------------------------------------------------
class CallerLike(Protocol):
    """Who asks: a name (never a key) and how many runs / sessions it may hold at once."""

    @property
    def name(self) -> str: ...

    @property
    def max_concurrent(self) -> int: ...


class PolicyLike(Protocol):
    """A named policy (the HTTP server's profiles are these): limits, folders, runtime, pool."""

    @property
    def name(self) -> str: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def data_dir(self) -> Path | None: ...

    @property
    def files_out(self) -> bool: ...

    @property
    def display(self) -> bool: ...

    @property
    def runtime(self) -> str: ...

    @property
    def pool_size(self) -> int: ...

    @property
    def preload(self) -> tuple[str, ...]: ...

    @property
    def image(self) -> str | None: ...


@dataclass(frozen=True)
class Caller:
    """A caller for faces without API keys (the CLI, MCP over stdio, Python code)."""

    name: str = "local"
    max_concurrent: int = 4


@dataclass(frozen=True)
class Policy:
    """A policy for faces without server profiles."""

    name: str = "local"
    limits: Limits = field(default_factory=Limits)
    data_dir: Path | None = None
    files_out: bool = False
    runtime: str = "default"
    display: bool = False
    pool_size: int = 0
    preload: tuple[str, ...] = ()
    image: str | None = None  # the default runtime's image (None: its default image)


LOCAL_CALLER = Caller()
LOCAL_POLICY = Policy()


@dataclass
class Job:
    """One guest run as every face describes it: what code and inputs, under which limits, for
    whom and under which policy.

    ``kind`` names the face for metrics and the audit log (``run``, ``stream``, ``ws``,
    ``session``, ``mcp``, ``mcp_session``, ``cli``, ``python``). ``out_dir`` is a host folder
    granted at ``/out`` (the CLI's ``--out``); without it, ``profile.files_out`` grants a fresh
    ``/out`` whose files come back in the result. ``profile.data_dir`` is shown at ``/data``.

    >>> Executor().run_sync(Job("print(6 * 7)")).stdout
    '42\\n'
    """

    code: str | bytes
    limits: Limits = field(default_factory=Limits)
    runtime: str = "default"
    stdin: str | bytes | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    display: bool | str = False  # True, False or "figures"
    tenant: CallerLike = LOCAL_CALLER
    client: str = "local"
    kind: str = "python"
    profile: PolicyLike = LOCAL_POLICY
    session_id: str | None = None
    request_id: str = field(default_factory=lambda: secrets.token_hex(8))
    filename: str | None = None
    out_dir: str | None = None
    # the app's functions the code may call (``from host import name``); their calls are counted
    # in ``host_calls`` (by name and outcome: what the metrics and the audit log record)
    functions: Mapping[str, HostFunction] | HostFunctions | None = None
    host_calls: CallTally = field(default_factory=CallTally)

    def host_functions(self, loop: asyncio.AbstractEventLoop | None) -> HostFunctions | None:
        """The job's functions as a run gets them: coroutines on ``loop`` (the face's; None: a
        background loop) unless the functions name their own, every call counted."""
        if self.functions is None:
            return None
        fns = as_host_functions(self.functions)
        tally, hook = self.host_calls, fns.on_call

        def on_call(record: CallRecord) -> None:
            tally.add(record)
            if hook is not None:
                hook(record)

        return replace(fns, loop=fns.loop or loop, on_call=on_call)


# -- admission, as the executor sees it ----------------------------------------------------------
class Ticket(Protocol):
    """A held run slot or memory reservation; ``release`` is idempotent."""

    def release(self) -> None: ...


class Gate(Protocol):
    """Admission (``wasm_runner.http.admission`` behind the server's adapter). Refuses with
    ``Refused`` (status 429) when there is no room.

    ``park`` gives a run's slot (and its caller's in-flight place) back while the run waits for
    interactive input, keeping its memory; False when there is no room for one more waiting run
    (it keeps its slot). ``resume`` takes a slot again for a parked run, ahead of new runs; it
    never refuses. Both are called on the event loop."""

    async def acquire(self, tenant: CallerLike, memory_mb: int) -> Ticket: ...

    def reserve(self, tenant: CallerLike, memory_mb: int) -> Ticket: ...

    def park(self, ticket: Ticket) -> bool: ...

    async def resume(self, ticket: Ticket, tenant: CallerLike) -> None: ...

    def note_duration(self, seconds: float) -> None: ...


class Claims(Protocol):
    """Counts shared with other processes (the HTTP server's leases in Redis, when several
    replicas share one): ``claim`` holds one of ``kind`` (``session``) for ``tenant`` and returns
    a ticket to release, or raises ``Refused`` when ``tenant`` already holds ``limit``."""

    async def claim(self, kind: str, tenant: CallerLike, limit: int) -> Ticket: ...


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
    from .sandbox import default_sandbox

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


# -- sessions ------------------------------------------------------------------------------------
@dataclass(eq=False)
class LiveSession:
    """One open session and what the executor tracks about it.

    ``root`` is its private folder when it was opened with ``private_folders`` (``data/`` shown
    read-only at ``/data``, ``out/`` writable at ``/out``), deleted when the session ends.
    """

    id: str
    tenant: str
    profile: PolicyLike
    limits: Limits
    runtime: str
    session: Any  # wasm_runner Session
    reservation: Ticket | None
    created: float
    idle_seconds: float
    max_lifetime_seconds: float
    root: Path | None = None
    last_used: float = 0.0
    calls: int = 0
    uploaded_bytes: int = 0  # into the private /data
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    cancel: threading.Event | None = None  # the running call's
    closed: bool = False
    seen: dict[str, FileOut] = field(default_factory=dict)  # guest path -> last content seen
    claim: Ticket | None = None  # its place in a count shared with other processes (Claims)

    @property
    def data_dir(self) -> Path | None:
        return self.root / "data" if self.root is not None else None

    def expires_in(self, now: float) -> float:
        return (
            min(self.last_used + self.idle_seconds, self.created + self.max_lifetime_seconds) - now
        )

    def new_files(self, result: Result) -> list[FileOut]:
        """Files in ``result`` that are new or changed since the previous call; remembers them."""
        fresh = [f for f in result.files if self.seen.get(f.path) != f]
        for f in result.files:
            self.seen[f.path] = f
        return fresh

    def describe(self, now: float | None = None) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        return {
            "id": self.id,
            "profile": self.profile.name,
            "runtime": self.runtime,
            "limits": self.limits.to_dict(),
            "alive": not self.closed and bool(self.session.alive),
            "calls": self.calls,
            "idle_expires_in": round(max(0.0, self.last_used + self.idle_seconds - now), 3),
            "lifetime_expires_in": round(
                max(0.0, self.created + self.max_lifetime_seconds - now), 3
            ),
        }


class SessionListener(Protocol):
    """Told when a session opens, is used and closes (the HTTP server's session directory, so
    other replicas can find a session's owner). ``opened`` may refuse with an exception: the
    session is then closed and the exception raised to the caller."""

    async def opened(self, live: LiveSession) -> None: ...

    async def used(self, live: LiveSession) -> None: ...

    async def closed(self, live: LiveSession) -> None: ...


class SessionStore:
    """The one session manager: open sessions by id, for every face of one executor.

    - A session belongs to the caller that opened it; other callers get 404 for its id.
    - Caps: ``max_sessions`` in all, ``caller.max_concurrent`` per caller (whichever face opened
      them), and the session's memory limit held in the gate's budget for its whole life; each call
      also takes a run slot like any other run. One call at a time per session (409 otherwise).
    - It ends after ``idle_seconds`` without a call, after ``max_lifetime_seconds`` in all, on
      ``close``, or when a call leaves its instance unusable (a CPU, wall-clock or output limit,
      or a crashed interpreter; an exception, ``sys.exit`` or a ``MemoryError`` does not).
    """

    def __init__(
        self,
        executor: Executor,
        *,
        max_sessions: int = 16,
        idle_seconds: float = 900.0,
        max_lifetime_seconds: float = 3600.0,
    ) -> None:
        self.executor = executor
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.max_lifetime_seconds = max_lifetime_seconds
        self._sessions: dict[str, LiveSession] = {}
        self._opening: dict[str, int] = {}  # caller -> sessions being opened right now
        self._ended: dict[str, str] = {}  # id -> caller, of recently ended sessions
        self.listener: SessionListener | None = None
        # shared per-caller session counts (several server replicas), or None: counted here only
        self.claims: Claims | None = None

    def __len__(self) -> int:
        return len(self._sessions)

    def count_for(self, tenant: str) -> int:
        mine = sum(1 for s in self._sessions.values() if s.tenant == tenant)
        return mine + self._opening.get(tenant, 0)

    async def create(
        self,
        tenant: CallerLike,
        profile: PolicyLike,
        limits: Limits,
        runtime: str,
        *,
        private_folders: bool = False,
    ) -> LiveSession:
        """A new session for ``tenant``; ``Refused(429)`` when a cap or the budget is reached."""
        if len(self._sessions) + sum(self._opening.values()) >= self.max_sessions:
            raise Refused(
                429, "too_many_sessions",
                f"the server has its maximum of {self.max_sessions} open sessions",
                headers={"Retry-After": "30"},
            )  # fmt: skip
        if self.count_for(tenant.name) >= tenant.max_concurrent:
            raise Refused(
                429, "too_many_sessions",
                f"this caller already has {tenant.max_concurrent} open sessions; close one first",
                headers={"Retry-After": "30"},
            )  # fmt: skip
        await self.executor.ready(runtime, profile.image)
        gate = self.executor.gate
        held = self.executor.memory_for(profile, runtime, limits)
        reservation = gate.reserve(tenant, held) if gate is not None else None
        self._opening[tenant.name] = self._opening.get(tenant.name, 0) + 1
        root: Path | None = None
        claim: Ticket | None = None
        data_dir: Path | None
        out_dir: Path | None
        try:
            if self.claims is not None:
                claim = await self.claims.claim("session", tenant, tenant.max_concurrent)
            if private_folders:
                root = Path(tempfile.mkdtemp(prefix="wasm-runner-session-"))
                (root / "data").mkdir(mode=0o700)
                (root / "out").mkdir(mode=0o700)
                data_dir, out_dir = root / "data", root / "out"
            else:  # /out is granted and collected by the session itself
                data_dir, out_dir = profile.data_dir, None

            def open_session() -> Any:
                return self.executor.sandbox_for(runtime, profile.image).session(
                    limits=limits,
                    data_dir=str(data_dir) if data_dir else None,
                    out_dir=str(out_dir) if out_dir else None,
                )

            sandbox_session = await self.executor.call(open_session)
        except BaseException:
            if reservation is not None:
                reservation.release()
            if claim is not None:
                claim.release()
            if root is not None:
                shutil.rmtree(root, ignore_errors=True)
            raise
        finally:
            self._opening[tenant.name] -= 1
            if not self._opening[tenant.name]:
                del self._opening[tenant.name]
        now = time.monotonic()
        live = LiveSession(
            id=secrets.token_urlsafe(18),
            tenant=tenant.name,
            profile=profile,
            limits=limits,
            runtime=runtime,
            session=sandbox_session,
            reservation=reservation,
            created=now,
            last_used=now,
            idle_seconds=self.idle_seconds,
            max_lifetime_seconds=self.max_lifetime_seconds,
            root=root,
            claim=claim,
        )
        if hasattr(reservation, "expires_in"):  # when the memory comes back: a true Retry-After
            reservation.expires_in = live.expires_in  # type: ignore[union-attr]
        self._sessions[live.id] = live
        if self.listener is not None:
            try:
                await self.listener.opened(live)
            except BaseException:
                await self.close(live.id)
                raise
        return live

    def holds(self, session_id: str) -> bool:
        """Whether ``session_id`` is open here (whoever owns it)."""
        return session_id in self._sessions

    def open_sessions(self) -> list[LiveSession]:
        """The sessions open here now (a copy)."""
        return list(self._sessions.values())

    def get(self, session_id: str, tenant: CallerLike) -> LiveSession:
        """``tenant``'s open session ``session_id``, or ``Refused(404)``."""
        live = self._sessions.get(session_id) if isinstance(session_id, str) else None
        if live is None or live.tenant != tenant.name or live.expires_in(time.monotonic()) <= 0:
            raise Refused(
                404, "unknown_session",
                "no such session: it never existed, belongs to another key, expired or was deleted",
            )  # fmt: skip
        return live

    def ended(self, session_id: str, tenant: CallerLike) -> bool:
        """Whether ``session_id`` was ``tenant``'s and has ended (closed, expired, or a limit)."""
        return self._ended.get(session_id) == tenant.name

    async def run(
        self,
        live: LiveSession,
        job: Job,
        *,
        on_output: OutputCallback | None = None,
        input_source: Any = None,
        cancel: threading.Event | None = None,
        on_admitted: Callable[[], None] | None = None,
    ) -> Result:
        """One call in the session; closes the session when the call left it unusable."""
        if live.lock.locked():
            raise Refused(409, "session_busy", "this session is already running a call")
        async with live.lock:
            if live.closed:
                raise Refused(404, "unknown_session", "the session ended")
            live.last_used = time.monotonic()
            cancel = cancel or threading.Event()
            live.cancel = cancel
            loop = asyncio.get_running_loop()  # where the job's coroutine functions run

            def call(cancel: threading.Event, input_source: Any) -> Result:
                from .sandbox import SessionEnded

                try:
                    functions = job.host_functions(loop)
                except InvalidFunctions as exc:
                    return Result.invalid(f"Invalid functions: {exc}.")
                try:
                    for name, content in job.files.items():
                        live.session.upload(name, content)
                    return live.session.run(  # type: ignore[no-any-return]
                        job.code,
                        stdin=job.stdin,
                        limits=job.limits,
                        display=job.display,
                        filename=job.filename,
                        on_output=on_output,
                        input_source=input_source,
                        cancel=cancel,
                        functions=functions,
                    )
                except SessionEnded:
                    raise Refused(404, "unknown_session", "the session has ended") from None
                except ValueError as exc:  # an upload the session cannot take (quota, name)
                    raise Refused(422, "file_rejected", str(exc)) from None

            # memory is already reserved for the session's life: the call takes a slot only
            try:
                result = await self.executor.admit_and_run(
                    job, call, memory_mb=0, cancel=cancel, on_admitted=on_admitted,
                    input_source=input_source,
                )
            finally:
                live.calls += 1
                live.last_used = time.monotonic()
                live.cancel = None
                if not live.session.alive:
                    await self.close(live.id)
                elif self.listener is not None:
                    await self._tell("used", live)
            return result

    async def upload(self, live: LiveSession, name: str, data: bytes) -> str:
        """Place ``data`` in the session's ``/scratch``; returns the guest path."""
        from .sandbox import SessionEnded

        if live.lock.locked():
            raise Refused(409, "session_busy", "this session is running a call; upload after it")
        async with live.lock:
            try:
                path: str = await self.executor.call(lambda: live.session.upload(name, data))
            except SessionEnded:
                raise Refused(404, "unknown_session", "the session has ended") from None
            except ValueError as exc:
                raise Refused(422, "file_rejected", str(exc)) from None
            live.last_used = time.monotonic()
            if self.listener is not None:
                await self._tell("used", live)
            return path

    async def _tell(self, event: str, live: LiveSession) -> None:
        """``listener.used`` / ``listener.closed``; a failure is logged, never raised (the entry
        expires on its own)."""
        try:
            await getattr(self.listener, event)(live)
        except Exception:
            log.warning("session listener failed on %s of a session", event, exc_info=True)

    async def close(self, session_id: str) -> bool:
        """End the session (a running call stops at once) and delete its folders."""
        live = self._sessions.pop(session_id, None)
        if live is None:
            return False
        live.closed = True
        self._ended[live.id] = live.tenant
        while len(self._ended) > 4096:
            self._ended.pop(next(iter(self._ended)))
        if live.cancel is not None:
            live.cancel.set()
        if self.listener is not None:
            await self._tell("closed", live)
        try:
            await self.executor.call(live.session.close)
        finally:
            if live.reservation is not None:
                live.reservation.release()
            if live.claim is not None:
                live.claim.release()
            if live.root is not None:
                shutil.rmtree(live.root, ignore_errors=True)
        return True

    async def sweep(self) -> int:
        """Close expired sessions that are not running a call; returns how many were closed."""
        now = time.monotonic()
        expired = [
            s.id for s in self._sessions.values() if s.expires_in(now) <= 0 and not s.lock.locked()
        ]
        for session_id in expired:
            await self.close(session_id)
        return len(expired)

    async def close_all(self) -> None:
        for session_id in list(self._sessions):
            await self.close(session_id)
