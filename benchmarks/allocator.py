"""wasmtime's instance allocators side by side: speed of fresh runs and the memory they leave.

Each setting runs in a process of its own (an engine's allocator is fixed when it is made):
``ondemand`` (every instance maps its own memory, unmapped at its end) and ``pooling`` with a
given keep-resident size (released slots keep that much of their linear memory resident, reset
for the next instance). For each, in that process:

- fresh ``print('hi')``: p50 / p90 of sequential runs, then runs/s on as many threads as cores;
- a fresh run of ``--image`` (default ``plain``; ``datascience`` for the data-science image);
- RSS: after start-up, after the runs (idle), with 8 sessions of 40 MB open, and idle after they
  are closed (the figure issue 20 is about: closing sessions must not raise it).

``--hogs N`` runs N busy-looping processes meanwhile (a loaded machine). Nothing here is a test.

    python benchmarks/allocator.py [--keep 0 16 128] [--hogs 2] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from _support import percentiles

HELLO = "print('hi')"
SESSIONS, SESSION_MB = 8, 40


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child(setting: str, image: str, n: int, seconds: float) -> dict[str, Any]:
    """One setting, in this process: ``ondemand`` or ``pooling:<keep MiB>``."""
    from wasm_runner import engine
    from wasm_runner.bench import _throughput
    from wasm_runner.limits import Limits
    from wasm_runner.sandbox import Sandbox

    if setting.startswith("pooling:"):
        engine.POOL_KEEP_RESIDENT = int(setting.split(":")[1]) << 20
    sb = Sandbox("default", image=image)
    for _ in range(3):
        assert sb.run(HELLO).ok
    out: dict[str, Any] = {"setting": setting, "image": image, "rss_start_mib": rss_mib()}
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = sb.run(HELLO)
        times.append((time.perf_counter() - t) * 1000)
        assert r.ok, r.stderr
    out["fresh_hello_ms"] = percentiles(times)
    out["runs_per_s"] = _throughput(sb, seconds, os.cpu_count() or 1)
    time.sleep(1.0)
    out["rss_idle_after_runs_mib"] = rss_mib()
    limits = Limits(memory_mb=SESSION_MB + 64)
    sessions = [sb.session(limits=limits) for _ in range(SESSIONS)]
    for s in sessions:
        r = s.run(f"x = bytearray({SESSION_MB} << 20)\nfor i in range(0, len(x), 4096): x[i] = 1")
        assert r.ok, r.stderr
    out["rss_sessions_open_mib"] = rss_mib()
    for s in sessions:
        s.close()
    time.sleep(1.0)
    out["rss_idle_after_sessions_mib"] = rss_mib()
    for _ in range(20):  # fresh runs after the sessions: do released slots keep their pages?
        sb.run(HELLO)
    time.sleep(1.0)
    out["rss_idle_end_mib"] = rss_mib()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--keep", type=int, nargs="*", default=[0, 16, 128], help="pooling keep-resident sizes (MiB)")
    p.add_argument("--image", default="plain")
    p.add_argument("-n", type=int, default=60, help="sequential runs per latency figure")
    p.add_argument("--seconds", type=float, default=4.0, help="duration of the throughput run")
    p.add_argument("--hogs", type=int, default=0, help="busy-looping processes meanwhile")
    p.add_argument("--rounds", type=int, default=1, help="repeat every setting, interleaved")
    p.add_argument("--out", help="write the figures as JSON")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.image, args.n, args.seconds)))
        return 0
    settings = ["ondemand", *(f"pooling:{k}" for k in args.keep)]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    results: list[dict[str, Any]] = []
    try:
        for _ in range(args.rounds):
            for setting in settings:
                env = dict(os.environ)
                env["WASM_RUNNER_ALLOCATOR"] = "ondemand" if setting == "ondemand" else "pooling"
                done = subprocess.run(
                    [sys.executable, __file__, "--child", setting, "--image", args.image,
                     "-n", str(args.n), "--seconds", str(args.seconds)],
                    env=env, capture_output=True, text=True, check=True,
                )
                r = json.loads(done.stdout.strip().splitlines()[-1])
                r["loadavg"] = os.getloadavg()[0]
                results.append(r)
                print(f"{setting:<12} fresh print p50 {r['fresh_hello_ms']['p50']:6.2f} ms "
                      f"p90 {r['fresh_hello_ms']['p90']:6.2f} ms, {r['runs_per_s']:5.0f} runs/s; RSS MiB: "
                      f"start {r['rss_start_mib']:.0f}, idle after runs {r['rss_idle_after_runs_mib']:.0f}, "
                      f"{SESSIONS} sessions open {r['rss_sessions_open_mib']:.0f}, closed "
                      f"{r['rss_idle_after_sessions_mib']:.0f}, end {r['rss_idle_end_mib']:.0f} "
                      f"(load {r['loadavg']:.1f})", flush=True)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"hogs": args.hogs, "cpus": os.cpu_count(), "image": args.image,
                       "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
