"""Webhooks (docs/lms.md, "Webhook"): what a key's webhook costs a student's Check, and how soon
the platform gets the signed result. A ``wasm-runner serve`` on 127.0.0.1 with two keys, one
naming a webhook (a receiver in this process, on loopback, allowed by the key's webhook_allow),
one without; the same Check of ``tests/exercises/greet`` alternately with each key.

Reports the Check's wall time with and without the webhook (p50, p90, and their ratio: the
outbox write is all the Check waits for), and the time from sending the Check to the delivery
reaching the receiver (p50, p90; the delivery starts as soon as the result is queued, before
the answer is sent, so it may arrive before the answer).

    .venv/bin/python benchmarks/webhook_bench.py [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from _support import free_port, load_average, machine, percentiles, serve, server_toml

HALF = "name = input()\nprint('Hi' if name == 'Ada' else f'Hello, {name}!')\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    arrived: dict[str, float] = {}  # result token -> when the receiver got it

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            arrived.setdefault(body["result_token"], time.perf_counter())
            self.send_response(204)
            self.end_headers()

        def log_message(self, *a: Any) -> None:
            pass

    port = free_port()
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    exercises = Path(__file__).resolve().parents[1] / "tests" / "exercises"
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "server.toml"
        config.write_text(server_toml("plain-key", server={"exercises_dir": str(exercises),
                                                           "webhook_outbox_dir": str(Path(tmp) / "outbox")})
                          + '[[api_keys]]\nname = "hooked"\nkey = "hooked-key"\nrate = "1000000/minute"\n'
                          f'webhook_url = "http://127.0.0.1:{port}/hook"\nwebhook_allow = ["127.0.0.1"]\n')
        with serve(config) as served:
            timed: dict[str, list[float]] = {"plain-key": [], "hooked-key": []}
            delays: list[float] = []
            for n in range(args.repeat + 2):
                for key in timed:
                    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {key}"},
                                      timeout=120, trust_env=False) as api:
                        t0 = time.perf_counter()
                        # a comment makes each Check's code, so its token, its own
                        r = api.post("/api/exercises/greet/check", json={"code": f"{HALF}# {n} {key}\n"})
                        answered = time.perf_counter()
                    r.raise_for_status()
                    if n < 2:  # warm-up
                        continue
                    timed[key].append((answered - t0) * 1000)
                    if key == "hooked-key":
                        token = r.json()["result_token"]
                        deadline = time.monotonic() + 30
                        while token not in arrived and time.monotonic() < deadline:
                            time.sleep(0.001)
                        delays.append((arrived[token] - t0) * 1000)
    httpd.shutdown()
    plain, hooked = percentiles(timed["plain-key"], digits=1), percentiles(timed["hooked-key"], digits=1)
    print(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "machine": machine(), "load_average": load_average(),
        "repeat": args.repeat, "check_ms_without_webhook": plain, "check_ms_with_webhook": hooked,
        "ratio_p50": round(hooked["p50"] / plain["p50"], 2),
        "check_sent_to_delivery_ms": percentiles(delays, digits=1),
    }, indent=1))


if __name__ == "__main__":
    main()
