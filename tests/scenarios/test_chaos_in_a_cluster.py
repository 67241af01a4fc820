"""Faults in a real cluster (Redis, three replicas, HAProxy, started by ``wasm-runner cluster``),
in the order one module-scoped cluster allows: Redis hung then back, Redis killed (the cluster
restarts it), ``kill -9`` of a replica under a bounded load, SIGTERM drain of a replica, ``kill -9``
of the replica holding a key's MCP tool session, and at last Ctrl-C of the cluster itself. After
each fault the cluster is whole again before the next."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from tests.support import mcp_checks as checks
from tests.support.cluster import LEASE_TTL, REPLICA_HEADER, LiveCluster, start_cluster, wait_until

from wasm_runner.scaleout.launcher.children import port_in_use


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    live = start_cluster(tmp_path_factory.mktemp("faults"))
    yield live
    live.stop()  # test_ctrl_c_stops_everything stopped it already, unless an earlier test failed


def _whole(cluster: LiveCluster, timeout: float = 60.0) -> None:
    """Every replica UP in HAProxy and a run answered through the balancer."""
    assert wait_until(lambda: set(cluster.states().values()) == {"UP"}, timeout), cluster.states()
    with cluster.client("main") as api:
        assert api.post("/api/run", json={"code": "print('ok')"}).json()["stdout"] == "ok\n"


def _burst_ok(cluster: LiveCluster, n: int = 12) -> bool:
    with ThreadPoolExecutor(n) as pool:
        return all(pool.map(lambda _: _run_ok(cluster), range(n)))


def _running(cluster: LiveCluster, replica: str) -> bool:
    with cluster.direct(replica) as direct:
        return bool(direct.get("/healthz").json()["running"])


def _run_ok(cluster: LiveCluster, key: str = "redis") -> bool:
    try:
        with cluster.client(key, timeout=10) as api:
            return api.post("/api/run", json={"code": "print(1)"}).status_code == 200
    except httpx.HTTPError:
        return False


def test_redis_hung_then_back_and_killed_then_restarted(cluster: LiveCluster) -> None:
    _whole(cluster)
    redis_pid = cluster.parts["redis"].pid
    in_flight: list[httpx.Response] = []

    def admitted_before() -> None:  # a run admitted while Redis was up, still running when it hangs
        with cluster.client("redis") as api:
            in_flight.append(api.post("/api/run", json={"code": "import time; time.sleep(2); print('kept')"}))

    t = threading.Thread(target=admitted_before)
    t.start()
    assert wait_until(lambda: any(_running(cluster, name) for name in cluster.replicas), 60)
    os.kill(redis_pid, signal.SIGSTOP)  # Redis hangs: calls to it time out (redis_timeout_seconds)
    try:
        answers = []
        with cluster.client("redis", timeout=30) as api:
            for _ in range(3):
                t0 = time.monotonic()
                r = api.post("/api/run", json={"code": "print(1)"})
                answers.append((r, time.monotonic() - t0))
        t.join(30)
    finally:
        os.kill(redis_pid, signal.SIGCONT)
    (kept,) = in_flight  # the run admitted before the outage finished and was answered
    assert kept.status_code == 200 and kept.json()["stdout"] == "kept\n", kept.text
    for r, seconds in answers:  # fail closed, with a clear code, at once: no hang, no traceback
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] in ("shared_state_unavailable", "no_replica_ready"), r.text
        assert int(r.headers["Retry-After"]) > 0
        assert seconds < 5, seconds
    assert wait_until(lambda: _run_ok(cluster), 20)  # the replicas recover by themselves
    # Redis killed: the cluster reports it, starts it again (empty), and the replicas reconnect
    os.kill(redis_pid, signal.SIGKILL)
    cluster.wait_said(r"cluster: redis \(pid %d\) exited unexpectedly: signal 9" % redis_pid)
    cluster.wait_said(r"cluster: redis-server is back on")
    # recovered: a burst of runs at once (several pooled Redis connections per replica) all served
    assert wait_until(lambda: _burst_ok(cluster), 30)
    cluster.refresh_pids()
    assert cluster.parts["redis"].pid != redis_pid
    _whole(cluster)


@dataclass
class Answer:
    status: int | None
    replica: str | None
    seconds: float
    code: str | None = None


def test_kill_9_of_a_replica_under_load(cluster: LiveCluster) -> None:
    _whole(cluster)
    victim, survivors = "r1", {"r2", "r3"}
    victim_pid = cluster.parts[victim].pid
    # on the victim: a session with a variable, and both of key "lease"'s runs (max_concurrent 2)
    with cluster.direct(victim) as direct:
        sid = direct.post("/api/sessions", json={}).json()["id"]
        assert direct.post(f"/api/sessions/{sid}/run", json={"code": "x = 1"}).status_code == 200
        # saved in the background to the folder the replicas share
        assert wait_until(lambda: direct.get(f"/api/sessions/{sid}").json()["saved"] is True, 60)
    held: list[object] = []

    def hold_lease() -> None:
        try:
            with cluster.direct(victim, "lease") as direct:
                held.append(direct.post("/api/run", json={"code": "import time; time.sleep(15)"}).status_code)
        except httpx.HTTPError as exc:  # the replica died under it: expected
            held.append(type(exc).__name__)

    holders = [threading.Thread(target=hold_lease) for _ in range(2)]
    for t in holders:
        t.start()
    with cluster.direct(victim) as direct:
        assert wait_until(lambda: direct.get("/healthz").json()["running"] == 2, 20)
    with cluster.client("lease") as api:  # the leases are the cluster's: another replica refuses
        refused = api.post("/api/run", json={"code": "print(1)"})
        assert refused.status_code == 429 and refused.json()["error"]["code"] == "tenant_concurrency"

    answers: list[Answer] = []

    def one(i: int) -> None:
        t0 = time.monotonic()
        try:
            with cluster.client("load", timeout=30) as api:
                r = api.post("/api/run", json={"code": f"import time; time.sleep(0.4); print({i})"})
            code = r.json().get("error", {}).get("code") if r.status_code != 200 else None
            if r.status_code == 200:
                assert r.json()["stdout"] == f"{i}\n"
            answers.append(Answer(r.status_code, r.headers.get(REPLICA_HEADER), time.monotonic() - t0, code))
        except httpx.HTTPError:
            answers.append(Answer(None, None, time.monotonic() - t0))

    with ThreadPoolExecutor(6) as pool:  # a bounded load: 36 runs, 6 at a time
        futures = [pool.submit(one, i) for i in range(36)]
        time.sleep(1.0)
        os.kill(victim_pid, signal.SIGKILL)
        killed_at = time.monotonic()
        for f in futures:
            f.result()
    for t in holders:
        t.join(30)
    assert len(answers) == 36 and all(a.status is not None for a in answers), answers  # all answered
    for a in answers:
        assert a.seconds < 15, a  # no hang
        if a.replica in survivors:
            assert a.status == 200, a  # what reached a survivor was answered
        else:  # on the dead one: HAProxy's 5xx at once, in the app's error format
            assert a.status == 200 or (a.status in (502, 503, 504) and a.code), a
    assert sum(a.status == 200 for a in answers) >= 30
    assert all(isinstance(h, str) for h in held)  # the victim's own runs died with it
    # its session resumes, from its snapshot, on the replica the next call reaches (a survivor, or
    # the victim's new process): same id, same x
    with cluster.client("main") as api:
        resumed = api.post(f"/api/sessions/{sid}/run", json={"code": "print(x)"})
        assert resumed.status_code == 200 and resumed.json()["stdout"] == "1\n", resumed.text
        assert "lost_cells" not in resumed.json()["session"]
        for _ in range(3):  # every later call, through any replica, reaches its new owner
            later = api.post(f"/api/sessions/{sid}/run", json={"code": "x += 1"})
            assert later.status_code == 200 and later.json()["status"] == "ok", later.text
        assert api.post(f"/api/sessions/{sid}/run", json={"code": "print(x)"}).json()["stdout"] == "4\n"
        assert api.delete(f"/api/sessions/{sid}").status_code == 204
    # its leases expire within their TTL (plus one refresh period of slack)
    assert wait_until(lambda: _run_ok(cluster, "lease"), LEASE_TTL + 5)
    # counted from the kill, this includes the 36 runs and the session checks above, which a busy
    # machine stretches (16.7 s at load 14, TTL 3 s): bounded, with room for that load
    assert time.monotonic() - killed_at <= LEASE_TTL + 30
    # the cluster said so, restarted it, and is whole again
    cluster.wait_said(r"cluster: %s \(pid %d\) exited unexpectedly: signal 9" % (victim, victim_pid))
    cluster.wait_said(r"cluster: replica %s is back" % victim, 90)
    _whole(cluster)


def test_sigterm_drains_a_replica(cluster: LiveCluster) -> None:
    _whole(cluster)
    cluster.refresh_pids()
    victim = "r2"
    victim_pid = cluster.parts[victim].pid
    finished: list[httpx.Response] = []

    def in_flight() -> None:
        with cluster.direct(victim) as direct:
            finished.append(direct.post("/api/run", json={"code": "import time; time.sleep(3); print('finished')"}))

    t = threading.Thread(target=in_flight)
    t.start()
    with cluster.direct(victim) as direct:
        assert wait_until(lambda: direct.get("/healthz").json()["running"] == 1, 20)
    os.kill(victim_pid, signal.SIGTERM)
    assert wait_until(lambda: not cluster.states().get(victim, "").startswith("UP"), 5), cluster.states()
    with cluster.client("main") as api:  # new runs go to the other replicas
        fresh = [api.post("/api/run", json={"code": "print('new')"}) for _ in range(6)]
    assert all(r.status_code == 200 and r.json()["stdout"] == "new\n" for r in fresh)
    assert {r.headers[REPLICA_HEADER] for r in fresh} == {"r1", "r3"}, (cluster.states(), cluster.lines[-30:])
    t.join(30)
    (done,) = finished  # the run in flight finished and was answered
    assert done.status_code == 200 and done.json()["stdout"] == "finished\n"
    cluster.wait_said(r"cluster: %s \(pid %d\) exited unexpectedly: exit status 0" % (victim, victim_pid), 30)
    cluster.wait_said(r"cluster: replica %s is back" % victim, 90)
    _whole(cluster)


@contextlib.asynccontextmanager
async def _mcp(cluster: LiveCluster, key: str, answered_by: list[str]) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP through HAProxy (a new transport session each time);
    its connections closed at the end (none left for HAProxy to close at Ctrl-C)."""

    async def note(response: httpx.Response) -> None:
        answered_by.append(response.headers.get(REPLICA_HEADER, "?"))

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {cluster.keys[key]}"})
    http.event_hooks = {"request": [], "response": [note]}
    async with http, Client(streamable_http_client(f"{cluster.url}/mcp", http_client=http),
                            read_timeout_seconds=120) as client:  # fmt: skip
        yield client


async def _cell(client: Client, session_id: str, code: str) -> str:
    result = await client.call_tool("run_cell", {"session_id": session_id, "code": code})
    assert not result.is_error, checks.text_of(result)
    return checks.text_of(result)


def test_kill_9_of_the_replica_holding_a_tool_session(cluster: LiveCluster) -> None:
    """/mcp is hashed by key to one replica; killed, the key's next call reaches another, which
    resumes the tool session from its snapshot with its /data and /out files; when the replica is
    back, the key's calls reach it again and the session moves back to it."""
    _whole(cluster)
    cluster.refresh_pids()
    answered_by: list[str] = []

    async def before() -> str:
        async with _mcp(cluster, "main", answered_by) as client:
            sid = await checks.open_session(client)
            up = await client.call_tool("upload_file", {"session_id": sid, "name": "in.csv", "content": "a,b\n1,2\n"})
            assert not up.is_error, checks.text_of(up)
            await _cell(client, sid, "x = 41\nopen('/out/made.txt', 'w').write('made before')")
            return str(sid)

    sid = checks.run_async(before)
    owner = answered_by[-1]
    assert owner in cluster.replicas, answered_by
    with cluster.direct(owner) as direct:  # saved, with its folders, to the folder the replicas share
        assert wait_until(lambda: direct.get(f"/api/sessions/{sid}").json().get("saved") is True, 60)
        assert direct.post(f"/api/sessions/{sid}/hand-over").status_code == 404  # a replica's call only
    owner_pid = cluster.parts[owner].pid
    os.kill(owner_pid, signal.SIGKILL)

    async def after() -> None:
        async with _mcp(cluster, "conc", []) as other:  # another key: not its session, here or anywhere
            refused = await other.call_tool("run_cell", {"session_id": sid, "code": "print(x)"})
            assert refused.is_error and "no open session" in checks.text_of(refused), checks.text_of(refused)
        async with _mcp(cluster, "main", answered_by) as client:  # a new transport session
            text = await _cell(client, sid, "x += 1\nprint(x, open('/data/in.csv').read(), open('/out/made.txt').read())")
            assert "42 a,b\n1,2\n made before" in text, text
            assert "moved to another replica" in text and "No cell was lost" in text, text

    checks.run_async(after)
    cluster.wait_said(r"cluster: %s \(pid %d\) exited unexpectedly: signal 9" % (owner, owner_pid))
    cluster.wait_said(r"cluster: replica %s is back" % owner, 90)
    _whole(cluster)

    async def back() -> None:  # the key's calls reach the restarted replica: the session follows
        async with _mcp(cluster, "main", answered_by) as client:
            text = await _cell(client, sid, "x += 1\nprint(x, open('/data/in.csv').read().count(','))")
            assert "43 2" in text, text
            await checks.check_close(client, sid)

    checks.run_async(back)
    assert answered_by[-1] == owner, answered_by


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_ctrl_c_stops_everything(cluster: LiveCluster) -> None:
    cluster.refresh_pids()
    pids = [p.pid for p in cluster.parts.values()]
    workdir = Path(str(cluster.stats_socket)).parent
    port = int(cluster.url.rsplit(":", 1)[1])
    assert cluster.stop(signal.SIGINT, timeout=60) == 0, cluster.lines[-20:]
    assert all(_gone(pid) for pid in pids)
    assert not port_in_use("127.0.0.1", port) and not workdir.exists()
    assert cluster.said(r"cluster: stopped$")
