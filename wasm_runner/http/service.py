"""The service behind the routes: one object holding the config, the gatekeeper, admission, the
guest runner, metrics, the audit log, downloads, sessions and the sandboxes (one per runtime).

Routes call ``caller`` (who is this, within their rate?), ``policy`` (which profile and limits?),
``run_job`` (admit and run one guest) and ``render`` (the result as JSON for the client).
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import HTTPConnection

from ..limits import InvalidLimits, Limits
from ..result import Result
from .admission import Admission
from .audit import AuditLog
from .auth import Gatekeeper, Tenant
from .config import Profile, ServerConfig
from .downloads import DownloadStore
from .errors import ApiError
from .guests import GuestRunner, RunTicket
from .metrics import Metrics
from .schemas import FileIn, LimitsRequest

log = logging.getLogger("wasm_runner.http")

__all__ = ["Service", "Job"]


@dataclass
class Job:
    """One guest run as the service sees it: who, under which policy, what code and inputs."""

    tenant: Tenant
    client: str
    kind: str  # run | stream | ws | session
    profile: Profile
    limits: Limits
    runtime: str
    code: str
    stdin: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    display: bool | str = False  # True, False or "figures" (see RunRequest.display)
    filename: str | None = None  # the name tracebacks show for the code (None: "<string>")
    session_id: str | None = None
    request_id: str = field(default_factory=lambda: secrets.token_hex(8))


def client_address(conn: HTTPConnection) -> str:
    return conn.client.host if conn.client else "unknown"


class Service:
    """Everything the HTTP routes share."""

    def __init__(self, config: ServerConfig) -> None:
        from .sessions import SessionStore  # sessions use the service; import here to avoid a cycle

        self.config = config
        self.gatekeeper = Gatekeeper(config)
        self.admission = Admission(
            config.max_running,
            config.max_queue,
            config.memory_budget_mb,
            config.queue_timeout_seconds,
        )
        self.metrics = Metrics()
        self.runner = GuestRunner(
            self.admission,
            workers=config.max_running + 4,
            on_refused=lambda code: self.metrics.rejections.labels(code).inc(),
        )
        self.metrics.watch(
            queue_depth=lambda: self.admission.waiting,
            running=lambda: self.admission.running,
            memory_mb=lambda: self.admission.memory_mb,
            sessions=lambda: len(self.sessions),
        )
        self.audit = AuditLog(config.audit_log, keep_code=config.audit_code == "full")
        self.downloads = DownloadStore(config.download_ttl_seconds, config.download_store_bytes)
        self.sessions = SessionStore(self)
        self._pool_lock = threading.Lock()

    # -- sandboxes -------------------------------------------------------------------------
    @staticmethod
    def sandbox(runtime: str, image: str | None = None) -> Any:
        """The process-wide sandbox for ``runtime`` and ``image`` (the image only counts for the
        default runtime; blocking: the first call loads the module)."""
        from ..runtimes import RuntimeUnavailable
        from ..sandbox import default_sandbox

        try:
            return default_sandbox(runtime, image if runtime == "default" else None)
        except RuntimeUnavailable as exc:
            raise ApiError(
                503, "runtime_unavailable", f"runtime {runtime!r} is not installed here: {exc}"
            ) from None

    # -- who and what ----------------------------------------------------------------------
    def caller(
        self, conn: HTTPConnection, *, allow_query_key: bool = False, key: str | None = None
    ) -> Tenant:
        """Authenticate (``key`` when given, else the headers) and count one request against the
        caller's rate limit."""
        try:
            tenant = self.gatekeeper.authenticate(
                conn.headers,
                conn.query_params,
                client_address(conn),
                allow_query=allow_query_key,
                key=key,
            )
            self.gatekeeper.hit(tenant)
        except ApiError as exc:
            self.metrics.rejections.labels(exc.code).inc()
            raise
        return tenant

    def policy(
        self,
        tenant: Tenant,
        profile_name: str | None,
        asked: LimitsRequest | None,
        runtime: str | None = None,
    ) -> tuple[Profile, Limits, str]:
        """The profile, the (tightened) limits and the runtime for a request, or a 4xx."""
        name = profile_name or self.config.default_profile
        if name not in self.config.profiles:
            raise ApiError(
                422, "unknown_profile",
                f"unknown profile {name!r}; this server has: {', '.join(self.config.profiles)}",
            )  # fmt: skip
        if not tenant.may_use(name):
            raise ApiError(403, "profile_forbidden", f"this API key may not use profile {name!r}")
        profile = self.config.profiles[name]
        limits = self.tighten(profile.limits, asked)
        chosen = runtime or profile.runtime
        if chosen not in self.config.runtimes:
            raise ApiError(
                422, "unknown_runtime",
                f"runtime {chosen!r} is not offered here; choose one of "
                f"{', '.join(self.config.runtimes)}",
            )  # fmt: skip
        return profile, limits, chosen

    @staticmethod
    def tighten(base: Limits, asked: LimitsRequest | None) -> Limits:
        """``base`` lowered by the request's limits; ``ApiError(422)`` if one would rise."""
        try:
            return base.tightened(asked.given() if asked else None)
        except InvalidLimits as exc:
            raise ApiError(422, "invalid_limits", str(exc)) from None

    def files_in(self, files: list[FileIn]) -> dict[str, bytes]:
        if len(files) > self.config.max_files_in:
            raise ApiError(
                422, "too_many_files", f"at most {self.config.max_files_in} files may be sent"
            )
        out: dict[str, bytes] = {}
        for f in files:
            content = f.content()
            if len(content) > self.config.max_file_in_bytes:
                raise ApiError(
                    422, "file_too_large",
                    f"file {f.name!r} is {len(content)} bytes; the limit is "
                    f"{self.config.max_file_in_bytes} bytes",
                )  # fmt: skip
            out[f.name] = content
        return out

    # -- running ---------------------------------------------------------------------------
    @staticmethod
    def resident_mb(profile: Profile, runtime: str, limits: Limits) -> int:
        """What a run counts against the memory budget: what it may add (memory_mb) plus the
        resident cost of its image's pages (images.RESIDENT_MB; the default runtime only)."""
        from ..images import RESIDENT_MB

        return limits.memory_mb + (RESIDENT_MB.get(profile.image, 0) if runtime == "default" else 0)

    def ticket(self, job: Job, memory_mb: int | None = None) -> RunTicket:
        """Admission ticket for ``job``; when it finishes, metrics and the audit log record it."""

        def done(result: Result, waited: float) -> None:
            self.metrics.queue_seconds.observe(waited)
            self.metrics.observe(result, job.profile.name, job.kind)
            self.audit.record(
                request_id=job.request_id,
                tenant=job.tenant.name,
                client=job.client,
                kind=job.kind,
                profile=job.profile.name,
                limits=job.limits,
                code=job.code,
                stdin=job.stdin,
                files_in=job.files,
                result=result,
                session=job.session_id,
            )

        return RunTicket(
            tenant=job.tenant.name,
            memory_mb=self.resident_mb(job.profile, job.runtime, job.limits) if memory_mb is None else memory_mb,
            max_concurrent=job.tenant.max_concurrent,
            on_done=done,
        )

    async def run_job(
        self,
        job: Job,
        *,
        on_output: Callable[[str, bytes], None] | None = None,
        input_source: Any = None,
        cancel: threading.Event | None = None,
        on_admitted: Callable[[], None] | None = None,
    ) -> Result:
        """Admit ``job`` and run it in a fresh instance; raises ``ApiError(429)`` when busy."""
        data_dir = job.profile.data_dir

        def call(cancel_event: threading.Event) -> Result:
            sandbox = self.sandbox(job.runtime, job.profile.image)
            return sandbox.run(
                job.code,
                stdin=job.stdin,
                limits=job.limits,
                data_dir=str(data_dir) if data_dir else None,
                files=job.files or None,
                collect_out=job.profile.files_out,
                display=job.display,
                filename=job.filename,
                on_output=on_output,
                input_source=input_source,
                cancel=cancel_event,
                pool=self.pool_for(sandbox, job.profile),
            )

        return await self.runner.run(self.ticket(job), call, cancel, on_admitted)

    def pool_for(self, sandbox: Any, profile: Profile) -> str | None:
        """The profile's warm pool on ``sandbox`` (started on first use), or None without one."""
        if profile.pool_size <= 0 or profile.runtime != sandbox.name:
            return None
        name = f"profile:{profile.name}"
        with self._pool_lock:
            if name not in sandbox.pools:
                sandbox.add_pool(name, size=profile.pool_size, preload=profile.preload,
                                 memory_mb=profile.limits.memory_mb)
        return name

    def start_pools(self) -> None:
        """Warm every profile's pool ahead of the first request (called at start-up)."""
        for profile in self.config.profiles.values():
            if profile.pool_size > 0:
                try:
                    self.pool_for(self.sandbox(profile.runtime, profile.image), profile)
                except ApiError:
                    log.warning("profile %s: runtime %s unavailable, no warm pool", profile.name, profile.runtime)

    def render(self, result: Result, files_as: str = "base64") -> dict[str, Any]:
        """The result object for the client; files as base64 or as short-lived download URLs."""
        body = result.to_dict()
        if files_as == "url":
            for entry, f in zip(body["files"], result.files, strict=True):
                name = Path(f.path).name or "file"
                token = self.downloads.put(name, f.content)
                entry.pop("content_base64", None)
                entry["url"] = f"/api/files/{token}"
        return body

    async def shutdown(self) -> None:
        await self.sessions.close_all()
        self.runner.shutdown()
        from ..sandbox import default_sandboxes

        for sandbox in default_sandboxes():
            for name in [n for n in sandbox.pools if n.startswith("profile:")]:
                sandbox.pools.pop(name).close()
