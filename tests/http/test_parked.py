"""A run waiting in ``input()`` is parked: it gives back its run slot and its key's in-flight
place, counts as waiting (``/healthz``, ``/metrics``, the audit log), and takes a slot again ahead
of queued runs when its input comes. Real server, real wasmtime, a real WebSocket client."""

from __future__ import annotations

import json
import threading
from contextlib import ExitStack
import time
from pathlib import Path
from typing import Any

import httpx
from tests.support.live_server import live_server, make_config, wait_until
from tests.support.http_clients import open_ws, receive, until

from wasm_runner.settings import ApiKey, hash_key

SOLO = "solo-key"
THINKER = "name = input('Name? ')\nprint('hi', name)"


def gauge(server: Any, name: str) -> float:
    for line in httpx.get(server.url + "/metrics", timeout=30).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in /metrics")


def start_thinker(sockets: ExitStack, server: Any, key: str = SOLO, code: str = THINKER, **limits: float) -> Any:
    ws = sockets.enter_context(open_ws(server, key))  # closed by answer(), the test or its end
    ws.send(json.dumps({"type": "run", "code": code, **({"limits": limits} if limits else {})}))
    assert receive(ws)["type"] == "start"
    until(ws, "input_wanted")
    return ws


def answer(ws: Any, text: str) -> dict[str, Any]:
    ws.send(json.dumps({"type": "stdin", "data": text}))
    _, final = until(ws, "result")
    ws.close()
    return final["result"]  # type: ignore[no-any-return]


def test_a_parked_run_gives_back_its_slot_and_its_place_then_resumes(
    warm_sandbox: None, tmp_path: Path, sockets: ExitStack
) -> None:
    # one slot, one run in flight for the key: before parking, a thinker blocked everything
    keys = (ApiKey("solo", hash_key(SOLO), rate="10000/minute", max_concurrent=1),)
    config = make_config(tmp_path, api_keys=keys, max_running=1)
    with live_server(config) as server:
        thinkers = [start_thinker(sockets, server) for _ in range(3)]
        assert wait_until(lambda: server.health()["waiting"] == 3)
        health = server.health()
        assert health["running"] == 0 and health["queued"] == 0 and health["status"] == "ok"
        assert gauge(server, "wasm_runner_waiting_runs") == 3.0
        assert gauge(server, "wasm_runner_running_guests") == 0.0
        # the same key runs print(1) at once: the slot and its in-flight place are free
        with server.client(SOLO) as client:
            r = client.post("/api/run", json={"code": "print(1)"})
            assert r.status_code == 200 and r.json()["stdout"] == "1\n"
        # each thinker answers and its run goes on where it stopped
        for n, ws in enumerate(thinkers):
            result = answer(ws, f"Ada{n}\n")
            assert result["status"] == "ok" and result["stdout"] == f"Name? hi Ada{n}\n"
            assert result["input_wait_ms"] > 0
        assert wait_until(lambda: server.health()["waiting"] == 0 == server.health()["running"])
        assert gauge(server, "wasm_runner_waiting_runs") == 0.0
        # the audit log tells running, queued and waiting apart
        lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
        ws_lines = [x for x in lines if x["kind"] == "ws"]
        assert len(ws_lines) == 3
        assert all(x["input_wait_ms"] > 0 and x["queued_ms"] >= 0 for x in ws_lines)
        assert all(x["wall_ms"] >= x["input_wait_ms"] for x in ws_lines)


def test_input_resumes_ahead_of_queued_runs(warm_sandbox: None, tmp_path: Path, sockets: ExitStack) -> None:
    config = make_config(tmp_path, max_running=1)
    service = None
    with live_server(config) as server:
        service = server.app.state.service
        stamp = "import time\nname = input('Name? ')\nprint(time.time())"
        thinker = start_thinker(sockets, server, key="alice-key", code=stamp)
        assert wait_until(lambda: server.health()["waiting"] == 1)
        starts: dict[str, float] = {}

        def run(name: str, code: str) -> None:
            with server.client() as client:
                r = client.post("/api/run", json={"code": code})
                assert r.status_code == 200, r.text
                starts[name] = float(r.json()["stdout"].split()[0])

        blocker = threading.Thread(target=run, args=("blocker", "import time\nprint(time.time())\ntime.sleep(3)"))
        blocker.start()
        assert wait_until(lambda: server.health()["running"] == 1)
        queued = threading.Thread(target=run, args=("queued", "import time\nprint(time.time())"))
        queued.start()
        assert wait_until(lambda: server.health()["queued"] == 1)
        # the answer comes while the slot is taken and a new run waits in the queue
        thinker.send(json.dumps({"type": "stdin", "data": "Ada\n"}))
        assert wait_until(lambda: service.admission.resuming == 1)
        _, final = until(thinker, "result")
        thinker.close()
        blocker.join(60)
        queued.join(60)
        resumed_at = float(final["result"]["stdout"].split()[-1])
        assert final["result"]["status"] == "ok"
        assert starts["blocker"] < resumed_at < starts["queued"]
        assert server.health() == {**server.health(), "running": 0, "queued": 0, "waiting": 0}


def test_waiting_runs_have_bounds_and_an_abandoned_one_ends(
    warm_sandbox: None, tmp_path: Path, sockets: ExitStack
) -> None:
    config = make_config(tmp_path, max_running=2, max_waiting_runs=4, max_waiting_runs_per_key=1)
    with live_server(config) as server:
        first = start_thinker(sockets, server, key="alice-key")
        assert wait_until(lambda: server.health()["waiting"] == 1)
        # the key's one waiting place is taken: the second thinker keeps its run slot
        second = start_thinker(sockets, server, key="alice-key")
        time.sleep(0.5)
        health = server.health()
        assert health["waiting"] == 1 and health["running"] == 1
        # another key still parks
        other = start_thinker(sockets, server, key="bob-key", input_wait_seconds=1)
        assert wait_until(lambda: server.health()["waiting"] == 2)
        # nobody answers bob's: the input-wait bound ends it and its waiting place comes back
        _, final = until(other, "result")
        other.close()
        assert final["result"]["status"] == "timeout" and final["result"]["limit"] == "input_wait"
        assert wait_until(lambda: server.health()["waiting"] == 1)
        # a client that goes away while parked ends its run and frees its place, which the
        # second thinker (still waiting, holding its slot) takes: it gives its slot back
        first.close()
        assert wait_until(lambda: server.health()["running"] == 0)
        assert server.health()["waiting"] == 1
        assert answer(second, "Bea\n")["stdout"] == "Name? hi Bea\n"
        assert wait_until(lambda: server.health()["waiting"] == 0)
        assert wait_until(lambda: server.health()["running"] == 0)
        with server.client() as client:
            assert client.post("/api/run", json={"code": "print(2)"}).json()["stdout"] == "2\n"
