"""Sessions and download links from any replica: two real ``wasm-runner serve`` processes on
127.0.0.1 sharing a real redis-server, hit directly (no balancer), and the internal hop between
them (``wasm_runner/scaleout/forwarding.py``, ``signing.py``, ``directory.py``; ``wasm_runner/http/relay.py``, ``internal.py``)."""

from __future__ import annotations

import json
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.live_server import wait_until
from tests.support.redis_process import RedisProcess
from tests.support.replicas import Replica, quick_profiles

from wasm_runner.scaleout.signing import sign

ALICE = "alice-hop-key"
BOB = "bob-hop-key"
SECRET = secrets.token_hex(32)
CONFIG = f"""
[server]
default_profile = "quick"
max_running = 2
max_sessions = 8
session_pause_seconds = 0  # no snapshots: a lost owner's sessions are lost (test_hop_resume.py: with)

{quick_profiles(15, 64)}

[[api_keys]]
name = "hop-alice"
key = "{ALICE}"
rate = "10000/minute"
max_concurrent = 8

[[api_keys]]
name = "hop-bob"
key = "{BOB}"
rate = "10000/minute"
"""


def start_replica(name: str, folder: Path, redis: RedisProcess) -> Replica:
    """A replica with this module's config, its Redis and the cluster secret (started, not yet
    ready: ``wait_ready()``)."""
    config = folder / "cluster.toml"
    if not config.exists():
        config.write_text(CONFIG)
    return Replica(config, redis, folder, secret=SECRET, name=name, advertise=True)


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory, redis: RedisProcess
) -> Iterator[tuple[Replica, Replica]]:
    folder = tmp_path_factory.mktemp("replicas")
    a, b = start_replica("a", folder, redis), start_replica("b", folder, redis)  # both start at once
    try:
        a.wait_ready(), b.wait_ready()
        yield a, b
    finally:
        a.stop()
        b.stop()


def open_session(replica: Replica) -> str:
    with replica.client(ALICE) as api:
        r = api.post("/api/sessions", json={})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def cell(replica: Replica, sid: str, code: str, key: str = ALICE) -> httpx.Response:
    with replica.client(key) as api:
        return api.post(f"/api/sessions/{sid}/run", json={"code": code})


def close(replica: Replica, sid: str) -> None:
    with replica.client(ALICE) as api:
        assert api.delete(f"/api/sessions/{sid}").status_code == 204


def audit_lines(replica: Replica) -> list[dict[str, object]]:
    if not replica.audit.exists():
        return []
    return [json.loads(line) for line in replica.audit.read_text().splitlines() if line]


def test_a_session_runs_its_cells_on_either_replica(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    sid = open_session(a)
    for i in range(10):
        code = "x = 0\nprint(x)" if i == 0 else "x += 1\nprint(x)"
        r = cell(a if i % 2 == 0 else b, sid, code)
        assert r.status_code == 200, r.text
        assert r.json()["stdout"] == f"{i}\n"
        assert r.json()["session"]["calls"] == i + 1
    # the owner ran every cell (and audited it), with the client's address, under alice
    runs = [e for e in audit_lines(a) if e.get("session") == sid]
    assert len(runs) == 10 and {e["tenant"] for e in runs} == {"hop-alice"}
    assert {e["client"] for e in runs} == {"127.0.0.1"}
    assert not [e for e in audit_lines(b) if e.get("session") == sid]
    close(b, sid)


def test_describe_and_delete_from_the_other_replica(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    sid = open_session(a)
    with b.client(ALICE) as via_b, a.client(ALICE) as via_a:
        described = via_b.get(f"/api/sessions/{sid}")
        assert described.status_code == 200, described.text
        assert described.json()["id"] == sid and described.json()["alive"] is True
        assert described.headers["content-type"].startswith("application/json")
        assert via_b.delete(f"/api/sessions/{sid}").status_code == 204
        for api in (via_a, via_b):
            gone = api.get(f"/api/sessions/{sid}")
            assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_session"


def test_another_key_gets_404_through_either_replica(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    sid = open_session(a)
    for replica in (b, a):
        r = cell(replica, sid, "print('not yours')", key=BOB)
        assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_session"
        with replica.client(BOB) as api:
            assert api.get(f"/api/sessions/{sid}").status_code == 404
            assert api.delete(f"/api/sessions/{sid}").status_code == 404
    assert cell(b, sid, "print('mine')").json()["stdout"] == "mine\n"  # untouched for alice
    close(a, sid)


def test_fork_and_snapshot_through_the_other_replica(pair: tuple[Replica, Replica]) -> None:
    """A fork asked of B for a session on A makes its copies on A (B reaches them by the hop);
    a snapshot asked of B comes from A, and resumes on B (both replicas share the snapshot
    secret, derived from the cluster secret)."""
    a, b = pair
    sid = open_session(a)
    assert cell(a, sid, "items = [1]").status_code == 200
    with b.client(ALICE) as via_b:
        r = via_b.post(f"/api/sessions/{sid}/fork", json={"copies": 2})
        assert r.status_code == 201, r.text
        copy_a, copy_b = (c["id"] for c in r.json()["sessions"])
        assert cell(b, copy_a, "items.append('a'); print(items)").json()["stdout"] == "[1, 'a']\n"
        assert cell(b, copy_b, "print(items)").json()["stdout"] == "[1]\n"
        assert cell(a, sid, "print(items)").json()["stdout"] == "[1]\n"
        forked = [e for e in audit_lines(a) if e.get("event") == "session_forked"]
        assert [e["session"] for e in forked] == [sid]
        snap = via_b.get(f"/api/sessions/{copy_a}/snapshot")
        assert snap.status_code == 200 and snap.headers["content-type"] == "application/octet-stream"
        resumed = via_b.post("/api/sessions/resume", content=snap.content,
                             headers={"Content-Type": "application/octet-stream"})
        assert resumed.status_code == 201, resumed.text
        new = resumed.json()["id"]
    assert cell(a, new, "print(items)").json()["stdout"] == "[1, 'a']\n"  # B holds it; A hops
    with b.client(BOB) as bob:
        assert bob.post(f"/api/sessions/{sid}/fork", json={}).status_code == 404
        foreign = bob.post("/api/sessions/resume", content=snap.content,
                           headers={"Content-Type": "application/octet-stream"})
        assert foreign.status_code == 403 and foreign.json()["error"]["details"] == [{"reason": "foreign"}]
    for s in (sid, copy_a, copy_b, new):
        close(b, s)


def test_a_streamed_cell_arrives_through_the_other_replica_as_it_runs(
    pair: tuple[Replica, Replica],
) -> None:
    a, b = pair
    sid = open_session(a)
    assert cell(a, sid, "word = 'streamed'").status_code == 200
    code = "import time\nprint(word, flush=True)\ntime.sleep(2)\nprint('done')"
    events: list[tuple[str, dict[str, object]]] = []
    running_when_first_arrived = None
    with b.client(ALICE) as api, api.stream(
        "POST", f"/api/sessions/{sid}/run/stream", json={"code": code}
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        kind = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: ") and kind:
                events.append((kind, json.loads(line[len("data: ") :])))
                if kind == "stdout" and running_when_first_arrived is None:
                    # relayed while the cell still runs on A: not buffered by B
                    running_when_first_arrived = httpx.get(f"{a.url}/healthz").json()["running"]
    kinds = [k for k, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "result"
    assert events[kinds.index("stdout")][1] == {"data": "streamed\n"}
    assert running_when_first_arrived == 1
    result = events[-1][1]
    assert result["stdout"] == "streamed\ndone\n"
    assert result["session"]["id"] == sid and result["session"]["calls"] == 2  # type: ignore[index]
    close(a, sid)


def test_a_client_leaving_the_other_replica_stops_the_cell_on_the_owner(
    pair: tuple[Replica, Replica],
) -> None:
    a, b = pair
    sid = open_session(a)
    with b.client(ALICE) as api, api.stream(
        "POST", f"/api/sessions/{sid}/run/stream", json={"code": "import time\ntime.sleep(12)"}
    ) as r:
        assert r.status_code == 200
        lines = r.iter_lines()  # kept: a dropped line iterator closes the response
        assert next(lines) == "event: start"  # the cell runs on A
        assert httpx.get(f"{a.url}/healthz").json()["running"] == 1
    # B closed its call to A when the client left; A cancelled the cell (long before its 12 s)
    assert wait_until(lambda: httpx.get(f"{a.url}/healthz").json()["running"] == 0, timeout=8)
    with a.client(ALICE) as api:
        api.delete(f"/api/sessions/{sid}")


def test_a_download_link_from_one_replica_works_on_the_other(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    with a.client(ALICE) as api:
        r = api.post(
            "/api/run",
            json={"code": "open('/out/report.txt', 'w').write('made on a')", "files_as": "url"},
        )
    assert r.status_code == 200, r.text
    url = r.json()["files"][0]["url"]
    for replica in (b, a):
        with replica.client(key=None) as anyone:
            got = anyone.get(url)
            assert got.status_code == 200 and got.content == b"made on a"
            assert "report.txt" in got.headers["content-disposition"]
            missing = anyone.get("/api/files/" + "x" * 32)
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_file"


def _forged(sid: str, **overrides: str) -> dict[str, str]:
    headers = {
        "X-Wasm-Runner-Internal-Tenant": "hop-alice",
        "X-Wasm-Runner-Internal-Client": "127.0.0.1",
        "X-Wasm-Runner-Internal-Replica": "r",
        "X-Wasm-Runner-Internal-Time": f"{time.time():.3f}",
        "X-Wasm-Runner-Internal-Nonce": secrets.token_urlsafe(18),
        "X-Wasm-Runner-Internal-Mac": secrets.token_hex(32),
    }
    headers.update(overrides)
    return headers


def test_internal_headers_without_a_valid_mac_are_refused(pair: tuple[Replica, Replica]) -> None:
    a, b = pair
    sid = open_session(a)
    body = json.dumps({"code": "print('forged')"}).encode()
    path = f"/api/sessions/{sid}/run"
    attempts = [
        ({"X-Wasm-Runner-Internal-Tenant": "hop-alice"}, None),  # no MAC at all
        (_forged(sid), None),  # a wrong MAC
        (_forged(sid), ALICE),  # a wrong MAC next to a valid API key
    ]
    for target in (a, b):
        for headers, key in attempts:
            with target.client(key) as api:
                r = api.post(path, content=body, headers={**headers, "Content-Type": "application/json"})
            assert r.status_code == 403, r.text
            assert r.json()["error"]["code"] == "internal_forbidden"
        with target.client(None) as api:  # on any other route too
            r = api.post("/api/run", json={"code": "1"}, headers=_forged(sid))
            assert r.status_code == 403

    # a signature made with the secret, but too old or replayed, is refused as well
    def signed(when: float, nonce: str) -> dict[str, str]:
        fields = {"tenant": "hop-alice", "client": "127.0.0.1", "replica": "r",
                  "timestamp": f"{when:.3f}", "nonce": nonce}  # fmt: skip
        mac = sign(SECRET, method="POST", target=path, body=body, **fields)
        return {f"X-Wasm-Runner-Internal-{k.title() if k != 'timestamp' else 'Time'}": v
                for k, v in fields.items()} | {"X-Wasm-Runner-Internal-Mac": mac}  # fmt: skip

    with a.client(None) as api:
        old = api.post(path, content=body, headers=signed(time.time() - 60, "n1"))
        assert old.status_code == 403
        # a good signature for another replica process: the session is not this one's
        fresh = signed(time.time(), secrets.token_urlsafe(12))
        first = api.post(path, content=body, headers=fresh)
        assert first.status_code == 410 and first.json()["error"]["code"] == "session_lost"
        replayed = api.post(path, content=body, headers=fresh)
        assert replayed.status_code == 403
    refusals = [e for e in audit_lines(a) if e.get("event") == "internal_forbidden"]
    assert len(refusals) >= 5 and {e["path"] for e in refusals} >= {path, "/api/run"}
    # and the replicas still answer, the session is untouched
    assert cell(b, sid, "print('still here')").json()["stdout"] == "still here\n"
    close(a, sid)


def test_a_redis_that_restarts_empty_gets_the_entries_back(
    pair: tuple[Replica, Replica], redis: RedisProcess
) -> None:
    a, b = pair
    sid = open_session(a)
    assert cell(a, sid, "kept = 'yes'").status_code == 200
    with a.client(ALICE) as api:
        link = api.post(
            "/api/run", json={"code": "open('/out/r.txt', 'w').write('again')", "files_as": "url"}
        ).json()["files"][0]["url"]
    redis.stop()
    redis.start()  # the same port, nothing in it: every directory entry is gone

    def found_through_b() -> bool:
        r = cell(b, sid, "print(kept)")
        return r.status_code == 200 and r.json()["stdout"] == "yes\n"

    assert wait_until(found_through_b, timeout=30, step=0.5)  # A published its entries again
    with b.client(key=None) as anyone:
        assert anyone.get(link).content == b"again"
    close(b, sid)


def test_a_killed_owner_answers_410_session_lost_at_once(
    pair: tuple[Replica, Replica], redis: RedisProcess, tmp_path: Path
) -> None:
    _, b = pair
    owner = start_replica("owner", tmp_path, redis).wait_ready()
    try:
        sid, idle = open_session(owner), open_session(owner)
        assert cell(b, sid, "v = 7").status_code == 200
        with owner.client(ALICE) as api:
            link = api.post(
                "/api/run", json={"code": "open('/out/f.txt', 'w').write('x')", "files_as": "url"}
            ).json()["files"][0]["url"]
        in_flight: list[httpx.Response] = []

        def long_cell() -> None:  # relayed by B to the owner, which dies while running it
            in_flight.append(cell(b, sid, "import time\ntime.sleep(60)"))

        worker = threading.Thread(target=long_cell)
        worker.start()
        assert wait_until(lambda: httpx.get(f"{owner.url}/healthz").json()["running"] == 1)
        owner.proc.send_signal(signal.SIGKILL)
        owner.proc.wait(10)
        worker.join(20)
        assert in_flight and in_flight[0].status_code == 410, (
            [(r.status_code, r.text) for r in in_flight],
            b.log_path.read_text(errors="replace")[-3000:],
        )
        assert in_flight[0].json()["error"]["code"] == "session_lost"
        with b.client(ALICE) as api:
            refused = api.post(f"/api/sessions/{idle}/run", json={"code": "1"}, timeout=10)
            assert refused.status_code == 410 and refused.json()["error"]["code"] == "session_lost"
            for gone_id in (sid, idle):  # later calls: 410 from the tombstone, without a try
                again = api.get(f"/api/sessions/{gone_id}", timeout=10)
                assert again.status_code == 410
                assert again.json()["error"]["code"] == "session_lost"
            with b.client(BOB) as other:  # another key learns nothing: 404 as for any id
                assert other.get(f"/api/sessions/{sid}", timeout=10).status_code == 404
            for _ in range(2):
                gone = api.get(link, timeout=10)
                assert gone.status_code == 410 and gone.json()["error"]["code"] == "download_lost"
            assert api.get("/healthz").status_code == 200
    finally:
        owner.stop()
