"""Forks and snapshots over HTTP (issue 25): ``POST /api/sessions/{id}/fork``, ``GET
/api/sessions/{id}/snapshot`` and ``POST /api/sessions/resume`` on a real uvicorn with real
sandboxes: copies are independent sessions counted like new ones, a downloaded snapshot resumes
for its own key only, and every refusal names its reason while the server goes on answering."""

from __future__ import annotations

import json
import socket
import struct
import threading
from pathlib import Path

import httpx
from tests.support.attack_kit import read_status
from tests.support.live_server import KEY, OTHER_KEY, LiveServer, live_server, make_config, wait_until

from tests.support.http_clients import call, open_session

OCTETS = {"Content-Type": "application/octet-stream"}


def audit_events(server: LiveServer, event: str) -> list[dict[str, str]]:
    path = server.config.audit_log
    assert path is not None
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    return [e for e in lines if e.get("event") == event]


def fork(api: httpx.Client, sid: str, **body: object) -> httpx.Response:
    return api.post(f"/api/sessions/{sid}/fork", json=body)


def test_forks_are_independent_sessions(api: httpx.Client, server: LiveServer) -> None:
    sid = open_session(api)
    call(api, sid, "items = [1]\nopen('/scratch/f.txt', 'w').write('base')")
    r = fork(api, sid, copies=2)
    assert r.status_code == 201, r.text
    copies = [c["id"] for c in r.json()["sessions"]]
    assert len(set(copies)) == 2 and sid not in copies
    assert all(c["alive"] and c["calls"] == 0 for c in r.json()["sessions"])
    a, b = copies
    changed = call(api, a, "items.append('a')\nopen('/scratch/f.txt', 'w').write('a')\nprint(items)")
    assert changed["stdout"] == "[1, 'a']\n"
    for other in (b, sid):  # the other copy and the original are untouched
        seen = call(api, other, "print(items, open('/scratch/f.txt').read())")
        assert seen["stdout"] == "[1] base\n", seen
    assert call(api, sid, "items.append('orig'); print(items)")["stdout"] == "[1, 'orig']\n"
    assert call(api, a, "print(items)")["stdout"] == "[1, 'a']\n"
    # each copy is its key's own session: another key cannot see it
    with server.client(OTHER_KEY) as bob:
        assert bob.get(f"/api/sessions/{a}").status_code == 404
        assert fork(bob, sid).status_code == 404
    (forked,) = [e for e in audit_events(server, "session_forked") if e["session"] == sid]
    assert forked["tenant"] == "alice" and forked["copies"] == "2"
    assert forked["new_sessions"].split(",") == copies
    for s in (sid, a, b):
        assert api.delete(f"/api/sessions/{s}").status_code == 204


def test_fork_keeps_seeds_only_when_asked(api: httpx.Client) -> None:
    sid = open_session(api)
    call(api, sid, "import random\nrandom.seed(11)")
    (same,) = [c["id"] for c in fork(api, sid, keep_seeds=True).json()["sessions"]]
    (fresh,) = [c["id"] for c in fork(api, sid).json()["sessions"]]
    draws = {s: call(api, s, "print(random.random())")["stdout"] for s in (sid, same, fresh)}
    assert draws[sid] == draws[same] and draws[fresh] != draws[sid]
    for s in (sid, same, fresh):
        api.delete(f"/api/sessions/{s}")


def test_fork_refusals_and_limits(warm_sandbox: None, tmp_path: Path) -> None:
    """Bounds on copies, a busy session, the key's cap and the server's: each a clear 4xx, all
    or nothing, and the server and the original session go on."""
    # never paused: an idle copy would be paused to make room (test_paused_sessions.py)
    config = make_config(tmp_path, max_sessions=4, max_fork_copies=3, session_pause_seconds=0)
    with live_server(config) as server, server.client() as api:
        sid = open_session(api)
        call(api, sid, "kept = 'yes'")
        too_many = fork(api, sid, copies=4)
        assert too_many.status_code == 422 and too_many.json()["error"]["code"] == "invalid_copies"
        assert "1 to 3" in too_many.json()["error"]["message"]
        assert fork(api, sid, copies=0).status_code == 422
        assert fork(api, "no-such-session").status_code == 404
        # the server's cap: 1 open + 4 copies > 4 sessions; nothing was made
        full = fork(api, sid, copies=3)
        assert full.status_code == 201
        over = fork(api, sid, copies=1)
        assert over.status_code == 429 and over.json()["error"]["code"] == "too_many_sessions"
        assert "retry-after" in over.headers
        assert server.health()["sessions"] == 4
        for c in full.json()["sessions"]:
            api.delete(f"/api/sessions/{c['id']}")
        # a session running a cell cannot be forked meanwhile
        slow: dict[str, object] = {}

        def run_slow() -> None:
            with server.client() as client:
                slow.update(call(client, sid, "import time; time.sleep(2); print(kept)"))

        t = threading.Thread(target=run_slow)
        t.start()
        assert wait_until(lambda: server.health()["running"] >= 1, timeout=60)
        busy = fork(api, sid)
        assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
        t.join(120)
        assert slow["stdout"] == "yes\n"
        # the host is unharmed: the original still answers, a fork works again, runs go on
        ok = fork(api, sid)
        assert ok.status_code == 201
        (copy,) = ok.json()["sessions"]
        assert call(api, copy["id"], "print(kept)")["stdout"] == "yes\n"
        assert api.post("/api/run", json={"code": "print(2 + 2)"}).json()["stdout"] == "4\n"
        assert server.health()["status"] == "ok"


def test_fork_is_held_to_the_keys_session_cap(warm_sandbox: None, tmp_path: Path) -> None:
    config = make_config(tmp_path, session_pause_seconds=0)  # alice: max_concurrent 8; never paused
    with live_server(config) as server, server.client() as api:
        sid = open_session(api)
        r = fork(api, sid, copies=8)
        assert r.status_code == 429 and r.json()["error"]["code"] == "too_many_sessions"
        assert "needs 8 more" in r.json()["error"]["message"]
        assert server.health()["sessions"] == 1
        r = fork(api, sid, copies=7)
        assert r.status_code == 201 and len(r.json()["sessions"]) == 7
        assert api.post("/api/sessions", json={}).status_code == 429
        assert call(api, sid, "print('still')")["stdout"] == "still\n"


def test_a_downloaded_snapshot_resumes_as_a_new_session(api: httpx.Client, server: LiveServer) -> None:
    sid = open_session(api)
    call(api, sid, "import random\nrandom.seed(3)\nscore = {'ada': 41}\nmarker = 'in-memory-marker/' * 8\n"
                   "open('/scratch/notes.txt', 'w').write('in-file-marker/' * 8)")  # fmt: skip
    r = api.get(f"/api/sessions/{sid}/snapshot")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["cache-control"] == "no-store"
    blob = r.content
    # encrypted at rest: neither a variable's value nor a file's content can be read in it
    assert b"in-memory-marker/in-memory-marker/" not in blob and b"in-file-marker/in-file" not in blob
    expected = call(api, sid, "score['ada'] += 1\nprint(score, random.random(), open('/scratch/notes.txt').read())")
    assert api.delete(f"/api/sessions/{sid}").status_code == 204
    resumed = api.post("/api/sessions/resume", content=blob, headers=OCTETS)
    assert resumed.status_code == 201, resumed.text
    new = resumed.json()["id"]
    assert new != sid and resumed.json()["alive"] is True and resumed.json()["profile"] == "student"
    got = call(api, new, "score['ada'] += 1\nprint(score, random.random(), open('/scratch/notes.txt').read())")
    assert got["stdout"] == expected["stdout"] and "{'ada': 42}" in got["stdout"]
    # the same snapshot resumes again, independently
    again = api.post("/api/sessions/resume", content=blob, headers=OCTETS).json()["id"]
    assert call(api, again, "print(score)")["stdout"] == "{'ada': 41}\n"
    events = {e["event"] for e in audit_lines_for(server, {sid, new, again})}
    assert {"session_snapshot", "session_resumed"} <= events
    for s in (new, again):
        api.delete(f"/api/sessions/{s}")


def audit_lines_for(server: LiveServer, sessions: set[str]) -> list[dict[str, str]]:
    path = server.config.audit_log
    assert path is not None
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    return [e for e in lines if "event" in e and e.get("session") in sessions]


def _flip(blob: bytes, at: int) -> bytes:
    return blob[:at] + bytes([blob[at] ^ 0x01]) + blob[at + 1:]


def test_foreign_tampered_other_version_and_junk_snapshots_are_refused(
    api: httpx.Client, server: LiveServer
) -> None:
    sid = open_session(api)
    call(api, sid, "secret = 'alice only'")
    blob = api.get(f"/api/sessions/{sid}/snapshot").content
    api.delete(f"/api/sessions/{sid}")

    def refusal(client: httpx.Client, content: bytes, **kw: object) -> tuple[int, str, str]:
        r = client.post("/api/sessions/resume", content=content, headers=OCTETS, **kw)  # type: ignore[arg-type]
        error = r.json()["error"]
        reason = (error.get("details") or [{}])[0].get("reason", "")
        return r.status_code, error["code"], reason + ": " + error["message"]

    status, code, why = refusal(api, _flip(blob, len(blob) // 2))
    assert (status, code) == (422, "snapshot_refused") and why.startswith("tampered:"), why
    status, code, why = refusal(api, _flip(blob, len(blob) - 1))
    assert (status, code) == (422, "snapshot_refused") and why.startswith("tampered:"), why
    with server.client(OTHER_KEY) as bob:
        status, code, why = refusal(bob, blob)
        assert (status, code) == (403, "snapshot_refused") and why.startswith("foreign:"), why
        assert "another key" in why
    status, code, why = refusal(api, blob[:8] + struct.pack("<H", 1) + blob[10:])
    assert (status, code) == (422, "snapshot_refused") and why.startswith("version:"), why
    assert "version 1" in why
    status, code, why = refusal(api, b"GIF89a not a snapshot at all" * 4)
    assert (status, code) == (422, "snapshot_refused") and why.startswith("format:"), why
    status, code, why = refusal(api, blob[:8] + struct.pack("<H", 2) + blob[10:])
    assert (status, code) == (422, "snapshot_refused") and why.startswith("version:"), why
    assert "version 2" in why and "save the session again" in why
    # the profile it records cannot be changed: the header is authenticated
    at = blob.index(b"student")
    status, code, why = refusal(api, blob[:at] + b"analyst" + blob[at + 7:])
    assert (status, code) == (422, "snapshot_refused") and why.startswith("tampered:"), why
    wrong_type = api.post("/api/sessions/resume", content=blob, headers={"Content-Type": "text/plain"})
    assert wrong_type.status_code == 415
    refused = audit_events(server, "snapshot_refused")
    assert {"tampered", "foreign", "version", "format"} <= {e["reason"] for e in refused}
    # the host is unharmed: the genuine snapshot still resumes for its key, runs go on
    ok = api.post("/api/sessions/resume", content=blob, headers=OCTETS)
    assert ok.status_code == 201, ok.text
    assert call(api, ok.json()["id"], "print(secret)")["stdout"] == "alice only\n"
    api.delete(f"/api/sessions/{ok.json()['id']}")
    assert api.post("/api/run", json={"code": "print(6 * 7)"}).json()["stdout"] == "42\n"


def test_a_snapshot_resumes_under_the_profile_it_records(api: httpx.Client) -> None:
    """No ?profile= needed: the snapshot's authenticated header says its profile; naming it is
    accepted, naming another is a clear 422, an unknown one is refused before the body is read."""
    r = api.post("/api/sessions", json={"profile": "quick"})
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    call(api, sid, "word = 'quick one'")
    blob = api.get(f"/api/sessions/{sid}/snapshot").content
    api.delete(f"/api/sessions/{sid}")
    made = []
    for params in ({}, {"profile": "quick"}):
        r = api.post("/api/sessions/resume", content=blob, headers=OCTETS, params=params)
        assert r.status_code == 201, r.text
        assert r.json()["profile"] == "quick" and r.json()["limits"]["cpu_seconds"] == 1
        made.append(r.json()["id"])
    assert call(api, made[0], "print(word)")["stdout"] == "quick one\n"
    r = api.post("/api/sessions/resume", content=blob, headers=OCTETS, params={"profile": "student"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "profile_mismatch"
    assert "'quick'" in r.json()["error"]["message"] and "'student'" in r.json()["error"]["message"]
    r = api.post("/api/sessions/resume", content=blob, headers=OCTETS, params={"profile": "nope"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "unknown_profile"
    for s in made:
        assert api.delete(f"/api/sessions/{s}").status_code == 204


def test_an_oversized_snapshot_is_refused_unread(warm_sandbox: None, tmp_path: Path) -> None:
    config = make_config(tmp_path, max_snapshot_bytes=1 << 20)
    with live_server(config) as server, server.client() as api:
        sid = open_session(api)
        assert call(api, sid, "import random\nnoise = random.randbytes(2 << 20)")["status"] == "ok"  # does not compress
        real = api.get(f"/api/sessions/{sid}/snapshot").content
        assert len(real) > 1 << 20  # a real session's snapshot, over this server's bound
        r = api.post("/api/sessions/resume", content=real, headers=OCTETS)
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"
        big = api.post("/api/sessions/resume", content=b"\0" * ((1 << 20) + 1), headers=OCTETS)
        assert big.status_code == 413 and big.json()["error"]["code"] == "body_too_large"
        assert str(1 << 20) in big.json()["error"]["message"]

        # no Content-Length (chunked): bounded as it arrives; the server answers 413 or, still
        # being sent to, cuts the upload; it never takes the bytes
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(f"POST /api/sessions/resume HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         f"Authorization: Bearer {KEY}\r\nContent-Type: application/octet-stream\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n".encode())  # fmt: skip
            piece = b"10000\r\n" + b"\0" * (64 << 10) + b"\r\n"
            try:
                for _ in range(64):  # 4 MiB
                    sock.sendall(piece)
            except OSError:
                pass  # the server stopped reading: refused while it came
            got = read_status(sock)
        assert got in ("413", "reset", "closed"), got
        # other routes keep their own bound, and the server answers
        assert api.post("/api/run", json={"code": "print('fine')"}).json()["stdout"] == "fine\n"
        assert call(api, sid, "print('session fine')")["stdout"] == "session fine\n"
        assert server.health()["status"] == "ok"


def test_one_snapshot_upload_at_a_time_per_key(api: httpx.Client, server: LiveServer) -> None:
    """While a key's snapshot is still arriving, its next upload is refused at once (429), so a
    key holds one snapshot body in the server's memory; another key is not held back, and the
    place comes back when the first upload ends."""
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as slow:
        slow.sendall(f"POST /api/sessions/resume HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     f"Authorization: Bearer {KEY}\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: 100000\r\n\r\n".encode() + b"\0" * 1000)  # fmt: skip

        def second() -> httpx.Response:
            return api.post("/api/sessions/resume", content=b"x" * 100, headers=OCTETS)

        assert wait_until(lambda: second().status_code == 429, timeout=60)
        r = second()
        assert r.json()["error"]["code"] == "too_many_uploads" and "retry-after" in r.headers
        with server.client(OTHER_KEY) as bob:  # not held back by alice's upload
            other = bob.post("/api/sessions/resume", content=b"x" * 100, headers=OCTETS)
            assert other.status_code == 422 and other.json()["error"]["code"] == "snapshot_refused"
    # the slow client left mid-body: the place comes back
    assert wait_until(lambda: second().status_code == 422, timeout=60)
    assert server.health()["status"] == "ok"
