"""Host functions on the server tier: the round trip of one call from guest code to an
in-process Python callable and back (goal: <= 0.1 ms), and 10,000 calls in one run within the
default limits.

One run of the default sandbox calls ``host.echo`` ``--calls`` times in a loop (after 200 calls
of warm-up) and times the loop with the guest's own clock; the same loop without the call is
timed too, so the per-call figure is the call alone. Then a coroutine function, the same way.
The run's limits are the defaults (``host_calls`` 100000, ``host_seconds`` 5 s) but for a longer
wall clock, so the run shows the calls fit. Nothing here is a test.

    .venv/bin/python benchmarks/host_calls.py [--calls 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from wasm_runner import Limits, Status
from wasm_runner.host_functions import HostFunctions
from wasm_runner.sandbox import default_sandbox

PROGRAM = """
import time, json
from host import echo, echo_async
def loop(fn, n, arg):
    t0 = time.perf_counter()
    for i in range(n):
        fn(arg) if fn else arg
    return (time.perf_counter() - t0) / n * 1e6
for _ in range(200):
    echo(1)
out = {
    "empty_us": loop(None, CALLS, 1),
    "int_us": loop(echo, CALLS, 1),
    "dict_us": loop(echo, CALLS, {"id": 42, "fields": ["total", "items"], "name": "order"}),
    "async_us": loop(echo_async, CALLS // 10, 1),
}
print(json.dumps(out))
"""


async def _echo_async(x: object) -> object:
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    sb = default_sandbox()
    calls = [0]

    def echo(x: object) -> object:
        calls[0] += 1
        return x

    fns = HostFunctions({"echo": echo, "echo_async": _echo_async})
    limits = Limits(wall_seconds=120)
    rows = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        r = sb.run(PROGRAM.replace("CALLS", str(args.calls)), functions=fns, limits=limits)
        wall = time.perf_counter() - t0
        assert r.status is Status.OK, (r.status, r.stderr[-2000:])
        row = json.loads(r.stdout)
        row["run_s"] = wall
        rows.append(row)
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    total = 200 + 2 * args.calls + args.calls // 10
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; {args.repeat} runs of {total} calls each "
          f"(default limits, wall 120 s), medians:")
    print(f"  round trip, int argument:   {med['int_us'] - med['empty_us']:.1f} us per call")
    print(f"  round trip, small dict:     {med['dict_us'] - med['empty_us']:.1f} us per call")
    print(f"  round trip, coroutine:      {med['async_us'] - med['empty_us']:.1f} us per call (background loop)")
    print(f"  whole run ({total} calls):  {med['run_s']:.2f} s; calls answered: {calls[0]}")


if __name__ == "__main__":
    main()
