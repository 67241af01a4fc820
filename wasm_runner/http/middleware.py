"""Response headers every answer carries: security headers, no caching of API answers, a request id.
``HostGuard`` serves only the configured host names; ``BodyGuard`` bounds request bodies in size
and time.

Pages get a Content-Security-Policy whose ``frame-ancestors`` allows the CORS allowlist (the sites
that embed the playground) unless the page set its own. Pure ASGI, so streaming is untouched.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import ApiError, error_response

__all__ = ["SecurityHeaders", "HostGuard", "BodyGuard", "CloseWhenBodyUnread", "host_allowed"]

log = logging.getLogger("wasm_runner.http")


class CloseWhenBodyUnread:
    """Says ``Connection: close`` on an answer given before the request's body was read (a 401,
    404, 413 or 429 answered from the headers alone). The server closes such a connection after
    the answer (nobody reads the rest of the body, serving.py); without the header a keep-alive
    client would send its next request on that socket and get a reset instead of an answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        has_body = b"transfer-encoding" in headers or headers.get(b"content-length", b"0").strip() not in (b"0", b"")
        read_all = not has_body

        async def tracked_receive() -> Message:
            nonlocal read_all
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                read_all = True
            return message

        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start" and not read_all:
                MutableHeaders(scope=message)["Connection"] = "close"
            await send(message)

        await self.app(scope, tracked_receive, send_closing)


class SecurityHeaders:
    """Adds security headers to HTTP responses (headers a route set itself are kept)."""

    def __init__(self, app: ASGIApp, embed_origins: tuple[str, ...] = ()) -> None:
        self.app = app
        ancestors = " ".join(["'self'", *embed_origins])
        self.page_csp = f"frame-ancestors {ancestors}; base-uri 'self'; object-src 'none'"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        is_api = path.startswith("/api/") or path in ("/healthz", "/readyz", "/metrics", "/mcp")
        request_id = secrets.token_hex(8)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "no-referrer")
                headers.setdefault("X-Request-Id", request_id)
                if is_api:
                    headers.setdefault("Cache-Control", "no-store")
                    headers.setdefault(
                        "Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'"
                    )
                else:
                    headers.setdefault("Content-Security-Policy", self.page_csp)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _host_of(value: str) -> str:
    """The host name of a ``Host`` header value (port and IPv6 brackets removed, lower case)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else ""
    if value.count(":") == 1:
        value = value.partition(":")[0]
    return value.rstrip(".")


def host_allowed(value: str | None, allowed: tuple[str, ...]) -> bool:
    """Whether a ``Host`` header names one of ``allowed`` (``*`` = any, ``*.example.org`` =
    subdomains of example.org). A missing or empty Host is refused."""
    if not value:
        return False
    host = _host_of(value)
    if not host:
        return False
    for pattern in allowed:
        pattern = pattern.strip().lower().strip("[]").rstrip(".")
        if pattern == "*" or host == pattern:
            return True
        if pattern.startswith("*.") and host.endswith(pattern[1:]):
            return True
    return False


PROBE_PATHS = ("/healthz", "/readyz")  # what load balancers and orchestrators probe by address


class HostGuard:
    """Serves only requests whose ``Host`` is one of ``allowed_hosts`` (DNS rebinding: a page on
    another site that resolves its own name to 127.0.0.1 still sends its own name as Host).
    ``/healthz`` and ``/readyz`` answer whatever the Host, so probes by address keep working."""

    def __init__(self, app: ASGIApp, allowed_hosts: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = tuple(allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in PROBE_PATHS:
            await self.app(scope, receive, send)
            return
        host = Headers(scope=scope).get("host")
        if host_allowed(host, self.allowed):
            await self.app(scope, receive, send)
            return
        error = ApiError(
            400, "host_not_allowed",
            "this server does not answer to that host name (see allowed_hosts)",
        )  # fmt: skip
        if scope["type"] == "websocket":
            if "websocket.http.response" in scope.get("extensions", {}):
                await error_response(error)(scope, receive, send)
            else:
                await send({"type": "websocket.close", "code": 1008})
            return
        await error_response(error)(scope, receive, send)


class BodyGuard:
    """Bounds every request body, under any ASGI server: ``413`` past ``max_bytes`` (at once when
    Content-Length says so, else as the bytes arrive), ``408`` when the whole body takes longer than
    ``total_seconds`` or pauses longer than ``idle_seconds``. A client that leaves mid-body is an
    ordinary event: no traceback, no 500 in the log. ``bounds`` gives a ``POST`` path its own
    bound instead (``/api/sessions/resume``: a snapshot, ``max_snapshot_bytes``)."""

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        total_seconds: float,
        idle_seconds: float,
        bounds: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.total_seconds = total_seconds
        self.idle_seconds = idle_seconds
        self.bounds = dict(bounds or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.max_bytes
        if scope.get("method") == "POST":
            max_bytes = self.bounds.get(scope.get("path", ""), max_bytes)
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > max_bytes:
            await error_response(_too_large(max_bytes))(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.total_seconds
        state = {"body_done": False, "size": 0, "started": False}

        async def guarded_receive() -> Message:
            if state["body_done"]:
                return await receive()
            wait = min(self.idle_seconds, deadline - loop.time())
            try:
                if wait <= 0:
                    raise TimeoutError
                message = await asyncio.wait_for(receive(), wait)
            except TimeoutError:
                raise ApiError(
                    408, "body_timeout",
                    "the request body arrived too slowly; send it within "
                    f"{self.total_seconds:g} s, without pauses over {self.idle_seconds:g} s",
                ) from None  # fmt: skip
            if message["type"] == "http.request":
                state["size"] += len(message.get("body", b""))
                if state["size"] > max_bytes:
                    raise _too_large(max_bytes)
                if not message.get("more_body", False):
                    state["body_done"] = True
            else:
                state["body_done"] = True
            return message

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, guarded_receive, tracked_send)
        except ApiError as exc:  # raised by guarded_receive outside a route's error handling
            if not state["started"]:
                await error_response(exc)(scope, receive, send)
        except ClientDisconnect:
            log.debug("client left during %s %s", scope.get("method"), scope.get("path"))


def _too_large(max_bytes: int) -> ApiError:
    return ApiError(413, "body_too_large", f"the body is over the limit of {max_bytes} bytes")
