"""Browser tier benchmark: page load → first result, with and without the Pyodide snapshot.

Runs the real server (``server:app`` under uvicorn on 127.0.0.1) and Debian's Chromium
(headless, via Playwright). Not a test: it only measures and reports. Every figure is a median
(with p95, min, max) over ``--loads`` page loads, all in the same run, snapshot on and off
interleaved so both see the same machine load.

- cold: a fresh browser profile (empty HTTP cache); navigation start → the result of
  ``print(6*7)`` in the browser tier (tier ``browser``, not ``auto``) back in the page.
- warm: the same profile, a new tab (the page's HTTP cache holds Pyodide and the snapshot).
- after_stop: on a loaded page, a program looping inside C code is stopped (only ending the
  worker stops it); then Run → result of ``print(6*7)``. The spare worker makes this fast; it
  is loaded after each run, so the loop waits ``--pace`` seconds first, as a person would.
- breakdown: for the snapshot runs, the median time after navigation start at which each step
  was reached (frame script, worker, Pyodide's scripts, the relayed files, snapshot unpacked,
  wasm instantiated, Python ready, result).
- stop latency: Stop pressed → result back, per kind of loop (``--stops`` each).

Usage: ``python benchmarks/browser_bench.py [--loads 5] [--stops 10] [--out benchmarks/results/browser.json]``
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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, start_uvicorn, stop_process  # noqa: E402 - after the sys.path line above
from playwright.sync_api import sync_playwright  # noqa: E402

from wasm_runner.browser.locations import web_dir  # noqa: E402
from wasm_runner.browser.pyodide_snapshot import SnapshotStore  # noqa: E402

FIRST_RESULT = """async () => {
  while (!window.playground) await new Promise((r) => setTimeout(r, 2));
  const runner = window.playground.runner;
  const result = await runner.run("print(6*7)", { tier: "browser" });
  const at = performance.now();
  const info = runner.browserInfo || {};
  const marks = {};
  for (const [name, t] of Object.entries(info.marks || {})) marks[name] = t - performance.timeOrigin;
  marks.result = at;
  return { at, status: result.status, stdout: result.stdout, snapshot: info.snapshot, marks };
}"""

READY = "Boolean(window.playground && window.playground.runner.browserInfo)"

AFTER_STOP = """async (paceMs) => {
  const runner = window.playground.runner;
  await new Promise((r) => setTimeout(r, paceMs)); // the spare loads meanwhile, as while a person types
  let started;
  const go = new Promise((resolve) => { started = resolve; });
  const loop = "import collections, itertools\\nprint('go', flush=True)\\ncollections.deque(itertools.count(), maxlen=0)";
  const pending = runner.run(loop, { tier: "browser", onOutput: (o) => { if (o.text.includes("go")) started(); } });
  await go;
  await new Promise((r) => setTimeout(r, 100));
  runner.stop();
  const stopped = await pending;
  const t0 = performance.now();
  const next = await runner.run("print(6*7)", { tier: "browser" });
  return { ms: performance.now() - t0, stopped: stopped.status, status: next.status, stdout: next.stdout, spare: Boolean(runner.browserInfo.spare) };
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
    "C-level loop (terminate, spare takes over)": "import collections, itertools\nprint('go', flush=True)\ncollections.deque(itertools.count(), maxlen=0)",
}

MODES = {"snapshot": "/?tier=browser", "no snapshot": "/?tier=browser&snapshot=off"}


def first_result(context: Any, url: str, want_snapshot: str) -> dict[str, Any]:
    page = context.new_page()
    page.goto(url, wait_until="commit")
    out: dict[str, Any] = page.evaluate(FIRST_RESULT)
    page.close()
    if out["status"] != "ok" or out["stdout"] != "42\n" or out["snapshot"] != want_snapshot:
        raise RuntimeError(f"first run failed: {out}")
    return out


def wait_ready(page: Any) -> None:
    deadline = time.monotonic() + 120
    while not page.evaluate(READY):
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
    parser.add_argument("--loads", type=int, default=5, help="page loads per figure (default 5)")
    parser.add_argument("--stops", type=int, default=10, help="stops per kind of loop (default 10)")
    parser.add_argument("--pace", type=float, default=4.0, help="seconds between a run and the next Stop (default 4)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "browser.json")
    args = parser.parse_args()

    SnapshotStore(web_dir()).ensure()  # as `wasm-runner warm` leaves it
    process, base = start_uvicorn("server:app", {"WASM_RUNNER_AUTH": "off"})
    load_before = os.getloadavg()
    figures: dict[str, Any] = {}
    try:
        urllib.request.urlopen(base + "/").read()  # the server compresses its assets first
        time.sleep(5)
        with sync_playwright() as p:
            cold: dict[str, list[float]] = {m: [] for m in MODES}
            warm: dict[str, list[float]] = {m: [] for m in MODES}
            marks: list[dict[str, float]] = []
            for round_ in range(args.loads + 1):  # round 0 warms the server up: dropped
                for mode, suffix in MODES.items():
                    want = "used" if mode == "snapshot" else "none"
                    with tempfile.TemporaryDirectory() as profile:
                        context = p.chromium.launch_persistent_context(
                            profile, executable_path=CHROMIUM, args=CHROMIUM_ARGS
                        )
                        c = first_result(context, base + suffix, want)
                        w = first_result(context, base + suffix, want)
                        context.close()
                    if round_:
                        cold[mode].append(c["at"])
                        warm[mode].append(w["at"])
                        if mode == "snapshot":
                            marks.append(w["marks"])
            after: dict[str, list[float]] = {m: [] for m in MODES}
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for mode, suffix in MODES.items():
                page = browser.new_page()
                page.goto(base + suffix)
                wait_ready(page)
                for _ in range(args.loads):
                    out = page.evaluate(AFTER_STOP, args.pace * 1000)
                    if out["stopped"] != "cancelled" or out["stdout"] != "42\n":
                        raise RuntimeError(f"after stop: {out}")
                    after[mode].append(out["ms"])
                page.close()
            figures["page_load_to_first_result"] = {
                mode: {
                    "cold": summary(cold[mode]),
                    "warm": summary(warm[mode]),
                    "after_terminating_stop": summary(after[mode]),
                }
                for mode in MODES
            }
            names = sorted({k for m in marks for k in m}, key=lambda k: statistics.median(m[k] for m in marks if k in m))
            figures["breakdown_warm_snapshot_ms_after_navigation"] = {
                k: round(statistics.median(m[k] for m in marks if k in m)) for k in names
            }
            stops: dict[str, Any] = {}
            page = browser.new_page()
            page.goto(base + "/")
            wait_ready(page)
            for name, code in STOP_PROGRAMS.items():
                count = args.stops if "terminate" not in name else max(3, args.stops // 3)
                samples = [page.evaluate(STOP, [code, 200]) for _ in range(count)]
                if not all(s["status"] == "cancelled" for s in samples):
                    raise RuntimeError(f"a stop did not stop: {samples}")
                stops[name] = summary([s["ms"] for s in samples])
            page.close()
            browser.close()
            figures["stop_latency_isolated"] = stops
            figures["chromium"] = "system chromium (Debian), headless"
    finally:
        stop_process(process)
    load_after = os.getloadavg()
    figures["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, load average {load_before[0]:.1f} before, "
        f"{load_after[0]:.1f} after"
    )
    figures["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    figures["command"] = "python benchmarks/browser_bench.py " + " ".join(sys.argv[1:])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
