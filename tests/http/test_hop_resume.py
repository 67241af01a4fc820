"""A session whose replica died resumes on another (issue 25 item 3): two real ``wasm-runner serve``
processes on 127.0.0.1 sharing a real redis-server and one snapshot folder; the owner is killed
with SIGKILL, and the other replica, reached by the next call, resumes the session from its last
snapshot (``http/relay.py``'s lost path, ``sessions.SessionRecovery``) instead of ``410``;
an MCP tool session moves, with its files, to the replica its key's MCP calls reach."""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from redis import Redis
from tests.support import mcp_checks as checks
from tests.support.live_server import wait_until
from tests.support.redis_process import RedisProcess
from tests.support.replicas import Replica, quick_profiles

ALICE = "alice-resume-key"
SECRET = secrets.token_hex(32)
BUDGET = 4 << 20  # a cell holding 8 MiB of random data makes a snapshot over it: its save fails
CONFIG = """
[server]
default_profile = "quick"
max_running = 2
max_sessions = 8
session_pause_seconds = 300  # saved after each cell; not paused during the test
snapshot_dir = "{store}"
snapshot_key_bytes = {budget}

{profiles}

[[api_keys]]
name = "resume-alice"
key = "{key}"
rate = "10000/minute"
max_concurrent = 8
"""


@pytest.fixture
def replicas(tmp_path: Path, redis: RedisProcess) -> Iterator[tuple[Replica, Replica, Path]]:
    store = tmp_path / "shared-snapshots"
    config = tmp_path / "cluster.toml"
    config.write_text(CONFIG.format(profiles=quick_profiles(20, 160), store=store, budget=BUDGET, key=ALICE))
    owner = Replica(config, redis, tmp_path, secret=SECRET, name="owner", advertise=True)
    other = Replica(config, redis, tmp_path, secret=SECRET, name="other", advertise=True)
    try:
        owner.wait_ready(), other.wait_ready()
        yield owner, other, store
    finally:
        owner.stop()
        other.stop()


def opened(replica: Replica) -> str:
    with replica.client(ALICE) as api:
        r = api.post("/api/sessions", json={})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def cell(replica: Replica, sid: str, code: str) -> httpx.Response:
    with replica.client(ALICE) as api:
        return api.post(f"/api/sessions/{sid}/run", json={"code": code})


def shown(replica: Replica, sid: str) -> dict:  # type: ignore[type-arg]
    with replica.client(ALICE) as api:
        r = api.get(f"/api/sessions/{sid}")
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_a_killed_owners_sessions_resume_on_the_replica_the_next_call_reaches(
    replicas: tuple[Replica, Replica, Path], redis: RedisProcess
) -> None:
    owner, other, store = replicas
    whole, behind = opened(owner), opened(owner)
    first = cell(owner, whole, "import json\nx = 41\nopen('notes.txt', 'w').write('kept')\n"
                               "log = open('log.txt', 'w')\nlog.write('a')")  # fmt: skip
    assert first.status_code == 200 and first.json()["status"] == "ok", first.text
    assert cell(owner, behind, "y = 'saved'").json()["status"] == "ok"
    assert wait_until(lambda: shown(owner, whole)["saved"] and shown(owner, behind)["saved"], timeout=90)
    # the second cell of `behind` is answered, but its snapshot does not fit the key's budget:
    # the stored one is still the first cell's
    big = cell(owner, behind, "import random\nblob = random.randbytes(8 << 20)  # does not compress")
    assert big.status_code == 200 and big.json()["status"] == "ok", big.text
    assert wait_until(lambda: "snapshot_error" in shown(owner, behind), timeout=90)

    # as if the owner died after writing `whole`'s snapshot and before the directory learnt of it:
    # the entry says the snapshot holds no call; the snapshot itself says it holds the first
    client = Redis.from_url(redis.url)
    try:
        key = f"wasm-runner:session:{whole}"
        entry = json.loads(client.get(key))  # type: ignore[arg-type]
        entry["saved"]["saved_calls"] = 0
        client.set(key, json.dumps(entry), keepttl=True)
    finally:
        client.close()

    owner.proc.send_signal(signal.SIGKILL)
    owner.proc.wait(30)

    # the next call reaches the other replica: resumed there, same id, same state
    resumed = cell(other, whole, "log.write('b'); log.close()\n"
                                 "print(x + 1, open('notes.txt').read(), open('log.txt').read(), json.dumps([1]))")  # fmt: skip
    assert resumed.status_code == 200, (resumed.text, other.log_path.read_text(errors="replace")[-3000:])
    body = resumed.json()
    assert body["stdout"] == "42 kept ab [1]\n", body
    assert body["session"]["id"] == whole and body["session"]["calls"] == 2
    assert body["session"]["alive"] is True and "lost_cells" not in body["session"]
    # a session whose last cell was not saved says which cells were lost
    older = cell(other, behind, "print(y, 'blob' in dir())")
    assert older.status_code == 200, older.text
    assert older.json()["stdout"] == "saved False\n"
    assert older.json()["session"]["lost_cells"] == [2]
    # ownership moved: the directory names the other replica, which answers from now on
    client = Redis.from_url(redis.url)
    try:
        entry = json.loads(client.get(f"wasm-runner:session:{whole}"))
    finally:
        client.close()
    assert entry["owner"] == other.url
    assert cell(other, whole, "print(x)").json()["stdout"] == "41\n"
    # and its snapshots now live in the new owner's folder only; deleting removes them
    assert wait_until(lambda: shown(other, whole)["saved"], timeout=90)
    folders = {p.parent for p in store.glob("*/*.snap")}
    assert len(folders) == 1, folders
    with other.client(ALICE) as api:
        for sid in (whole, behind):
            assert api.delete(f"/api/sessions/{sid}").status_code == 204
            assert api.get(f"/api/sessions/{sid}").status_code == 404
    assert not [p for p in store.glob("*/*.snap") if p.stem in (whole, behind)]


def test_a_drained_owners_saved_sessions_move_to_another_replica(
    replicas: tuple[Replica, Replica, Path],
) -> None:
    owner, other, store = replicas
    sid = opened(owner)
    assert cell(owner, sid, "kept = [1, 2, 3]").json()["status"] == "ok"
    assert wait_until(lambda: shown(owner, sid)["saved"], timeout=90)
    owner.proc.send_signal(signal.SIGTERM)  # a rolling restart: drain, then exit
    assert owner.proc.wait(120) == 0
    assert any(p.stem == sid for p in store.glob("*/*.snap"))  # left for another replica
    moved = cell(other, sid, "kept.append(4); print(kept)")
    assert moved.status_code == 200, (moved.text, other.log_path.read_text(errors="replace")[-3000:])
    assert moved.json()["stdout"] == "[1, 2, 3, 4]\n" and "lost_cells" not in moved.json()["session"]
    with other.client(ALICE) as api:
        assert api.delete(f"/api/sessions/{sid}").status_code == 204


def test_a_saved_state_outlives_its_replica_and_resumes_on_another(
    replicas: tuple[Replica, Replica, Path],
) -> None:
    """``POST /api/sessions/{id}/save`` through the other replica reaches the owner (the hop);
    the saved state is in the shared folder, so after the owner is killed the other replica
    resumes it, with its state."""
    owner, other, store = replicas
    sid = opened(owner)
    assert cell(owner, sid, "import fractions\nz = {'kept': [1, 2], 'half': fractions.Fraction(1, 2)}"
                ).json()["status"] == "ok"  # fmt: skip
    with other.client(ALICE) as api:
        r = api.post(f"/api/sessions/{sid}/save")
    assert r.status_code == 201, r.text
    saved_id = r.json()["saved_id"]
    assert [p.stem for p in store.glob(".saved/*/*.saved")] == [saved_id]
    owner.proc.send_signal(signal.SIGKILL)
    owner.proc.wait(30)
    with other.client(ALICE) as api:
        r = api.post(f"/api/saved-sessions/{saved_id}/resume")
        assert r.status_code == 201, (r.text, other.log_path.read_text(errors="replace")[-3000:])
        new = r.json()["id"]
        ran = api.post(f"/api/sessions/{new}/run", json={"code": "print(z['kept'], z['half'] * 3)"})
        assert ran.status_code == 200 and ran.json()["stdout"] == "[1, 2] 3/2\n", ran.text
        assert api.delete(f"/api/saved-sessions/{saved_id}").status_code == 204
        assert api.delete(f"/api/sessions/{new}").status_code == 204
    assert not list(store.glob(".saved/*/*.saved"))


@contextlib.asynccontextmanager
async def _mcp(replica: Replica) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ALICE}"})
    async with http, Client(streamable_http_client(f"{replica.url}/mcp", http_client=http),
                            read_timeout_seconds=120) as client:  # fmt: skip
        yield client


def test_a_tool_session_moves_to_the_replica_its_keys_mcp_calls_reach(
    replicas: tuple[Replica, Replica, Path],
) -> None:
    """A key's MCP calls reach another replica (the balancer's hash moved): the owner, alive, is
    asked to leave the session there (a signed ``hand-over``; not while a cell runs, nor when its
    state cannot be saved), and the session goes on there with its variables and its /data and
    /out files."""
    owner, other, store = replicas

    async def conversation() -> None:
        async with _mcp(owner) as first, _mcp(other) as second:
            sid = await checks.open_session(first)
            up = await first.call_tool("upload_file", {"session_id": sid, "name": "in.txt", "content": "hello"})
            assert not up.is_error, checks.text_of(up)
            done = await first.call_tool("run_cell", {"session_id": sid, "code": "open('/out/o.txt', 'w').write('o')"})
            assert not done.is_error, checks.text_of(done)
            # a cell runs on the owner (long enough for a loaded machine): it stays there meanwhile
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(first.call_tool, "run_cell", {"session_id": sid, "code": "import time; time.sleep(15); x = 2"})
                assert await anyio.to_thread.run_sync(lambda: wait_until(lambda: owner.running() == 1, 60))
                busy = await second.call_tool("run_cell", {"session_id": sid, "code": "print(1)"})
                assert busy.is_error and "try again in a few seconds" in checks.text_of(busy), checks.text_of(busy)
            moved = await second.call_tool("run_cell", {
                "session_id": sid, "code": "print(x, open('/data/in.txt').read(), open('/out/o.txt').read())",
            })  # fmt: skip
            text = checks.text_of(moved)
            assert not moved.is_error and "2 hello o" in text, (text, other.log_path.read_text(errors="replace")[-3000:])
            assert "moved to another replica" in text and "No cell was lost" in text, text
            # /out/o.txt came with the session; it was reported where it was written, not again
            assert moved.structured_content["files"] == [], moved.structured_content
            await checks.check_close(second, sid)
            # a session whose state cannot be saved (over the key's disk budget) is not handed
            # over: the model is told to open a new one, and the session goes on where it is
            kept = await checks.open_session(first)
            big = await first.call_tool("run_cell", {"session_id": kept, "code": "import os; big = os.urandom(8 << 20)"})
            assert not big.is_error, checks.text_of(big)
            refused = await second.call_tool("run_cell", {"session_id": kept, "code": "print(1)"})
            assert refused.is_error and "could not be moved here" in checks.text_of(refused), checks.text_of(refused)
            still = await first.call_tool("run_cell", {"session_id": kept, "code": "print(len(big))"})
            assert not still.is_error and str(8 << 20) in checks.text_of(still), checks.text_of(still)
            await checks.check_close(first, kept)

    checks.run_async(conversation)
    assert not list(store.glob("*/*.snap"))  # closed: no snapshot left, on either replica
