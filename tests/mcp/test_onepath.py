"""The MCP tools at /mcp go through the server's one execution path: admission, audit log,
metrics and the one session store, exactly like /api/run and /api/sessions. Real app (build_app)
on a real uvicorn on 127.0.0.1, the official SDK's client, the real sandbox."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.support import mcp_checks as checks
import anyio
import httpx
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from wasm_runner.http.app import build_app
from wasm_runner.settings import DEFAULT_PROFILES, ApiKey, ServerConfig, hash_key
from wasm_runner.admission import resident_mb, server_memory_mb
from wasm_runner.limits import Limits

pytestmark = pytest.mark.timeout(900)

ALICE, BOB, CAROL, DAVE = "alice-key-0123", "bob-key-0123", "carol-key-0123", "dave-key-0123"
# about one second of CPU, printing when it started and ended (the guest's clock is the host's)
CPU_SECOND = (
    "import time\nt0 = time.time()\nn = 0\nwhile time.time() - t0 < 1.0:\n    n += 1\n"
    "print('span', repr(t0), repr(time.time()))\n"
)


def _config(tmp_path: Path, **overrides: Any) -> ServerConfig:
    profiles = {
        "chat": replace(
            DEFAULT_PROFILES["analyst"], name="chat", pool_size=0, preload=(),
            limits=Limits(cpu_seconds=10, wall_seconds=60, memory_mb=128),
        )
    }  # fmt: skip
    settings: dict[str, Any] = {
        "api_keys": (
            ApiKey("alice", hash_key(ALICE), rate="10000/minute", max_concurrent=8),
            ApiKey("bob", hash_key(BOB), rate="10000/minute", max_concurrent=8),
            ApiKey("carol", hash_key(CAROL), rate="10000/minute", max_concurrent=2),
            ApiKey("dave", hash_key(DAVE), rate="10000/minute", max_concurrent=8),
        ),
        "profiles": profiles,
        "default_profile": "chat",
        "audit_log": tmp_path / "audit.jsonl",
    }
    settings.update(overrides)
    return ServerConfig.from_keys(**settings)


@contextlib.contextmanager
def _serve(config: ServerConfig) -> Iterator[str]:
    app = build_app(config)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    end = time.monotonic() + 60
    while not server.started and time.monotonic() < end:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def _client(base: str, key: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(f"{base}/mcp", http_client=http), read_timeout_seconds=600)


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus exposition (0 when absent)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, label_text = head.partition("{")
        if metric != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', label_text))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(value)
    return 0.0


def test_mcp_runs_are_queued_audited_and_counted(tmp_path: Path) -> None:
    """With max_running = 1, four concurrent run_python calls take turns, like /api/run."""
    config = _config(tmp_path, max_running=1, max_queue=8)
    with _serve(config) as base:
        gauges: list[tuple[float, float]] = []  # (running guests, queue depth) as scraped
        stop = threading.Event()

        def scrape() -> None:
            with httpx.Client(base_url=base, timeout=30) as http:
                while not stop.is_set():
                    text = http.get("/metrics").text
                    gauges.append(
                        (_metric(text, "wasm_runner_running_guests"), _metric(text, "wasm_runner_queue_depth"))
                    )
                    time.sleep(0.02)

        async def four_at_once() -> list[str]:
            texts: list[str] = []
            async with _client(base, ALICE) as client:
                await client.call_tool("run_python", {"code": "print('warm')"})

                async def one() -> None:
                    result = await client.call_tool("run_python", {"code": CPU_SECOND})
                    assert not result.is_error, checks.text_of(result)
                    texts.append(checks.text_of(result))

                async with anyio.create_task_group() as group:
                    for _ in range(4):
                        group.start_soon(one)
            return texts

        scraper = threading.Thread(target=scrape)
        scraper.start()
        try:
            texts = checks.run_async(four_at_once)
        finally:
            stop.set()
            scraper.join()
        metrics = httpx.get(f"{base}/metrics").text
        assert httpx.get(f"{base}/healthz").status_code == 200

    # serialized, not overlapped: each run started after the previous one ended
    spans = sorted(
        (float(a), float(b)) for text in texts for a, b in re.findall(r"span (\S+) (\S+)", text)
    )
    assert len(spans) == 4
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, f"runs overlapped: {spans}"
    assert max(running for running, _ in gauges) <= 1
    assert max(queued for _, queued in gauges) >= 1, "the scrapes never saw a queued run"
    # audited 4/4 (plus the warm-up run), under the key that ran them
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    mcp_runs = [r for r in records if r["kind"] == "mcp"]
    assert len(mcp_runs) == 5 and {r["tenant"] for r in mcp_runs} == {"alice"}
    assert [r["status"] for r in mcp_runs] == ["ok"] * 5
    assert all(r["profile"] == "chat" and r["client"] == "127.0.0.1" for r in mcp_runs)
    # counted in /metrics
    assert _metric(metrics, "wasm_runner_runs_total", kind="mcp", status="ok", profile="chat") == 5
    assert _metric(metrics, "wasm_runner_queue_wait_seconds_count") == 5
    assert _metric(metrics, "wasm_runner_queue_wait_seconds_sum") > 0


def test_mcp_sessions_share_the_keys_caps_and_the_memory_budget(tmp_path: Path) -> None:
    """One session store: MCP and HTTP sessions count together against max_concurrent and the
    memory budget (4 sessions fill a budget of 4 sessions' memory)."""
    chat = _config(tmp_path).profiles["chat"]
    hold = resident_mb(chat, chat.runtime, chat.limits)  # 128 MB + its image's pages
    # the whole budget is one pool here (per-key shares are tested in tests/scenarios/test_attacks_over_http.py)
    # (after what the server holds itself: its prestarted instances, admission.server_memory_mb)
    held = server_memory_mb(_config(tmp_path))
    # never paused: with pausing, an idle session is paused to make room for a new one
    config = _config(tmp_path, memory_budget_mb=4 * hold + held, tenant_memory_share=1.0,
                     session_pause_seconds=0)
    with _serve(config) as base:
        carol_http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {CAROL}"}, timeout=120)
        dave_http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {DAVE}"}, timeout=120)

        async def scenario() -> None:
            async with _client(base, CAROL) as carol, _client(base, DAVE) as dave:
                # carol (max_concurrent = 2): one HTTP session plus one MCP session is her share
                made = carol_http.post("/api/sessions", json={})
                assert made.status_code == 201, made.text
                carol_mcp = await checks.open_session(carol)
                refused = await carol.call_tool("open_session", {})
                assert refused.is_error and "already has 2 open sessions" in checks.text_of(refused)
                again = carol_http.post("/api/sessions", json={})
                assert again.status_code == 429 and again.json()["error"]["code"] == "too_many_sessions"
                # it is one store: carol sees her MCP session over HTTP, dave does not
                assert carol_http.get(f"/api/sessions/{carol_mcp}").json()["alive"] is True
                assert dave_http.get(f"/api/sessions/{carol_mcp}").status_code == 404
                # dave: one HTTP session and one MCP session fill the budget
                assert dave_http.post("/api/sessions", json={}).status_code == 201
                await checks.open_session(dave)
                metrics = httpx.get(f"{base}/metrics").text
                assert _metric(metrics, "wasm_runner_active_sessions") == 4
                assert _metric(metrics, "wasm_runner_memory_reserved_mb") == 4 * hold
                refused = await dave.call_tool("open_session", {})
                assert refused.is_error and "memory budget" in checks.text_of(refused)
                full = dave_http.post("/api/sessions", json={})
                assert full.status_code == 429 and full.json()["error"]["code"] == "memory_budget"
                # the server still answers, and a closed MCP session gives its memory back
                assert httpx.get(f"{base}/healthz").status_code == 200
                await checks.check_close(carol, carol_mcp)
                result = await dave.call_tool("open_session", {})
                assert not result.is_error, checks.text_of(result)
                cell = await dave.call_tool(
                    "run_cell", {"session_id": result.structured_content["session_id"], "code": "6 * 7"}
                )
                assert "42" in checks.text_of(cell)

        try:
            checks.run_async(scenario)
        finally:
            carol_http.close()
            dave_http.close()
        records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        assert [r["kind"] for r in records] == ["mcp_session"] and records[0]["tenant"] == "dave"


def _rpc(method: str, id_: int | None = None, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        body["id"] = id_
    if params is not None:
        body["params"] = params
    return body


def _answer(reply: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a reply (JSON or a one-event SSE stream)."""
    if reply.headers.get("content-type", "").startswith("application/json"):
        return reply.json()  # type: ignore[no-any-return]
    for line in reply.text.splitlines():
        if line.startswith("data:"):
            return json.loads(line[5:])  # type: ignore[no-any-return]
    raise AssertionError(f"no message in {reply.text!r}")


def test_a_transport_session_is_bound_to_the_key_that_opened_it(tmp_path: Path) -> None:
    with _serve(_config(tmp_path)) as base:
        accept = {"Accept": "application/json, text/event-stream"}

        def as_key(key: str, sid: str | None = None) -> dict[str, str]:
            headers = {**accept, "Authorization": f"Bearer {key}"}
            if sid:
                headers["mcp-session-id"] = sid
            return headers

        init = {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}  # fmt: skip
        opened = httpx.post(f"{base}/mcp", json=_rpc("initialize", 1, init), headers=as_key(ALICE))
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        version = _answer(opened)["result"]["protocolVersion"]
        alice = {**as_key(ALICE, sid), "mcp-protocol-version": version}
        bob = {**as_key(BOB, sid), "mcp-protocol-version": version}
        assert httpx.post(f"{base}/mcp", json=_rpc("notifications/initialized"), headers=alice).status_code == 202
        # another key can neither use the session nor end it: it is answered as if it did not exist
        listed = httpx.post(f"{base}/mcp", json=_rpc("tools/list", 2), headers=bob)
        assert listed.status_code == 404 and "tools" not in listed.text
        call = {"name": "run_python", "arguments": {"code": "print('bob was here')"}}
        assert httpx.post(f"{base}/mcp", json=_rpc("tools/call", 3, call), headers=bob).status_code == 404
        assert httpx.delete(f"{base}/mcp", headers=bob).status_code == 404
        # the owner still can, and ends it
        listed = httpx.post(f"{base}/mcp", json=_rpc("tools/list", 4), headers=alice)
        assert listed.status_code == 200
        assert {t["name"] for t in _answer(listed)["result"]["tools"]} == checks.TOOL_NAMES
        assert httpx.delete(f"{base}/mcp", headers=alice).status_code in (200, 204)
        assert httpx.post(f"{base}/mcp", json=_rpc("tools/list", 5), headers=alice).status_code == 404
        # a key check still comes first: no key, no answer about the session at all
        assert httpx.post(f"{base}/mcp", json=_rpc("tools/list", 6), headers={**accept, "mcp-session-id": sid}).status_code == 401
        assert httpx.get(f"{base}/healthz").status_code == 200
        audit = tmp_path / "audit.jsonl"
        assert not audit.exists() or "bob" not in audit.read_text()


def test_a_busy_server_refuses_an_mcp_run_with_a_clear_sentence(tmp_path: Path) -> None:
    """No queue places: a second concurrent run_python is refused like a second /api/run (429),
    the model is told why and when to retry, and the first run still completes."""
    config = _config(tmp_path, max_running=1, max_queue=0)
    with _serve(config) as base:

        async def two_at_once() -> list[tuple[bool, str]]:
            out: list[tuple[bool, str]] = []
            async with _client(base, ALICE) as client:
                await client.call_tool("run_python", {"code": "print('warm')"})

                async def one(after_first: bool) -> None:
                    if after_first:  # wait until the first run holds the only slot
                        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                            while _metric((await http.get("/metrics")).text, "wasm_runner_running_guests") < 1:
                                await anyio.sleep(0.02)
                    result = await client.call_tool("run_python", {"code": CPU_SECOND})
                    out.append((bool(result.is_error), checks.text_of(result)))

                async with anyio.create_task_group() as group:
                    group.start_soon(one, False)
                    group.start_soon(one, True)
            return out

        outcomes = checks.run_async(two_at_once)
        metrics = httpx.get(f"{base}/metrics").text
        assert httpx.get(f"{base}/healthz").status_code == 200
    assert [e for e, _ in outcomes] == [True, False]  # the second is refused at once
    refused = outcomes[0][1]
    assert refused.startswith("The run was refused: the server is busy and its queue is full.")
    assert "Try again in about" in refused
    assert "span" in next(text for error, text in outcomes if not error)
    assert _metric(metrics, "wasm_runner_rejections_total", reason="queue_full") == 1
