"""Copies and snapshots of a session: ``fork`` (new sessions continuing from its state now),
``snapshot`` (its state sealed for its key: ``sandbox.sealing``), ``resume`` (a new session from
such a snapshot, which is hostile input) and ``label`` (what a snapshot was made under).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..execution.policy import CallerLike, PolicyLike
from ..execution.refusal import Refused
from ..limits import Limits
from .folders import Folders, copy_files, str_or_none, unseal_folders
from .live import LiveSession
from .packages import recorded_folders
from .pausing import PausingSessions

__all__ = ["ForkingSessions"]

_T = TypeVar("_T")


class ForkingSessions(PausingSessions):
    """The session store's copies and snapshots (``SessionStore``'s layer above pausing)."""

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
                        copy_files(live.root / "data", data_dir)
                        copy_files(live.root / "out", out_dir)
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
            self._resave(live)
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
            self._resave(live)
        return done

    def _resave(self, live: LiveSession) -> None:
        """Its background save again, when waking it (``wake``) cancelled one not begun: else a
        session forked or sealed after its last call would never be paused."""
        if live.saving is None and not live.paused and not live.saved:
            self._save_later(live)

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
            sandbox = self.executor.sandboxes.sandbox_for(runtime, profile.image)
            session = sandbox.resume(
                snapshot, owner=owner, secret=secret, data_dir=str_or_none(data_dir), out_dir=str_or_none(out_dir),
                within=limits, user=user, packages=recorded_folders(self.packages, runtime),
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


def _refusal(exc: Any) -> Refused:
    """A ``sandbox.SnapshotRefused`` as the faces answer it: 403 when it is another key's or
    another user's."""
    return Refused(
        403 if exc.reason in ("foreign", "user") else 422, "snapshot_refused",
        f"the snapshot was refused ({exc.reason}): {exc}", details=[{"reason": exc.reason}],
    )  # fmt: skip
