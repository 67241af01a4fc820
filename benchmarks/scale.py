"""Scale-out, measured: the same load (``benchmarks/load.py``'s driver) against three setups in one run.

    python benchmarks/scale.py                          # 300 benign runs, 4 in flight, each setup
    python benchmarks/scale.py --requests 400 --concurrency 8

1. one ``wasm-runner serve`` without Redis (everything in memory);
2. one ``serve`` with a Redis (``--redis-url``: rate limits, concurrency leases in Redis);
3. ``wasm-runner cluster --replicas 3``: three replicas behind HAProxy, one Redis.

Every setup is a real process tree on loopback ports, with the same config (one API key, a
``plain`` profile, ``max_running`` per replica). Reported side by side: throughput, p50/p99
latency, and the cost of Redis per request two ways: the p50 difference of setups 1 and 2, and
Redis's own count of the commands it served (``INFO commandstats``) per request with a PING's
round trip from this machine. Writes ``benchmarks/results/scale.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import RESULTS, drive  # noqa: E402

from wasm_runner.cluster.children import Child, free_port, require_binary  # noqa: E402
from wasm_runner.cluster.redis import redis_argv, redis_url, wait_for_redis  # noqa: E402

CONFIG = """\
[server]
default_profile = "bench"
max_running = {max_running}
max_queue = 256
queue_timeout_seconds = 120
memory_budget_mb = 1024
tenant_memory_share = 1.0

[profiles.bench]
image = "plain"
memory_mb = 64

[profiles.analyst]
pool_size = 0
memory_mb = 256

[[api_keys]]
name = "bench"
key = "{key}"
rate = "1000000/minute"
max_concurrent = 1000
"""


def _ready(url: str, path: str, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + path, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url}{path} not ready")


@contextmanager
def _redis(workdir: Path) -> Iterator[str]:
    port = free_port()
    child = Child("redis", redis_argv(require_binary("redis-server"), port, workdir), echo=lambda line: None)
    child.start()
    try:
        url = redis_url(port)
        if not wait_for_redis(url, time.monotonic() + 10):
            raise RuntimeError("redis-server did not start")
        yield url
    finally:
        child.stop()


@contextmanager
def _serve(cfg: Path, redis_at: str | None) -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-m", "wasm_runner.cli", "serve", "--port", str(port), "--config", str(cfg),
            "--log-level", "warning"]  # fmt: skip
    env = dict(os.environ)
    if redis_at:
        argv += ["--redis-url", redis_at]
        env["WASM_RUNNER_CLUSTER_SECRET"] = secrets.token_hex(32)
    child = Child("serve", argv, env=env, echo=lambda line: None)
    child.start()
    try:
        url = f"http://127.0.0.1:{port}"
        _ready(url, "/readyz", time.monotonic() + 300)
        yield url
    finally:
        child.stop(signal.SIGTERM, 60)


@contextmanager
def _cluster(cfg: Path, replicas: int) -> Iterator[tuple[str, str]]:
    port = free_port()
    argv = [sys.executable, "-m", "wasm_runner.cli", "cluster", "--replicas", str(replicas),
            "--port", str(port), "--config", str(cfg)]  # fmt: skip
    lines: list[str] = []
    child = Child("cluster", argv, echo=lines.append)
    child.start()
    try:
        deadline = time.monotonic() + 300
        while not any("ready at" in line for line in lines):
            if not child.alive() or time.monotonic() > deadline:
                raise RuntimeError("cluster did not start: " + " | ".join(lines[-10:]))
            time.sleep(0.1)
        (redis_at,) = [m.group(1) for line in lines if (m := re.search(r"redis-server (\S+) \(pid", line))]
        yield f"http://127.0.0.1:{port}", redis_at
    finally:
        child.stop(signal.SIGTERM, 120)


def _redis_calls(url: str) -> tuple[int, float]:
    """(commands served, microseconds spent on them) by the Redis at ``url`` so far."""
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    calls = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
    usec = sum(float(v["usec"]) for k, v in stats.items() if k != "cmdstat_info")
    return calls, usec


def _ping_rtt_ms(url: str, n: int = 200) -> float:
    client = redis.Redis.from_url(url)
    try:
        client.ping()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            client.ping()
            times.append(time.perf_counter() - t0)
    finally:
        client.close()
    return round(statistics.median(times) * 1000, 3)


def _measure(name: str, url: str, key: str, args: argparse.Namespace, redis_at: str | None) -> dict[str, Any]:
    before = _redis_calls(redis_at) if redis_at else None
    report = asyncio.run(drive(url, key, args.requests, args.concurrency, 0.0, args.seed))
    summary = report.summary()
    row: dict[str, Any] = {
        "setup": name,
        "throughput_rps": summary["throughput_rps"],
        "p50_ms": summary["benign"]["p50_ms"],
        "p99_ms": summary["benign"]["p99_ms"],
        "correct": summary["benign"]["correct"],
        "requests": summary["requests"],
        "http_statuses": summary["http_statuses"],
        "server_errors_5xx": summary["server_errors_5xx"],
        "transport_errors": summary["transport_errors"],
    }
    if redis_at and before:
        calls, usec = _redis_calls(redis_at)
        served = args.requests + 1  # the driver's warm-up run counts too
        row["redis_commands_per_request"] = round((calls - before[0]) / served, 1)
        row["redis_server_us_per_request"] = round((usec - before[1]) / served, 1)
        row["redis_ping_rtt_ms"] = _ping_rtt_ms(redis_at)
        # if every command waited for its own round trip: the time Redis adds to one request
        row["redis_estimated_ms_per_request"] = round(
            row["redis_commands_per_request"] * row["redis_ping_rtt_ms"] + row["redis_server_us_per_request"] / 1000, 2
        )
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--concurrency", type=int, default=4, help="requests in flight at once")
    p.add_argument("--max-running", type=int, default=2, help="guests at once, per replica")
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    args = p.parse_args(argv)

    key = secrets.token_urlsafe(16)
    rows = []
    with tempfile.TemporaryDirectory(prefix="wasm-runner-scale-") as tmp:
        cfg = Path(tmp) / "bench.toml"
        cfg.write_text(CONFIG.format(key=key, max_running=args.max_running))
        with _serve(cfg, None) as url:
            rows.append(_measure("1 replica, no Redis", url, key, args, None))
        with _redis(Path(tmp)) as redis_at, _serve(cfg, redis_at) as url:
            rows.append(_measure("1 replica + Redis", url, key, args, redis_at))
        with _cluster(cfg, args.replicas) as (url, redis_at):
            rows.append(_measure(f"{args.replicas} replicas + Redis behind HAProxy", url, key, args, redis_at))
    p50_cost = None
    if rows[0]["p50_ms"] is not None and rows[1]["p50_ms"] is not None:
        p50_cost = round(rows[1]["p50_ms"] - rows[0]["p50_ms"], 1)
    summary = {
        "command": "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": {"python": platform.python_version(), "cpus": len(os.sched_getaffinity(0)),
                    "system": platform.system()},  # fmt: skip
        "settings": {"requests": args.requests, "concurrency": args.concurrency,
                     "max_running_per_replica": args.max_running, "workload": "load.py's benign mix"},  # fmt: skip
        "rows": rows,
        "redis_cost_p50_ms": p50_cost,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    width = max(len(r["setup"]) for r in rows)
    print(f"\n{'setup':<{width}}  runs/s   p50 ms   p99 ms")
    for r in rows:
        print(f"{r['setup']:<{width}}  {r['throughput_rps']:>6}  {r['p50_ms']:>7}  {r['p99_ms']:>7}")
    print(f"Redis cost at p50 (2 - 1): {p50_cost} ms; written to {args.out}")
    bad = sum(r["server_errors_5xx"] + r["transport_errors"] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
