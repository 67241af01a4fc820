"""The service the routes (and the MCP tools at ``/mcp``) receive: the parts a face reaches, typed,
built by ``wasm_runner.assembly`` (never here: no part is built by, or calls back into, this object),
and the HTTP face's request helpers.

Each route module sees it through its own small Protocol (``http/faces.py``: ``RunFace``,
``SessionFace``, ...), and reads the one setting or section it needs (``client_bounds``,
``session_settings``, ...) rather than the whole ``config``. Routes call ``caller`` (who is this,
within their rate?), ``policy`` (which profile and limits?), ``run_job`` (admit and run one guest:
the ``executor``) and ``render`` (the result as JSON for the client). The MCP tools at ``/mcp`` run through the same ``executor`` (``wasm_runner.mcp.http``), so
admission, the audit log and the metrics see every guest whichever face started it.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import HTTPConnection

from ..admission import Admission
from ..execution import Executor, Job, Policy, PolicyLike, Refused
from ..host_functions import HostFunctions
from ..host_functions.declared import Caller as FunctionCaller
from ..host_functions.declared import Catalog
from ..network import BrowserRuns, NetworkRule, describe_off, rules_for
from ..limits import InvalidLimits, Limits
from ..explanations import rendered_result
from ..lti.registration import LtiSettings
from ..lti.tool import LtiTool
from ..result import Result
from ..sandbox.provider import ServerSandboxes
from ..scaleout.directory import Directory
from ..scaleout.drain import Drain, Lifecycle
from ..scaleout.forwarding import Forwarding
from ..scaleout.leases import RedisLeases
from ..scaleout.state import SharedState
from ..sessions import PausedStore, SessionStore
from ..settings import ClientBounds, ServerConfig, SessionSettings, ToolSettings
from ..wasi.guestio import InputSource
from ..observability import AuditLog, Metrics
from .auth import Gatekeeper, Tenant, current_tenant
from ..downloads import DownloadStore
from .errors import ApiError
from ..exercises.catalog import ExerciseCatalog
from .internal import internal_call
from .relay import Hop
from ..exercises.hint_counts import HintCounts
from .results import ResultSigner
from ..webhooks import Webhooks
from .schemas import FileIn, LimitsRequest

log = logging.getLogger("wasm_runner.http")

__all__ = ["Service", "Job"]


def client_address(conn: HTTPConnection) -> str:
    return conn.client.host if conn.client else "unknown"


@dataclass(kw_only=True, eq=False)
class Service:
    """Everything the HTTP routes (and the MCP tools at ``/mcp``) share, as ``assembly.assemble``
    built it."""

    config: ServerConfig
    shared: SharedState | None  # the state shared with other replicas (Redis), or None: one host
    gatekeeper: Gatekeeper  # API keys, rate limits, users
    admission: Admission  # this replica's running cap, queue and memory budget
    metrics: Metrics
    audit: AuditLog
    lifecycle: Lifecycle  # warming / ready / draining (/readyz, SIGTERM)
    leases: RedisLeases | None  # per-key runs and sessions across replicas, or None (local)
    catalog: Catalog  # the host functions the config declares
    exercises: ExerciseCatalog  # /api/exercises
    directory: Directory  # where sessions and download links live, for every replica
    downloads: DownloadStore
    sandboxes: ServerSandboxes  # the executor's provider: sandboxes, warm pools, warm-up
    snapshots: PausedStore | None  # idle sessions paused to disk, or None: never
    executor: Executor  # the one way to guests: admission, the record, the session store
    forwarding: Forwarding  # who holds a session or link (the internal hop's signing)
    hop: Hop  # a call relayed to the replica holding its session, or a lost one's taken over
    drain: Drain  # the drain on SIGTERM (http.serving.DrainingServer)
    secret: Callable[[], bytes]  # what session snapshots are sealed under (read on first use)
    results: ResultSigner  # signs check results; the JWKS (http/results.py)
    hints: HintCounts = field(default_factory=HintCounts)  # hints used, per user and exercise
    webhooks: Webhooks | None = None  # check results sent to the keys' webhook_url (wasm_runner/webhooks)
    lti: LtiTool | None = None  # the LTI 1.3 tool (wasm_runner.lti), when platforms are registered
    # the network grants of browser-tier runs (POST /api/network/runs; network/browser_runs.py)
    browser_networks: BrowserRuns = field(default_factory=BrowserRuns)

    @property
    def sessions(self) -> SessionStore:
        """The executor's session store: HTTP and MCP sessions alike."""
        return self.executor.sessions

    # -- the settings a route reads (its face names the one it needs: http/faces.py) --------------
    @property
    def client_bounds(self) -> ClientBounds:
        """``[client_bounds]``: what a client may send."""
        return self.config.client_bounds

    @property
    def session_settings(self) -> SessionSettings:
        """``[sessions]``: snapshot sizes and expiry, among the rest."""
        return self.config.sessions

    @property
    def network_rules(self) -> Mapping[str, NetworkRule]:
        """The ``[network.*]`` rules the operator opened."""
        return self.config.network

    @property
    def lti_settings(self) -> LtiSettings:
        """``[lti]``: the registered platforms."""
        return self.config.lti

    @property
    def auth_required(self) -> bool:
        """Whether requests need an API key (``auth``; off: ``serve --no-auth``)."""
        return self.config.auth

    @property
    def advertise_url(self) -> str | None:
        """This replica's advertised base URL (``[scale_out] advertise_url``), if set."""
        return self.config.scale_out.advertise_url

    @property
    def profiles(self) -> Mapping[str, Policy]:
        """The profiles the config declares."""
        return self.config.profiles

    @property
    def default_profile(self) -> str:
        return self.config.default_profile

    def profile_named(self, name: str | None) -> Policy:
        """The profile ``name`` (None: the default profile); KeyError when the config has none."""
        return self.config.profile(name)

    def tool_settings(self, profile: str | None = None) -> ToolSettings:
        """The MCP tools' settings under ``profile`` (``ServerConfig.tools``)."""
        return self.config.tools(profile)

    @property
    def cors_origins(self) -> tuple[str, ...]:
        """The browser origins allowed to call (and to open ``/api/run/ws``)."""
        return self.config.cors_origins

    @functools.cached_property
    def snapshot_secret(self) -> bytes:
        """What session snapshots are sealed under (``assembly.snapshot_secret``), read on first use."""
        return self.secret()

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

    def network_for(self, job: Job) -> None:
        """Give ``job`` the network rules of its key and profile (none: the sentence saying so)."""
        key, profile = job.tenant.name, job.profile.name
        job.network_rules = rules_for(tuple(self.config.network.values()), key, profile)
        job.network_off = describe_off(key, profile)

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
        input_source: InputSource | None = None,
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

    def render(self, result: Result, files_as: str = "base64", lang: str | None = None) -> dict[str, Any]:
        """The result object for the client; files as base64 or as short-lived download URLs;
        the explanation in ``lang`` (docs/explanations.md)."""
        body = rendered_result(result.to_dict(), lang)
        if files_as == "url":
            caller = current_tenant.get()
            tenant_name = caller.name if caller is not None else ""
            for entry, f in zip(body["files"], result.files, strict=True):
                name = Path(f.path).name or "file"
                token = self.downloads.put(name, f.content, tenant_name)
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
