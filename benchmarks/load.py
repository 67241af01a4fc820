"""Load test for the HTTP service: bounded concurrent runs, a share of them hostile.

    python benchmarks/load.py                       # starts its own server on 127.0.0.1
    python benchmarks/load.py --requests 400 --concurrency 8 --hostile 0.25
    python benchmarks/load.py --url http://127.0.0.1:8000 --key KEY   # an already running server

Reports throughput, p50/p99 latency (benign and hostile separately), result statuses, HTTP error
counts and whether every benign program printed what it should; writes the figures to
``benchmarks/results/load.json``. Hostile programs spin, hog memory, flood output, recurse, sleep
and poke at host files; they must end with their limit named while benign runs keep being served.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import secrets
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _support import RESULTS, serve_here

# (name, code, expected stdout) -- the benign mix a course would send
BENIGN: list[tuple[str, str, str]] = [
    ("hello", "print('hello')", "hello\n"),
    ("loop", "print(sum(i * i for i in range(20000)))", f"{sum(i * i for i in range(20000))}\n"),
    ("strings", "print(' '.join(w.title() for w in 'the quick brown fox'.split()))",
     "The Quick Brown Fox\n"),
    ("dict", "d = {i: str(i) for i in range(1000)}\nprint(len(d), d[999])", "1000 999\n"),
    ("input", "n = int(input())\nprint(n * 2)", "42\n"),
    ("exception", "try:\n    1/0\nexcept ZeroDivisionError:\n    print('caught')", "caught\n"),
]  # fmt: skip
BENIGN_STDIN = {"input": "21\n"}

# (name, code, statuses that show the sandbox held); under heavy load a spinning program may hit
# its wall limit before its CPU limit, which is still the run stopped with its limit named
HOSTILE: list[tuple[str, str, set[str]]] = [
    ("spin", "while True: pass", {"cpu_limit", "timeout"}),
    ("memory", "x = []\nwhile True:\n    x.append(bytearray(1 << 20))", {"memory_limit"}),
    ("flood", "while True:\n    print('x' * 10000)", {"output_limit", "timeout"}),
    ("sleep", "import time\ntime.sleep(60)", {"timeout"}),
    ("recursion", "import sys\nsys.setrecursionlimit(10**6)\ndef f(n): return f(n + 1)\nf(0)",
     {"error", "memory_limit"}),
    ("host-files", "import os\nprint(open('/etc/passwd').read())", {"error"}),
    ("fork", "import os\nos.fork()", {"error"}),
]  # fmt: skip

HOSTILE_LIMITS = {"cpu_seconds": 1.0, "wall_seconds": 2.0, "stdout_bytes": 1 << 16}


@dataclass
class Sample:
    kind: str  # benign | hostile
    name: str
    http_status: int | None
    status: str | None
    correct: bool
    seconds: float
    error: str | None = None


@dataclass
class Report:
    samples: list[Sample] = field(default_factory=list)
    elapsed: float = 0.0

    def latency(self, kind: str) -> dict[str, float | None]:
        times = sorted(s.seconds for s in self.samples if s.kind == kind and s.http_status == 200)
        if not times:
            return {"p50_ms": None, "p99_ms": None, "max_ms": None}
        q = statistics.quantiles(times, n=100, method="inclusive") if len(times) > 1 else times * 99
        return {
            "p50_ms": round(q[49] * 1000, 1),
            "p99_ms": round(q[98] * 1000, 1),
            "max_ms": round(times[-1] * 1000, 1),
        }

    def summary(self) -> dict[str, Any]:
        done = [s for s in self.samples if s.http_status == 200]
        benign = [s for s in self.samples if s.kind == "benign"]
        hostile = [s for s in self.samples if s.kind == "hostile"]
        return {
            "requests": len(self.samples),
            "completed": len(done),
            "elapsed_s": round(self.elapsed, 2),
            "throughput_rps": round(len(done) / self.elapsed, 2) if self.elapsed else None,
            "benign": {
                "count": len(benign),
                "correct": sum(s.correct for s in benign),
                **self.latency("benign"),
            },
            "hostile": {
                "count": len(hostile),
                "limit_named": sum(s.correct for s in hostile),
                **self.latency("hostile"),
            },
            "result_statuses": dict(Counter(s.status for s in done)),
            "http_statuses": dict(Counter(str(s.http_status) for s in self.samples)),
            "transport_errors": sum(1 for s in self.samples if s.http_status is None),
            "server_errors_5xx": sum(1 for s in self.samples if (s.http_status or 0) >= 500),
            "wrong": sorted(
                {f"{s.kind}:{s.name}:{s.status}" for s in self.samples if not s.correct}
            ),
        }


async def one_request(client: httpx.AsyncClient, kind: str, rng: random.Random) -> Sample:
    expected = ""
    statuses: set[str] = set()
    if kind == "benign":
        name, code, expected = rng.choice(BENIGN)
        body: dict[str, Any] = {"code": code}
        if name in BENIGN_STDIN:
            body["stdin"] = BENIGN_STDIN[name]
    else:
        name, code, statuses = rng.choice(HOSTILE)
        body = {"code": code, "limits": HOSTILE_LIMITS}
    t0 = time.perf_counter()
    try:
        r = await client.post("/api/run", json=body)
    except httpx.HTTPError as exc:
        return Sample(kind, name, None, None, False, time.perf_counter() - t0, repr(exc))
    seconds = time.perf_counter() - t0
    if r.status_code != 200:
        return Sample(kind, name, r.status_code, None, False, seconds, r.text[:200])
    result = r.json()
    if kind == "benign":
        correct = result["status"] == "ok" and result["stdout"] == expected
    else:
        correct = result["status"] in statuses and "root:" not in result["stdout"]
    return Sample(kind, name, 200, result["status"], correct, seconds)


async def drive(url: str, key: str | None, requests: int, concurrency: int, hostile: float,
                seed: int) -> Report:  # fmt: skip
    rng = random.Random(seed)
    kinds = ["hostile" if rng.random() < hostile else "benign" for _ in range(requests)]
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    report = Report()
    semaphore = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(
        base_url=url, headers=headers, timeout=300, limits=limits
    ) as client:
        # one warm-up request so the first measured run does not pay for loading the module
        await client.post("/api/run", json={"code": "pass"})

        async def worker(kind: str) -> None:
            async with semaphore:
                report.samples.append(await one_request(client, kind, rng))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(k) for k in kinds))
        report.elapsed = time.perf_counter() - t0
    return report


@contextmanager
def local_server(max_running: int, max_queue: int) -> Iterator[tuple[str, str]]:
    """This repository's app in this process on a free loopback port, with a fresh API key:
    (base URL, key)."""
    from wasm_runner.settings import AdmissionSettings, ApiKey, ServerConfig, hash_key

    key = secrets.token_urlsafe(16)
    config = ServerConfig(
        api_keys=(ApiKey("load", hash_key(key), rate="1000000/minute", max_concurrent=1000),),
        admission=AdmissionSettings(max_running=max_running, max_queue=max_queue, queue_timeout_seconds=300),
    )
    with serve_here(config) as url:
        yield url, key


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--url", help="an already running server (default: start one here)")
    p.add_argument("--key", help="API key for --url")
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight at once")
    p.add_argument("--hostile", type=float, default=0.2, help="share of hostile programs (0-1)")
    p.add_argument("--max-running", type=int, default=2, help="guests at once (local server)")
    p.add_argument("--max-queue", type=int, default=64, help="queue length (local server)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=RESULTS / "load.json")
    args = p.parse_args(argv)

    if args.url is None:
        with local_server(args.max_running, args.max_queue) as (url, key):
            report = asyncio.run(drive(url, key, args.requests, args.concurrency, args.hostile, args.seed))
    else:
        report = asyncio.run(drive(args.url, args.key, args.requests, args.concurrency, args.hostile, args.seed))
    summary: dict[str, Any] = {
        "command": "python benchmarks/load.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "settings": {
            "requests": args.requests,
            "concurrency": args.concurrency,
            "hostile_share": args.hostile,
            "max_running": args.max_running if args.url is None else None,
            "hostile_limits": HOSTILE_LIMITS,
        },
        "machine": {
            "python": platform.python_version(),
            "cpus": _cpus(),
            "system": platform.system(),
        },
        "results": report.summary(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["results"], indent=2))
    print(f"written to {args.out}")
    bad = summary["results"]["server_errors_5xx"] + summary["results"]["transport_errors"]
    return 1 if bad else 0


def _cpus() -> int | None:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


if __name__ == "__main__":
    raise SystemExit(main())
