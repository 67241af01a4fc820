"""Lint while typing in real Chromium: Ruff's WebAssembly build from the server's own origin
(every other request aborted), the marks in the gutter and under the code, the list of problems
for screen readers (Ctrl+Shift+M), the same findings as ``POST /api/lint``, and a screenshot."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from tests.support.browser import READY_SECONDS, poll, shared_browser, shared_server

SCREENSHOTS = Path(os.environ.get("WASM_RUNNER_SCREENSHOTS", "/tmp/wasm-runner-screens"))
CODE = (Path(__file__).resolve().parents[1] / "lint" / "corpus" / "misspelt_name.py").read_text() + (
    "list = [1, 2]\nif age == None:\n    print(list)\n"
)

OWN_RULES_CODE = (
    "def half(n):\n    return n / 2\n    print('halved')  # never runs\n    n = 0\n\n"
    "total = half(4)\ntotal * 2\nprint(total)\ntotal\n"  # the last line shows its value: no mark
)


def open_offline(path: str = "/", ready: str = "window.playground.runner.browserInfo") -> tuple[Any, list[str]]:
    """The playground with every request that is not to the server aborted (no CDN, no internet)."""
    base = shared_server()
    context = shared_browser().new_context(viewport={"width": 1280, "height": 800})
    asked: list[str] = []

    def only_loopback(route: Any) -> None:
        asked.append(route.request.url)
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            route.abort()

    context.route("**/*", only_loopback)
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(base + path)
    poll(page, f"window.playground && {ready}", timeout=READY_SECONDS)
    return page, asked


def type_code(page: Any, code: str) -> None:
    page.click(".cm-content")
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(code)
    page.keyboard.type(" ")  # a keystroke, then the typing pause


def test_marks_appear_while_typing_offline_and_match_the_server() -> None:
    page, asked = open_offline()
    type_code(page, CODE)
    poll(page, "document.body.dataset.lintCount === '5'", timeout=60)
    poll(page, "document.querySelectorAll('.cm-lint-marker-error').length >= 2")
    assert page.locator(".cm-lintRange-error").count() >= 2  # the underlines
    assert page.locator(".cm-lintRange-warning").count() >= 3
    assert page.text_content("#lint-note").startswith("Checked as you type: 5 problems")
    code = page.evaluate("window.playground.editor.getCode()")
    in_browser = page.evaluate("(code) => window.playground.lint(code)", code)
    on_server = page.evaluate("""async (code) => (await (await fetch('/api/lint', {method: 'POST',
        headers: {'content-type': 'application/json'}, body: JSON.stringify({code})})).json()).findings""", code)
    assert in_browser == on_server
    assert [(f["rule"], f["line"]) for f in in_browser] == [
        ("F821", 4), ("F841", 6), ("F821", 7), ("A001", 9), ("E711", 10)]
    assert "Python does not know `nmae` here" in in_browser[0]["message"]
    # hovering a mark shows its words
    page.hover(".cm-lintRange-error >> nth=0")
    poll(page, "document.querySelector('.cm-tooltip-lint') !== null")
    assert "Unknown name: Python does not know `nmae` here" in page.text_content(".cm-tooltip-lint")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "lint-marks.png"))
    # the list of problems, for screen readers and keyboards
    page.click(".cm-content")
    page.keyboard.press("Control+Shift+KeyM")
    poll(page, "document.querySelector('.cm-panel.cm-panel-lint') !== null")
    listed = page.text_content(".cm-panel-lint ul")
    assert "Unknown name" in listed and "Comparison to None" in listed
    assert page.get_attribute(".cm-panel-lint ul", "aria-label") == "Problems in the code"
    # no request left the origin; Ruff came from the server
    assert all(urlsplit(url).hostname == "127.0.0.1" for url in asked), [u for u in asked if "127.0.0.1" not in u]
    ruff = next(i for i, url in enumerate(asked) if url.endswith("/ruff.wasm"))
    # lazily: Python's own files first (the first run does not wait for Ruff), and no preload
    assert ruff > max(i for i, url in enumerate(asked) if url.endswith(("pyodide.asm.wasm", "python_stdlib.zip")))
    assert "ruff" not in page.evaluate("Array.from(document.querySelectorAll('link'), (l) => l.href).join(' ')")
    assert page.errors == []
    page.context.close()


def test_a_fix_clears_its_mark() -> None:
    page, _ = open_offline()
    type_code(page, "total = 0\nprint(totl)\n")
    poll(page, "document.body.dataset.lintCount === '1'", timeout=60)
    type_code(page, "total = 0\nprint(total)\n")
    poll(page, "document.body.dataset.lintCount === '0'")
    poll(page, "document.querySelectorAll('.cm-lintRange').length === 0")
    assert page.text_content("#lint-note") == "Checked as you type: no problems found"
    # our own rules, which Ruff lacks (wasm_runner/lint/own_rules.py, web/src/lint-own.js)
    type_code(page, OWN_RULES_CODE)
    poll(page, "document.body.dataset.lintCount === '2'", timeout=60)
    code = page.evaluate("window.playground.editor.getCode()")
    in_browser = page.evaluate("(code) => window.playground.lint(code)", code)
    on_server = page.evaluate("""async (code) => (await (await fetch('/api/lint', {method: 'POST',
        headers: {'content-type': 'application/json'}, body: JSON.stringify({code})})).json()).findings""", code)
    assert in_browser == on_server
    assert [(f["rule"], f["line"], f["end_line"]) for f in in_browser] == [("WR101", 3, 4), ("WR102", 7, 7)]
    poll(page, "document.querySelectorAll('.cm-lintRange-warning').length >= 2")
    page.hover(".cm-lintRange-warning >> nth=0")
    poll(page, "document.querySelector('.cm-tooltip-lint') !== null")
    assert "Never runs: This code can never run: Python never gets past the `return` just before it" in (
        page.text_content(".cm-tooltip-lint"))
    page.screenshot(path=str(SCREENSHOTS / "lint-own-rules.png"))
    # the marks in the page's language, as the explanations (German here), the same as the server's
    page.evaluate("document.documentElement.lang = 'de'")
    type_code(page, "def sign(n):\n    if n:\n        return 1\n    else:\n        return 0\n    print(totl)\n")
    poll(page, "document.body.dataset.lintCount === '2'")
    code = page.evaluate("window.playground.editor.getCode()")
    in_browser = page.evaluate("(code) => window.playground.lint(code)", code)
    on_server = page.evaluate("""async (code) => (await (await fetch('/api/lint', {method: 'POST',
        headers: {'content-type': 'application/json'}, body: JSON.stringify({code, lang: 'de'})})).json()).findings""", code)
    assert in_browser == on_server
    assert [(f["rule"], f["line"], f["title"]) for f in in_browser] == [
        ("WR101", 6, "Läuft nie"), ("F821", 6, "Unbekannter Name")]  # after an if/else that always returns
    page.mouse.move(0, 0)
    page.hover(".cm-lintRange-error >> nth=0")
    poll(page, "(document.querySelector('.cm-tooltip-lint') || {}).textContent?.includes('Unbekannter Name')")
    assert "Unbekannter Name: Python kennt `totl` hier nicht." in page.text_content(".cm-tooltip-lint")
    assert "Läuft nie: Dieser Code kann nie laufen: Python kommt nie über das `if` direkt davor hinaus." in (
        page.text_content(".cm-tooltip-lint"))
    page.screenshot(path=str(SCREENSHOTS / "lint-german.png"))
    page.evaluate("document.documentElement.lang = 'en'")
    assert page.errors == []
    page.context.close()


def test_an_exercise_with_style_shows_its_notes_beside_the_checks() -> None:
    page, _ = open_offline("/?exercise=tidy&tier=server", ready="window.playground.exercise && window.playground.exercise.exercise")
    page.evaluate("window.playground.editor.setCode('l = int(input()); m = int(input())\\nprint(l + m)\\n')")
    page.click(".check-button")
    poll(page, "document.querySelector('.style-notes') !== null", timeout=180)
    assert page.text_content(".check-summary").startswith("1 of 1")
    notes = page.evaluate("Array.from(document.querySelectorAll('.style-notes li'), (li) => li.textContent)")
    assert notes[0].startswith("Line 1: Name easy to misread. `l` is easy to confuse with 1 or 0")
    assert any(n.startswith("Line 1: Two statements on one line. Put each statement on its own line") for n in notes)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "lint-style-notes.png"), full_page=True)
    # in the page's language: the check asks for it, the server words the notes in it
    page.evaluate("document.documentElement.lang = 'de'")
    page.click(".check-button")
    poll(page, "Array.from(document.querySelectorAll('.style-notes li'), (li) => li.textContent).join()"
               ".includes('Name leicht zu verwechseln')", timeout=180)
    notes = page.evaluate("Array.from(document.querySelectorAll('.style-notes li'), (li) => li.textContent)")
    assert notes[0].startswith("Line 1: Name leicht zu verwechseln. `l` ist leicht mit 1 oder 0 zu verwechseln")
    page.evaluate("document.documentElement.lang = 'en'")
    page.context.close()


class _Course(BaseHTTPRequestHandler):
    """A course page on another origin than the runner's, with its own CSP: scripts and
    connections only to the runner's origin (plus WebAssembly compiling, for the lint)."""

    runner = ""
    EDITABLE = """<wasm-runner id="en" tier="browser">total = 0</wasm-runner>
<wasm-runner id="de" tier="browser" lang="de">total = 0</wasm-runner>
<wasm-runner id="off" tier="browser" lint="off">total = 0</wasm-runner>"""
    READONLY = "\n".join(f'<wasm-runner id="r{i}" tier="browser" readonly>print({i})</wasm-runner>' for i in range(20))

    def do_GET(self) -> None:
        examples = self.READONLY if self.path.startswith("/readonly") else self.EDITABLE
        body = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Week 2</title>
<script type="module" src="{self.runner}/embed.js"></script></head>
<body><main><h1>Week 2: names</h1>{examples}</main></body></html>""".encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        # /strict: a CSP without 'wasm-unsafe-eval', under which Ruff cannot compile
        wasm = "" if self.path.startswith("/strict") else " 'wasm-unsafe-eval'"
        self.send_header("content-security-policy", f"script-src {self.runner}{wasm}; "
                         f"connect-src {self.runner}; frame-src {self.runner}")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def course() -> Iterator[str]:
    _Course.runner = shared_server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Course)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def open_course(url: str) -> tuple[Any, list[str]]:
    """A course page in a fresh context, with the URLs it requested and its errors."""
    context = shared_browser().new_context(viewport={"width": 1000, "height": 900})
    page = context.new_page()
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.goto(url, wait_until="domcontentloaded", timeout=READY_SECONDS * 1000)
    return page, asked


def test_an_editable_embed_marks_mistakes_in_its_language(course: str) -> None:
    page, asked = open_course(course + "/")
    poll(page, "['en', 'de', 'off'].every((id) => document.getElementById(id).editor)", timeout=READY_SECONDS)
    poll(page, "document.getElementById('en').runner.browserInfo", timeout=READY_SECONDS)
    assert not [url for url in asked if "ruff" in url]  # nothing before an example is used
    for example in ("en", "de", "off"):
        page.click(f"#{example} .cm-content")
        page.keyboard.press("Control+a")
        page.keyboard.insert_text("total = 0\nprint(totl)\n")
        page.keyboard.type(" ")
    poll(page, "(document.getElementById('en').lintFindings || []).length === 1", timeout=60)
    poll(page, "(document.getElementById('de').lintFindings || []).length === 1", timeout=60)
    poll(page, "document.getElementById('en').shadowRoot.querySelectorAll('.cm-lintRange-error').length === 1")
    finding = page.evaluate("document.getElementById('en').lintFindings[0]")
    assert (finding["rule"], finding["line"], finding["title"]) == ("F821", 2, "Unknown name")
    page.hover("#en .cm-lintRange-error")
    poll(page, "document.getElementById('en').shadowRoot.querySelector('.cm-tooltip-lint') !== null")
    assert "Unknown name: Python does not know `totl` here." in page.text_content("#en .cm-tooltip-lint")
    german = page.evaluate("document.getElementById('de').lintFindings[0]")
    assert german["title"] == "Unbekannter Name" and german["message"].startswith("Python kennt `totl` hier nicht.")
    # lint="off": no marks, no gutter
    assert page.evaluate("document.getElementById('off').lintFindings") is None
    assert page.evaluate("document.getElementById('off').shadowRoot.querySelectorAll('.cm-lintRange, .cm-gutter-lint').length") == 0
    # the list of problems, for keyboards and screen readers, as in the playground
    page.click("#en .cm-content")
    page.keyboard.press("Control+Shift+KeyM")
    poll(page, "document.getElementById('en').shadowRoot.querySelector('.cm-panel-lint') !== null")
    assert page.get_attribute("#en .cm-panel-lint ul", "aria-label") == "Problems in the code"
    assert "Unknown name" in page.text_content("#en .cm-panel-lint ul")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "lint-embed.png"), full_page=True)
    # one load for the page, from the runner's origin (the course page's CSP allows nothing else)
    runner = urlsplit(shared_server()).netloc
    ruff = [url for url in asked if "ruff" in url]
    assert sorted(urlsplit(url).path.rsplit("/", 1)[1] for url in ruff) == ["ruff.js", "ruff.wasm"], ruff
    assert all(urlsplit(url).netloc == runner for url in ruff)
    assert page.errors == []
    page.context.close()


def test_readonly_embeds_load_no_linter(course: str) -> None:
    page, asked = open_course(course + "/readonly")
    poll(page, "document.getElementById('r0').runner && document.getElementById('r0').runner.browserInfo",
         timeout=READY_SECONDS)
    result = page.evaluate("document.getElementById('r3').run()")
    assert result["stdout"] == "3\n"
    page.click("#r5 .run")  # using a readonly example loads no linter either
    poll(page, "document.getElementById('r5').lastResult")
    assert not [url for url in asked if "ruff" in url]
    assert not [url for url in asked if url.endswith("/editor.js")]  # no editor at all
    assert page.errors == []
    page.context.close()


def test_a_page_that_forbids_webassembly_gets_a_note_and_runs(course: str) -> None:
    page, _ = open_course(course + "/strict")
    poll(page, "document.getElementById('en').editor", timeout=READY_SECONDS)
    page.click("#en .cm-content")
    page.keyboard.type("x")
    poll(page, "document.getElementById('en').shadowRoot.querySelector('.state').textContent"
               ".startsWith('The checker could not load')", timeout=60)
    page.click("#en .cm-content")
    page.keyboard.press("Control+a")
    page.keyboard.insert_text("print('still runs')")
    result = page.evaluate("document.getElementById('en').run()")
    assert (result["status"], result["stdout"]) == ("ok", "still runs\n")
    assert page.evaluate("document.getElementById('en').lintFindings") is None
    page.context.close()
