"""The attacks of issue 12 at their full scale against a real ``wasm-runner serve``: for each, what
the attacker got back, the server's peak RSS growth, ``/healthz`` latency during the attack and
whether another tenant's run was answered. Not a test: it measures and reports (the attack suite,
tests/scenarios/test_attacks_over_http.py, runs the same attacks scaled down).

The server runs with the defaults except: 2 guests at once, a 1200 MB budget split 0.5 per key,
a 4 MiB download store (1 MiB per key), 20 failed keys a minute per address.

Usage: ``python benchmarks/http_attacks.py [--out benchmarks/results/http_attacks.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support import attack_kit as kit  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    load_before = os.getloadavg()
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp, kit.attack_server(Path(tmp), scale="full") as s:
        attacks = {
            "header flood: 10 connections x 40 MiB header": lambda: kit.header_flood(s, 10, 40),
            "slowloris: 50 connections, a header byte every 0.2 s": lambda: kit.slowloris(s, 50, 15),
            "connection flood: 200 idle connections from one address": lambda: kit.connection_flood(s, 200),
            "unauthenticated WebSockets: 28 x 15 MiB first message": lambda: kit.ws_unauthenticated_flood(s, 28, 15),
            "JSON amplification: 8 x 12 MiB [{},{},...] / deep nesting": lambda: kit.json_amplification(s, 8, 11.9),
            "slow bodies: 30 x 12 MiB uploads stalled 200 B short": lambda: kit.slow_bodies(s, 30, 11.9, vanish=False),
            "vanishing bodies: 8 x 12 MiB uploads, client gone mid-body": lambda: kit.slow_bodies(s, 8, 11.9, vanish=True),
            "wrong keys: 60 from one address": lambda: kit.failed_auth(s, 60),
            "DNS rebinding: Host and Origin rebind.example": lambda: kit.rebinding(s),
            "session hog: 2 keys x 2 sessions of 534 MB, then a 3rd key": lambda: kit.session_hog(s),
            "download squeeze: another key writes 12 x 400 KiB links": lambda: kit.download_squeeze(s, 12, 400),
        }  # fmt: skip
        for name, attack in attacks.items():
            result = kit.measure(s, attack)
            result.pop("token", None)
            figures[name] = result
            print(f"{name}\n  {json.dumps(result)}", flush=True)
        log = s.log()
        figures["server log"] = {
            "tracebacks": log.count("Traceback"),
            "500 responses": log.count('" 500'),
            "download tokens redacted": "/api/files/[redacted]" in log,
        }
        print(figures["server log"])
    report = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "load_average_before": [round(x, 2) for x in load_before],
        "command": "python benchmarks/http_attacks.py",
        "figures": figures,
    }
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
