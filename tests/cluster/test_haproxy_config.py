"""The generated haproxy.cfg under a real HAProxy, in front of small loopback HTTP backends that
report what reached them (the balancer's own rules, without the cost of starting replicas): valid
for ``haproxy -c``; internal headers from clients removed whatever their case; the answering
replica named; calls spread without stickiness; a connection failure retried on another replica;
a request that reached a replica never sent again."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from wasm_runner.scaleout.launcher.children import Child, free_port, require_binary
from wasm_runner.scaleout.launcher.haproxy import (
    REPLICA_HEADER,
    check_config,
    haproxy_argv,
    render_config,
    server_states,
    timeouts_for,
)
from wasm_runner.settings import ServerConfig

HAPROXY = require_binary("haproxy")


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # the /drop connection, closed under the handler on purpose


class Backend:
    """A loopback HTTP server standing in for a replica behind HAProxy: ``/readyz`` answers 200,
    ``/drop`` reads the request and closes the connection without an answer, anything else
    (GET or POST) answers the request headers it received as JSON. ``hits`` counts requests by path."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                backend.hits[self.path] += 1
                if self.path == "/drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                body = b"ready" if self.path == "/readyz" else json.dumps(dict(self.headers)).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.server = _QuietServer(("127.0.0.1", 0), Handler)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _start_haproxy(tmp: Path, backends: list[tuple[str, int]],
                   config: ServerConfig | None = None) -> tuple[Child, str, Path]:  # fmt: skip
    port = free_port()
    sock = tmp / "stats.sock"
    cfg = tmp / "haproxy.cfg"
    cfg.write_text(render_config("127.0.0.1", port, backends, config or ServerConfig(auth=False), sock))
    assert check_config(HAPROXY, cfg) is None
    child = Child("haproxy", haproxy_argv(HAPROXY, cfg), echo=lambda line: None)
    child.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(server_states(sock)) < len(backends):
        time.sleep(0.05)
    assert child.alive(), list(child.tail)
    return child, url, sock


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, list[Backend], Path]]:
    backends = [Backend(), Backend()]
    child, url, sock = _start_haproxy(
        tmp_path_factory.mktemp("haproxy"), [(f"r{i + 1}", b.port) for i, b in enumerate(backends)]
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and set(server_states(sock).values()) != {"UP"}:
        time.sleep(0.05)
    yield url, backends, sock
    child.stop()
    for b in backends:
        b.close()


def test_generated_config_is_valid_and_its_timeouts_fit_the_profiles(tmp_path: Path) -> None:
    config = ServerConfig(auth=False)
    cfg = tmp_path / "haproxy.cfg"
    text = render_config("127.0.0.1", 8000, [("r1", 8001), ("r2", 8002)], config)
    cfg.write_text(text)
    assert check_config(HAPROXY, cfg) is None
    t = timeouts_for(config)
    longest = max(p.limits.wall_seconds for p in config.profiles.values())
    assert t["server"] >= config.admission.queue_timeout_seconds + longest
    assert t["tunnel"] >= max(p.limits.input_wait_seconds for p in config.profiles.values())
    assert "balance roundrobin" in text and "cookie" not in text and "stick on" not in text
    assert f"sc0_conn_cur gt {config.client_bounds.max_connections_per_address} }}" in text  # per client, here
    # and a broken file is reported in HAProxy's words, not accepted
    cfg.write_text(text.replace("balance roundrobin", "balance nonsense"))
    complaint = check_config(HAPROXY, cfg) or ""
    assert "balance only supports" in complaint and "[NOTICE]" not in complaint


def test_internal_and_forwarding_headers_from_clients_never_reach_a_replica(balanced: tuple[str, list[Backend], Path]) -> None:
    url, _, _ = balanced
    forged = {
        "X-Wasm-Runner-Internal-Hop": "forged",
        "x-wasm-runner-internal-tenant": "forged",
        "X-WASM-RUNNER-INTERNAL-SIGNATURE": "forged",
        "X-Wasm-Runner-Other": "kept",
        "X-Forwarded-For": "203.0.113.7",  # a client naming another address
        "X-Forwarded-Proto": "https",
    }
    r = httpx.get(url + "/echo", headers=forged, timeout=10)
    assert r.status_code == 200
    seen = {k.lower(): v for k, v in r.json().items()}
    assert not [k for k in seen if k.startswith("x-wasm-runner-internal-")], seen
    assert seen["x-wasm-runner-other"] == "kept"
    assert seen["x-forwarded-for"] == "127.0.0.1" and "x-forwarded-proto" not in seen  # HAProxy's, only
    assert r.headers[REPLICA_HEADER] in ("r1", "r2")


def test_round_robin_without_stickiness(balanced: tuple[str, list[Backend], Path]) -> None:
    url, _, _ = balanced
    with httpx.Client(base_url=url, timeout=10) as client:  # one kept-alive client connection
        answered_by = [client.get("/echo").headers[REPLICA_HEADER] for _ in range(6)]
    assert Counter(answered_by) == {"r1": 3, "r2": 3}


def test_mcp_calls_of_one_key_reach_one_replica_and_nothing_else_sticks(
    balanced: tuple[str, list[Backend], Path],
) -> None:
    url, _, _ = balanced
    homes = set()
    with httpx.Client(base_url=url, timeout=10) as client:
        for i in range(16):
            key = f"key-{i:02d}-0123456789abcdef"
            headers = {"Authorization": f"Bearer {key}"} if i % 2 else {"X-API-Key": key}
            answered = {client.post("/mcp", headers=headers).headers[REPLICA_HEADER] for _ in range(4)}
            assert len(answered) == 1, (i, answered)  # every MCP call of a key: one replica
            homes |= answered
        assert homes == {"r1", "r2"}  # and keys spread over the replicas
        # every other call is balanced, whatever key it carries
        other = Counter(client.get("/echo", headers={"Authorization": "Bearer key-00"}).headers[REPLICA_HEADER]
                        for _ in range(4))  # fmt: skip
        assert other == {"r1": 2, "r2": 2}


def test_a_request_that_reached_a_replica_is_not_sent_again(balanced: tuple[str, list[Backend], Path]) -> None:
    url, backends, _ = balanced
    before = sum(b.hits["/drop"] for b in backends)
    r = httpx.get(url + "/drop", timeout=10)
    assert r.status_code == 502  # HAProxy's answer, at once, in the app's error format
    assert r.json()["error"]["code"] == "replica_failed"
    assert sum(b.hits["/drop"] for b in backends) - before == 1
    assert httpx.get(url + "/echo", timeout=10).status_code == 200  # and the balancer still serves


def test_a_connection_failure_is_retried_on_another_replica(tmp_path: Path) -> None:
    live = Backend()
    dead_port = free_port()  # nothing listens there
    child, url, sock = _start_haproxy(tmp_path, [("r1", dead_port), ("r2", live.port)])
    try:
        # at once, before any health check marked r1 down: refused connections go to r2
        statuses = [httpx.get(url + "/echo", timeout=10).status_code for _ in range(6)]
        assert statuses == [200] * 6
        assert live.hits["/echo"] == 6
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and server_states(sock).get("r1", "").startswith("UP"):
            time.sleep(0.05)
        assert server_states(sock)["r1"].startswith("DOWN")
        assert server_states(sock)["r2"] == "UP"
    finally:
        child.stop()
        live.close()


def test_the_per_client_connection_cap_is_held_by_the_balancer(tmp_path: Path) -> None:
    live = Backend()
    config = ServerConfig.from_keys(auth=False, max_connections_per_address=4)
    child, url, _ = _start_haproxy(tmp_path, [("r1", live.port)], config)
    port = int(url.rsplit(":", 1)[1])
    held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(4)]
    try:
        time.sleep(0.2)
        try:  # the 5th: closed or reset by HAProxy, unanswered
            with socket.create_connection(("127.0.0.1", port), timeout=5) as extra:
                extra.sendall(b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert extra.recv(100) == b""
        except (ConnectionResetError, BrokenPipeError):
            pass
        assert live.hits["/echo"] == 0  # it never reached the replica
        held.pop().close()
        time.sleep(0.2)
        assert httpx.get(url + "/echo", timeout=10).status_code == 200  # room again: served
    finally:
        for s in held:
            s.close()
        child.stop()
        live.close()
