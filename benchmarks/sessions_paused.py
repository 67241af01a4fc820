"""1,000 open sessions on one ``serve``, 990 of them paused to disk (issue 25's goal).

    .venv/bin/python benchmarks/sessions_paused.py                   # 1,000 sessions, 10 live
    .venv/bin/python benchmarks/sessions_paused.py --sessions 200    # a quicker run

Starts ``wasm-runner serve`` on 127.0.0.1 with ``max_sessions = --live`` (10), a 1 s
``session_pause_seconds`` and its own ``snapshot_dir``, then opens ``--sessions`` sessions (plain
image, 64 MB each), each running one cell (``x = i``, a 1,000-element list). A session that finds
the live places taken waits (429 ``too_many_sessions``) until an idle one is paused. Then it
brings ``--live`` of them back at once (a cell each) and reads ``/healthz`` (live / paused),
``/metrics`` (the memory the budget holds), the server's resident memory (``/proc``) and the
snapshot folder's size; times cells in ``--sample`` paused sessions (each resumed by its call)
and then in the same, live, sessions; and checks every sampled session's ``x``. Prints the
figures and writes them to ``benchmarks/results/sessions_paused.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from _support import RESULTS, load_average, machine, pct, serve, server_toml

KEY = secrets.token_hex(16)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*/*.snap"))


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--live", type=int, default=10, help="max_sessions: live sessions at most")
    ap.add_argument("--budget", type=int, default=2048, help="memory_budget_mb of the server")
    ap.add_argument("--sample", type=int, default=30, help="paused sessions resumed and timed")
    ap.add_argument("--workers", type=int, default=4, help="sessions opened at once")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-paused-"))
    store = folder / "paused-sessions"
    (folder / "server.toml").write_text(server_toml(
        KEY, server={"max_running": 2, "max_sessions": args.live, "memory_budget_mb": args.budget,
                     "session_pause_seconds": 1, "snapshot_dir": str(store), "snapshot_key_bytes": 64 << 30},
        profile={"cpu_seconds": 5, "wall_seconds": 30, "memory_mb": 64}, api_key={"max_concurrent": 64}))
    with serve(folder / "server.toml", log=folder / "serve.log", cwd=folder, ready_seconds=300) as served, \
            httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=120,
                         trust_env=False) as api:  # fmt: skip
        proc = served.process
        rss_start = rss_mb(proc.pid)
        ids: dict[int, str] = {}
        waits = 0

        def open_one(i: int) -> None:
            nonlocal waits
            while True:
                r = api.post("/api/sessions", json={})
                if r.status_code == 429 and r.json()["error"]["code"] == "too_many_sessions":
                    waits += 1
                    time.sleep(0.25)  # the live places are taken: an idle one pauses soon
                    continue
                assert r.status_code == 201, r.text
                sid = r.json()["id"]
                c = api.post(f"/api/sessions/{sid}/run", json={"code": f"x = {i}\nitems = list(range(1000))"})
                assert c.status_code == 200 and c.json()["status"] == "ok", c.text
                ids[i] = sid
                return

        t0 = time.monotonic()
        rss_peak = rss_start
        with ThreadPoolExecutor(args.workers) as pool:
            futures = [pool.submit(open_one, i) for i in range(args.sessions)]
            for n, f in enumerate(futures):
                f.result()
                if n % 50 == 0:
                    rss_peak = max(rss_peak, rss_mb(proc.pid))
                    print(f"  {n + 1} sessions open, {time.monotonic() - t0:.0f} s", file=sys.stderr)
        opened_seconds = time.monotonic() - t0
        # the last ones pause too once idle (and saved)
        end = time.monotonic() + 60
        while time.monotonic() < end and api.get("/healthz").json()["sessions"] > args.live:
            time.sleep(0.5)
        # --live of them in use again at once (resumed by a call), the rest paused: then measure
        in_use = list(ids.values())[-args.live:]
        with ThreadPoolExecutor(args.live) as pool:
            list(pool.map(lambda sid: api.post(f"/api/sessions/{sid}/run", json={"code": "x"}), in_use))
        health = api.get("/healthz").json()
        metrics = api.get("/metrics").text
        rss_all = rss_mb(proc.pid)
        disk = folder_bytes(store)
        # resume: cells in paused sessions (each resumed by its call) against live ones
        live_ids = [sid for sid in ids.values() if not api.get(f"/api/sessions/{sid}").json()["paused"]]
        paused = random.sample([i for i, s in ids.items() if s not in live_ids], min(args.sample, len(ids)))
        resumed_ms, live_ms, wrong = [], [], 0
        wrong_seen: list[str] = []

        def checked(r: httpx.Response, i: int) -> int:
            ok = r.status_code == 200 and r.json()["stdout"] == f"{i} 1000\n"
            if not ok:
                wrong_seen.append(f"session {i}: {r.status_code} {r.text[:300]}")
            return int(not ok)

        for i in paused:
            t = time.perf_counter()
            r = api.post(f"/api/sessions/{ids[i]}/run", json={"code": "print(x, len(items))"})
            resumed_ms.append((time.perf_counter() - t) * 1000)
            wrong += checked(r, i)
            sid = ids[i]
            t = time.perf_counter()
            r = api.post(f"/api/sessions/{sid}/run", json={"code": "print(x, len(items))"})
            live_ms.append((time.perf_counter() - t) * 1000)
            wrong += checked(r, i)
        for sid in ids.values():
            api.delete(f"/api/sessions/{sid}")
        left = folder_bytes(store)
    out = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "load_average": load_average(),
        "command": " ".join(["python", "benchmarks/sessions_paused.py", *sys.argv[1:]]),
        "sessions": args.sessions, "max_sessions": args.live, "memory_budget_mb": args.budget,
        "open_seconds": round(opened_seconds, 1), "waits_for_a_live_place": waits,
        "healthz": {"sessions": health["sessions"], "paused_sessions": health["paused_sessions"]},
        "memory_reserved_mb": metric(metrics, "wasm_runner_memory_reserved_mb"),
        "rss_mb": {"ready": round(rss_start), "peak_while_opening": round(rss_peak), "all_open": round(rss_all)},
        "snapshots_mib": round(disk / (1 << 20)), "snapshot_kib_each": round(disk / max(1, len(ids)) / 1024),
        "snapshots_left_after_delete": left,
        "resumed_cell_ms": {"p50": round(statistics.median(resumed_ms), 1), "p90": round(pct(resumed_ms, 0.9), 1)},
        "live_cell_ms": {"p50": round(statistics.median(live_ms), 1), "p90": round(pct(live_ms, 0.9), 1)},
        "wrong_answers": wrong,
        "wrong_examples": wrong_seen[:5],
    }  # fmt: skip
    print(json.dumps(out, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "sessions_paused.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
