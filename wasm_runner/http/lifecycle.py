"""A replica's life for a load balancer: warming up, ready, draining; and the drain on SIGTERM.

``/readyz`` answers from ``Lifecycle.readiness``: 503 while the app warms up (the profiles'
runtimes are prepared in the background, then the warm pools start), while it drains, and while
the shared state (Redis) does not answer; 200 otherwise. ``/healthz`` stays the liveness probe (200 while the
process serves at all).

On SIGTERM (or the first Ctrl-C) ``DrainingServer`` does not stop uvicorn at once: it calls
``drain``, which marks the replica draining (``/readyz`` fails at once; new runs and sessions get
``503 draining`` with ``Retry-After``), waits up to ``drain_seconds`` for the runs in flight (they
finish and are answered), cancels any still running, closes this replica's sessions (their files
are removed) and releases its leases; then uvicorn shuts down as usual and the process exits 0.
A second signal stops at once (uvicorn's own handling).
"""

from __future__ import annotations

import asyncio
import logging
import time
from types import FrameType
from typing import Protocol

import uvicorn

from ..execution import Executor, SessionStore
from .admission import Admission
from ..warmup import Preparation
from .errors import ApiError
from .leases import Leases
from .shared import SharedState

__all__ = [
    "Lifecycle", "DrainingServer", "Drained", "draining_error", "DRAIN_RETRY_AFTER", "AFTER_DRAIN_SECONDS",
]  # fmt: skip

log = logging.getLogger("wasm_runner.http")

DRAIN_RETRY_AFTER = 5  # what a 503 draining tells the client (the balancer moves it elsewhere)
AFTER_DRAIN_SECONDS = 5  # after the drain, open connections get this long to finish (uvicorn)


def draining_error() -> ApiError:
    return ApiError(
        503, "draining",
        "this replica is shutting down and takes no new runs or sessions; retry (another replica "
        f"will answer) in {DRAIN_RETRY_AFTER} s",
        headers={"Retry-After": str(DRAIN_RETRY_AFTER)},
    )  # fmt: skip


class Drained(Protocol):
    """What readiness and the drain read of the service (``service.Service``): the shared state,
    the admission, the executor, the sessions, the leases and the replica's ``Lifecycle``."""

    @property
    def shared(self) -> SharedState | None: ...
    @property
    def admission(self) -> Admission: ...
    @property
    def executor(self) -> Executor: ...
    @property
    def sessions(self) -> SessionStore: ...
    @property
    def leases(self) -> Leases | None: ...
    @property
    def lifecycle(self) -> Lifecycle: ...


class Lifecycle:
    """The replica's state: ``warming`` until the app is warm, then ready, then ``draining``."""

    def __init__(self) -> None:
        self.warm = False
        self.draining = False
        self.drain_started: float | None = None
        self.preparing: list[Preparation] = []  # the profiles' runtimes (app.py's warm-up)

    def check_admit(self) -> None:
        """Refuse new work while draining (``503 draining``)."""
        if self.draining:
            raise draining_error()

    async def readiness(self, service: Drained) -> tuple[bool, str]:
        """(ready, reason): ``ready``, ``warming``, ``runtime_failed`` (preparing a profile's
        runtime failed: logged, tried again), ``draining`` or ``shared_state_unavailable``."""
        if self.draining:
            return False, "draining"
        if not self.warm:
            failed = any(p.state == "failed" for p in self.preparing)
            return False, "runtime_failed" if failed else "warming"
        if service.shared is not None and not await service.shared.ping():
            return False, "shared_state_unavailable"
        return True, "ready"

    async def drain(self, service: Drained, seconds: float) -> None:
        """Stop taking work, let runs in flight finish (at most ``seconds``), then close the
        sessions and release the leases. Never raises; bounded in time."""
        self.draining = True
        self.drain_started = time.monotonic()
        log.warning("draining: no new runs; waiting up to %g s for %d running, %d queued",
                    seconds, service.admission.running, service.admission.waiting)  # fmt: skip
        deadline = time.monotonic() + seconds
        while service.admission.running or service.admission.waiting:
            if time.monotonic() >= deadline:
                log.warning("drain: %d runs still running after %g s: cancelled",
                            service.admission.running, seconds)  # fmt: skip
                service.executor.cancel_running()
                break
            await asyncio.sleep(0.05)
        try:
            await asyncio.wait_for(service.sessions.close_all(), timeout=max(5.0, seconds))
        except Exception:
            log.exception("drain: closing the sessions failed")
        if service.leases is not None:
            try:
                await service.leases.release_all()
            except Exception:
                log.exception("drain: releasing the leases failed")
        log.warning("drained in %.1f s", time.monotonic() - self.drain_started)


class DrainingServer(uvicorn.Server):
    """``uvicorn.Server`` that drains the service on the first SIGTERM/SIGINT before it stops."""

    def __init__(self, config: uvicorn.Config, service: Drained, drain_seconds: float) -> None:
        super().__init__(config)
        self.service = service
        self.drain_seconds = drain_seconds
        self._drain_requested = False
        self._drain_task: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self._drain_requested and not self.should_exit:
            self._drain_requested = True  # on_tick (on the event loop) starts the drain
            self.service.lifecycle.draining = True  # /readyz fails and new runs are refused now
            return
        super().handle_exit(sig, frame)  # a second signal: stop now

    async def on_tick(self, counter: int) -> bool:
        if self._drain_requested and self._drain_task is None:
            self._drain_task = asyncio.ensure_future(self._drain())
        return await super().on_tick(counter)

    async def _drain(self) -> None:
        try:
            await self.service.lifecycle.drain(self.service, self.drain_seconds)
        finally:
            self.should_exit = True
