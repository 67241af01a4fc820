"""Three replicas behind HAProxy (plain round robin, no stickiness), one real Redis: what must
hold across replicas does. A key's rate and its concurrency cap are the cluster's, not each
replica's; a session keeps its variables whichever replica each call lands on; a download link
works from every replica. Every limit test also shows the cluster still answers."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

from tests.support import mcp_checks as checks
import httpx
import pytest
from tests.support.cluster import REPLICA_HEADER, LiveCluster, start_cluster, wait_until
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from websockets.sync.client import connect


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    live = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield live
    assert live.stop() == 0, live.lines[-20:]


def test_a_rate_is_the_clusters_not_each_replicas(cluster: LiveCluster) -> None:
    answered_by: Counter[str] = Counter()
    refused = []
    with cluster.client("rate") as api:
        for i in range(26):
            r = api.post("/api/run", json={"code": f"print({i})"})
            if r.status_code == 200:
                assert r.json()["stdout"] == f"{i}\n"
                answered_by[r.headers[REPLICA_HEADER]] += 1
            else:
                refused.append(r)
    assert sum(answered_by.values()) == 20  # "20/minute", whichever replica counted
    assert len(answered_by) >= 2, answered_by  # and the answers came from several replicas
    assert len(refused) == 6
    for r in refused:
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert 0 < int(r.headers["Retry-After"]) <= 60
    assert len({r.headers[REPLICA_HEADER] for r in refused}) >= 2
    with cluster.client("main") as api:  # another key is not held back, and the cluster answers
        assert api.post("/api/run", json={"code": "print('still here')"}).json()["stdout"] == "still here\n"


def test_max_concurrent_holds_across_replicas(cluster: LiveCluster) -> None:
    # key "conc": max_concurrent = 2; six runs of 3 s at once, spread over three replicas
    def one(_: int) -> httpx.Response:
        with cluster.client("conc") as api:
            return api.post("/api/run", json={"code": "import time; time.sleep(3); print('done')"})

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(one, range(6)))
    ok = [r for r in answers if r.status_code == 200]
    refused = [r for r in answers if r.status_code == 429]
    assert len(ok) == 2 and len(refused) == 4, [(r.status_code, r.text[:120]) for r in answers]
    assert all(r.json()["stdout"] == "done\n" for r in ok)
    assert all(r.json()["error"]["code"] == "tenant_concurrency" for r in refused)
    assert len({r.headers[REPLICA_HEADER] for r in answers}) >= 2
    with cluster.client("conc") as api:  # the leases were given back: the key runs again
        assert api.post("/api/run", json={"code": "print(1)"}).json()["status"] == "ok"


def test_a_session_keeps_its_variables_whichever_replica_answers(cluster: LiveCluster) -> None:
    with cluster.client("main") as api:
        created = api.post("/api/sessions", json={})
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        answered_by = [created.headers[REPLICA_HEADER]]
        for cell in range(10):
            code = "total = 0" if cell == 0 else f"total += {cell}\nprint(total)"
            r = api.post(f"/api/sessions/{sid}/run", json={"code": code})
            assert r.status_code == 200, r.text
            assert r.json()["status"] == "ok" and r.json()["session"]["alive"]
            if cell:
                assert r.json()["stdout"] == f"{sum(range(cell + 1))}\n"
            answered_by.append(r.headers[REPLICA_HEADER])
        assert set(answered_by) == set(cluster.replicas)  # round robin: every replica took calls
        shown = api.get(f"/api/sessions/{sid}")
        assert shown.status_code == 200 and shown.json()["id"] == sid
        assert api.delete(f"/api/sessions/{sid}").status_code == 204
        gone = api.post(f"/api/sessions/{sid}/run", json={"code": "print(total)"})
        assert gone.status_code in (404, 410) and gone.json()["error"]["code"] in ("unknown_session", "session_lost")


def test_a_download_link_works_from_every_replica(cluster: LiveCluster) -> None:
    content = bytes(range(256)) * 4
    with cluster.client("main") as api:
        r = api.post("/api/run", json={
            "code": "open('/out/data.bin', 'wb').write(bytes(range(256)) * 4)", "files_as": "url",
        })  # fmt: skip
        assert r.status_code == 200, r.text
        (entry,) = r.json()["files"]
        assert entry["url"].startswith("/api/files/")
    for name in cluster.replicas:  # straight to each replica, and through the balancer
        got = httpx.get(cluster.parts[name].url + entry["url"], timeout=30)
        assert got.status_code == 200 and got.content == content, (name, got.status_code, got.text[:200])
    through = [httpx.get(cluster.url + entry["url"], timeout=30) for _ in range(3)]
    assert all(g.status_code == 200 and g.content == content for g in through)
    assert {g.headers[REPLICA_HEADER] for g in through} == set(cluster.replicas)
    missing = httpx.get(cluster.url + "/api/files/not-a-token", timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_file"


def test_an_mcp_conversation_with_a_tool_session_works_through_the_balancer(cluster: LiveCluster) -> None:
    """The SDK's client over streamable HTTP: one-shot runs, then a tool session whose variables
    are kept over cells. /mcp is balanced by API key, so all of it reaches one replica."""
    answered_by: list[str] = []

    async def note(response: object) -> None:
        answered_by.append(response.headers.get(REPLICA_HEADER, "?"))  # type: ignore[attr-defined]

    async def conversation() -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {cluster.keys['main']}"})
        http.event_hooks = {"request": [], "response": [note]}
        async with Client(streamable_http_client(f"{cluster.url}/mcp", http_client=http),
                          read_timeout_seconds=120) as client:  # fmt: skip
            await checks.check_run_once(client)  # initialize, then run_python twice
            session_id = await checks.open_session(client)
            await checks.check_state_kept(client, session_id)
            await checks.check_close(client, session_id)

    checks.run_async(conversation)
    assert len(answered_by) >= 7 and len(set(answered_by)) == 1, answered_by  # one replica for the key
    with cluster.client("main") as api:  # while every other call is still balanced
        spread = {api.get("/api/profiles").headers[REPLICA_HEADER] for _ in range(3)}
    assert spread == set(cluster.replicas)


def test_a_class_on_one_key_parked_thinkers_and_user_caps_across_replicas(
    cluster: LiveCluster, sockets: ExitStack
) -> None:
    # key "class": 2 runs in flight across the cluster, 1 per user
    ws_url = cluster.url.replace("http://", "ws://") + "/api/run/ws"
    thinkers = []
    for n in range(3):  # three students think over input(): more than the key's 2 runs in flight
        ws = sockets.enter_context(connect(ws_url, open_timeout=60))
        ws.send(json.dumps({"type": "run", "api_key": cluster.keys["class"], "user": f"t{n}",
                            "code": "name = input('Name? ')\nprint('hi', name)"}))  # fmt: skip
        while json.loads(ws.recv(timeout=60))["type"] != "input_wanted":
            pass
        thinkers.append(ws)

    def waiting() -> int:
        total = 0
        for name in cluster.replicas:
            total += httpx.get(cluster.parts[name].url + "/healthz", timeout=10).json()["waiting"]
        return total

    assert wait_until(lambda: waiting() == 3, timeout=30)

    def run(user: str, code: str) -> httpx.Response:
        with cluster.client("class") as api:
            return api.post("/api/run", json={"code": code}, headers={"X-Wasm-Runner-User": user})

    with ThreadPoolExecutor(2) as pool:
        # long enough to be still running on a busy machine when ada's next call arrives
        slow = pool.submit(run, "ada", "import time; time.sleep(10); print('slept')")
        assert wait_until(lambda: sum(
            httpx.get(cluster.parts[n].url + "/healthz", timeout=10).json()["running"] for n in cluster.replicas
        ) == 1, timeout=30)  # fmt: skip
        second = run("ada", "print(1)")  # whichever replica: ada's one place is taken
        assert second.status_code == 429 and second.json()["error"]["code"] == "user_concurrency"
        # a classmate runs at once: the thinkers hold no place among the key's runs in flight
        assert run("bea", "print('bea')").json()["stdout"] == "bea\n"
        assert slow.result().json()["stdout"] == "slept\n"
    for n, ws in enumerate(thinkers):
        ws.send(json.dumps({"type": "stdin", "data": f"s{n}\n"}))
        while (msg := json.loads(ws.recv(timeout=60)))["type"] != "result":
            pass
        ws.close()
        assert msg["result"]["stdout"] == f"Name? hi s{n}\n"
    assert wait_until(lambda: waiting() == 0, timeout=30)
