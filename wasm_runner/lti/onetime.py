"""Single-use, expiring values kept on the server: the OIDC ``state`` and ``nonce`` of a launch
(a launch in an LMS's iframe cannot rely on a cookie: browsers block third-party cookies), and
the best score sent per student and line item. In Redis when the server has ``redis_url`` (every
replica sees them), in this process's memory otherwise."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from redis.asyncio import Redis

__all__ = ["MemoryStore", "OneTimeStore", "RedisStore"]


class OneTimeStore(Protocol):
    async def put(self, key: str, value: dict[str, Any], ttl_seconds: float) -> None:
        """Keep ``value`` under ``key`` for ``ttl_seconds``."""

    async def take(self, key: str) -> dict[str, Any] | None:
        """The value under ``key``, removed (None: never put, taken already, or expired)."""

    async def raise_to(self, key: str, value: float) -> bool:
        """Whether ``value`` is above the highest kept under ``key`` (kept then)."""


class MemoryStore:
    """This process's (one replica)."""

    def __init__(self) -> None:
        self._values: dict[str, tuple[float, dict[str, Any]]] = {}
        self._highest: dict[str, float] = {}
        self._lock = threading.Lock()

    async def put(self, key: str, value: dict[str, Any], ttl_seconds: float) -> None:
        now = time.monotonic()
        with self._lock:
            for k in [k for k, (until, _) in self._values.items() if until <= now]:
                del self._values[k]
            self._values[key] = (now + ttl_seconds, value)

    async def take(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._values.pop(key, None)
        if found is None or found[0] <= time.monotonic():
            return None
        return found[1]

    async def raise_to(self, key: str, value: float) -> bool:
        with self._lock:
            if key in self._highest and self._highest[key] >= value:
                return False
            self._highest[key] = value
            return True


_RAISE = """
local old = redis.call('GET', KEYS[1])
if old and tonumber(old) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""


class RedisStore:
    """Shared by the replicas (``GETDEL``: a value is taken once, whichever replica asks)."""

    def __init__(self, redis: Callable[[], Redis], prefix: str) -> None:
        self._client = redis  # the replica's client, once its lifespan started it
        self._prefix = prefix

    @property
    def _redis(self) -> Redis:
        return self._client()

    async def put(self, key: str, value: dict[str, Any], ttl_seconds: float) -> None:
        await self._redis.set(self._prefix + key, json.dumps(value), px=max(1, int(ttl_seconds * 1000)))

    async def take(self, key: str) -> dict[str, Any] | None:
        raw = await self._redis.getdel(self._prefix + key)
        return None if raw is None else cast("dict[str, Any]", json.loads(raw))

    async def raise_to(self, key: str, value: float) -> bool:
        script = cast("Any", self._redis.eval(_RAISE, 1, self._prefix + "best:" + key, repr(value)))
        return bool(await script)
