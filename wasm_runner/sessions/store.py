"""The one session manager: ``SessionStore`` keeps the open sessions of one executor, for every face.

A session is one long-lived instance (``sandbox.Session``) whose variables and files last between
calls. The store enforces the caps (in all, per caller, the memory held in the gate for the
session's whole life), one call at a time, idle and lifetime expiry, and tells a
``SessionListener`` (the server's session directory) when a session opens, is used and closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..execution.gate import Claims, Ticket
from ..execution.job import Job, OutputCallback
from ..execution.policy import CallerLike, PolicyLike
from ..execution.refusal import Refused
from ..execution.running import Runner
from ..host_functions import InvalidFunctions
from ..limits import Limits
from ..result import FileOut, Result
from .directory import SessionListener
from .folders import seal_folders, unseal_folders
from .live import LiveSession
from .paused import PausedStoreFull, Pausing, SavedState, SavedStateMissing
from .paused import missing_saved as _missing_saved

__all__ = ["SessionStore"]

_T = TypeVar("_T")

ORPHAN_SWEEP_SECONDS = 300.0  # how often snapshots without a session are looked for
ORPHAN_RETRY_SECONDS = 10.0  # ...and how soon after a sweep that failed

log = logging.getLogger("wasm_runner.sessions")

Folders = tuple[Path | None, Path | None]  # a session's (data_dir, out_dir)


def _str(path: Path | None) -> str | None:
    return str(path) if path else None


class SessionStore:
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

    def __init__(
        self,
        executor: Runner,
        *,
        max_sessions: int = 16,
        idle_seconds: float = 900.0,
        max_lifetime_seconds: float = 3600.0,
        listener: SessionListener | None = None,
        claims: Claims | None = None,
        pausing: Pausing | None = None,
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
        # told of each fork, snapshot, save and resume (the server's audit log), or None; a
        # refusal of a saved state has no session: None, and ``fields`` name the tenant
        self.on_event: Callable[[str, LiveSession | None, dict[str, str]], None] | None = None
        self.pausing = pausing  # None: sessions are never paused
        self._orphans_swept = -ORPHAN_SWEEP_SECONDS

    def __len__(self) -> int:
        """Live sessions (paused ones are not counted: they hold no instance)."""
        return sum(1 for s in self._sessions.values() if not s.paused)

    @property
    def paused_count(self) -> int:
        return sum(1 for s in self._sessions.values() if s.paused)

    def count_for(self, tenant: str) -> int:
        """``tenant``'s live sessions here, and those being opened."""
        mine = sum(1 for s in self._sessions.values() if s.tenant == tenant and not s.paused)
        return mine + self._opening.get(tenant, 0)

    def _check_room(self, tenant: CallerLike, count: int = 1) -> None:
        """``Refused(429)`` unless ``count`` more live sessions fit the server's and ``tenant``'s caps."""
        if len(self) + sum(self._opening.values()) + count > self.max_sessions:
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

    def _hold_until(self, live: LiveSession) -> None:
        """Tell its memory reservation when the memory comes back (a true Retry-After)."""
        if hasattr(live.reservation, "expires_in"):
            def holds_for(now: float) -> float:
                left = live.expires_in(now)
                if self.pausing is not None and live.can_pause:
                    left = min(left, live.last_used + self.pausing.after_seconds - now)
                return left

            live.reservation.expires_in = holds_for  # type: ignore[union-attr]

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
        await self._make_room(tenant, count)
        self._check_room(tenant, count)
        await self.executor.ready(runtime, profile.image)
        held = self.executor.memory_for(profile, runtime, limits)
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
                    root = _new_folders()
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

    # -- pausing -----------------------------------------------------------------------------
    async def wake(self, live: LiveSession, tenant: CallerLike | None) -> None:
        """Under ``live.lock``, before a call: its background snapshot written, and its instance
        back if it was paused."""
        if live.closed:
            raise Refused(404, "unknown_session", "the session ended")
        if tenant is not None:
            live.caller = tenant  # who calls now (its caps when it is resumed later)
        await self._settle(live)
        if live.paused:
            await self._wake(live, tenant or live.caller)
        if live.closed:
            raise Refused(404, "unknown_session", "the session ended")

    async def _settle(self, live: LiveSession) -> None:
        """Its background save finished, or cancelled when it has not begun (a call is coming,
        whose own save replaces it)."""
        saving, live.saving = live.saving, None
        if saving is not None:
            if not live.save_started:
                saving.cancel()
            else:
                with contextlib.suppress(Exception):
                    await asyncio.shield(saving)
        live.save_started = False

    def _save_later(self, live: LiveSession, delay: float | None = None) -> None:
        """Write the session's snapshot in the background, ``delay`` seconds from now (unless
        given: the store's ``save_after_seconds``, or at once when the last save is older than
        its ``save_every_seconds``; the call's answer does not wait; the next call does, under
        its lock). Not stored: the session stays live and says why."""
        pausing = self.pausing
        if pausing is None or live.paused_lifetime_seconds <= 0 or live.closed or live.session is None:
            return
        calls, session = live.calls, live.session
        if delay is None:
            # calls closer together than save_after_seconds cancel each pending save: one at
            # least every save_every_seconds, right after a call, or a replica's death would lose
            # every cell of a busy session since its first
            tried = live.save_tried_at
            since = time.monotonic() - (tried if tried is not None else live.created)
            delay = 0.0 if since >= pausing.save_every_seconds else pausing.save_after_seconds

        def save() -> int:
            # the calls it holds, in the snapshot itself: a replica that resumes it after this one
            # died knows its lost cells even when the directory never learnt of this save
            blob = session.snapshot(owner=live.tenant, secret=pausing.secret, profile=live.profile.name,
                                    note={"calls": calls})
            # its private folders go with it (another process resumes them too); too much: not saved
            folders = (seal_folders(live.root, owner=live.tenant, secret=pausing.secret)
                       if live.root is not None else None)  # fmt: skip
            return pausing.store.put(live.id, live.tenant, blob, folders)

        async def saving() -> None:
            # a call that comes before the save starts cancels it (back-to-back cells save once)
            await asyncio.sleep(delay)
            live.save_started, live.save_tried_at = True, time.monotonic()
            try:
                size = await asyncio.shield(self.executor.call(save))
            except PausedStoreFull as exc:
                live.snapshot_error = {"code": exc.code, "message": exc.message}
                log.warning("a session snapshot was not stored: %s", exc.message)
            except Exception as exc:  # it ended, a link in its folders, the disk...
                if live.closed:
                    return
                live.snapshot_error = {"code": "snapshot_failed",
                                       "message": f"the session could not be saved: {exc}"}
                log.warning("a session snapshot failed: %s", exc)
            else:
                if live.closed:  # closed meanwhile: no file outlives it
                    await self.executor.call(lambda: pausing.store.delete(live.id))
                    return
                live.saved_calls, live.saved_bytes, live.snapshot_error = calls, size, None
                live.snapshot_writer = None
            if self.listener is not None and not live.closed:
                await self._tell("used", live)  # the directory learns the snapshot (or its expiry)

        live.saving = asyncio.ensure_future(saving())

    def _pause(self, live: LiveSession) -> None:
        """Free the instance of a saved, idle session; its memory, its place among the live
        sessions and its key's count go back. The next call resumes it (``_wake``)."""
        session, live.session = live.session, None
        live.paused = True
        for held in (live.reservation, live.claim):
            if held is not None:
                held.release()
        live.reservation = live.claim = None
        if session is not None:
            task = asyncio.ensure_future(self.executor.call(session.close))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # logged by no one

    async def _make_room(self, tenant: CallerLike, count: int = 1) -> None:
        """Pause the least recently used idle sessions while ``count`` more live ones would pass
        a cap (all of them, or ``tenant``'s), so that opening, forking or resuming one needs no
        refusal: a paused session holds no place, no memory and no count, and its next call
        resumes it. Nothing to pause (every session busy, or one that cannot be saved): the
        caller's own check refuses as before."""
        if self.pausing is None:
            return

        def over() -> tuple[bool, bool]:
            return (len(self) + sum(self._opening.values()) + count > self.max_sessions,
                    self.count_for(tenant.name) + count > tenant.max_concurrent)

        while True:
            over_all, over_mine = over()
            if not over_all and not over_mine:
                return
            if await self._pause_one(tenant.name, others=not over_mine) is None:
                return

    async def _reserve(self, tenant: CallerLike, memory_mb: int) -> Ticket | None:
        """``memory_mb`` of the gate's budget held for a session of ``tenant`` (None without a
        gate). While the budget (the server's, or ``tenant``'s share) is held by idle sessions,
        the least recently used of them are paused to make room; else the gate's refusal."""
        gate = self.executor.gate
        if gate is None:
            return None
        freed = {"memory_budget": 0, "tenant_memory": 0}
        while True:
            try:
                return gate.reserve(tenant, memory_mb)
            except Refused as exc:
                # runs hold the rest when pausing freed enough already: their refusal stands
                if self.pausing is None or freed.get(exc.code, memory_mb) >= memory_mb:
                    raise
                paused = await self._pause_one(tenant.name, others=exc.code == "memory_budget")
                if paused is None:
                    raise
                for code in freed:  # the tenant's own count in both
                    freed[code] += paused

    async def _pause_one(self, tenant: str, *, others: bool) -> int | None:
        """Pause the least recently used idle session of ``tenant`` (with ``others``: of anyone,
        ``tenant``'s own first), saving it first when its last snapshot is not of its state now
        (used moments ago, or the machine is busy); returns the memory it held in the gate (MB),
        None when none could be paused."""

        def idle(s: LiveSession) -> bool:
            return (not s.paused and not s.closed and s.can_pause and not s.lock.locked()
                    and (others or s.tenant == tenant))  # fmt: skip

        order = sorted((s for s in self._sessions.values() if idle(s)),
                       key=lambda s: (s.tenant != tenant, s.last_used))  # fmt: skip
        for s in order:
            if not idle(s):  # changed while an earlier one was saved
                continue
            if not s.saved or not (s.saving is None or s.saving.done()):
                await self._save_now(s)
            if idle(s) and s.saved and (s.saving is None or s.saving.done()):
                held = int(getattr(s.reservation, "memory_mb", 0) or 0)
                self._pause(s)
                return held
        return None

    async def _save_now(self, live: LiveSession) -> None:
        """Its snapshot written now: a pending background save starts at once, one under way is
        awaited (a failure leaves it live, ``snapshot_error`` saying why)."""
        if live.saving is not None and not live.save_started:
            live.saving.cancel()
            live.saving = None
        if live.saving is None and not live.saved:
            self._save_later(live, delay=0.0)
        saving = live.saving
        if saving is not None:  # its end, whatever it is (a call may cancel a save not begun)
            await asyncio.wait({saving})

    async def _wake(self, live: LiveSession, tenant: CallerLike | None) -> None:
        """Resume a paused session from its snapshot, under its lock: a new instance with its
        variables, imports and files, taking its place, memory and count again (``Refused(429)``
        when there is none: it stays paused). A snapshot that cannot be read or resumed ends the
        session (``410 session_lost``)."""
        pausing = self.pausing
        assert pausing is not None and tenant is not None
        await self._make_room(tenant)
        self._check_room(tenant)
        await self.executor.ready(live.runtime, live.profile.image)
        held = self.executor.memory_for(live.profile, live.runtime, live.limits)
        reservation = await self._reserve(tenant, held)
        self._opening[tenant.name] = self._opening.get(tenant.name, 0) + 1
        claim: Ticket | None = None
        writer = live.snapshot_writer
        data_dir = live.data_dir if live.root is not None else live.profile.data_dir
        out_dir = live.root / "out" if live.root is not None else None

        def resume() -> Any:
            blob, folders = pausing.store.read_parts(live.id, writer)
            if writer is not None and live.root is not None:  # another process's: its folders too
                live.uploaded_bytes = _restore_folders(live.root, folders, owner=live.tenant, secret=pausing.secret)
                # its /out as it was saved was reported by the calls that wrote it: not new here
                live.seen = _files_under(live.root / "out", "/out")
            return self.executor.sandbox_for(live.runtime, live.profile.image).resume(
                blob, owner=live.tenant, secret=pausing.secret,
                data_dir=str(data_dir) if data_dir else None,
                out_dir=str(out_dir) if out_dir else None, within=live.limits,
            )  # fmt: skip

        try:
            if self.claims is not None:
                claim = await self.claims.claim("session", tenant, tenant.max_concurrent)
            try:
                session = await self.executor.call(resume)
            except Exception as exc:  # unreadable, refused (SnapshotRefused), not restorable...
                log.warning("a paused session could not be resumed: %s: %s", type(exc).__name__, exc)
                lost = Refused(
                    410, "session_lost",
                    f"this paused session could not be resumed ({exc}); open a new session",
                )  # fmt: skip
                live.paused = False
                await self.close(live.id)
                raise lost from None
        except BaseException:
            if reservation is not None:
                reservation.release()
            if claim is not None:
                claim.release()
            raise
        finally:
            self._opening[tenant.name] -= 1
            if not self._opening[tenant.name]:
                del self._opening[tenant.name]
        live.session, live.paused = session, False
        live.reservation, live.claim = reservation, claim
        if writer is not None:  # another process's snapshot, now this one's
            await self.executor.call(lambda: pausing.store.adopt(live.id, live.tenant, writer))
            live.snapshot_writer = None
            held_calls = session.note.get("calls")
            if held_calls is not None and 0 <= held_calls <= live.calls:  # the snapshot's word, not the directory's
                live.lost_cells = list(range(held_calls + 1, live.calls + 1))
        self._hold_until(live)

    def adopt(self, session_id: str, tenant: CallerLike, profile: PolicyLike, limits: Limits, runtime: str,
              *, age_seconds: float, calls: int, saved_calls: int, writer: str,
              private_folders: bool = False) -> LiveSession:
        """Hold here, paused, a session whose owner (another process, gone) left its snapshot
        in ``writer``'s folder; its next call resumes it from there. ``calls`` were made, the
        snapshot includes ``saved_calls`` of them: the rest are its ``lost_cells``.
        ``private_folders``: it had them; they are made here, and filled from the stored files
        when it resumes."""
        assert self.pausing is not None
        now = time.monotonic()
        root = _new_folders() if private_folders else None
        live = LiveSession(
            id=session_id, tenant=tenant.name, caller=tenant, profile=profile, limits=limits, runtime=runtime,
            session=None, reservation=None, created=now - max(0.0, age_seconds), last_used=now,
            idle_seconds=self.idle_seconds, max_lifetime_seconds=self.max_lifetime_seconds,
            calls=calls, paused_lifetime_seconds=self.pausing.lifetime_seconds, paused=True,
            saved_calls=calls, snapshot_writer=writer, root=root, moved=True,
            lost_cells=list(range(saved_calls + 1, calls + 1)),
        )  # fmt: skip
        self._sessions[session_id] = live
        return live

    async def sweep_orphans(self) -> int:
        """Remove snapshots no session here holds, those of dead writers that ``Pausing.keep``
        does not keep (another replica may resume them) and expired saved states; returns how many."""
        pausing = self.pausing
        if pausing is None:
            return 0
        self._orphans_swept = time.monotonic()
        keep: set[tuple[str, str]] = set()
        if pausing.keep is not None:
            dead = await self.executor.call(pausing.store.dead_writer_files)
            if dead:
                try:
                    keep = await pausing.keep(dead)
                except Exception:  # the directory cannot say: keep them all for now
                    log.warning("orphan sweep: could not ask which snapshots others may resume")
                    keep = set(dead)
        holds = self._sessions.__contains__  # read as it is now: a session opened meanwhile counts
        removed: int = await self.executor.call(lambda: pausing.store.sweep(holds, lambda w, i: (w, i) in keep))
        return removed + await self.executor.call(pausing.store.sweep_saved)

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

    async def hand_over_all(self) -> int:
        """On a drain: leave every session another replica may resume (saved, ``Pausing.keep``
        set: a shared directory) to the replica its next call reaches (its snapshot, with its
        private folders' files, and its directory entry stay; its instance and folders here go);
        close the others. Returns how many were left."""
        pausing = self.pausing
        left = 0
        for session_id in list(self._sessions):
            live = self._sessions.get(session_id)
            if live is None:
                continue
            if live.saving is not None and not live.saving.done():  # its last call's save, to the end
                with contextlib.suppress(Exception):
                    await asyncio.shield(live.saving)
            if pausing is None or pausing.keep is None or not live.saved or live.lock.locked():
                await self.close(session_id)
                continue
            await self._leave(live)
            left += 1
        return left

    async def hand_over(self, live: LiveSession) -> None:
        """Leave ``live`` to another replica that asked for it (its key's MCP calls reach that
        one now): saved now if it is not, then its instance and folders here go; its snapshot and
        directory entry stay, for that replica to resume. ``Refused``: 409 while it runs a call,
        422 (``snapshot_failed``) or 507 when it cannot be saved or resumed elsewhere: it stays."""
        pausing = self.pausing
        if pausing is None or pausing.keep is None:
            raise Refused(422, "snapshot_failed", "this server does not share paused sessions with other replicas")
        if live.lock.locked():
            raise Refused(409, "session_busy", "this session is running a call; try again after it")
        async with live.lock:
            await self._settle(live)
            if not live.paused and not live.saved and live.can_pause:
                await self._save_now(live)
            if live.closed:
                raise Refused(404, "unknown_session", "the session ended")
            if not live.saved:
                error = live.snapshot_error or {"code": "snapshot_failed", "message": "it cannot be saved"}
                raise Refused(507 if error["code"] != "snapshot_failed" else 422, error["code"], error["message"])
            if self._sessions.get(live.id) is live:
                await self._leave(live)

    async def _leave(self, live: LiveSession) -> None:
        """No longer hold ``live`` here (another replica resumes it from its snapshot): its
        instance, memory, count and folders go; its snapshot and directory entry stay."""
        del self._sessions[live.id]
        live.closed = True
        for held in (live.reservation, live.claim):
            if held is not None:
                held.release()
        if live.session is not None:
            await self.executor.call(live.session.close)
        if live.root is not None:  # its files are stored with its snapshot
            shutil.rmtree(live.root, ignore_errors=True)
        pausing = self.pausing
        if pausing is not None and live.snapshot_writer is None:  # the replica that resumes it counts it
            await self.executor.call(lambda: pausing.store.release(live.id))  # (under the key's flock)

    # -- copies and snapshots ----------------------------------------------------------------
    def _event(self, event: str, live: LiveSession | None, fields: dict[str, str]) -> None:
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
            await self.wake(live, tenant)  # a paused session is resumed first
            if not live.session.alive:
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

    async def _sealed(self, live: LiveSession, tenant: CallerLike | None, *, owner: str,
                      secret: bytes | None, then: Callable[[bytes], _T], user: str = "",
                      expires_at: float | None = None) -> _T:
        """Under ``live.lock``: its state as a sealed snapshot for ``owner`` (its stored one when
        it is paused and that is the same thing, else from its instance, woken for ``tenant``),
        handed to ``then`` on the same worker thread (so what ``then`` adds is of the same
        moment). ``Refused``: 409 while it runs a call, 404 when it ended, 422 when it cannot be
        saved; ``then``'s exceptions pass through."""
        from ..sandbox import SessionEnded, SnapshotFailed, SnapshotRefused

        if live.lock.locked():
            raise Refused(409, "session_busy", "this session is running a call; save it after")
        async with live.lock:
            await self._settle(live)
            if live.closed:
                raise Refused(404, "unknown_session", "the session ended")
            pausing = self.pausing
            # (an adopted session's folders are still in its stored file: it is woken first)
            stored = (pausing is not None and live.paused and live.saved and owner == live.tenant
                      and not user and expires_at is None
                      and (secret or None) == (pausing.secret or None)
                      and (live.root is None or live.snapshot_writer is None))  # fmt: skip
            if not stored:
                await self.wake(live, tenant or live.caller)
            writer = live.snapshot_writer

            def seal() -> _T:
                if stored:  # paused: its stored snapshot is the same thing
                    assert pausing is not None
                    return then(pausing.store.read(live.id, writer))
                return then(live.session.snapshot(owner=owner, secret=secret, profile=live.profile.name,
                                                  user=user, expires_at=expires_at))

            try:
                done: _T = await self.executor.call(seal)
            except SessionEnded:
                raise Refused(404, "unknown_session", "the session has ended") from None
            except (SnapshotFailed, SnapshotRefused) as exc:
                raise Refused(422, "snapshot_failed", f"the session cannot be saved: {exc}") from None
            live.last_used = time.monotonic()
        return done

    async def snapshot(
        self, live: LiveSession, *, owner: str, secret: bytes | None = None, user: str = "",
        expires_at: float | None = None,
    ) -> bytes:
        """``live``'s state as a sealed snapshot (``sandbox.Session.snapshot``: encrypted and
        authenticated for ``owner`` under ``secret``, default the server's; with a ``user`` and
        ``expires_at``, for that user of ``owner`` only, and until then); the session goes
        on. ``Refused(409)`` while it runs a call, ``Refused(422)`` when it cannot be saved."""
        blob = await self._sealed(live, None, owner=owner, secret=secret, then=lambda b: b, user=user,
                                  expires_at=expires_at)  # fmt: skip
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
        folders: bytes | None = None,
        saved_id: str | None = None,
        user: str = "",
    ) -> LiveSession:
        """A new session of ``tenant`` continuing the one ``snapshot`` saved, admitted as
        ``create`` would be (``limits``: the profile's, the most the saved session may have).
        The snapshot is hostile input: ``Refused`` ``snapshot_refused`` (403 ``foreign``, else
        422; ``details`` name the reason) unless it authenticates for
        ``owner`` and fits this profile's image and limits. Nothing of it is read before.
        ``folders``: the sealed private folders of a saved state (``folders``): the new
        session gets private folders holding their files; ``saved_id`` names it in the audit."""
        from ..limits import InvalidLimits
        from ..sandbox import SnapshotFailed, SnapshotRefused

        uploaded = [0]

        def open_snapshot(given: list[Folders]) -> list[Any]:
            ((data_dir, out_dir),) = given
            if folders is not None:
                assert data_dir is not None and out_dir is not None
                uploaded[0] = unseal_folders(folders, owner=owner, secret=secret, data_dir=data_dir, out_dir=out_dir)
            sandbox = self.executor.sandbox_for(runtime, profile.image)
            session = sandbox.resume(
                snapshot, owner=owner, secret=secret, data_dir=_str(data_dir), out_dir=_str(out_dir),
                within=limits, user=user,
            )
            try:
                limits.tightened(session.limits)  # the saved limits within this profile's
            except InvalidLimits:
                session.close()
                raise
            return [session]

        try:
            (live,) = await self._admit(
                tenant, profile, limits, runtime, private_folders=folders is not None, make=open_snapshot
            )
        except SnapshotRefused as exc:
            raise _refusal(exc) from None
        except InvalidLimits as exc:
            raise Refused(
                422, "snapshot_refused",
                f"the snapshot was refused (limits): its session's limits are over profile "
                f"{profile.name!r}'s ({exc}); resume it under the profile it was opened with",
                details=[{"reason": "limits"}],
            ) from None  # fmt: skip
        except (SnapshotFailed, ValueError) as exc:
            raise Refused(
                422, "snapshot_refused", f"the snapshot was refused (state): {exc}",
                details=[{"reason": "state"}],
            ) from None  # fmt: skip
        live.uploaded_bytes = uploaded[0]
        fields = {"bytes": str(len(snapshot) + len(folders or b""))}
        if saved_id is not None:
            fields["saved_id"] = saved_id
        self._event("resumed", live, fields)
        return live

    @staticmethod
    def label(snapshot: bytes, *, owner: str, secret: bytes | None = None, user: str = "",
              need_expiry: bool = False) -> tuple[str, str]:
        """The profile and runtime ``snapshot`` was made under, from its authenticated header
        (``sandbox.sealing.read_label``; the profile is empty when it was made without one); its
        body is not read. ``Refused`` ``snapshot_refused`` as ``resume`` refuses it (and, with
        ``need_expiry``, one without an expiry: version 4, made by an older server)."""
        from ..sandbox.sealing import SnapshotRefused, default_secret, read_label

        try:
            label = read_label(snapshot, owner=owner, secret=default_secret() if secret is None else secret,
                               user=user, need_expiry=need_expiry)
        except SnapshotRefused as exc:
            raise _refusal(exc) from None
        return label.profile, label.runtime

    # -- saved states (a handle kept server-side, ``PausedStore.save_state``) -----------------
    def _saved_store(self) -> Pausing:
        if self.pausing is None:
            raise Refused(
                501, "saving_unavailable",
                "this server keeps no saved sessions (it never pauses sessions: session_pause_seconds = 0)",
            )  # fmt: skip
        return self.pausing

    async def save(self, live: LiveSession, tenant: CallerLike) -> SavedState:
        """Keep ``live``'s state (its snapshot, and its private folders' files) on the server under
        a new handle of ``tenant``'s, for ``Pausing.lifetime_seconds``; the session goes on.
        ``Refused``: 501 without a snapshot store, 409 while it runs a call, 422 when it cannot be
        saved, 507 (``snapshot_budget``, ``snapshot_disk_full``) when it does not fit: nothing is
        kept and the session stays live."""
        pausing = self._saved_store()

        def keep(blob: bytes) -> SavedState:
            files = (seal_folders(live.root, owner=live.tenant, secret=pausing.secret)
                     if live.root is not None else None)  # fmt: skip
            return pausing.store.save_state(
                live.tenant, blob, files, profile=live.profile.name, runtime=live.runtime,
                lifetime_seconds=pausing.lifetime_seconds,
            )  # fmt: skip

        try:
            state = await self._sealed(live, tenant, owner=live.tenant, secret=pausing.secret, then=keep)
        except PausedStoreFull as exc:
            self._event("save_refused", live, {"reason": exc.code})
            raise Refused(507, exc.code, exc.message) from None
        except ValueError as exc:  # its folders hold too much
            raise Refused(422, "snapshot_failed", f"the session cannot be saved: {exc}") from None
        self._event("saved", live, {"saved_id": state.handle, "bytes": str(state.size)})
        if self.listener is not None:
            await self._tell("used", live)
        return state

    async def load_saved(self, tenant: CallerLike, saved_id: str) -> SavedState:
        """``tenant``'s saved state ``saved_id``, read (to resume it: ``resume`` with its
        ``snapshot`` and ``files``). ``Refused`` 404 ``unknown_saved_session`` (never saved,
        another key's, deleted) or 410 ``saved_session_expired``; refusals are audited."""
        pausing = self._saved_store()
        try:
            return await self.executor.call(lambda: pausing.store.load_state(saved_id, tenant.name))
        except SavedStateMissing as exc:
            self._event("saved_refused", None, {"tenant": tenant.name, "saved_id": str(saved_id)[:64],
                                                "reason": exc.reason})  # fmt: skip
            if exc.reason == "expired":
                raise Refused(410, "saved_session_expired", str(exc)) from None
            raise Refused(404, "unknown_saved_session", str(exc)) from None

    async def delete_saved(self, tenant: CallerLike, saved_id: str) -> None:
        """Delete ``tenant``'s saved state ``saved_id``; ``Refused(404)`` when it has none so named."""
        pausing = self._saved_store()
        if not await self.executor.call(lambda: pausing.store.delete_state(saved_id, tenant.name)):
            self._event("saved_refused", None, {"tenant": tenant.name, "saved_id": str(saved_id)[:64],
                                                "reason": "unknown"})  # fmt: skip
            raise Refused(404, "unknown_saved_session", str(_missing_saved(saved_id)))
        self._event("saved_deleted", None, {"tenant": tenant.name, "saved_id": saved_id})


def _refusal(exc: Any) -> Refused:
    """A ``sandbox.SnapshotRefused`` as the faces answer it: 403 when it is another key's or
    another user's."""
    return Refused(
        403 if exc.reason in ("foreign", "user") else 422, "snapshot_refused",
        f"the snapshot was refused ({exc.reason}): {exc}", details=[{"reason": exc.reason}],
    )  # fmt: skip


def _new_folders() -> Path:
    """A new private folder with empty ``data/`` and ``out/`` (a session's ``root``)."""
    root = Path(tempfile.mkdtemp(prefix="wasm-runner-session-"))
    (root / "data").mkdir(mode=0o700)
    (root / "out").mkdir(mode=0o700)
    return root


def _files_under(folder: Path, guest: str) -> dict[str, FileOut]:
    """The regular files under ``folder`` as the guest sees them under ``guest`` (links and
    anything else left out, nothing outside ``folder`` followed)."""
    found: dict[str, FileOut] = {}
    for top, _, names in os.walk(folder):  # never into a linked folder
        for file_name in sorted(names):
            path = Path(top) / file_name
            if path.is_file() and not path.is_symlink():
                name = f"{guest}/{path.relative_to(folder).as_posix()}"
                found[name] = FileOut(name, path.read_bytes())
    return found


def _restore_folders(root: Path, folders: bytes | None, *, owner: str, secret: bytes | None) -> int:
    """``root``'s ``data/`` and ``out/`` emptied, then filled from ``folders`` (sealed,
    ``folders``; None: left empty); returns the bytes of ``data/`` (its uploads)."""
    for name in ("data", "out"):
        shutil.rmtree(root / name, ignore_errors=True)
        (root / name).mkdir(mode=0o700)
    if folders is None:
        return 0
    return unseal_folders(folders, owner=owner, secret=secret, data_dir=root / "data", out_dir=root / "out")


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
