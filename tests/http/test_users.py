"""Fairness inside one key: per-user caps (runs in flight, rate) inside the key's, user ids from
the platform's server or signed tokens for browser pages, the id never stored raw. Real server,
real wasmtime, no mocks."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest
from tests.support.live_server import live_server, make_config, wait_until
from tests.support.http_clients import open_ws, receive, until

from wasm_runner.settings import ApiKey, hash_key
from wasm_runner.http.users import sign_user_token

CLASS_KEY = "class-key"
PAGE_KEY = "page-key"
SECRET = "user-token-secret-for-tests-0123456789abcdef"
SLEEP = "import time\ntime.sleep(2)\nprint('slept')"


def headers(key: str, user: str | None = None, token: str | None = None) -> dict[str, str]:
    h = {"Authorization": f"Bearer {key}"}
    if user is not None:
        h["X-Wasm-Runner-User"] = user
    if token is not None:
        h["X-Wasm-Runner-User-Token"] = token
    return h


@pytest.fixture(scope="module")
def users_server(warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("users")
    keys = (
        ApiKey("class", hash_key(CLASS_KEY), rate="10000/minute", max_concurrent=8,
               user_rate="4/minute", user_max_concurrent=1),
        ApiKey("page", hash_key(PAGE_KEY), rate="10000/minute", max_concurrent=8,
               user_token_secret=SECRET, user_token_required=True),
    )  # fmt: skip
    with live_server(make_config(tmp, api_keys=keys, max_running=2)) as server:
        yield server, tmp / "audit.jsonl"


def post(server, key: str, code: str, **kw: str | None) -> httpx.Response:  # type: ignore[no-untyped-def]
    return httpx.post(server.url + "/api/run", json={"code": code}, headers=headers(key, **kw), timeout=120)


def test_per_user_caps_hold_inside_a_key_and_spare_the_other_users(users_server) -> None:  # type: ignore[no-untyped-def]
    server, audit = users_server
    slow: list[httpx.Response] = []
    t = threading.Thread(target=lambda: slow.append(post(server, CLASS_KEY, SLEEP, user="ada")))
    t.start()
    assert wait_until(lambda: server.health()["running"] == 1)
    # ada has her one run in flight: her second is refused, and says why
    refused = post(server, CLASS_KEY, "print(1)", user="ada")
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == "user_concurrency" and "this user" in error["message"]
    assert int(refused.headers["Retry-After"]) >= 1
    # a classmate on the same key is not held back
    other = post(server, CLASS_KEY, "print('bea')", user="bea")
    assert other.status_code == 200 and other.json()["stdout"] == "bea\n"
    t.join(60)
    assert slow[0].json()["stdout"] == "slept\n"
    # the user's rate (4/minute; ada spent 2): two more, then 429 for her only
    assert post(server, CLASS_KEY, "print(3)", user="ada").status_code == 200
    assert post(server, CLASS_KEY, "print(4)", user="ada").status_code == 200
    over = post(server, CLASS_KEY, "print(5)", user="ada")
    assert over.status_code == 429 and over.json()["error"]["code"] == "user_rate_limited"
    assert post(server, CLASS_KEY, "print(6)", user="cy").json()["stdout"] == "6\n"
    # without a user id nothing changes: the key's own caps, which ada's refusals did not spend
    assert post(server, CLASS_KEY, "print(7)").json()["stdout"] == "7\n"
    assert post(server, CLASS_KEY, "print(8)", user="no spaces allowed").status_code == 422
    # the audit log has each user as a keyed hash, never the id; metrics have no user label
    lines = [json.loads(x) for x in audit.read_text().splitlines() if '"class"' in x]
    hashed = {x["user"] for x in lines}
    assert None in hashed and len(hashed - {None}) == 3  # ada, bea, cy
    assert all(h is None or (len(h) == 24 and h not in ("ada", "bea", "cy")) for h in hashed)
    assert '"ada"' not in audit.read_text() and '"bea"' not in audit.read_text()
    metrics = httpx.get(server.url + "/metrics", timeout=30).text
    assert 'wasm_runner_rejections_total{reason="user_concurrency"}' in metrics
    assert 'wasm_runner_rejections_total{reason="user_rate_limited"}' in metrics
    assert "ada" not in metrics and not any(h and h in metrics for h in hashed)


def test_a_browser_page_needs_a_valid_signed_token(users_server) -> None:  # type: ignore[no-untyped-def]
    server, audit = users_server
    good = sign_user_token(SECRET, "page", "student-17", ttl_seconds=600)
    ok = post(server, PAGE_KEY, "print('ok')", token=good)
    assert ok.status_code == 200 and ok.json()["stdout"] == "ok\n"
    refusals = {
        "no token": post(server, PAGE_KEY, "print(1)"),
        "plain id": post(server, PAGE_KEY, "print(1)", user="student-17"),
        "forged": post(server, PAGE_KEY, "print(1)",
                       token=sign_user_token("another-secret-of-at-least-32-characters", "page", "x")),
        "expired": post(server, PAGE_KEY, "print(1)", token=sign_user_token(SECRET, "page", "x", -5)),
        "too long": post(server, PAGE_KEY, "print(1)",
                         token=sign_user_token(SECRET, "page", "x", 3 * 24 * 3600)),
        "other key": post(server, PAGE_KEY, "print(1)", token=sign_user_token(SECRET, "class", "x")),
        "tampered": post(server, PAGE_KEY, "print(1)",
                         token=good[:10] + ("A" if good[10] != "A" else "B") + good[11:]),
        "garbage": post(server, PAGE_KEY, "print(1)", token="not-a-token"),
    }  # fmt: skip
    for why, r in refusals.items():
        assert r.status_code == 401, (why, r.text)
        code = r.json()["error"]["code"]
        assert code == ("user_token_required" if why in ("no token", "plain id") else "invalid_user_token"), why
    # a key without a secret refuses tokens rather than trusting them
    assert post(server, CLASS_KEY, "print(1)", token=good).json()["error"]["code"] == "invalid_user_token"
    # from the browser: the token in the WebSocket's first message
    with open_ws(server, PAGE_KEY) as ws:
        ws.send(json.dumps({"type": "run", "code": "print(input())", "user_token": good}))
        assert receive(ws)["type"] == "start"
        until(ws, "input_wanted")
        ws.send(json.dumps({"type": "stdin", "data": "hi\n"}))
        _, final = until(ws, "result")
    assert final["result"]["stdout"] == "hi\n"
    with open_ws(server, PAGE_KEY) as ws:
        ws.send(json.dumps({"type": "run", "code": "print(1)", "user_token": good + "x"}))
        msg = receive(ws)
    assert msg["type"] == "error" and msg["error"]["code"] == "invalid_user_token"
    assert "student-17" not in audit.read_text()
    assert server.health()["status"] == "ok"


def test_without_keys_refusals_say_this_client_and_browser_ids_count(
    warm_sandbox: None, tmp_path: Path
) -> None:
    config = make_config(tmp_path, auth=False, api_keys=(), anonymous_max_concurrent=2,
                         anonymous_user_max_concurrent=1)  # fmt: skip
    with live_server(config) as server:

        def run(user: str | None, code: str) -> httpx.Response:
            h = {"X-Wasm-Runner-User": user} if user else {}
            return httpx.post(server.url + "/api/run", json={"code": code}, headers=h, timeout=120)

        slow = [threading.Thread(target=run, args=(u, SLEEP)) for u in ("tab-1", "tab-2")]
        for t in slow:
            t.start()
        assert wait_until(lambda: server.health()["running"] == 2)
        refused = run("tab-1", "print(1)")  # the browser's own cap first
        assert refused.json()["error"]["code"] == "user_concurrency"
        assert "this client" in refused.json()["error"]["message"]
        refused = run("tab-3", "print(1)")  # then the client's
        error = refused.json()["error"]
        assert error["code"] == "tenant_concurrency", error
        assert "this client" in error["message"] and "API key" not in error["message"]
        for t in slow:
            t.join(60)
        time.sleep(0.2)
        assert run("tab-3", "print(3)").json()["stdout"] == "3\n"
