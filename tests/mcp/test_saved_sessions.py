"""Saved sessions (issue 25): ``save_session`` keeps a session's state on the server under a
handle, ``resume_session`` opens a new session from it, ``delete_saved_session`` deletes it; the
same over HTTP (``POST /api/sessions/{id}/save``, ``/api/saved-sessions/...``). Real parts: the
whole app on a real uvicorn on 127.0.0.1, the official MCP client, real wasmtime instances.

What a user sees: the resumed session continues exactly (variables, imports, random state, files
in /data, /scratch and /out); another key, an unknown, expired or deleted handle get a clear
refusal; a save over the key's disk budget is refused and the session stays live; each is in the
audit log; the server still answers."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from tests.support import mcp_checks as checks
from tests.support.live_server import KEY, OTHER_KEY, LiveServer, live_server, make_config, wait_until
from wasm_runner.settings import DEFAULT_PROFILES
from wasm_runner.limits import Limits

pytestmark = pytest.mark.timeout(900)

BUDGET = 48 << 20  # each key's snapshot disk budget: a session holding 64 MiB does not fit


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("server")
    base = make_config(root, snapshot_key_bytes=BUDGET)
    # the wall limit far above the CPU limit: on a busy machine a cell still ends by CPU
    chat = replace(DEFAULT_PROFILES["analyst"], name="chat", limits=Limits(cpu_seconds=10, wall_seconds=600))
    config = dataclasses.replace(base, profiles={**base.profiles, "chat": chat}, default_profile="chat")
    with live_server(config) as live:
        yield live


def _client(server: LiveServer, key: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(f"{server.url}/mcp", http_client=http), read_timeout_seconds=600)


async def _cell(client: Client, session_id: str, code: str) -> str:
    r = await client.call_tool("run_cell", {"session_id": session_id, "code": code})
    assert not r.is_error, checks.text_of(r)
    return checks.text_of(r)


def _audit(server: LiveServer) -> list[dict[str, str]]:
    path = Path(server.config.audit_log)  # type: ignore[arg-type]
    return [json.loads(line) for line in path.read_text().splitlines() if '"event"' in line]


def test_a_saved_session_resumes_exactly_and_only_for_its_key(server: LiveServer) -> None:
    state: dict[str, str] = {}

    async def conversation() -> None:
        async with _client(server, KEY) as alice:
            sid = await checks.open_session(alice)
            up = await alice.call_tool("upload_file", {"session_id": sid, "name": "in.csv", "content": "a,b\n1,2\n"})
            assert not up.is_error, checks.text_of(up)
            await _cell(alice, sid, (
                "import random, json, collections\nrandom.seed(7)\nitems = [1, 2]\n"
                "counts = collections.Counter('abca')\n"
                "open('/scratch/notes.txt', 'w').write('scratch note')\n"
                "open('/out/report.txt', 'w').write('report')"
            ))  # fmt: skip
            saved = await alice.call_tool("save_session", {"session_id": sid})
            assert not saved.is_error, checks.text_of(saved)
            assert saved.structured_content is not None
            saved_id = saved.structured_content["saved_id"]
            state["saved_id"] = saved_id
            assert saved_id in checks.text_of(saved) and "resume_session" in checks.text_of(saved)
            assert saved.structured_content["expires_in"] > 3600 and saved.structured_content["profile"] == "chat"
            # the original goes on; what it does after the save is not in the saved state
            expected = await _cell(alice, sid, "print(random.random())")
            await _cell(alice, sid, "items.append(3)\nopen('/scratch/notes.txt', 'w').write('changed')")
            await checks.check_close(alice, sid)  # the saved state outlives its session

            resumed = await alice.call_tool("resume_session", {"saved_id": saved_id})
            assert not resumed.is_error, checks.text_of(resumed)
            assert resumed.structured_content is not None
            new = resumed.structured_content["session_id"]
            assert new != sid and new in checks.text_of(resumed)
            out = await _cell(alice, new, (
                "import os\nprint(items, counts['a'], json.dumps({'k': 1}), open('/scratch/notes.txt').read(),\n"
                "      open('/data/in.csv').read().splitlines(), os.listdir('/out'), open('/out/report.txt').read())\n"
                "print(random.random())"
            ))  # fmt: skip
            assert "[1, 2] 2 {\"k\": 1} scratch note ['a,b', '1,2'] ['report.txt'] report" in out, out
            assert expected.strip().splitlines()[-1] in out.splitlines(), (expected, out)
            # the saved state stays: it resumes again, as another independent session
            again = await alice.call_tool("resume_session", {"saved_id": saved_id})
            assert not again.is_error, checks.text_of(again)
            assert again.structured_content is not None
            other = again.structured_content["session_id"]
            await _cell(alice, new, "items.append('new')")
            assert "[1, 2]" in await _cell(alice, other, "print(items)")

            async with _client(server, OTHER_KEY) as bob:  # another key: refused, and nothing happens
                for tool in ("resume_session", "delete_saved_session"):
                    refused = await bob.call_tool(tool, {"saved_id": saved_id})
                    assert refused.is_error, checks.text_of(refused)
                    assert "no saved session" in checks.text_of(refused).lower()
                    assert "another key" in checks.text_of(refused)
                refused = await bob.call_tool("save_session", {"session_id": new})
                assert refused.is_error and "no open session" in checks.text_of(refused)
            for unknown in ("saved_neverMadeHandle0000", "../../etc/passwd", ""):
                refused = await alice.call_tool("resume_session", {"saved_id": unknown})
                assert refused.is_error and "no saved session" in checks.text_of(refused).lower(), checks.text_of(refused)

            deleted = await alice.call_tool("delete_saved_session", {"saved_id": saved_id})
            assert not deleted.is_error, checks.text_of(deleted)
            for tool in ("resume_session", "delete_saved_session"):
                refused = await alice.call_tool(tool, {"saved_id": saved_id})
                assert refused.is_error and "no saved session" in checks.text_of(refused).lower()
            # sessions resumed from it go on
            assert "'new'" in await _cell(alice, new, "print(items)")
            for s in (new, other):
                await checks.check_close(alice, s)

    checks.run_async(conversation)
    events = _audit(server)
    saved_id = state["saved_id"]
    assert [e["tenant"] for e in events if e["event"] == "session_saved" and e["saved_id"] == saved_id] == ["alice"]
    resumed = [e for e in events if e["event"] == "session_resumed" and e.get("saved_id") == saved_id]
    assert len(resumed) == 2 and {e["tenant"] for e in resumed} == {"alice"}
    refusals = [e for e in events if e["event"] == "session_saved_refused" and e["saved_id"] == saved_id]
    assert {(e["tenant"], e["reason"]) for e in refusals} == {("bob", "unknown"), ("alice", "unknown")}
    assert [e["tenant"] for e in events if e["event"] == "session_saved_deleted"] == ["alice"]
    assert server.health()["status"] == "ok"


def test_an_expired_saved_session_is_refused(server: LiveServer) -> None:
    sessions = server.app.state.service.sessions
    pausing = sessions.pausing
    assert pausing is not None

    async def conversation() -> None:
        async with _client(server, KEY) as alice:
            sid = await checks.open_session(alice)
            await _cell(alice, sid, "x = 1")
            sessions.pausing = replace(pausing, lifetime_seconds=1.0)  # this server keeps saved states 1 s
            try:
                saved = await alice.call_tool("save_session", {"session_id": sid})
            finally:
                sessions.pausing = pausing
            assert not saved.is_error, checks.text_of(saved)
            assert saved.structured_content is not None
            time.sleep(2.0)
            refused = await alice.call_tool("resume_session", {"saved_id": saved.structured_content["saved_id"]})
            assert refused.is_error and "has expired" in checks.text_of(refused), checks.text_of(refused)
            assert "x = 1" not in checks.text_of(refused)
            await _cell(alice, sid, "print(x)")  # the session it came from is untouched
            await checks.check_close(alice, sid)

    checks.run_async(conversation)
    assert any(e["event"] == "session_saved_refused" and e["reason"] == "expired" for e in _audit(server))


def test_a_save_over_the_key_budget_is_refused_and_the_session_stays_live(server: LiveServer) -> None:
    async def conversation() -> None:
        async with _client(server, OTHER_KEY) as bob:
            sid = await checks.open_session(bob)
            await _cell(bob, sid, "import random\nblob = random.randbytes(64 << 20)\nkept = 'yes'")
            refused = await bob.call_tool("save_session", {"session_id": sid})
            assert refused.is_error, checks.text_of(refused)
            text = checks.text_of(refused)
            assert "budget" in text and "stays live" in text, text
            assert f"yes {64 << 20}" in await _cell(bob, sid, "print(kept, len(blob))")
            await checks.check_close(bob, sid)

    checks.run_async(conversation)
    assert any(e["event"] == "session_save_refused" and e["reason"] == "snapshot_budget" for e in _audit(server))
    assert server.health()["status"] == "ok"


def test_a_tool_session_whose_files_are_over_the_budget_stays_live_and_says_so(server: LiveServer) -> None:
    """Its /out files are stored with its snapshot (so another replica could resume it): over the
    key's budget, nothing is stored, and the model reads why; the session goes on."""

    async def conversation() -> None:
        async with _client(server, OTHER_KEY) as bob:
            sid = await checks.open_session(bob)
            await _cell(bob, sid, "import random\nfor i in range(7):\n    open(f'/out/r{i}', 'wb').write(random.randbytes(8 << 20))\nkept = 'yes'")
            with server.client(OTHER_KEY) as api:  # its save, in the background, is refused
                assert wait_until(lambda: "snapshot_error" in api.get(f"/api/sessions/{sid}").json(), 120)
            text = await _cell(bob, sid, "print(kept)")
            assert "yes" in text and "could not be saved" in text and "budget" in text, text
            await checks.check_close(bob, sid)

    checks.run_async(conversation)
    assert server.health()["status"] == "ok"


def test_saved_sessions_over_http(server: LiveServer) -> None:
    """The same over HTTP: save, resume under the profile it was saved from, delete; refusals."""
    with server.client() as api, server.client(OTHER_KEY) as bob:
        r = api.post("/api/sessions", json={"profile": "quick"})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        r = api.post(f"/api/sessions/{sid}/run", json={"code": "import fractions\nhalf = fractions.Fraction(1, 2)"})
        assert r.status_code == 200 and r.json()["status"] == "ok", r.text
        r = api.post(f"/api/sessions/{sid}/save")
        assert r.status_code == 201, r.text
        saved = r.json()
        assert saved["profile"] == "quick" and saved["saved_id"].startswith("saved_") and saved["bytes"] > 0
        assert bob.post(f"/api/saved-sessions/{saved['saved_id']}/resume").status_code == 404
        r = api.post(f"/api/saved-sessions/{saved['saved_id']}/resume")
        assert r.status_code == 201, r.text
        resumed = r.json()
        assert resumed["profile"] == "quick" and resumed["id"] != sid
        r = api.post(f"/api/sessions/{resumed['id']}/run", json={"code": "print(half * 3)"})
        assert r.json()["stdout"] == "3/2\n", r.text
        assert bob.delete(f"/api/saved-sessions/{saved['saved_id']}").status_code == 404
        assert api.delete(f"/api/saved-sessions/{saved['saved_id']}").status_code == 204
        gone = api.post(f"/api/saved-sessions/{saved['saved_id']}/resume")
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_saved_session"
        for s in (sid, resumed["id"]):
            assert api.delete(f"/api/sessions/{s}").status_code == 204
    assert server.health()["status"] == "ok"
