"""The Starlette app around an assembled ``Service`` (``wasm_runner.assembly`` builds both): API
routes, the MCP tools at ``/mcp`` (``wasm_runner.mcp.http``, behind the same keys and rate limits),
extra routes (the playground pages), middleware and error handlers; the app's lifespan is the
service's (``assembly.running``: the sweep, the warm-up, the heartbeat, the shutdown) around the
MCP session manager's.

Middleware, outermost first: security headers; ``HostGuard`` (only ``allowed_hosts``); ``BodyGuard``
(body size and read time); ``InternalGuard`` (internal-hop headers: only a signed call from
another replica, ``internal.py``); CORS. The bounds that must act before a request reaches the app
(header size and time, connections per address, a WebSocket's first message) are in
``serving.uvicorn_config``, which ``wasm-runner serve`` uses."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute

from ..mcp.http import McpHttp
from .errors import install_error_handlers
from .internal import InternalGuard, audit_refusal, limit_refusals
from .middleware import BodyGuard, CloseWhenBodyUnread, HostGuard, SecurityHeaders
from .routes import api_routes
from .serving import install_log_redaction
from .service import Service

__all__ = ["mount"]


def mount(service: Service, *, lifespan: Callable[[], AbstractAsyncContextManager[None]],
          extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The app serving ``service``: ``lifespan()`` is the service's lifetime (entered around the
    MCP session manager's); ``extra_routes`` are mounted after the API's."""
    config = service.config
    mcp_http = McpHttp.for_service(service)

    @asynccontextmanager
    async def app_lifespan(app: Starlette) -> AsyncIterator[None]:
        async with lifespan(), mcp_http.lifespan():
            yield

    install_log_redaction()
    middleware = [
        Middleware(CloseWhenBodyUnread),
        Middleware(SecurityHeaders, embed_origins=config.cors_origins),
        Middleware(HostGuard, allowed_hosts=config.client_bounds.allowed_hosts),
        Middleware(
            BodyGuard,
            max_bytes=config.client_bounds.max_body_bytes,
            total_seconds=config.client_bounds.body_timeout_seconds,
            idle_seconds=config.client_bounds.body_idle_seconds,
            bounds={"/api/sessions/resume": config.sessions.max_snapshot_bytes},  # a snapshot's own bound
        ),
        # X-Wasm-Runner-Internal-* headers: only a signed hop from another replica (internal.py)
        Middleware(InternalGuard, forwarding=service.forwarding,
                   on_refused=audit_refusal(service.metrics, service.audit),
                   count_refusal=limit_refusals(service.gatekeeper, service.metrics)),
        Middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type", "X-Wasm-Runner-User",
                           "X-Wasm-Runner-User-Token"],
            expose_headers=["Retry-After", "X-Request-Id"],
            max_age=600,
        ),
    ]
    app = Starlette(
        routes=[*api_routes(), *mcp_http.routes(), *extra_routes],
        middleware=middleware,
        lifespan=app_lifespan,
    )
    app.state.service = service
    install_error_handlers(app)
    return app
