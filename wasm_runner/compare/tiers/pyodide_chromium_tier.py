"""Tier 6: this project's browser tier as learners get it: Pyodide in a Web Worker inside the
playground's opaque-origin sandboxed iframe, in headless Chromium driven by Playwright.

``prepare`` starts the real server (``server:app`` under uvicorn on a free 127.0.0.1 port, auth
off) and one Chromium page on the playground, and waits until Pyodide is ready in the frame. Each
run then goes through the page's own client, ``runner.run(code, {tier: "browser", limits})``, so
the wall deadline and output caps are the ones the browser tier enforces (a fresh worker only after
a limit stopped one). Start-up latency is therefore that of a run on an already-loaded page.

Playwright's sync API is bound to the thread that started it, while the comparison calls ``run``
from a new thread each time: every browser call goes through one dedicated thread.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from ...environment import CHROMIUM
from ...limits import Limits
from ...result import Status
from ..outcome import Outcome
from .base import Tier
from .pyodide_node_tier import find_pyodide

__all__ = ["PyodideChromiumTier", "find_chromium"]

SOURCE_TREE = Path(__file__).resolve().parents[3]  # holds server.py and web/
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # the compare runner may be root; the page's own iframe sandbox still applies
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_S = 90.0
PAGE_READY_S = 120.0  # Pyodide's load in the frame on a busy machine
GUARD_S = 20.0  # past the wall limit, the page itself stops a run the browser tier did not end
SETTLE_S = 5.0  # after that stop, how long the page waits for the run's result
READY_EXPRESSION = "Boolean(window.playground && window.playground.runner.browserInfo)"

# Runs inside the playground page (through the DevTools protocol: the page's CSP forbids eval).
RUN_IN_PAGE = """async ([code, limits, guardMs, settleMs]) => {
  const runner = window.playground.runner;
  const pending = runner.run(code, { tier: "browser", limits });
  const after = (ms) => new Promise((resolve) => setTimeout(() => resolve(null), ms));
  let result = await Promise.race([pending, after(guardMs)]);
  if (result !== null) return { guarded: false, result };
  runner.stop();
  result = await Promise.race([pending, after(settleMs)]);
  return { guarded: true, result };
}"""


def find_chromium() -> str | None:
    """Chromium from ``WASM_RUNNER_CHROMIUM`` or PATH (Debian's package), or None."""
    configured = CHROMIUM.text()
    for candidate in ([configured] if configured else []) + ["chromium", "chromium-browser"]:
        found = shutil.which(candidate)
        if found:
            return found
    return None


class PyodideChromiumTier(Tier):
    name = "pyodide-chromium"
    family = "pyodide"
    description = ("Pyodide in a Web Worker in the playground's sandboxed iframe, headless Chromium: "
                   "wall deadline and output caps by the browser tier; start-up on an already-loaded page")
    grace = GUARD_S + SETTLE_S + 30  # the page stops overstaying runs itself, well before this

    def __init__(self) -> None:
        self.chromium = find_chromium()
        self.pyodide = find_pyodide()
        self._thread: ThreadPoolExecutor | None = None  # the one thread that talks to Playwright
        self._server: subprocess.Popen[bytes] | None = None
        self._base = ""
        self._playwright: Any = None
        self._browser: Any = None
        self._page: Any = None

    def available(self) -> tuple[bool, str]:
        if not self.chromium:
            return False, "chromium not on PATH (apt-get install chromium, or set WASM_RUNNER_CHROMIUM)"
        if importlib.util.find_spec("playwright") is None:
            return False, "the playwright Python package is not installed"
        if not (SOURCE_TREE / "server.py").is_file():
            return False, "server.py not found: this tier runs from a source checkout"
        if not self.pyodide:
            return False, "pyodide npm package not installed (npm ci in web/)"
        try:
            version = subprocess.run([self.chromium, "--version"], capture_output=True, text=True,
                                     timeout=20, check=False).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"{self.chromium} --version failed: {exc}"
        try:
            pyodide_version = json.loads((self.pyodide / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            pyodide_version = "?"
        return True, f"{version or 'chromium'}, pyodide {pyodide_version}"

    # -- set-up -----------------------------------------------------------------------------

    def prepare(self) -> None:
        try:
            self._start_server()
            self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pyodide-chromium")
            self._call(self._open_page, PAGE_READY_S + 60)
        except BaseException:
            self.cleanup()
            raise

    def _start_server(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        command = [sys.executable, "-m", "uvicorn", "server:app", "--app-dir", str(SOURCE_TREE),
                   "--fd", str(sock.fileno()), "--log-level", "warning"]
        env = {**os.environ, "WASM_RUNNER_AUTH": "off"}
        self._server = subprocess.Popen(command, cwd=SOURCE_TREE, env=env, pass_fds=[sock.fileno()],
                                        stdout=subprocess.DEVNULL)
        sock.close()
        self._base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self._server.poll() is not None:
                raise RuntimeError(f"the server exited with {self._server.returncode} while starting")
            try:
                with urllib.request.urlopen(self._base + "/embed.js", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"the server did not answer on {self._base} within {SERVER_START_S:.0f} s")

    def _open_page(self) -> None:
        from playwright.sync_api import sync_playwright

        self._playwright = sync_playwright().start()
        self._browser = self._playwright.chromium.launch(executable_path=self.chromium, args=CHROMIUM_ARGS)
        self._page = self._browser.new_context().new_page()
        self._page.goto(self._base + "/")
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + PAGE_READY_S
        while not self._page.evaluate(READY_EXPRESSION):
            if time.monotonic() > deadline:
                raise RuntimeError(f"Pyodide was not ready in the page within {PAGE_READY_S:.0f} s")
            time.sleep(0.1)

    def _call(self, fn: Any, timeout: float, *args: Any) -> Any:
        assert self._thread, "prepare() first"
        return self._thread.submit(fn, *args).result(timeout=timeout)

    # -- runs -------------------------------------------------------------------------------

    def run(self, source: str, limits: Limits) -> Outcome:
        code = source.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        budget = {"wall_seconds": limits.wall_seconds, "stdout_bytes": limits.stdout_bytes,
                  "stderr_bytes": limits.stderr_bytes}
        guard_ms = int((limits.wall_seconds + GUARD_S) * 1000)
        started = time.perf_counter()
        try:
            reply = self._call(self._run_in_page, self.grace + limits.wall_seconds,
                               code, budget, guard_ms)
        except FutureTimeout:
            return Outcome(Status.TIMEOUT, wall_ms=(time.perf_counter() - started) * 1000, harness_killed=True,
                           message="the page did not answer (the browser is stuck)")
        wall_ms = (time.perf_counter() - started) * 1000
        result = reply.get("result")
        if not isinstance(result, dict):
            return Outcome(Status.TIMEOUT, wall_ms=wall_ms, harness_killed=True,
                           message="the browser tier did not end the run; the page was reloaded")
        try:
            status = Status(result.get("status"))
        except ValueError:
            return Outcome(Status.INTERNAL_ERROR, wall_ms=wall_ms,
                           message=f"unknown status from the browser tier: {result.get('status')!r}")
        return Outcome(
            status=status,
            exit_code=result.get("exit_code"),
            stdout=result.get("stdout") or "",
            stderr=result.get("stderr") or "",
            wall_ms=wall_ms,
            limit=result.get("limit"),
            message=result.get("message") or "",
            harness_killed=bool(reply.get("guarded")),
        )

    def _run_in_page(self, code: str, budget: dict[str, Any], guard_ms: int) -> dict[str, Any]:
        reply = self._page.evaluate(RUN_IN_PAGE, [code, budget, guard_ms, int(SETTLE_S * 1000)])
        if not isinstance(reply.get("result"), dict):  # the run never settled: start the page afresh
            self._page.reload()
            self._wait_ready()
        return reply

    def abort(self) -> None:
        """Nothing to do from outside: the page stops an overstaying run itself (``GUARD_S``)."""

    # -- clean-up ---------------------------------------------------------------------------

    def _close_browser(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = self._page = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None

    def cleanup(self) -> None:
        if self._thread is not None:
            try:
                self._call(self._close_browser, 60)
            finally:
                self._thread.shutdown(wait=False)
                self._thread = None
        if self._server is not None:
            self._server.terminate()
            try:
                self._server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._server.kill()
                self._server.wait()
            self._server = None
