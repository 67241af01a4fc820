"""What explaining an error adds to a failing run: the guest's ``explain()`` (guest/explain.py)
timed inside each tier's own interpreter, for every error program of the explanation corpus
(tests/explanations/programs.json): the server's CPython on WASI (a Sandbox run) and Pyodide
under Node (the browser tier's controller). The host's checking and rendering are timed too.
Prints p50/p95/max per tier in ms and writes benchmarks/results/explain.json; the target is
p95 <= 50 ms (docs/explanations.md).

    .venv/bin/python benchmarks/explain_bench.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _support import RESULTS, ROOT, load_average, machine, percentiles

from wasm_runner import Limits, Sandbox
from wasm_runner.explanations import checked, render

QS = (0.5, 0.95, 1.0)  # p50, p95, max
PROGRAMS = [p for p in json.loads((ROOT / "tests" / "explanations" / "programs.json").read_text(encoding="utf-8"))
            if not p["id"].startswith("limit_")]

# Runs in the guest, beside the guest package: each program's exception, then explain() timed.
TIMER = r'''
import io, json, sys, time
from _wasm_runner_guest import explain
programs, repeat = json.loads(PAYLOAD)
times = {}
for p in programs:
    sys.stdin = io.StringIO(p.get("stdin") or "")
    ns = {"__name__": "__main__"}
    saved = sys.stdout
    sys.stdout = io.StringIO()
    try:
        exec(compile(p["code"], "main.py", "exec"), ns)
        exc = None
    except BaseException as e:
        exc = e
    finally:
        sys.stdout = saved
    spent = []
    for _ in range(repeat):
        t = time.perf_counter()
        explain.explain(exc, "main.py", p["code"])
        spent.append((time.perf_counter() - t) * 1000)
    times[p["name"]] = spent
print(json.dumps(times))
'''

NODE = r'''
import { createNodeController } from "./web/src/node.js";
const code = process.argv[2];
const controller = createNodeController();
await controller.prefetch();
const r = await controller.run({ id: 1, code, limits: { wall_seconds: 300 } });
controller.dispose();
if (r.status !== "ok") { console.error(r.stderr); process.exit(1); }
process.stdout.write(r.stdout);
'''


def program(repeat: int) -> str:
    return f"PAYLOAD = {json.dumps(json.dumps([PROGRAMS, repeat]))}\n" + TIMER


def server(repeat: int) -> dict[str, list[float]]:
    r = Sandbox("default").run(program(repeat), limits=Limits(cpu_seconds=120, wall_seconds=300))
    assert r.status.value == "ok", r.stderr
    times: dict[str, list[float]] = json.loads(r.stdout)
    return times


def browser(repeat: int) -> dict[str, list[float]]:
    with tempfile.NamedTemporaryFile("w", suffix=".mjs", dir=ROOT, delete=False) as f:
        f.write(NODE)
    try:
        done = subprocess.run(["node", f.name, program(repeat)], cwd=ROOT, capture_output=True, text=True,
                              check=True, timeout=600)
    finally:
        Path(f.name).unlink()
    times: dict[str, list[float]] = json.loads(done.stdout)
    return times


def host(repeat: int) -> list[float]:
    raw = {"id": "key_missing_few", "params": {"key": "'bob'", "name": "ages", "keys": "'ann', 'bo'", "count": 2},
           "span": {"line": 2, "col": 6, "end_col": 17}}
    spent = []
    for _ in range(repeat * len(PROGRAMS)):
        t = time.perf_counter()
        render(checked(raw), "de")  # type: ignore[arg-type]
        spent.append((time.perf_counter() - t) * 1000)
    return spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="explain() calls per program (the first is cold)")
    args = parser.parse_args()
    report = {"machine": machine(), "programs": len(PROGRAMS), "repeat": args.repeat, "tiers": {}}
    for name, measure in (("server", server), ("browser", browser)):
        times = measure(args.repeat)
        cold = [t[0] for t in times.values()]
        every = [x for t in times.values() for x in t]
        slowest = max(times, key=lambda k: times[k][0])
        report["tiers"][name] = {"cold_ms": percentiles(cold, QS), "all_ms": percentiles(every, QS),
                                 "slowest": [slowest, round(times[slowest][0], 2)]}
    report["tiers"]["host_render"] = {"all_ms": percentiles(host(args.repeat), QS)}
    report["load_average"] = load_average()
    report["date"] = time.strftime("%Y-%m-%d")
    (RESULTS / "explain.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
