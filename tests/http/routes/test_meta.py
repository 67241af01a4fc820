"""Health, metrics, the OpenAPI description, profiles, CORS and security headers."""

from __future__ import annotations

import httpx
from tests.support.live_server import STUDENT_KEY, LiveServer


def test_healthz_and_metrics(api: httpx.Client, server: LiveServer) -> None:
    assert api.post("/api/run", json={"code": "print(1)"}).json()["status"] == "ok"
    assert httpx.get(server.url + "/healthz").json()["status"] == "ok"
    text = httpx.get(server.url + "/metrics").text
    assert 'wasm_runner_runs_total{kind="run",profile="student",status="ok"}' in text
    for name in (
        "wasm_runner_run_seconds_bucket",
        "wasm_runner_fuel_used_bucket",
        "wasm_runner_queue_depth",
        "wasm_runner_active_sessions",
        "wasm_runner_running_guests",
    ):
        assert name in text


def test_openapi_describes_the_api(server: LiveServer) -> None:
    doc = httpx.get(server.url + "/api/openapi.json").json()
    assert doc["openapi"].startswith("3.1")
    for path in ("/api/run", "/api/run/stream", "/api/sessions", "/api/sessions/{session_id}/run"):
        assert path in doc["paths"]
    assert "RunRequest" in doc["components"]["schemas"]


def test_profiles_listed_for_the_key(server: LiveServer) -> None:
    with server.client(STUDENT_KEY) as client:
        body = client.get("/api/profiles").json()
    assert list(body["profiles"]) == ["student"]
    assert body["profiles"]["student"]["limits"]["cpu_seconds"] == 2


def test_cors_allowlist(server: LiveServer) -> None:
    def preflight(origin: str) -> httpx.Response:
        return httpx.options(
            server.url + "/api/run",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type,authorization",
            },
        )

    ok = preflight("https://course.example")
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == "https://course.example"
    bad = preflight("https://evil.example")
    assert bad.status_code == 400 and "access-control-allow-origin" not in bad.headers


def test_security_headers(server: LiveServer) -> None:
    r = httpx.get(server.url + "/api/openapi.json")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert r.headers["cache-control"] == "no-store"
    page = httpx.get(server.url + "/")  # the playground sets its own policy; it is kept
    assert page.status_code == 200
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'self'" in page.headers["content-security-policy"]


def test_mcp_tools_are_mounted_behind_the_keys(server: LiveServer) -> None:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    r = httpx.post(server.url + "/mcp", json=init)
    assert r.status_code == 401
    with server.client() as client:
        r = client.post(
            "/mcp",
            json={
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "test", "version": "0"}},
            },
            headers={"Accept": "application/json, text/event-stream"},
        )  # fmt: skip
        assert r.status_code == 200 and "wasm-runner" in r.text.lower()
