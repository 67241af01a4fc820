"""The guest's network on the server tier: what the loader that installs the network shim's
finder costs every run, and one request's round trip through the host to a loopback server.

Each figure is interleaved with its baseline in the same process, on the default sandbox:

- run start: ``print(1)`` as a run without the loader (a ``host_call`` handler given: the path a
  run took before the network) against the same run with it (no rule: the network is off), and
  a run that imports ``http.client`` both ways (the shim fetched from the host and compiled).
  Wall per run (median), and the guest's fuel (instructions; the same whatever the load).
- request: ``urllib.request.urlopen`` of a small JSON from a loopback ``http.server``, timed by the
  guest's clock around 50 requests (after 5 of warm-up), per request.

Nothing here is a test.

    .venv/bin/python benchmarks/network.py [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._support import load_average, machine  # noqa: E402
from tests.support.loopback_api import loopback_api  # noqa: E402
from wasm_runner import Limits  # noqa: E402
from wasm_runner.network import NetworkRule, RunNetwork  # noqa: E402
from wasm_runner.sandbox.default import default_sandbox  # noqa: E402


def _answer(request: bytes, stop: object) -> None:
    return None  # the baseline's handler: refuses every call (the run makes none)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    sandbox = default_sandbox()
    wall = Limits(wall_seconds=120)
    programs = {"print(1)": "print(1)", "import http.client": "import http.client\nprint(1)"}
    figures: dict[str, dict[str, float]] = {}
    for name, code in programs.items():
        for _ in range(3):
            sandbox.run(code, host_call=_answer)
            sandbox.run(code)
        without, with_loader = [], []
        fuel = {"without": 0, "with": 0}
        for _ in range(args.runs):
            t = time.perf_counter()
            fuel["without"] = sandbox.run(code, host_call=_answer, limits=wall).fuel_used
            without.append(time.perf_counter() - t)
            t = time.perf_counter()
            fuel["with"] = sandbox.run(code, limits=wall).fuel_used
            with_loader.append(time.perf_counter() - t)
        figures[name] = {"without_ms": round(statistics.median(without) * 1000, 2),
                         "with_ms": round(statistics.median(with_loader) * 1000, 2),
                         "ratio": round(statistics.median(with_loader) / statistics.median(without), 3),
                         "fuel_without": fuel["without"], "fuel_with": fuel["with"]}
    with loopback_api() as api:
        rule = NetworkRule.from_table("bench", {"destinations": [f"http://127.0.0.1:{api.port}"],
                                                "max_requests": 100})
        code = ("import time, urllib.request\n"
                f"url = '{api.url('/data.json')}'\n"
                "for _ in range(5):\n    urllib.request.urlopen(url).read()\n"
                "t = time.perf_counter()\n"
                "for _ in range(50):\n    urllib.request.urlopen(url).read()\n"
                "print((time.perf_counter() - t) / 50 * 1000)\n")
        per_request = [float(sandbox.run(code, limits=wall, network=RunNetwork([rule])).stdout)
                       for _ in range(3)]
    figures["request"] = {"ms_per_request_median_of_3_runs": round(statistics.median(per_request), 2)}
    print(json.dumps({"machine": machine(), "load_average": load_average(), "runs": args.runs,
                      "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
