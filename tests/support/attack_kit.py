"""Hostile clients against a real ``wasm-runner serve`` (its own process, so its memory is its own).

Used by ``tests/scenarios/test_attacks_over_http.py`` (small scale: each attack just past the limits, the whole suite
in about a minute) and ``benchmarks/http_attacks.py`` (the scale of issue 12). Every attack is
judged from outside: what the attacker got back, the server's resident memory (``/proc``),
``/healthz`` answering during and after (latency recorded), and the server log.

Attackers connect from other loopback addresses (127.0.0.2 ...) than the health probe and the
well-behaved tenant (127.0.0.1), as attackers on other machines would.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tests.support.live_server import operator_env

ALICE = "alice-attack-key"  # the well-behaved tenant
BOB = "bob-attack-key"  # an authenticated attacker
HOG = "hog-attack-key"
HOG2 = "hog2-attack-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_toml(scale: str = "small") -> str:
    """Settings of the attacked server. ``small``: limits low so small attacks exceed them."""
    small = scale == "small"
    server = {
        "max_running": 2,
        "max_queue": 8,
        "memory_budget_mb": 1270,  # 1200 for guests + the 2 prestarted datascience instances
        "tenant_memory_share": 0.5,
        "session_idle_seconds": 300,
        "download_store_bytes": 4 << 20,
        "download_tenant_share": 0.25,
        "max_body_bytes": (2 << 20) if small else (12 << 20),
        "header_timeout_seconds": 2 if small else 10,
        "body_idle_seconds": 2 if small else 10,
        "body_timeout_seconds": 6 if small else 60,
        "max_connections_per_address": 32 if small else 64,
        "failed_auth_rate": "20/minute",
    }
    lines = ["[server]"]
    for k, v in server.items():
        lines.append(f"{k} = {json.dumps(v)}")
    lines += [
        "",
        "[profiles.analyst]",  # no warm pool: the server starts fast; fits the small budget
        "memory_mb = 256",
        "pool_size = 0",
        "",
        "[profiles.big]",
        "memory_mb = 500",
        "cpu_seconds = 5",
        "wall_seconds = 20",
    ]
    for name, key in (("alice", ALICE), ("bob", BOB), ("hog", HOG), ("hog2", HOG2)):
        lines += ["", "[[api_keys]]", f'name = "{name}"', f'key = "{key}"',
                  'rate = "10000/minute"', "max_concurrent = 4"]  # fmt: skip
    return "\n".join(lines) + "\n"


@dataclass
class AttackServer:
    url: str
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def client(self, key: str | None = ALICE, source: str = "127.0.0.1") -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.HTTPTransport(local_address=source)
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, transport=transport)

    def connect(self, source: str) -> socket.socket:
        """A raw TCP connection from ``source`` (a loopback address)."""
        return socket.create_connection((self.host, self.port), timeout=30, source_address=(source, 0))


def settle_rss(server: AttackServer, timeout: float = 30) -> None:
    """Wait until the server's warm-up (images, pools; in the background at start) stops adding
    memory, so the attacks' RSS growth is theirs."""
    end = time.monotonic() + timeout
    last = server.rss_mb()
    while time.monotonic() < end:
        time.sleep(1.0)
        now = server.rss_mb()
        if abs(now - last) < 4:
            return
        last = now


@contextlib.contextmanager
def attack_server(tmp: Path, scale: str = "small") -> Iterator[AttackServer]:
    """``wasm-runner serve --config ...`` on 127.0.0.1, as an operator starts it."""
    config = tmp / "server.toml"
    config.write_text(server_toml(scale))
    port = free_port()
    log_path = tmp / "server.log"
    env = operator_env()
    cmd = [sys.executable, "-m", "wasm_runner.cli", "serve", "--config", str(config),
           "--port", str(port), "--log-level", "info"]  # fmt: skip
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    server = AttackServer(f"http://127.0.0.1:{port}", "127.0.0.1", port, proc, log_path)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(server.url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{server.log()[-3000:]}")
            time.sleep(0.2)
        with server.client() as c:  # load the sandbox: the baseline includes one run
            r = c.post("/api/run", json={"code": "print(1)"})
            assert r.status_code == 200, r.text
        settle_rss(server)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# The /healthz probe runs in a process of its own: attacker threads in this process must not
# slow the probe down (their GIL is not the server's).
_PROBE = r"""
import http.client, json, select, sys, time
host, port = sys.argv[1], int(sys.argv[2])
lat, fail = [], []
conn = None
while not select.select([sys.stdin], [], [], 0.05)[0]:
    t0 = time.perf_counter()
    try:
        if conn is None:
            conn = http.client.HTTPConnection(host, port, timeout=5)
        conn.request("GET", "/healthz")
        r = conn.getresponse()
        r.read()
        if r.status != 200:
            fail.append(f"status {r.status}")
    except Exception as exc:
        fail.append(type(exc).__name__)
        conn = None
    lat.append((time.perf_counter() - t0) * 1000)
    if len(lat) == 1:
        print("ready", flush=True)
print(json.dumps({"lat": lat, "fail": fail}))
"""


@dataclass
class Probe:
    """``/healthz`` every 50 ms from 127.0.0.1 (another process), and the server's RSS."""

    server: AttackServer
    latencies_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    rss_peak_mb: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def sample_rss(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.rss_peak_mb = max(self.rss_peak_mb, self.server.rss_mb())
            self._stop.wait(0.05)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms) or [0.0]
        return {
            "healthz_probes": len(self.latencies_ms),
            "healthz_failures": len(self.failures),
            "healthz_p50_ms": round(statistics.median(lat), 1),
            "healthz_max_ms": round(lat[-1], 1),
        }


@contextlib.contextmanager
def probing(server: AttackServer) -> Iterator[Probe]:
    probe = Probe(server)
    probe.rss_peak_mb = server.rss_mb()
    proc = subprocess.Popen(
        [sys.executable, "-c", _PROBE, server.host, str(server.port)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()  # the first probe answered: the attack starts now
    t = threading.Thread(target=probe.sample_rss, daemon=True)
    t.start()
    try:
        yield probe
    finally:
        probe._stop.set()
        out, _ = proc.communicate("stop\n", timeout=30)
        data = json.loads(out)
        probe.latencies_ms, probe.failures = data["lat"], data["fail"]
        t.join(10)


def measure(server: AttackServer, attack: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``attack`` with the probe on; then, with /healthz still probed, a well-behaved
    tenant's run must be answered. RSS growth is the peak during the attack over the level
    before it."""
    before = server.rss_mb()
    with probing(server) as probe:
        t0 = time.monotonic()
        outcome = attack()
        seconds = time.monotonic() - t0
        probe._stop.set()  # RSS: the attack's peak, not the other tenant's guest that follows
        with server.client() as alice:  # the other tenant, while the probe still runs
            r = alice.post("/api/run", json={"code": "print(6 * 7)"})
            victim = r.status_code if r.status_code != 200 else r.json()["stdout"].strip()
    after = httpx.get(server.url + "/healthz", timeout=5).status_code
    return {
        **outcome,
        "seconds": round(seconds, 2),
        "rss_before_mb": round(before, 1),
        "rss_peak_growth_mb": round(probe.rss_peak_mb - before, 1),
        **probe.summary(),
        "other_tenant_run": victim,
        "healthz_after": after,
    }


def in_threads(n: int, fn: Callable[[int], Any]) -> list[Any]:
    out: list[Any] = [None] * n

    def one(i: int) -> None:
        try:
            out[i] = fn(i)
        except Exception as exc:  # what the attacker saw is the result
            out[i] = f"{type(exc).__name__}"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return out


def read_status(sock: socket.socket, timeout: float = 30) -> str:
    """The status code the server answered on ``sock`` ('closed' if it just closed)."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, TimeoutError, OSError) as exc:
        return "reset" if isinstance(exc, ConnectionResetError) else type(exc).__name__
    if not data:
        return "closed"
    return data.split(b" ", 2)[1].decode()


def counts(items: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[str(item)] = out.get(str(item), 0) + 1
    return out


# -- the attacks ----------------------------------------------------------------------------


def header_flood(server: AttackServer, conns: int, header_mib: float) -> dict[str, Any]:
    """Each connection sends one header value of ``header_mib`` MiB (unauthenticated)."""
    size = int(header_mib * (1 << 20))

    def one(i: int) -> tuple[str, int]:
        with server.connect("127.0.0.2") as s:
            s.sendall(b"GET /api/profiles HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Flood: ")
            sent = 0
            chunk = b"a" * 65536
            try:
                while sent < size:
                    s.sendall(chunk)
                    sent += len(chunk)
                s.sendall(b"\r\n\r\n")
            except OSError:
                pass
            return read_status(s), sent

    results = in_threads(conns, one)
    statuses = [r[0] if isinstance(r, tuple) else r for r in results]
    return {"attacker_got": counts(statuses), "header_bytes_each": size}


def slowloris(server: AttackServer, conns: int, seconds: float) -> dict[str, Any]:
    """Each connection sends its request line and headers one byte every 0.2 s."""
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 1000

    def one(i: int) -> tuple[str, float]:
        with server.connect("127.0.0.3") as s:
            t0 = time.monotonic()
            try:
                for b in request:
                    if time.monotonic() - t0 > seconds:
                        return "still open", time.monotonic() - t0
                    s.send(bytes([b]))
                    time.sleep(0.2)
            except OSError:
                pass
            status = read_status(s, timeout=5)
            return status, time.monotonic() - t0

    results = in_threads(conns, one)
    held = [r[1] for r in results if isinstance(r, tuple)]
    return {
        "attacker_got": counts([r[0] if isinstance(r, tuple) else r for r in results]),
        "longest_held_s": round(max(held), 1) if held else 0,
    }


def connection_flood(server: AttackServer, conns: int) -> dict[str, Any]:
    """``conns`` idle connections from one address, all open at once."""
    socks = []
    statuses = []
    try:
        for _ in range(conns):
            try:
                socks.append(server.connect("127.0.0.4"))
            except OSError as exc:
                statuses.append(type(exc).__name__)
        time.sleep(0.3)
        for s in socks:
            s.setblocking(False)
            try:
                data = s.recv(4096)
                statuses.append(data.split(b" ", 2)[1].decode() if data else "closed")
            except BlockingIOError:
                statuses.append("open")
            except OSError as exc:
                statuses.append(type(exc).__name__)
    finally:
        for s in socks:
            s.close()
    return {"attacker_got": counts(statuses)}


def ws_unauthenticated_flood(server: AttackServer, sockets: int, frame_mib: float) -> dict[str, Any]:
    """WebSockets without a key, each sending one first message of ``frame_mib`` MiB."""
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    payload = json.dumps({"type": "run", "api_key": "wrong", "code": "x" * int(frame_mib * (1 << 20))})

    def one(i: int) -> str:
        sock = server.connect("127.0.0.6")
        try:
            with connect(f"ws://127.0.0.1:{server.port}/api/run/ws", sock=sock, max_size=None,
                         open_timeout=10, close_timeout=5) as ws:  # fmt: skip
                try:
                    ws.send(payload)
                    ws.recv(timeout=30)
                except ConnectionClosed as exc:
                    return f"close {exc.rcvd.code if exc.rcvd else 'none'}"
                return "answered"
        except InvalidStatus as exc:
            return f"http {exc.response.status_code}"
        except ConnectionClosed as exc:
            return f"close {exc.rcvd.code if exc.rcvd else 'none'}"

    return {"attacker_got": counts(in_threads(sockets, one))}


def json_amplification(server: AttackServer, bodies: int, body_mib: float) -> dict[str, Any]:
    """Authenticated bodies of ``{"code": .., "files": [{}, {}, ...]}`` and deep nesting."""
    n = int(body_mib * (1 << 20)) // 3
    wide = b'{"code": "print(1)", "files": [' + b"{}," * n + b"{}]}"
    deep = b'{"code": "print(1)", "limits": ' + b"[" * 10000 + b"]" * 10000 + b"}"

    def one(i: int) -> str:
        with server.client(BOB, source="127.0.0.7") as c:
            r = c.post("/api/run", content=wide if i % 2 == 0 else deep,
                       headers={"Content-Type": "application/json"})  # fmt: skip
            return f"{r.status_code} {r.json()['error']['code']}"

    return {"attacker_got": counts(in_threads(bodies, one)), "body_bytes": len(wide)}


REPORT_FLOOD = ("import os\nb = bytearray(b'[')\nb += b'{{}},' * (({mib} << 20) // 3)\nb += b'{{}}]'\n"
                "os.write(0, b)\n")


def report_flood(server: AttackServer, mib: int) -> dict[str, Any]:
    """An authenticated run whose program writes ``mib`` MiB of JSON (``[{},{},...]``) to fd 0,
    where the wrapper's reports go (issue 39: the host parsed it whole, ~27 bytes a byte)."""
    with server.client(BOB, source="127.0.0.15") as c:
        r = c.post("/api/run", json={"code": REPORT_FLOOD.format(mib=mib), "profile": "analyst"})
        body = r.json()
        return {"attacker_got": f"{r.status_code} {body.get('status')}", "message": body.get("message", "")}


def slow_bodies(server: AttackServer, uploads: int, body_mib: float, vanish: bool) -> dict[str, Any]:
    """Authenticated uploads declaring ``body_mib`` MiB that stall 200 bytes short; then either
    wait for the server (``vanish=False``) or disconnect (``vanish=True``)."""
    size = int(body_mib * (1 << 20))
    body = b'{"code": "' + b"x" * (size - 12) + b'"}'

    def one(i: int) -> str:
        with server.connect("127.0.0.8") as s:
            s.sendall(
                b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {BOB}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            )
            try:
                s.sendall(body[:-200])
            except OSError:
                return read_status(s, 5)
            if vanish:
                time.sleep(0.5)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                return "vanished"
            return read_status(s, timeout=60)

    return {"attacker_got": counts(in_threads(uploads, one))}


def failed_auth(server: AttackServer, attempts: int) -> dict[str, Any]:
    """Wrong keys from one address, as fast as the server answers."""
    got = []
    with server.client("guess-0", source="127.0.0.5") as c:
        for i in range(attempts):
            r = c.get("/api/profiles", headers={"Authorization": f"Bearer guess-{i}"})
            got.append(r.status_code)
        retry = r.headers.get("retry-after")
        right = c.get("/api/profiles", headers={"Authorization": f"Bearer {BOB}"}).status_code
    return {"attacker_got": counts(got), "retry_after": retry, "right_key_same_address": right}


def rebinding(server: AttackServer) -> dict[str, Any]:
    """A page on rebind.example whose name resolves to 127.0.0.1: its own name is the Host."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    with server.client(source="127.0.0.9") as c:
        http = c.get("/api/profiles", headers={"Host": "rebind.example"}).status_code
    sock = server.connect("127.0.0.9")
    try:
        with connect(f"ws://rebind.example:{server.port}/api/run/ws", sock=sock,
                     origin="http://rebind.example", open_timeout=10):  # type: ignore[arg-type]  # fmt: skip
            ws = "accepted"
    except InvalidStatus as exc:
        ws = f"http {exc.response.status_code}"
    return {"attacker_got": {"http": http, "websocket": ws}}


def session_hog(server: AttackServer) -> dict[str, Any]:
    """Two keys open two sessions each; then a third key asks for one (memory budget)."""
    got = []
    retry = []

    def ask(key: str, source: str) -> None:
        with server.client(key, source=source) as c:
            r = c.post("/api/sessions", json={"profile": "big"})
            got.append(f"{r.status_code} {r.json().get('error', {}).get('code', 'created')}")
            retry.append(r.headers.get("retry-after"))

    for key, source in ((HOG, "127.0.0.10"), (HOG, "127.0.0.10"), (HOG2, "127.0.0.11"),
                        (HOG2, "127.0.0.11"), (BOB, "127.0.0.12")):  # fmt: skip
        ask(key, source)
    return {"attacker_got": got, "retry_after": retry}


def download_squeeze(server: AttackServer, files: int, file_kib: int) -> dict[str, Any]:
    """Alice keeps a download link; Bob then writes ``files`` files of ``file_kib`` KiB as links."""
    code = "open('/out/a.bin','wb').write(b'a' * {n})"
    with server.client() as alice:
        r = alice.post("/api/run", json={"code": code.format(n=1000), "files_as": "url"})
        url = r.json()["files"][0]["url"]
    with server.client(BOB, source="127.0.0.12") as bob:
        for _ in range(files):
            r = bob.post("/api/run", json={"code": code.format(n=file_kib * 1024),
                                            "files_as": "url"})  # fmt: skip
            assert r.status_code == 200, r.text
    with server.client() as alice:
        kept = alice.get(url).status_code
    token = url.rsplit("/", 1)[1]
    return {"victim_link_after": kept, "token": token}


def encode_key_subprotocol(key: str) -> str:
    return "wasm-runner.key." + base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")
