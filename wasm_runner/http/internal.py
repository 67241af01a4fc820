"""Requests another replica passed on: the guard that checks them, and who their caller was.

``InternalGuard`` (ASGI middleware). Any request carrying a header that starts with
``X-Wasm-Runner-Internal-`` must be a forwardable call with a valid signature made within the
window and a nonce not seen before (``scaleout.forwarding.Forwarding.check``); otherwise it is
``403 internal_forbidden``, logged and written to the audit log (``audit_refusal``). Each refusal
counts as a failed attempt of the client's address (``auth.Gatekeeper.failed_attempt``, the
``failed_auth_rate`` window wrong keys count in): an address over it gets ``429
too_many_failed_attempts`` and is neither logged nor audited again until its window frees, so
nobody can write audit lines without bound. Balancers in front strip these headers from client
requests (``docs/scale-out.md``). A valid hop's tenant, user and client are put in the ASGI scope,
where ``internal_call`` / ``client_of`` find them (the service's ``caller`` takes the tenant and
the user the other replica vouched for; no rate is counted twice).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..execution import Refused
from ..scaleout.forwarding import Forwarding
from ..scaleout.signing import HEADER_PREFIX, InternalCall, target_of
from ..observability import AuditLog, Metrics
from .auth import Gatekeeper
from .errors import ApiError, error_response

__all__ = ["InternalGuard", "audit_refusal", "client_of", "internal_call", "limit_refusals"]

log = logging.getLogger("wasm_runner.http")

SCOPE_KEY = "wasm_runner.internal"


def internal_call(conn: HTTPConnection) -> InternalCall | None:
    """The verified hop this request came by, or None for a client's own request."""
    call = conn.scope.get(SCOPE_KEY)
    return call if isinstance(call, InternalCall) else None


def client_of(conn: HTTPConnection) -> str:
    """The client's address, also when the request came by a hop."""
    call = internal_call(conn)
    if call is not None:
        return call.client
    return conn.client.host if conn.client else "unknown"


class InternalGuard:
    """ASGI middleware: requests with ``X-Wasm-Runner-Internal-*`` headers are checked (see the
    module docstring); the rest pass untouched. ``on_refused(reason, scope)`` logs and audits;
    ``count_refusal(client)`` (awaited first) counts the refusal against the client's address and
    gives the ``429`` to answer instead when the address is over its window (then nothing is
    logged or audited)."""

    def __init__(
        self,
        app: ASGIApp,
        forwarding: Forwarding,
        on_refused: Callable[[str, Scope], None] | None = None,
        count_refusal: Callable[[str], Awaitable[Refused | None]] | None = None,
    ) -> None:
        self.app = app
        self.forwarding = forwarding
        self.on_refused = on_refused
        self.count_refusal = count_refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or not any(
            name.lower().startswith(HEADER_PREFIX.encode()) for name, _ in scope.get("headers", ())
        ):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":  # no session call is carried over a WebSocket hop
            refusal = await self._refusal("internal headers on a WebSocket", scope)
            if "websocket.http.response" in scope.get("extensions", {}):
                await error_response(refusal)(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        body, more = await _read_body(receive)
        method, path = scope.get("method", ""), scope.get("path", "")
        headers = Headers(scope=scope)
        target = target_of(path, scope.get("query_string", b""))
        verdict = self.forwarding.check(method, path, target, headers, body)
        if isinstance(verdict, str):
            await error_response(await self._refusal(verdict, scope))(scope, receive, send)
            return
        lost = self.forwarding.lost_here(method, path, headers)
        if lost is not None:
            await error_response(lost)(scope, receive, send)
            return
        scope[SCOPE_KEY] = verdict
        await self.app(scope, _replay(body, more, receive), send)

    async def _refusal(self, reason: str, scope: Scope) -> Refused:
        """The answer to a refused hop: ``403 internal_forbidden``, logged and audited; or,
        when its address is over its window of failed attempts, that ``429`` alone."""
        if self.count_refusal is not None:
            client = scope.get("client") or ("unknown", 0)
            try:
                over = await self.count_refusal(str(client[0]))
            except Refused as exc:  # Redis does not answer: fail closed, nothing written
                return exc
            if over is not None:
                return over
        self._refused(reason, scope)
        return _forbidden()

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


def limit_refusals(gatekeeper: Gatekeeper, metrics: Metrics) -> Callable[[str], Awaitable[Refused | None]]:
    """``InternalGuard.count_refusal``: a refused hop is a failed attempt of its address
    (``Gatekeeper.failed_attempt``); the ``429`` for an address over its window is counted as a
    rejection (a metric, no log or audit line)."""

    async def count(client: str) -> Refused | None:
        over = await gatekeeper.failed_attempt(client)
        if over is not None:
            metrics.rejections.labels(over.code).inc()
        return over

    return count


def audit_refusal(metrics: Metrics, audit: AuditLog) -> Callable[[str, Scope], None]:
    """``InternalGuard.on_refused``: a metric and an audit-log line for each refused hop."""

    def record(reason: str, scope: Scope) -> None:
        metrics.rejections.labels("internal_forbidden").inc()
        client = scope.get("client") or ("unknown", 0)
        audit.event(
            "internal_forbidden",
            client=str(client[0]),
            method=str(scope.get("method", "WS")),
            path=str(scope.get("path", "")),
            reason=reason,
        )

    return record
