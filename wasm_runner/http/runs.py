"""What the server's ``Executor`` is built from, each part on its own (``service.Service`` makes them
and hands the executor their methods, never its own):

- ``server_sandbox``: the process-wide sandbox of a runtime and image, ``503 runtime_unavailable``
  when it is not installed; ``sandbox_made`` and ``prepare_estimate`` for ``warmup.Warmup``;
- ``ready_within``: a run waits for its runtime's preparation (``Warmup``), at most the queue
  timeout (then ``503 warming``);
- ``resident_mb``: what a run or session holds of the memory budget;
- ``ProfilePools``: each profile's warm pool, started on first use;
- ``RunRecord``: metrics and the audit log of every finished run (and of session events).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..execution import Job
from ..execution.running import Prepare
from ..limits import Limits
from ..result import Result
from ..warmup import Warmup
from .audit import AuditLog
from .errors import ApiError
from .metrics import Metrics

__all__ = ["ProfilePools", "RunRecord", "prepare_estimate", "ready_within", "resident_mb", "sandbox_made",
           "server_sandbox"]

log = logging.getLogger("wasm_runner.http")


def server_sandbox(runtime: str, image: str | None = None, *, quick_tier: bool = True) -> Any:
    """The process-wide sandbox for ``runtime`` and ``image`` (the image only counts for the
    default runtime; blocking: the first call loads the module, or on a first start compiles
    the quick tier, unless ``quick_tier`` is off, while Cranelift's module compiles behind it:
    ``default.default_sandbox``)."""
    from ..runtimes import RuntimeUnavailable
    from ..sandbox import default_sandbox

    try:
        return default_sandbox(runtime, image if runtime == "default" else None, quick_first=quick_tier)
    except RuntimeUnavailable as exc:
        raise ApiError(
            503, "runtime_unavailable", f"runtime {runtime!r} is not installed here: {exc}"
        ) from None


def sandbox_made(runtime: str, image: str | None) -> bool:
    from ..sandbox.default import is_made

    return is_made(runtime, image)


def prepare_estimate(runtime: str, image: str | None, *, quick_tier: bool = True) -> float:
    """About how many seconds making that sandbox takes here (0: all cached; the quick tier's
    compile when it has one and ``quick_tier`` is on)."""
    from ..sandbox.default import prepare_estimate as estimate

    return estimate(runtime, image, quick_first=quick_tier)


def ready_within(warmup: Warmup, timeout: float) -> Prepare:
    """The executor's ``prepare``: return once the sandbox of a runtime and image is ready
    (prepared in the background on first use), waiting at most ``timeout``; else ``503 warming``."""

    async def prepare(runtime: str, image: str | None) -> None:
        from ..sandbox.default import sandbox_key

        runtime, image = sandbox_key(runtime, image)
        await warmup.wait(runtime, image, timeout)

    return prepare


def resident_mb(profile: Any, runtime: str, limits: Limits) -> int:
    """What a run or session counts against the memory budget: what it may add (memory_mb) plus
    the resident cost of its image's pages (images.RESIDENT_MB; the default runtime only)."""
    from ..images import RESIDENT_MB

    image = getattr(profile, "image", None)
    return limits.memory_mb + (RESIDENT_MB.get(image, 0) if runtime == "default" and image else 0)


class ProfilePools:
    """The profiles' warm pools: each profile with a ``pool_size`` keeps that many instances of
    its sandbox warm, started on its first run (or at start-up: ``start``, from ``sandbox``: the
    server's ``server_sandbox``)."""

    def __init__(self, sandbox: Callable[[str, str | None], Any] = server_sandbox) -> None:
        self._lock = threading.Lock()
        self._sandbox = sandbox

    def pool_for(self, sandbox: Any, profile: Any) -> str | None:
        """The profile's warm pool on ``sandbox`` (started on first use), or None without one."""
        if profile.pool_size <= 0 or profile.runtime != sandbox.name:
            return None
        name = f"profile:{profile.name}"
        with self._lock:
            if name not in sandbox.pools:
                sandbox.add_pool(name, size=profile.pool_size, preload=profile.preload,
                                 memory_mb=profile.limits.memory_mb)
        return name

    def start(self, profiles: Any) -> None:
        """Warm the pools of ``profiles`` (a server's, by name) ahead of the first request."""
        for profile in profiles.values():
            if profile.pool_size > 0:
                try:
                    self.pool_for(self._sandbox(profile.runtime, profile.image), profile)
                except ApiError:
                    log.warning("profile %s: runtime %s unavailable, no warm pool", profile.name, profile.runtime)


class RunRecord:
    """Metrics and the audit log of every finished run (the executor's ``on_done``), and the audit
    log's line of a session's fork, snapshot or resume (its session store's ``on_event``)."""

    def __init__(self, metrics: Metrics, audit: AuditLog) -> None:
        self.metrics = metrics
        self.audit = audit

    def record(self, job: Job, result: Result, waited: float) -> None:
        self.metrics.queue_seconds.observe(waited)
        self.metrics.observe(result, job.profile.name, job.kind)
        host_calls = job.host_calls.rows()
        self.metrics.observe_host_calls(host_calls)
        self.audit.record(
            request_id=job.request_id,
            tenant=job.tenant.name,
            client=job.client,
            kind=job.kind,
            profile=job.profile.name,
            limits=job.limits,
            code=job.code if isinstance(job.code, str) else job.code.decode("utf-8", "replace"),
            stdin=job.stdin if not isinstance(job.stdin, bytes) else job.stdin.decode("utf-8", "replace"),
            files_in=job.files,
            result=result,
            session=job.session_id,
            queued_seconds=waited,
            user=getattr(job.tenant, "user", None),
            host_calls=host_calls,
        )

    def session_event(self, event: str, live: Any, fields: dict[str, str]) -> None:
        if live is None:  # about a saved state, not a session: ``fields`` name the tenant
            self.audit.event(f"session_{event}", **fields)
            return
        self.audit.event(f"session_{event}", tenant=live.tenant, session=live.id,
                         profile=live.profile.name, **fields)  # fmt: skip
