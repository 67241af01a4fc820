"""The browser tier's network endpoints over real HTTP (``POST /api/network/runs`` and
``/api/network/fetch``): a grant only for a key a rule names (the others get the sentence, a
caller without a key a 401), the grant's token the only credential of a request (none, a made-up
one or a malformed body refused with a sentence the guest can raise, readable by the frame's
opaque origin), the grant's caps counted per run; grants expire and are bounded in number."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.live_server import KEY, OTHER_KEY, LiveServer, live_server
from tests.support.loopback_api import LoopbackAPI, loopback_api
from tests.support.network_server import RULE, api_rule, network_config
from tests.support.redis_process import RedisProcess, free_port
from wasm_runner.network import BrowserRuns, NetworkRecord, NetworkRefused, RunNetwork, network_from
from wasm_runner.network.budget import SharedBudget
from wasm_runner.scaleout.state import SharedState, SharedStateUnavailable


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


def test_a_class_behind_one_address_fetches_at_once(server: LiveServer, api: LoopbackAPI) -> None:
    """Twelve students' browser runs (one grant each) behind one address request at once: each is
    answered (the bodies of these requests are counted per address apart from the key's)."""
    from concurrent.futures import ThreadPoolExecutor

    with server.client(KEY) as client:
        tokens = [client.post("/api/network/runs", json={}).json()["token"] for _ in range(12)]

    def fetch(token: str) -> int:
        body = json.dumps({"token": token, "request": _request(api.url("/data.json?class"))})
        answer = httpx.post(server.url + "/api/network/fetch", content=body, timeout=60, trust_env=False,
                            headers={"content-type": "text/plain"})
        return int(answer.json()["value"]["status"]) if answer.status_code == 200 else answer.status_code

    with ThreadPoolExecutor(12) as pool:
        assert list(pool.map(fetch, tokens)) == [200] * 12


def test_a_request_body_is_bounded_before_it_is_parsed(server: LiveServer, api: LoopbackAPI) -> None:
    """Many elements or a deep nesting in a network request's body are refused (413, readable by
    the frame) before parsing builds anything; the server goes on answering."""
    with server.client(KEY) as client:
        token = client.post("/api/network/runs", json={}).json()["token"]
    before = len(api.log)
    headers = [["x", "y"]] * 70_000
    wide = json.dumps({"token": token, "request": {**_request(api.url("/data.json")), "headers": headers}})
    deep = json.dumps({"token": token, "request": _request(api.url("/data.json"))})[:-1] + ', "x": ' + \
        "[" * 40 + "]" * 40 + "}"
    for body in (wide, deep):
        answer = httpx.post(server.url + "/api/network/fetch", content=body, timeout=60, trust_env=False,
                            headers={"content-type": "text/plain"})
        assert answer.status_code == 413 and answer.headers["access-control-allow-origin"] == "*"
        assert answer.json()["error"]["type"] == "ConnectionRefusedError"
    assert api.log[before:] == []
    assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200


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


def test_a_grant_lasts_the_wall_limit_from_its_runs_first_request() -> None:
    """The page asks for the grant before the worker loads the run's packages (a first `import
    requests` may take longer than the wall limit): an unused grant waits for them."""
    rules = tuple(network_from({"r": {"destinations": ["https://api.example.org"], "keys": ["*"]}}).values())
    runs = BrowserRuns()

    async def check() -> None:
        token = await runs.open(rules, tenant="t", user=None, client="c", seconds=0.3)
        await asyncio.sleep(0.6)  # loading packages: longer than the wall limit
        assert await runs.get(token) is not None  # the run's first request starts its clock
        assert await runs.get(token) is not None
        await asyncio.sleep(0.6)
        assert await runs.get(token) is None

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
                "too many requests without a valid API key or token from this address; retry in "
                f"{over.headers['retry-after']} s")}}
            assert fetch(token).status_code == 429  # not looked up while the address is over
            assert frame.get("/healthz").status_code == 200
            metrics = frame.get("/metrics").text  # each refusal counted, by reason
        assert f'wasm_runner_rejections_total{{reason="network_grant_unknown"}} {GUESSES}.0' in metrics
        assert 'wasm_runner_rejections_total{reason="too_many_failed_attempts"} 3.0' in metrics
        assert api.paths()[before:] == []


def test_grants_and_their_caps_are_kept_in_redis_for_every_replica(redis_server: RedisProcess,
                                                                     api: LoopbackAPI) -> None:
    """Two replicas' ``BrowserRuns`` on one real Redis: a grant of one is the other's too (kept
    under a hash of its token, never the token), the bytes-in cap is counted once for both (answers of the same size: room for two and a half), and a
    Redis that does not answer refuses the request with a sentence before it is made."""
    before = len(api.log)

    async def fetch(network: RunNetwork, path: str) -> NetworkRecord:
        try:
            await network.fetch("GET", api.url(path), [("X-Pad", "p" * 800)], b"", time.monotonic() + 30)
        except NetworkRefused:
            pass
        return network.records[-1]

    async def check() -> tuple[list[NetworkRecord], str]:
        size = (await fetch(RunNetwork(tuple(network_from({"m": api_rule(api)}).values())), "/headers")).bytes_in
        rules = network_from({RULE: api_rule(api, max_bytes_in=2 * size + size // 2)})
        prefix = f"netgrants-{time.time_ns()}:"
        states = [SharedState(redis_server.url, secret="s" * 32, key_prefix=prefix) for _ in range(2)]
        for shared in states:
            await shared.start()
        try:
            one, two = (BrowserRuns(shared=shared, rules=rules) for shared in states)
            token = await one.open(tuple(rules.values()), tenant="alice", user="u-1", client="127.0.0.1", seconds=30)
            grants = [grant for grant in (await one.get(token), await two.get(token)) if grant is not None]
            assert [(g.run, g.tenant, g.user) for g in grants] == [(grants[0].run, "alice", "u-1")] * 2
            kept = b"".join([k + (await states[0].redis.dump(k) or b"") for k in await states[0].redis.keys(prefix + "*")])
            assert token.encode() not in kept and len(kept) > 0
            assert await two.get(token + "x") is None
            records = [await fetch(grants[i % 2].network, f"/headers?{i}") for i in range(3)]
        finally:
            for shared in states:
                await shared.close()
        dead = SharedState(f"redis://127.0.0.1:{free_port()}", secret="s" * 32, timeout=0.5)
        await dead.start()
        try:
            try:
                await BrowserRuns(shared=dead, rules=rules).get(token)
                raise AssertionError("a grant looked up without Redis")
            except SharedStateUnavailable:
                pass
            refused = await fetch(RunNetwork(tuple(rules.values()), budget=SharedBudget(dead, "r", time.time() + 30)),
                                  "/headers?no-redis")
        finally:
            await dead.close()
        return records, str(refused.message)

    records, no_redis = asyncio.run(check())
    assert [r.outcome for r in records] == ["ok", "ok", "capped"]
    assert records[2].message is not None and records[2].message.endswith(
        "bytes in the network rule 'test-api' allows (max_bytes_in)")
    assert no_redis == ("the runner's shared state (Redis) did not answer, so the run's network caps cannot be "
                        "counted; the request was not made")
    assert api.paths()[before:] == ["/headers", "/headers?0", "/headers?1", "/headers?2"]
