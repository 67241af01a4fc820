"""The first minute on a fresh machine: ``scripts/serve.sh`` with the packages installed and an
empty compiled-module cache, timed to the page, to a result in the browser tier and to the first
server-tier result.

Runs the real ``scripts/serve.sh`` (set-up with ``--serve``: only checks, the packages being
installed, then ``wasm-runner serve --no-auth``) with ``WASM_RUNNER_CACHE`` set to a new empty
folder (never the user's own cache), and Debian's Chromium (headless, via Playwright) for the
browser tier. Not a test: it only measures and reports. Times are seconds from the start of
``serve.sh``:

- serve_started: the set-up (checks only) is done and the server starts;
- page: ``GET /`` answers 200;
- browser_result: the playground page opened in Chromium then, ``print(6*7)`` run in the browser
  tier, its result back in the page;
- server_result: the first ``POST /api/run`` of ``print(6*7)`` that answers 200 (one try a
  second; until then ``503 warming``);
- also the CPU seconds the server process used until then, and the load average meanwhile.

Usage: ``python benchmarks/first_start.py [--port 9500] [--out benchmarks/results/first_start.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 - after the sys.path line above
from playwright.sync_api import sync_playwright  # noqa: E402

BROWSER_RESULT = """async () => {
  while (!window.playground) await new Promise((r) => setTimeout(r, 10));
  const result = await window.playground.runner.run("print(6*7)", { tier: "browser" });
  return { status: result.status, stdout: result.stdout };
}"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` itself (from /proc; not of the set-up it ran before)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, default=9500)
    p.add_argument("--timeout", type=float, default=1800.0, help="give up after this many seconds")
    p.add_argument("--out", help="write the figures as JSON here")
    args = p.parse_args(argv)
    url = f"http://127.0.0.1:{args.port}"
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="wasm-runner-first-start-") as tmp:
        env = {**os.environ, "WASM_RUNNER_CACHE": str(Path(tmp) / "cache")}
        env.pop("WASM_RUNNER_CONFIG", None)
        log = open(Path(tmp) / "serve.log", "w")  # noqa: SIM115 - closed below
        start = time.monotonic()
        proc = subprocess.Popen(["bash", "scripts/serve.sh", "--port", str(args.port), "--log-level", "warning"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        out: dict[str, Any] = {}
        try:
            while time.monotonic() - start < args.timeout:
                if "serve_started_s" not in out and "auth is OFF" in (Path(tmp) / "serve.log").read_text():
                    out["serve_started_s"] = round(time.monotonic() - start, 1)  # set-up checked
                try:
                    if httpx.get(url + "/", timeout=10).status_code == 200:
                        out["page_s"] = round(time.monotonic() - start, 1)
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page()
                page.set_default_timeout(args.timeout * 1000)
                page.goto(url + "/")
                got = page.evaluate(BROWSER_RESULT)
                out["browser_result_s"] = round(time.monotonic() - start, 1)
                out["browser_stdout"] = got["stdout"]
                note = page.locator("#server-note")
                out["page_note"] = note.text_content() if note.is_visible() else None
                browser.close()
            while time.monotonic() - start < args.timeout:
                loads.append(os.getloadavg()[0])
                r = httpx.post(url + "/api/run", json={"code": "print(6*7)"}, timeout=120)
                if r.status_code == 200:
                    out["server_result_s"] = round(time.monotonic() - start, 1)
                    out["server_stdout"] = r.json()["stdout"]
                    break
                out.setdefault("while_warming", {"status": r.status_code, "code": r.json()["error"]["code"],
                                                 "retry_after": r.headers.get("Retry-After")})  # fmt: skip
                time.sleep(1.0)
            out["server_cpu_s"] = round(cpu_seconds(proc.pid), 1)  # serve.sh execs the server
        finally:
            proc.terminate()
            try:
                proc.wait(300)  # it drains first
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(60)
            log.close()
        out["log_tail"] = (Path(tmp) / "serve.log").read_text()[-1500:]
    out.update({
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "load_avg_1min": {"start": round(loads[0], 1), "max": round(max(loads), 1)},
        "command": "python benchmarks/first_start.py",
    })
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
