"""Downloaded snapshots (``GET /api/sessions/{id}/snapshot``) bind to the API key's id, not only
its name, and carry an expiry in their authenticated header; one sealed by an older server (format
version 4: the key's name only, no expiry) is refused, saying why. Real uvicorns on 127.0.0.1,
one after another in this process (the same snapshot secret)."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import httpx
from tests.support.live_server import KEY, live_server, make_config

from wasm_runner.settings import hash_key
from wasm_runner.sandbox import sealing

OCTETS = {"Content-Type": "application/octet-stream"}


def snapshot_of(api: httpx.Client, code: str) -> bytes:
    r = api.post("/api/sessions", json={"profile": "quick"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    assert api.post(f"/api/sessions/{sid}/run", json={"code": code}).status_code == 200
    snap = api.get(f"/api/sessions/{sid}/snapshot")
    assert snap.status_code == 200, snap.text
    api.delete(f"/api/sessions/{sid}")
    return snap.content


def resume(api: httpx.Client, blob: bytes) -> httpx.Response:
    return api.post("/api/sessions/resume", content=blob, headers=OCTETS)


def test_a_key_deleted_and_made_again_under_its_name_cannot_resume_the_old_keys_snapshots(
    warm_sandbox: None, tmp_path: Path
) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "again").mkdir()
    first = make_config(tmp_path / "first")
    with live_server(first) as server, server.client() as api:
        blob = snapshot_of(api, "kept = 'by the first alice'")
        assert resume(api, blob).status_code == 201  # the same key resumes it
    new_key = "alice-made-again-key"
    keys = tuple(replace(k, key_sha256=hash_key(new_key)) if k.name == "alice" else k for k in first.api_keys)
    with live_server(make_config(tmp_path / "again", api_keys=keys)) as server, server.client(new_key) as api:
        r = resume(api, blob)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["details"] == [{"reason": "foreign"}]
        assert "deleted and made again" in r.json()["error"]["message"]


def test_a_downloaded_snapshot_expires(warm_sandbox: None, tmp_path: Path) -> None:
    with live_server(make_config(tmp_path, snapshot_expiry_seconds=2)) as server, server.client() as api:
        blob = snapshot_of(api, "x = 1")
        label = sealing.read_label(blob, owner=sealing_owner(server), secret=server.app.state.service.snapshot_secret)
        assert label.version == sealing.BOUND_VERSION and 0 < label.expires_at - time.time() <= 3
        assert resume(api, blob).status_code == 201
        time.sleep(max(0.0, label.expires_at - time.time()) + 0.2)
        r = resume(api, blob)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["details"] == [{"reason": "expired"}]
        assert "expired at" in r.json()["error"]["message"]


def test_a_snapshot_of_an_older_server_is_refused_saying_why(warm_sandbox: None, tmp_path: Path) -> None:
    """Format version 4, sealed as the previous server sealed downloads (for the key's name, no
    expiry): refused as ``version`` before anything of it is read, the message saying why."""
    with live_server(make_config(tmp_path)) as server, server.client() as api:
        service = server.app.state.service
        old = sealing.seal(b"state", owner="alice", secret=service.snapshot_secret, image="00" * 32,
                           profile="quick", runtime="default")  # fmt: skip
        assert sealing.read_label(old, owner="alice", secret=service.snapshot_secret).version == 4
        r = resume(api, old)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["details"] == [{"reason": "version"}]
        assert "older wasm-runner" in r.json()["error"]["message"]
        assert "take a new snapshot" in r.json()["error"]["message"]


def sealing_owner(server) -> str:  # type: ignore[no-untyped-def]
    """The owner the server seals alice's downloads for (the key's name and id)."""
    service = server.app.state.service
    tenant = service.gatekeeper.authenticate({"authorization": f"Bearer {KEY}"}, {}, "127.0.0.1")
    return str(service.snapshot_binding(tenant)[0])
