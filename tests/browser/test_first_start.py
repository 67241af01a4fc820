"""The first start in real Chromium: with an empty compiled-module cache the server answers the
playground at once, the page says the server runtime is being prepared, and a run in the "auto"
tier runs in the browser meanwhile (issue 22). The server is stopped while it still compiles."""

from __future__ import annotations

import tempfile

import httpx

from tests.browser.test_playground import SCREENSHOTS
from tests.support.browser import open_playground, poll, start_uvicorn, stop_process


def test_playground_says_the_server_runtime_is_being_prepared() -> None:
    with tempfile.TemporaryDirectory(prefix="wasm-runner-empty-cache-") as cache:
        process, base = start_uvicorn(
            "server:app", {"WASM_RUNNER_AUTH": "off", "WASM_RUNNER_CACHE": cache}
        )
        try:
            ready = httpx.get(base + "/readyz", timeout=30)
            assert ready.status_code == 503 and ready.json()["status"] == "warming"
            page = open_playground(base + "/")
            note = poll(
                page,
                "(() => { const n = document.getElementById('server-note');"
                " return !n.hidden && n.textContent; })()",
                timeout=60,
            )
            assert note.startswith("The server runtime is being prepared: first start only, about ")
            assert note.endswith(" s. Runs in your browser work now.")
            result = page.evaluate(
                "async () => await window.playground.runner.run(\"print('meanwhile')\")"
            )
            assert result["status"] == "ok" and result["stdout"] == "meanwhile\n"
            assert result["tier"] == "browser"
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "playground-first-start.png"))
            assert page.errors == []
            page.context.close()
        finally:
            stop_process(process)
