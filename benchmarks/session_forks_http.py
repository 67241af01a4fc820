"""Fork, save and resume over HTTP (issue 25): what a client sees of each, on one ``serve``.

    python benchmarks/session_forks_http.py                          # plain image, 20 rounds
    python benchmarks/session_forks_http.py --image datascience --setup pandas

Starts one ``wasm-runner serve`` on 127.0.0.1, opens a session, runs a set-up cell, then, one call
at a time, N rounds of:

- ``fork``: ``POST /api/sessions/{id}/fork`` with ``{"copies": C}`` (the copies' ids back), then
  the copies deleted (not timed);
- ``snapshot``: ``GET /api/sessions/{id}/snapshot`` (the sealed bytes, encrypted);
- ``resume``: ``POST /api/sessions/resume`` with those bytes (a new session, at rest);
- the resumed session's first cell, then it is deleted (not timed).

Prints p50/p90 of each (client wall time: HTTP, admission, the sandbox work) and the snapshot's
size.
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from _support import SESSION_SETUPS as SETUPS, load_average, pct, serve, server_toml

KEY = secrets.token_hex(16)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default="plain")
    ap.add_argument("--setup", default="plain", choices=sorted(SETUPS))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--copies", type=int, default=1, help="copies per fork (default 1)")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="wasm-runner-fork-bench-"))
    (folder / "bench.toml").write_text(server_toml(
        KEY, server={"max_sessions": 64}, profile={"image": args.image, "cpu_seconds": 30, "wall_seconds": 60,
                                                   "memory_mb": 512}, api_key={"max_concurrent": 64}))  # fmt: skip
    with serve(folder / "bench.toml", ready_seconds=600) as served, httpx.Client(
        base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=300, trust_env=False
    ) as api:
        sid = api.post("/api/sessions", json={}).json()["id"]
        r = api.post(f"/api/sessions/{sid}/run", json={"code": SETUPS[args.setup]}).json()
        if r["status"] != "ok":
            raise SystemExit(f"set-up failed: {r['status']} {r['stderr'][-500:]}")
        api.get(f"/api/sessions/{sid}/snapshot")  # the sandbox's reference instance, made once
        fork, snap, resume, first = [], [], [], []
        size = 0
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            forked = api.post(f"/api/sessions/{sid}/fork", json={"copies": args.copies})
            fork.append((time.perf_counter() - t0) * 1000)
            if forked.status_code != 201:
                raise SystemExit(f"fork: {forked.status_code} {forked.text}")
            for c in forked.json()["sessions"]:
                api.delete(f"/api/sessions/{c['id']}")
            t1 = time.perf_counter()
            blob = api.get(f"/api/sessions/{sid}/snapshot").content
            t2 = time.perf_counter()
            resumed = api.post("/api/sessions/resume", content=blob,
                               headers={"Content-Type": "application/octet-stream"})  # fmt: skip
            t3 = time.perf_counter()
            if resumed.status_code != 201:
                raise SystemExit(f"resume: {resumed.status_code} {resumed.text}")
            new = resumed.json()["id"]
            cell = api.post(f"/api/sessions/{new}/run", json={"code": "print(len(dir()))"}).json()
            t4 = time.perf_counter()
            if cell["status"] != "ok":
                raise SystemExit(f"resumed cell failed: {cell['status']}")
            api.delete(f"/api/sessions/{new}")
            snap.append((t2 - t1) * 1000)
            resume.append((t3 - t2) * 1000)
            first.append((t4 - t3) * 1000)
            size = len(blob)
    print(f"image {args.image}, set-up {args.setup}, {args.rounds} rounds, {args.copies} copies per fork; "
          f"load average {' '.join(f'{x:.2f}' for x in load_average())}")
    print(f"snapshot size: {size / 1024:.0f} KiB (sealed, encrypted)")
    for name, xs in ((f"POST fork ({args.copies})", fork), ("GET snapshot", snap), ("POST resume", resume),
                     ("first cell after resume", first)):
        print(f"{name:26s} p50 {statistics.median(xs):7.1f} ms   p90 {pct(xs, 0.9):7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
