"""The MCP tools over streamable HTTP, behind the HTTP app's API keys.

``McpHttp`` holds an MCP server, its streamable-HTTP session manager and a key check. The HTTP
app mounts ``routes()`` (``/mcp`` by default) and enters ``lifespan()`` in its own lifespan::

    mcp_http = McpHttp(authenticate=lambda conn: service.caller(conn).name)
    app = Starlette(routes=[*api_routes, *mcp_http.routes()], lifespan=...)
    # in the app's lifespan:  async with mcp_http.lifespan(): yield

``authenticate(conn)`` gets the request's ``HTTPConnection`` and returns the caller's name, or a
``Response`` to send instead (401, 429, ...). Sessions the tools open are private to the caller
that opened them, and all are closed (their folders deleted) when the lifespan ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from .server import CALLER_HEADER, ToolConfig, build_server
from .sessions import SandboxLike

__all__ = ["McpHttp", "Authenticate"]

Authenticate = Callable[[HTTPConnection], "str | Response"]


class McpHttp:
    """The MCP tools as an ASGI endpoint, with an API-key check in front."""

    def __init__(
        self,
        authenticate: Authenticate | None,
        config: ToolConfig | None = None,
        *,
        sandbox: Callable[[], SandboxLike] | None = None,
        path: str = "/mcp",
        json_response: bool = False,
        transport_security: TransportSecuritySettings | None = None,
    ) -> None:
        """``authenticate=None`` means no key check (local use only, like ``serve --no-auth``).

        DNS-rebinding protection is off by default because every request needs an API key that a
        browser page cannot attach on its own; pass ``transport_security`` to turn it on.
        """
        self.server, self.registry = build_server(config, sandbox=sandbox)
        self.path = path
        self._authenticate = authenticate
        self.session_manager = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server,  # the SDK's documented way to mount elsewhere
            json_response=json_response,
            security_settings=transport_security
            or TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        # A caller never names itself: drop any such header, then set it from the key check.
        raw = [(k, v) for k, v in scope.get("headers", []) if k.lower() != CALLER_HEADER.encode()]
        caller = "anonymous"
        if self._authenticate is not None:
            try:
                verdict = self._authenticate(HTTPConnection(scope))
            except Exception:
                verdict = _unauthorized()
            if isinstance(verdict, Response):
                await verdict(scope, receive, send)
                return
            caller = verdict
        raw.append((CALLER_HEADER.encode(), caller.encode("utf-8", "replace")))
        await self.session_manager.handle_request(dict(scope, headers=raw), receive, send)

    @classmethod
    def for_service(cls, service: Any, profile: str | None = None, *, path: str = "/mcp") -> McpHttp:
        """The MCP endpoint of the HTTP app's ``wasm_runner.http.service.Service``.

        Callers authenticate (and are rate-limited) like every API call; the tools run under the
        limits and runtime of ``profile`` (default: the server's default profile) and share the
        service's process-wide sandbox.
        """
        from ..http.errors import ApiError

        config = service.config
        chosen = config.profile(profile)

        def authenticate(conn: HTTPConnection) -> str | Response:
            try:
                tenant = service.caller(conn)
            except ApiError as exc:
                return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
            if not tenant.may_use(chosen.name):
                return JSONResponse(
                    {"error": {"code": "forbidden", "message": f"this API key may not use profile {chosen.name!r}"}},
                    status_code=403,
                )
            return tenant.name

        tools = ToolConfig(
            limits=chosen.limits,
            runtime=chosen.runtime,
            max_sessions=config.max_sessions,
            idle_seconds=config.session_idle_seconds,
            max_upload_bytes=config.max_file_in_bytes,
        )
        return cls(
            authenticate if config.auth else None,
            tools,
            sandbox=lambda: service.sandbox(chosen.runtime),
            path=path,
        )

    def routes(self) -> list[BaseRoute]:
        """The route to add to the HTTP app (``/mcp`` unless ``path`` says otherwise)."""
        return [Route(self.path, endpoint=self, methods=["GET", "POST", "DELETE"])]

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the MCP session manager; on exit close every tool session and delete its files."""
        try:
            async with self.session_manager.run():
                yield
        finally:
            self.registry.close_all()


def _unauthorized() -> Response:
    return JSONResponse(
        {
            "error": "unauthorized",
            "message": "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
        },
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="wasm-runner"'},
    )
