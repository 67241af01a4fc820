"""The network allowlist on the browser tier (issue 37 §1), in Chromium: a loopback HTTP server
stands in for a public API, an operator's ``[network.NAME]`` rule names it for one key; the
playground's runner, with that key, runs a program in the browser that reads JSON with
``urllib.request`` (the server tier's shim, each request made by the runner under the run's
grant), the rule's cap and an address it does not name refused with the server tier's
sentences; with a key no rule names every request gets the sentence naming the key, and the page
asks again when its key changes. The loopback server's own log shows only what the rule allowed;
the audit log has each request."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import playground_page, run_with_key
from tests.support.live_server import KEY, OTHER_KEY, LiveServer, live_server
from tests.support.loopback_api import LoopbackAPI, loopback_api
from tests.support.network_server import network_config

CODE = """\
import json, urllib.request
for url in ('BASE/data.json', 'BASE/data.json?again', 'BASE/data.json?third', 'http://127.0.0.1:9/elsewhere'):
    try:
        print(json.load(urllib.request.urlopen(url))['items'])
    except OSError as e:
        print(type(e).__name__, e)
"""


@pytest.fixture(scope="module")
def api() -> Iterator[LoopbackAPI]:
    with loopback_api() as server:
        yield server


@pytest.fixture(scope="module")
def server(api: LoopbackAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    from wasm_runner.browser.locations import web_dir
    from wasm_runner.browser.pyodide_snapshot import SnapshotStore

    SnapshotStore(web_dir()).ensure()  # the page then starts Python from the snapshot
    with live_server(network_config(tmp_path_factory.mktemp("browser-net"), api, max_requests=2)) as live:
        yield live


@pytest.fixture(scope="module")
def page(server: LiveServer) -> Iterator[Any]:
    with playground_page(server.url) as page:
        yield page


def test_a_key_with_a_rule_reads_the_api_from_the_browser(server: LiveServer, api: LoopbackAPI, page: Any) -> None:
    before = len(api.log)
    result = run_with_key(page, KEY, CODE.replace("BASE", api.url("")))
    assert result["status"] == "ok" and result["tier"] == "browser", result
    assert result["stdout"] == (
        "[1, 2, 3]\n[1, 2, 3]\n"
        "NetworkRefused this run has made the 2 requests the network rule 'test-api' allows (max_requests)\n"
        "NetworkRefused http://127.0.0.1:9 is not a destination of this run's network rules ('test-api'); "
        f"the operator allows: http://127.0.0.1:{api.port}\n")
    assert api.paths()[before:] == ["/data.json", "/data.json?again"]  # the API's own view
    assert server.config.audit_log is not None
    lines = [json.loads(line) for line in server.config.audit_log.read_text().splitlines()]
    heard = [e for e in lines if e.get("event") == "network"][-4:]
    assert {(e["tier"], e["tenant"]) for e in heard} == {("browser", "alice")} and len({e["run"] for e in heard}) == 1
    assert [(e["rule"], e["url"], e["address"], e["status"], e["outcome"]) for e in heard] == [
        ("test-api", api.url("/data.json"), "127.0.0.1", 200, "ok"),
        ("test-api", api.url("/data.json?again"), "127.0.0.1", 200, "ok"),
        ("test-api", api.url("/data.json?third"), None, None, "refused"),
        (None, "http://127.0.0.1:9/elsewhere", None, None, "refused")]
    assert page.errors == []


def test_a_key_without_a_rule_gets_the_sentence_in_the_browser(api: LoopbackAPI, page: Any) -> None:
    before = len(api.log)
    result = run_with_key(page, OTHER_KEY, CODE.replace("BASE", api.url("")))
    assert result["status"] == "ok" and result["tier"] == "browser", result
    sentence = ("NetworkRefused network access is off for this run: no [network] rule of the server names the "
                "key 'bob' and profile 'student'\n")
    assert result["stdout"] == sentence * 4
    assert api.log[before:] == []
    again = run_with_key(page, OTHER_KEY, "print('still answering')")
    assert again["stdout"] == "still answering\n"
    # the page's key changed back: its refusal is not remembered for the other key
    back = run_with_key(page, KEY, "import json, urllib.request\n"
                                    f"print(json.load(urllib.request.urlopen('{api.url('/data.json')}'))['answer'])")
    assert back["stdout"] == "42\n", back
    assert api.paths()[before:] == ["/data.json"]
    assert page.errors == []
