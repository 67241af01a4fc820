"""``WebSocket /api/run/ws``: interactive input; ``input()`` waits for the client."""

from __future__ import annotations

import json
import time

import pytest
from tests.support.live_server import KEY, LiveServer, wait_until
from tests.support.http_clients import open_ws, receive, until
from websockets.exceptions import ConnectionClosed, InvalidStatus


def test_input_waits_for_the_client(server: LiveServer) -> None:
    code = "name = input('Your name? ')\nage = input('Age? ')\nprint(f'Hello {name}, {age}')"
    with open_ws(server) as ws:
        ws.send(json.dumps({"type": "run", "code": code}))
        assert receive(ws)["type"] == "start"
        before, _ = until(ws, "input_wanted")
        assert "".join(m["data"] for m in before if m["type"] == "stdout") == "Your name? "
        ws.send(json.dumps({"type": "stdin", "data": "Ada\n"}))
        before, _ = until(ws, "input_wanted")
        assert "".join(m["data"] for m in before if m["type"] == "stdout") == "Age? "
        ws.send(json.dumps({"type": "stdin", "data": "36\n"}))
        _, final = until(ws, "result")
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
        assert ws.close_code == 1000
    result = final["result"]
    assert result["status"] == "ok"
    assert result["stdout"] == "Your name? Age? Hello Ada, 36\n"


def test_thinking_time_is_not_run_time_but_an_abandoned_input_ends(server: LiveServer) -> None:
    code = "name = input('Your name? ')\nprint('Hello', name)"
    with open_ws(server) as ws:  # the answer comes after three times the wall limit
        ws.send(json.dumps({"type": "run", "code": code, "limits": {"wall_seconds": 0.5}}))
        until(ws, "input_wanted")
        time.sleep(1.5)
        ws.send(json.dumps({"type": "stdin", "data": "Ada\n"}))
        _, final = until(ws, "result")
    late = final["result"]
    assert late["status"] == "ok" and late["stdout"] == "Your name? Hello Ada\n"
    assert late["input_wait_ms"] > 500 and late["wall_ms"] >= late["input_wait_ms"]
    with open_ws(server) as ws:  # nobody ever answers: the input-wait bound ends it
        ws.send(json.dumps({"type": "run", "code": "input()",
                            "limits": {"wall_seconds": 5, "input_wait_seconds": 1}}))
        until(ws, "input_wanted")
        _, final = until(ws, "result")
    gone = final["result"]
    assert gone["status"] == "timeout" and gone["limit"] == "input_wait"
    assert gone["message"] == "Stopped: it waited for input for more than 1 second."
    assert wait_until(lambda: server.health()["running"] == 0, timeout=20)
    assert server.health()["status"] == "ok"


def test_eof_and_cancel(server: LiveServer) -> None:
    with open_ws(server) as ws:
        ws.send(json.dumps({"type": "run", "code": "input()"}))
        until(ws, "input_wanted")
        ws.send(json.dumps({"type": "eof"}))
        _, final = until(ws, "result")
    assert final["result"]["status"] == "error" and "EOFError" in final["result"]["stderr"]
    with open_ws(server) as ws:
        ws.send(json.dumps({"type": "run", "code": "while True: pass", "profile": "analyst"}))
        assert receive(ws)["type"] == "start"
        ws.send(json.dumps({"type": "cancel"}))
        _, final = until(ws, "result")
    assert final["result"]["status"] == "cancelled"


def test_bad_client_messages_are_reported_and_the_run_goes_on(server: LiveServer) -> None:
    with open_ws(server) as ws:
        ws.send(json.dumps({"type": "run", "code": "print(input())"}))
        until(ws, "input_wanted")
        ws.send("not json")
        _, error = until(ws, "error")
        assert error["error"]["code"] == "bad_json"
        ws.send(json.dumps({"type": "shout"}))
        _, error = until(ws, "error")
        assert error["error"]["code"] == "bad_message"
        ws.send(json.dumps({"type": "stdin", "data": "still here\n"}))
        _, final = until(ws, "result")
    assert final["result"]["stdout"] == "still here\n"


@pytest.mark.parametrize(
    "key, first, code",
    [
        (None, {"type": "run", "code": "1"}, "unauthorized"),
        (KEY, {"type": "go", "code": "1"}, "invalid_request"),
        (KEY, {"type": "run", "code": "1", "limits": {"cpu_seconds": 60}}, "invalid_limits"),
        (KEY, {"type": "run"}, "invalid_request"),
    ],
)
def test_a_bad_start_is_a_fatal_error(
    server: LiveServer, key: str | None, first: dict, code: str
) -> None:  # type: ignore[type-arg]
    with open_ws(server, key) as ws:
        try:  # without a key the server may refuse before reading anything
            ws.send(json.dumps(first))
        except ConnectionClosed:
            pass
        msg = receive(ws)
        assert msg["type"] == "error" and msg["error"]["code"] == code and msg["error"]["message"]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)
        assert ws.close_code == 1008


def test_key_in_the_first_message(server: LiveServer) -> None:
    with open_ws(server, key=None) as ws:
        ws.send(json.dumps({"type": "run", "api_key": KEY, "code": "print('keyed')"}))
        _, final = until(ws, "result")
    assert final["result"]["stdout"] == "keyed\n"
    with open_ws(server, key=None) as ws:
        ws.send(json.dumps({"type": "run", "api_key": "wrong", "code": "print(1)"}))
        msg = receive(ws)
    assert msg["type"] == "error" and msg["error"]["code"] == "unauthorized"


def test_foreign_origins_are_refused(server: LiveServer) -> None:
    with pytest.raises((InvalidStatus, ConnectionClosed)):
        with open_ws(server, origin="https://evil.example") as ws:
            ws.recv(timeout=30)
    with open_ws(server, origin="https://course.example") as ws:  # on the allowlist
        ws.send(json.dumps({"type": "run", "code": "print('ok')"}))
        _, final = until(ws, "result")
        assert final["result"]["stdout"] == "ok\n"


def test_closing_the_socket_cancels_the_run(server: LiveServer) -> None:
    with open_ws(server) as ws:
        body = {"type": "run", "code": "while True: pass", "profile": "analyst"}
        ws.send(json.dumps(body))
        assert receive(ws)["type"] == "start"
        assert server.health()["running"] >= 1
    assert wait_until(lambda: server.health()["running"] == 0, timeout=20)
