"""The browser tier's network endpoints over real HTTP (``POST /api/network/runs`` and
``/api/network/fetch``): a grant only for a key a rule names (the others get the sentence, a
caller without a key a 401), the grant's token the only credential of a request (none, a made-up
one or a malformed body refused with a sentence the guest can raise, readable by the frame's
opaque origin), the grant's caps counted per run; grants expire and are bounded in number."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import KEY, OTHER_KEY, LiveServer, live_server
from tests.support.loopback_api import LoopbackAPI, loopback_api
from tests.support.network_server import network_config
from wasm_runner.network import BrowserRuns, network_from


@pytest.fixture(scope="module")
def api() -> Iterator[LoopbackAPI]:
    with loopback_api() as server:
        yield server


@pytest.fixture(scope="module")
def server(api: LoopbackAPI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(network_config(tmp_path_factory.mktemp("grants"), api, max_requests=1)) as live:
        yield live


def _request(url: str) -> dict[str, object]:
    return {"op": "net", "method": "GET", "url": url, "headers": [], "body": ""}


def test_only_a_key_a_rule_names_gets_a_grant(server: LiveServer) -> None:
    with server.client(OTHER_KEY) as client:
        assert client.post("/api/network/runs", json={}).json() == {
            "on": False, "refusal": "network access is off for this run: no [network] rule of the server names "
                                    "the key 'bob' and profile 'student'"}
    with server.client(None) as client:
        assert client.post("/api/network/runs", json={}).status_code == 401
    with server.client(KEY) as client:
        grant = client.post("/api/network/runs", json={}).json()
        assert grant["on"] is True and len(grant["token"]) >= 40 and grant["seconds"] > 0


def test_the_token_is_the_only_credential_and_caps_count_per_grant(server: LiveServer, api: LoopbackAPI) -> None:
    before = len(api.log)
    with server.client(KEY) as client:
        token = client.post("/api/network/runs", json={}).json()["token"]
        other = client.post("/api/network/runs", json={}).json()["token"]
    with server.client(None) as frame:  # the worker: no key, an opaque origin, text/plain
        def fetch(body: str) -> tuple[int, dict[str, object], str | None]:
            answer = frame.post("/api/network/fetch", content=body, headers={"content-type": "text/plain;charset=UTF-8",
                                                                              "origin": "null"})
            return answer.status_code, answer.json(), answer.headers.get("access-control-allow-origin")

        status, body, cors = fetch(json.dumps({"token": token, "request": _request(api.url("/data.json"))}))
        assert (status, cors) == (200, "*") and body["value"]["status"] == 200  # type: ignore[index]
        status, body, _ = fetch(json.dumps({"token": token, "request": _request(api.url("/data.json?2"))}))
        assert body == {"error": {"type": "ConnectionRefusedError", "message": "this run has made the 1 requests "
                                  "the network rule 'test-api' allows (max_requests)"}}
        status, body, _ = fetch(json.dumps({"token": other, "request": _request(api.url("/data.json?other"))}))
        assert body["value"]["status"] == 200  # type: ignore[index]  # another run: its own caps
        status, body, cors = fetch(json.dumps({"token": "made-up", "request": _request(api.url("/data.json?x"))}))
        assert (status, cors) == (403, "*")
        assert "network grant is unknown or has expired" in body["error"]["message"]  # type: ignore[index]
        status, body, _ = fetch("not json")
        assert status == 400 and body["error"]["type"] == "ConnectionRefusedError"  # type: ignore[index]
    assert api.paths()[before:] == ["/data.json", "/data.json?other"]
    with server.client(KEY) as client:
        assert client.post("/api/run", json={"code": "print('still answering')"}).json()["stdout"] == \
            "still answering\n"


def test_grants_expire_and_are_bounded() -> None:
    rules = tuple(network_from({"r": {"destinations": ["https://api.example.org"], "keys": ["*"]}}).values())
    runs = BrowserRuns(max_open=2)

    async def check() -> None:
        expired = await runs.open(rules, tenant="t", user=None, client="c", seconds=0)
        assert await runs.get(expired) is None
        first, second, third = [await runs.open(rules, tenant="t", user=None, client="c", seconds=60)
                                for _ in range(3)]
        assert await runs.get(first) is None
        assert await runs.get(second) is not None and await runs.get(third) is not None
        assert len(runs) == 2

    asyncio.run(check())


def test_a_redirect_comes_back_to_the_guest_and_its_target_is_checked_again(server: LiveServer,
                                                                          api: LoopbackAPI) -> None:
    api.redirect_to["/jump"] = "http://169.254.169.254/latest/meta-data/"
    before = len(api.log)
    with server.client(KEY) as client:
        token = client.post("/api/network/runs", json={}).json()["token"]
    with server.client(None) as frame:
        def fetch(url: str) -> dict[str, object]:
            body = json.dumps({"token": token, "request": _request(url)})
            return frame.post("/api/network/fetch", content=body,  # type: ignore[no-any-return]
                              headers={"content-type": "text/plain"}).json()

        jumped = fetch(api.url("/jump"))["value"]
        assert jumped["status"] == 302  # type: ignore[index]
        assert ["Location", "http://169.254.169.254/latest/meta-data/"] in jumped["headers"]  # type: ignore[index]
        assert fetch("http://169.254.169.254/latest/meta-data/") == {"error": {
            "type": "ConnectionRefusedError", "message": "http://169.254.169.254:80 is not a destination of this "
            f"run's network rules ('test-api'); the operator allows: http://127.0.0.1:{api.port}"}}
    assert api.paths()[before:] == ["/jump"]


GUESSES = 4  # failed_auth_rate of the guessing test's server, per minute


def test_guessing_grant_tokens_is_a_failed_attempt_of_the_address(api: LoopbackAPI, tmp_path: Path) -> None:
    """Unknown tokens count in the window wrong keys count in (``failed_auth_rate``): past it the
    address gets 429 with Retry-After, a sentence the guest can raise, and its tokens are not
    even looked up (a real grant neither); the server still answers."""
    before = len(api.log)
    with live_server(network_config(tmp_path, api, {"failed_auth_rate": f"{GUESSES}/minute"})) as live:
        with live.client(KEY) as client:
            token = client.post("/api/network/runs", json={}).json()["token"]
        with live.client(None) as frame:
            def fetch(token: str) -> httpx.Response:
                return frame.post("/api/network/fetch", content=json.dumps(
                    {"token": token, "request": _request(api.url("/data.json"))}), headers={"content-type": "text/plain"})

            answers = [fetch(f"guess-{i}") for i in range(GUESSES + 2)]
            assert [a.status_code for a in answers] == [403] * GUESSES + [429] * 2
            over = answers[-1]
            assert int(over.headers["retry-after"]) >= 1 and over.headers["access-control-allow-origin"] == "*"
            assert over.json() == {"error": {"type": "ConnectionRefusedError", "message": (
                "too many requests without a valid API key from this address; retry in "
                f"{over.headers['retry-after']} s")}}
            assert fetch(token).status_code == 429  # not looked up while the address is over
            assert frame.get("/healthz").status_code == 200
        assert api.paths()[before:] == []
