"""Queue and caps end to end: a full queue answers 429 with Retry-After; the server recovers."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
from tests.support.live_server import live_server, make_config, wait_until

from wasm_runner.settings import DEFAULT_PROFILES, ApiKey, hash_key
from wasm_runner.admission import server_memory_mb


def test_full_queue_gives_429_then_recovers(warm_sandbox: None, tmp_path: Path) -> None:
    config = make_config(tmp_path, max_running=1, max_queue=1)
    with live_server(config) as server:
        results: list[int] = []

        def sleeper(seconds: float) -> None:
            with server.client() as client:
                r = client.post("/api/run", json={"code": f"import time; time.sleep({seconds})"})
                results.append(r.status_code)

        # one after the other: the first runs long enough that a busy machine still sees one run
        # and one queued when the third request comes (two at once raced: loaded run 5 got 200)
        threads = [threading.Thread(target=sleeper, args=(8,)), threading.Thread(target=sleeper, args=(0.1,))]
        threads[0].start()
        assert wait_until(lambda: server.health()["running"] == 1)
        threads[1].start()
        assert wait_until(lambda: server.health() == {**server.health(), "running": 1, "queued": 1})
        with server.client() as client:
            r = client.post("/api/run", json={"code": "print('no room')"})
            assert r.status_code == 429 and r.json()["error"]["code"] == "queue_full"
            assert int(r.headers["retry-after"]) >= 1
            for t in threads:
                t.join(60)
            assert results == [200, 200]
            assert client.post("/api/run", json={"code": "print(1)"}).json()["stdout"] == "1\n"
        metrics = httpx.get(server.url + "/metrics").text
        assert "wasm_runner_queue_wait_seconds_count" in metrics
        assert 'wasm_runner_rejections_total{reason="queue_full"} 1.0' in metrics


def test_per_key_concurrency_cap(warm_sandbox: None, tmp_path: Path) -> None:
    keys = (ApiKey("solo", hash_key("solo-key"), max_concurrent=1),)
    with live_server(make_config(tmp_path, api_keys=keys, max_running=2)) as server:
        done: list[int] = []

        def sleeper() -> None:
            with server.client("solo-key") as client:
                r = client.post("/api/run", json={"code": "import time; time.sleep(1.5)"})
                done.append(r.status_code)

        t = threading.Thread(target=sleeper)
        t.start()
        assert wait_until(lambda: server.health()["running"] == 1)
        with server.client("solo-key") as client:
            r = client.post("/api/run", json={"code": "print(1)"})
            assert r.status_code == 429 and r.json()["error"]["code"] == "tenant_concurrency"
            assert "retry-after" in r.headers
            t.join(60)
            assert done == [200]
            assert client.post("/api/run", json={"code": "print(1)"}).status_code == 200


def test_memory_budget_limits_sessions(warm_sandbox: None, tmp_path: Path) -> None:
    # a session holds its memory_mb plus its image's resident pages (datascience: 34 MB)
    # 1100 MB for guests, after what the server holds itself (prestarted instances, allocator)
    held = server_memory_mb(make_config(tmp_path))
    # never paused (an idle session would be paused to make room: test_paused_sessions.py)
    config = make_config(tmp_path, memory_budget_mb=1100 + held, tenant_memory_share=1.0,
                         session_pause_seconds=0)
    with live_server(config) as server, server.client() as api:
        big = api.post("/api/sessions", json={"profile": "analyst"})  # holds 1024 + 34 MB
        assert big.status_code == 201
        r = api.post("/api/sessions", json={"profile": "student"})  # 64 + 34 MB more does not fit
        assert r.status_code == 429 and r.json()["error"]["code"] == "memory_budget"
        api.delete(f"/api/sessions/{big.json()['id']}")
        small = api.post("/api/sessions", json={"profile": "student"})
        assert small.status_code == 201


def test_the_servers_own_instances_count_in_the_memory_budget(warm_sandbox: None, tmp_path: Path) -> None:
    """The instances a server keeps started ahead of time (and what its allocator keeps) come off
    ``memory_budget_mb`` first: a run that would fit the budget alone but not what is left after
    them is refused, one that fits what is left runs."""
    only_student = {"profiles": {"student": DEFAULT_PROFILES["student"]}, "runtimes": ("default",),
                    "tenant_memory_share": 1.0}
    held = server_memory_mb(make_config(tmp_path, **only_student))
    assert held >= 2 * 34  # two prestarted datascience instances at least
    run_mb = 64 + 34  # the student profile's memory_mb and its image's resident pages
    with live_server(make_config(tmp_path, memory_budget_mb=held + run_mb - 1, **only_student)) as server:
        with server.client() as client:
            r = client.post("/api/run", json={"code": "print(1)"})
            assert r.status_code == 429 and r.json()["error"]["code"] == "memory_budget", r.text
            assert server.health()["status"] == "ok"
    with live_server(make_config(tmp_path, memory_budget_mb=held + run_mb, **only_student)) as server:
        with server.client() as client:
            r = client.post("/api/run", json={"code": "print(1)"})
            assert r.status_code == 200 and r.json()["stdout"] == "1\n", r.text
