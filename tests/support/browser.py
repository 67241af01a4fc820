"""Helpers for the browser suites: the real server under uvicorn on 127.0.0.1 and Debian's
Chromium driven by Playwright (never a downloaded browser).

The playground's CSP forbids eval, so waits poll with ``page.evaluate`` (which runs through the
DevTools protocol) instead of ``wait_for_function`` (which needs eval in the page).
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright import sync_api as playwright_api

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("WASM_RUNNER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
READY_SECONDS = 90  # Pyodide load on a busy 2-core machine


def _free_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def start_uvicorn(
    app: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``uvicorn app`` on a socket bound to a free loopback port; return (process, base URL)."""
    sock = _free_socket()
    port = sock.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--fd",
        str(sock.fileno()),
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(
        command, cwd=REPO, env={**os.environ, **(env or {})}, pass_fds=[sock.fileno()]
    )
    sock.close()
    return process, _answering(process, f"http://127.0.0.1:{port}", f"uvicorn {app}")


def start_serve(env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``wasm-runner serve --no-auth`` (the CLI a course site runs) on a free loopback port
    with the environment ``env`` (the whole of it); return (process, base URL) once it answers."""
    sock = _free_socket()
    port = sock.getsockname()[1]
    sock.close()
    command = [str(Path(sys.executable).with_name("wasm-runner")), "serve", "--no-auth", "--port", str(port)]
    process = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.DEVNULL)
    return process, _answering(process, f"http://127.0.0.1:{port}", "wasm-runner serve")


def _answering(process: subprocess.Popen[bytes], base: str, what: str) -> str:
    """``base`` once it serves ``/embed.js``; ``RuntimeError`` when ``process`` exits or 60 s pass."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(base + "/embed.js", timeout=2) as response:
                if response.status == 200:
                    return base
        except OSError:
            time.sleep(0.2)
    process.terminate()
    raise RuntimeError(f"{what} did not answer on {base}")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


# One server and one browser for every browser suite in the test process, closed at exit.
_shared: dict[str, Any] = {}


def _close_shared() -> None:
    if "browser" in _shared:
        _shared.pop("browser").close()
        _shared.pop("playwright").stop()
    if "server" in _shared:
        stop_process(_shared.pop("server"))


def shared_server() -> str:
    if "server_url" not in _shared:
        if not (REPO / "web" / "node_modules" / "pyodide").is_dir():
            pytest.fail(
                "web/node_modules is missing: run scripts/setup.sh (npm ci in web/)"
            )
        # the Pyodide snapshot first (cached by `wasm-runner warm`), so every page load uses it
        from wasm_runner.browser.locations import web_dir
        from wasm_runner.browser.pyodide_snapshot import SnapshotStore

        SnapshotStore(web_dir()).ensure()
        process, base = start_uvicorn("server:app", {
            "WASM_RUNNER_AUTH": "off",
            "WASM_RUNNER_EXERCISES_DIR": str(REPO / "tests" / "exercises"),
        })
        _shared["server"], _shared["server_url"] = process, base
        atexit.register(_close_shared)
    return _shared["server_url"]


def shared_browser() -> Any:
    if "browser" not in _shared:
        if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
            pytest.fail(
                f"{CHROMIUM} is missing: scripts/setup.sh installs Debian's chromium"
            )
        _shared["playwright"] = playwright_api.sync_playwright().start()
        _shared["browser"] = _shared["playwright"].chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS
        )
        atexit.register(_close_shared)
    return _shared["browser"]


def poll(page: Any, expression: str, timeout: float = 30.0, arg: Any = None) -> Any:
    """Evaluate ``expression`` until it is truthy; return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = (
            page.evaluate(expression, arg)
            if arg is not None
            else page.evaluate(expression)
        )
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {expression}")
        time.sleep(0.05)


def open_playground(url: str = "/", *, viewport: dict[str, int] | None = None) -> Any:
    """A fresh context on the playground (``url``: a path on the shared server, or a full URL),
    waited until Pyodide is ready in the sandbox frame."""
    if url.startswith("/"):
        url = shared_server() + url
    context = shared_browser().new_context(
        viewport=viewport or {"width": 1280, "height": 800}
    )
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(url)
    poll(
        page,
        "window.playground && window.playground.runner.browserInfo",
        timeout=READY_SECONDS,
    )
    return page


RUN_IN_BROWSER = """async ([code, options]) => {
  const runner = window.playground.runner;
  const chunks = [];
  const result = await runner.run(code, { tier: "browser", ...options,
    onOutput: (o) => chunks.push(o) });
  result.chunks = chunks;
  return result;
}"""

RUN_AND_STOP = """async ([code, settleMs]) => {
  const runner = window.playground.runner;
  let started;
  const go = new Promise((resolve) => { started = resolve; });
  const pending = runner.run(code, { tier: "browser", onOutput: (o) => { if (o.text.includes("go")) started(); } });
  await go;
  if (settleMs) await new Promise((resolve) => setTimeout(resolve, settleMs));
  const t0 = performance.now();
  runner.stop();
  const result = await pending;
  result.stop_latency_ms = performance.now() - t0;
  return result;
}"""


def run_in_browser(page: Any, code: str, **options: Any) -> dict[str, Any]:
    return page.evaluate(RUN_IN_BROWSER, [code, options])


@contextmanager
def playground_page(url: str, *, internet: bool = True) -> Iterator[Any]:
    """The playground at ``url`` in a context of the shared browser, ready to run; its page
    errors in ``page.errors``. ``internet=False``: every request to a host other than
    127.0.0.1 fails as with no connection."""
    context = shared_browser().new_context()
    if not internet:
        context.route("**/*", lambda route: route.continue_() if urlsplit(route.request.url).hostname == "127.0.0.1"
                      else route.abort("internetdisconnected"))
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(url + "/")
    poll(page, "window.playground && window.playground.runner.browserInfo", timeout=READY_SECONDS)
    try:
        yield page
    finally:
        context.close()


def run_with_key(page: Any, key: str, code: str) -> dict[str, Any]:
    """``code`` run on the browser tier with the playground's API key set to ``key``."""
    page.evaluate("(key) => { window.playground.runner.apiKey = key; }", key)
    return run_in_browser(page, code)


def run_and_stop(page: Any, code: str, settle_ms: int = 0) -> dict[str, Any]:
    """Run ``code`` (which prints 'go' first) and press Stop once 'go' arrived (+ ``settle_ms``)."""
    return page.evaluate(RUN_AND_STOP, [code, settle_ms])


SEEN = """() => {
  const out = document.getElementById('output');
  const text = [...out.querySelectorAll('span[data-stream]')].map((s) => s.textContent).join('');
  const end = out.querySelector('.out-end');
  const note = out.querySelector('.out-note');
  return { text, end: end ? end.textContent : null, note: note ? note.textContent : null,
    images: out.querySelectorAll('img.out-image').length, status: document.body.dataset.lastStatus || null };
}"""


def choose_tier(page: Any, tier: str) -> None:
    """Pick the playground's tier the way a student does (the select)."""
    page.select_option("#tier", tier)


def run_via_ui(
    page: Any,
    code: str,
    tier: str,
    answers: list[str] | None = None,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Run ``code`` with the Run button on ``tier``, typing ``answers`` into the input line as
    the program asks; return what the student sees: {text, end, note, images, status, result}."""
    choose_tier(page, tier)
    page.evaluate("(code) => window.playground.editor.setCode(code)", code)
    page.evaluate("delete document.body.dataset.lastStatus")
    page.click("#run")
    pending = list(answers or [])
    deadline = time.monotonic() + timeout
    while True:
        state = page.evaluate(
            "({done: Boolean(document.body.dataset.lastStatus), asking: !document.getElementById('input-form').hidden})"
        )
        if state["done"]:
            break
        if state["asking"] and pending:
            page.fill("#input-box", pending.pop(0))
            page.press("#input-box", "Enter")
            # answered once the form closed, or reopened (cleared) for the next question
            poll(
                page,
                "document.getElementById('input-form').hidden || !document.getElementById('input-box').value || document.body.dataset.lastStatus",
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"the run did not end within {timeout} s")
        time.sleep(0.03)
    seen = page.evaluate(SEEN)
    seen["result"] = page.evaluate("window.lastResult")
    return seen


def end_sentence(end_line: str | None) -> str:
    """The end line without where it ran and how long it took (those differ by tier on purpose)."""
    return (end_line or "").split(" — ")[0]


CHECK_EXERCISE = """async (code) => {
  const ex = window.playground.exercise;
  await ex.ready;
  window.playground.editor.setCode(code);
  return await ex.check();
}"""
"""Put ``code`` in the playground's editor and press its exercise's Check; the report."""


def send_html(handler: Any, body: bytes) -> None:
    """Answer a course page's request (an ``http.server`` handler) with the HTML ``body``."""
    handler.send_response(200)
    handler.send_header("content-type", "text/html; charset=utf-8")
    handler.end_headers()
    handler.wfile.write(body)
