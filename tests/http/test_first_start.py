"""Issue 22: the first start on a machine, with an empty compiled-module cache. ``wasm-runner
serve`` answers the page and the API at once while its runtime compiles in the background:
``/readyz`` says ``warming`` (with the seconds left), a run is refused with ``503 warming`` and a
``Retry-After`` once the queue timeout has passed, and the same run works once the runtime is
ready. Two replicas sharing the cache compile the module once between them (a file lock).

The one test of the suite that pays for a compile (the ``small`` runtime, the cheapest one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from tests.support.live_server import wait_until
from tests.support.http_clients import free_port


CONFIG = """
[server]
runtimes = ["small"]
queue_timeout_seconds = 1

[profiles.student]
runtime = "small"

[profiles.analyst]
runtime = "small"
pool_size = 0
preload = []
"""


def test_an_empty_cache_serves_at_once_and_the_server_tier_follows(tmp_path: Path) -> None:
    cache = tmp_path / "cache"  # empty: what a fresh machine has (never the user's own cache)
    config = tmp_path / "server.toml"
    config.write_text(CONFIG)
    env = {**os.environ, "WASM_RUNNER_CACHE": str(cache), "WASM_RUNNER_BROWSER_SNAPSHOT": "off",
           "COLUMNS": "400"}  # log lines unwrapped
    env.pop("WASM_RUNNER_CONFIG", None)
    ports = [free_port(), free_port()]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "wasm_runner.cli", "serve", "--no-auth", "--port", str(port),
             "--config", str(config), "--log-level", "warning"],
            stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        for port in ports
    ]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        def up(url: str) -> bool:
            try:
                return httpx.get(url + "/healthz", timeout=10).status_code == 200
            except httpx.TransportError:
                return False

        assert all(wait_until(lambda u=u: up(u), timeout=120, step=0.2) for u in urls)
        url = urls[0]
        ready = httpx.get(url + "/readyz", timeout=30)
        assert ready.status_code == 503 and ready.json()["status"] == "warming"
        assert int(ready.headers["Retry-After"]) >= 1
        [small] = ready.json()["runtimes"]
        assert small["runtime"] == "small" and small["state"] == "preparing"
        assert small["seconds_left"] >= 5
        page = httpx.get(url + "/", timeout=30)  # the playground and the browser tier: at once
        assert page.status_code == 200 and 'id="server-note"' in page.text
        run = httpx.post(url + "/api/run", json={"code": "print(6 * 7)"}, timeout=60)
        assert run.status_code == 503 and run.json()["error"]["code"] == "warming"
        assert int(run.headers["Retry-After"]) >= 5
        assert "being prepared" in run.json()["error"]["message"]

        def is_ready(u: str) -> bool:
            return httpx.get(u + "/readyz", timeout=30).status_code == 200

        assert all(wait_until(lambda u=u: is_ready(u), timeout=1200, step=1.0) for u in urls)
        for u in urls:
            done = httpx.post(u + "/api/run", json={"code": "print(6 * 7)"}, timeout=120)
            assert done.status_code == 200 and done.json()["stdout"] == "42\n"
        assert httpx.get(url + "/readyz", timeout=30).json() == {"status": "ready", "ready": True}
    finally:
        for p in procs:
            p.terminate()
        errs = [p.communicate(timeout=60)[1] for p in procs]
    logs = "".join(errs)
    assert "preparing the small runtime in the background" in errs[0]
    assert "the small runtime is ready" in errs[0]
    # one compile of the module between the two replicas: the other waited for its file lock
    assert logs.count("compiling the small-stack runtime once") == 1, logs[-3000:]
    assert len(list(cache.glob("small-stack-*.cwasm"))) == 1
