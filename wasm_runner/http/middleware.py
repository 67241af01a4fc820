"""Response headers every answer carries: security headers, no caching of API answers, a request id.

Pages get a Content-Security-Policy whose ``frame-ancestors`` allows the CORS allowlist (the sites
that embed the playground) unless the page set its own. Pure ASGI, so streaming is untouched.
"""

from __future__ import annotations

import secrets

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SecurityHeaders"]


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
        is_api = path.startswith("/api/") or path in ("/healthz", "/metrics", "/mcp")
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
