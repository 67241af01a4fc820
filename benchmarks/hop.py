"""What the internal hop costs: session calls answered by their owner vs. passed on by another replica.

    python benchmarks/hop.py                  # 200 calls of each kind
    python benchmarks/hop.py --calls 500

Starts a redis-server and two ``wasm-runner serve`` replicas on 127.0.0.1 (the same shared state as
a cluster, no balancer), opens one session on replica A and times, one call at a time:

- ``describe``: ``GET /api/sessions/{id}`` (no guest runs: the hop's own cost shows),
- ``cell``: ``POST /api/sessions/{id}/run`` with ``x += 1`` (a guest call in the session),

each sent to A (the owner) and to B (which passes it to A). Prints p50/p99 per kind and path and
writes them to ``benchmarks/results/hop.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
KEY = secrets.token_hex(16)
CONFIG = f"""
[server]
default_profile = "quick"

[profiles.quick]
image = "plain"
cpu_seconds = 5
wall_seconds = 15
memory_mb = 64

[profiles.analyst]
pool_size = 0

[[api_keys]]
name = "bench"
key = "{KEY}"
rate = "1000000/minute"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(predicate, timeout: float = 90.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if predicate():
                return True
        except (httpx.HTTPError, OSError):
            pass
        time.sleep(0.1)
    return False


def start_replica(folder: Path, redis_url: str, secret: str) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("WASM_RUNNER_") or k == "WASM_RUNNER_CACHE"}
    env.update(PYTHONPATH=str(ROOT), WASM_RUNNER_REDIS_URL=redis_url, WASM_RUNNER_ADVERTISE_URL=url,
               WASM_RUNNER_CLUSTER_SECRET=secret)  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "wasm_runner.cli", "serve", "--host", "127.0.0.1", "--port",
         str(port), "--config", str(folder / "bench.toml"), "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    if not wait(lambda: httpx.get(f"{url}/healthz", timeout=2).status_code == 200):
        proc.kill()
        raise SystemExit("a replica did not start")
    return url, proc


def timed(client: httpx.Client, method: str, url: str, body: object, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        r = client.request(method, url, json=body)
        out.append((time.perf_counter() - started) * 1000)
        if r.status_code != 200:
            raise SystemExit(f"{method} {url}: {r.status_code} {r.text}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls of each kind and path (default 200)")
    args = parser.parse_args()
    calls = max(10, min(args.calls, 5000))
    folder = Path(tempfile.mkdtemp(prefix="wasm-runner-hop-bench-"))
    (folder / "bench.toml").write_text(CONFIG)
    rport = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(rport), "--save", "", "--appendonly", "no",
         "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    procs: list[subprocess.Popen[bytes]] = [redis]
    try:
        secret = secrets.token_hex(32)
        a, pa = start_replica(folder, f"redis://127.0.0.1:{rport}/0", secret)
        procs.append(pa)
        b, pb = start_replica(folder, f"redis://127.0.0.1:{rport}/0", secret)
        procs.append(pb)
        headers = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(headers=headers, timeout=60, trust_env=False) as client:
            sid = client.post(f"{a}/api/sessions", json={}).json()["id"]
            client.post(f"{a}/api/sessions/{sid}/run", json={"code": "x = 0"})
            figures: dict[str, dict[str, float]] = {}
            for kind, method, path, body in (
                ("describe", "GET", f"/api/sessions/{sid}", None),
                ("cell", "POST", f"/api/sessions/{sid}/run", {"code": "x += 1"}),
            ):
                for via, base in (("owner", a), ("hop", b)):
                    timed(client, method, base + path, body, 10)  # warm connections
                    ms = sorted(timed(client, method, base + path, body, calls))
                    figures[f"{kind} via {via}"] = {
                        "p50_ms": round(statistics.median(ms), 3),
                        "p99_ms": round(ms[int(len(ms) * 0.99) - 1], 3),
                    }
        for name, f in figures.items():
            print(f"{name:<16} p50 {f['p50_ms']:7.2f} ms   p99 {f['p99_ms']:7.2f} ms")
        for kind in ("describe", "cell"):
            extra = figures[f"{kind} via hop"]["p50_ms"] - figures[f"{kind} via owner"]["p50_ms"]
            print(f"the hop adds {extra:.2f} ms at p50 to a {kind}")
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "hop.json").write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "calls": calls, "figures": figures,
        }, indent=2) + "\n")  # fmt: skip
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
