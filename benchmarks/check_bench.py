"""Checking an exercise on the server tier: wall time of one ``check_code`` of the 7-check
``tests/exercises/mean`` exercise (3 I/O cases, 4 test checks in two instances each), with the
process's default sandbox and a warm pool, checks in parallel (``--parallel``). Goal: <= 300 ms.

    .venv/bin/python benchmarks/check_bench.py [--repeat 10] [--parallel 4] [--pool 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from wasm_runner import Limits
from wasm_runner.exercises import check_code, load_exercise
from wasm_runner.sandbox import default_sandbox

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--pool", type=int, default=8, help="warm instances kept ready (0: none)")
    args = ap.parse_args()
    ex = load_exercise(ROOT / "tests" / "exercises" / "mean")
    sb = default_sandbox()
    if args.pool and "plain" not in sb.pools:
        sb.add_pool("plain", size=args.pool)
    limits = Limits(cpu_seconds=2, wall_seconds=10, memory_mb=256)
    assert check_code(ex, ex.solution, sandbox=sb, limits=limits)["passed"]  # warm-up
    times = []
    for _ in range(args.repeat):
        time.sleep(0.5)  # let the pool refill, as between two students' checks
        t0 = time.perf_counter()
        report = check_code(ex, ex.solution, sandbox=sb, limits=limits, parallel=args.parallel)
        times.append((time.perf_counter() - t0) * 1000)
        assert report["passed"], report
    load = os.getloadavg()[0]
    print(f"7-check exercise, parallel={args.parallel}, pool={args.pool}, {os.cpu_count()} CPUs, "
          f"load {load:.1f}: median {statistics.median(times):.0f} ms, min {min(times):.0f} ms, "
          f"max {max(times):.0f} ms over {len(times)}")


if __name__ == "__main__":
    main()
