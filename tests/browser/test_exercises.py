"""Exercises and turtle drawings in real headless Chromium against the real server: the
playground's Check button on both tiers, the same verdicts as the server's checker, tampering in
the browser tier, a stuck check stopped by its limit, the <wasm-runner exercise=…> element, and a
turtle drawing that is byte-identical on both tiers and shows in the page."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.support.browser import (CHECK_EXERCISE, READY_SECONDS, open_playground, poll, run_in_browser, shared_browser,
                             shared_server)

from wasm_runner import Limits
from wasm_runner.exercises import check_code, load_exercise
from wasm_runner.sandbox import default_sandbox

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = ROOT / "tests" / "exercises"
SCREENSHOTS = Path(os.environ.get("WASM_RUNNER_SCREENSHOTS", "/tmp/wasm-runner-screens"))
MEAN = load_exercise(EXERCISES / "mean")

CHECK = CHECK_EXERCISE


@pytest.fixture(scope="module")
def browser_page() -> Iterator[object]:
    page = open_playground("/?exercise=mean&tier=browser")
    poll(page, "window.playground.exercise && window.playground.exercise.exercise", timeout=READY_SECONDS)
    yield page
    page.context.close()


def texts(page, selector: str) -> list[str]:
    return page.evaluate(f"Array.from(document.querySelectorAll({selector!r}), (e) => e.textContent)")


def test_playground_shows_the_exercise_and_checks_with_the_keyboard(browser_page):
    page = browser_page
    assert texts(page, ".instructions h2") == ["Mean of numbers"]
    assert page.evaluate("window.playground.editor.getCode()").startswith("def mean(values):\n    return 0")
    # keyboard: Tab reaches the Check button (it sits right after Run), Enter presses it
    page.focus("#run")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Check"
    page.keyboard.press("Enter")
    poll(page, "document.querySelector('.check-summary').textContent.includes('of 7 checks')", timeout=180)
    assert texts(page, ".check-summary") == ["0 of 7 checks passed."]
    # labelled practice: in the browser it does not count
    assert texts(page, ".check-where")[0].startswith("Practice check, in your browser: it does not count")
    rows = texts(page, ".check-name")
    assert len(rows) == 7 and rows[0] == "Failed: three numbers"
    assert texts(page, ".check-mark")[0] == "✗"
    # announced to screen readers, and the focus lands on the summary
    assert page.evaluate("document.querySelector('[role=status][aria-live=polite]:not(#state)') !== null")
    assert "Check finished: 0 of 7 checks passed." in page.evaluate(
        "Array.from(document.querySelectorAll('[role=status]'), (e) => e.textContent).join('|')")
    assert page.evaluate("document.activeElement.className").startswith("check-summary")
    # Ctrl+Shift+Enter checks again
    page.evaluate("window.playground.editor.setCode(%s)" % json.dumps(MEAN.solution))
    page.focus(".cm-content")
    page.keyboard.press("Control+Shift+Enter")
    poll(page, "document.querySelector('.check-summary').textContent.startsWith('7 of 7')", timeout=180)
    assert texts(page, ".check-mark") == ["✓"] * 7
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "exercise-playground-browser-practice.png"), full_page=True)
    assert page.errors == []


def test_a_missing_function_is_explained_under_its_check_in_the_pages_language(browser_page):
    """Issue 36: a test calling mean when the code defines only average shows the explanation
    under the failed check, in the page's lang (German here), as the server words it."""
    page = browser_page
    page.evaluate("document.documentElement.lang = 'de'")
    try:
        page.evaluate("window.playground.editor.setCode(%s)" % json.dumps(
            "def average(values):\n    return sum(values) / len(values)\n"))
        page.click(".check-button")
        poll(page, "document.querySelector('.check-summary').textContent.includes('of 7 checks')", timeout=180)
        boxes = page.evaluate("Array.from(document.querySelectorAll('.check-explain'), (e) => [e.lang, e.textContent])")
        assert boxes, texts(page, ".check-message")
        assert all(lang == "de" for lang, _ in boxes)
        assert boxes[0][1].startswith("Dein Code definiert mean noch nicht")
        assert "Er hat eine namens average." in boxes[0][1]
        assert page.errors == []
    finally:
        page.evaluate("document.documentElement.lang = 'en'")


def test_browser_verdicts_match_the_server(browser_page):
    wrong = ("def helper(v):\n    return v[0] / 0 if v == [5] else sum(v) // len(v)\n"
             "def mean(values):\n    return helper(values)\n"
             "if __name__ == '__main__':\n    print(mean([float(x) for x in input().split()]))\n")
    in_browser = browser_page.evaluate(CHECK, wrong)
    on_server = check_code(MEAN, wrong, limits=Limits(cpu_seconds=2, wall_seconds=10, memory_mb=256))
    assert [c["name"] for c in in_browser["checks"]] == [c["name"] for c in on_server["checks"]]
    assert [c["passed"] for c in in_browser["checks"]] == [c["passed"] for c in on_server["checks"]]
    assert in_browser["summary"] == on_server["summary"]
    for b, s in zip(in_browser["checks"], on_server["checks"], strict=True):
        if b["kind"] == "io" or b["passed"]:
            assert b["message"] == s["message"], (b, s)
    one = {c["name"]: c for c in in_browser["checks"]}["test_mean_of_one"]
    assert 'File "solution.py", line 2, in helper (your code)' in one["message"]
    assert one["message"].endswith("ZeroDivisionError: division by zero")


CHECK_BUNDLE = """async ([bundle, code]) => {
  const url = performance.getEntriesByType("resource").map((e) => e.name).find((n) => /\\/assets\\/[^/]+\\/exercise\\.js$/.test(n));
  const { checkInBrowser } = await import(url);
  return await checkInBrowser(window.playground.runner, bundle, code);
}"""
ADD = load_exercise(ROOT / "examples" / "exercises" / "add-numbers")
ADD_WRONG = ("def add(a, b):\n    return a - b if a < 0 else a + b\n\n"
             "if __name__ == '__main__':\n    print(add(int(input()), int(input())))\n")


@pytest.mark.parametrize("program", ["solution", "starter", "wrong"])
def test_the_shipped_example_checks_in_the_browser_as_on_the_server(browser_page, program):
    """The same Python judging on both tiers: the same verdicts, and the same messages for I/O
    cases and passing tests (a failing test's traceback comes from each tier's own run)."""
    code = {"solution": ADD.solution, "starter": ADD.starter, "wrong": ADD_WRONG}[program]
    in_browser = browser_page.evaluate(CHECK_BUNDLE, [ADD.bundle(), code])
    on_server = check_code(ADD, code)
    assert in_browser["summary"] == on_server["summary"]
    for b, s in zip(in_browser["checks"], on_server["checks"], strict=True):
        assert (b["name"], b["kind"], b["hidden"], b["passed"]) == (s["name"], s["kind"], s["hidden"], s["passed"])
        if b["kind"] == "io" or b["passed"]:
            assert b["message"] == s["message"], (b, s)


def test_a_stuck_check_is_stopped_by_its_limit_in_the_browser(browser_page):
    code = ("def mean(values):\n    if len(values) == 1:\n        while True:\n            pass\n"
            "    return sum(values) / len(values)\n")
    report = browser_page.evaluate(CHECK, code)
    checks = {c["name"]: c for c in report["checks"]}
    stuck = checks["test_mean_of_one"]
    assert not stuck["passed"] and stuck["status"] == "timeout" and stuck["limit"] == "wall", stuck["message"]
    assert "infinite loop" in stuck["message"]
    assert checks["test_mean_of_two"]["passed"]  # the next runs go on
    assert run_in_browser(browser_page, "print(6 * 7)")["stdout"] == "42\n"


BROWSER_TAMPERING = {
    "prints PASSED": "print('PASSED')\ndef mean(v):\n    return 0\n",
    "an object equal to everything": (
        "class Any:\n    def __eq__(self, other):\n        return True\n"
        "def mean(v):\n    return Any()\n"),
    "overrides builtins": "import builtins\nbuiltins.len = lambda x: 1\nbuiltins.sum = lambda x: 2\ndef mean(v):\n    return 0\n",
    "forges a report on the output channel": (
        "import _wasm_runner_host as h, json\n"
        "for t in ['test_mean_of_two', 'test_mean_of_one', 'test_empty_list_raises', 'test_secret_values']:\n"
        "    h.emit_output('check', 'application/vnd.wasm-runner.check+json',"
        " json.dumps({'test': t, 'passed': True, 'nonce': 'guess'}))\n"
        "def mean(v):\n    return 0\n"),
    "reaches for the harness's frames": (
        "import sys\ndef mean(v):\n    f = sys._getframe(1)\n    f.f_back.f_locals['record']['passed'] = True\n    return 0\n"),
    "walks the garbage collector": "import gc\ndef mean(v):\n    gc.get_objects()\n    return 0\n",
    "exits early with sys.exit(0)": "import sys\nsys.exit(0)\n",
    "os._exit(0)": "import os\ndef mean(v):\n    os._exit(0)\n",
}


@pytest.mark.parametrize("attempt", list(BROWSER_TAMPERING))
def test_tampering_does_not_pass_in_the_browser(browser_page, attempt):
    report = browser_page.evaluate(CHECK, BROWSER_TAMPERING[attempt])
    tests = [c for c in report["checks"] if c["kind"] == "test" and c["name"] != "test_empty_list_raises"]
    assert tests and not any(c["passed"] for c in tests), (attempt, tests)
    # the worker is a normal one again afterwards: frames and tracebacks work in plain runs
    after = run_in_browser(browser_page, "import sys, traceback\ntry:\n    1/0\nexcept ZeroDivisionError:\n"
                                         "    traceback.print_exc()\nprint(sys._getframe().f_code.co_name)\n")
    assert after["status"] == "ok" and after["stdout"] == "<module>\n", after
    assert "ZeroDivisionError" in after["stderr"]


def test_server_tier_check_from_the_playground_keeps_hidden_checks_hidden():
    page = shared_browser().new_context().new_page()  # tier=server: no Pyodide to wait for
    page.goto(shared_server() + "/?exercise=mean&tier=server")
    poll(page, "window.playground && window.playground.exercise && window.playground.exercise.exercise", timeout=60)
    assert page.evaluate("'io' in window.playground.exercise.exercise") is False  # public view only
    report = page.evaluate(CHECK, "def mean(v):\n    return 3\n")
    names = [c["name"] for c in report["checks"]]
    assert names[-1] == "hidden check 2" and "test_secret_values" not in names
    assert "zebra-quartz" not in json.dumps(report)
    poll(page, "document.querySelectorAll('.check').length === 7")
    page.context.close()


def test_turtle_draws_the_same_svg_on_both_tiers_and_shows_in_the_page():
    program = (EXERCISES / "turtle_program.py").read_text()
    server = default_sandbox().run(program)
    server_svg = [o.data for o in server.outputs if o.mime == "image/svg+xml"]
    page = open_playground("/?tier=browser")
    browser = run_in_browser(page, program)
    assert browser["status"] == "ok", browser
    browser_svg = [o["data"] for o in browser["outputs"] if o["mime"] == "image/svg+xml"]
    assert len(server_svg) == len(browser_svg) == 1
    assert browser_svg[0] == server_svg[0]  # byte for byte
    # the Run button shows it inline
    page.evaluate("window.playground.editor.setCode(%s)" % json.dumps(program))
    page.click("#run")
    poll(page, "document.querySelector('#output img.out-svg') && document.querySelector('#output img.out-svg').complete", timeout=60)
    size = page.evaluate("(() => { const i = document.querySelector('#output img.out-svg'); return [i.naturalWidth, i.naturalHeight]; })()")
    assert size[0] > 100 and size[1] > 100
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "turtle-playground.png"))
    assert page.errors == []
    page.context.close()


class _Course(BaseHTTPRequestHandler):
    runner_url = ""

    def do_GET(self) -> None:
        if self.path == "/mean.json":
            body = json.dumps(MEAN.bundle()).encode()
            ctype = "application/json"
        else:
            body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Course page</title>
<script type="module" src="{self.runner_url}/embed.js"></script></head>
<body><h1>Week 3</h1>
<wasm-runner id="ex" tier="browser" exercise="/mean.json"></wasm-runner>
<wasm-runner id="draw" tier="browser">import turtle
t = turtle.Turtle()
for _ in range(4):
    t.forward(80)
    t.left(90)
</wasm-runner>
</body></html>""".encode()
            ctype = "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def course() -> Iterator[str]:
    _Course.runner_url = shared_server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Course)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_embed_element_checks_an_exercise_and_shows_turtles(course):
    context = shared_browser().new_context(viewport={"width": 1000, "height": 1400})
    page = context.new_page()
    page.goto(course + "/")
    poll(page, "document.getElementById('ex').exercise && document.getElementById('ex').exercise.exercise", timeout=60)
    shadow = "document.getElementById('ex').shadowRoot"
    assert page.evaluate(f"{shadow}.querySelector('.instructions h2').textContent") == "Mean of numbers"
    assert page.evaluate(f"{shadow}.querySelector('.check-button').textContent") == "Check"
    poll(page, "document.getElementById('ex').runner.browserInfo", timeout=READY_SECONDS)
    poll(page, "document.getElementById('ex').editor", timeout=60)  # the student's editor is there
    page.evaluate("document.getElementById('ex').editor.setCode(%s)" % json.dumps(MEAN.solution))
    page.evaluate(f"{shadow}.querySelector('.check-button').click()")
    poll(page, f"{shadow}.querySelector('.check-summary').textContent.startsWith('7 of 7')", timeout=180)
    assert page.evaluate(f"{shadow}.querySelectorAll('.check-pass .check-mark').length") == 7
    assert page.evaluate(f"{shadow}.querySelector('.state').textContent") == "Check finished: 7 of 7 checks passed — well done!"
    assert page.evaluate(f"{shadow}.querySelector('.check-where').textContent").startswith("Practice check, in your browser")
    page.evaluate("document.getElementById('draw').run()")
    poll(page, "document.getElementById('draw').shadowRoot.querySelector('img.out-svg')", timeout=60)
    page.screenshot(path=str(SCREENSHOTS / "exercise-embed.png"), full_page=True)
    context.close()
