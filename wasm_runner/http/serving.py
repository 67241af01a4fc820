"""uvicorn, set up to hold hostile clients before the app sees a request.

``uvicorn_config(app, config)`` is what ``wasm-runner serve`` runs (and what the tests run). It
chooses uvicorn's settings and two protocol classes that add the bounds uvicorn lacks:

- ``h11`` as the HTTP parser, with ``h11_max_incomplete_event_size = max_header_bytes``: a request
  line plus headers larger than that is answered ``400`` and the connection closed (httptools, the
  other parser, buffers headers without any limit).
- a header-read timeout (``header_timeout_seconds``): from the moment a connection opens, or its
  previous response ended, the client has that long to finish a request's headers; then ``408`` (if
  it sent anything) and the connection is closed. uvicorn's own keep-alive timer is reset by every
  byte, so a client dribbling header bytes (slowloris) would otherwise hold a connection forever.
- a response sent before the request body was read (a ``401`` or ``413`` refusing an upload) ends
  the connection, so nobody can keep a connection busy streaming a body nobody reads.
- at most ``max_connections_per_address`` open connections per client address (IPv6 per /64) and
  ``max_connections`` in all; more are answered ``503`` with ``Retry-After`` and closed at once.
- WebSockets (the websockets library, sans-I/O): no compression (no inflation bombs), and a first
  message capped at ``ws_first_message_bytes`` *before* it is buffered, unless the handshake
  already authenticated. The app raises the cap through the scope extension
  ``wasm_runner.ws_max_size`` (``scope["extensions"]["wasm_runner.ws_max_size"]["set"](n)``);
  under another server the extension is absent and only the app's own checks apply.

Body size and body-read time are bounded in the app (``middleware.BodyGuard``), which works under
any ASGI server. See docs/security.md for which setting protects against what.

``DrainingServer`` is the uvicorn server ``wasm-runner serve`` runs: on the first SIGTERM (or
Ctrl-C) it runs the replica's drain (``scaleout.drain.Drain``) before it stops; a second signal
stops at once (uvicorn's own handling).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
from collections import Counter
from types import FrameType
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from ..scaleout.drain import Drain
from ..settings import ServerConfig

__all__ = [
    "AFTER_DRAIN_SECONDS",
    "ConnectionGuard",
    "DrainingServer",
    "address_key",
    "uvicorn_config",
    "install_log_redaction",
    "WS_MAX_SIZE_EXTENSION",
]

WS_MAX_SIZE_EXTENSION = "wasm_runner.ws_max_size"
WS_MARGIN_BYTES = 64 << 10  # the run message's JSON around a body of max_body_bytes
AFTER_DRAIN_SECONDS = 5  # after the drain, open connections get this long to finish (uvicorn)


def address_key(host: str | None) -> str:
    """The unit per-address limits count in: the IPv4 address, or the IPv6 /64 network."""
    if not host:
        return "unknown"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class ConnectionGuard:
    """Counts open connections per address and in all; ``admit`` says whether one more may open."""

    def __init__(self, max_connections: int, per_address: int) -> None:
        self.max_connections = max_connections
        self.per_address = per_address
        self.total = 0
        self.by_address: Counter[str] = Counter()
        self.refused = 0

    def admit(self, address: str) -> bool:
        if self.total >= self.max_connections or self.by_address[address] >= self.per_address:
            self.refused += 1
            return False
        self.total += 1
        self.by_address[address] += 1
        return True

    def release(self, address: str) -> None:
        self.total -= 1
        self.by_address[address] -= 1
        if self.by_address[address] <= 0:
            del self.by_address[address]


def _raw_response(status: str, extra: str = "") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\n{extra}"
        f"connection: close\r\ncontent-length: 0\r\n\r\n"
    ).encode("ascii")


TOO_MANY_CONNECTIONS = _raw_response("503 Service Unavailable", "retry-after: 10\r\n")
HEADER_TIMEOUT = _raw_response("408 Request Timeout")


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a header-read timeout and per-address connection caps."""

    guard: ConnectionGuard
    header_timeout: float

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address = "unknown"
        self._counted = False
        self._header_timer: asyncio.TimerHandle | None = None
        self._bytes_in_cycle = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._address = address_key(self.client[0] if self.client else None)
        if not self.guard.admit(self._address):
            transport.write(TOO_MANY_CONNECTIONS)
            transport.close()
            return
        self._counted = True
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._counted:
            self._counted = False
            self.guard.release(self._address)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._bytes_in_cycle = True
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # a request's headers are complete
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.conn.their_state not in (h11.IDLE, h11.DONE):
            # answered before the body was read (401, 413, ...): nobody will read the rest
            self.transport.close()
            return
        if self.conn.their_state is h11.IDLE:
            self._bytes_in_cycle = False
            self._arm()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._disarm()
        if self._counted:  # the WebSocket protocol counts the connection from here on
            self._counted = False
            self.guard.release(self._address)
        super().handle_websocket_upgrade(event)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._bytes_in_cycle:
            self.transport.write(HEADER_TIMEOUT)
        self.transport.close()


class GuardedWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's websockets protocol with a small cap on messages until the app raises it."""

    guard: ConnectionGuard
    first_message_bytes: int

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address = "unknown"
        self._counted = False
        self.conn.max_message_size = self.first_message_bytes

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._address = address_key(self.client[0] if self.client else None)
        if not self.guard.admit(self._address):
            transport.write(TOO_MANY_CONNECTIONS)
            transport.close()
            return
        self._counted = True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted:
            self._counted = False
            self.guard.release(self._address)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        super().data_received(data)

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:
            scope["extensions"][WS_MAX_SIZE_EXTENSION] = {"set": self._set_max_size}

    def _set_max_size(self, max_bytes: int) -> None:
        """Messages from now on may be up to ``max_bytes`` (the app calls this)."""
        self.conn.max_message_size = max_bytes


class _RedactTokens(logging.Filter):
    """Access-log lines without download tokens or API keys in the path or query string."""

    _FILES = re.compile(r"(/api/files/)[^/?\s\"]+")
    _KEY = re.compile(r"((?:^|[?&])api_key=)[^&\s\"]*")

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and len(record.args) >= 3:
            args = list(record.args)
            if isinstance(args[2], str):
                args[2] = self._KEY.sub(r"\1[redacted]", self._FILES.sub(r"\1[redacted]", args[2]))
                record.args = tuple(args)
        return True


def install_log_redaction() -> None:
    """Redact tokens from uvicorn's access log (idempotent; the filter is process-wide)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _RedactTokens) for f in access.filters):
        access.addFilter(_RedactTokens())


def uvicorn_config(app: Any, config: ServerConfig, **kwargs: Any) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving ``app`` with the bounds of ``config`` (see the module doc)."""
    guard = ConnectionGuard(config.client_bounds.max_connections, config.client_bounds.max_connections_per_address)
    http = type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {"guard": guard, "header_timeout": config.client_bounds.header_timeout_seconds},
    )
    ws = type(
        "GuardedWebSocketProtocol",
        (GuardedWebSocketProtocol,),
        {"guard": guard, "first_message_bytes": config.client_bounds.ws_first_message_bytes},
    )
    install_log_redaction()
    settings: dict[str, Any] = {
        "http": http,
        "ws": ws,
        "h11_max_incomplete_event_size": config.client_bounds.max_header_bytes,
        "timeout_keep_alive": config.client_bounds.keep_alive_seconds,
        "ws_max_size": config.client_bounds.max_body_bytes + WS_MARGIN_BYTES,
        "ws_per_message_deflate": False,
        "server_header": False,
    }
    settings.update(kwargs)
    return uvicorn.Config(app, **settings)


class DrainingServer(uvicorn.Server):
    """``uvicorn.Server`` that runs ``drain`` on the first SIGTERM/SIGINT before it stops."""

    def __init__(self, config: uvicorn.Config, drain: Drain, drain_seconds: float) -> None:
        super().__init__(config)
        self.drain = drain
        self.drain_seconds = drain_seconds
        self._drain_requested = False
        self._drain_task: asyncio.Task[None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if not self._drain_requested and not self.should_exit:
            self._drain_requested = True  # on_tick (on the event loop) starts the drain
            self.drain.begin()  # /readyz fails and new runs are refused now
            return
        super().handle_exit(sig, frame)  # a second signal: stop now

    async def on_tick(self, counter: int) -> bool:
        if self._drain_requested and self._drain_task is None:
            self._drain_task = asyncio.ensure_future(self._drain())
        return await super().on_tick(counter)

    async def _drain(self) -> None:
        try:
            await self.drain.run(self.drain_seconds)
        finally:
            self.should_exit = True
