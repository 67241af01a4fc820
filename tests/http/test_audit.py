"""The audit log: one JSON line per run, with hashes; code text only when configured."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tests.support.live_server import KEY, LiveServer, live_server, make_config


def audit_lines(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_runs_are_audited_without_code_or_keys(server: LiveServer) -> None:
    code = "print('audited run 7')"
    with server.client() as api:
        api.post("/api/run", json={"code": code, "limits": {"cpu_seconds": 1.5}})
    path = server.config.audit_log
    assert path is not None
    entries = [
        e
        for e in audit_lines(path)
        if e.get("code_sha256") == hashlib.sha256(code.encode()).hexdigest()
    ]
    (entry,) = entries
    assert entry["tenant"] == "alice" and entry["kind"] == "run" and entry["profile"] == "student"
    assert entry["status"] == "ok" and entry["limits"]["cpu_seconds"] == 1.5
    assert entry["stdout_sha256"] == hashlib.sha256(b"audited run 7\n").hexdigest()
    assert "code" not in entry
    assert KEY not in path.read_text()


def test_full_code_retention_when_configured(warm_sandbox: None, tmp_path: Path) -> None:
    config = make_config(tmp_path, audit_code="full")
    with live_server(config) as server, server.client() as api:
        api.post("/api/run", json={"code": "print('keep me')"})
    (entry,) = audit_lines(tmp_path / "audit.jsonl")
    assert entry["code"] == "print('keep me')"
