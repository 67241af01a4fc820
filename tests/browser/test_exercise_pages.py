"""The playground and the embed load every exercise, in real headless Chromium against real
servers: the shipped server-only example (``examples/exercises/add-numbers``) in tier ``auto``
shows its instructions and starter and checks on the server, its title once; a course page whose
origin is not in the runner's ``cors_origins``, or a runner that wants an API key, is told so for
the page's author (in the element and the console), not as a fault of the server.

Two runners (``wasm-runner serve`` under uvicorn on 127.0.0.1): A without keys, allowing one
course origin; B requiring keys, allowing the same course origin. Two course sites on other
ports: the allowed one and one that is not."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.support.browser import (CHECK_EXERCISE, READY_SECONDS, poll, send_html, shared_browser,
                             start_uvicorn, stop_process)

from wasm_runner.browser.locations import web_dir
from wasm_runner.browser.pyodide_snapshot import SnapshotStore
from wasm_runner.exercises import load_exercise

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "exercises"
ADD = load_exercise(EXAMPLES / "add-numbers")
SCREENSHOTS = Path(os.environ.get("WASM_RUNNER_SCREENSHOTS", "/tmp/wasm-runner-screens"))
AUTHOR_ORIGIN = "Add \"{page}\" to the server's cors_origins setting"


class _Course(BaseHTTPRequestHandler):
    """A course page: /a embeds runner A, /b runner B (``runners``: path -> runner URL)."""

    runners: dict[str, str] = {}

    def do_GET(self) -> None:
        runner = self.runners.get(self.path)
        if runner is None:
            self.send_response(404)
            self.end_headers()
            return
        body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Course page</title>
<script type="module" src="{runner}/embed.js"></script></head>
<body><h1>Week 1</h1>
<wasm-runner id="ex" tier="auto" exercise="add-numbers"></wasm-runner>
<wasm-runner id="run" tier="server" readonly>print(6 * 7)</wasm-runner>
</body></html>""".encode()
        send_html(self, body)

    def log_message(self, *args: object) -> None:
        pass


def _course_site() -> ThreadingHTTPServer:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Course)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def _url(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}"


@pytest.fixture(scope="module")
def sites() -> Iterator[dict[str, str]]:
    SnapshotStore(web_dir()).ensure()
    allowed, other = _course_site(), _course_site()
    common = {"WASM_RUNNER_EXERCISES_DIR": str(EXAMPLES), "WASM_RUNNER_CORS_ORIGINS": _url(allowed)}
    open_runner, open_base = start_uvicorn("server:app", {**common, "WASM_RUNNER_AUTH": "off"})
    keyed_runner, keyed_base = start_uvicorn("server:app", {
        **common, "WASM_RUNNER_AUTH": "on", "WASM_RUNNER_API_KEYS": "course:not-in-the-page-0123456789"})
    _Course.runners = {"/a": open_base, "/b": keyed_base}
    try:
        yield {"runner": open_base, "keyed": keyed_base, "allowed": _url(allowed), "other": _url(other)}
    finally:
        for httpd in (allowed, other):
            httpd.shutdown()
        stop_process(open_runner)
        stop_process(keyed_runner)


def _page(url: str, viewport: dict[str, int] | None = None) -> Any:
    context = shared_browser().new_context(viewport=viewport or {"width": 1100, "height": 1000})
    page = context.new_page()
    page.errors = []
    page.console_errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.on("console", lambda msg: page.console_errors.append(msg.text) if msg.type == "error" else None)
    page.goto(url, wait_until="domcontentloaded", timeout=READY_SECONDS * 1000)
    return page


def _texts(page: Any, selector: str) -> list[str]:
    return page.evaluate(f"Array.from(document.querySelectorAll({selector!r}), (e) => e.textContent)")


def _loaded(page: Any) -> None:
    poll(page, "window.playground && window.playground.exercise && window.playground.exercise.exercise",
         timeout=READY_SECONDS)


@pytest.mark.parametrize("tier", ["auto", "server", "browser"])
def test_playground_loads_the_server_only_example_and_checks_it_on_the_server(sites, tier):
    page = _page(f"{sites['runner']}/?exercise=add-numbers&tier={tier}")
    _loaded(page)
    # the title once (the instructions' own "# Add two numbers" is not repeated), the starter
    assert _texts(page, ".instructions h2, .instructions h3") == ["Add two numbers"]
    assert "Write a function `add(a, b)`" not in page.inner_text(".instructions")  # rendered, not raw
    assert "Write a function add(a, b)" in page.inner_text(".instructions")
    assert page.evaluate("window.playground.editor.getCode()") == ADD.starter
    # Check: on the server whatever the tier (its checks never leave it), hidden checks hidden
    assert page.evaluate("window.playground.exercise.where()") == "server"
    page.click(".check-button")
    poll(page, "document.querySelector('.check-summary').textContent.includes('of 7 checks')", timeout=180)
    summary = _texts(page, ".check-summary")[0]
    assert summary.endswith("checks passed.") and not summary.startswith("7 of 7"), summary
    assert _texts(page, ".check-where") == ["Checked on the server."]
    names = _texts(page, ".check-name")
    assert len(names) == 7 and names[-1] == "Failed: hidden check 3"
    report = page.evaluate(CHECK_EXERCISE, ADD.solution)
    assert report["summary"] == "7 of 7 checks passed — well done!" and report["where"] == "server"
    poll(page, "document.querySelectorAll('.check-pass .check-mark').length === 7")
    if tier != "browser":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"add-numbers-playground-{tier}.png"), full_page=True)
    assert page.errors == [] and page.console_errors == []
    page.context.close()


def test_auto_playground_runs_the_starter_after_loading_it(sites):
    page = _page(f"{sites['runner']}/?exercise=add-numbers")  # the playground's default tier
    _loaded(page)
    assert page.evaluate("document.getElementById('tier').value") == "auto"
    page.evaluate("window.playground.editor.setCode(%r)" % ADD.solution)
    page.click("#run")
    poll(page, "document.getElementById('input-form').hidden === false", timeout=READY_SECONDS)
    for line in ("2", "40"):
        page.fill("#input-box", line)
        page.press("#input-box", "Enter")
        poll(page, "!document.getElementById('input-box').value || document.body.dataset.lastStatus")
    poll(page, "document.body.dataset.lastStatus", timeout=60)
    assert page.evaluate("window.lastResult.stdout") == "42\n"
    page.context.close()


def test_embed_on_an_allowed_course_page_loads_and_checks_the_server_only_example(sites):
    page = _page(sites["allowed"] + "/a")
    poll(page, "document.getElementById('ex').exercise && document.getElementById('ex').exercise.exercise",
         timeout=60)
    shadow = "document.getElementById('ex').shadowRoot"
    assert page.evaluate(f"Array.from({shadow}.querySelectorAll('.instructions h2, .instructions h3'), (e) => e.textContent)") == ["Add two numbers"]
    assert page.evaluate("document.getElementById('ex').getCode()") == ADD.starter
    # the student writes the solution in the element's editor (it loads on its own, maybe after
    # the exercise: code given before it is there would be replaced by the editor's)
    poll(page, "document.getElementById('ex').editor", timeout=60)
    page.evaluate("document.getElementById('ex').editor.setCode(%r)" % ADD.solution)
    assert page.evaluate("document.getElementById('ex').getCode()") == ADD.solution
    page.evaluate(f"{shadow}.querySelector('.check-button').click()")
    summary = f"{shadow}.querySelector('.check-summary').textContent"
    poll(page, f"{summary} && !{summary}.startsWith('Checking')", timeout=180)  # it ended
    said = page.evaluate(summary)
    assert said.startswith("7 of 7"), said
    assert page.evaluate(f"{shadow}.querySelector('.check-where').textContent") == "Checked on the server."
    result = page.evaluate("document.getElementById('run').run()")
    assert result["status"] == "ok" and result["stdout"] == "42\n" and result["tier"] == "server", result
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "add-numbers-embed-allowed.png"), full_page=True)
    assert page.errors == [] and not [t for t in page.console_errors if "wasm-runner" in t]
    page.context.close()


def _refused_exercise(page: Any) -> str:
    """What the exercise element says when it could not load (its results' summary line)."""
    summary = "document.getElementById('ex').shadowRoot.querySelector('.check-summary')"
    poll(page, f"document.getElementById('ex').shadowRoot && {summary} && {summary}.textContent", timeout=60)
    said: str = page.evaluate(f"{summary}.textContent")
    return said


def test_embed_on_a_page_whose_origin_is_not_allowed_tells_its_author(sites):
    page = _page(sites["other"] + "/a")
    said = _refused_exercise(page)
    page_origin, runner = sites["other"], sites["runner"]
    assert said.startswith("This exercise could not be loaded. For the page's author:"), said
    assert f"the runner at {runner} does not accept requests from this page's origin, {page_origin}" in said
    assert AUTHOR_ORIGIN.format(page=page_origin) in said
    assert "went wrong on our side" not in said and "Could not reach" not in said
    # a Run on the server tier says the same, and the console tells the author once
    result = page.evaluate("document.getElementById('run').run()")
    assert result["status"] == "internal_error" and result["refused"]["reason"] == "origin", result
    end = page.evaluate("document.getElementById('run').shadowRoot.querySelector('.output').textContent")
    assert "Could not run it: this page is not set up to use the server" in end
    assert AUTHOR_ORIGIN.format(page=page_origin) in end and "on our side" not in end
    told = [t for t in page.console_errors if t.startswith("wasm-runner: For the page's author")]
    assert len(told) == 1 and AUTHOR_ORIGIN.format(page=page_origin) in told[0], page.console_errors
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "add-numbers-embed-origin-refused.png"), full_page=True)
    assert page.errors == []
    # the runner is unharmed and still answers an allowed page
    ok = _page(sites["allowed"] + "/a")
    assert ok.evaluate("document.getElementById('run').run()")["stdout"] == "42\n"
    ok.context.close()
    page.context.close()


def test_embed_on_a_runner_that_wants_a_key_tells_its_author(sites):
    page = _page(sites["allowed"] + "/b")
    said = _refused_exercise(page)
    assert said.startswith(f"This exercise could not be loaded. For the page's author: the runner at {sites['keyed']} refused this page's request (an API key is required"), said
    assert "auth = false" in said
    result = page.evaluate("document.getElementById('run').run()")
    assert result["refused"]["reason"] == "key", result
    end = page.evaluate("document.getElementById('run').shadowRoot.querySelector('.output').textContent")
    assert "Could not run it: this page is not set up to use the server" in end and "on our side" not in end
    assert any("an API key is required" in t for t in page.console_errors), page.console_errors
    page.screenshot(path=str(SCREENSHOTS / "add-numbers-embed-key-refused.png"), full_page=True)
    page.context.close()
