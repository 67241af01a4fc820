"""A class at once: N simulated students for M minutes against one URL (`serve` or `cluster`).

    python benchmarks/classroom.py --url http://127.0.0.1:8000 --students 30 --minutes 5 \\
        --pid $(pgrep -f 'wasm-runner serve')          # CPU and RSS of the server (and children)
    python benchmarks/classroom.py --url ... --scenario six-thinkers
    python benchmarks/classroom.py --url ... --students 8 --minutes 1 --think-scale 0.2  # short

Each student does what students do, with think times drawn from realistic ranges (``--think-scale``
shrinks every think time and every delay before answering ``input()``, for short runs):

- edit-run cycles of short programs (``POST /api/run``; checked: stdout is what it should be);
- programs that ask ``input()`` over ``/api/run/ws``, answered after 5-60 s (every one must end
  with the right output: a parked run resumes);
- an endless loop, ended by its CPU limit or by Stop (a ``cancel`` message over the WebSocket);
- a traceback, a plot (``display: "figures"``), an exercise check (``/api/exercises/.../check``,
  when the server has exercises; else skipped);
- a few students only open a session and idle.

Every student sends its own user id (``X-Wasm-Runner-User``; ``user`` in a WebSocket's first
message) unless ``--no-user-ids``. The report: per action p50/p95 latency from Run to result (for
``input()`` programs: from the answer to the result, and from Run to the first prompt), refusals by
code, answers that were wrong, the running/queued/waiting counts of ``/healthz`` and the CPU and
RSS of ``--pid`` (with its children) over time; written as JSON (``--out``).

``--scenario six-thinkers``: six students start ``input()`` programs over the WebSocket and think;
a seventh runs ``print(1)`` (``POST /api/run``) ten times; then the six answer. The goal is the
seventh's answers in <= 0.2 s and all six programs completed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets
from _support import RESULTS, pct

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

# short programs of an edit-run cycle: (code, expected stdout)
PRINTS: list[tuple[str, str]] = [
    ("print('Hello, world!')", "Hello, world!\n"),
    ("for i in range(5):\n    print(i * i)", "0\n1\n4\n9\n16\n"),
    ("words = 'the quick brown fox'.split()\nprint(len(words), max(words, key=len))", "4 quick\n"),
    ("def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)\nprint(fact(10))", "3628800\n"),
    ("total = 0\nfor n in range(1, 101):\n    total += n\nprint(total)", "5050\n"),
    ("marks = {'ada': 18, 'bob': 12}\nfor k, v in sorted(marks.items()):\n    print(k, v)",
     "ada 18\nbob 12\n"),
    ("s = 'racecar'\nprint(s == s[::-1])", "True\n"),
    ("nums = [3, 1, 4, 1, 5, 9, 2, 6]\nnums.sort()\nprint(nums)", "[1, 1, 2, 3, 4, 5, 6, 9]\n"),
]  # fmt: skip
TRACEBACKS = [
    "x = [1, 2, 3]\nprint(x[3])",
    "print(undefined_name)",
    "def f(n):\n    return n / 0\nf(1)",
    "int('twelve')",
]
PLOT = (
    "import matplotlib.pyplot as plt\n"
    "xs = list(range(20))\nplt.plot(xs, [x * x for x in xs])\nplt.title('squares')\nplt.show()"
)
INPUTS: list[tuple[str, list[str], str]] = [
    ("name = input('Your name? ')\nprint('Hello,', name)", ["Ada"], "Your name? Hello, Ada\n"),
    ("a = int(input('a? '))\nb = int(input('b? '))\nprint('sum', a + b)", ["2", "40"],
     "a? b? sum 42\n"),
    ("age = int(input('Age? '))\nprint('adult' if age >= 18 else 'minor')", ["15"],
     "Age? minor\n"),
]  # fmt: skip
ENDLESS = "n = 0\nwhile True:\n    n += 1"
EXERCISE_ANSWER = (  # examples/exercises/add-numbers: its tests call add()
    "def add(a, b):\n    return a + b\n\n\nif __name__ == '__main__':\n"
    "    a = int(input())\n    b = int(input())\n    print(add(a, b))\n"
)

# what a student does next, with its weight
ACTIONS = {
    "print": 50, "traceback": 12, "input": 15, "endless": 5, "plot": 6, "exercise": 8,
    "session": 4,
}  # fmt: skip


def seconds(values: list[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` for the report: None when nothing was timed."""
    return round(pct(values, q), 3) if values else None


@dataclass
class Report:
    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    refusals: Counter[str] = field(default_factory=Counter)
    wrong: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)  # transport errors, 5xx
    actions: Counter[str] = field(default_factory=Counter)
    completed: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    samples: list[dict[str, Any]] = field(default_factory=list)
    wrong_examples: list[str] = field(default_factory=list)

    def refused(self, action: str, code: str) -> None:
        self.refusals[f"{action}:{code}"] += 1

    def bad(self, action: str, why: str) -> None:
        self.wrong[action] += 1
        if len(self.wrong_examples) < 20:
            self.wrong_examples.append(f"{action}: {why[:300]}")

    def summary(self) -> dict[str, Any]:
        return {
            "actions": dict(self.actions),
            "completed": dict(self.completed),
            "latency_s": {
                k: {"n": len(v), "p50": seconds(v, 0.5), "p95": seconds(v, 0.95), "max": seconds(v, 1.0)}
                for k, v in sorted(self.latency.items())
            },
            "refusals": dict(self.refusals),
            "refusals_total": sum(self.refusals.values()),
            "wrong": dict(self.wrong),
            "wrong_examples": self.wrong_examples,
            "errors": dict(self.errors),
            "statuses": dict(self.statuses),
        }


class Student:
    def __init__(self, n: int, args: argparse.Namespace, report: Report, rng: random.Random) -> None:
        self.n = n
        self.args = args
        self.report = report
        self.rng = rng
        self.user = f"student-{n:03d}"
        headers = {"Content-Type": "application/json"}
        if args.key:
            headers["Authorization"] = f"Bearer {args.key}"
        if not args.no_user_ids:
            headers["X-Wasm-Runner-User"] = self.user
        self.headers = headers
        self.http = httpx.AsyncClient(base_url=args.url, headers=headers, timeout=120)

    def think(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high) * self.args.think_scale

    async def post(self, action: str, path: str, body: dict[str, Any]) -> tuple[float, Any] | None:
        started = time.monotonic()
        try:
            r = await self.http.post(path, json=body)
        except httpx.HTTPError as exc:
            self.report.errors[f"{action}:{type(exc).__name__}"] += 1
            return None
        took = time.monotonic() - started
        if r.status_code == 429 or r.status_code == 503:
            self.report.refused(action, r.json().get("error", {}).get("code", str(r.status_code)))
            return None
        if r.status_code >= 500:
            self.report.errors[f"{action}:{r.status_code}"] += 1
            return None
        if r.status_code >= 400:
            self.report.bad(action, f"HTTP {r.status_code} {r.text}")
            return None
        return took, r.json()

    async def run(self, action: str, code: str, expect_status: set[str], **extra: Any) -> Any:
        got = await self.post(action, "/api/run", {"code": code, **extra})
        if got is None:
            return None
        took, body = got
        self.report.statuses[f"{action}:{body['status']}"] += 1
        if body["status"] not in expect_status:
            self.report.bad(action, f"status {body['status']}: {body.get('message')}")
            return None
        self.report.latency[action].append(took)
        self.report.completed[action] += 1
        return body

    async def do_print(self) -> None:
        code, out = self.rng.choice(PRINTS)
        body = await self.run("print", code, {"ok"})
        if body is not None and body["stdout"] != out:
            self.report.bad("print", f"stdout {body['stdout']!r}")

    async def do_traceback(self) -> None:
        body = await self.run("traceback", self.rng.choice(TRACEBACKS), {"error"})
        if body is not None and "Traceback" not in body["stderr"] + (body.get("message") or ""):
            self.report.bad("traceback", "no traceback")

    async def do_plot(self) -> None:
        body = await self.run("plot", PLOT, {"ok"}, display="figures")
        if body is not None and not body.get("outputs"):
            self.report.bad("plot", "no figure in outputs")

    async def do_exercise(self) -> None:
        if self.args.exercise is None:
            return
        got = await self.post(
            "exercise", f"/api/exercises/{self.args.exercise}/check", {"code": EXERCISE_ANSWER}
        )
        if got is None:
            return
        took, body = got
        if not body.get("passed", body.get("ok")):
            self.report.bad("exercise", json.dumps(body)[:300])
            return
        self.report.latency["exercise"].append(took)
        self.report.completed["exercise"] += 1

    async def do_session(self) -> None:
        got = await self.post("session", "/api/sessions", {})
        if got is None:
            return
        took, body = got
        self.report.latency["session_open"].append(took)
        sid = body["id"]
        cell = await self.post("session", f"/api/sessions/{sid}/run", {"code": "x = 41\nprint(x + 1)"})
        if cell is not None and cell[1]["stdout"] == "42\n":
            self.report.latency["session_cell"].append(cell[0])
            self.report.completed["session"] += 1
        await asyncio.sleep(self.think(30, 120))  # the idle tab
        try:
            await self.http.delete(f"/api/sessions/{sid}")
        except httpx.HTTPError:
            pass

    def ws_url(self) -> str:
        return self.args.url.replace("http://", "ws://").replace("https://", "wss://") + "/api/run/ws"

    def first_message(self, code: str, **extra: Any) -> str:
        msg: dict[str, Any] = {"type": "run", "code": code, **extra}
        if self.args.key:
            msg["api_key"] = self.args.key
        if not self.args.no_user_ids:
            msg["user"] = self.user
        return json.dumps(msg)

    async def do_input(self, delays: tuple[float, float] = (5, 60)) -> None:
        code, answers, out = self.rng.choice(INPUTS)
        self.report.actions["input_started"] += 1
        started = time.monotonic()
        try:
            async with websockets.connect(self.ws_url(), open_timeout=60, max_size=None) as ws:
                await ws.send(self.first_message(code))
                stdout = ""
                pending = list(answers)
                answered_at = None
                while True:
                    msg = json.loads(await asyncio.wait_for(ws.recv(), 400))
                    if msg["type"] == "error":
                        self.report.refused("input", msg["error"]["code"])
                        return
                    if msg["type"] == "stdout":
                        stdout += msg["data"]
                    elif msg["type"] == "input_wanted":
                        if len(pending) == len(answers):
                            self.report.latency["input_first_prompt"].append(time.monotonic() - started)
                        else:
                            self.report.latency["input_next_prompt"].append(time.monotonic() - answered_at)  # type: ignore[operator]
                        await asyncio.sleep(self.think(*delays))
                        answered_at = time.monotonic()
                        await ws.send(json.dumps({"type": "stdin", "data": pending.pop(0) + "\n"}))
                    elif msg["type"] == "result":
                        result = msg["result"]
                        self.report.statuses[f"input:{result['status']}"] += 1
                        if answered_at is not None:
                            self.report.latency["input_answer_to_result"].append(time.monotonic() - answered_at)
                        if result["status"] != "ok" or result["stdout"] != out:
                            self.report.bad("input", f"{result['status']} {result['stdout']!r} {result.get('message')}")
                        else:
                            self.report.completed["input"] += 1
                        return
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            self.report.errors[f"input:{type(exc).__name__}"] += 1

    async def do_endless(self) -> None:
        if self.rng.random() < 0.5:  # left to its CPU limit
            await self.run("endless_limit", ENDLESS, {"cpu_limit", "timeout"})
            return
        started = time.monotonic()  # stopped with Stop after a few seconds
        try:
            async with websockets.connect(self.ws_url(), open_timeout=60) as ws:
                await ws.send(self.first_message(ENDLESS))
                stop_after = self.rng.uniform(0.5, 1.5)
                stopped_at = None
                while True:
                    timeout = 60 if stopped_at else stop_after
                    try:
                        msg = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                    except TimeoutError:
                        stopped_at = time.monotonic()
                        await ws.send(json.dumps({"type": "cancel"}))
                        continue
                    if msg["type"] == "error":
                        self.report.refused("endless_stop", msg["error"]["code"])
                        return
                    if msg["type"] == "start":
                        started = time.monotonic()
                    if msg["type"] == "result":
                        status = msg["result"]["status"]
                        self.report.statuses[f"endless_stop:{status}"] += 1
                        if status not in ("cancelled", "cpu_limit", "timeout"):
                            self.report.bad("endless_stop", status)
                        elif stopped_at is not None:
                            self.report.latency["endless_stop"].append(time.monotonic() - stopped_at)
                            self.report.completed["endless_stop"] += 1
                        return
        except (OSError, TimeoutError, websockets.WebSocketException) as exc:
            self.report.errors[f"endless_stop:{type(exc).__name__}"] += 1
        del started

    async def live(self, until: float, idle: bool) -> None:
        await asyncio.sleep(self.rng.uniform(0, 20) * self.args.think_scale)  # the class arrives
        if idle:
            self.report.actions["idle"] += 1
            await self.do_session()
            return
        names = list(ACTIONS)
        weights = [ACTIONS[a] for a in names]
        while time.monotonic() < until:
            action = self.rng.choices(names, weights)[0]
            self.report.actions[action] += 1
            await getattr(self, f"do_{action}")()
            await asyncio.sleep(self.think(8, 40))  # reading, editing, thinking
        await self.http.aclose()


# -- sampling the server ---------------------------------------------------------------------
def _tree(pids: list[int]) -> list[int]:
    """``pids`` and all their descendants (a cluster's replicas, Redis, HAProxy)."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children[ppid].append(int(entry.name))
    out, todo = [], list(pids)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def _cpu_rss(pids: list[int]) -> tuple[float, float]:
    cpu = rss = 0.0
    for pid in _tree(pids):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / CLK_TCK
            rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
    return cpu, rss / (1 << 20)


async def sample(args: argparse.Namespace, report: Report, stop: asyncio.Event) -> None:
    async with httpx.AsyncClient(base_url=args.url, timeout=10) as client:
        t0 = time.monotonic()
        last_cpu, last_t = _cpu_rss(args.pid)[0] if args.pid else 0.0, t0
        while not stop.is_set():
            entry: dict[str, Any] = {"t": round(time.monotonic() - t0, 1)}
            try:
                health = (await client.get("/healthz")).json()
                for k in ("running", "queued", "waiting", "sessions"):
                    entry[k] = health.get(k)
            except (httpx.HTTPError, ValueError):
                entry["healthz"] = "failed"
            if args.pid:
                cpu, rss = _cpu_rss(args.pid)
                now = time.monotonic()
                entry["cpu_cores"] = round((cpu - last_cpu) / max(now - last_t, 1e-3), 2)
                entry["rss_mb"] = round(rss)
                last_cpu, last_t = cpu, now
            report.samples.append(entry)
            try:
                await asyncio.wait_for(stop.wait(), args.sample_seconds)
            except TimeoutError:
                pass


def sample_summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in ("running", "queued", "waiting", "cpu_cores", "rss_mb"):
        values = [s[k] for s in samples if isinstance(s.get(k), (int, float))]
        if values:
            out[k] = {"mean": round(statistics.fmean(values), 2), "max": max(values)}
    return out


# -- scenarios -------------------------------------------------------------------------------
async def classroom(args: argparse.Namespace) -> dict[str, Any]:
    report = Report()
    rng = random.Random(args.seed)
    stop = asyncio.Event()
    sampler = asyncio.ensure_future(sample(args, report, stop))
    until = time.monotonic() + args.minutes * 60
    idle = set(rng.sample(range(args.students), k=max(1, args.students // 10)))
    students = [Student(n, args, report, random.Random(rng.random())) for n in range(args.students)]
    started = time.monotonic()
    await asyncio.gather(*(s.live(until, n in idle) for n, s in enumerate(students)))
    elapsed = time.monotonic() - started
    await asyncio.sleep(args.sample_seconds)
    stop.set()
    await sampler
    summary = report.summary()
    summary["input_programs"] = {
        "started": report.actions["input_started"],
        "completed": report.completed["input"],
    }
    summary["server"] = sample_summary(report.samples)
    summary["elapsed_s"] = round(elapsed, 1)
    summary["samples"] = report.samples
    return summary


async def six_thinkers(args: argparse.Namespace) -> dict[str, Any]:
    report = Report()
    student_args = argparse.Namespace(**{**vars(args), "think_scale": 1.0})
    thinkers = [Student(n, student_args, report, random.Random(n)) for n in range(6)]
    seventh = Student(6, student_args, report, random.Random(6))
    prompted = 0
    answer_now = asyncio.Event()
    completed: list[bool] = []

    async def think(s: Student) -> None:
        nonlocal prompted
        msg: dict[str, Any] = {}
        async with websockets.connect(s.ws_url(), open_timeout=60) as ws:
            await ws.send(s.first_message("name = input('Name? ')\nprint('hi', name)"))
            while True:
                msg = json.loads(await asyncio.wait_for(ws.recv(), 600))
                if msg["type"] == "error":
                    report.refused("thinker", msg["error"]["code"])
                    completed.append(False)
                    return
                if msg["type"] == "input_wanted":
                    prompted += 1
                    await answer_now.wait()
                    await ws.send(json.dumps({"type": "stdin", "data": f"s{s.n}\n"}))
                if msg["type"] == "result":
                    completed.append(msg["result"]["stdout"] == f"Name? hi s{s.n}\n")
                    return

    tasks = [asyncio.ensure_future(think(s)) for s in thinkers]
    end = time.monotonic() + 120
    while prompted < 6 and time.monotonic() < end and not all(t.done() for t in tasks):
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)  # all six are thinking
    async with httpx.AsyncClient(base_url=args.url, timeout=60) as client:
        health = (await client.get("/healthz")).json()
    answers: list[dict[str, Any]] = []
    for _ in range(10):
        started = time.monotonic()
        r = await seventh.http.post("/api/run", json={"code": "print(1)"})
        took = time.monotonic() - started
        answers.append({"status": r.status_code, "seconds": round(took, 3),
                        "code": r.json().get("error", {}).get("code") if r.status_code != 200 else None})  # fmt: skip
        await asyncio.sleep(0.5)
    answer_now.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await seventh.http.aclose()
    ok = [a["seconds"] for a in answers if a["status"] == 200]
    return {
        "thinkers_prompted": prompted,
        "health_while_thinking": health,
        "seventh_print1": answers,
        "seventh_ok": len(ok),
        "seventh_p50_s": seconds(ok, 0.5),
        "seventh_max_s": seconds(ok, 1.0),
        "thinkers_completed": sum(completed),
        "refusals": dict(report.refusals),
    }


def _has_exercise(args: argparse.Namespace) -> bool:
    """Whether the server serves ``args.exercise`` (a server without exercises answers 404)."""
    headers = {"Authorization": f"Bearer {args.key}"} if args.key else {}
    r = httpx.get(f"{args.url}/api/exercises/{args.exercise}", headers=headers, timeout=30)
    return r.status_code == 200


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--key", default=None, help="API key (none for a --no-auth server)")
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--think-scale", type=float, default=1.0, help="multiply every think time")
    p.add_argument("--scenario", choices=("class", "six-thinkers"), default="class")
    p.add_argument("--exercise", default="add-numbers", help="exercise id to check ('' for none)")
    p.add_argument("--no-user-ids", action="store_true", help="send no per-student user id")
    p.add_argument("--pid", type=int, action="append", default=[],
                   help="server process to sample (CPU, RSS, with its children); repeatable")
    p.add_argument("--sample-seconds", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--out", type=Path, default=None, help="JSON file (default results/classroom-*.json)")
    args = p.parse_args(argv)
    args.exercise = args.exercise or None
    if args.exercise is not None and not _has_exercise(args):  # skipped, as the description says
        print(f"the server has no exercise {args.exercise!r}: exercise checks are skipped", file=sys.stderr)
        args.exercise = None
    scenario = six_thinkers if args.scenario == "six-thinkers" else classroom
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    figures = asyncio.run(scenario(args))
    out = {
        "benchmark": "classroom", "scenario": args.scenario, "date": started,
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores",
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "students": args.students, "minutes": args.minutes, "think_scale": args.think_scale,
        **figures,
    }  # fmt: skip
    path = args.out or RESULTS / f"classroom-{args.scenario}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1) + "\n")
    shown = {k: v for k, v in out.items() if k != "samples"}
    print(json.dumps(shown, indent=1))
    print(f"written to {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
