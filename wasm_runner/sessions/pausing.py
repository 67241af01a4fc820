"""Pausing: idle sessions' states saved in the background to the paused-session store
(``paused.PausedStore``), their instances freed to make room (the least recently used first),
woken by their next call; a lost owner's paused session adopted here; orphaned snapshots swept;
sessions handed over to another replica on a drain.

``paused.Pausing`` says how a store does it (its ``PausedStore``, after how long, for how long,
the secret); ``PausingSessions`` is the session store's layer that does it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import time
from typing import Any

from ..admission.gate import Ticket
from ..execution.policy import CallerLike, PolicyLike
from ..execution.refusal import Refused
from ..limits import Limits
from .base import StoreBase
from .folders import files_under, new_folders, restore_folders, seal_folders
from .live import LiveSession
from .packages import recorded_folders
from .paused import PausedStoreFull

__all__ = ["PausingSessions"]

log = logging.getLogger("wasm_runner.sessions")


class PausingSessions(StoreBase):
    """The session store's pausing (``SessionStore``'s layer above ``StoreBase``)."""

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

    async def _make_room(self, tenant: CallerLike, count: int = 1, waking: LiveSession | None = None) -> None:
        """Pause the least recently used idle sessions while ``count`` more live ones would pass
        a cap (all of them, or ``tenant``'s), so that opening, forking or resuming one needs no
        refusal: a paused session holds no place, no memory and no count, and its next call
        resumes it. Nothing to pause (every session busy, or one that cannot be saved): the
        caller's own check refuses as before. ``tenant``'s own sessions go first, within its
        paused-session budget (``_pause_one``: else ``429 paused_sessions_budget``; ``waking``:
        the paused session this makes room for, which leaves the count)."""
        if self.pausing is None:
            return

        def over() -> tuple[bool, bool]:
            return (len(self) + sum(self._opening.values()) + count > self.max_sessions,
                    self.count_for(tenant.name) + count > tenant.max_concurrent)

        while True:
            over_all, over_mine = over()
            if not over_all and not over_mine:
                return
            if await self._pause_one(tenant.name, others=not over_mine, waking=waking) is None:
                return

    async def _reserve(self, tenant: CallerLike, memory_mb: int, waking: LiveSession | None = None) -> Ticket | None:
        """``memory_mb`` of the gate's budget held for a session of ``tenant`` (None without a
        gate). While the budget (the server's, or ``tenant``'s share) is held by idle sessions,
        the least recently used of them are paused to make room (``tenant``'s own first, within
        its paused-session budget); else the gate's refusal."""
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
                paused = await self._pause_one(tenant.name, others=exc.code == "memory_budget", waking=waking)
                if paused is None:
                    raise
                for code in freed:  # the tenant's own count in both
                    freed[code] += paused

    def paused_for(self, tenant: str) -> int:
        """``tenant``'s paused sessions here."""
        return sum(1 for s in self._sessions.values() if s.paused and s.tenant == tenant)

    def _over_paused_count(self, tenant: str, waking: LiveSession | None) -> Refused | None:
        """The refusal when pausing one more of ``tenant``'s sessions would pass its count budget."""
        assert self.pausing is not None
        paused = self.paused_for(tenant) - (1 if waking is not None and waking.paused else 0)
        if paused < self.pausing.per_key:
            return None
        return Refused(
            429, "paused_sessions_budget",
            f"this key already has {paused} paused sessions, the most one key may have "
            f"(session_paused_per_key = {self.pausing.per_key}), and a new one would pause "
            "another of its own; close sessions it no longer needs (DELETE /api/sessions/{id}) first",
        )  # fmt: skip

    def _over_paused_bytes(self) -> Refused:
        assert self.pausing is not None
        budget = self.pausing.store.key_budget_bytes
        return Refused(
            429, "paused_sessions_budget",
            f"this key's stored sessions and saved states fill its snapshot disk budget "
            f"(snapshot_key_bytes = {budget} bytes), so none of its sessions can be paused to make "
            "room for a new one; close sessions or delete saved states it no longer needs first",
        )  # fmt: skip

    async def _pause_one(self, tenant: str, *, others: bool, waking: LiveSession | None = None) -> int | None:
        """Pause the least recently used idle session of ``tenant`` (with ``others``: of anyone,
        ``tenant``'s own first), saving it first when its last snapshot is not of its state now
        (used moments ago, or the machine is busy); returns the memory it held in the gate (MB),
        None when none could be paused. ``tenant``'s own are paused only within its budget
        (``Pausing.per_key`` paused already, or its own cannot be saved within its
        ``key_budget_bytes``); when nothing else could be paused (``others`` false: ``tenant``
        is at its own cap, so another key's session would make room beyond its share),
        ``Refused(429, paused_sessions_budget)`` names the budget."""

        def idle(s: LiveSession) -> bool:
            return (not s.paused and not s.closed and s.can_pause and not s.lock.locked()
                    and (others or s.tenant == tenant))  # fmt: skip

        order = sorted((s for s in self._sessions.values() if idle(s)),
                       key=lambda s: (s.tenant != tenant, s.last_used))  # fmt: skip
        budget: Refused | None = None
        for s in order:
            if not idle(s):  # changed while an earlier one was saved
                continue
            if s.tenant == tenant:
                over = self._over_paused_count(tenant, waking)
                if over is not None:
                    budget = over
                    continue
            if not s.saved or not (s.saving is None or s.saving.done()):
                await self._save_now(s)
            if idle(s) and s.saved and (s.saving is None or s.saving.done()):
                held = int(getattr(s.reservation, "memory_mb", 0) or 0)
                self._pause(s)
                return held
            if s.tenant == tenant and (s.snapshot_error or {}).get("code") == "snapshot_budget":
                budget = budget or self._over_paused_bytes()
        if budget is not None:
            raise budget
        return None

    async def _wake(self, live: LiveSession, tenant: CallerLike | None) -> None:
        """Resume a paused session from its snapshot, under its lock: a new instance with its
        variables, imports and files, taking its place, memory and count again (``Refused(429)``
        when there is none: it stays paused). A snapshot that cannot be read or resumed ends the
        session (``410 session_lost``)."""
        pausing = self.pausing
        assert pausing is not None and tenant is not None
        await self._make_room(tenant, waking=live)
        self._check_room(tenant)
        await self.executor.ready(live.runtime, live.profile.image)
        held = self.executor.sandboxes.memory_for(live.profile, live.runtime, live.limits)
        reservation = await self._reserve(tenant, held, waking=live)
        self._opening[tenant.name] = self._opening.get(tenant.name, 0) + 1
        claim: Ticket | None = None
        writer = live.snapshot_writer
        data_dir = live.data_dir if live.root is not None else live.profile.data_dir
        out_dir = live.root / "out" if live.root is not None else None

        def resume() -> Any:
            blob, folders = pausing.store.read_parts(live.id, writer)
            if writer is not None and live.root is not None:  # another process's: its folders too
                live.uploaded_bytes = restore_folders(live.root, folders, owner=live.tenant, secret=pausing.secret)
                # its /out as it was saved was reported by the calls that wrote it: not new here
                live.seen = files_under(live.root / "out", "/out")
            return self.executor.sandboxes.sandbox_for(live.runtime, live.profile.image).resume(
                blob, owner=live.tenant, secret=pausing.secret,
                data_dir=str(data_dir) if data_dir else None,
                out_dir=str(out_dir) if out_dir else None, within=live.limits,
                packages=recorded_folders(self.packages, live.runtime),
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
        live.packages = tuple(session.packages.names) if session.packages is not None else ()
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
        root = new_folders() if private_folders else None
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
