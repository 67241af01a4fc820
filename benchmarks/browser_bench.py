"""Browser tier benchmark: page load → first result (cold, warm) and Stop latency.

Runs the real server (``server:app`` under uvicorn on 127.0.0.1) and Debian's Chromium
(headless, via Playwright). Not a test: it only measures and reports.

- cold: a fresh browser profile (empty HTTP cache, no compiled-wasm cache); navigation start →
  the result of ``print('hi')`` back in the page.
- warm: the same profile, a new tab (HTTP cache and Chromium's wasm code cache filled).
- auto (cold): the same, with tier "auto": the first run goes to the server while Pyodide loads.
- stop: Stop pressed → result back in the page, for a busy loop and a sleep loop (interrupt), a
  loop inside C code (terminate + respawn) and a busy loop without cross-origin isolation.

Usage: ``python benchmarks/browser_bench.py [--rounds 3] [--stops 20] [--out benchmarks/results/browser.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from browser_harness import CHROMIUM, CHROMIUM_ARGS, start_uvicorn, stop_process  # noqa: E402 - after the sys.path line above
from playwright.sync_api import sync_playwright  # noqa: E402

FIRST_RESULT = """async (tier) => {
  while (!window.playground) await new Promise((r) => setTimeout(r, 5));
  const result = await window.playground.runner.run("print('hi')", { tier });
  return { at: performance.now(), status: result.status, stdout: result.stdout, tier: result.tier };
}"""

STOP = """async ([code, settleMs]) => {
  const runner = window.playground.runner;
  let started;
  const go = new Promise((resolve) => { started = resolve; });
  const pending = runner.run(code, { tier: "browser", onOutput: (o) => { if (o.text.includes("go")) started(); } });
  await go;
  await new Promise((r) => setTimeout(r, settleMs)); // let the program reach its loop
  const t0 = performance.now();
  runner.stop();
  const result = await pending;
  return { ms: performance.now() - t0, status: result.status };
}"""

STOP_PROGRAMS = {
    "busy loop (interrupt)": "print('go', flush=True)\nwhile True:\n    pass",
    "time.sleep loop (interrupt)": "import time\nprint('go', flush=True)\nwhile True:\n    time.sleep(0.5)",
    "C-level loop (terminate + respawn)": "import collections, itertools\nprint('go', flush=True)\ncollections.deque(itertools.count(), maxlen=0)",
}


def first_result(context, url: str, tier: str) -> float:
    page = context.new_page()
    page.goto(url, wait_until="commit")
    out = page.evaluate(FIRST_RESULT, tier)
    page.close()
    if out["status"] != "ok" or out["stdout"] != "hi\n":
        raise RuntimeError(f"first run failed: {out}")
    return out["at"]


def wait_ready(page) -> None:
    deadline = time.monotonic() + 120
    while not page.evaluate(
        "window.playground && window.playground.runner.browserInfo"
    ):
        if time.monotonic() > deadline:
            raise RuntimeError("Pyodide did not become ready")
        time.sleep(0.05)


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "n": len(values),
        "median_ms": round(statistics.median(values), 1),
        "p95_ms": round(p95, 1),
        "min_ms": round(ordered[0], 1),
        "max_ms": round(ordered[-1], 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=3, help="fresh profiles for cold/warm (default 3)"
    )
    parser.add_argument(
        "--stops", type=int, default=20, help="stops per kind (default 20)"
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "benchmarks" / "results" / "browser.json"
    )
    args = parser.parse_args()

    process, base = start_uvicorn("server:app", {"WASM_RUNNER_AUTH": "off"})
    figures: dict[str, object] = {}
    try:
        # compress and cache every asset on the server first: cold means a cold *browser*
        html = urllib.request.urlopen(base + "/").read().decode()
        del html
        with sync_playwright() as p:
            cold, warm, auto_cold = [], [], []
            for _ in range(args.rounds + 1):
                with tempfile.TemporaryDirectory() as profile:
                    context = p.chromium.launch_persistent_context(
                        profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS
                    )
                    c = first_result(context, base + "/", "browser")
                    w = first_result(context, base + "/", "browser")
                    context.close()
                    cold.append(c)
                    warm.append(w)
                with tempfile.TemporaryDirectory() as profile:
                    context = p.chromium.launch_persistent_context(
                        profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS
                    )
                    auto_cold.append(first_result(context, base + "/", "auto"))
                    context.close()
            # the first round also warms the server's compression caches: drop it
            figures["page_load_to_first_result"] = {
                "browser_cold": summary(cold[1:]),
                "browser_warm": summary(warm[1:]),
                "auto_cold_first_run_on_server": summary(auto_cold[1:]),
            }
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            stops: dict[str, object] = {}
            for isolation, suffix in (
                ("isolated", "/"),
                ("not isolated", "/?isolation=off"),
            ):
                page = browser.new_page()
                page.goto(base + suffix)
                wait_ready(page)
                programs = (
                    STOP_PROGRAMS
                    if isolation == "isolated"
                    else {
                        "busy loop (terminate + respawn)": STOP_PROGRAMS[
                            "busy loop (interrupt)"
                        ]
                    }
                )
                for name, code in programs.items():
                    count = (
                        args.stops if "respawn" not in name else max(3, args.stops // 4)
                    )
                    samples = [page.evaluate(STOP, [code, 200]) for _ in range(count)]
                    assert all(s["status"] == "cancelled" for s in samples), samples
                    stops[f"{name}, {isolation}"] = summary([s["ms"] for s in samples])
                page.close()
            browser.close()
            figures["stop_latency"] = stops
            figures["chromium"] = "system chromium (Debian), headless"
    finally:
        stop_process(process)
    figures["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    figures["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
