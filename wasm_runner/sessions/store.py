"""The one session manager: ``SessionStore`` keeps the open sessions of one executor, for every face.

A session is one long-lived instance (``sandbox.Session``) whose variables and files last between
calls. The store enforces the caps (in all, per caller, the memory held in the gate for the
session's whole life), one call at a time, idle and lifetime expiry, and tells a
``SessionListener`` (the server's session directory) when a session opens, is used and closes.

Its jobs, one module each, are the layers of the one class: ``base`` (the table of sessions, caps,
listener and audit), ``pausing`` (pause, wake, adopt, hand over), ``forking`` (fork, snapshot,
resume), ``saved`` (saved states) and this module (open, get, run, upload, close, sweep).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..admission.gate import Ticket
from ..execution.job import Job, OutputCallback
from ..execution.policy import CallerLike, PolicyLike
from ..execution.refusal import Refused
from ..host_functions import InvalidFunctions
from ..limits import Limits
from ..packages import PackageRefused
from ..result import Result
from .base import ORPHAN_RETRY_SECONDS, ORPHAN_SWEEP_SECONDS
from .folders import Folders, new_folders, str_or_none
from .live import LiveSession
from .packages import check_cell, opened_packages
from .saved import SavingSessions

__all__ = ["SessionStore"]

_T = TypeVar("_T")

log = logging.getLogger("wasm_runner.sessions")


class SessionStore(SavingSessions):
    """The one session manager: open sessions by id, for every face of one executor.

    - A session belongs to the caller that opened it; other callers get 404 for its id.
    - Caps: ``max_sessions`` in all, ``caller.max_concurrent`` per caller (whichever face opened
      them), and the session's memory limit held in the gate's budget while it is live; each call
      also takes a run slot like any other run. One call at a time per session (409 otherwise).
      With ``Pausing`` these count live sessions: a session that would pass one pauses the least
      recently used idle sessions first (``_make_room``, ``_reserve``); 429 when none can be.
    - It ends after ``idle_seconds`` without a call, after ``max_lifetime_seconds`` in all, on
      ``close``, or when a call leaves its instance unusable (a CPU, wall-clock or output limit,
      or a crashed interpreter; an exception, ``sys.exit`` or a ``MemoryError`` does not).
    """

    async def create(
        self,
        tenant: CallerLike,
        profile: PolicyLike,
        limits: Limits,
        runtime: str,
        *,
        private_folders: bool = False,
        packages: Sequence[str] = (),
    ) -> LiveSession:
        """A new session for ``tenant``; ``Refused(429)`` when a cap or the budget is reached.
        ``packages``: names of the operator's wheelhouse its cells may import (``Refused(422)``
        ``package_refused`` for one neither the lock nor the image has)."""
        try:
            opened = opened_packages(self.packages, runtime, packages, self.browser_modules)
        except PackageRefused as exc:
            raise Refused(422, "package_refused", str(exc)) from None

        def open_session(folders: list[Folders]) -> list[Any]:
            ((data_dir, out_dir),) = folders
            sandbox = self.executor.sandboxes.sandbox_for(runtime, profile.image)
            return [sandbox.session(limits=limits, data_dir=str_or_none(data_dir), out_dir=str_or_none(out_dir),
                                    packages=opened.folders, package_names=opened.names)]

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
        await self._make_room(tenant, count)
        self._check_room(tenant, count)
        await self.executor.ready(runtime, profile.image)
        held = self.executor.sandboxes.memory_for(profile, runtime, limits)
        reservations: list[Ticket] = []
        claims: list[Ticket] = []
        roots: list[Path] = []
        self._opening[tenant.name] = self._opening.get(tenant.name, 0) + count
        try:
            for _ in range(count):
                reservation = await self._reserve(tenant, held)
                if reservation is not None:
                    reservations.append(reservation)
            if self.claims is not None:
                for _ in range(count):
                    claims.append(await self.claims.claim("session", tenant, tenant.max_concurrent))
            folders: list[Folders] = []
            for _ in range(count):
                if private_folders:
                    root = new_folders()
                    roots.append(root)
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
                caller=tenant,
            )
            opened_with = getattr(sandbox_session, "packages", None)
            live.packages = tuple(opened_with.names) if opened_with is not None else ()
            if self.pausing is not None and getattr(sandbox_session, "can_snapshot", False):
                live.paused_lifetime_seconds = self.pausing.lifetime_seconds
            self._hold_until(live)
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
        for live in made:
            self._save_later(live)
        return made

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
            await self.wake(live, job.tenant)
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
                    check_cell(self.packages, live.runtime, live.packages, job.code, job.packages,
                               self.browser_modules)
                except PackageRefused as exc:
                    return Result.invalid(str(exc), live.runtime)
                job.packages_granted = live.packages  # the audit log names what the cell could import
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
                        network=job.network(),
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
                else:
                    if self.listener is not None:
                        await self._tell("used", live)
                    self._save_later(live)
            return result

    async def upload(self, live: LiveSession, name: str, data: bytes) -> str:
        """Place ``data`` in the session's ``/scratch``; returns the guest path."""
        from ..sandbox import SessionEnded

        def put() -> str:
            try:
                return live.session.upload(name, data)  # type: ignore[no-any-return]
            except SessionEnded:
                raise Refused(404, "unknown_session", "the session has ended") from None
            except ValueError as exc:
                raise Refused(422, "file_rejected", str(exc)) from None

        return await self.change_folders(live, put)

    async def change_folders(self, live: LiveSession, change: Callable[[], _T]) -> _T:
        """``change()`` run on a worker thread to change its files outside a call (an upload into
        ``/scratch``, or into a private ``/data``), under its lock (``Refused(409)`` while it runs
        a call); a paused session is resumed first (so a moved one has its files back), and once
        changed it is saved again soon: its stored snapshot holds its files too."""
        if live.lock.locked():
            raise Refused(409, "session_busy", "this session is running a call; upload after it")
        async with live.lock:
            await self.wake(live, live.caller)
            live.saved_calls = -1  # the stored snapshot may lack the change now
            done = await self.executor.call(change)
            live.last_used = time.monotonic()
            if self.listener is not None:
                await self._tell("used", live)
            self._save_later(live)
            return done

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
            if live.session is not None:
                await self.executor.call(live.session.close)
            await self._settle(live)
            pausing = self.pausing
            if pausing is not None and live.paused_lifetime_seconds > 0:
                writer = live.snapshot_writer

                def forget() -> None:
                    pausing.store.delete(live.id)
                    if writer is not None:
                        pausing.store.delete(live.id, writer)

                await self.executor.call(forget)
        finally:
            if live.reservation is not None:
                live.reservation.release()
            if live.claim is not None:
                live.claim.release()
            if live.root is not None:
                shutil.rmtree(live.root, ignore_errors=True)
        return True

    async def sweep(self) -> int:
        """Close expired sessions that are not running a call, pause idle saved ones (with
        ``Pausing``) and, now and then, remove orphaned snapshots; returns how many were closed."""
        now = time.monotonic()
        expired = [
            s.id for s in self._sessions.values() if s.expires_in(now) <= 0 and not s.lock.locked()
        ]
        for session_id in expired:
            await self.close(session_id)
        if self.pausing is not None:
            after = self.pausing.after_seconds
            for s in list(self._sessions.values()):
                if (not s.paused and s.can_pause and s.saved and now - s.last_used >= after
                        and not s.lock.locked() and (s.saving is None or s.saving.done())):
                    self._pause(s)
            if now - self._orphans_swept >= ORPHAN_SWEEP_SECONDS:
                try:
                    await self.sweep_orphans()
                except Exception:
                    log.warning("sweeping orphaned session snapshots failed", exc_info=True)
                    # tried again soon, not a whole period later
                    self._orphans_swept = now - ORPHAN_SWEEP_SECONDS + ORPHAN_RETRY_SECONDS
        return len(expired)

    async def close_all(self) -> None:
        for session_id in list(self._sessions):
            await self.close(session_id)
