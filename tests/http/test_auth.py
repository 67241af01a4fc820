"""API keys (hashed, constant-time compare) and per-key rate limits."""

from __future__ import annotations

import pytest

from wasm_runner.http.auth import Gatekeeper
from wasm_runner.settings import ApiKey, ServerConfig, hash_key
from wasm_runner.http.errors import ApiError


def gatekeeper(**kw: object) -> Gatekeeper:
    keys = (ApiKey("alice", hash_key("k-alice"), rate="2/minute"), ApiKey("bob", hash_key("k-bob")))
    return Gatekeeper.from_config(ServerConfig.from_keys(api_keys=keys, **kw))


def test_keys_by_bearer_or_header() -> None:
    g = gatekeeper()
    assert g.authenticate({"authorization": "Bearer k-alice"}, {}, "x").name == "alice"
    assert g.authenticate({"x-api-key": "k-bob"}, {}, "x").name == "bob"


@pytest.mark.parametrize(
    "headers", [{}, {"authorization": "Bearer nope"}, {"authorization": "Basic k-alice"}]
)
def test_missing_or_wrong_key_is_401(headers: dict[str, str]) -> None:
    with pytest.raises(ApiError) as info:
        gatekeeper().authenticate(headers, {}, "x")
    assert info.value.status == 401 and "WWW-Authenticate" in info.value.headers


def test_query_key_only_where_allowed() -> None:
    g = gatekeeper()
    with pytest.raises(ApiError):
        g.authenticate({}, {"api_key": "k-bob"}, "x")
    assert g.authenticate({}, {"api_key": "k-bob"}, "x", allow_query=True).name == "bob"


def test_rate_limit_per_key_with_retry_after() -> None:
    g = gatekeeper()
    alice = g.authenticate({"x-api-key": "k-alice"}, {}, "x")
    bob = g.authenticate({"x-api-key": "k-bob"}, {}, "x")
    g.hit(alice)
    g.hit(alice)
    with pytest.raises(ApiError) as info:
        g.hit(alice)
    assert info.value.status == 429 and int(info.value.headers["Retry-After"]) >= 1
    g.hit(bob)  # another key is not affected


def test_auth_off_makes_per_address_tenants() -> None:
    g = Gatekeeper.from_config(ServerConfig(auth=False))
    a = g.authenticate({}, {}, "127.0.0.1")
    assert a.name == "anonymous:127.0.0.1" and a.may_use("analyst")


def test_auth_on_without_keys_refuses_everyone() -> None:
    g = Gatekeeper.from_config(ServerConfig(auth=True))
    with pytest.raises(ApiError, match="none are configured"):
        g.authenticate({"x-api-key": "anything"}, {}, "x")
