"""A session that exists is never called gone (issue 38, part 2): two real ``wasm-runner serve``
replicas sharing a real redis-server and a snapshot folder; sessions and a download link live on
one, a load reaches them through the other, and Redis is killed (``kill -9``) and started again,
empty. Every call until the directory is rebuilt is answered ``200`` (the right result), ``503``
with ``Retry-After`` (``shared_state_unavailable`` while Redis is down, ``directory_rebuilding``
while the replicas announce their sessions again) or a cut connection: never ``404`` or ``410``
for a session, link or saved state that answers again afterwards."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from tests.support.live_server import wait_until
from tests.support.redis_process import RedisProcess
from tests.support.replicas import Replica, quick_profiles

KEY = "rebuild-key"
SECRET = secrets.token_hex(32)
CONFIG = """
[server]
default_profile = "quick"
max_running = 2
max_sessions = 8
redis_timeout_seconds = 1
session_pause_seconds = 300
snapshot_dir = "{store}"

{profiles}

[[api_keys]]
name = "rebuild"
key = "{key}"
rate = "100000/minute"
max_concurrent = 8
"""
RETRYABLE = {"shared_state_unavailable", "directory_rebuilding"}


@pytest.fixture
def pair(tmp_path: Path, redis: RedisProcess) -> Iterator[tuple[Replica, Replica]]:
    config = tmp_path / "cluster.toml"
    config.write_text(CONFIG.format(profiles=quick_profiles(20, 64), store=tmp_path / "shared-snapshots", key=KEY))
    owner = Replica(config, redis, tmp_path, secret=SECRET, name="owner", advertise=True)
    other = Replica(config, redis, tmp_path, secret=SECRET, name="other", advertise=True)
    try:
        owner.wait_ready(), other.wait_ready()
        yield owner, other
    finally:
        owner.stop()
        other.stop()


@dataclass
class Seen:
    what: str
    status: int | None  # None: the connection was cut
    code: str | None
    retry_after: str | None
    at: float
    right: bool = True  # a 200's body is the right result


def _seen(what: str, call: Callable[[], httpx.Response],
          right: Callable[[httpx.Response], bool] | None = None) -> Seen:
    try:
        r = call()
    except httpx.TransportError:
        return Seen(what, None, None, None, time.monotonic())
    code = None
    if r.status_code == 200 and right is not None:
        return Seen(what, 200, None, None, time.monotonic(), right(r))
    if r.status_code >= 400:
        try:
            code = r.json()["error"]["code"]
        except ValueError:
            code = "?"
    return Seen(what, r.status_code, code, r.headers.get("Retry-After"), time.monotonic())


def test_a_redis_killed_and_restarted_never_makes_a_live_session_unknown(
    pair: tuple[Replica, Replica], redis: RedisProcess
) -> None:
    owner, other = pair
    with owner.client(KEY) as api:
        sids = []
        for i in range(4):
            r = api.post("/api/sessions", json={})
            assert r.status_code == 201, r.text
            sids.append(r.json()["id"])
            assert api.post(f"/api/sessions/{sids[-1]}/run", json={"code": f"x = {i}"}).json()["status"] == "ok"
        made = api.post("/api/run", json={"code": "open('/out/r.txt', 'w').write('kept')", "files_as": "url"})
        assert made.status_code == 200, made.text
        link = made.json()["files"][0]["url"]
        saved = api.post(f"/api/sessions/{sids[0]}/save")
        assert saved.status_code == 201, saved.text
        saved_id = saved.json()["saved_id"]
    with other.client(KEY) as via:  # all of it answers through the other replica first
        assert all(via.get(f"/api/sessions/{s}").status_code == 200 for s in sids)
        assert via.get(link).content == b"kept"

    seen: list[Seen] = []
    stop = threading.Event()

    def load(sid: str, i: int) -> None:
        with other.client(KEY) as via:
            via.timeout = httpx.Timeout(15)
            while not stop.is_set():
                run = lambda: via.post(f"/api/sessions/{sid}/run", json={"code": "print(x)"})  # noqa: E731
                seen.append(_seen(sid, run, lambda r: r.json()["stdout"] == f"{i}\n"))
                seen.append(_seen(sid, lambda: via.get(f"/api/sessions/{sid}"), lambda r: r.json()["id"] == sid))
                if i == 0:
                    seen.append(_seen("link", lambda: via.get(link), lambda r: r.content == b"kept"))
                time.sleep(0.05)

    workers = [threading.Thread(target=load, args=(sid, i)) for i, sid in enumerate(sids)]
    for t in workers:
        t.start()
    try:
        time.sleep(0.5)
        redis.proc.kill()  # kill -9: Redis restarts empty
        redis.proc.wait(10)
        redis.proc = None
        killed = time.monotonic()
        time.sleep(1.0)
        redis.start()
        restarted = time.monotonic()
        with other.client(KEY) as via:  # a saved state resumes during the rebuild too (or 503)
            resumed = _seen("saved", lambda: via.post(f"/api/saved-sessions/{saved_id}/resume"))
            seen.append(resumed)

        def every_session_answers() -> bool:
            mine = [s for s in seen if s.at > restarted + 0.5 and s.what in sids]
            return all(any(s.what == sid and s.status == 200 for s in mine) for sid in sids)

        assert wait_until(every_session_answers, timeout=40), [s for s in seen if s.at > killed][-20:]
        time.sleep(1.0)
    finally:
        stop.set()
        for t in workers:
            t.join(30)

    during = [s for s in seen if s.at > killed]
    assert len(during) > 20, len(during)
    for s in during:  # what a client sees: an answer, a retry later, or a cut connection
        if s.status is None or s.status in (200, 201):
            assert s.right, s
            continue
        assert s.status == 503 and s.code in RETRYABLE, s
        assert s.retry_after is not None and int(s.retry_after) > 0, s
    # after the rebuild every session, its state, the link and the saved state answer
    with other.client(KEY) as via:
        for i, sid in enumerate(sids):
            r = via.post(f"/api/sessions/{sid}/run", json={"code": "print(x)"})
            assert r.status_code == 200 and r.json()["stdout"] == f"{i}\n", r.text
        assert via.get(link).content == b"kept"
        if resumed.status != 201:
            again = via.post(f"/api/saved-sessions/{saved_id}/resume")
            assert again.status_code == 201, again.text
        # what never existed is known not to, once the rebuild is over
        assert wait_until(lambda: via.get("/api/sessions/" + "x" * 24).status_code == 404, timeout=30)
        unknown = via.get("/api/sessions/" + "x" * 24)
        assert unknown.json()["error"]["code"] == "unknown_session", unknown.text
        assert via.get("/api/files/" + "x" * 32).status_code == 404
