"""Saved states: a session's state (and its private folders' files) kept on the server under a
handle of its key's (``save``), read to be resumed (``load_saved``) and deleted (``delete_saved``),
in the paused-session store (``PausedStore.save_state``).
"""

from __future__ import annotations


from ..execution.policy import CallerLike
from ..execution.refusal import Refused
from .folders import seal_folders
from .forking import ForkingSessions
from .live import LiveSession
from .paused import Pausing, PausedStoreFull, SavedState, SavedStateMissing
from .paused import missing_saved as _missing_saved

__all__ = ["SavingSessions"]


class SavingSessions(ForkingSessions):
    """The session store's saved states (``SessionStore``'s layer above copies and snapshots)."""

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
        ``Refused``: 501 without a paused-session store, 409 while it runs a call, 422 when it cannot be
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
