"""Server shutdown: running guests are cancelled and sessions closed, not left behind."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
from tests.support.live_server import live_server, make_config, wait_until


def test_shutdown_cancels_guests_and_closes_sessions(warm_sandbox: None, tmp_path: Path) -> None:
    with live_server(make_config(tmp_path)) as server:
        server.server.config.timeout_graceful_shutdown = 1
        service = server.app.state.service
        with server.client() as api:
            sid = api.post("/api/sessions", json={}).json()["id"]
            assert api.post(f"/api/sessions/{sid}/run", json={"code": "x = 1"}).status_code == 200
        answers: list[object] = []

        def long_run() -> None:
            try:
                with server.client() as client:
                    body = {"code": "while True: pass", "profile": "analyst"}
                    answers.append(client.post("/api/run", json=body).status_code)
            except httpx.HTTPError as exc:  # the server went away mid-request
                answers.append(type(exc).__name__)

        t = threading.Thread(target=long_run)
        t.start()
        assert wait_until(lambda: service.admission.running == 1)
        server.server.should_exit = True  # what SIGTERM does
        server.thread.join(60)
        assert not server.thread.is_alive()
        # the 30 s CPU run was cancelled long before its limit, and the session closed
        assert wait_until(lambda: service.executor.guests_in_threads == 0, timeout=20)
        assert len(service.sessions) == 0
        t.join(60)
        assert answers
