"""Scale-out, measured: the same load (``benchmarks/load.py``'s driver) against three setups in one run.

    python benchmarks/scale.py                          # 300 benign runs per setup, 4 in flight, 5 rounds
    python benchmarks/scale.py --requests 600 --rounds 6 --concurrency 8

1. one ``wasm-runner serve`` without Redis (everything in memory);
2. one ``serve`` with a Redis (``--redis-url``: rate limits, concurrency leases in Redis);
3. ``wasm-runner cluster --replicas 3``: three replicas behind HAProxy, one Redis.

Every setup is a real process tree on loopback ports, with the same config (one API key, a
``plain`` profile, ``max_running`` per replica). All three run at once and are driven in turn,
round after round, so a change in the machine's load falls on each alike. Reported side by side: throughput, p50/p99
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
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import redis
from _support import RESULTS, free_port, serve, server_toml
from load import drive

from wasm_runner.scaleout.launcher.children import Child, require_binary
from wasm_runner.scaleout.launcher.redis import redis_argv, redis_url, wait_for_redis


def config(key: str, max_running: int) -> str:
    return server_toml(
        key,
        server={"max_running": max_running, "max_queue": 256, "queue_timeout_seconds": 120,
                "memory_budget_mb": 1024, "tenant_memory_share": 1.0},
        profile={"memory_mb": 64}, analyst={"memory_mb": 256}, api_key={"max_concurrent": 1000},
    )  # fmt: skip


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
    args = ["--redis-url", redis_at] if redis_at else []
    env = {"WASM_RUNNER_CLUSTER_SECRET": secrets.token_hex(32)} if redis_at else None
    with serve(cfg, args=args, env=env) as served:
        yield served.url


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


def _redis_calls(url: str) -> tuple[int, float, dict[str, int]]:
    """(commands served, microseconds spent on them) by the Redis at ``url`` so far, but for
    INFO (ours) and PING (readiness checks, which a balancer sends whatever the load)."""
    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    counted = {k: v for k, v in stats.items() if k not in ("cmdstat_info", "cmdstat_ping")}
    calls = sum(int(v["calls"]) for v in counted.values())
    usec = sum(float(v["usec"]) for v in counted.values())
    return calls, usec, {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in counted.items()}


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


class Setup:
    """One setup under test: its name, URL, Redis (if any), and the samples of every round."""

    def __init__(self, name: str, url: str, redis_at: str | None) -> None:
        self.name, self.url, self.redis_at = name, url, redis_at
        self.times: list[float] = []
        self.elapsed = 0.0
        self.statuses: dict[str, int] = {}
        self.correct = self.sent = self.bad = 0
        self.round_p50: list[float] = []
        self.redis_calls = 0
        self.redis_usec = 0.0
        self.redis_by_command: dict[str, int] = {}

    def measure(self, key: str, requests: int, args: argparse.Namespace, seed: int) -> None:
        before = _redis_calls(self.redis_at) if self.redis_at else (0, 0.0, {})
        report = asyncio.run(drive(self.url, key, requests, args.concurrency, 0.0, seed))
        if self.redis_at:
            after = _redis_calls(self.redis_at)
            self.redis_calls += after[0] - before[0]
            self.redis_usec += after[1] - before[1]
            for name, n in after[2].items():
                self.redis_by_command[name] = self.redis_by_command.get(name, 0) + n - before[2].get(name, 0)
        summary = report.summary()
        times = [x.seconds for x in report.samples if x.http_status == 200]
        self.times += times
        self.round_p50.append(statistics.median(times) * 1000)
        self.elapsed += report.elapsed
        self.sent += requests + 1  # the driver's warm-up run counts for Redis too
        self.correct += summary["benign"]["correct"]
        self.bad += summary["server_errors_5xx"] + summary["transport_errors"]
        for code, n in summary["http_statuses"].items():
            self.statuses[code] = self.statuses.get(code, 0) + n

    def row(self) -> dict[str, Any]:
        q = statistics.quantiles(self.times, n=100, method="inclusive")
        row: dict[str, Any] = {
            "setup": self.name,
            "throughput_rps": round(len(self.times) / self.elapsed, 1),
            "p50_ms": round(q[49] * 1000, 1),
            "p99_ms": round(q[98] * 1000, 1),
            "round_p50_ms": [round(x, 1) for x in self.round_p50],
            "correct": self.correct,
            "http_statuses": self.statuses,
            "errors_5xx_or_transport": self.bad,
        }
        if self.redis_at:
            row["redis_commands_per_request"] = round(self.redis_calls / self.sent, 1)
            row["redis_server_us_per_request"] = round(self.redis_usec / self.sent, 1)
            row["redis_commands_per_request_by_name"] = {
                name: round(n / self.sent, 2) for name, n in sorted(self.redis_by_command.items()) if n
            }
            row["redis_ping_rtt_ms"] = _ping_rtt_ms(self.redis_at)
            # if every command waited for its own round trip: the time Redis adds to one request
            row["redis_estimated_ms_per_request"] = round(
                row["redis_commands_per_request"] * row["redis_ping_rtt_ms"]
                + row["redis_server_us_per_request"] / 1000, 2
            )
        return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--concurrency", type=int, default=4, help="requests in flight at once")
    p.add_argument("--max-running", type=int, default=2, help="guests at once, per replica")
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--rounds", type=int, default=5, help="rounds; each drives every setup in turn")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS / "scale.json")
    args = p.parse_args(argv)

    key = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="wasm-runner-scale-") as tmp, ExitStack() as stack:
        cfg = Path(tmp) / "bench.toml"
        cfg.write_text(config(key, args.max_running))
        # every setup up at once, then driven in turn, round after round: drift in the machine's
        # load (other jobs) falls on all three alike
        setups = [Setup("1 replica, no Redis", stack.enter_context(_serve(cfg, None)), None)]
        redis_at = stack.enter_context(_redis(Path(tmp)))
        setups.append(Setup("1 replica + Redis", stack.enter_context(_serve(cfg, redis_at)), redis_at))
        url, cluster_redis = stack.enter_context(_cluster(cfg, args.replicas))
        setups.append(Setup(f"{args.replicas} replicas + Redis behind HAProxy", url, cluster_redis))
        per_round = max(1, args.requests // args.rounds)
        for r in range(args.rounds):
            for setup in setups:
                setup.measure(key, per_round, args, args.seed + r)
                print(f"round {r + 1}/{args.rounds} {setup.name}: p50 {setup.round_p50[-1]:.1f} ms", flush=True)
        rows = [s.row() for s in setups]
    p50_cost = round(rows[1]["p50_ms"] - rows[0]["p50_ms"], 1)
    round_costs = [b - a for a, b in zip(setups[0].round_p50, setups[1].round_p50)]
    summary = {
        "command": "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "machine": {"python": platform.python_version(), "cpus": len(os.sched_getaffinity(0)),
                    "system": platform.system()},  # fmt: skip
        "settings": {"requests": args.requests, "rounds": args.rounds, "concurrency": args.concurrency,
                     "max_running_per_replica": args.max_running, "workload": "load.py's benign mix"},  # fmt: skip
        "rows": rows,
        "redis_cost_p50_ms": p50_cost,
        "redis_cost_p50_ms_median_of_rounds": round(statistics.median(round_costs), 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    width = max(len(r["setup"]) for r in rows)
    print(f"\n{'setup':<{width}}  runs/s   p50 ms   p99 ms")
    for r in rows:
        print(f"{r['setup']:<{width}}  {r['throughput_rps']:>6}  {r['p50_ms']:>7}  {r['p99_ms']:>7}")
    print(f"Redis cost at p50 (2 - 1): {p50_cost} ms pooled, "
          f"{summary['redis_cost_p50_ms_median_of_rounds']} ms median of rounds; "
          f"Redis time per request (estimate): {rows[1]['redis_estimated_ms_per_request']} ms; written to {args.out}")
    bad = sum(r["errors_5xx_or_transport"] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
