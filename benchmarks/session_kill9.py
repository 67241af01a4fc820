"""``kill -9`` of a cluster replica under session load (issue 25): every session whose last cell
finished before the kill resumes on another replica with its state.

    .venv/bin/python benchmarks/session_kill9.py                      # 150 sessions, 6 clients
    .venv/bin/python benchmarks/session_kill9.py --sessions 60 --clients 4 --warm 10

Starts ``wasm-runner cluster --replicas 3`` on 127.0.0.1 (a real redis-server, HAProxy and three
``serve`` replicas sharing one snapshot folder; sessions are saved after each cell and not paused),
opens --sessions sessions through HAProxy, and --clients clients run cells in them round after
round, a session's next cell --think seconds after its last at the earliest: cell k of a session
prints the state it found (``x`` and ``len(seen)``, both k - 1), then sets ``x = k`` and appends k
to ``seen``. After --warm seconds the replica that owns the most sessions (the Redis directory says
which) gets SIGKILL while cells are running; the clients start no new cell and the cells in flight
end, answered or failed. Then every session gets one check cell through HAProxy, --clients at a time
(a 502/503 while HAProxy still sends to the dead replica is retried, counted): ``print(x,
len(seen))``. A session whose last cell was answered before the kill must show that cell's state,
resumed on another replica if the killed one owned it; else the answer's ``lost_cells`` must name
exactly the cells its state lacks (a cell answered less than the save delay before the kill, or one
in flight). Prints the counts, the check cell's time (resumed sessions against live ones) and writes
``benchmarks/results/session_kill9.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _support import RESULTS, ROOT, free_port, load_average, machine, percentiles, server_toml
from redis import Redis

from wasm_runner.scaleout.launcher.children import Child

KEY = secrets.token_urlsafe(16)


def cell(k: int) -> str:
    if k == 1:
        return "x = 1\nseen = [1]"
    return f"print(x, len(seen))\nx = {k}\nseen.append({k})"


@dataclass
class Track:
    """One session as its client saw it."""

    sid: str
    owner: str = ""  # the replica that owned it just before the kill
    last_ok: int = 0  # the last cell answered ok
    last_ok_at: float = 0.0
    sent_at: float = 0.0  # when its last cell was sent
    tried: int = 0  # the last cell sent
    failed: list[tuple[int, str]] = field(default_factory=list)  # cells that got no answer, and why
    wrong: list[str] = field(default_factory=list)


def spread(xs: list[float]) -> dict[str, float | None]:
    return {**percentiles(xs, digits=1), "max": round(max(xs), 1)} if xs else {"p50": None, "p90": None, "max": None}


class Cluster:
    """``wasm-runner cluster`` in its own process group; the parts' pids and URLs from its lines."""

    def __init__(self, config: Path, replicas: int):
        self.url = f"http://127.0.0.1:{free_port()}"
        self.lines: list[str] = []
        argv = [sys.executable, "-m", "wasm_runner.cli", "cluster", "--replicas", str(replicas),
                "--port", self.url.rsplit(":", 1)[1], "--config", str(config)]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("WASM_RUNNER_") or k == "WASM_RUNNER_CACHE"}
        env["PYTHONPATH"] = str(ROOT)
        self.child = Child("cluster", argv, env=env, echo=self.lines.append)
        self.replicas: dict[str, tuple[str, int]] = {}  # name -> (url, pid)
        self.redis_url = ""

    def start(self, seconds: float = 300) -> None:
        self.child.start()
        deadline = time.monotonic() + seconds
        while not any("cluster: ready at" in line for line in self.lines):
            if not self.child.alive() or time.monotonic() > deadline:
                raise SystemExit("the cluster did not start:\n" + "\n".join(self.lines[-30:]))
            time.sleep(0.2)
        for line in list(self.lines):
            if m := re.search(r"cluster: replica (r\d+) (http://127\.0\.0\.1:\d+) \(pid (\d+)\)", line):
                self.replicas[m.group(1)] = (m.group(2), int(m.group(3)))
            if m := re.search(r"cluster: redis-server (redis://\S+) \(pid", line):
                self.redis_url = m.group(1)

    def stop(self) -> None:
        self.child.stop(signal.SIGTERM, 120)


def owners(redis_url: str, tracks: list[Track], by_url: dict[str, str]) -> None:
    client = Redis.from_url(redis_url)
    try:
        for t in tracks:
            raw: Any = client.get(f"wasm-runner:session:{t.sid}")
            t.owner = by_url.get(json.loads(raw)["owner"], "?") if raw else "?"
    finally:
        client.close()


def load(url: str, mine: list[Track], think: float, stop: threading.Event, wrong_during: list[str]) -> int:
    """One client: a cell in each of its sessions, round after round, until ``stop``; a session's
    next cell is sent ``think`` seconds after its last one at the earliest."""
    done = 0
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as api:
        while not stop.is_set():
            for t in mine:
                if stop.is_set():
                    break
                wait = t.sent_at + think - time.monotonic()
                if wait > 0 and stop.wait(wait):
                    break
                k = t.tried = t.tried + 1
                t.sent_at = time.monotonic()
                try:
                    r = api.post(f"/api/sessions/{t.sid}/run", json={"code": cell(k)})
                except httpx.HTTPError as exc:
                    t.failed.append((k, f"{type(exc).__name__} after {time.monotonic() - t.sent_at:.1f} s"))
                    continue
                if r.status_code != 200 or r.json().get("status") != "ok":
                    t.failed.append((k, f"{r.status_code} after {time.monotonic() - t.sent_at:.1f} s: {r.text[:120]}"))
                    continue
                body = r.json()
                expect = f"{k - 1} {k - 1}\n" if k > 1 else ""
                if body["stdout"] != expect and not body["session"].get("lost_cells"):
                    wrong_during.append(f"{t.sid} cell {k}: {body['stdout']!r}, expected {expect!r}")
                t.last_ok, t.last_ok_at = k, time.monotonic()
                done += 1
    return done


def check(url: str, t: Track, killed_at: float) -> dict[str, Any]:
    """The check cell of one session: what state it has, what it says was lost, how long it took."""
    retries = 0
    deadline = time.monotonic() + 90
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as api:
        while True:  # HAProxy may send to the dead replica until its check marks it down
            t0 = time.monotonic()
            r: httpx.Response | None = None
            try:
                answer = api.post(f"/api/sessions/{t.sid}/run", json={"code": "print(x, len(seen))"})
            except httpx.HTTPError as exc:
                err = type(exc).__name__
            else:
                r, err = answer, f"{answer.status_code} {answer.text[:200]}"
            seconds = time.monotonic() - t0
            if r is not None and r.status_code not in (502, 503, 504):
                break
            if time.monotonic() > deadline:
                return {"sid": t.sid, "error": err, "retries": retries}
            retries += 1
            time.sleep(0.2)
    if r.status_code != 200:
        return {"sid": t.sid, "error": err, "retries": retries, "ms": seconds * 1000}
    body = r.json()
    session = body["session"]
    lost = list(session.get("lost_cells") or [])
    try:
        x, n = (int(v) for v in body["stdout"].split())
    except ValueError:
        return {"sid": t.sid, "error": f"stdout {body['stdout']!r} {body.get('stderr', '')[-200:]}",
                "retries": retries, "ms": seconds * 1000}
    return {"sid": t.sid, "x": x, "n": n, "lost": lost, "calls": session.get("calls"), "retries": retries,
            "ms": seconds * 1000, "after_kill_ms": (t0 - killed_at) * 1000}


def verdict(t: Track, c: dict[str, Any]) -> str:
    """``kept`` (the state of its last answered cell, nothing said lost), ``lost-said`` (an older
    state, and ``lost_cells`` names exactly the cells it lacks), ``kept, said lost`` (the state of
    its last answered cell, yet ``lost_cells`` names that cell: the kill fell after its snapshot
    was written and before the directory learnt it), or ``wrong``."""
    if "error" in c:
        return "wrong"
    x, n, lost = c["x"], c["n"], c["lost"]
    if n != x:
        return "wrong"
    if x == t.last_ok:
        return "kept, said lost" if [k for k in lost if k <= t.last_ok] else "kept"
    if x < t.last_ok and all(k in lost for k in range(x + 1, t.last_ok + 1)):
        return "lost-said"
    if x > t.last_ok and all(k in [f for f, _ in t.failed] for k in range(t.last_ok + 1, x + 1)):
        return "kept"  # a cell whose answer the kill lost ran to its end and was saved
    return "wrong"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=150)
    ap.add_argument("--clients", type=int, default=6, help="clients running cells at once")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--warm", type=float, default=20.0, help="seconds of cells before the kill")
    ap.add_argument("--think", type=float, default=1.0,
                    help="seconds from one cell of a session to its next, at least (a person or a model reading)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wasm-runner-kill9-"))
    store = work / "snapshots"
    config = work / "cluster.toml"
    config.write_text(server_toml(
        KEY, server={"max_running": 2, "max_queue": 64, "queue_timeout_seconds": 60, "memory_budget_mb": 16384,
                     "max_sessions": args.sessions + 16, "snapshot_dir": str(store),
                     # saved after each cell, not paused: each is live on its owner at the kill
                     "session_pause_seconds": 3600},
        profile={"cpu_seconds": 5, "wall_seconds": 30, "memory_mb": 64},
        api_key={"max_concurrent": 2 * args.sessions + 16}))  # fmt: skip
    cluster = Cluster(config, args.replicas)
    load_at: dict[str, list[float]] = {"start": load_average()}
    t_start = time.monotonic()
    cluster.start()
    print(f"cluster ready in {time.monotonic() - t_start:.0f} s: {sorted(cluster.replicas)}", flush=True)
    try:
        with httpx.Client(base_url=cluster.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as api:
            def opened(_: int) -> Track:
                r = api.post("/api/sessions", json={})
                if r.status_code != 201:
                    raise SystemExit(f"a session was not opened: {r.status_code} {r.text[:300]}")
                return Track(r.json()["id"])

            with ThreadPoolExecutor(args.clients) as pool:
                tracks = list(pool.map(opened, range(args.sessions)))
        print(f"{len(tracks)} sessions open", flush=True)
        stop = threading.Event()
        wrong_during: list[str] = []
        with ThreadPoolExecutor(args.clients) as pool:
            futures = [pool.submit(load, cluster.url, tracks[i::args.clients], args.think, stop, wrong_during)
                       for i in range(args.clients)]
            time.sleep(args.warm)
            by_url = {u: name for name, (u, _) in cluster.replicas.items()}
            owners(cluster.redis_url, tracks, by_url)
            counts = {name: sum(t.owner == name for t in tracks) for name in cluster.replicas}
            victim = max(counts, key=lambda name: counts[name])
            load_at["kill"] = load_average()
            os.kill(cluster.replicas[victim][1], signal.SIGKILL)
            killed_at = time.monotonic()
            stop.set()
            cells = sum(f.result() for f in futures)
        in_flight_end = time.monotonic()
        print(f"killed {victim} (pid {cluster.replicas[victim][1]}), which owned {counts[victim]} of "
              f"{len(tracks)} sessions; {cells} cells answered before", flush=True)
        with ThreadPoolExecutor(args.clients) as pool:
            checks = list(pool.map(lambda t: check(cluster.url, t, killed_at), tracks))
        checked_at = time.monotonic()
        load_at["end"] = load_average()
        snap_bytes = sum(p.stat().st_size for p in store.rglob("*.snap"))
        snap_files = sum(1 for _ in store.rglob("*.snap"))
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)  # the config and 150 snapshots
    rows: dict[str, dict[str, int]] = {}
    resumed_ms: list[float] = []
    live_ms: list[float] = []
    gaps_lost: list[float] = []
    lost_counts: list[int] = []
    wrong: list[dict[str, Any]] = []
    for t, c in zip(tracks, checks):
        before = t.tried == t.last_ok and t.last_ok_at < killed_at  # its last cell was answered before the kill
        group = ("victim" if t.owner == victim else "survivor") + (", last cell answered" if before else
                                                                    ", a cell in flight at the kill")
        v = verdict(t, c)
        rows.setdefault(group, {"kept": 0, "lost-said": 0, "kept, said lost": 0, "wrong": 0})[v] += 1
        if v == "wrong":
            wrong.append({"track": t.__dict__, "check": c})
        if "ms" in c and "error" not in c:
            (resumed_ms if t.owner == victim else live_ms).append(c["ms"])
        if v == "lost-said" and before:
            gaps_lost.append((killed_at - t.last_ok_at) * 1000)
        if v == "lost-said":
            lost_counts.append(t.last_ok - c["x"])
    out = {
        "command": "python benchmarks/session_kill9.py " + " ".join(sys.argv[1:]),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(),
        "sessions": len(tracks), "clients": args.clients, "replicas": args.replicas, "think_s": args.think,
        "owners_before_kill": counts, "killed": victim,
        "cells_answered_before_kill": cells,
        "cells_in_flight_ended_ms": round((in_flight_end - killed_at) * 1000, 1),
        "cells_failed": [f"{t.sid[:8]} cell {k}: {why}" for t in tracks for k, why in t.failed],
        "wrong_answers_before_kill": len(wrong_during),
        "outcomes": rows,
        "lost_said_answer_to_kill_ms": sorted(round(g, 1) for g in gaps_lost),
        "lost_said_cells_answered_but_lost": sorted(lost_counts),
        "check_cell_ms": {"resumed (victim's sessions)": spread(resumed_ms),
                          "live (survivors' sessions)": spread(live_ms)},
        "retries_502_503": sum(c.get("retries", 0) for c in checks),
        "all_checked_s_after_kill": round(checked_at - killed_at, 1),
        "snapshots": {"files": snap_files, "kib_each": round(snap_bytes / max(1, snap_files) / 1024)},
        "load_average": load_at,
        "wrong": wrong[:10] + [{"during load": w} for w in wrong_during[:10]],
    }
    print(json.dumps(out, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "session_kill9.json").write_text(json.dumps(out, indent=2) + "\n")
    if wrong or wrong_during:
        raise SystemExit(f"{len(wrong)} sessions came back wrong")


if __name__ == "__main__":
    main()
