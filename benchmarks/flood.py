"""The endless print loop, the most common beginner mistake, on the server tier (issue 10).

    python benchmarks/flood.py                    # starts its own server on 127.0.0.1
    python benchmarks/flood.py --repeat 10

    i = 0
    while True:
        print(i)
        i += 1

For each repetition it measures, with the default limits (1 MiB stdout cap): the time from the
request to the result through the Python API (``Sandbox.run``) and through ``POST
/api/run/stream``, the number of SSE ``stdout`` events, the output chunks the host received, and
the run's status (it must be ``output_limit``). Writes ``benchmarks/results/flood.json``.
Nothing here is a test; figures depend on the machine and on its load (reported alongside).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from _support import RESULTS
from load import local_server

FLOOD = "i = 0\nwhile True:\n    print(i)\n    i += 1\n"


def api_run(sandbox: Any) -> dict[str, Any]:
    chunks = [0]
    t0 = time.perf_counter()
    r = sandbox.run(FLOOD, on_output=lambda s, b: chunks.__setitem__(0, chunks[0] + 1))
    return {"seconds": time.perf_counter() - t0, "status": r.status.value,
            "stdout_bytes": len(r.stdout.encode()), "host_chunks": chunks[0]}


def sse_run(url: str, key: str) -> dict[str, Any]:
    events = 0
    status = None
    t0 = time.perf_counter()
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as c:
        with c.stream("POST", "/api/run/stream", json={"code": FLOOD}) as r:
            event = ""
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                    events += event == "stdout"
                elif line.startswith("data: ") and event == "result":
                    status = json.loads(line[6:])["status"]
    return {"seconds": time.perf_counter() - t0, "status": status, "stdout_events": events}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", type=Path, default=RESULTS / "flood.json")
    args = p.parse_args(argv)

    from wasm_runner.sandbox import default_sandbox

    sandbox = default_sandbox("default")
    sandbox.run("print('warm')")
    with local_server(max_running=2, max_queue=8) as (url, key):
        load_before = os.getloadavg()
        api = [api_run(sandbox) for _ in range(args.repeat)]
        sse = [sse_run(url, key) for _ in range(args.repeat)]
        load_after = os.getloadavg()

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return round(statistics.median(r[key] for r in rows), 3)

    summary = {
        "command": "python benchmarks/flood.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "system": platform.system(), "loadavg_before": load_before,
                    "loadavg_after": load_after},
        "python_api": {"median_seconds_to_cap": med(api, "seconds"), "max_seconds":
                       round(max(r["seconds"] for r in api), 3),
                       "median_host_chunks": med(api, "host_chunks"),
                       "statuses": sorted({r["status"] for r in api})},
        "sse": {"median_seconds_to_result": med(sse, "seconds"),
                "max_seconds": round(max(r["seconds"] for r in sse), 3),
                "median_stdout_events": med(sse, "stdout_events"),
                "max_stdout_events": max(r["stdout_events"] for r in sse),
                "statuses": sorted({str(r["status"]) for r in sse})},
        "runs": {"python_api": api, "sse": sse},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: summary[k] for k in ("machine", "python_api", "sse")}, indent=2))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
