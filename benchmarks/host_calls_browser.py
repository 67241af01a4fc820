"""Host functions in the browser tier: the round trip of one call of a page function from Python
code, in Node and in Chromium (issue 24's goal: at most 1 ms).

- node: ``benchmarks/host_calls_node.mjs`` (real Pyodide in a Node worker thread, the real
  controller, the page side of ``web/src/hostcalls.js``).
- chromium: the real server (``server:app`` under uvicorn on 127.0.0.1) and Debian's Chromium
  (headless, Playwright); on the playground page, ``runner.run(code, {tier: "browser",
  functions: {tick}})``: worker -> sandbox frame -> page and back, with cross-origin isolation
  (Atomics) and without it (``/?isolation=off``: JSPI).

Each figure is the median (and min, max) over ``--runs`` runs of ``--calls`` calls each, timed
inside the program (``time.perf_counter`` around the loop, divided by the number of calls); the
first run of each kind warms up and is dropped. Not a test: it only measures and reports.

Usage: ``python benchmarks/host_calls_browser.py [--calls 10000] [--runs 5] [--out benchmarks/results/host_calls_browser.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, start_uvicorn, stop_process  # noqa: E402 - after the sys.path line above
from playwright.sync_api import sync_playwright  # noqa: E402

READY = "Boolean(window.playground && window.playground.runner.browserInfo)"

RUN = """async ([code, runs]) => {
  const runner = window.playground.runner;
  const out = [];
  for (let i = 0; i <= runs; i++) {
    const result = await runner.run(code, { tier: "browser", functions: { tick: (n) => n + 1 },
      limits: { wall_seconds: 600, host_seconds: 600 } });
    if (result.status !== "ok") return { error: result.status + ": " + result.stderr };
    if (i) out.push(Number(result.stdout));
  }
  return { per_call_us: out, info: runner.browserInfo };
}"""


def program(calls: int) -> str:
    return (
        "import time\nfrom host import tick\n"
        f"n = {calls}\nt0 = time.perf_counter()\n"
        "for i in range(n):\n    assert tick(i) == i + 1\n"
        "print((time.perf_counter() - t0) / n * 1e6)\n"
    )


def summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1), "n": len(values)}


def in_node(calls: int, runs: int) -> dict[str, Any]:
    done = subprocess.run(["node", str(REPO / "benchmarks" / "host_calls_node.mjs"), "--calls", str(calls),
                           "--runs", str(runs)], cwd=REPO / "web", capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def in_chromium(calls: int, runs: int) -> dict[str, Any]:
    process, base = start_uvicorn("server:app", {"WASM_RUNNER_AUTH": "off"})
    figures: dict[str, Any] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for mode, suffix in (("isolated (Atomics)", "/"), ("not isolated (JSPI)", "/?isolation=off")):
                page = browser.new_page()
                page.goto(base + suffix)
                deadline = time.monotonic() + 180
                while not page.evaluate(READY):
                    if time.monotonic() > deadline:
                        raise RuntimeError("Pyodide did not become ready")
                    time.sleep(0.1)
                out = page.evaluate(RUN, [program(calls), runs])
                if "error" in out:
                    raise RuntimeError(f"{mode}: {out['error']}")
                figures[mode] = {"round_trip_us": summary(out["per_call_us"]), "shared": out["info"].get("shared"),
                                 "jspi": out["info"].get("jspi")}
                page.close()
            figures["chromium"] = browser.version
            browser.close()
    finally:
        stop_process(process)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000, help="calls per run (default 10000)")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure (default 5)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "host_calls_browser.json")
    args = parser.parse_args()
    load_before = os.getloadavg()
    report = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "command": "python benchmarks/host_calls_browser.py " + " ".join(sys.argv[1:]),
        "node": in_node(args.calls, args.runs),
        "chromium": in_chromium(args.calls, args.runs),
    }
    report["load_average_before_after"] = [round(load_before[0], 1), round(os.getloadavg()[0], 1)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
