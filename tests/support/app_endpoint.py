"""A real HTTP endpoint of "the app" for host-function tests: a threaded ``http.server`` on
127.0.0.1 that checks each call's signature, time and nonce (``host_functions.endpoint.verify``)
and answers from a table of functions. It records every request it got (path, headers, body), so
a test can show what was sent and what never arrived (a redirect's target)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from wasm_runner import codec
from wasm_runner.host_functions.endpoint import Nonces, verify

__all__ = ["AppEndpoint", "SECRET", "app_endpoint"]

SECRET = "s" * 16 + "e" * 16 + "cret-of-lookup-order"


@dataclass
class AppEndpoint:
    port: int
    requests: list[dict[str, Any]] = field(default_factory=list)
    refused: int = 0  # calls whose signature, time or nonce did not check out

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def _handler(app: AppEndpoint, functions: dict[str, Callable[..., Any]], secret: bytes) -> type[BaseHTTPRequestHandler]:
    nonces = Nonces()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any] | None, headers: dict[str, str] | None = None) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            app.requests.append({"path": self.path, "headers": headers, "body": body})
            if not verify(secret, headers, body, nonces):
                app.refused += 1
                self._answer(401, {"error": {"type": "PermissionError", "message": "bad signature"}})
                return
            if self.path == "/redirect":
                self._answer(302, None, {"Location": "/tools/lookup_order"})
                return
            if self.path == "/broken":
                self._answer(500, {"oops": True})
                return
            call = json.loads(body)
            fn = functions.get(call["function"])
            if fn is None:
                self._answer(404, {"error": {"type": "LookupError", "message": "no such function"}})
                return
            try:
                value = fn(call, **codec.from_tagged(call["arguments"]))
            except Exception as e:  # noqa: BLE001 - the app's error, as data
                self._answer(200, {"error": {"type": type(e).__name__, "message": str(e)}})
                return
            self._answer(200, {"value": codec.to_tagged(value)})

    return Handler


@contextmanager
def app_endpoint(functions: dict[str, Callable[..., Any]], secret: str = SECRET) -> Iterator[AppEndpoint]:
    """The app's endpoint on 127.0.0.1 (an ephemeral port) while the block runs. Each function
    gets the call's JSON (function, key, user, request_id) and its arguments as keywords."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    app = AppEndpoint(port=server.server_address[1])
    server.RequestHandlerClass = _handler(app, functions, secret.encode())
    thread = threading.Thread(target=server.serve_forever, name="app-endpoint", daemon=True)
    thread.start()
    try:
        yield app
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
