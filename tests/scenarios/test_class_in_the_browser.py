"""The playground and the embed element survive what beginners write (issue 10), in real headless
Chromium against the real server, on both tiers where the playground can use the server:

- an endless print loop: bounded output on screen, a downloadable whole, a quiet live region,
  Esc stops it, otherwise it ends as output_limit; the page keeps answering throughout;
- 20 beginner programs look the same on both tiers (order, traceback text, end sentence, images);
- auto picks one tier for the page session; a package the browser cannot load says why;
- each run starts clean (a leaked setInterval, a forged "done" from Python);
- embeds do not block each other, Esc stops inside an embed; Tab indents, focus returns;
- time waiting for input() is not run time; the input line closes when a run ends.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.support.browser import (
    READY_SECONDS,
    SEEN,
    end_sentence,
    open_playground,
    poll,
    run_in_browser,
    run_via_ui,
    send_html,
    shared_browser,
    shared_server,
)

PROGRAMS = json.loads(
    (Path(__file__).resolve().parents[1] / "web" / "beginner_programs.json").read_text()
)
SCREENSHOTS = Path(
    os.environ.get("WASM_RUNNER_SCREENSHOTS", "/tmp/wasm-runner-screens")
)
FLOOD = "i = 0\nwhile True:\n    print(i)\n    i += 1\n"
# prints for as long as it is let: fast, but never reaching the 1 MB cap before Esc
STEADY = "import time\ni = 0\nwhile True:\n    print(i)\n    i += 1\n    if i % 200 == 0:\n        time.sleep(0.02)\n"
TIERS = ["browser", "server"]
MAX_DOM_CHARS = 60000  # render.js


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    page = open_playground("/")
    yield page
    assert page.errors == []
    page.context.close()


def _shown_chars(page: Any) -> int:
    return page.evaluate(
        "[...document.querySelectorAll('#output span[data-stream]')].reduce((n, s) => n + s.textContent.length, 0)"
    )


@pytest.mark.parametrize("tier", TIERS)
def test_print_flood_is_bounded_quiet_and_ends_as_output_limit(page, tier):
    seen = run_via_ui(page, FLOOD, tier, timeout=90)
    assert seen["status"] == "output_limit"
    assert end_sentence(seen["end"]) == "Stopped: it printed more than 1 MB"
    result = seen["result"]
    assert result["stdout_truncated"] is True and len(result["stdout"]) == 1 << 20
    # only the tail is on screen, with a note saying how much is hidden
    assert _shown_chars(page) <= MAX_DOM_CHARS
    hidden = page.text_content("#output .out-hidden")
    assert hidden.startswith("Earlier output hidden — ") and "lines" in hidden
    assert page.evaluate("window.playground.view.fullText().length") == 1 << 20
    assert seen["text"].endswith(result["stdout"][-1000:])
    # the output panel is not a live region; the announcer got a summary, never the flood
    assert page.get_attribute("#output", "aria-live") == "off"
    announced = page.text_content("#announce")
    assert announced.startswith("Stopped: it printed more than 1 MB") and len(announced) < 600
    assert "The program printed too much" in announced  # its explanation (issue 36)
    page.screenshot(path=str(SCREENSHOTS / f"flood-{tier}.png"))


@pytest.mark.parametrize("tier", TIERS)
def test_escape_stops_a_flood_and_the_page_answers_meanwhile(page, tier):
    page.select_option("#tier", tier)
    page.evaluate("(code) => window.playground.editor.setCode(code)", STEADY)
    page.evaluate("delete document.body.dataset.lastStatus")
    page.click("#run")
    poll(page, "document.querySelector('#output span[data-stream]')", timeout=60)
    # the page keeps answering while output pours in (round-trip figures: benchmarks/flood_bench.py)
    shown = [_shown_chars(page) for _ in range(5)]
    assert shown == sorted(shown)
    page.keyboard.press("Escape")
    poll(page, "document.body.dataset.lastStatus", timeout=20)
    assert page.evaluate("window.lastResult.status") == "cancelled"
    assert end_sentence(page.text_content("#output .out-end")) == "Stopped: the run was cancelled"
    # Stop left the tier ready for the next run
    assert run_via_ui(page, "print('next')", tier)["text"] == "next\n"


def test_twenty_beginner_programs_look_the_same_on_both_tiers(page):
    differences = []
    for program in PROGRAMS:
        seen = {
            tier: run_via_ui(page, program["code"], tier, program["answers"])
            for tier in TIERS
        }
        browser, server = seen["browser"], seen["server"]
        for key in ("text", "images", "status"):
            if browser[key] != server[key]:
                differences.append((program["name"], key, browser[key], server[key]))
        if end_sentence(browser["end"]) != end_sentence(server["end"]):
            differences.append((program["name"], "end", browser["end"], server["end"]))
        assert "in your browser, Python 3." in browser["end"]
        assert "on the server, Python 3." in server["end"]
    assert differences == []
    by_name = {p["name"]: p for p in PROGRAMS}
    error = run_via_ui(page, by_name["zero_division"]["code"], "browser")
    assert error["text"] == (
        "2.0\n"
        "Traceback (most recent call last):\n"
        '  File "main.py", line 5, in <module>\n'
        "    print(average([]))\n"
        "          ~~~~~~~^^^^\n"
        '  File "main.py", line 2, in average\n'
        "    return sum(xs) / len(xs)\n"
        "           ~~~~~~~~^~~~~~~~~\n"
        "ZeroDivisionError: division by zero\n"
    )
    assert end_sentence(error["end"]) == "Your program stopped with an error"
    page.screenshot(path=str(SCREENSHOTS / "error-browser.png"))
    mixed = run_via_ui(page, by_name["stderr_interleaved"]["code"], "browser")
    assert mixed["text"] == "out 0\nerr 0\nout 1\nerr 1\nout 2\nerr 2\ndone\n"
    order = page.evaluate(
        "[...document.querySelectorAll('#output span[data-stream]')].map((s) => s.dataset.stream)"
    )
    assert order == ["stdout", "stderr"] * 3 + ["stdout"]


def test_runaway_recursion_says_the_stack_ran_out_and_python_recovers(page):
    code = "import sys\nsys.setrecursionlimit(10**6)\ndef f(n):\n    return f(n + 1)\nprint('deep')\nf(0)\n"
    seen = run_via_ui(page, code, "browser")
    assert seen["text"] == (
        "deep\nRecursionError: Python ran out of stack (the recursion went too deep)\n"
    )
    assert end_sentence(seen["end"]) == "Stopped: Python ran out of stack (the recursion went too deep)"
    assert "<wasm-runner>" not in seen["text"]
    assert run_via_ui(page, "import sys\nprint(sys.getrecursionlimit())", "browser")["text"] == "1000\n"


def test_auto_picks_one_tier_for_the_page_session():
    page = open_playground("/")
    assert page.evaluate("window.playground.runner.autoTier") is None
    first = run_via_ui(page, "import sys\nprint(sys.version_info[:2])", "auto")
    assert first["result"]["tier"] == "browser"
    # even if the browser runtime looks unavailable later, auto stays where it started
    page.evaluate("window.playground.runner.browserInfo = null")
    again = run_via_ui(page, "import sys\nprint(sys.version_info[:2])", "auto")
    assert again["result"]["tier"] == "browser" and again["text"] == first["text"]
    assert "auto runs in your browser" in page.text_content("#tier-note")
    page.context.close()
    # a page whose first auto run came before Pyodide was ready stays on the server
    page = open_playground("/")
    page.evaluate("window.playground.runner.browserInfo = null")
    first = run_via_ui(page, "import sys\nprint(sys.version_info[:2])", "auto")
    page.evaluate("window.playground.runner.browserInfo = {ready: true}")
    again = run_via_ui(page, "import sys\nprint(sys.version_info[:2])", "auto")
    assert first["result"]["tier"] == again["result"]["tier"] == "server"
    assert first["text"] == again["text"]
    page.context.close()


def test_a_package_the_browser_cannot_load_says_why_and_offers_the_server(page):
    # this machine is offline: the browser's package index (Pyodide's CDN) is unreachable
    code = "import numpy\nprint(numpy.arange(3).sum())"
    seen = run_via_ui(page, code, "browser")
    assert "ModuleNotFoundError: No module named 'numpy'" in seen["text"]
    index = page.evaluate("window.playground.runner.browserInfo.package_index")
    assert index.startswith("https://")
    assert seen["note"].startswith(
        f"The package “numpy” could not be downloaded: the browser's package index ({index}) could not be reached."
    )
    listed = run_via_ui(page, "import no_such_package_xyz", "browser")
    # no tier has it: the server tier's sentence (the page knows from /tier-modules.json), no offer
    assert listed["note"].startswith("The package no_such_package_xyz is not allowed on this server "
                                     "(server tier and browser tier alike)"), listed
    assert "Run it on the server" not in listed["note"]
    run_via_ui(page, code, "browser")
    page.evaluate("delete document.body.dataset.lastStatus")
    page.click("#output .out-action")  # "Run it on the server"
    poll(page, "document.body.dataset.lastStatus", timeout=60)
    assert page.evaluate("window.lastResult.tier") == "server"
    assert page.evaluate(SEEN)["text"] == "3\n"


@pytest.mark.parametrize("isolation", ["on", "off"])
def test_a_leaked_interval_cannot_reach_the_next_run(isolation):
    page = open_playground(f"/?isolation={isolation}")
    leak = (
        "from js import setInterval\nfrom pyodide.ffi import create_proxy\n"
        "setInterval(create_proxy(lambda: print('LEAK')), 5)\nprint('armed')\n"
    )
    assert run_in_browser(page, leak)["stdout"] == "armed\n"
    # the next run waits for input (the event loop runs meanwhile without isolation) and sleeps
    answered = page.evaluate(
        """async () => {
      const r = await window.playground.runner.run("import time\\nname = input('? ')\\ntime.sleep(0.3)\\nprint('clean', name)",
        {tier: 'browser', onInput: () => new Promise((resolve) => setTimeout(() => resolve('Ada'), 300))});
      return r;
    }"""
    )
    assert answered["status"] == "ok"
    assert answered["stdout"] == "? clean Ada\n"
    assert "LEAK" not in answered["stdout"] + answered["stderr"]
    page.context.close()


def test_python_cannot_forge_the_end_of_its_run(page):
    forge = """
import time
from js import postMessage, Object
from pyodide.ffi import to_js
for run_id in range(1, 200):
    fake = {"channel": "wasm-runner/1", "type": "done", "id": run_id, "fatal": False,
            "result": {"status": "ok", "stdout": "FORGED", "exit_code": 0}}
    postMessage(to_js(fake, dict_converter=Object.fromEntries))
print("posted")
time.sleep(0.5)
print("real end")
"""
    result = run_in_browser(page, forge)
    assert result["status"] == "ok"
    assert result["stdout"] == "posted\nreal end\n"
    # a forged "done" cannot end a run early either: this one ends at its wall limit
    stuck = run_in_browser(
        page, forge.replace("time.sleep(0.5)", "while True: pass"), limits={"wall_seconds": 1}
    )
    assert stuck["status"] == "timeout" and "FORGED" not in stuck["stdout"]


def test_input_wait_is_not_run_time_and_the_form_closes_when_a_run_ends(page):
    code = "name = input('Name? ')\nprint('Hi', name)\n"
    for tier in TIERS:
        page.select_option("#tier", tier)
        page.evaluate(
            "(code) => window.playground.editor.setCode(code)", code
        )
        page.evaluate("delete document.body.dataset.lastStatus")
        # a 1-second wall limit, answered after 2.5 s: thinking time does not count
        page.evaluate(
            """() => { const run = window.playground.runner.run.bind(window.playground.runner);
          window.playground.runner.run = (code, options) => run(code, {...options, limits: {wall_seconds: 1}}); }"""
        )
        try:
            page.click("#run")
            poll(page, "!document.getElementById('input-form').hidden", timeout=60)
            page.wait_for_timeout(2500)
            page.fill("#input-box", "Ada")
            page.press("#input-box", "Enter")
            poll(page, "document.body.dataset.lastStatus", timeout=30)
        finally:
            page.evaluate("delete window.playground.runner.run")
        result = page.evaluate("window.lastResult")
        assert result["status"] == "ok", (tier, result)
        assert result["input_wait_ms"] >= 2000
        shown = page.evaluate(SEEN)
        assert shown["text"] == "Name? Ada\nHi Ada\n"
        elapsed = shown["end"].split(" · ")[-1]
        assert elapsed.endswith(" ms"), shown["end"]  # not 2.5 s: the wait is left out
        # Stop while the program waits: the form closes, a late answer is neither sent nor echoed
        page.evaluate("delete document.body.dataset.lastStatus")
        page.click("#run")
        poll(page, "!document.getElementById('input-form').hidden", timeout=60)
        page.fill("#input-box", "late")
        page.click("#stop")
        poll(page, "document.body.dataset.lastStatus", timeout=30)
        assert page.evaluate("document.getElementById('input-form').hidden") is True
        assert "late" not in page.evaluate(SEEN)["text"]
    # an abandoned run ends at the (separate, configurable) input-wait bound
    abandoned = page.evaluate(
        """async () => await window.playground.runner.run("input('? ')",
        {tier: 'browser', limits: {input_wait_seconds: 1, wall_seconds: 30}, onInput: () => new Promise(() => {})})"""
    )
    assert (abandoned["status"], abandoned["limit"]) == ("timeout", "input_wait")


def test_tab_indents_escape_tab_leaves_and_focus_returns(page):
    page.select_option("#tier", "browser")
    page.evaluate("window.playground.editor.setCode('')")
    page.click(".cm-content")
    page.keyboard.type("for i in range(2):")
    page.keyboard.press("Enter")
    page.keyboard.type("print(i)")
    page.keyboard.press("Enter")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")
    page.keyboard.type("pass")
    code = page.evaluate("window.playground.editor.getCode()")
    assert code == "for i in range(2):\n    print(i)\n    pass"
    page.keyboard.press("Control+Enter")
    poll(page, "document.body.dataset.lastStatus", timeout=30)
    assert page.evaluate("document.activeElement.closest('.cm-editor') !== null")
    page.keyboard.press("Escape")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('.cm-editor') === null")
    # Run with the button: focus lands on the output, not on the page body
    page.evaluate("delete document.body.dataset.lastStatus")
    page.click("#run")
    poll(page, "document.body.dataset.lastStatus", timeout=30)
    assert page.evaluate("document.activeElement.id") == "output"


class _CoursePage(BaseHTTPRequestHandler):
    runner_url = ""

    def do_GET(self) -> None:
        body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Lesson</title>
<script type="module" src="{self.runner_url}/embed.js"></script></head><body>
<wasm-runner id="asks" tier="browser">name = input("Name? ")\nprint("Hi", name)</wasm-runner>
<wasm-runner id="counts" tier="browser">print(sum(range(10)))</wasm-runner>
<wasm-runner id="loops" tier="browser">import time\ni = 0\nwhile True:\n    print(i)\n    i += 1\n    if i % 200 == 0:\n        time.sleep(0.02)</wasm-runner>
</body></html>""".encode()
        send_html(self, body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def course_page() -> Iterator[Any]:
    _CoursePage.runner_url = shared_server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _CoursePage)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    context = shared_browser().new_context()
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/")
    poll(page, "document.getElementById('asks').runner && document.getElementById('asks').runner.browserInfo", timeout=READY_SECONDS)
    yield page
    context.close()
    httpd.shutdown()


def _shadow(page: Any, element: str, selector: str) -> str:
    return page.evaluate(
        "([id, sel]) => document.getElementById(id).shadowRoot.querySelector(sel).textContent",
        [element, selector],
    )


def test_embeds_do_not_block_each_other_and_escape_stops_inside_one(course_page):
    page = course_page
    page.evaluate("() => { window.asking = document.getElementById('asks').run(); }")
    poll(page, "!document.getElementById('asks').shadowRoot.querySelector('form').hidden", timeout=60)
    # while the first example waits for its input, the second one runs to the end
    second = page.evaluate("document.getElementById('counts').run()")
    assert second["status"] == "ok" and second["stdout"] == "45\n"
    assert "45" in _shadow(page, "counts", ".output")
    # a third one (both runtimes busy? no: the second finished) floods; Esc inside it stops it
    page.evaluate("() => { window.looping = document.getElementById('loops').run(); }")
    poll(page, "document.getElementById('loops').shadowRoot.querySelector('.output span')", timeout=READY_SECONDS)
    page.screenshot(path=str(SCREENSHOTS / "embed-flood.png"))
    page.evaluate("document.getElementById('loops').shadowRoot.querySelector('.stop').focus()")
    page.keyboard.press("Escape")
    looped = page.evaluate("window.looping")
    assert looped["status"] == "cancelled"
    assert end_sentence(_shadow(page, "loops", ".out-end")) == "Stopped: the run was cancelled"
    # the first one still gets its answer
    page.evaluate(
        """() => { const root = document.getElementById('asks').shadowRoot;
      root.querySelector('input').value = 'Ada'; root.querySelector('form').requestSubmit(); }"""
    )
    asked = page.evaluate("window.asking")
    assert asked["status"] == "ok" and asked["stdout"] == "Name? Hi Ada\n"
    assert page.evaluate("document.getElementById('asks').shadowRoot.querySelector('form').hidden")
    page.screenshot(path=str(SCREENSHOTS / "embed-after.png"))
