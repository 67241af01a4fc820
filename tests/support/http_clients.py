"""Clients of the live server that several test modules share: the WebSocket run (``open_ws``,
``receive``, ``until``), server-sent events (``sse_events``), a session's calls (``open_session``,
``call``) and a free loopback port (``free_port``)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
from websockets.sync.client import ClientConnection, connect

from tests.support.live_server import KEY, LiveServer

__all__ = ["call", "free_port", "open_session", "open_ws", "receive", "sse_events", "until"]


def open_ws(server: LiveServer, key: str | None = KEY, **kw: Any) -> ClientConnection:
    url = server.ws_url + "/api/run/ws" + (f"?api_key={key}" if key else "")
    return connect(url, open_timeout=30, **kw)


def receive(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(ws.recv(timeout=60))


def until(ws: ClientConnection, kind: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    seen = []
    while True:
        msg = receive(ws)
        if msg["type"] == kind:
            return seen, msg
        seen.append(msg)


def sse_events(response: httpx.Response) -> Iterator[tuple[str, dict]]:  # type: ignore[type-arg]
    event, data = "message", ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data:
            yield event, json.loads(data)
            event, data = "message", ""


def open_session(api: httpx.Client, **body: object) -> str:
    r = api.post("/api/sessions", json=body)
    assert r.status_code == 201, r.text
    assert r.json()["alive"] is True
    return str(r.json()["id"])


def call(api: httpx.Client, sid: str, code: str, **body: object) -> dict:  # type: ignore[type-arg]
    r = api.post(f"/api/sessions/{sid}/run", json={"code": code, **body})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
