"""A replica's life for a load balancer: warming up, ready, draining; and the drain itself.

``Lifecycle.readiness`` is what ``/readyz`` answers: not ready while the app warms up (the
profiles' runtimes are prepared in the background, then the warm pools start), while it drains,
and while the shared state (Redis) does not answer; ready otherwise. ``/healthz`` stays the
liveness probe (200 while the process serves at all).

On SIGTERM (or the first Ctrl-C) the server (``http.serving.DrainingServer``) does not stop at
once: it runs ``Drain``, which marks the replica draining (``/readyz`` fails at once; new runs and
sessions get ``503 draining`` with ``Retry-After``), waits up to ``drain_seconds`` for the runs in
flight (they finish and are answered), cancels any still running, hands its saved sessions over
to the other replicas (with a shared snapshot folder: the next call resumes each elsewhere),
closes the rest (their files are removed) and releases its leases; then the server shuts down as usual and the
process exits 0. A second signal stops at once.

Neither is admission's (``wasm_runner.admission``): a drain stops admission (``Lifecycle`` is the
gate's ``admission.Opening``) but also cancels the executor's runs, hands sessions over to other
replicas and releases the leases, and the lifecycle answers the balancer (with Redis's health).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from ..admission import Leases
from ..execution import Executor, Refused
from ..sessions import SessionStore
from ..warmup import Preparation
from .state import SharedState

__all__ = ["Drain", "Lifecycle", "Load", "draining_error", "DRAIN_RETRY_AFTER"]

log = logging.getLogger("wasm_runner.scaleout")

DRAIN_RETRY_AFTER = 5  # what a 503 draining tells the client (the balancer moves it elsewhere)


def draining_error() -> Refused:
    return Refused(
        503, "draining",
        "this replica is shutting down and takes no new runs or sessions; retry (another replica "
        f"will answer) in {DRAIN_RETRY_AFTER} s",
        headers={"Retry-After": str(DRAIN_RETRY_AFTER)},
    )  # fmt: skip


class Load(Protocol):
    """What the drain waits on (the server's admission, ``wasm_runner.admission.Admission``): the runs
    running and the runs queued on this replica."""

    @property
    def running(self) -> int: ...
    @property
    def waiting(self) -> int: ...


class Lifecycle:
    """The replica's state: ``warming`` until the app is warm, then ready, then ``draining``;
    ``shared`` is the replica's shared state (None: one host), whose Redis must answer."""

    def __init__(self, shared: SharedState | None = None) -> None:
        self.shared = shared
        self.warm = False
        self.draining = False
        self.drain_started: float | None = None
        self.preparing: list[Preparation] = []  # the profiles' runtimes (app.py's warm-up)

    def check_admit(self) -> None:
        """Refuse new work while draining (``503 draining``)."""
        if self.draining:
            raise draining_error()

    async def readiness(self) -> tuple[bool, str]:
        """(ready, reason): ``ready``, ``warming``, ``runtime_failed`` (preparing a profile's
        runtime failed: logged, tried again), ``draining`` or ``shared_state_unavailable``."""
        if self.draining:
            return False, "draining"
        if not self.warm:
            failed = any(p.state == "failed" for p in self.preparing)
            return False, "runtime_failed" if failed else "warming"
        if self.shared is not None and not await self.shared.ping():
            return False, "shared_state_unavailable"
        return True, "ready"


class Drain:
    """The drain of one replica: stop taking work (``lifecycle``), wait for the runs of ``load``,
    cancel what still runs (``executor``), close the ``sessions``, release the ``leases``."""

    def __init__(
        self,
        lifecycle: Lifecycle,
        load: Load,
        executor: Executor,
        sessions: SessionStore,
        leases: Leases | None = None,
    ) -> None:
        self.lifecycle = lifecycle
        self.load = load
        self.executor = executor
        self.sessions = sessions
        self.leases = leases

    def begin(self) -> None:
        """Refuse new work from now on (``/readyz`` fails at once); ``run`` does the rest."""
        self.lifecycle.draining = True

    async def run(self, seconds: float) -> None:
        """Stop taking work, let runs in flight finish (at most ``seconds``), then hand the
        saved sessions over (``SessionStore.hand_over_all``: another replica resumes them from
        the shared snapshot folder), close the rest and release the leases. Never raises;
        bounded in time."""
        self.begin()
        started = self.lifecycle.drain_started = time.monotonic()
        log.warning("draining: no new runs; waiting up to %g s for %d running, %d queued",
                    seconds, self.load.running, self.load.waiting)  # fmt: skip
        deadline = started + seconds
        while self.load.running or self.load.waiting:
            if time.monotonic() >= deadline:
                log.warning("drain: %d runs still running after %g s: cancelled",
                            self.load.running, seconds)  # fmt: skip
                self.executor.cancel_running()
                break
            await asyncio.sleep(0.05)
        try:
            # saved sessions stay for another replica (shared snapshot folder), the rest close
            await asyncio.wait_for(self.sessions.hand_over_all(), timeout=max(5.0, seconds))
        except Exception:
            log.exception("drain: closing the sessions failed")
        if self.leases is not None:
            try:
                await self.leases.release_all()
            except Exception:
                log.exception("drain: releasing the leases failed")
        log.warning("drained in %.1f s", time.monotonic() - started)
