"""The user inside a key across the internal hop: two real ``wasm-runner serve`` processes on
127.0.0.1 sharing a real redis-server, hit directly (no balancer). A session call that reaches the
replica which does not hold the session is passed on with the user it was for, signed
(``wasm_runner/scaleout/signing.py``), so the owner takes the user's lease, gives host functions
the user and audits it; a downloaded snapshot taken with a user token resumes only for that user,
through either replica (``wasm_runner/sandbox/sealing.py``, version 6)."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.support.app_endpoint import SECRET as APP_SECRET
from tests.support.app_endpoint import AppEndpoint, app_endpoint
from tests.support.live_server import wait_until
from tests.support.redis_process import RedisProcess
from tests.support.replicas import Replica, quick_profiles

from wasm_runner.http.users import sign_user_token
from wasm_runner.scaleout.signing import H_USER, InternalCall, Signer, sign

KEY = "page-hop-key"
TOKENS = "user-token-secret-for-hop-tests-0123456789"
CLUSTER = secrets.token_hex(32)
CODE = "from host import whoami\nprint(whoami(1))"


def config(app: AppEndpoint, secret_file: Path) -> str:
    return f"""
[server]
default_profile = "quick"
max_running = 4
max_sessions = 16
session_pause_seconds = 0

{quick_profiles(15, 64)}

[[api_keys]]
name = "page"
key = "{KEY}"
rate = "10000/minute"
max_concurrent = 8
user_max_concurrent = 1
user_rate = "10000/minute"
user_token_secret = "{TOKENS}"

[functions.whoami]
description = "Who the app was told the caller is."
parameters = {{ type = "object", properties = {{ n = {{ type = "integer" }} }}, required = ["n"] }}
url = "{app.url('/tools/whoami')}"
secret_file = "{secret_file}"
allow = ["127.0.0.1"]
keys = ["page"]
"""


def whoami(call: dict[str, Any], n: int) -> str:
    return f"{call['key']}/{call['user']}"


@pytest.fixture(scope="module")
def pair(
    tmp_path_factory: pytest.TempPathFactory, redis: RedisProcess
) -> Iterator[tuple[Replica, Replica, AppEndpoint]]:
    folder = tmp_path_factory.mktemp("user-replicas")
    secret_file = folder / "whoami.secret"
    secret_file.write_text(APP_SECRET + "\n")
    with app_endpoint({"whoami": whoami}) as app:
        (folder / "cluster.toml").write_text(config(app, secret_file))
        a = Replica(folder / "cluster.toml", redis, folder, secret=CLUSTER, name="a", advertise=True)
        b = Replica(folder / "cluster.toml", redis, folder, secret=CLUSTER, name="b", advertise=True)
        try:
            a.wait_ready(), b.wait_ready()
            yield a, b, app
        finally:
            a.stop()
            b.stop()


def as_user(user: str | None = None, token: str | None = None) -> dict[str, str]:
    headers = {}
    if user is not None:
        headers["X-Wasm-Runner-User"] = user
    if token is not None:
        headers["X-Wasm-Runner-User-Token"] = token
    return headers


def open_session(replica: Replica, headers: dict[str, str]) -> str:
    with replica.client(KEY) as api:
        r = api.post("/api/sessions", json={}, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def cell(replica: Replica, sid: str, code: str, headers: dict[str, str], **extra: object) -> httpx.Response:
    with replica.client(KEY) as api:
        return api.post(f"/api/sessions/{sid}/run", json={"code": code, **extra}, headers=headers)


def audit_runs(replica: Replica, sid: str) -> list[dict[str, Any]]:
    if not replica.audit.exists():
        return []
    lines = [json.loads(line) for line in replica.audit.read_text().splitlines() if line]
    return [e for e in lines if e.get("session") == sid and "status" in e]


# -- the signature carries the user ---------------------------------------------------------


def test_the_signed_hop_carries_the_user_and_it_cannot_be_changed() -> None:
    signer, other = Signer(CLUSTER), Signer(CLUSTER)
    body = b'{"code": "1"}'
    target = "/api/sessions/abc/run"
    headers = signer.headers(method="POST", target=target, tenant="page", client="127.0.0.1",
                             replica="r", body=body, user="student/7", user_token=True)  # fmt: skip
    assert other.check("POST", target, dict(headers), body) == InternalCall(
        tenant="page", client="127.0.0.1", user="student/7", user_token=True
    )
    for changed in ("id:student%2F7", "token:student-8", ""):  # another user, or none, or plain
        forged = dict(signer.headers(method="POST", target=target, tenant="page", client="127.0.0.1",
                                     replica="r", body=body, user="student/7", user_token=True))  # fmt: skip
        forged[H_USER] = changed
        assert other.check("POST", target, forged, body) == "bad signature"
    dropped = dict(signer.headers(method="POST", target=target, tenant="page", client="127.0.0.1",
                                  replica="r", body=body, user="student/7", user_token=True))  # fmt: skip
    del dropped[H_USER]
    assert other.check("POST", target, dropped, body) == "bad signature"
    # a replica of the version before (no user header, the version-1 message): no user, as before
    fields = {"tenant": "page", "client": "127.0.0.1", "replica": "r", "timestamp": f"{time.time():.3f}",
              "nonce": secrets.token_urlsafe(12)}  # fmt: skip
    mac = sign(CLUSTER, method="POST", target=target, body=body, **fields)
    old = {f"x-wasm-runner-internal-{'time' if k == 'timestamp' else k}": v for k, v in fields.items()}
    old["x-wasm-runner-internal-mac"] = mac
    assert other.check("POST", target, old, body) == InternalCall(tenant="page", client="127.0.0.1")


# -- the owner runs the call for the user ---------------------------------------------------


def test_a_cell_through_the_other_replica_runs_for_its_user(
    pair: tuple[Replica, Replica, AppEndpoint],
) -> None:
    """The owner (A) of a session runs a cell B passed on for the user B identified: the host
    function's endpoint is told the user, and A's audit line names the same user as for a cell
    sent to A directly."""
    a, b, app = pair
    me = as_user("student-7")
    sid = open_session(a, me)
    direct = cell(a, sid, "x = 1", me)
    assert direct.status_code == 200, direct.text
    relayed = cell(b, sid, CODE, me, functions=["whoami"])
    assert relayed.status_code == 200 and relayed.json()["status"] == "ok", relayed.text
    assert relayed.json()["stdout"] == "page/student-7\n"
    assert json.loads(app.requests[-1]["body"])["user"] == "student-7"
    first, second = audit_runs(a, sid)
    assert first["user"] is not None and second["user"] == first["user"]
    assert "student-7" not in json.dumps(second)  # the user_key, never the id
    assert not audit_runs(b, sid)
    with a.client(KEY) as api:
        api.delete(f"/api/sessions/{sid}", headers=me)


def test_the_users_lease_holds_through_the_other_replica(
    pair: tuple[Replica, Replica, AppEndpoint],
) -> None:
    """``user_max_concurrent = 1``: while the user runs a cell on A, the same user's cell in
    another session of A, sent to B, is refused (429 user_concurrency) on A; another user's runs."""
    a, b, _ = pair
    me = as_user("student-8")
    busy, other = open_session(a, me), open_session(a, me)
    results: list[httpx.Response] = []
    worker = threading.Thread(target=lambda: results.append(cell(a, busy, "import time\ntime.sleep(4)", me)))
    worker.start()
    try:
        assert wait_until(lambda: a.running() == 1, timeout=10)
        refused = cell(b, other, "print('second')", me)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"]["code"] == "user_concurrency"
        them = as_user("student-9")
        theirs = open_session(a, them)
        assert cell(b, theirs, "print('theirs')", them).json()["stdout"] == "theirs\n"
    finally:
        worker.join(30)
    assert results and results[0].status_code == 200
    assert cell(b, other, "print('now')", me).json()["stdout"] == "now\n"


# -- downloaded snapshots: the key's id and, with user tokens, the user ------------------------


def test_a_snapshot_taken_with_a_user_token_resumes_only_for_that_user(
    pair: tuple[Replica, Replica, AppEndpoint],
) -> None:
    a, b, _ = pair
    mine = as_user(token=sign_user_token(TOKENS, "page", "student-1", ttl_seconds=600))
    sid = open_session(a, mine)
    assert cell(a, sid, "secret_answer = 42", mine).status_code == 200
    with b.client(KEY) as via_b:  # the snapshot is made by A, for the user B passed on
        snap = via_b.get(f"/api/sessions/{sid}/snapshot", headers=mine)
    assert snap.status_code == 200, snap.text
    octets = {"Content-Type": "application/octet-stream"}
    classmate = as_user(token=sign_user_token(TOKENS, "page", "student-2", ttl_seconds=600))
    for replica in (a, b):
        for someone in (classmate, as_user("student-1"), {}):  # another user; a plain id; no user
            with replica.client(KEY) as api:
                r = api.post("/api/sessions/resume", content=snap.content, headers={**octets, **someone})
            assert r.status_code == 403, r.text
            assert r.json()["error"]["details"] == [{"reason": "user"}]
            assert "another user of this key" in r.json()["error"]["message"]
    with b.client(KEY) as api:
        resumed = api.post("/api/sessions/resume", content=snap.content, headers={**octets, **mine})
    assert resumed.status_code == 201, resumed.text
    assert cell(a, resumed.json()["id"], "print(secret_answer)", mine).json()["stdout"] == "42\n"
