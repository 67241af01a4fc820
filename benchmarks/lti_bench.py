"""LTI 1.3 end to end (docs/lms.md, "LTI 1.3"): an independent platform (lti1p3platform, in this
process, on 127.0.0.1) launches ``wasm-runner serve`` (a process of its own) for one student after
another. Measured per student: **launch -> page** (the platform starts the launch: OIDC login,
the platform's authorisation, the id_token posted, the exercise page back), **launch -> first
check** (the same plus the first server-side check's answer) and **check -> score** (from the
Check's request to the score recorded in the platform's gradebook, through the outbox and AGS).
Goals (issue 35): launch -> first run <= 2 s, score in the gradebook <= 5 s after Check.

    .venv/bin/python benchmarks/lti_bench.py [--students 20] [--out benchmarks/results/lti.json]
"""

from __future__ import annotations

import argparse
import html
import json
import re
import tempfile
import time
from pathlib import Path

import httpx
from _support import ROOT, load_average, machine, percentiles, serve, server_toml

from tests.support.lti_platform import lti_platform

SOLUTION = "name = input()\nprint(f'Hello, {name}!')\n"
_INPUT = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
_ACTION = re.compile(r'<form [^>]*action="([^"]+)"')


def platform_table(entry: dict[str, object]) -> str:
    lines = ["[[lti.platforms]]"]
    for k, v in entry.items():
        lines.append(f"{k} = {json.dumps(v)}")
    return "\n".join(lines) + "\n"


def one_student(browser: httpx.Client, platform_url: str, tool_url: str, n: int,
                scores: object) -> dict[str, float]:  # fmt: skip
    user = f"bench-student-{n}"
    t0 = time.perf_counter()
    r = browser.get(f"{platform_url}/start", params={"user": user, "exercise": "greet", "link": f"link-{n}"})
    r = browser.get(r.headers["location"])  # the tool's login
    r = browser.get(r.headers["location"])  # the platform's authorisation: the auto-posted form
    action = html.unescape(_ACTION.search(r.text).group(1))  # type: ignore[union-attr]
    fields = {html.unescape(k): html.unescape(v) for k, v in _INPUT.findall(r.text)}
    page = browser.post(action, data=fields)
    assert page.status_code == 200, page.text
    t_page = time.perf_counter()
    cfg = json.loads(re.search(r'id="cfg">(.*?)</script>', page.text).group(1))  # type: ignore[union-attr]
    t_check = time.perf_counter()
    answer = browser.post(tool_url + cfg["checkUrl"], json={"code": SOLUTION},
                          headers={"X-Wasm-Runner-Launch": cfg["session"]})  # fmt: skip
    t_answer = time.perf_counter()
    assert answer.status_code == 200 and answer.json()["passed"], answer.text
    deadline = time.monotonic() + 60
    while not scores(user) and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.005)
    t_score = time.perf_counter()
    assert scores(user), f"no score for {user}"  # type: ignore[operator]
    return {"launch_to_page_ms": (t_page - t0) * 1000, "launch_to_first_check_ms": (t_answer - t0) * 1000,
            "check_answer_ms": (t_answer - t_check) * 1000, "check_to_score_ms": (t_score - t_check) * 1000}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=20)
    ap.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, lti_platform() as platform:
        config = Path(tmp) / "server.toml"
        config.write_text(server_toml("bench-key", server={"exercises_dir": str(ROOT / "tests" / "exercises")})
                          + f'[lti]\noutbox_dir = "{tmp}/outbox"\nretry_seconds = 1\n'
                          + platform_table(platform.toml(api_key="bench")))  # fmt: skip
        with serve(config, log=Path(tmp) / "serve.log") as served, httpx.Client(timeout=60, trust_env=False) as browser:
            platform.tool_url = served.url
            one_student(browser, platform.url, served.url, 0, platform.scores_for)  # warm-up (JWKS, token)
            rows = [one_student(browser, platform.url, served.url, n, platform.scores_for)
                    for n in range(1, args.students + 1)]  # fmt: skip
    figures = {name: percentiles([r[name] for r in rows], digits=1) for name in rows[0]}
    report = {"machine": machine(), "load_average": load_average(), "students": args.students, "figures": figures}
    for name, p in figures.items():
        print(f"{name:28s} p50 {p['p50']:8.1f} ms   p90 {p['p90']:8.1f} ms")
    print(f"load average {load_average()}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
