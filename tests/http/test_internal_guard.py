"""Requests with internal-hop headers but no valid signature (``wasm_runner/http/internal.py``):
each is refused and audited, but as a failed attempt of its address (``failed_auth_rate``), so a
client cannot write audit lines without bound. A real uvicorn on 127.0.0.1 with its own config."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.live_server import LiveServer, live_server, make_config

RATE = 5  # failed attempts per address per minute, for this server


@pytest.fixture()
def guarded(warm_sandbox: None, tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(make_config(tmp_path, failed_auth_rate=f"{RATE}/minute")) as live:
        yield live


def forged() -> dict[str, str]:
    return {
        "X-Wasm-Runner-Internal-Tenant": "alice",
        "X-Wasm-Runner-Internal-Client": "127.0.0.1",
        "X-Wasm-Runner-Internal-Replica": "r",
        "X-Wasm-Runner-Internal-Time": f"{time.time():.3f}",
        "X-Wasm-Runner-Internal-Nonce": secrets.token_urlsafe(18),
        "X-Wasm-Runner-Internal-Mac": secrets.token_hex(32),
    }


def refusal_lines(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [e for e in lines if e.get("event") == "internal_forbidden"]


def test_forged_internal_headers_write_a_bounded_number_of_audit_lines(guarded: LiveServer) -> None:
    """40 forged hops from one address: the first ``RATE`` are ``403 internal_forbidden`` and
    audited; the rest are ``429 too_many_failed_attempts`` with ``Retry-After``, not audited (no
    more lines than the window allows, whatever a client sends)."""
    audit = guarded.config.audit_log
    assert audit is not None
    codes: list[str] = []
    with guarded.client(None) as anyone:
        for i in range(40):
            path = "/api/sessions/x/run" if i % 2 else "/api/run"
            r = anyone.post(path, json={"code": "1"}, headers=forged())
            assert r.status_code in (403, 429), r.text
            codes.append(r.json()["error"]["code"])
            if r.status_code == 429:
                assert int(r.headers["Retry-After"]) >= 1
        assert codes[:RATE] == ["internal_forbidden"] * RATE
        assert set(codes[RATE:]) == {"too_many_failed_attempts"}
        assert len(refusal_lines(audit)) == RATE
        # the address is over its window for keys too (the window a wrong key counts in)
        r = anyone.post("/api/run", json={"code": "1"}, headers={"Authorization": "Bearer wrong"})
        assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_failed_attempts"
    # the server answers meanwhile, and a refused address is a metric, not a log line each time
    with guarded.client(None) as anyone:
        assert anyone.get("/healthz").status_code == 200
