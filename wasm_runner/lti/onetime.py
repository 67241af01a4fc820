"""Single-use, expiring values kept on the server: the OIDC ``state`` and ``nonce`` of a launch
(a launch in an LMS's iframe cannot rely on a cookie: browsers block third-party cookies), and
the best score sent per student and link (kept ``BEST_SECONDS``, about a school year and a half).
In Redis when the server has ``redis_url`` (every replica sees them); otherwise the state in this
process's memory and the best scores in a folder (they outlive a restart)."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from ..scaleout.state import SharedState

__all__ = ["BEST_SECONDS", "MemoryStore", "OneTimeStore", "RedisStore"]

BEST_SECONDS = 550 * 24 * 3600


class OneTimeStore(Protocol):
    async def put(self, key: str, value: dict[str, Any], ttl_seconds: float) -> None:
        """Keep ``value`` under ``key`` for ``ttl_seconds``."""

    async def take(self, key: str) -> dict[str, Any] | None:
        """The value under ``key``, removed (None: never put, taken already, or expired)."""

    async def raise_to(self, key: str, value: float) -> bool:
        """Whether ``value`` is above the highest kept under ``key`` (kept then)."""


class MemoryStore:
    """This process's (one replica); the best scores in ``best_folder`` (one small file each,
    named by a hash of the key) when given, else in memory."""

    def __init__(self, best_folder: Path | None = None) -> None:
        self._values: dict[str, tuple[float, dict[str, Any]]] = {}
        self._highest: dict[str, float] = {}
        self._lock = threading.Lock()
        self._best_folder = best_folder
        if best_folder is not None:
            best_folder.mkdir(parents=True, exist_ok=True, mode=0o700)

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
            if self._best_folder is None:
                if key in self._highest and self._highest[key] >= value:
                    return False
                self._highest[key] = value
                return True
            path = self._best_folder / hashlib.sha256(key.encode()).hexdigest()
            try:
                if float(path.read_text()) >= value:
                    return False
            except (OSError, ValueError):
                pass
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(repr(value))
            os.replace(tmp, path)
            return True


_RAISE = """
local old = redis.call('GET', KEYS[1])
if old and tonumber(old) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 1
"""


class RedisStore:
    """Shared by the replicas (``GETDEL``: a value is taken once, whichever replica asks), through
    the replica's bounded client: Redis down or slow is ``SharedStateUnavailable`` (a 503
    ``shared_state_unavailable``), never a request hanging."""

    def __init__(self, shared: SharedState, prefix: str) -> None:
        self.shared = shared  # the replica's client, once its lifespan started it
        self._prefix = prefix

    async def put(self, key: str, value: dict[str, Any], ttl_seconds: float) -> None:
        op = self.shared.redis.set(self._prefix + key, json.dumps(value), px=max(1, int(ttl_seconds * 1000)))
        await self.shared.call(op, "the LTI launch state")

    async def take(self, key: str) -> dict[str, Any] | None:
        raw = await self.shared.call(self.shared.redis.getdel(self._prefix + key), "the LTI launch state")
        return None if raw is None else cast("dict[str, Any]", json.loads(raw))

    async def raise_to(self, key: str, value: float) -> bool:
        script = self.shared.redis.eval(_RAISE, 1, self._prefix + "best:" + key, repr(value), BEST_SECONDS)
        return bool(await self.shared.call(cast("Awaitable[Any]", script), "the LTI best scores"))
