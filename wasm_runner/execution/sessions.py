"""The one session manager: ``SessionStore`` keeps the open sessions of one executor, for every face.

A session is one long-lived instance (``sandbox.Session``) whose variables and files last between
calls. The store enforces the caps (in all, per caller, the memory held in the gate for the
session's whole life), one call at a time, idle and lifetime expiry, and tells a
``SessionListener`` (the server's session directory) when a session opens, is used and closes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..host_functions import InvalidFunctions
from ..limits import Limits
from ..result import FileOut, Result
from .gate import Claims, Ticket
from .job import Job, OutputCallback
from .policy import CallerLike, PolicyLike
from .refusal import Refused
from .running import Runner

__all__ = ["LiveSession", "SessionListener", "SessionStore"]

log = logging.getLogger("wasm_runner.execution")

Folders = tuple[Path | None, Path | None]  # a session's (data_dir, out_dir)


def _str(path: Path | None) -> str | None:
    return str(path) if path else None


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
        executor: Runner,
        *,
        max_sessions: int = 16,
        idle_seconds: float = 900.0,
        max_lifetime_seconds: float = 3600.0,
        listener: SessionListener | None = None,
        claims: Claims | None = None,
    ) -> None:
        self.executor = executor
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.max_lifetime_seconds = max_lifetime_seconds
        self._sessions: dict[str, LiveSession] = {}
        self._opening: dict[str, int] = {}  # caller -> sessions being opened right now
        self._ended: dict[str, str] = {}  # id -> caller, of recently ended sessions
        self.listener = listener
        # shared per-caller session counts (several server replicas), or None: counted here only
        self.claims = claims
        self.max_fork_copies = 8  # the most copies one ``fork`` makes (the server's setting)
        # told of each fork, snapshot and resume (the server's audit log), or None
        self.on_event: Callable[[str, LiveSession, dict[str, str]], None] | None = None

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

        def open_session(folders: list[Folders]) -> list[Any]:
            ((data_dir, out_dir),) = folders
            sandbox = self.executor.sandbox_for(runtime, profile.image)
            return [sandbox.session(limits=limits, data_dir=_str(data_dir), out_dir=_str(out_dir))]

        (live,) = await self._admit(
            tenant, profile, limits, runtime, private_folders=private_folders, make=open_session
        )
        return live

    async def _admit(
        self,
        tenant: CallerLike,
        profile: PolicyLike,
        limits: Limits,
        runtime: str,
        *,
        private_folders: bool,
        make: Callable[[list[Folders]], list[Any]],
        count: int = 1,
    ) -> list[LiveSession]:
        """``count`` new sessions for ``tenant``, admitted as ``count`` calls of ``create`` would
        be, all or none: the caps (``Refused(429)``), each session's memory held in the gate, a
        claim each, their folders; ``make(folders)`` (on a worker thread) opens the sandbox
        sessions, one per ``(data_dir, out_dir)`` of ``folders``. Each is told to the listener."""
        if len(self._sessions) + sum(self._opening.values()) + count > self.max_sessions:
            raise Refused(
                429, "too_many_sessions",
                f"the server has its maximum of {self.max_sessions} open sessions"
                + (f" (this needs {count} more)" if count > 1 else ""),
                headers={"Retry-After": "30"},
            )  # fmt: skip
        held_now = self.count_for(tenant.name)
        if held_now + count > tenant.max_concurrent:
            message = (
                f"this caller already has {tenant.max_concurrent} open sessions; close one first"
                if count == 1 else
                f"this caller has {held_now} of its {tenant.max_concurrent} open sessions and "
                f"this needs {count} more; close some first"
            )  # fmt: skip
            raise Refused(429, "too_many_sessions", message, headers={"Retry-After": "30"})
        await self.executor.ready(runtime, profile.image)
        gate = self.executor.gate
        held = self.executor.memory_for(profile, runtime, limits)
        reservations: list[Ticket] = []
        claims: list[Ticket] = []
        roots: list[Path] = []
        self._opening[tenant.name] = self._opening.get(tenant.name, 0) + count
        try:
            if gate is not None:
                for _ in range(count):
                    reservations.append(gate.reserve(tenant, held))
            if self.claims is not None:
                for _ in range(count):
                    claims.append(await self.claims.claim("session", tenant, tenant.max_concurrent))
            folders: list[Folders] = []
            for _ in range(count):
                if private_folders:
                    root = Path(tempfile.mkdtemp(prefix="wasm-runner-session-"))
                    roots.append(root)
                    (root / "data").mkdir(mode=0o700)
                    (root / "out").mkdir(mode=0o700)
                    folders.append((root / "data", root / "out"))
                else:  # /out is granted and collected by the session itself
                    folders.append((profile.data_dir, None))
            opened = await self.executor.call(lambda: make(folders))
        except BaseException:
            for ticket in (*reservations, *claims):
                ticket.release()
            for root in roots:
                shutil.rmtree(root, ignore_errors=True)
            raise
        finally:
            self._opening[tenant.name] -= count
            if not self._opening[tenant.name]:
                del self._opening[tenant.name]
        now = time.monotonic()
        made: list[LiveSession] = []
        for i, sandbox_session in enumerate(opened):
            reservation = reservations[i] if reservations else None
            live = LiveSession(
                id=secrets.token_urlsafe(18),
                tenant=tenant.name,
                profile=profile,
                limits=getattr(sandbox_session, "limits", limits),
                runtime=runtime,
                session=sandbox_session,
                reservation=reservation,
                created=now,
                last_used=now,
                idle_seconds=self.idle_seconds,
                max_lifetime_seconds=self.max_lifetime_seconds,
                root=roots[i] if roots else None,
                claim=claims[i] if claims else None,
            )
            if hasattr(reservation, "expires_in"):  # when the memory comes back: a true Retry-After
                reservation.expires_in = live.expires_in  # type: ignore[union-attr]
            self._sessions[live.id] = live
            made.append(live)
        if self.listener is not None:
            for live in made:
                try:
                    await self.listener.opened(live)
                except BaseException:
                    for other in made:
                        await self.close(other.id)
                    raise
        return made

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
                from ..sandbox import SessionEnded

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
        from ..sandbox import SessionEnded

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

    # -- copies and snapshots ----------------------------------------------------------------
    def _event(self, event: str, live: LiveSession, fields: dict[str, str]) -> None:
        """``on_event`` (the server's audit log); a failure is logged, never raised."""
        if self.on_event is None:
            return
        try:
            self.on_event(event, live, fields)
        except Exception:
            log.warning("session event %s could not be recorded", event, exc_info=True)

    async def fork(
        self, live: LiveSession, tenant: CallerLike, copies: int, *, keep_seeds: bool = False
    ) -> list[LiveSession]:
        """``copies`` new sessions of ``tenant``, each continuing from ``live``'s state now and
        independent of it and of each other (``sandbox.Session.fork``; fresh random seeds unless
        ``keep_seeds``). Each is admitted as a new session would be, all or none
        (``Refused(429)``); ``Refused(409)`` while ``live`` runs a call; ``Refused(422)`` for a
        count outside 1..``max_fork_copies`` or a session that cannot be copied. A copy of a
        session with private folders gets its own, with the files of ``/data`` and ``/out``."""
        if not isinstance(copies, int) or not 1 <= copies <= self.max_fork_copies:
            raise Refused(
                422, "invalid_copies",
                f"copies must be a whole number from 1 to {self.max_fork_copies}",
            )  # fmt: skip
        if live.lock.locked():
            raise Refused(409, "session_busy", "this session is running a call; fork it after")
        from ..sandbox import SessionEnded, SnapshotFailed

        async with live.lock:
            if live.closed or not live.session.alive:
                raise Refused(404, "unknown_session", "the session ended")

            def make(folders: list[Folders]) -> list[Any]:
                if live.root is not None:
                    for data_dir, out_dir in folders:
                        assert data_dir is not None and out_dir is not None
                        _copy_files(live.root / "data", data_dir)
                        _copy_files(live.root / "out", out_dir)
                    given: list[tuple[Any, Any]] | None = [
                        (str(d), str(o)) for d, o in folders
                    ]
                else:
                    given = None  # the profile's /data, and /out of each copy's own
                return live.session.fork(  # type: ignore[no-any-return]
                    copies, keep_seeds=keep_seeds, folders=given
                )

            try:
                made = await self._admit(
                    tenant, live.profile, live.limits, live.runtime,
                    private_folders=live.root is not None, make=make, count=copies,
                )  # fmt: skip
            except SessionEnded:
                raise Refused(404, "unknown_session", "the session has ended") from None
            except SnapshotFailed as exc:
                raise Refused(422, "fork_failed", f"the session cannot be copied: {exc}") from None
            live.last_used = time.monotonic()
        for copy in made:
            copy.seen = dict(live.seen)
            copy.uploaded_bytes = live.uploaded_bytes
        self._event("forked", live, {
            "copies": str(copies), "keep_seeds": str(bool(keep_seeds)).lower(),
            "new_sessions": ",".join(c.id for c in made),
        })  # fmt: skip
        if self.listener is not None:
            await self._tell("used", live)
        return made

    async def snapshot(
        self, live: LiveSession, *, owner: str, secret: bytes | None = None
    ) -> bytes:
        """``live``'s state as a sealed snapshot (``sandbox.Session.snapshot``: encrypted and
        authenticated for ``owner`` under ``secret``, default the server's); the session goes
        on. ``Refused(409)`` while it runs a call, ``Refused(422)`` when it cannot be saved."""
        from ..sandbox import SessionEnded, SnapshotFailed, SnapshotRefused

        if live.lock.locked():
            raise Refused(409, "session_busy", "this session is running a call; save it after")
        async with live.lock:
            if live.closed:
                raise Refused(404, "unknown_session", "the session ended")
            try:
                blob: bytes = await self.executor.call(
                    lambda: live.session.snapshot(owner=owner, secret=secret)
                )
            except SessionEnded:
                raise Refused(404, "unknown_session", "the session has ended") from None
            except (SnapshotFailed, SnapshotRefused) as exc:
                raise Refused(422, "snapshot_failed", f"the session cannot be saved: {exc}") from None
            live.last_used = time.monotonic()
        self._event("snapshot", live, {"bytes": str(len(blob))})
        if self.listener is not None:
            await self._tell("used", live)
        return blob

    async def resume(
        self,
        tenant: CallerLike,
        profile: PolicyLike,
        limits: Limits,
        runtime: str,
        snapshot: bytes,
        *,
        owner: str,
        secret: bytes | None = None,
    ) -> LiveSession:
        """A new session of ``tenant`` continuing the one ``snapshot`` saved, admitted as
        ``create`` would be (``limits``: the profile's, the most the saved session may have).
        The snapshot is hostile input: ``Refused`` ``snapshot_refused`` (403 ``foreign``, else
        422; ``details`` name the reason) unless it authenticates for
        ``owner`` and fits this profile's image and limits. Nothing of it is read before."""
        from ..limits import InvalidLimits
        from ..sandbox import SnapshotFailed, SnapshotRefused

        def open_snapshot(folders: list[Folders]) -> list[Any]:
            ((data_dir, out_dir),) = folders
            sandbox = self.executor.sandbox_for(runtime, profile.image)
            session = sandbox.resume(
                snapshot, owner=owner, secret=secret, data_dir=_str(data_dir), out_dir=_str(out_dir)
            )
            try:
                limits.tightened(session.limits)  # the saved limits within this profile's
            except InvalidLimits:
                session.close()
                raise
            return [session]

        try:
            (live,) = await self._admit(
                tenant, profile, limits, runtime, private_folders=False, make=open_snapshot
            )
        except SnapshotRefused as exc:
            raise Refused(
                403 if exc.reason == "foreign" else 422, "snapshot_refused", f"the snapshot was refused ({exc.reason}): {exc}",
                details=[{"reason": exc.reason}],
            ) from None  # fmt: skip
        except InvalidLimits as exc:
            raise Refused(
                422, "snapshot_refused",
                f"the snapshot was refused (limits): its session's limits are over profile "
                f"{profile.name!r}'s ({exc}); resume it under the profile it was opened with",
                details=[{"reason": "limits"}],
            ) from None  # fmt: skip
        except SnapshotFailed as exc:
            raise Refused(
                422, "snapshot_refused", f"the snapshot was refused (state): {exc}",
                details=[{"reason": "state"}],
            ) from None  # fmt: skip
        self._event("resumed", live, {"bytes": str(len(snapshot))})
        return live


def _copy_files(source: Path, target: Path) -> None:
    """The regular files and folders under ``source`` copied into ``target`` (a fork's private
    folders); links and anything else are left out, nothing outside ``source`` is followed."""
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                (target / entry.name).mkdir(mode=0o700)
                _copy_files(Path(entry.path), target / entry.name)
            elif entry.is_file(follow_symlinks=False):
                shutil.copyfile(entry.path, target / entry.name, follow_symlinks=False)
