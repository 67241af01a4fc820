"""The service behind the routes: one object holding the config, the gatekeeper, admission
(``wasm_runner.admission``), metrics, the audit log, downloads and the server's ``Executor``
(``wasm_runner.execution``: the one way every face reaches guests, with its one ``SessionStore``).

Routes call ``caller`` (who is this, within their rate?), ``policy`` (which profile and limits?),
``run_job`` (admit and run one guest) and ``render`` (the result as JSON for the client). The MCP
tools at ``/mcp`` run through the same ``executor`` (``wasm_runner.mcp.http``), so admission, the
audit log and the metrics see every guest whichever face started it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.requests import HTTPConnection

from ..admission import Admission, AdmissionGate, resident_mb, server_memory_mb
from ..execution import Executor, Job, Policy, PolicyLike, Refused
from ..host_functions import HostFunctions
from ..host_functions.declared import Caller as FunctionCaller
from ..host_functions.declared import Catalog
from ..limits import InvalidLimits, Limits
from ..result import Result
from ..sandbox.provider import ServerSandboxes
from ..scaleout.directory import directory_for
from ..scaleout.drain import Drain, Lifecycle
from ..scaleout.forwarding import Forwarding
from ..scaleout.leases import RedisLeases
from ..scaleout.signing import Signer
from ..scaleout.state import SharedState
from ..sessions import Pausing, SessionRecovery, paused_store
from .audit import AuditLog
from .auth import Gatekeeper, Tenant
from ..settings import ConfigError, ServerConfig
from .downloads import DownloadStore
from .errors import ApiError
from .exercise_catalog import ExerciseCatalog
from .internal import internal_call
from .metrics import Metrics
from .relay import Hop
from .record import RunRecord
from .schemas import FileIn, LimitsRequest

log = logging.getLogger("wasm_runner.http")

__all__ = ["Service", "Job"]


def client_address(conn: HTTPConnection) -> str:
    return conn.client.host if conn.client else "unknown"


def snapshot_secret(config: ServerConfig) -> bytes:
    """The secret session snapshots are sealed under (``sandbox.sealing``):
    ``$WASM_RUNNER_SNAPSHOT_SECRET``, else one derived from the replicas' cluster secret (every
    replica opens every replica's snapshots), else this machine's own (the cache folder)."""
    from ..sandbox.sealing import default_secret

    shared = None
    if config.scale_out.cluster_secret:
        shared = hmac.new(config.scale_out.cluster_secret.encode(), b"wasm-runner session snapshots",
                          hashlib.sha256).digest()  # fmt: skip
    return default_secret(shared)


class Service:
    """Everything the HTTP routes (and the MCP tools at ``/mcp``) share."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        admission, sessions, downloads = config.admission, config.sessions, config.downloads
        # the state shared with other replicas (Redis), or None: everything local (one host)
        self.shared = SharedState.from_settings(config.scale_out)
        self.gatekeeper = Gatekeeper(config, self.shared)
        self.admission = Admission(
            admission.max_running,
            admission.max_queue,
            admission.memory_budget_mb,
            admission.queue_timeout_seconds,
            tenant_memory_mb=admission.tenant_memory_mb,
            tenant_queue=admission.tenant_queue_places,
            hold_seconds=sessions.session_idle_seconds,
            max_waiting=admission.max_waiting_runs,
            tenant_waiting=admission.max_waiting_runs_per_key,
        )
        # instances started ahead of time and the allocator's resident pages count first
        self.admission.hold_for_server(server_memory_mb(config))
        self.metrics = Metrics()
        self.lifecycle = Lifecycle(self.shared)  # warming / ready / draining (/readyz, SIGTERM)
        # per-key runs in flight and open sessions counted across replicas, or None (local)
        self.leases: RedisLeases | None = RedisLeases(self.shared) if self.shared is not None else None
        self.audit = AuditLog(config.audit_log, keep_code=config.audit_code == "full")
        # the host functions the config declares, ready to call (entry points imported)
        try:
            self.catalog = Catalog(config.functions)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.exercises = ExerciseCatalog(config.exercises_dir)  # /api/exercises
        # where sessions and download links live, for every replica (scaleout.directory)
        self.directory = directory_for(self.shared, config.scale_out.advertise_url)
        self.downloads = DownloadStore(
            downloads.download_ttl_seconds, downloads.download_store_bytes,
            downloads.download_tenant_bytes, directory=self.directory,
        )  # fmt: skip
        # the sandboxes, the profiles' warm pools, the memory a run holds and the runtimes' warm-up
        self.sandboxes = ServerSandboxes(quick_tier=config.quick_tier,
                                         wait_seconds=config.admission.queue_timeout_seconds)
        self.warmup = self.sandboxes.warmup  # /readyz reports its preparations
        self.record = RunRecord(self.metrics, self.audit)  # every run's and session event's record
        # idle sessions paused to disk (None: never), in the folder replicas share
        self.snapshots = paused_store(
            sessions.snapshot_dir, self.shared.replica_id if self.shared else None, sessions.snapshot_key_bytes,
        ) if sessions.session_pause_seconds else None  # fmt: skip
        pausing = None
        if self.snapshots is not None:
            pausing = Pausing(
                self.snapshots, after_seconds=sessions.session_pause_seconds,
                lifetime_seconds=sessions.session_paused_lifetime_seconds,
                per_key=sessions.session_paused_per_key,
                secret=self.snapshot_secret,
                keep=self.directory.snapshots_kept if self.directory.shared else None,
            )  # fmt: skip
        # the executor is handed parts, never the service: no part calls back into it
        self.executor = Executor(
            self.sandboxes,
            # admission as its gate: a refusal is counted by its reason (the metrics)
            gate=AdmissionGate(self.admission, self.record.refused, self.leases, self.lifecycle),
            recorder=self.record,
            # a parked run (waiting for input) keeps its worker thread
            workers=admission.max_running + admission.max_waiting_runs + 4,
            max_sessions=sessions.max_sessions,
            session_idle_seconds=sessions.session_idle_seconds,
            session_max_lifetime_seconds=sessions.session_max_lifetime_seconds,
            # the directory learns of every session; the leases count them per key across replicas
            session_listener=self.directory if self.directory.shared else None,
            session_claims=self.leases,
            session_pausing=pausing,
            max_fork_copies=sessions.max_fork_copies,
        )
        self.sessions = self.executor.sessions  # HTTP and MCP sessions alike
        # the internal hop: who holds a session or link, and the call relayed to it
        self.forwarding = Forwarding(
            self.directory, self.sessions.holds,
            Signer(config.scale_out.cluster_secret) if config.scale_out.cluster_secret else None,
        )  # fmt: skip
        longest = max((p.limits.wall_seconds for p in config.profiles.values()), default=60.0)
        self.hop = Hop(self.forwarding, read_timeout=longest + config.admission.queue_timeout_seconds + 30.0,
                       recover=None if self.snapshots is None else SessionRecovery(
                           self.snapshots, self.directory, self.sessions, self.gatekeeper.vouched,
                           profiles=config.profiles, runtimes=config.runtimes,
                           paused_lifetime_seconds=sessions.session_paused_lifetime_seconds))
        # the drain on SIGTERM (http.serving.DrainingServer)
        self.drain = Drain(self.lifecycle, self.admission, self.executor, self.sessions, self.leases)
        held, store = self.admission, self.sessions
        self.metrics.watch(
            queue_depth=lambda: held.waiting,
            running=lambda: held.running,
            waiting=lambda: held.parked,
            memory_mb=lambda: held.memory_mb,
            sessions=lambda: len(store),
            paused_sessions=lambda: store.paused_count,
        )

    @functools.cached_property
    def snapshot_secret(self) -> bytes:
        """What session snapshots are sealed under (``snapshot_secret``), read on first use."""
        return snapshot_secret(self.config)

    @staticmethod
    def snapshot_binding(tenant: Tenant) -> tuple[str, str]:
        """The owner and the user a downloaded snapshot (``GET /api/sessions/{id}/snapshot``,
        ``POST /api/sessions/resume``) is sealed for: the key's name and its id (a key deleted
        and made again under the same name is another key), and the user's ``user_key`` when a
        signed user token named the user (a plain user id is the key holder's word, and the
        holder may resume its own snapshots for any of its users). With auth off: the client's
        address, no user."""
        if tenant.key_id is None:
            return tenant.name, ""
        owner = f"{tenant.name}\x00key\x00{tenant.key_id}"
        return owner, (tenant.user or "") if tenant.user_token else ""

    # -- sandboxes -------------------------------------------------------------------------
    resident_mb = staticmethod(resident_mb)  # what a run or session holds of the memory budget

    def profile_runtimes(self) -> list[tuple[str, str | None]]:
        """The (runtime, image) the profiles of the config use, each once."""
        from ..sandbox.default import sandbox_key

        keys = [sandbox_key(p.runtime, p.image) for p in self.config.profiles.values()]
        return list(dict.fromkeys(keys))

    # -- who and what ----------------------------------------------------------------------
    async def caller(
        self,
        conn: HTTPConnection,
        *,
        allow_query_key: bool = False,
        key: str | None = None,
        user: str | None = None,
        user_token: str | None = None,
    ) -> Tenant:
        """Authenticate (``key`` when given, else the headers), find the user the request is for
        (``user`` / ``user_token`` when given, else the headers; ``users.py``) and count one
        request against the user's and the caller's rate limits (shared by every replica with
        ``redis_url``). A call another replica passed on (``internal.InternalGuard`` checked its
        signature) is the tenant that replica vouched for, its rate counted there."""
        call = internal_call(conn)
        if call is not None:  # the user too: its lease, host functions and audit line are here
            return self.gatekeeper.vouched(call.tenant, call.user, call.user_token)
        try:
            tenant = await self.gatekeeper.check(
                conn.headers,
                conn.query_params,
                client_address(conn),
                allow_query=allow_query_key,
                key=key,
                user=user,
                user_token=user_token,
            )
        except Refused as exc:
            self.metrics.rejections.labels(exc.code).inc()
            raise
        return tenant

    def host_functions(self, tenant: Tenant, profile: PolicyLike, names: list[str] | None,
                       request_id: str) -> HostFunctions | None:
        """The host functions a request named, bound to its caller; ``403 function_forbidden``
        when one is not declared or not for this key and profile. None when it named none."""
        if not names:
            return None
        refused = self.catalog.refused(names, tenant.name, profile.name)
        if refused:
            raise ApiError(
                403, "function_forbidden",
                f"this API key may not call {', '.join(sorted(set(refused)))} under profile {profile.name!r}"
                f" (it may call: {', '.join(f.name for f in self.catalog.allowed(tenant.name, profile.name)) or 'none'})",
            )  # fmt: skip
        return self.catalog.for_caller(sorted(set(names)), FunctionCaller(tenant.name, tenant.user_id, request_id))

    def policy(
        self,
        tenant: Tenant,
        profile_name: str | None,
        asked: LimitsRequest | None,
        runtime: str | None = None,
    ) -> tuple[Policy, Limits, str]:
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
        if len(files) > self.config.client_bounds.max_files_in:
            raise ApiError(
                422, "too_many_files", f"at most {self.config.client_bounds.max_files_in} files may be sent"
            )
        out: dict[str, bytes] = {}
        for f in files:
            content = f.content()
            if len(content) > self.config.client_bounds.max_file_in_bytes:
                raise ApiError(
                    422, "file_too_large",
                    f"file {f.name!r} is {len(content)} bytes; the limit is "
                    f"{self.config.client_bounds.max_file_in_bytes} bytes",
                )  # fmt: skip
            out[f.name] = content
        return out

    # -- running ---------------------------------------------------------------------------
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
        return await self.executor.run(
            job,
            on_output=on_output,
            input_source=input_source,
            cancel=cancel,
            on_admitted=on_admitted,
        )

    def start_pools(self) -> None:
        """Warm every profile's pool ahead of the first request (called at start-up)."""
        self.sandboxes.pools.start(self.config.profiles)

    def render(self, result: Result, files_as: str = "base64") -> dict[str, Any]:
        """The result object for the client; files as base64 or as short-lived download URLs."""
        body = result.to_dict()
        if files_as == "url":
            for entry, f in zip(body["files"], result.files, strict=True):
                name = Path(f.path).name or "file"
                token = self.downloads.put(name, f.content)
                if token is None:  # no room in this tenant's quota: the file stays inline
                    continue
                entry.pop("content_base64", None)
                entry["url"] = f"/api/files/{token}"
        return body

    async def shutdown(self) -> None:
        await self.sessions.close_all()  # drops their directory entries too
        if self.leases is not None:
            await self.leases.release_all()
        await self.hop.aclose()
        await self.directory.aclose()
        self.executor.shutdown()
        if self.snapshots is not None:
            self.snapshots.close()
        self.sandboxes.close_pools()
