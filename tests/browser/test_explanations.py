"""Explanations under errors in the playground (issue 36), in real headless Chromium against the
real server, on both tiers: the explanation under the output (and in the live region), the
failing part of the line marked in the editor, the same words on both tiers, in the page's
language. Screenshots go to $WASM_RUNNER_SCREENSHOTS (default /tmp/wasm-runner-screens)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.support.browser import READY_SECONDS, open_playground, poll, run_via_ui, send_html, shared_browser, shared_server

SCREENSHOTS = Path(os.environ.get("WASM_RUNNER_SCREENSHOTS", "/tmp/wasm-runner-screens"))
TIERS = ["browser", "server"]
PROGRAMS = {
    "misspelt-name": ("total = 3\nprint(totl)\n", "name_misspelt", "totl"),
    "str-plus-int": ("age = 12\nprint('You are ' + age)\n", "str_plus_other", "'You are ' + age"),
    "missing-colon": ("x = 3\nif x > 2\n    print('big')\n", "missing_colon", "2"),
    "endless-loop": ("n = 10\nprint('counting down from', n)\nwhile n > 0:\n    n + 1\n", None, None),
}
EXPLAINED = """() => {
  const box = document.querySelector('#output .out-explain');
  const marked = [...document.querySelectorAll('#editor .cm-explain-span')].map((m) => m.textContent).join('');
  return box && { id: box.dataset.explanation, lang: box.lang,
    title: box.querySelector('.out-explain-title').textContent,
    text: box.querySelector('.out-explain-text').textContent,
    hint: box.querySelector('.out-explain-hint').textContent, marked,
    announced: document.getElementById('announce').textContent };
}"""


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    page = open_playground("/")
    yield page
    assert page.errors == []
    page.context.close()


def explained(page: Any, name: str, tier: str, lang: str = "en") -> dict[str, Any]:
    code = PROGRAMS[name][0]
    seen = run_via_ui(page, code, tier, timeout=90)
    box = page.evaluate(EXPLAINED)
    assert box, (tier, name, seen)
    assert box["title"] and box["text"] and box["hint"]
    assert box["title"] in box["announced"] and box["hint"] in box["announced"]  # the live region says it
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"explain-{name}-{tier}{'' if lang == 'en' else '-' + lang}.png"))
    return box


@pytest.mark.parametrize("name", ["misspelt-name", "str-plus-int", "missing-colon"])
def test_an_error_is_explained_and_marked_alike_on_both_tiers(page: Any, name: str) -> None:
    _, ident, marked = PROGRAMS[name]
    seen = {tier: explained(page, name, tier) for tier in TIERS}
    for tier, box in seen.items():
        assert box["id"] == ident and box["marked"] == marked, (tier, box)
    for field in ("title", "text", "hint", "marked"):
        assert seen["browser"][field] == seen["server"][field], field
    # the mark goes when the student edits the code
    page.click("#editor .cm-content")
    page.keyboard.press("End")
    page.keyboard.type(" ")
    assert page.evaluate("document.querySelectorAll('#editor .cm-explain-span').length") == 0


def test_an_endless_loop_is_explained_on_both_tiers(page: Any) -> None:
    seen = {tier: explained(page, "endless-loop", tier) for tier in TIERS}
    for tier, box in seen.items():
        # the server's CPU limit or the wall clock, whichever comes first; the same advice
        assert box["id"] in ("limit_cpu", "limit_timeout"), (tier, box)
        assert "your loop's condition never becomes false" in box["text"], (tier, box)
        assert box["marked"] == ""
    assert seen["browser"]["hint"] == seen["server"]["hint"]


def test_the_explanation_follows_the_page_language(page: Any) -> None:
    page.evaluate("document.documentElement.lang = 'de'")
    try:
        box = explained(page, "misspelt-name", "browser", "de")
        assert box["lang"] == "de" and box["title"] == "Ist 'totl' falsch geschrieben?"
        server = explained(page, "misspelt-name", "server", "de")
        assert server["title"] == box["title"] and server["hint"] == box["hint"]
    finally:
        page.evaluate("document.documentElement.lang = 'en'")


class _Lesson(BaseHTTPRequestHandler):
    runner_url = ""

    def do_GET(self) -> None:
        send_html(self, f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Lesson</title>
<script type="module" src="{self.runner_url}/embed.js"></script></head><body>
<wasm-runner id="typo" tier="browser" lang="de">total = 3\nprint(totl)</wasm-runner>
</body></html>""".encode())

    def log_message(self, *args: object) -> None:
        pass


def test_an_embed_explains_in_its_own_language() -> None:
    _Lesson.runner_url = shared_server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Lesson)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    context = shared_browser().new_context()
    try:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/")
        poll(page, "document.getElementById('typo').runner && document.getElementById('typo').runner.browserInfo",
             timeout=READY_SECONDS)
        poll(page, "document.getElementById('typo').editor", timeout=30)
        page.evaluate("document.getElementById('typo').shadowRoot.querySelector('button.run').click()")
        poll(page, "document.getElementById('typo').shadowRoot.querySelector('.out-explain')", timeout=60)
        seen = page.evaluate("""() => { const root = document.getElementById('typo').shadowRoot;
          return { title: root.querySelector('.out-explain-title').textContent,
                   marked: [...root.querySelectorAll('.cm-explain-span')].map((m) => m.textContent).join(''),
                   announced: root.querySelector('.sr').textContent }; }""")
        assert seen["title"] == "Ist 'totl' falsch geschrieben?" and seen["marked"] == "totl"
        assert "Meintest du 'total'?" in seen["announced"]
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "explain-embed-de.png"))
    finally:
        context.close()
        httpd.shutdown()
