"""The network rules through the HTTP service (a real uvicorn on 127.0.0.1): a key whose
``[network.NAME]`` rule names the loopback API reads it in ``POST /api/run``; a key that no rule
names gets the sentence naming its key and profile; the audit log has each request (key, user,
destination, status, bytes, outcome) and the loopback server's log agrees."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.support.live_server import KEY, OTHER_KEY, LiveServer, live_server
from tests.support.loopback_api import LoopbackAPI, loopback_api
from tests.support.network_server import network_config


@pytest.fixture(scope="module")
def api() -> Iterator[LoopbackAPI]:
    with loopback_api() as server:
        yield server


@pytest.fixture(scope="module")
def server(api: LoopbackAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(network_config(tmp_path_factory.mktemp("net"), api, profiles=["student"], max_requests=2)) as live:
        yield live


CODE = """\
import json, urllib.request
for path in ('/data.json', '/data.json?again', '/data.json?third'):
    try:
        print(json.load(urllib.request.urlopen('http://127.0.0.1:PORT' + path))['answer'])
    except OSError as e:
        print(type(e).__name__, e)
"""


def test_a_key_with_a_rule_reaches_the_api_and_every_request_is_audited(server: LiveServer, api: LoopbackAPI) -> None:
    before = len(api.log)
    with server.client(KEY) as client:
        body = client.post("/api/run", json={"code": CODE.replace("PORT", str(api.port))},
                           headers={"X-Wasm-Runner-User": "u-17"}).json()
    assert body["status"] == "ok", body
    assert body["stdout"] == ("42\n42\nNetworkRefused this run has made the 2 requests the network rule "
                              "'test-api' allows (max_requests)\n")
    assert api.paths()[before:] == ["/data.json", "/data.json?again"]
    assert server.config.audit_log is not None
    entry = [json.loads(line) for line in server.config.audit_log.read_text().splitlines()][-1]
    assert entry["tenant"] == "alice" and entry["user"]
    assert [(r["rule"], r["url"], r["address"], r["status"], r["outcome"]) for r in entry["network"]] == [
        ("test-api", api.url("/data.json"), "127.0.0.1", 200, "ok"),
        ("test-api", api.url("/data.json?again"), "127.0.0.1", 200, "ok"),
        ("test-api", api.url("/data.json?third"), None, None, "refused")]
    assert all(r["bytes_in"] > 0 for r in entry["network"][:2])


def test_a_key_without_a_rule_gets_the_sentence(server: LiveServer, api: LoopbackAPI, tmp_path: Path) -> None:
    before = len(api.log)
    with server.client(OTHER_KEY) as client:
        body = client.post("/api/run", json={"code": CODE.replace("PORT", str(api.port))}).json()
        assert body["status"] == "ok", body
        assert body["stdout"] == ("NetworkRefused network access is off for this run: no [network] rule of the "
                                  "server names the key 'bob' and profile 'student'\n") * 3
        assert api.log[before:] == []
        assert client.post("/api/run", json={"code": "print('still answering')"}).json()["stdout"] == \
            "still answering\n"


def test_the_mcp_tool_gets_the_keys_rules(server: LiveServer, api: LoopbackAPI) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.support import mcp_checks

    code = f"import urllib.request\nprint(urllib.request.urlopen('{api.url('/data.json?mcp')}').read().decode())"

    async def run_python(key: str) -> str:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
        async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http),
                          read_timeout_seconds=300) as client:
            return mcp_checks.text_of(await client.call_tool("run_python", {"code": code}))

    before = len(api.log)
    assert '{"answer": 42, "items": [1, 2, 3]}' in anyio.run(run_python, KEY)
    assert "network access is off for this run: no [network] rule of the server names the key 'bob'" in \
        anyio.run(run_python, OTHER_KEY)
    assert api.paths()[before:] == ["/data.json?mcp"]
