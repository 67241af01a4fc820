"""Host functions on the server tier: the round trip of one call from guest code to an
in-process Python callable and back (goal: <= 0.1 ms), and 10,000 calls in one run within the
default limits.

Each measurement is one run of the default sandbox that calls ``host.echo`` ``--calls`` times
in a loop (after 200 calls of warm-up), the same loop without the call being timed too, so the
per-call figure is the call alone. Two figures per kind of call:

- wall: the guest's own clock around the loop (what a program sees; on a loaded machine it
  includes the time the guest's thread waited for a CPU);
- CPU: the guest thread's CPU time (guest code, the host call and the function: a synchronous
  function runs on that thread), a run with the calls minus a run with the empty loop, per
  call: what a call costs whatever the load (a coroutine's own CPU on the loop's thread is not
  in it).

For scale, the same is measured for ``time.time()``: one WASI call that does nothing.

The runs use the default limits (``host_calls`` 100000, ``host_seconds`` 5 s, 5 s of CPU) but a
wall limit of 120 s, so they show the calls fit. Nothing here is a test.

    .venv/bin/python benchmarks/host_calls.py [--calls 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

from wasm_runner import HostFunctions, Limits, Status
from wasm_runner.sandbox import default_sandbox
from wasm_runner.sandbox.guest import Outcome

PROGRAM = """
import time, json
from host import echo, echo_async
ARG = {arg}
fn = {fn}
for _ in range(200):
    echo(1)
t0 = time.perf_counter()
for i in range({calls}):
    fn(ARG) if fn else ARG
print(json.dumps((time.perf_counter() - t0) / {calls} * 1e6))
"""
KINDS = {  # name -> (function called, argument, calls per run as a share of --calls)
    "int argument": ("echo", "1", 1),
    "small dict": ("echo", "{'id': 42, 'fields': ['total', 'items'], 'name': 'order'}", 1),
    "coroutine (background loop)": ("echo_async", "1", 10),
    # for scale: one WASI call (clock_time_get) and nothing else, the cheapest crossing there is
    "time.time(), one WASI call": ("lambda a, t=time.time: t()", "1", 1),
}


async def _echo_async(x: object) -> object:
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sb = default_sandbox()
    cpu: list[float] = []

    def on_end(outcome: Outcome) -> None:
        cpu.append(outcome.cpu_s)

    sb.on_guest_end = on_end
    answered = [0]

    def echo(x: object) -> object:
        answered[0] += 1
        return x

    fns = HostFunctions({"echo": echo, "echo_async": _echo_async})
    limits = Limits(wall_seconds=120)

    def one(fn: str, arg: str, calls: int) -> tuple[float, float]:
        cpu.clear()
        t0 = time.perf_counter()
        r = sb.run(PROGRAM.format(fn=fn, arg=arg, calls=calls), functions=fns, limits=limits)
        assert r.status is Status.OK, (r.status, r.stderr[-2000:])
        assert time.perf_counter() - t0 < 120
        return float(json.loads(r.stdout)), cpu[0] if cpu else float("nan")

    rows: dict[str, Any] = {}
    for name, (fn, arg, share) in KINDS.items():
        calls = args.calls // share
        walls, cpus = [], []
        for _ in range(args.repeat):
            empty_wall, empty_cpu = one("None", arg, calls)
            wall, cpu_s = one(fn, arg, calls)
            walls.append(wall - empty_wall)
            cpus.append((cpu_s - empty_cpu) / calls * 1e6)
        rows[name] = (statistics.median(walls), statistics.median(cpus), calls)
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; median of {args.repeat} runs each, "
          f"default limits (wall 120 s); {answered[0]} calls answered in all")
    for name, (wall, cpu_us, calls) in rows.items():
        print(f"  {name:28} {calls:6} calls/run: {wall:7.1f} us wall, {cpu_us:7.1f} us CPU per call")


if __name__ == "__main__":
    main()
