"""The page's functions in the browser tier, through the embed element in Chromium (issue 24,
item 4): a course page on another origin gives its <wasm-runner> a ``sensor()`` (``expose``); the
student's code imports it from ``host`` and calls it; the page's error arrives as a Python
exception; a function of the page it did not expose cannot be reached."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.support.browser import READY_SECONDS, poll, shared_browser, shared_server


class _CoursePage(BaseHTTPRequestHandler):
    runner_url = ""

    def do_GET(self) -> None:
        body = f"""<!doctype html><html><head><meta charset="utf-8"><title>Greenhouse lab</title>
<script type="module" src="{self.runner_url}/embed.js"></script></head>
<body><h1>Greenhouse lab</h1>
<wasm-runner id="lab" tier="browser">print("ready")</wasm-runner>
<script type="module">
  window.secretCalls = 0;
  window.secret = () => {{ window.secretCalls += 1; return "the page's secret"; }};
  window.sensorCalls = [];
  await customElements.whenDefined("wasm-runner");
  let value = 20;
  document.getElementById("lab").expose({{
    sensor: async (room, {{ unit = "C" }} = {{}}) => {{
      window.sensorCalls.push(room);
      if (room === "attic") throw new Error("no sensor in the attic");
      value += 0.5;
      return {{ room, unit, value }};
    }},
  }});
  window.exposed = true;
</script>
</body></html>""".encode()
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def lab_page() -> Iterator[object]:
    _CoursePage.runner_url = shared_server()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _CoursePage)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    context = shared_browser().new_context()
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/")
    poll(page, "window.exposed && document.getElementById('lab').runner")
    poll(page, "document.getElementById('lab').runner.browserInfo", timeout=READY_SECONDS)
    yield page
    context.close()
    httpd.shutdown()


RUN = """async (code) => {
  const element = document.getElementById("lab");
  element.getCode = () => code;
  const result = await element.run();
  return { result, shown: element.shadowRoot.querySelector(".output").textContent,
           sensorCalls: window.sensorCalls.splice(0), secretCalls: window.secretCalls };
}"""


def test_the_snippet_calls_the_pages_sensor(lab_page) -> None:
    code = (
        "from host import sensor\n"
        "readings = [sensor('greenhouse', unit='C') for _ in range(3)]\n"
        "print([r['value'] for r in readings], readings[0]['unit'])\n"
        "try:\n    sensor('attic')\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    out = lab_page.evaluate(RUN, code)
    assert out["result"]["status"] == "ok", out["result"]["stderr"]
    # a JavaScript number with no fraction arrives as an int (21), as JSON has it
    assert out["result"]["stdout"] == "[20.5, 21, 21.5] C\nError no sensor in the attic\n"
    assert out["sensorCalls"] == ["greenhouse"] * 3 + ["attic"]
    assert "[20.5, 21, 21.5] C" in out["shown"]


def test_a_function_the_page_did_not_expose_cannot_be_reached(lab_page) -> None:
    code = (
        "import host\n"
        "try:\n    host.secret\nexcept AttributeError as e:\n    print('attr:', e)\n"
        "import _wasm_runner_guest.host as guest\n"
        "try:\n    guest._call('secret', (), {})\nexcept Exception as e:\n    print('forged:', type(e).__name__)\n"
        "import js\n"
        "print('window secret here:', hasattr(js, 'secret'))\n"
    )
    out = lab_page.evaluate(RUN, code)
    assert out["result"]["status"] == "ok", out["result"]["stderr"]
    assert "attr: " in out["result"]["stdout"]
    assert "forged: NameError\n" in out["result"]["stdout"]
    assert "window secret here: False\n" in out["result"]["stdout"]  # the worker's realm is not the page's
    assert out["secretCalls"] == 0 and out["sensorCalls"] == []
    again = lab_page.evaluate(RUN, "from host import sensor\nprint(sensor('greenhouse')['room'])")
    assert again["result"]["stdout"] == "greenhouse\n"  # the page and the runner are unharmed
