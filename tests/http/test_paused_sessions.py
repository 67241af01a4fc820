"""Idle sessions paused to disk (issue 25 item 2): a real uvicorn on 127.0.0.1, real wasmtime
instances, short settings. What a user sees: the same session id keeps its variables, imports,
open files and files after its instance was freed; a paused session expires; a snapshot over the
key's disk budget leaves the session live and says why; deleting a session deletes its snapshot;
snapshots left by a dead process are swept."""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from wasm_runner.sessions import PausedStore
from tests.support.live_server import OTHER_KEY, LiveServer, live_server, make_config, wait_until
from tests.support.live_server import session_cell as cell
from tests.support.live_server import session_state as state

PAUSE_SECONDS = 1.0
PAUSED_LIFETIME = 25.0  # long enough for the pause-and-resume test on a busy machine
BOB_BUDGET = 4 << 20  # bob's disk budget: a session holding 8 MiB of random data does not fit


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server") / "paused-sessions"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, store_dir: Path) -> Iterator[LiveServer]:
    # left by a process that died: a writer folder whose lock nobody holds
    dead = store_dir / "deadwriter0001"
    dead.mkdir(parents=True)
    (dead / "orphanSessionId.snap").write_bytes(b"left behind")
    (store_dir / "deadwriter0001.alive").write_bytes(b"")
    config = make_config(
        store_dir.parent,
        session_pause_seconds=PAUSE_SECONDS,
        session_paused_lifetime_seconds=PAUSED_LIFETIME,
        snapshot_dir=str(store_dir),
        snapshot_key_bytes=BOB_BUDGET,
    )
    with live_server(config) as live:
        yield live


@pytest.fixture
def api(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def open_session(api: httpx.Client) -> str:
    r = api.post("/api/sessions", json={"profile": "quick"})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def snapshot_files(store_dir: Path) -> list[Path]:
    return sorted(store_dir.glob("*/*.snap"))


def test_snapshots_of_a_dead_process_are_swept_at_start(server: LiveServer, store_dir: Path) -> None:
    assert wait_until(lambda: not (store_dir / "deadwriter0001").exists(), timeout=60)
    assert not (store_dir / "deadwriter0001.alive").exists()


def test_an_idle_session_is_paused_and_the_next_call_resumes_it(
    api: httpx.Client, server: LiveServer
) -> None:
    sid = open_session(api)
    first = cell(api, sid, (
        "import json, random, statistics\n"
        "x = 41\nrandom.seed(5)\nfirst = random.random()\n"
        "open('notes.txt', 'w').write('kept')\n"
        "log = open('log.txt', 'w')\nlog.write('a')\n"
    ))  # fmt: skip
    assert first["status"] == "ok", first
    # paused: the instance is freed, the session is still there (not live, not gone)
    assert wait_until(lambda: state(api, sid).get("paused") is True, timeout=90), state(api, sid)
    shown = state(api, sid)
    assert shown["alive"] is True and shown["saved"] is True and shown["calls"] == 1
    health = server.health()
    assert health["paused_sessions"] >= 1
    metrics = api.get("/metrics").text
    assert "wasm_runner_paused_sessions" in metrics
    second = cell(api, sid, (
        "log.write('b'); log.close()\n"
        "print(x + 1, open('notes.txt').read(), open('log.txt').read(), json.dumps([statistics.mean([1, 3])]))\n"
        "print(repr(random.random()))\n"
    ))  # fmt: skip
    assert second["status"] == "ok", second
    expected = random.Random(5)
    expected.random()
    assert second["stdout"] == f"42 kept ab [2]\n{expected.random()!r}\n"
    assert second["session"]["id"] == sid and second["session"]["calls"] == 2
    assert second["session"]["paused"] is False and second["session"]["alive"] is True
    # and again: paused a second time, resumed a second time
    assert wait_until(lambda: state(api, sid).get("paused") is True, timeout=90)
    assert cell(api, sid, "print(x)")["stdout"] == "41\n"
    assert api.delete(f"/api/sessions/{sid}").status_code == 204


def test_deleting_a_session_deletes_its_snapshot(api: httpx.Client, store_dir: Path) -> None:
    sid = open_session(api)
    cell(api, sid, "y = 'to be deleted'")
    assert wait_until(lambda: state(api, sid).get("saved") is True, timeout=60)
    assert any(p.stem == sid for p in snapshot_files(store_dir))
    assert api.delete(f"/api/sessions/{sid}").status_code == 204
    assert not any(p.stem == sid for p in snapshot_files(store_dir))
    assert api.post(f"/api/sessions/{sid}/run", json={"code": "y"}).status_code == 404


def test_a_paused_session_is_saved_without_waking_it(api: httpx.Client, store_dir: Path) -> None:
    """``POST /api/sessions/{id}/save`` of a paused session keeps its stored snapshot under a
    handle (its instance stays freed); the saved state outlives the session and resumes it."""
    sid = open_session(api)
    cell(api, sid, "w = ['paused', 'then saved']")
    assert wait_until(lambda: state(api, sid).get("paused") is True, timeout=60)
    r = api.post(f"/api/sessions/{sid}/save")
    assert r.status_code == 201, r.text
    saved = r.json()
    assert state(api, sid)["paused"] is True
    assert [p.parent.name for p in store_dir.glob(".saved/*/*.saved")]  # in the shared folder
    assert api.delete(f"/api/sessions/{sid}").status_code == 204
    r = api.post(f"/api/saved-sessions/{saved['saved_id']}/resume")
    assert r.status_code == 201, r.text
    new = r.json()["id"]
    assert cell(api, new, "print(w)")["stdout"] == "['paused', 'then saved']\n"
    assert api.delete(f"/api/sessions/{new}").status_code == 204
    assert api.delete(f"/api/saved-sessions/{saved['saved_id']}").status_code == 204
    assert not list(store_dir.glob(".saved/*/*.saved"))


def test_a_paused_session_expires_and_its_snapshot_goes(
    api: httpx.Client, store_dir: Path
) -> None:
    sid = open_session(api)
    cell(api, sid, "z = 3")
    assert wait_until(lambda: state(api, sid).get("paused") is True, timeout=60)
    assert any(p.stem == sid for p in snapshot_files(store_dir))
    assert wait_until(
        lambda: api.get(f"/api/sessions/{sid}").status_code == 404, timeout=PAUSED_LIFETIME + 60
    )
    # the sweep (every second) closes it and deletes its snapshot
    assert wait_until(lambda: not any(p.stem == sid for p in snapshot_files(store_dir)), timeout=60)
    gone = api.post(f"/api/sessions/{sid}/run", json={"code": "z"})
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_session"


def test_a_snapshot_over_the_key_budget_leaves_the_session_live(server: LiveServer) -> None:
    with server.client(OTHER_KEY) as bob:
        sid = open_session(bob)
        big = cell(bob, sid, "import random\nblob = random.randbytes(8 << 20)  # does not compress\nkept = 'yes'")
        assert big["status"] == "ok", big
        assert wait_until(lambda: "snapshot_error" in state(bob, sid), timeout=60)
        shown = state(bob, sid)
        assert shown["snapshot_error"]["code"] == "snapshot_budget"
        assert "budget" in shown["snapshot_error"]["message"]
        assert shown["paused"] is False and shown["saved"] is False
        # well past the pause time it is still live (it could not be saved), its state intact
        time.sleep(PAUSE_SECONDS * 4)
        assert state(bob, sid)["paused"] is False
        after = cell(bob, sid, "print(kept, len(blob))")
        assert after["stdout"] == f"yes {8 << 20}\n"
        assert bob.delete(f"/api/sessions/{sid}").status_code == 204
    assert server.health()["status"] == "ok"


def test_a_new_session_pauses_an_idle_one_to_make_room(tmp_path: Path) -> None:
    """max_sessions counts live sessions: a new one takes the place of the least recently used
    idle session (saved now, then paused; its next call resumes it), where it used to be refused
    until that one paused on its own; refused only while every live session runs a call."""
    config = make_config(tmp_path, max_sessions=1, session_pause_seconds=600.0)  # no pause by time

    with live_server(config) as live, live.client() as api:

        def new() -> httpx.Response:
            return api.post("/api/sessions", json={})  # the student profile: 10 s wall

        first = new().json()["id"]
        cell(api, first, "a = 1")
        made = new()
        assert made.status_code == 201, made.text
        second = made.json()["id"]
        assert state(api, first)["paused"] is True
        assert live.health()["sessions"] == 1 and live.health()["paused_sessions"] == 1
        # the one live place runs a call: nothing can be paused, a clear 429
        with ThreadPoolExecutor(1) as pool:
            busy = pool.submit(cell, api, second, "import time; time.sleep(4); print('slept')")
            assert wait_until(lambda: live.health()["running"] == 1, timeout=60, step=0.05)
            refused = new()
            assert busy.result()["stdout"] == "slept\n"
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_sessions"
        assert "retry-after" in refused.headers
        # the first's next call resumes it in the place of the second, idle now
        assert cell(api, first, "print(a)")["stdout"] == "1\n"
        assert state(api, second)["paused"] is True
        assert cell(api, second, "print(2)")["stdout"] == "2\n"
        for sid in (first, second):
            assert api.delete(f"/api/sessions/{sid}").status_code == 204
        assert live.health()["status"] == "ok"


def test_resuming_saves_an_idle_session_at_once_to_make_room(tmp_path: Path) -> None:
    """The one live place is held by a session used a moment ago, not saved yet (its background
    save waits for a pause in its calls): resuming a paused session saves that one now and pauses
    it, instead of refusing the student whose session was paused."""
    config = make_config(tmp_path, max_sessions=1, session_pause_seconds=2.0)
    with live_server(config) as live, live.client() as api:
        first = open_session(api)
        cell(api, first, "a = 1")
        assert wait_until(lambda: state(api, first).get("paused") is True, timeout=60)
        second = open_session(api)
        for n in range(3):
            cell(api, second, f"b = {n}")
            # at once: second is idle but its save has not begun
            assert cell(api, first, "a += 1; print(a)")["stdout"] == f"{n + 2}\n"
            assert state(api, second)["paused"] is True
            assert cell(api, second, "print(b)")["stdout"] == f"{n}\n"  # and back, the same way
            assert state(api, first)["paused"] is True
        assert live.health()["sessions"] == 1 and live.health()["paused_sessions"] == 1
        for sid in (first, second):
            assert api.delete(f"/api/sessions/{sid}").status_code == 204
        assert live.health()["status"] == "ok"


def test_a_session_called_without_pause_is_still_saved(server: LiveServer, api: httpx.Client,
                                                       store_dir: Path) -> None:
    """Cells back to back (each call cancels a save not yet begun) still save the session every
    ``save_every_seconds``, so a replica's death would not lose all its cells since the first.
    Here a save waits 10 minutes for a pause between calls: it never comes."""
    sessions = server.app.state.service.sessions
    pausing = sessions.pausing
    sessions.pausing = dataclasses.replace(pausing, save_after_seconds=600.0, save_every_seconds=1.0)
    try:
        sid = open_session(api)
        deadline = time.monotonic() + 60
        n = 0
        while time.monotonic() < deadline and not any(p.stem == sid for p in snapshot_files(store_dir)):
            n += 1
            assert cell(api, sid, f"n = {n}")["status"] == "ok"
        assert any(p.stem == sid for p in snapshot_files(store_dir)), f"not saved after {n} cells"
        assert state(api, sid)["paused"] is False  # saved while live and busy
        assert cell(api, sid, "print(n)")["stdout"] == f"{n}\n"
        assert api.delete(f"/api/sessions/{sid}").status_code == 204
    finally:
        sessions.pausing = pausing


def test_a_failed_orphan_sweep_is_tried_again_soon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep that fails (the disk, a lock) is tried again within seconds, not a whole period
    (five minutes) later; the server answers meanwhile."""
    store_dir = tmp_path / "snapshots"
    dead = store_dir / "deadwriter0002"
    dead.mkdir(parents=True)
    (dead / "orphanSessionId.snap").write_bytes(b"left behind")
    (store_dir / "deadwriter0002.alive").write_bytes(b"")
    real_sweep = PausedStore.sweep
    failures = []

    def sweep_failing_once(self: PausedStore, *args: object, **kw: object) -> int:
        if not failures:
            failures.append(1)
            raise OSError("the disk said no, once")
        return real_sweep(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(PausedStore, "sweep", sweep_failing_once)
    config = make_config(tmp_path, session_pause_seconds=PAUSE_SECONDS, snapshot_dir=str(store_dir))
    with live_server(config) as live:
        assert wait_until(lambda: bool(failures), timeout=60)
        assert (dead / "orphanSessionId.snap").exists()  # the first sweep failed
        assert wait_until(lambda: not dead.exists(), timeout=60)
        assert live.health()["status"] == "ok"
