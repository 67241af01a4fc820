"""Accessibility measured with axe-core (npm ``axe-core``, injected through the DevTools protocol
by Python Playwright) in real Chromium: no serious or critical finding on the playground, an
exercise page and a course page with the embed (a lint mark shown), each after a run that ended in an error."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.support.browser import (READY_SECONDS, REPO, open_playground, poll, send_html, shared_browser, shared_server,
                                   start_uvicorn, stop_process)

AXE = REPO / "web" / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = Path(os.environ.get("WASM_RUNNER_SCREENSHOTS", "/tmp/wasm-runner-screens"))
FAILING = "numbers = [1, 2, 3]\nprint('first', numbers[0])\nprint(numbers[3])\n"
AXE_RUN = """async () => {
  const report = await axe.run(document, { iframes: false });
  return { passed: report.passes.length, violations: report.violations.map((v) => ({ id: v.id, impact: v.impact,
    help: v.help, nodes: v.nodes.map((n) => n.target.join(" ") + " :: " + n.failureSummary).slice(0, 5) })) };
}"""


def serious_findings(page: Any) -> list[dict[str, Any]]:
    """axe-core's violations of impact serious or critical on the page (shadow roots included)."""
    if not AXE.is_file():
        pytest.fail("web/node_modules/axe-core is missing: run scripts/setup.sh (npm ci in web/)")
    page.evaluate(AXE.read_text())  # not a <script>: the pages' CSP allows no inline script
    report: dict[str, Any] = page.evaluate(AXE_RUN)
    assert report["passed"] >= 10, report  # axe ran its rules on this page
    print("axe-core:", report["passed"], "rules passed; violations:", report["violations"])
    return [v for v in report["violations"] if v["impact"] in ("serious", "critical")]


def test_playground_after_an_error_with_lint_marks_and_their_list() -> None:
    page = open_playground("/")
    page.click(".cm-content")
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(FAILING + "print(numbrs)\n")
    page.click("#run")
    poll(page, "document.body.dataset.lastStatus === 'error'", timeout=60)
    assert "IndexError" in page.text_content("#output")
    poll(page, "document.body.dataset.lintCount === '1'", timeout=60)  # the unknown name, marked
    page.click(".cm-content")
    page.keyboard.press("Control+Shift+KeyM")  # the list of problems, open
    poll(page, "document.querySelector('.cm-panel-lint') !== null")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "a11y-playground-error.png"))
    assert serious_findings(page) == []
    page.context.close()


def test_exercise_page_after_a_failed_check() -> None:
    context = shared_browser().new_context(viewport={"width": 1100, "height": 1000})
    page = context.new_page()
    page.goto(shared_server() + "/?exercise=mean&tier=server")
    poll(page, "window.playground && window.playground.exercise && window.playground.exercise.exercise",
         timeout=READY_SECONDS)
    page.evaluate("window.playground.editor.setCode('def mean(values):\\n    return values[10]\\n')")
    page.click(".check-button")
    summary = "(document.querySelector('.check-summary') || {}).textContent || ''"
    poll(page, f"({summary}) && !({summary}).startsWith('Checking')", timeout=180)
    assert page.evaluate(summary).startswith("0 of")
    page.screenshot(path=str(SCREENSHOTS / "a11y-exercise-failed.png"), full_page=True)
    assert serious_findings(page) == []
    page.context.close()


class _Course(BaseHTTPRequestHandler):
    runner = ""

    def do_GET(self) -> None:
        body = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Week 1</title>
<script type="module" src="{self.runner}/embed.js"></script></head>
<body><main><h1>Week 1: lists</h1>
<wasm-runner id="ex" tier="browser">{FAILING}</wasm-runner>
</main></body></html>""".encode()
        send_html(self, body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def course() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Course)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{httpd.server_address[1]}"
    runner, base = start_uvicorn("server:app", {"WASM_RUNNER_AUTH": "off", "WASM_RUNNER_CORS_ORIGINS": site})
    _Course.runner = base
    try:
        yield site
    finally:
        httpd.shutdown()
        stop_process(runner)


def test_embed_after_an_error(course: str) -> None:
    context = shared_browser().new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    page.goto(course + "/", wait_until="domcontentloaded", timeout=READY_SECONDS * 1000)
    poll(page, "document.getElementById('ex').editor", timeout=READY_SECONDS)
    page.click("#ex .cm-content")  # a misspelt name typed at the end: marked while typing
    page.keyboard.press("Control+End")
    page.keyboard.type("\nprint(numbrs)")
    poll(page, "(document.getElementById('ex').lintFindings || []).length === 1", timeout=60)
    poll(page, "document.getElementById('ex').shadowRoot.querySelector('.cm-lintRange-error') !== null")
    result = page.evaluate("document.getElementById('ex').run()")
    assert result["status"] == "error" and "IndexError" in result["stderr"]
    page.screenshot(path=str(SCREENSHOTS / "a11y-embed-error.png"), full_page=True)
    assert serious_findings(page) == []
    context.close()


TURTLE = """import turtle
turtle.title("A red square")
t = turtle.Turtle()
t.color("red", "yellow")
t.begin_fill()
for _ in range(4):
    t.forward(60)
    t.left(90)
t.end_fill()
t.dot(10, "blue")
t.write("Square")
turtle.done()
"""


def test_turtle_drawings_and_plots_have_text_alternatives() -> None:
    page = open_playground("/")
    page.evaluate("window.playground.editor.setCode(%r)" % TURTLE)
    page.click("#run")
    poll(page, "document.body.dataset.lastStatus === 'ok'", timeout=60)
    assert page.get_attribute("#output img.out-svg", "alt") == (
        "Turtle drawing: A red square. 1 pen stroke (red), 1 filled shape (yellow), 1 dot (blue), "
        "the text “Square”, 1 turtle.")
    plot = (REPO / "tests" / "web" / "plot_standin.py").read_text() + (
        "\nimport matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\n")
    page.evaluate("window.playground.editor.setCode(%r)" % plot)
    page.click("#run")
    poll(page, "document.body.dataset.lastStatus === 'ok' && document.querySelectorAll('#output img').length === 1",
         timeout=60)
    alts = page.evaluate("Array.from(document.querySelectorAll('#output img'), (img) => img.alt)")
    assert [alt.split(" (")[0] for alt in alts] == ["Figure 1 drawn by the program"]
    assert serious_findings(page) == []
    page.context.close()
