"""A loopback HTTP server standing in for a public API (the standard library's ``http.server``,
independent of the code under test), with the routes the network tests need, and its own log
of every request it received: the host's view of what was connected to."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["CSV", "LoopbackAPI", "loopback_api"]

CSV = "city,people\nLyon,522000\nNantes,320000\n"


@dataclass
class LoopbackAPI:
    """A running server: its port, the requests it received (method, path, headers), and the
    URL to redirect to (``redirect_to``)."""

    port: int
    log: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    redirect_to: dict[str, str] = field(default_factory=dict)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.log]


def _handler(api: LoopbackAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json",
                  extra: list[tuple[str, str]] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in extra or []:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            api.log.append(("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
            path = self.path.split("?")[0]
            if path == "/data.json":
                self._send(200, b'{"answer": 42, "items": [1, 2, 3]}')
            elif path == "/data.csv":
                self._send(200, CSV.encode(), "text/csv")
            elif path == "/headers":
                body = "\n".join(f"{k}: {v}" for k, v in sorted(self.headers.items())).encode()
                self._send(200, body, "text/plain")
            elif path in api.redirect_to:
                self._send(302, b"", extra=[("Location", api.redirect_to[path])])
            elif path == "/huge":
                self.send_response(200)
                self.send_header("Content-Length", str(64 << 20))
                self.end_headers()
                try:
                    for _ in range(1024):
                        self.wfile.write(b"x" * (64 << 10))
                except OSError:
                    pass
            elif path == "/drip":
                self.send_response(200)
                self.send_header("Content-Length", "100")
                self.end_headers()
                try:
                    for _ in range(100):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    pass
            elif path == "/header-flood":
                self._send(200, b"{}", extra=[(f"X-Flood-{i}", "y" * 50) for i in range(500)])
            else:
                self._send(404, b'{"error": "not found"}')

    return Handler


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up (the host giving up on a drip): expected here


@contextmanager
def loopback_api() -> Iterator[LoopbackAPI]:
    """A server on 127.0.0.1 (a free port) for the block's duration."""
    api = LoopbackAPI(0)
    server = _Server(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    api.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
