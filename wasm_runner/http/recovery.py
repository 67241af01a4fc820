"""Sessions that outlive their replica: where paused sessions are kept (``snapshot_store``) and a
lost owner's session resumed here from its last snapshot (``SessionRecovery``, the hop's
``recover``; docs/scale-out.md, "What a lost replica means for its sessions")."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from ..execution import CallerLike, SessionStore, SnapshotStore
from ..limits import InvalidLimits, Limits
from ..scaleout.directory import Directory, Entry
from ..settings import ServerConfig

__all__ = ["SessionRecovery", "snapshot_store"]

log = logging.getLogger("wasm_runner.http")


def snapshot_store(config: ServerConfig, writer: str | None) -> SnapshotStore | None:
    """Where this server's paused sessions go (``snapshot_dir``, default
    ``<cache>/paused-sessions``; ``writer``: the replica id, else one per process), or None when
    sessions never pause (``session_pause_seconds = 0``)."""
    if not config.sessions.session_pause_seconds:
        return None
    from ..cache import cache_dir

    root = Path(config.sessions.snapshot_dir) if config.sessions.snapshot_dir else cache_dir() / "paused-sessions"
    return SnapshotStore(root, writer=writer, key_budget_bytes=config.sessions.snapshot_key_bytes)


class SessionRecovery:
    """A session whose owner is gone, resumed on this replica from the snapshot its directory
    entry records, in the folder the replicas share (``relay.Hop``'s ``recover``)."""

    def __init__(self, config: ServerConfig, snapshots: SnapshotStore, directory: Directory,
                 sessions: SessionStore, vouched: Callable[[str], CallerLike]) -> None:
        self.config = config
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
        if saved.profile not in self.config.profiles:
            return False
        if saved.runtime not in self.config.runtimes or self.sessions.holds(session_id):
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
        ttl = self.config.sessions.session_paused_lifetime_seconds
        if not await self.directory.take_over(session_id, entry, saved, ttl):
            return False
        log.info("session %s… of a lost replica: resumed here from its snapshot", session_id[:6])
        self.sessions.adopt(
            session_id, self.vouched(tenant), self.config.profiles[saved.profile], limits,
            saved.runtime, age_seconds=time.time() - saved.created_at, calls=saved.calls,
            saved_calls=saved.saved_calls, writer=saved.writer, private_folders=saved.folders,
        )  # fmt: skip
        return True
