"""``LiveSession``: one open session and what the session store tracks about it (its caps,
expiry, calls, private folders, and whether it is paused and saved).

The instance itself is a ``sandbox.Session``; this record is what the store keeps around it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..admission.gate import Ticket
from ..execution.policy import CallerLike, PolicyLike
from ..limits import Limits
from ..result import FileOut, Result

__all__ = ["LiveSession"]


@dataclass(eq=False)
class LiveSession:
    """One open session and what the executor tracks about it.

    ``root`` is its private folder when it was opened with ``private_folders`` (``data/`` shown
    read-only at ``/data``, ``out/`` writable at ``/out``), deleted when the session ends; its
    files are stored with each of its snapshots, so another process can resume it.
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
    caller: CallerLike | None = field(default=None, repr=False)  # who opened it (caps on resume)
    # -- pausing (``Pausing``) --
    paused_lifetime_seconds: float = 0.0  # > 0: it can be paused; kept this long after its last use
    paused: bool = False  # its instance is freed; ``session`` is None until it is resumed
    saved_calls: int = -1  # the calls its stored snapshot includes (-1: none stored)
    saved_bytes: int = 0
    snapshot_writer: str | None = None  # whose folder its snapshot is in (None: this process's)
    snapshot_error: dict[str, str] | None = None  # why the last snapshot was not stored
    saving: asyncio.Future[None] | None = None  # the snapshot being written in the background
    save_started: bool = False  # ...and it has begun (no longer cancelled by a call)
    save_tried_at: float | None = None  # when its last save began (monotonic; None: never)
    lost_cells: list[int] = field(default_factory=list)  # resumed from an older snapshot: the calls lost
    # its packages beyond the image (``name==version``, ``sessions.packages``); empty: the image's only
    packages: tuple[str, ...] = ()
    moved: bool = False  # resumed here after the process that held it was lost (a face says so once)

    @property
    def data_dir(self) -> Path | None:
        return self.root / "data" if self.root is not None else None

    @property
    def alive(self) -> bool:
        """Open, and its instance usable (or paused, to be resumed by its next call)."""
        return not self.closed and (self.paused or bool(self.session.alive))

    @property
    def saved(self) -> bool:
        """Whether its stored snapshot holds its state now (it may be paused)."""
        return self.saved_calls == self.calls and self.snapshot_error is None

    @property
    def can_pause(self) -> bool:
        return self.paused_lifetime_seconds > 0 and self.snapshot_error is None

    def idle_limit(self) -> float:
        """Seconds without a call after which it ends."""
        return self.paused_lifetime_seconds if self.can_pause else self.idle_seconds

    def lifetime_left(self, now: float) -> float:
        """Seconds until its whole life ends, however it is used (a session that can pause lives
        at least as long as a paused one is kept)."""
        lifetime = max(self.max_lifetime_seconds, self.paused_lifetime_seconds if self.can_pause else 0.0)
        return self.created + lifetime - now

    def expires_in(self, now: float) -> float:
        return min(self.last_used + self.idle_limit() - now, self.lifetime_left(now))

    def new_files(self, result: Result) -> list[FileOut]:
        """Files in ``result`` that are new or changed since the previous call; remembers them."""
        fresh = [f for f in result.files if self.seen.get(f.path) != f]
        for f in result.files:
            self.seen[f.path] = f
        return fresh

    def describe(self, now: float | None = None) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        out: dict[str, Any] = {
            "id": self.id,
            "profile": self.profile.name,
            "runtime": self.runtime,
            "limits": self.limits.to_dict(),
            "alive": self.alive,
            "calls": self.calls,
            "idle_expires_in": round(max(0.0, self.last_used + self.idle_limit() - now), 3),
            "lifetime_expires_in": round(max(0.0, self.lifetime_left(now)), 3),
        }
        if self.paused_lifetime_seconds > 0:
            out["paused"] = self.paused
            out["saved"] = self.saved
            if self.snapshot_error is not None:
                out["snapshot_error"] = dict(self.snapshot_error)
        if self.packages:
            out["packages"] = list(self.packages)
        if self.lost_cells:
            out["lost_cells"] = list(self.lost_cells)
        return out
