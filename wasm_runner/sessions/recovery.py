"""Sessions that outlive their replica: a lost owner's session resumed here from its last
snapshot in the paused-session store the replicas share (``SessionRecovery``, the hop's
``recover``; docs/scale-out.md, "What a lost replica means for its sessions")."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Mapping

from ..execution.policy import CallerLike, PolicyLike
from ..limits import InvalidLimits, Limits
from .directory import Entry, SessionDirectory
from .paused import PausedStore
from .store import SessionStore

__all__ = ["SessionRecovery"]

log = logging.getLogger("wasm_runner.sessions")


class SessionRecovery:
    """A session whose owner is gone, resumed on this replica from the snapshot its directory
    entry records, in the folder the replicas share (``http.relay.Hop``'s ``recover``)."""

    def __init__(self, snapshots: PausedStore, directory: SessionDirectory, sessions: SessionStore,
                 vouched: Callable[[str], CallerLike], *, profiles: Mapping[str, PolicyLike],
                 runtimes: Collection[str], paused_lifetime_seconds: float) -> None:
        self.profiles = profiles  # the server's (the replicas share one config)
        self.runtimes = runtimes
        self.paused_lifetime_seconds = paused_lifetime_seconds  # how long a paused session is kept
        self.snapshots = snapshots
        self.directory = directory
        self.sessions = sessions
        self.vouched = vouched  # the tenant of a key name (the replicas share one config)

    def readable(self, session_id: str, entry: Entry) -> bool:
        """Whether this replica could resume ``session_id`` from the snapshot ``entry`` records:
        its profile, runtime and limits valid here, the file in the folder this replica reads
        (not so when the replicas do not share ``snapshot_dir``); with none recorded yet, whether
        the owner's folder is one this replica reads."""
        saved = entry.saved
        if saved is None:  # none stored yet (a hand-over saves it): the owner's folder is readable here
            try:
                return self.snapshots.path(session_id, entry.replica).parent.is_dir()
            except (ValueError, OSError):
                return False
        if saved.profile not in self.profiles:
            return False
        if saved.runtime not in self.runtimes or self.sessions.holds(session_id):
            return False
        try:
            Limits.from_dict(json.loads(saved.limits)).validate()
            return self.snapshots.path(session_id, saved.writer).is_file()
        except (InvalidLimits, ValueError, TypeError, KeyError, OSError):
            return False

    async def __call__(self, session_id: str, entry: Entry, tenant: str) -> bool | None:
        """This replica becomes the session's owner (one replica wins, ``Directory.take_over``)
        and holds it paused; the call goes on here and resumes it. True: held here now; False:
        another replica took it over; None: it cannot be resumed here (no snapshot this replica
        can read, an unknown profile or runtime): the caller answers 410."""
        saved = entry.saved
        if saved is None or not self.readable(session_id, entry):
            return None
        limits = Limits.from_dict(json.loads(saved.limits)).validate()
        ttl = self.paused_lifetime_seconds
        if not await self.directory.take_over(session_id, entry, saved, ttl):
            return False
        log.info("session %s… of a lost replica: resumed here from its snapshot", session_id[:6])
        self.sessions.adopt(
            session_id, self.vouched(tenant), self.profiles[saved.profile], limits,
            saved.runtime, age_seconds=time.time() - saved.created_at, calls=saved.calls,
            saved_calls=saved.saved_calls, writer=saved.writer, private_folders=saved.folders,
        )  # fmt: skip
        return True
