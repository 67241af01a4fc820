"""The session directory as the session manager sees it: the interface, not a store.

With several replicas a shared directory (``scaleout.directory.RedisDirectory``) records, for every
open session, which replica holds it and its stored snapshot, so another replica can find the
owner or, when the owner is lost, resume the session (``recovery.SessionRecovery``). This module
holds what the session manager needs of it and what they exchange:

- ``SessionListener``: told when a session opens, is used and closes (``SessionStore``'s listener);
- ``SessionDirectory``: a listener that can also hand a lost owner's session over
  (``take_over``) and say which dead writers' snapshots another replica may still resume;
- ``Entry`` and ``Saved``: a session's directory entry and the snapshot it records.

The implementations (one host, Redis) live in ``scaleout.directory``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from .live import LiveSession

__all__ = ["Entry", "Saved", "SessionDirectory", "SessionListener"]


class SessionListener(Protocol):
    """Told when a session opens, is used and closes (the HTTP server's session directory, so
    other replicas can find a session's owner). ``opened`` may refuse with an exception: the
    session is then closed and the exception raised to the caller."""

    async def opened(self, live: LiveSession) -> None: ...

    async def used(self, live: LiveSession) -> None: ...

    async def closed(self, live: LiveSession) -> None: ...



class SessionDirectory(SessionListener, Protocol):
    """What the session manager uses of the session directory beyond listening: a lost owner's
    session taken over by this replica (``recovery.SessionRecovery``) and the snapshots of dead
    writers another replica may still resume (``Pausing.keep``)."""

    async def take_over(self, session_id: str, old: Entry, saved: Saved, ttl_seconds: float) -> bool: ...

    async def snapshots_kept(self, dead: list[tuple[str, str]]) -> set[tuple[str, str]]: ...


@dataclass(frozen=True)
class Saved:
    """A session's stored snapshot, as its directory entry records it: whose folder it is in
    (``writer``), the calls it includes (``saved_calls``) of the calls made (``calls``), and what
    another replica needs to resume it there (profile, runtime, limits as JSON, when it opened;
    ``folders``: it has private folders, whose files are stored with the snapshot)."""

    writer: str
    saved_calls: int
    calls: int
    profile: str
    runtime: str
    limits: str
    created_at: float
    folders: bool = False

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "writer": self.writer, "saved_calls": self.saved_calls, "calls": self.calls,
            "profile": self.profile, "runtime": self.runtime, "limits": json.loads(self.limits),
            "created_at": self.created_at,
        }  # fmt: skip
        if self.folders:
            data["folders"] = True
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Saved:
        return cls(str(data["writer"]), int(data["saved_calls"]), int(data["calls"]),
                   str(data["profile"]), str(data["runtime"]),
                   json.dumps(dict(data["limits"]), sort_keys=True), float(data["created_at"]),
                   folders=data.get("folders") is True)  # fmt: skip

    @classmethod
    def of(cls, live: LiveSession, writer: str) -> Saved | None:
        """What ``live``'s entry records of its snapshot; None when it has none stored yet."""
        if live.saved_calls < 0:
            return None
        return cls(live.snapshot_writer or writer, live.saved_calls, live.calls, live.profile.name,
                   live.runtime, json.dumps(live.limits.to_dict(), sort_keys=True),
                   time.time() - (time.monotonic() - live.created), folders=live.root is not None)  # fmt: skip


@dataclass(frozen=True)
class Entry:
    """Who holds a session or a link: the owner's internal base URL, its process, the tenant;
    for a session, its stored snapshot (``saved``) when it has one."""

    owner: str
    replica: str
    tenant: str
    lost: bool = False  # the owner is gone: a tombstone, so later calls get 410 at once too
    saved: Saved | None = None
    raw: bytes = field(default=b"", compare=False, repr=False)  # as read (a compare-and-set)

    def dumps(self) -> bytes:
        data: dict[str, object] = {"owner": self.owner, "replica": self.replica, "tenant": self.tenant}
        if self.lost:
            data["lost"] = True
        if self.saved is not None:
            data["saved"] = self.saved.to_dict()
        return json.dumps(data).encode()

    @classmethod
    def loads(cls, raw: bytes | str | None) -> Entry | None:
        """The entry in ``raw``, or None when it is missing or not one of ours."""
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            saved = data.get("saved")
            entry = cls(str(data["owner"]), str(data["replica"]), str(data["tenant"]),
                        lost=data.get("lost") is True,
                        saved=Saved.from_dict(saved) if isinstance(saved, dict) else None,
                        raw=raw.encode() if isinstance(raw, str) else bytes(raw))  # fmt: skip
        except (ValueError, KeyError, TypeError):
            return None
        return entry
