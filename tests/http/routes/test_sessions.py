"""Sessions: state kept across calls, per-call limits, expiry, ownership, and what a limit does."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
from tests.support.live_server import OTHER_KEY, LiveServer, b64, live_server, make_config, wait_until
from tests.support.http_clients import call, open_session, sse_events


def test_variables_and_files_persist(api: httpx.Client) -> None:
    sid = open_session(api)
    assert call(api, sid, "x = 41\nopen('notes.txt', 'w').write('kept')")["status"] == "ok"
    second = call(api, sid, "print(x + 1, open('notes.txt').read())")
    assert second["stdout"] == "42 kept\n"
    assert second["session"] == {**second["session"], "id": sid, "alive": True, "calls": 2}
    upload = call(
        api,
        sid,
        "print(open('in.txt').read())",
        files=[{"name": "in.txt", "content_base64": b64(b"up")}],
    )
    assert upload["stdout"] == "up\n"
    assert api.delete(f"/api/sessions/{sid}").status_code == 204
    assert api.post(f"/api/sessions/{sid}/run", json={"code": "x"}).status_code == 404


def test_exceptions_exit_and_memory_limit_keep_the_session(api: httpx.Client) -> None:
    sid = open_session(api)
    call(api, sid, "y = 'still'")
    failed = call(api, sid, "raise ValueError('boom')")
    assert failed["status"] == "error" and failed["session"]["alive"] is True
    exited = call(api, sid, "import sys; sys.exit(3)")
    assert exited["exit_code"] == 3 and exited["session"]["alive"] is True
    hog = call(api, sid, "h = []\nwhile True:\n    h.append(bytearray(1 << 20))")
    assert hog["status"] == "memory_limit" and hog["session"]["alive"] is True
    assert call(api, sid, "print(y)")["stdout"] == "still\n"
    api.delete(f"/api/sessions/{sid}")


def test_a_limit_ends_the_session_and_says_so(api: httpx.Client, server: LiveServer) -> None:
    sid = open_session(api)
    call(api, sid, "z = 1")
    hit = call(api, sid, "while True: pass", limits={"cpu_seconds": 0.3})
    assert hit["status"] == "cpu_limit" and hit["limit"] == "cpu"
    assert hit["session"]["alive"] is False
    after = api.post(f"/api/sessions/{sid}/run", json={"code": "print(z)"})
    assert after.status_code == 404 and after.json()["error"]["code"] == "unknown_session"
    assert api.get("/healthz").status_code == 200
    sid = open_session(api)
    slept = call(api, sid, "import time; time.sleep(30)", limits={"wall_seconds": 0.5})
    assert slept["status"] == "timeout" and slept["session"]["alive"] is False
    assert api.get(f"/api/sessions/{sid}").status_code == 404


def test_per_call_limits_only_tighten(api: httpx.Client) -> None:
    sid = open_session(api, limits={"cpu_seconds": 1})
    r = api.post(f"/api/sessions/{sid}/run", json={"code": "1", "limits": {"cpu_seconds": 2}})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_limits"
    assert call(api, sid, "print(1)", limits={"cpu_seconds": 0.5})["status"] == "ok"
    api.delete(f"/api/sessions/{sid}")


def test_sessions_belong_to_their_key(api: httpx.Client, server: LiveServer) -> None:
    sid = open_session(api)
    with server.client(OTHER_KEY) as bob:
        assert bob.get(f"/api/sessions/{sid}").status_code == 404
        assert bob.post(f"/api/sessions/{sid}/run", json={"code": "1"}).status_code == 404
        assert bob.delete(f"/api/sessions/{sid}").status_code == 404
    assert api.get(f"/api/sessions/{sid}").json()["alive"] is True
    api.delete(f"/api/sessions/{sid}")
    assert api.get("/api/sessions/no-such-id").json()["error"]["code"] == "unknown_session"


def test_one_call_at_a_time(api: httpx.Client, server: LiveServer) -> None:
    sid = open_session(api)
    slow: dict = {}  # type: ignore[type-arg]

    def run_slow() -> None:
        with server.client() as client:
            slow.update(call(client, sid, "import time; time.sleep(1.5); print('done')"))

    t = threading.Thread(target=run_slow)
    t.start()
    assert wait_until(lambda: server.health()["running"] >= 1, timeout=30)
    busy = api.post(f"/api/sessions/{sid}/run", json={"code": "1"})
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
    t.join(60)
    assert slow["stdout"] == "done\n"
    api.delete(f"/api/sessions/{sid}")


def test_idle_expiry_and_max_lifetime(warm_sandbox: None, tmp_path: Path) -> None:
    # sessions that are never paused (session_pause_seconds = 0; test_paused_sessions.py: paused)
    config = make_config(tmp_path, session_idle_seconds=1.0, session_max_lifetime_seconds=3.0,
                         session_pause_seconds=0)
    with live_server(config) as server, server.client() as api:
        idle = open_session(api)
        assert wait_until(lambda: api.get(f"/api/sessions/{idle}").status_code == 404, timeout=30)
        busy = open_session(api)

        # keep it in use: it still ends at its maximum lifetime
        def used_and_alive() -> bool:
            r = api.post(f"/api/sessions/{busy}/run", json={"code": "1"})
            return r.status_code == 200

        assert wait_until(lambda: not used_and_alive(), timeout=30, step=0.3)
        assert wait_until(lambda: server.health()["sessions"] == 0, timeout=30)
        metrics = httpx.get(server.url + "/metrics").text
        assert "wasm_runner_active_sessions 0.0" in metrics


def test_session_count_is_capped_per_key(warm_sandbox: None, tmp_path: Path) -> None:
    # sessions that never pause: with pausing a new session pauses an idle one to make room
    # (test_paused_sessions.py), so the cap is on the sessions that run
    config = make_config(tmp_path, max_sessions=2, session_pause_seconds=0)
    with live_server(config) as server, server.client() as api:
        first, second = open_session(api), open_session(api)
        r = api.post("/api/sessions", json={})
        assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_sessions"
        assert "retry-after" in r.headers
        api.delete(f"/api/sessions/{first}")
        open_session(api)
        api.delete(f"/api/sessions/{second}")


def test_a_cell_can_stream_its_output(api: httpx.Client, server: LiveServer) -> None:
    sid = open_session(api)
    call(api, sid, "name = 'Ada'")
    with api.stream(
        "POST", f"/api/sessions/{sid}/run/stream",
        json={"code": "import sys\nprint('hi', name)\nprint('oops', file=sys.stderr)"},
    ) as r:  # fmt: skip
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = list(sse_events(r))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "result"
    assert ("stdout", {"data": "hi Ada\n"}) in events and ("stderr", {"data": "oops\n"}) in events
    result = events[-1][1]
    assert result["stdout"] == "hi Ada\n" and result["session"]["calls"] == 2
    # refusals come before the stream, as JSON: another key, an ended session
    with server.client(OTHER_KEY) as bob:
        other = bob.post(f"/api/sessions/{sid}/run/stream", json={"code": "1"})
        assert other.status_code == 404 and other.json()["error"]["code"] == "unknown_session"
    api.delete(f"/api/sessions/{sid}")
    ended = api.post(f"/api/sessions/{sid}/run/stream", json={"code": "1"})
    assert ended.status_code == 404 and ended.json()["error"]["code"] == "unknown_session"


def test_an_answer_before_the_body_is_read_closes_the_connection_cleanly(api: httpx.Client) -> None:
    # 404 from the session id alone: the body is never read, so the server closes the connection
    # and says so; the client's next request opens a new one instead of getting a reset
    for _ in range(20):
        refused = api.post("/api/sessions/no-such-id/run", json={"code": "x = 1" * 2000})
        assert refused.status_code == 404 and refused.json()["error"]["code"] == "unknown_session"
        assert refused.headers.get("connection", "").lower() == "close"
        assert api.get("/healthz").status_code == 200
    sid = open_session(api)  # a request whose body is read keeps the connection
    kept = api.post(f"/api/sessions/{sid}/run", json={"code": "print(2)"})
    assert kept.status_code == 200 and kept.headers.get("connection", "").lower() != "close"
