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
import secrets
import signal
import statistics
import subprocess
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
from _support import RESULTS, free_port, machine, pct, serve, server_toml

KEY = secrets.token_hex(16)
CONFIG = server_toml(KEY, profile={"cpu_seconds": 5, "wall_seconds": 15, "memory_mb": 64})


def timed(client: httpx.Client, method: str, url: str, body: object, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        started = time.perf_counter()
        r = client.request(method, url, json=body)
        out.append((time.perf_counter() - started) * 1000)
        if r.status_code != 200:
            raise SystemExit(f"{method} {url}: {r.status_code} {r.text}")
    return out


def measure(a: str, b: str, calls: int) -> dict[str, dict[str, float]]:
    """p50/p99 of each kind of call sent to the owner ``a`` and through ``b``."""
    figures: dict[str, dict[str, float]] = {}
    with httpx.Client(headers={"Authorization": f"Bearer {KEY}"}, timeout=60, trust_env=False) as client:
        sid = client.post(f"{a}/api/sessions", json={}).json()["id"]
        client.post(f"{a}/api/sessions/{sid}/run", json={"code": "x = 0"})
        for kind, method, path, body in (
            ("describe", "GET", f"/api/sessions/{sid}", None),
            ("cell", "POST", f"/api/sessions/{sid}/run", {"code": "x += 1"}),
        ):
            for via, base in (("owner", a), ("hop", b)):
                timed(client, method, base + path, body, 10)  # warm connections
                ms = timed(client, method, base + path, body, calls)
                figures[f"{kind} via {via}"] = {
                    "p50_ms": round(statistics.median(ms), 3),
                    "p99_ms": round(pct(ms, 0.99), 3),
                }
    return figures


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
    try:
        with ExitStack() as replicas:
            # two replicas sharing the Redis (--advertise-url defaults to each one's loopback URL)
            secret = secrets.token_hex(32)
            a, b = (replicas.enter_context(serve(
                folder / "bench.toml", args=["--redis-url", f"redis://127.0.0.1:{rport}/0"],
                env={"WASM_RUNNER_CLUSTER_SECRET": secret}, stop_seconds=30)).url for _ in range(2))  # fmt: skip
            figures = measure(a, b, calls)
    finally:
        redis.send_signal(signal.SIGTERM)
        try:
            redis.wait(30)
        except subprocess.TimeoutExpired:
            redis.kill()
    for name, f in figures.items():
        print(f"{name:<16} p50 {f['p50_ms']:7.2f} ms   p99 {f['p99_ms']:7.2f} ms")
    for kind in ("describe", "cell"):
        extra = figures[f"{kind} via hop"]["p50_ms"] - figures[f"{kind} via owner"]["p50_ms"]
        print(f"the hop adds {extra:.2f} ms at p50 to a {kind}")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hop.json").write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "machine": machine(), "calls": calls, "figures": figures,
    }, indent=2) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
