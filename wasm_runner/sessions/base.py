"""``StoreBase``: what every job of the session store shares: its open sessions by id, its caps
(in all, per caller) and what it tells its listener and its audit; the jobs are the layers above
(``pausing``, ``forking``, ``saved``, ``store``: ``SessionStore``, the one class).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..admission.gate import Claims
from ..execution.policy import CallerLike, PolicyLike
from ..execution.refusal import Refused
from ..execution.running import Runner
from ..limits import Limits
from ..packages import PackageStore
from ..packages.tiers import BrowserModules
from .directory import SessionListener
from .folders import Folders
from .live import LiveSession
from .paused import Pausing

__all__ = ["ORPHAN_RETRY_SECONDS", "ORPHAN_SWEEP_SECONDS", "StoreBase"]

ORPHAN_SWEEP_SECONDS = 300.0  # how often snapshots without a session are looked for
ORPHAN_RETRY_SECONDS = 10.0  # ...and how soon after a sweep that failed

log = logging.getLogger("wasm_runner.sessions")


class StoreBase:
    """The session store's table and caps (``SessionStore``'s first layer; see its docstring)."""

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
        # the operator's wheelhouse (the executor's): sessions opened with packages (``packages``)
        self.packages: PackageStore | None = None
        # what gives the browser tier's modules (refusals name the tier that has a package), or None
        self.browser_modules: BrowserModules | None = None
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

    async def _tell(self, event: str, live: LiveSession) -> None:
        """``listener.used`` / ``listener.closed``; a failure is logged, never raised (the entry
        expires on its own)."""
        try:
            await getattr(self.listener, event)(live)
        except Exception:
            log.warning("session listener failed on %s of a session", event, exc_info=True)

    def _event(self, event: str, live: LiveSession | None, fields: dict[str, str]) -> None:
        """``on_event`` (the server's audit log); a failure is logged, never raised."""
        if self.on_event is None:
            return
        try:
            self.on_event(event, live, fields)
        except Exception:
            log.warning("session event %s could not be recorded", event, exc_info=True)

    if TYPE_CHECKING:  # the store's own jobs (``store.SessionStore``), used by the layers between
        async def close(self, session_id: str) -> bool: ...

        async def _admit(
            self, tenant: CallerLike, profile: PolicyLike, limits: Limits, runtime: str, *,
            private_folders: bool, make: Callable[[list[Folders]], list[Any]], count: int = 1,
        ) -> list[LiveSession]: ...
