"""Issue 22: serve's quick tier. With an empty compiled-module cache, the default runtime is
first compiled by Winch (with fuel, never cached) and the server tier answers from it, CPU limit
included, while Cranelift compiles the module behind it; new runs then move to Cranelift's code,
which is what is cached.

Pays for a compile of the default runtime's ``plain`` image (the cheaper of its two images), once
by Winch and once by Cranelift."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from tests.support.http_clients import free_port
from tests.support.live_server import wait_until

CONFIG = """
[server]
runtimes = ["default"]

[profiles.student]
image = "plain"
cpu_seconds = 1
wall_seconds = 120

[profiles.analyst]
image = "plain"
pool_size = 0
preload = []
"""

QUICK = "runs on its quick tier (Winch)"
CRANELIFT = "now runs Cranelift's code"
QUICK_COMPILE = "compiling the default-plain runtime with the quick compiler"
CRANELIFT_COMPILE = "compiling the default-plain runtime once"


def test_an_empty_cache_answers_from_the_quick_tier_then_from_cranelift(tmp_path: Path) -> None:
    cache = tmp_path / "cache"  # empty: what a fresh machine has (never the user's own cache)
    config = tmp_path / "server.toml"
    config.write_text(CONFIG)
    log_file = tmp_path / "serve.log"
    env = {**os.environ, "WASM_RUNNER_CACHE": str(cache), "WASM_RUNNER_BROWSER_SNAPSHOT": "off",
           "COLUMNS": "400"}  # log lines unwrapped
    env.pop("WASM_RUNNER_CONFIG", None)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log_file.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wasm_runner.cli", "serve", "--no-auth", "--port", str(port),
             "--config", str(config), "--log-level", "warning"],
            stderr=log, text=True, env=env,
        )  # fmt: skip
    try:
        def ready() -> bool:
            try:
                return httpx.get(url + "/readyz", timeout=30).status_code == 200
            except httpx.TransportError:
                return False

        assert wait_until(ready, timeout=1800, step=1.0), log_file.read_text()[-3000:]
        run = httpx.post(url + "/api/run", json={"code": "print(6 * 7)"}, timeout=120)
        assert run.status_code == 200 and run.json()["stdout"] == "42\n"
        spin = httpx.post(url + "/api/run", json={"code": "while True: pass"}, timeout=120)
        assert spin.status_code == 200 and spin.json()["status"] == "cpu_limit"  # fuel holds on Winch's code
        logs = log_file.read_text()
        assert QUICK in logs and CRANELIFT not in logs, logs[-3000:]  # those runs were the quick tier's
        assert not list(cache.glob("*.cwasm"))  # the quick tier's module is never cached

        assert wait_until(lambda: CRANELIFT in log_file.read_text(), timeout=3600, step=2.0), log_file.read_text()[-3000:]
        again = httpx.post(url + "/api/run", json={"code": "print(6 * 7)"}, timeout=120)
        assert again.status_code == 200 and again.json()["stdout"] == "42\n"
        spin = httpx.post(url + "/api/run", json={"code": "while True: pass"}, timeout=120)
        assert spin.status_code == 200 and spin.json()["status"] == "cpu_limit"
        assert httpx.get(url + "/readyz", timeout=30).json() == {"status": "ready", "ready": True}
        assert httpx.get(url + "/healthz", timeout=30).json()["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert [p.name.split("-")[1] for p in cache.glob("*.cwasm")] == ["plain"]  # Cranelift's, cached
    assert "Traceback" not in log_file.read_text()


def test_quick_tier_off_waits_for_cranelift(tmp_path: Path) -> None:
    """``WASM_RUNNER_QUICK_TIER=off`` (``[server] quick_tier = false``): an operator who wants no
    caller code on Winch's code gets none; the first start prepares Cranelift's module only."""
    cache = tmp_path / "cache"
    config = tmp_path / "server.toml"
    config.write_text(CONFIG.replace("[server]\n", "[server]\nqueue_timeout_seconds = 1\n"))
    log_file = tmp_path / "serve.log"
    env = {**os.environ, "WASM_RUNNER_CACHE": str(cache), "WASM_RUNNER_BROWSER_SNAPSHOT": "off",
           "WASM_RUNNER_QUICK_TIER": "off", "COLUMNS": "400"}
    env.pop("WASM_RUNNER_CONFIG", None)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with log_file.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "wasm_runner.cli", "serve", "--no-auth", "--port", str(port),
             "--config", str(config), "--log-level", "warning"],
            stderr=log, text=True, env=env,
        )  # fmt: skip
    try:
        def preparing() -> bool:
            try:
                r = httpx.get(url + "/readyz", timeout=30)
            except httpx.TransportError:
                return False
            return r.status_code == 503 and any(p["state"] == "preparing" for p in r.json().get("runtimes", []))

        assert wait_until(preparing, timeout=300, step=0.5), log_file.read_text()[-3000:]
        # what is compiled is said before the compile starts: Cranelift's module, never Winch's
        assert wait_until(lambda: CRANELIFT_COMPILE in log_file.read_text(), timeout=120, step=0.5), \
            log_file.read_text()[-3000:]
        run = httpx.post(url + "/api/run", json={"code": "print(6 * 7)"}, timeout=120)
        assert run.status_code == 503 and run.json()["error"]["code"] == "warming"  # not a Winch run
        assert httpx.get(url + "/healthz", timeout=30).json()["status"] == "ok"
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    logs = log_file.read_text()
    assert QUICK_COMPILE not in logs and QUICK not in logs, logs[-3000:]
