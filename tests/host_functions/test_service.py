"""Declared host functions through the faces, end to end: the HTTP service on a real uvicorn
(``POST /api/run`` naming its functions) and the MCP tools over streamable HTTP, calling a real
HTTP endpoint of the app started by the test on 127.0.0.1. Only the functions a key may use
under its profile run; each call is signed for the key and the user, audited and counted
(never its payload); the MCP tool descriptions list each caller's own functions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from wasm_runner.host_functions.declared import functions_from

from ..support.app_endpoint import SECRET, AppEndpoint, app_endpoint
from ..support.live_server import KEY, OTHER_KEY, LiveServer, live_server, make_config
from ..support.mcp_checks import run_async, text_of

pytestmark = pytest.mark.timeout(900)

PARAMS = {"type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]}
CODE = "from host import lookup_order\nprint(lookup_order(42)['total'] * 2)\n"


def lookup(call: dict[str, Any], order_id: int) -> dict[str, Any]:
    return {"id": order_id, "total": 19.5, "for": [call["key"], call["user"]]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, AppEndpoint]]:
    tmp = tmp_path_factory.mktemp("functions")
    secret = tmp / "lookup.secret"
    secret.write_text(SECRET + "\n")
    with app_endpoint({"lookup_order": lookup}) as app:
        functions = functions_from({
            "lookup_order": {"description": "An order of the shop by its id.", "parameters": PARAMS,
                             "url": app.url("/tools/lookup_order"), "secret_file": str(secret),
                             "allow": ["127.0.0.1"], "keys": ["alice"]},
            "order_total": {"description": "An order's total.", "parameters": PARAMS, "keys": ["alice"],
                            "profiles": ["analyst"], "entry_point": "tests.host_functions.app_functions:order_total"},
        })
        with live_server(make_config(tmp, functions=functions)) as server:
            yield server, app


def audit(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_run_calls_the_functions_it_named(served: tuple[LiveServer, AppEndpoint]) -> None:
    server, app = served
    with server.client() as api:
        r = api.post("/api/run", json={"code": CODE, "functions": ["lookup_order"]},
                     headers={"X-Wasm-Runner-User": "student-7"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ok", body
    assert body["stdout"] == "39.0\n"
    call = json.loads(app.requests[-1]["body"])
    assert (call["function"], call["key"], call["user"]) == ("lookup_order", "alice", "student-7")
    assert app.refused == 0
    entry = [e for e in audit(server.config.audit_log) if e.get("kind") == "run"][-1]  # type: ignore[arg-type]
    assert [(h["name"], h["outcome"], h["calls"]) for h in entry["host_calls"]] == [("lookup_order", "ok", 1)]
    assert "student-7" not in json.dumps(entry) and "19.5" not in json.dumps(entry)
    metrics = httpx.get(f"{server.url}/metrics", headers={"Authorization": f"Bearer {KEY}"}, timeout=30).text
    assert 'wasm_runner_host_calls_total{function="lookup_order",outcome="ok"}' in metrics


def test_functions_not_for_the_key_or_profile_are_refused(served: tuple[LiveServer, AppEndpoint]) -> None:
    server, app = served
    before = len(app.requests)
    with server.client(key=OTHER_KEY) as bob:
        r = bob.post("/api/run", json={"code": CODE, "functions": ["lookup_order"]})
    assert r.status_code == 403 and r.json()["error"]["code"] == "function_forbidden"
    assert "it may call: none" in r.json()["error"]["message"]
    with server.client() as alice:
        r = alice.post("/api/run", json={"code": CODE, "functions": ["order_total"]})  # analyst only
        assert r.status_code == 403 and "it may call: lookup_order" in r.json()["error"]["message"]
        r = alice.post("/api/run", json={"code": CODE, "functions": ["os_system"]})
        assert r.status_code == 403
        r = alice.post("/api/run", json={"code": CODE})  # none named: none given
        assert r.status_code == 200 and r.json()["status"] == "error" and "lookup_order" in r.json()["stderr"]
        r = alice.post("/api/run", json={"code": "from host import order_total\nprint(order_total(42))",
                                         "functions": ["order_total"], "profile": "analyst"})
        assert r.status_code == 200 and r.json()["stdout"] == "19.5\n", r.text
    assert len(app.requests) == before


def test_a_session_cell_calls_the_functions_it_named(served: tuple[LiveServer, AppEndpoint]) -> None:
    server, app = served
    with server.client() as api:
        r = api.post("/api/sessions", json={})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        r = api.post(f"/api/sessions/{sid}/run", json={"code": "from host import lookup_order\n"
                                                       "order = lookup_order(42)", "functions": ["lookup_order"]})
        assert r.status_code == 200 and r.json()["status"] == "ok", r.text
        r = api.post(f"/api/sessions/{sid}/run", json={"code": "print(order['total'])"})
        assert r.json()["stdout"] == "19.5\n"
        with server.client(key=OTHER_KEY) as bob:  # bob cannot reach alice's session, nor call it
            assert bob.post(f"/api/sessions/{sid}/run", json={"code": "1", "functions": ["lookup_order"]}).status_code in (403, 404)
        api.delete(f"/api/sessions/{sid}")
    assert json.loads(app.requests[-1]["body"])["key"] == "alice"


def _mcp(server: LiveServer, key: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(f"{server.url}/mcp", http_client=http), read_timeout_seconds=600)


def test_mcp_lists_each_callers_functions_and_runs_them(served: tuple[LiveServer, AppEndpoint]) -> None:
    server, app = served

    async def conversation() -> tuple[str, str, str]:
        async with _mcp(server, KEY) as alice, _mcp(server, OTHER_KEY) as bob:
            mine = {t.name: t.description or "" for t in (await alice.list_tools()).tools}
            theirs = {t.name: t.description or "" for t in (await bob.list_tools()).tools}
            result = await alice.call_tool("run_python", {"code": CODE})
            return mine["run_python"] + mine["run_cell"], theirs["run_python"], text_of(result)

    mine, theirs, ran = run_async(conversation)
    assert "from host import NAME" in mine and "- lookup_order(order_id): An order of the shop by its id." in mine
    assert '"required":["order_id"]' in mine and "order_total" not in mine  # the MCP profile is not analyst
    assert "lookup_order" not in theirs
    assert "39.0" in ran
    assert json.loads(app.requests[-1]["body"])["key"] == "alice"
