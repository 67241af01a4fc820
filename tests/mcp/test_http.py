"""End to end: the MCP tools over streamable HTTP behind API keys, on a real uvicorn on 127.0.0.1,
driven by the official SDK's client. Real sandbox, the HTTP app's real key check."""

from __future__ import annotations

import base64
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import httpx
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support import mcp_checks as checks
from wasm_runner.execution import Caller
from wasm_runner.settings import DEFAULT_PROFILES, ApiKey, ServerConfig, hash_key
from wasm_runner.assembly import assemble
from wasm_runner.limits import Limits
from wasm_runner.mcp.http import McpHttp

pytestmark = pytest.mark.timeout(900)

KEY_A, KEY_B = "key-alice-0123456789", "key-bob-0123456789"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, McpHttp]]:
    profiles = dict(DEFAULT_PROFILES)
    # the wall limit far above the CPU limit: on a busy machine an endless loop still ends by CPU
    profiles["chat"] = replace(profiles["analyst"], name="chat", limits=Limits(cpu_seconds=10, wall_seconds=600))
    config = ServerConfig(
        api_keys=(ApiKey("alice", hash_key(KEY_A)), ApiKey("bob", hash_key(KEY_B))),
        profiles=profiles,
        default_profile="chat",
    )
    mcp_http = McpHttp.for_service(assemble(config))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp_http.lifespan():
            yield

    async def healthz(request: object) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/healthz", healthz), *mcp_http.routes()], lifespan=lifespan)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", mcp_http
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _client(base: str, key: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(f"{base}/mcp", http_client=http), read_timeout_seconds=600)


def test_round_trip_over_http(served: tuple[str, McpHttp]) -> None:
    base, mcp_http = served

    async def conversation() -> None:
        async with _client(base, KEY_A) as client:
            await checks.check_tools_listed(client)
            await checks.check_run_once(client)
            await checks.check_error_is_trimmed(client)
            session_id = await checks.open_session(client)
            await checks.check_state_kept(client, session_id)
            await checks.check_csv_pandas_plot(client, session_id)
            await checks.check_out_file_link(client, session_id)
            session_id = await checks.check_hostile_cells(client, session_id)
            await client.call_tool(
                "upload_file", {"session_id": session_id, "name": "sales.csv", "content": checks.SALES_CSV}
            )
            root = mcp_http.executor.sessions.get(session_id, Caller("alice")).root
            assert (root / "data" / "sales.csv").read_text() == checks.SALES_CSV
            # a file of the largest size an upload may have, in base64: a body over the SDK's 4 MiB
            most = mcp_http.config.max_upload_bytes
            big = await client.call_tool("upload_file", {
                "session_id": session_id, "name": "big.bin", "content": base64.b64encode(b"\x01" * most).decode(),
                "encoding": "base64",
            })  # fmt: skip
            assert not big.is_error and (root / "data" / "big.bin").stat().st_size == most, checks.text_of(big)
            await checks.check_close(client, session_id)
            assert not root.exists(), "closing deletes the session's folder"

    checks.run_async(conversation)
    assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}


def test_a_session_is_private_to_its_key(served: tuple[str, McpHttp]) -> None:
    base, _ = served

    async def two_callers() -> None:
        async with _client(base, KEY_A) as alice:
            session_id = await checks.open_session(alice)
            await alice.call_tool("run_cell", {"session_id": session_id, "code": "secret = 'alice only'"})
            async with _client(base, KEY_B) as bob:
                for tool, args in (
                    ("run_cell", {"session_id": session_id, "code": "print(secret)"}),
                    ("upload_file", {"session_id": session_id, "name": "x.txt", "content": "x"}),
                    ("close_session", {"session_id": session_id}),
                ):
                    result = await bob.call_tool(tool, args)
                    assert result.is_error and "no open session" in checks.text_of(result)
            result = await alice.call_tool("run_cell", {"session_id": session_id, "code": "print(secret)"})
            assert "alice only" in checks.text_of(result)
            await checks.check_close(alice, session_id)

    checks.run_async(two_callers)


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-key"}])
def test_requests_without_a_valid_key_are_refused(served: tuple[str, McpHttp], headers: dict[str, str]) -> None:
    base, _ = served
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": "print(1)"}}}  # fmt: skip
    reply = httpx.post(
        f"{base}/mcp", json=body, headers={**headers, "Accept": "application/json, text/event-stream"}
    )
    assert reply.status_code == 401
    assert reply.json()["error"]["code"] == "unauthorized"
    assert httpx.get(f"{base}/healthz").status_code == 200


def test_a_caller_cannot_name_itself(served: tuple[str, McpHttp]) -> None:
    """A client-sent caller header is dropped: the session stays bob's, not alice's."""
    base, mcp_http = served

    async def spoof() -> None:
        http = create_mcp_http_client(
            headers={"Authorization": f"Bearer {KEY_B}", "X-Wasm-Runner-Caller": "alice"}
        )
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as bob:
            session_id = await checks.open_session(bob)
            assert mcp_http.executor.sessions.get(session_id, Caller("bob")).tenant == "bob"
            await checks.check_close(bob, session_id)

    checks.run_async(spoof)


def test_fork_session_makes_independent_copies(served: tuple[str, McpHttp]) -> None:
    """fork_session: each copy is a new session of the same key with the same variables and its
    own /data and /out (copied), changed without touching the original or the other copy; the
    copies count against the key's sessions and bob cannot fork alice's session."""
    base, mcp_http = served
    store = mcp_http.executor.sessions

    async def conversation() -> None:
        async with _client(base, KEY_A) as client:
            session_id = await checks.open_session(client)
            await client.call_tool("upload_file", {"session_id": session_id, "name": "in.txt", "content": "base"})
            r = await client.call_tool("run_cell", {"session_id": session_id, "code": "items = [1]"})
            assert not r.is_error, checks.text_of(r)
            forked = await client.call_tool("fork_session", {"session_id": session_id, "copies": 2})
            assert not forked.is_error, checks.text_of(forked)
            assert forked.structured_content is not None
            a, b = forked.structured_content["copies"]
            assert len({a, b, session_id}) == 3 and a in checks.text_of(forked)
            roots = {s: store.get(s, Caller("alice")).root for s in (session_id, a, b)}
            assert len(set(roots.values())) == 3  # private folders each
            assert (roots[a] / "data" / "in.txt").read_text() == "base"
            r = await client.call_tool("run_cell", {
                "session_id": a, "code": "items.append('a')\nopen('/out/a.txt', 'w').write('a')\nprint(items)"})
            assert "[1, 'a']" in checks.text_of(r)
            for other in (b, session_id):
                r = await client.call_tool("run_cell", {
                    "session_id": other, "code": "import os\nprint(items, os.listdir('/out'), open('/data/in.txt').read())"})
                assert "[1] [] base" in checks.text_of(r), checks.text_of(r)
            async with _client(base, KEY_B) as bob:
                refused = await bob.call_tool("fork_session", {"session_id": session_id})
                assert refused.is_error and "no open session" in checks.text_of(refused)
            too_many = await client.call_tool("fork_session", {"session_id": session_id, "copies": 9})
            assert too_many.is_error and "1 to 8" in checks.text_of(too_many)
            for s in (a, b):
                await checks.check_close(client, s)
            r = await client.call_tool("run_cell", {"session_id": session_id, "code": "print(items)"})
            assert "[1]" in checks.text_of(r)
            await checks.check_close(client, session_id)

    checks.run_async(conversation)
    forks = [e for e in store.open_sessions() if e.tenant == "alice"]
    assert forks == []
    assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}


def test_the_explanation_comes_in_the_asked_language(served: tuple[str, McpHttp]) -> None:
    """Issue 36: run_python and run_cell take ``lang`` as the HTTP API does; a language without a
    catalogue gets English, as the tools' schema says; a malformed tag is refused, and the server
    goes on answering."""
    base, _ = served
    code = "values = []\nprint(sum(values) / len(values))\n"

    async def conversation() -> None:
        async with _client(base, KEY_A) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("run_python", "run_cell"):
                lang = tools[name].input_schema["properties"]["lang"]
                assert "any other language gets English" in lang["description"] and "de" in lang["description"]
                assert "lang" not in tools[name].input_schema["required"]
            german = await checks.call(client, "run_python", {"code": code, "lang": "de-AT"})
            e = german.structured_content["explanation"]
            assert (e["id"], e["lang"], e["title"]) == ("zero_division", "de", "Division durch null"), e
            assert "Explanation (line 2): Division durch null. Die Zahl, durch die geteilt wird" in checks.text_of(german)
            for args in ({"lang": "fr"}, {}):  # no French catalogue, or no lang: English
                english = await checks.call(client, "run_python", {"code": code, **args})
                e = english.structured_content["explanation"]
                assert (e["lang"], e["title"]) == ("en", "Division by zero"), e
            bad = await checks.call(client, "run_python", {"code": code, "lang": "not a language!"})
            assert bad.is_error and "lang" in checks.text_of(bad), checks.text_of(bad)
            session_id = await checks.open_session(client)
            cell = await checks.call(client, "run_cell", {"session_id": session_id, "code": "1 / 0", "lang": "de"})
            e = cell.structured_content["explanation"]
            assert (e["id"], e["lang"], e["title"]) == ("zero_division", "de", "Division durch null"), e
            await checks.check_close(client, session_id)
            await checks.check_run_once(client)  # the server still answers

    checks.run_async(conversation)
