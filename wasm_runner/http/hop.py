"""The internal hop: a session call or a download that reaches a replica which does not hold it is
passed to the replica that does, over HTTP, signed with the cluster secret.

Forwarding (``Hop``). A session call (describe, delete, run, the streaming run) or a download
arrives at replica B. B authenticates the caller and counts its rate as for any call, then asks
the directory (``directory.py``) who holds the id. If another replica A does and the tenant is
the caller's, B sends the request on to A's ``advertise_url`` with the client's body, content type
and Host, without the client's API key, and with these headers::

    X-Wasm-Runner-Internal-Tenant   the tenant B authenticated (percent-encoded)
    X-Wasm-Runner-Internal-Client   the client's address (for A's audit log)
    X-Wasm-Runner-Internal-Replica  the replica_id the directory names (A's process)
    X-Wasm-Runner-Internal-Time     Unix time of signing
    X-Wasm-Runner-Internal-Nonce    random, once
    X-Wasm-Runner-Internal-Mac      hex HMAC-SHA256(cluster_secret, method, path?query, tenant,
                                    client, replica, time, nonce, sha256(body))

A's answer (status, body, ``Content-Type``, ``Retry-After``, ``X-Request-Id`` ...) goes back as it
arrives: an SSE stream is relayed chunk by chunk, never buffered. A runs the call as if it were
local: admission, the tenant check (another key: ``404``), the audit log and the metrics are A's.
A connection A refuses or does not accept within ``CONNECT_TIMEOUT_SECONDS`` (1 s), or a replica
that now runs a different process than the directory names, means the session is lost: ``410
session_lost`` (a link: ``410 download_lost``) at once, and its directory entry becomes a
tombstone, so every later call for it gets the same ``410`` at once until it would have expired.

Receiving (``InternalGuard``, ASGI middleware). Any request carrying a header that starts with
``X-Wasm-Runner-Internal-`` must carry a valid signature made within ``WINDOW_SECONDS``, a nonce
not seen before, and be one of the forwardable calls; otherwise it is ``403 internal_forbidden``,
logged and written to the audit log. An API key alone cannot pass: the MAC needs the cluster
secret, which clients never hold; balancers in front strip these headers from client requests
(``docs/scale-out.md``). A valid hop's tenant and client are put in the ASGI scope, where
``caller_of`` / ``client_of`` find them; no rate is counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote, unquote

import httpx
from starlette.datastructures import Headers
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .audit import AuditLog
from .auth import Tenant, anonymous_tenant, current_tenant, key_tenant
from .config import ServerConfig
from .directory import Directory, Entry
from .errors import ApiError, error_response
from .guests import cancel_on_disconnect, until_disconnected
from .metrics import Metrics

if TYPE_CHECKING:
    from ..execution import SessionStore

__all__ = [
    "Hop", "InternalGuard", "InternalCall", "Authenticates", "Records", "audit_refusal", "caller_of",
    "client_of", "sign", "HEADER_PREFIX", "WINDOW_SECONDS", "CONNECT_TIMEOUT_SECONDS",
]  # fmt: skip

log = logging.getLogger("wasm_runner.http")

HEADER_PREFIX = "x-wasm-runner-internal-"
H_TENANT = HEADER_PREFIX + "tenant"
H_CLIENT = HEADER_PREFIX + "client"
H_REPLICA = HEADER_PREFIX + "replica"
H_TIME = HEADER_PREFIX + "time"
H_NONCE = HEADER_PREFIX + "nonce"
H_MAC = HEADER_PREFIX + "mac"
SCOPE_KEY = "wasm_runner.internal"

WINDOW_SECONDS = 5.0  # a signature older (or newer: clock skew) than this is refused
CONNECT_TIMEOUT_SECONDS = 1.0  # an owner that does not accept within this is gone
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what session ids and link tokens look like
MAX_NONCES = 100_000  # nonces remembered for the window (replays refused); bounded

# the calls a hop may carry, and what a lost owner means for each
_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("GET", re.compile(r"/api/sessions/[^/]+"), "session"),
    ("DELETE", re.compile(r"/api/sessions/[^/]+"), "session"),
    ("POST", re.compile(r"/api/sessions/[^/]+/run"), "session"),
    ("POST", re.compile(r"/api/sessions/[^/]+/run/stream"), "session"),
    ("GET", re.compile(r"/api/files/[^/]+"), "download"),
)
_LOST = {
    "session": ApiError(
        410, "session_lost",
        "the replica that held this session is gone, and the session's variables and files with "
        "it; open a new session",
    ),
    "download": ApiError(
        410, "download_lost",
        "the replica that held this file is gone; run the code again for a new link",
    ),
}  # fmt: skip
_RELAYED_HEADERS = (
    "content-type", "retry-after", "content-disposition", "cache-control", "www-authenticate",
    "x-request-id", "x-accel-buffering",
)  # fmt: skip


def _kind_of(method: str, path: str) -> str | None:
    for m, pattern, kind in _ROUTES:
        if m == method and pattern.fullmatch(path):
            return kind
    return None


def sign(
    secret: str,
    *,
    method: str,
    target: str,
    tenant: str,
    client: str,
    replica: str,
    timestamp: str,
    nonce: str,
    body: bytes,
) -> str:
    """The hop's MAC: hex HMAC-SHA256 with the cluster secret over every field it vouches for
    (``target`` is the path with its query string; ``tenant`` as sent, percent-encoded)."""
    message = "\n".join(
        [method.upper(), target, tenant, client, replica, timestamp, nonce,
         hashlib.sha256(body).hexdigest()]
    )  # fmt: skip
    return hmac.new(secret.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


def _target(path: str, query: bytes | str) -> str:
    query = query.decode("latin-1") if isinstance(query, bytes) else query
    return f"{path}?{query}" if query else path


@dataclass(frozen=True)
class InternalCall:
    """A request another replica passed on, its signature checked: who the caller was."""

    tenant: str
    client: str


def internal_call(conn: HTTPConnection) -> InternalCall | None:
    """The verified hop this request came by, or None for a client's own request."""
    call = conn.scope.get(SCOPE_KEY)
    return call if isinstance(call, InternalCall) else None


class Authenticates(Protocol):
    """What ``caller_of`` needs of the service (``service.Service``): the tenants of its config
    and its own authentication of a request."""

    @property
    def config(self) -> ServerConfig: ...
    async def caller(self, conn: HTTPConnection) -> Tenant: ...


async def caller_of(service: Authenticates, conn: HTTPConnection) -> Tenant:
    """The caller of a session route: the tenant a replica vouched for (rate already counted
    there), or the API key of this request (authenticated and counted: ``service.caller``)."""
    call = internal_call(conn)
    if call is None:
        return await service.caller(conn)
    tenant = tenant_named(service.config, call.tenant)
    if tenant is None:  # a replica with another config: refuse rather than guess
        raise ApiError(403, "internal_forbidden", "the forwarding replica named an unknown tenant")
    current_tenant.set(tenant)
    return tenant


def client_of(conn: HTTPConnection) -> str:
    """The client's address, also when the request came by a hop."""
    call = internal_call(conn)
    if call is not None:
        return call.client
    return conn.client.host if conn.client else "unknown"


def tenant_named(config: ServerConfig, name: str) -> Tenant | None:
    """The tenant called ``name`` in this replica's config (replicas share one config)."""
    for key in config.api_keys:
        if key.name == name:
            return key_tenant(key)
    if not config.auth and name.startswith("anonymous:"):
        return anonymous_tenant(config, name.removeprefix("anonymous:"))
    return None


class Hop:
    """This replica's side of forwarding: finds the owner and relays the request to it.

    ``enabled`` only with a shared directory and a cluster secret; one ``httpx.AsyncClient`` per
    replica (connect bounded by ``CONNECT_TIMEOUT_SECONDS``; read by the longest run a profile
    allows plus the queue timeout)."""

    def __init__(
        self,
        config: ServerConfig,
        directory: Directory,
        sessions: SessionStore,
        secret: str | None,
    ) -> None:
        self.config = config
        self.directory = directory
        self.sessions = sessions
        self.secret = secret
        self.enabled = directory.shared and bool(secret)
        longest = max((p.limits.wall_seconds for p in config.profiles.values()), default=60.0)
        self.read_timeout = longest + config.queue_timeout_seconds + 30.0
        self._client: httpx.AsyncClient | None = None
        self._nonces: dict[str, float] = {}

    @property
    def replica_id(self) -> str:
        return self.directory.replica_id

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    connect=CONNECT_TIMEOUT_SECONDS, read=self.read_timeout, write=30.0, pool=5.0
                ),
                # idle connections close before the owner's keep-alive does (no stale sockets)
                limits=httpx.Limits(
                    max_connections=256, max_keepalive_connections=32, keepalive_expiry=2.0
                ),
                trust_env=False,  # never through a proxy named in the environment
                follow_redirects=False,
            )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    # -- forwarding ------------------------------------------------------------------------
    async def session_call(
        self, request: Request, session_id: str, tenant: Tenant
    ) -> Response | None:
        """The owner's answer to this session call, or None to answer here (the session is
        here, unknown, another tenant's, or the call already came by a hop)."""
        if not self.enabled or internal_call(request) is not None:
            return None
        if self.sessions.holds(session_id) or not _ID.fullmatch(session_id):
            return None
        entry = await self.directory.session(session_id)
        if entry is None or entry.tenant != tenant.name:
            return None  # unknown here and everywhere, or another key's: 404 as for a local id
        if entry.replica == self.replica_id:
            await self.directory.forget_session(session_id)  # stale: this process lost it
            return None
        return await self._owner_answer(request, entry, tenant.name, "session", session_id)

    async def download(self, request: Request, token: str) -> Response | None:
        """The owner's answer for the link ``token``, or None to answer here."""
        if not self.enabled or internal_call(request) is not None or not _ID.fullmatch(token):
            return None
        entry = await self.directory.download(token)
        if entry is None or entry.replica == self.replica_id:
            return None
        return await self._owner_answer(request, entry, entry.tenant, "download", token)

    async def _owner_answer(
        self, request: Request, entry: Entry, tenant: str, kind: str, key_id: str
    ) -> Response:
        """410 for a tombstone or an owner at this replica's own address (it restarted: this
        is the new process), else the owner's answer relayed."""

        async def mark() -> None:
            await self.directory.mark_lost(kind, key_id, entry)

        if entry.lost:
            return error_response(_LOST[kind])
        if entry.owner == getattr(self.directory, "owner", None):
            return await self._lost(kind, entry, mark)
        return await self._relay(request, entry, tenant, kind, mark)

    def signed_headers(
        self, request: HTTPConnection, entry: Entry, tenant: str, body: bytes, target: str
    ) -> dict[str, str]:
        assert self.secret is not None
        fields = {
            "tenant": quote(tenant, safe=""),
            "client": client_of(request),
            "replica": entry.replica,
            "timestamp": f"{time.time():.3f}",
            "nonce": secrets.token_urlsafe(18),
        }
        mac = sign(self.secret, method=request.scope.get("method", "GET"), target=target,
                   body=body, **fields)  # fmt: skip
        return {
            H_TENANT: fields["tenant"],
            H_CLIENT: fields["client"],
            H_REPLICA: fields["replica"],
            H_TIME: fields["timestamp"],
            H_NONCE: fields["nonce"],
            H_MAC: mac,
        }

    async def _relay(
        self,
        request: Request,
        entry: Entry,
        tenant: str,
        kind: str,
        forget: Callable[[], Awaitable[None]],
    ) -> Response:
        body = await request.body()
        target = _target(request.url.path, request.scope.get("query_string", b""))
        headers = {
            "accept-encoding": "identity",
            **self.signed_headers(request, entry, tenant, body, target),
        }
        for name in ("host", "content-type", "accept"):
            if name in request.headers:
                headers[name] = request.headers[name]
        client = self.client()
        upstream_request = client.build_request(
            request.method, entry.owner + target, headers=headers, content=body
        )
        sending = asyncio.ensure_future(client.send(upstream_request, stream=True))
        try:
            upstream = await cancel_on_disconnect(request.receive, sending)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            return await self._lost(kind, entry, forget)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            # the owner dropped the connection mid-call: lost, unless it still answers
            if not await self._answers(entry):
                return await self._lost(kind, entry, forget)
            raise ApiError(
                503, "hop_interrupted",
                "the replica holding this session dropped the call; retry",
                headers={"Retry-After": "1"},
            ) from None  # fmt: skip
        except httpx.PoolTimeout:
            raise ApiError(
                503, "hop_busy", "too many calls to other replicas right now; retry",
                headers={"Retry-After": "1"},
            ) from None  # fmt: skip
        except httpx.TimeoutException:
            raise ApiError(
                504, "hop_timeout", "the replica holding this session did not answer in time"
            ) from None
        if upstream.status_code == 410:  # the owner's address runs another process now
            with contextlib.suppress(ApiError):
                await forget()
        relayed = {k: v for k, v in upstream.headers.items() if k.lower() in _RELAYED_HEADERS}
        return Relay(upstream, relayed, kind)

    async def _answers(self, entry: Entry) -> bool:
        """Whether the owner accepts a fresh connection and answers ``/healthz``."""
        try:
            response = await self.client().get(
                entry.owner + "/healthz", timeout=CONNECT_TIMEOUT_SECONDS * 2
            )
        except httpx.HTTPError:
            return False
        return response.status_code < 500

    async def _lost(
        self, kind: str, entry: Entry, forget: Callable[[], Awaitable[None]]
    ) -> Response:
        log.info("internal hop: the %s owner at %s is gone", kind, entry.owner)
        with contextlib.suppress(ApiError):  # Redis down too: the entry expires on its own
            await forget()
        return error_response(_LOST[kind])

    # -- receiving -------------------------------------------------------------------------
    def verify(self, scope: Scope, body: bytes) -> InternalCall | str:
        """The hop this request is, or why it is refused (a short reason for the log)."""
        headers = Headers(scope=scope)
        method = scope.get("method", "")
        if _kind_of(method, scope.get("path", "")) is None:
            return "not a forwardable call"
        if not self.secret:
            return "this replica has no cluster secret"
        values = {name: headers.get(name) for name in (H_TENANT, H_CLIENT, H_REPLICA, H_TIME,
                                                       H_NONCE, H_MAC)}  # fmt: skip
        if any(v is None for v in values.values()):
            return "internal headers incomplete"
        try:
            signed_at = float(values[H_TIME] or "")
        except ValueError:
            return "bad timestamp"
        if not abs(time.time() - signed_at) <= WINDOW_SECONDS:
            return "signature outside the time window"
        expected = sign(
            self.secret, method=method, target=_target(scope.get("path", ""),
            scope.get("query_string", b"")), tenant=values[H_TENANT] or "",
            client=values[H_CLIENT] or "", replica=values[H_REPLICA] or "",
            timestamp=values[H_TIME] or "", nonce=values[H_NONCE] or "", body=body,
        )  # fmt: skip
        if not hmac.compare_digest(expected.encode(), (values[H_MAC] or "").encode("latin-1")):
            return "bad signature"
        if not self._first_use(values[H_NONCE] or "", signed_at):
            return "replayed nonce"
        return InternalCall(tenant=unquote(values[H_TENANT] or ""), client=values[H_CLIENT] or "")

    def _first_use(self, nonce: str, signed_at: float) -> bool:
        now = time.time()
        if len(self._nonces) >= MAX_NONCES:
            self._nonces = {n: t for n, t in self._nonces.items() if t > now}
            if len(self._nonces) >= MAX_NONCES:
                return False
        if nonce in self._nonces:
            return False
        self._nonces[nonce] = signed_at + 2 * WINDOW_SECONDS
        return True

    def lost_answer(self, scope: Scope) -> ApiError | None:
        """``410`` when a signed hop names another process than this one (the owner the
        directory knew restarted at this address: its sessions and links are gone)."""
        replica = Headers(scope=scope).get(H_REPLICA)
        if replica == self.replica_id:
            return None
        return _LOST[_kind_of(scope.get("method", ""), scope.get("path", "")) or "session"]


class Relay(Response):
    """The owner's answer, relayed as it arrives (SSE included); the upstream response is closed
    when the body ends or the client leaves."""

    def __init__(self, upstream: httpx.Response, headers: dict[str, str], kind: str) -> None:
        self.upstream = upstream
        self.status_code = upstream.status_code
        self.relayed = headers
        self.kind = kind
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1"))
                        for k, v in self.relayed.items()],
        }  # fmt: skip
        pump = asyncio.ensure_future(self._pump(send, start))
        gone = asyncio.ensure_future(until_disconnected(receive))
        try:
            await asyncio.wait({pump, gone}, return_when=asyncio.FIRST_COMPLETED)
            if pump.done() and not pump.cancelled() and pump.exception() is not None:
                # the answer has started: nothing can be said to the client any more
                log.info("internal hop: relaying stopped: %s", type(pump.exception()).__name__)
        finally:
            pump.cancel()
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump
            await self.upstream.aclose()  # the owner sees the client leave and cancels the run

    async def _pump(self, send: Send, start: Message) -> None:
        await send(start)
        try:
            async for chunk in self.upstream.aiter_raw():
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.HTTPError:
            log.info("internal hop: the owner went away while its answer was relayed")
            if self.relayed.get("content-type", "").startswith("text/event-stream"):
                err = json.dumps(_LOST[self.kind].body())
                tail = f"event: error\ndata: {err}\n\n".encode()
                await send({"type": "http.response.body", "body": tail, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class InternalGuard:
    """ASGI middleware: requests with ``X-Wasm-Runner-Internal-*`` headers are checked (see the
    module docstring); the rest pass untouched. ``on_refused(reason, scope)`` logs and audits."""

    def __init__(
        self, app: ASGIApp, hop: Hop, on_refused: Callable[[str, Scope], None] | None = None
    ) -> None:
        self.app = app
        self.hop = hop
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not any(
            name.lower().startswith(HEADER_PREFIX.encode()) for name, _ in scope.get("headers", ())
        ):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # no session call is carried over a WebSocket hop
            self._refused("internal headers on a WebSocket", scope)
            if "websocket.http.response" in scope.get("extensions", {}):
                await error_response(_forbidden())(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        body, more = await _read_body(receive)
        verdict = self.hop.verify(scope, body)
        if isinstance(verdict, str):
            self._refused(verdict, scope)
            await error_response(_forbidden())(scope, receive, send)
            return
        lost = self.hop.lost_answer(scope)
        if lost is not None:
            await error_response(lost)(scope, receive, send)
            return
        scope[SCOPE_KEY] = verdict
        await self.app(scope, _replay(body, more, receive), send)

    def _refused(self, reason: str, scope: Scope) -> None:
        client = scope.get("client") or ("unknown", 0)
        log.warning(
            "internal hop refused (%s): %s %s from %s",
            reason, scope.get("method", "WS"), scope.get("path", ""), client[0],
        )  # fmt: skip
        if self.on_refused is not None:
            try:
                self.on_refused(reason, scope)
            except Exception:
                log.exception("recording a refused internal hop failed")


def _forbidden() -> ApiError:
    return ApiError(
        403, "internal_forbidden",
        "internal headers (X-Wasm-Runner-Internal-*) are only accepted from another replica, "
        "signed with the cluster secret",
    )  # fmt: skip


async def _read_body(receive: Receive) -> tuple[bytes, list[Message]]:
    """The whole request body (bounded by ``BodyGuard`` outside) and any message after it."""
    parts: list[bytes] = []
    extra: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            extra.append(message)
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts), extra


def _replay(body: bytes, extra: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that gives the app the body read already, then the real messages."""
    queue: list[Message] = [{"type": "http.request", "body": body, "more_body": False}, *extra]

    async def replayed() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return replayed


class Records(Protocol):
    """What ``audit_refusal`` needs of the service: its metrics and its audit log."""

    @property
    def metrics(self) -> Metrics: ...
    @property
    def audit(self) -> AuditLog: ...


def audit_refusal(service: Records) -> Callable[[str, Scope], None]:
    """``InternalGuard.on_refused`` for ``service``: a metric and an audit-log line."""

    def record(reason: str, scope: Scope) -> None:
        service.metrics.rejections.labels("internal_forbidden").inc()
        client = scope.get("client") or ("unknown", 0)
        service.audit.event(
            "internal_forbidden",
            client=str(client[0]),
            method=str(scope.get("method", "WS")),
            path=str(scope.get("path", "")),
            reason=reason,
        )

    return record

