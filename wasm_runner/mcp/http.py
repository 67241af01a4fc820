"""The MCP tools over streamable HTTP, behind the HTTP app's API keys.

``McpHttp.for_service(service)`` holds an MCP server whose tools run through the service's
``Executor`` (the same admission, audit log, metrics and session store as ``/api/run`` and
``/api/sessions``), its streamable-HTTP session manager and the service's key check. The HTTP app
mounts ``routes()`` (``/mcp`` by default) and enters ``lifespan()`` in its own lifespan::

    mcp_http = McpHttp.for_service(service)
    app = Starlette(routes=[*api_routes, *mcp_http.routes()], lifespan=...)
    # in the app's lifespan:  async with mcp_http.lifespan(): yield

Every request is authenticated (and rate-limited) like an API call. The caller is handed to the
SDK as the request's authenticated user, so an MCP transport session (``mcp-session-id``) is
bound to the key that opened it: another key gets 404 for it, cannot list tools on it and cannot
end it. Tool sessions are private to their key and count against its ``max_concurrent`` and the
memory budget together with its HTTP sessions; with several replicas, one whose replica was lost
is resumed from its last snapshot on the replica the key's next call reaches.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Protocol

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ..execution import Caller, CallerLike, Executor, PolicyLike, Refused
from ..host_functions.declared import Catalog
from ..network import NetworkRule
from ..settings import ClientBounds, ToolSettings
from .server import build_server, headers_of
from .sessions import Locate

__all__ = ["McpHttp", "Authenticate", "CALLER_HEADER", "CLIENT_HEADER"]

Authenticate = Callable[[HTTPConnection], Awaitable["CallerLike | Response"]]


class Tenant(CallerLike, Protocol):
    """A caller the HTTP app authenticated (``http.auth.Tenant``): may it use a profile?"""

    def may_use(self, profile: str) -> bool: ...


class TakesOver(Protocol):
    """The HTTP app's hop (``http.relay.Hop``): a tool session of a lost replica taken over."""

    async def take_over(self, session_id: str, tenant: str) -> str: ...


class Served(Protocol):
    """What the MCP endpoint uses of the HTTP app's service (``http.service.Service``)."""

    def profile_named(self, name: str | None) -> PolicyLike: ...

    def tool_settings(self, profile: str | None = None) -> ToolSettings: ...

    @property
    def network_rules(self) -> Mapping[str, NetworkRule]: ...

    @property
    def client_bounds(self) -> ClientBounds: ...

    @property
    def executor(self) -> Executor: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def hop(self) -> TakesOver: ...

    async def caller(self, conn: HTTPConnection) -> Tenant: ...
CALLER_HEADER = "x-wasm-runner-caller"  # set by McpHttp after its key check, never by a client
CLIENT_HEADER = "x-wasm-runner-client"
_INTERNAL = (CALLER_HEADER.encode(), CLIENT_HEADER.encode())


class McpHttp:
    """The MCP tools as an ASGI endpoint, with an API-key check in front."""

    def __init__(
        self,
        executor: Executor,
        *,
        authenticate: Authenticate | None = None,
        config: ToolSettings | None = None,
        policy: PolicyLike | None = None,
        path: str = "/mcp",
        json_response: bool = False,
        transport_security: TransportSecuritySettings | None = None,
        catalog: Catalog | None = None,
        locate: Locate | None = None,
        max_body_bytes: int | None = None,
        network: Sequence[NetworkRule] = (),
    ) -> None:
        """``authenticate=None`` means no key check (local use only, like ``serve --no-auth``):
        every request is the one caller ``anonymous``.

        DNS-rebinding protection is off by default because every request needs an API key that a
        browser page cannot attach on its own; pass ``transport_security`` to turn it on.
        ``max_body_bytes``: the largest request body (the server's ``max_body_bytes``, which its
        own guard enforces first; default: the SDK's 4 MiB, below a base64 upload of 4 MiB).
        """
        self.config = config or ToolSettings()
        self._callers: dict[str, CallerLike] = {}
        self.server, self.executor = build_server(
            self.config, executor=executor, policy=policy, resolve=self._resolve, catalog=catalog,
            locate=locate, network=network,
        )
        self.path = path
        self._authenticate = authenticate
        self._anonymous = Caller("anonymous", max_concurrent=self.config.max_sessions_per_owner)
        self.session_manager = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server,  # the SDK's documented way to mount elsewhere
            json_response=json_response,
            max_request_body_size=max_body_bytes or DEFAULT_MAX_REQUEST_BODY_SIZE,
            security_settings=transport_security
            or TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    def _resolve(self, ctx: Context | None) -> tuple[CallerLike, str]:
        """The caller ``__call__`` authenticated for this tool call, and its address."""
        headers = headers_of(ctx) or {}
        name = headers.get(CALLER_HEADER)
        caller = self._callers.get(name) if name else None
        if caller is None:  # unreachable through __call__; never fall back to a shared identity
            raise PermissionError("the MCP request carries no authenticated caller")
        return caller, headers.get(CLIENT_HEADER, "unknown")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        caller: CallerLike = self._anonymous
        if self._authenticate is not None:
            try:
                verdict = await self._authenticate(HTTPConnection(scope))
            except Exception:
                verdict = _unauthorized()
            if isinstance(verdict, Response):
                await verdict(scope, receive, send)
                return
            caller = verdict
        self._callers[caller.name] = caller  # the latest caps of this key
        client = scope.get("client")
        address = client[0] if client else "unknown"
        # A caller never names itself: drop any such header, then set it from the key check.
        raw = [(k, v) for k, v in scope.get("headers", []) if k.lower() not in _INTERNAL]
        raw.append((CALLER_HEADER.encode(), caller.name.encode("utf-8", "replace")))
        raw.append((CLIENT_HEADER.encode(), address.encode("utf-8", "replace")))
        # The SDK binds a transport session to the user that opened it and answers 404 to others.
        token = AccessToken(token="", client_id=f"wasm-runner:{caller.name}", scopes=[])
        await self.session_manager.handle_request(
            dict(scope, headers=raw, user=AuthenticatedUser(token)), receive, send
        )

    @classmethod
    def for_service(cls, service: Served, profile: str | None = None, *, path: str = "/mcp") -> McpHttp:
        """The MCP endpoint of the HTTP app's ``wasm_runner.http.service.Service``.

        Callers authenticate (and are rate-limited) like every API call; the tools run under the
        limits and runtime of ``profile`` (default: the server's default profile) through the
        service's executor; a tool session whose replica was lost is resumed on the replica its
        next call reaches (``service.hop.take_over``), as an HTTP session is.
        """
        chosen = service.profile_named(profile)

        async def authenticate(conn: HTTPConnection) -> CallerLike | Response:
            try:
                tenant = await service.caller(conn)
            except Refused as exc:  # ApiError, or the shared state's 503
                return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)
            if not tenant.may_use(chosen.name):
                return JSONResponse(
                    {"error": {"code": "forbidden", "message": f"this API key may not use profile {chosen.name!r}"}},
                    status_code=403,
                )
            return tenant

        return cls(service.executor, authenticate=authenticate, config=service.tool_settings(profile), policy=chosen, path=path,
                   catalog=service.catalog, locate=service.hop.take_over, network=tuple(service.network_rules.values()),
                   max_body_bytes=service.client_bounds.max_body_bytes)

    def routes(self) -> list[BaseRoute]:
        """The route to add to the HTTP app (``/mcp`` unless ``path`` says otherwise)."""
        return [Route(self.path, endpoint=self, methods=["GET", "POST", "DELETE"])]

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """Run the MCP session manager; on exit close every session and delete its files."""
        try:
            async with self.session_manager.run():
                yield
        finally:
            await self.executor.sessions.close_all()


def _unauthorized() -> Response:
    return JSONResponse(
        {
            "error": "unauthorized",
            "message": "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
        },
        status_code=401,
        headers={"WWW-Authenticate": 'Bearer realm="wasm-runner"'},
    )
