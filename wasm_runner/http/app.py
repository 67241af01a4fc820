"""Assembles the Starlette app: API routes, the MCP tools at ``/mcp`` (``wasm_runner.mcp.http``,
behind the same keys and rate limits), extra routes (the playground pages), middleware, error
handlers, the background sweep that ends expired sessions, and the replica's lifecycle (warming
while the profiles' runtimes are prepared in the background, ``wasm_runner.warmup``; ``/readyz``;
the Redis client of ``scaleout.state`` with ``redis_url``, started here and closed at shutdown).

Middleware, outermost first: security headers; ``HostGuard`` (only ``allowed_hosts``); ``BodyGuard``
(body size and read time); ``InternalGuard`` (internal-hop headers: only a signed call from
another replica, ``internal.py``); CORS. The bounds that must act before a request reaches the app
(header size and time, connections per address, a WebSocket's first message) are in
``serving.uvicorn_config``, which ``wasm-runner serve`` uses."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import BaseRoute

from ..mcp.http import McpHttp
from ..warmup import RETRY_SECONDS
from ..settings import ServerConfig
from .errors import install_error_handlers
from .internal import InternalGuard, audit_refusal, limit_refusals
from .middleware import BodyGuard, CloseWhenBodyUnread, HostGuard, SecurityHeaders
from .routes import api_routes
from .serving import install_log_redaction
from .service import Service

__all__ = ["build_app"]

SWEEP_SECONDS = 1.0
log = logging.getLogger("wasm_runner.http")


def build_app(config: ServerConfig, extra_routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The wasm-runner app for ``config``; ``extra_routes`` are mounted after the API's."""
    service = Service(config)
    mcp_http = McpHttp.for_service(service)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async def sweep_forever() -> None:
            while True:
                await asyncio.sleep(SWEEP_SECONDS)
                try:
                    await service.sessions.sweep()
                except Exception:  # the next sweep tries again: housekeeping never stops
                    log.exception("sweeping the sessions failed")

        async def warm() -> None:
            # the profiles' runtimes are prepared in the background (compiled the first time on a
            # machine): the app answers at once, runs wait for their runtime, /readyz says warming
            while True:
                preps = [service.warmup.start(rt, image) for rt, image in service.profile_runtimes()]
                service.lifecycle.preparing = preps
                while not all(p.done.is_set() for p in preps):
                    await asyncio.sleep(0.2)
                if not any(p.state == "failed" for p in preps):
                    break
                # logged by the warm-up; /readyz says runtime_failed; tried again after a while
                await asyncio.sleep(RETRY_SECONDS)
            try:
                await service.executor.call(service.start_pools)
            except Exception:
                log.exception("starting the warm pools failed; runs start fresh instances")
            service.lifecycle.warm = True  # /readyz: ready (unless draining or Redis is down)

        if service.shared is not None:
            await service.shared.start()
        sweeper = asyncio.ensure_future(sweep_forever())
        publisher = asyncio.ensure_future(  # directory entries back after a Redis restart
            service.directory.keep_published(service.sessions.open_sessions, service.downloads.links)
        )
        warming = asyncio.ensure_future(warm())
        # with Redis: this replica's heartbeat; when it lapses, others drop its leases (scaleout.leases)
        beating = asyncio.ensure_future(service.leases.beat_forever()) if service.leases else None
        try:
            async with mcp_http.lifespan():
                yield
        finally:
            sweeper.cancel()
            publisher.cancel()
            warming.cancel()
            if beating is not None:
                beating.cancel()
            try:
                await service.shutdown()
            finally:
                if service.shared is not None:
                    await service.shared.close()

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
        lifespan=lifespan,
    )
    app.state.service = service
    install_error_handlers(app)
    return app
