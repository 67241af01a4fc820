"""The MCP tools and the HTTP API side by side under one admission: N concurrent runs of a CPU loop
through ``run_python`` at ``/mcp``, then N through ``POST /api/run``, on one real server on
127.0.0.1 with ``max_running = 1`` and an audit log.

    python benchmarks/mcp_admission.py                   # 4 runs of 1.2 s each way
    python benchmarks/mcp_admission.py --runs 8 --seconds 1 --max-running 2

Prints (and writes to ``benchmarks/results/mcp_admission.json``) the wall time of each batch, the
audit-log records by kind, and the most guests the running gauge showed at once. Both batches
should take about ``runs x seconds / max_running``: the MCP tools go through the same admission.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from _support import serve_here
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from wasm_runner.settings import DEFAULT_PROFILES, AdmissionSettings, ApiKey, ServerConfig, hash_key

KEY = "bench-key-" + "0" * 16


def _loop(seconds: float) -> str:
    return f"import time\nt0 = time.time()\nwhile time.time() - t0 < {seconds}:\n    pass\nprint('done')\n"


def _running(text: str) -> float:
    match = re.search(r"^wasm_runner_running_guests (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


async def _mcp_batch(base: str, runs: int, code: str) -> float:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {KEY}"})
    async with Client(streamable_http_client(f"{base}/mcp", http_client=http), read_timeout_seconds=600) as c:
        await c.call_tool("run_python", {"code": "print('warm')"})
        t0 = time.monotonic()
        await asyncio.gather(*(c.call_tool("run_python", {"code": code}) for _ in range(runs)))
        return time.monotonic() - t0


async def _http_batch(base: str, runs: int, code: str) -> float:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {KEY}"}, timeout=600) as c:
        t0 = time.monotonic()
        replies = await asyncio.gather(*(c.post("/api/run", json={"code": code}) for _ in range(runs)))
        assert all(r.status_code == 200 for r in replies), [r.status_code for r in replies]
        return time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=1.2, help="length of each run's CPU loop")
    ap.add_argument("--max-running", type=int, default=1)
    ap.add_argument("--out", default="benchmarks/results/mcp_admission.json")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="mcp-admission-"))
    config = ServerConfig(
        api_keys=(ApiKey("bench", hash_key(KEY), rate="100000/minute", max_concurrent=64),),
        profiles={"student": DEFAULT_PROFILES["student"]},
        default_profile="student",
        admission=AdmissionSettings(max_running=args.max_running, max_queue=4 * args.runs),
        audit_log=tmp / "audit.jsonl",
    )
    peak = {"value": 0.0}
    stop = threading.Event()
    code = _loop(args.seconds)
    with serve_here(config) as base:

        def scrape() -> None:
            while not stop.is_set():
                peak["value"] = max(peak["value"], _running(httpx.get(f"{base}/metrics").text))
                time.sleep(0.02)

        scraper = threading.Thread(target=scrape, daemon=True)
        scraper.start()
        try:
            mcp_s = asyncio.run(_mcp_batch(base, args.runs, code))
            http_s = asyncio.run(_http_batch(base, args.runs, code))
        finally:
            stop.set()
            scraper.join()
    kinds = Counter(json.loads(line)["kind"] for line in (tmp / "audit.jsonl").read_text().splitlines())
    report: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.system()} {platform.release()}, Python {sys.version.split()[0]}",
        "runs": args.runs, "seconds_per_run": args.seconds, "max_running": args.max_running,
        "mcp_batch_s": round(mcp_s, 2), "http_batch_s": round(http_s, 2),
        "audit_by_kind": dict(kinds), "peak_running_gauge": peak["value"],
        "note": "audit counts include one warm-up mcp run",
    }  # fmt: skip
    print(json.dumps(report, indent=2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
