"""The guest's network on the browser tier (Chromium): what asking the runner for a run's grant
costs a browser-tier run, and one request's round trip (worker -> runner -> a loopback server).

Each figure is interleaved with its baseline on one page of the playground, served by a real
uvicorn on 127.0.0.1 with a ``[network.bench]`` rule for one key:

- run: ``print(1)`` in the browser tier, timed by the page around ``runner.run``, with the key
  the rule names (``POST /api/network/runs`` before each run: a grant) against a key no rule
  names (asked once, the refusal remembered): the grant's cost per run.
- request: ``urllib.request.urlopen`` of a small JSON from a loopback ``http.server``, timed by the
  guest's clock around 50 requests (after 5 of warm-up), per request (the synchronous
  XMLHttpRequest to ``POST /api/network/fetch``, the runner's request, the answer back).

Nothing here is a test.

    .venv/bin/python benchmarks/network_browser.py [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._support import load_average, machine  # noqa: E402
from tests.support.browser import READY_SECONDS, poll, shared_browser  # noqa: E402
from tests.support.live_server import KEY, OTHER_KEY, live_server, make_config  # noqa: E402
from tests.support.loopback_api import loopback_api  # noqa: E402
from wasm_runner.browser.locations import web_dir  # noqa: E402
from wasm_runner.browser.pyodide_snapshot import SnapshotStore  # noqa: E402
from wasm_runner.network import network_from  # noqa: E402

TIMED_RUN = """async ([key, code]) => {
  const runner = window.playground.runner;
  runner.apiKey = key;
  const t = performance.now();
  const result = await runner.run(code, { tier: "browser" });
  return { ms: performance.now() - t, stdout: result.stdout, stderr: result.stderr, status: result.status };
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    SnapshotStore(web_dir()).ensure()
    with loopback_api() as api, tempfile.TemporaryDirectory() as tmp:
        rules = network_from({"bench": {"destinations": [f"http://127.0.0.1:{api.port}"], "keys": ["alice"],
                                        "max_requests": 100}})
        with live_server(make_config(Path(tmp), network=rules)) as server:
            context = shared_browser().new_context()
            page = context.new_page()
            page.goto(server.url + "/")
            poll(page, "window.playground && window.playground.runner.browserInfo", timeout=READY_SECONDS)
            granted, refused = [], []
            for _ in range(3):
                page.evaluate(TIMED_RUN, [KEY, "print(1)"])
                page.evaluate(TIMED_RUN, [OTHER_KEY, "print(1)"])
            for _ in range(args.runs):
                granted.append(page.evaluate(TIMED_RUN, [KEY, "print(1)"])["ms"])
                refused.append(page.evaluate(TIMED_RUN, [OTHER_KEY, "print(1)"])["ms"])
            code = ("import time, urllib.request\n"
                    f"url = '{api.url('/data.json')}'\n"
                    "for _ in range(5):\n    urllib.request.urlopen(url).read()\n"
                    "t = time.perf_counter()\n"
                    "for _ in range(50):\n    urllib.request.urlopen(url).read()\n"
                    "print((time.perf_counter() - t) / 50 * 1000)\n")
            per_request = []
            for _ in range(3):
                answer = page.evaluate(TIMED_RUN, [KEY, code])
                assert answer["status"] == "ok", answer
                per_request.append(float(answer["stdout"]))
            context.close()
    figures = {
        "run": {"without_grant_ms": round(statistics.median(refused), 2),
                "with_grant_ms": round(statistics.median(granted), 2),
                "ratio": round(statistics.median(granted) / statistics.median(refused), 3)},
        "request": {"ms_per_request_median_of_3_runs": round(statistics.median(per_request), 2)},
    }
    print(json.dumps({"machine": machine(), "load_average": load_average(), "runs": args.runs,
                      "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
