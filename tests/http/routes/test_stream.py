"""``POST /api/run/stream``: Server-Sent Events while the program runs, then the result."""

from __future__ import annotations


import httpx
from tests.support.live_server import LiveServer, wait_until
from tests.support.http_clients import sse_events


def test_stream_sends_output_then_result(api: httpx.Client) -> None:
    code = (
        "import sys\nfor i in range(3):\n    print(i, flush=True)\nprint('é' * 3, file=sys.stderr)"
    )
    with api.stream("POST", "/api/run/stream", json={"code": code}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = list(sse_events(r))
    kinds = [k for k, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "result"
    assert set(kinds[1:-1]) <= {"stdout", "stderr"}
    result = events[-1][1]
    assert result["status"] == "ok"
    streamed_out = "".join(d["data"] for k, d in events if k == "stdout")
    streamed_err = "".join(d["data"] for k, d in events if k == "stderr")
    assert streamed_out == result["stdout"] == "0\n1\n2\n"
    assert streamed_err == result["stderr"] == "ééé\n"


def test_output_arrives_while_the_program_still_runs(api: httpx.Client, server: LiveServer) -> None:
    code = "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')"
    with api.stream("POST", "/api/run/stream", json={"code": code}) as r:
        events = sse_events(r)
        assert next(events)[0] == "start"
        kind, data = next(events)
        assert (kind, data["data"]) == ("stdout", "first\n")
        assert server.health()["running"] >= 1  # the guest is still running at this point
        rest = list(events)
    assert rest[-1][0] == "result" and rest[-1][1]["stdout"] == "first\nsecond\n"


def test_refusals_come_before_the_stream(server: LiveServer) -> None:
    with server.client(None) as anonymous:
        r = anonymous.post("/api/run/stream", json={"code": "print(1)"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    with server.client() as client:
        r = client.post("/api/run/stream", json={"code": "print(1)", "limits": {"cpu_seconds": 99}})
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_limits"


def test_disconnect_cancels_the_stream_run(api: httpx.Client, server: LiveServer) -> None:
    code = "import time\nprint('go', flush=True)\nwhile True:\n    time.sleep(0.05)"
    body = {"code": code, "profile": "analyst", "limits": {"wall_seconds": 100}}
    with api.stream("POST", "/api/run/stream", json=body) as r:
        events = sse_events(r)
        next(events)
        assert next(events)[1]["data"] == "go\n"
        assert server.health()["running"] >= 1
    # the client hung up: the guest is freed long before its 100 s wall limit
    assert wait_until(lambda: server.health()["running"] == 0, timeout=30)
    metrics = httpx.get(server.url + "/metrics").text
    assert 'wasm_runner_runs_total{kind="stream",profile="analyst",status="cancelled"}' in metrics
