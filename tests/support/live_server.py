"""A real uvicorn serving the real app on 127.0.0.1 (a free port), for the end-to-end HTTP tests.

``live_server(config)`` starts one (its own config); ``make_config`` is the test settings.
"""

from __future__ import annotations

import base64
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
import uvicorn
from starlette.applications import Starlette

from server import create_app
from wasm_runner.http.serving import uvicorn_config
from wasm_runner.settings import DEFAULT_PROFILES, ApiKey, Profile, ServerConfig, hash_key
from wasm_runner.limits import Limits

KEY = "alice-key"
LIMITED_KEY = "limited-key"
STUDENT_KEY = "student-only-key"
OTHER_KEY = "bob-key"


@dataclass
class LiveServer:
    url: str
    ws_url: str
    config: ServerConfig
    app: Starlette
    server: uvicorn.Server
    thread: threading.Thread

    def client(self, key: str | None = KEY, **kw: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # the client lets an idle connection go before the server does (keep_alive_seconds, 5 s):
        # with both at 5 s a request sent on a connection the server was closing got "connection
        # reset by peer" (seen on busy machines between tests sharing one client)
        kw.setdefault("limits", httpx.Limits(keepalive_expiry=2.0))
        return httpx.Client(base_url=self.url, headers=headers, timeout=120, **kw)  # type: ignore[arg-type]

    def health(self) -> dict[str, object]:
        return httpx.get(f"{self.url}/healthz", timeout=30).json()


def wait_until(predicate, timeout: float = 60.0, step: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until true (liveness, not speed: the bound is generous)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def operator_env() -> dict[str, str]:
    """This process's environment for a ``wasm-runner`` started as an operator would: none of
    the ``WASM_RUNNER_`` settings of the test run, except where compiled modules are cached (a
    CI run compiles into its own cache folder; a server that looked in the default one would
    compile everything again there)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("WASM_RUNNER_") or k == "WASM_RUNNER_CACHE"}


@contextmanager
def live_server(config: ServerConfig) -> Iterator[LiveServer]:
    app = create_app(config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(  # the settings `wasm-runner serve` uses (serving.uvicorn_config)
        uvicorn_config(app, config, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    if not wait_until(lambda: server.started, timeout=30):
        raise RuntimeError("uvicorn did not start")
    try:
        yield LiveServer(
            f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", config, app, server, thread
        )
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def make_config(tmp_path: Path, **overrides: object) -> ServerConfig:
    """Keys for alice (generous), limited (3 requests a minute), student-only, bob."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "numbers.csv").write_text("n\n1\n2\n3\n")
    profiles = dict(DEFAULT_PROFILES)
    profiles["analyst"] = replace(profiles["analyst"], data_dir=data)
    profiles["quick"] = Profile("quick", Limits(cpu_seconds=1, wall_seconds=3, memory_mb=256))
    keys = (
        ApiKey("alice", hash_key(KEY), rate="10000/minute", max_concurrent=8),
        ApiKey("limited", hash_key(LIMITED_KEY), rate="3/minute"),
        ApiKey("student-only", hash_key(STUDENT_KEY), profiles=("student",), rate="10000/minute"),
        ApiKey("bob", hash_key(OTHER_KEY), rate="10000/minute"),
    )
    settings: dict[str, object] = {
        "api_keys": keys,
        "profiles": profiles,
        "max_running": 2,
        "max_queue": 8,
        "audit_log": tmp_path / "audit.jsonl",
        "cors_origins": ("https://course.example",),
        "exercises_dir": Path(__file__).resolve().parents[1] / "exercises",
        "snapshot_dir": str(tmp_path / "paused-sessions"),  # not the user's cache folder
    }
    settings.update(overrides)
    return ServerConfig.from_keys(**settings)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def session_cell(api: httpx.Client, sid: str, code: str) -> dict:  # type: ignore[type-arg]
    """One cell in session ``sid``, answered 200; its result."""
    r = api.post(f"/api/sessions/{sid}/run", json={"code": code})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def session_state(api: httpx.Client, sid: str) -> dict:  # type: ignore[type-arg]
    """How session ``sid`` describes itself (``GET /api/sessions/{id}``, answered 200)."""
    r = api.get(f"/api/sessions/{sid}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]
