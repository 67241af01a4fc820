"""Who is calling, and may they call now: API keys and per-key rate limits.

A key arrives as ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``. Browsers cannot set
headers on WebSockets: there the key may come in the first message (``api_key``) or, less
privately (it lands in access logs), in the ``api_key`` query parameter. Keys are compared by
their sha256 digest in constant time. With auth off (local use only) every caller is the tenant
``anonymous:<client address>``. Rate limits use the ``limits`` library (moving window, in memory).
"""

from __future__ import annotations

import hmac
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from limits import RateLimitItem, parse
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from .config import ApiKey, ServerConfig, hash_key
from .errors import ApiError

__all__ = ["Tenant", "Gatekeeper"]


@dataclass(frozen=True)
class Tenant:
    """The caller: a display name (never the key), its profiles, its caps."""

    name: str
    profiles: tuple[str, ...]
    rate: str
    max_concurrent: int

    def may_use(self, profile: str) -> bool:
        return not self.profiles or profile in self.profiles


def _bearer(headers: Mapping[str, str], query: Mapping[str, str], allow_query: bool) -> str | None:
    auth = headers.get("authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if headers.get("x-api-key"):
        return headers["x-api-key"].strip()
    if allow_query and query.get("api_key"):
        return query["api_key"]
    return None


class Gatekeeper:
    """Authenticates callers and applies their rate limit."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._keys: tuple[ApiKey, ...] = config.api_keys
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._rates: dict[str, RateLimitItem] = {}

    def authenticate(
        self,
        headers: Mapping[str, str],
        query: Mapping[str, str],
        client: str,
        *,
        allow_query: bool = False,
        key: str | None = None,
    ) -> Tenant:
        """The tenant behind ``key`` (if given) or these headers, or ``ApiError(401)``."""
        if not self.config.auth:
            return Tenant(
                name=f"anonymous:{client}",
                profiles=(),
                rate=self.config.anonymous_rate,
                max_concurrent=self.config.anonymous_max_concurrent,
            )
        challenge = {"WWW-Authenticate": 'Bearer realm="wasm-runner"'}
        if not self._keys:
            raise ApiError(
                401, "unauthorized",
                "this server requires API keys but none are configured; see the README (serving)",
                headers=challenge,
            )  # fmt: skip
        key = key or _bearer(headers, query, allow_query)
        if not key:
            raise ApiError(
                401, "unauthorized",
                "an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'",
                headers=challenge,
            )  # fmt: skip
        digest = hash_key(key)
        match = None
        for candidate in self._keys:  # check them all: time does not depend on which matched
            if hmac.compare_digest(candidate.key_sha256, digest):
                match = candidate
        if match is None:
            raise ApiError(401, "unauthorized", "the API key is not valid", headers=challenge)
        return Tenant(match.name, match.profiles, match.rate, match.max_concurrent)

    def hit(self, tenant: Tenant) -> None:
        """Count one request against the rate; ``ApiError(429)`` with Retry-After when over."""
        item = self._rates.get(tenant.rate)
        if item is None:
            item = self._rates[tenant.rate] = parse(tenant.rate)
        if self._limiter.hit(item, tenant.name):
            return
        reset_at, _remaining = self._limiter.get_window_stats(item, tenant.name)
        retry = max(1, math.ceil(reset_at - time.time()))
        raise ApiError(
            429, "rate_limited",
            f"rate limit of {tenant.rate} for this API key reached; retry in {retry} s",
            headers={"Retry-After": str(retry)},
        )  # fmt: skip
