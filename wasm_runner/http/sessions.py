"""Sessions for chat-app tools: one long-lived sandbox instance per session, keeping variables and
files across calls.

- A session belongs to the API key that created it; other keys get 404 for its id.
- It ends after ``session_idle_seconds`` without a call, after ``session_max_lifetime_seconds`` in
  all, on ``DELETE``, or when a call leaves its instance unusable (``Session.alive`` is False after
  the call; the response then says ``"alive": false``). The sandbox decides: a CPU, wall-clock or
  output limit, or a crashed interpreter, ends the instance; an exception, ``sys.exit`` or the
  memory limit (a ``MemoryError`` inside the program) does not. See the README, "Sessions".
- It holds its memory limit in the admission budget for its whole life; each call also takes a run
  slot like any other run. One call at a time per session (a second concurrent call gets 409).
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..limits import Limits
from ..result import Result
from ..sandbox import SessionEnded
from .admission import Busy, Ticket
from .auth import Tenant
from .config import Profile
from .errors import ApiError
from .guests import busy_error

if TYPE_CHECKING:
    from .service import Job, Service

__all__ = ["LiveSession", "SessionStore"]


@dataclass(eq=False)
class LiveSession:
    """One open session and what the server tracks about it."""

    id: str
    tenant: str
    profile: Profile
    limits: Limits
    runtime: str
    session: Any  # wasm_runner Session
    reservation: Ticket
    created: float
    idle_seconds: float
    max_lifetime_seconds: float
    last_used: float = 0.0
    calls: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    closed: bool = False

    def expires_in(self, now: float) -> float:
        return (
            min(self.last_used + self.idle_seconds, self.created + self.max_lifetime_seconds) - now
        )

    def describe(self, now: float | None = None) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        return {
            "id": self.id,
            "profile": self.profile.name,
            "runtime": self.runtime,
            "limits": self.limits.to_dict(),
            "alive": not self.closed and bool(self.session.alive),
            "calls": self.calls,
            "idle_expires_in": round(max(0.0, self.last_used + self.idle_seconds - now), 3),
            "lifetime_expires_in": round(
                max(0.0, self.created + self.max_lifetime_seconds - now), 3
            ),
        }


class SessionStore:
    """Open sessions by id; expires them in ``sweep`` (run every second by the app)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.config = service.config
        self._sessions: dict[str, LiveSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def _count_for(self, tenant: str) -> int:
        return sum(1 for s in self._sessions.values() if s.tenant == tenant)

    async def create(
        self, tenant: Tenant, profile: Profile, limits: Limits, runtime: str
    ) -> LiveSession:
        if len(self._sessions) >= self.config.max_sessions:
            raise ApiError(
                429, "too_many_sessions",
                f"the server has its maximum of {self.config.max_sessions} open sessions",
                headers={"Retry-After": "30"},
            )  # fmt: skip
        if self._count_for(tenant.name) >= tenant.max_concurrent:
            raise ApiError(
                429, "too_many_sessions",
                f"this API key already has {tenant.max_concurrent} open sessions; delete one first",
                headers={"Retry-After": "30"},
            )  # fmt: skip
        try:
            reservation = self.service.admission.reserve(
                tenant.name, self.service.resident_mb(profile, runtime, limits))
        except Busy as exc:
            raise busy_error(exc) from None
        data_dir = profile.data_dir

        def open_session() -> Any:  # /out is granted and collected by the session itself
            return self.service.sandbox(runtime, profile.image).session(
                limits=limits, data_dir=str(data_dir) if data_dir else None
            )

        try:
            sandbox_session = await self.service.runner.call(open_session)
        except BaseException:
            reservation.release()
            raise
        now = time.monotonic()
        live = LiveSession(
            id=secrets.token_urlsafe(18),
            tenant=tenant.name,
            profile=profile,
            limits=limits,
            runtime=runtime,
            session=sandbox_session,
            reservation=reservation,
            created=now,
            last_used=now,
            idle_seconds=self.config.session_idle_seconds,
            max_lifetime_seconds=self.config.session_max_lifetime_seconds,
        )
        self._sessions[live.id] = live
        return live

    def get(self, session_id: str, tenant: Tenant) -> LiveSession:
        live = self._sessions.get(session_id)
        if live is None or live.tenant != tenant.name or live.expires_in(time.monotonic()) <= 0:
            raise ApiError(
                404, "unknown_session",
                "no such session: it never existed, belongs to another key, expired or was deleted",
            )  # fmt: skip
        return live

    async def run(
        self,
        live: LiveSession,
        job: Job,
        *,
        on_output: Any = None,
        input_source: Any = None,
        cancel: threading.Event | None = None,
        on_admitted: Any = None,
    ) -> Result:
        """One call in the session; closes the session when the call left it unusable."""
        if live.lock.locked():
            raise ApiError(409, "session_busy", "this session is already running a call")
        async with live.lock:
            if live.closed:
                raise ApiError(404, "unknown_session", "the session ended")
            live.last_used = time.monotonic()

            def call(cancel: threading.Event) -> Result:
                try:
                    for name, content in job.files.items():
                        live.session.upload(name, content)
                    return live.session.run(
                        job.code,
                        stdin=job.stdin,
                        limits=job.limits,
                        display=job.display,
                        filename=job.filename,
                        on_output=on_output,
                        input_source=input_source,
                        cancel=cancel,
                    )
                except SessionEnded:
                    raise ApiError(404, "unknown_session", "the session has ended") from None
                except ValueError as exc:  # an upload the session cannot take (quota, name)
                    raise ApiError(422, "file_rejected", str(exc)) from None

            # memory is already reserved for the session's life: the call takes a slot only
            try:
                result = await self.service.runner.run(
                    self.service.ticket(job, memory_mb=0), call, cancel, on_admitted
                )
            finally:
                live.calls += 1
                live.last_used = time.monotonic()
                if not live.session.alive:
                    await self.close(live.id)
            return result

    async def close(self, session_id: str) -> bool:
        live = self._sessions.pop(session_id, None)
        if live is None:
            return False
        live.closed = True
        try:
            await self.service.runner.call(live.session.close)
        finally:
            live.reservation.release()
        return True

    async def sweep(self) -> int:
        """Close expired sessions that are not running a call; returns how many were closed."""
        now = time.monotonic()
        expired = [
            s.id for s in self._sessions.values() if s.expires_in(now) <= 0 and not s.lock.locked()
        ]
        for session_id in expired:
            await self.close(session_id)
        return len(expired)

    async def close_all(self) -> None:
        for session_id in list(self._sessions):
            await self.close(session_id)
