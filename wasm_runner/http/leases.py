"""Per-key counts shared by replicas, as leases in Redis that their owner keeps alive.

A key's runs in flight (``max_concurrent``) and its open sessions are counted in one sorted set
per key and kind, ``wasm-runner:lease:<kind>:<tenant>``, member = lease id (``<replica>:<n>``),
score = when it expires (Redis server time, milliseconds, so replicas' clocks do not matter).
Taking a lease is one Lua script: drop expired members, count the rest, add one if under the
limit, all atomic. The replica that holds leases refreshes them every ``ttl / 3`` seconds; it
releases them when the run or session ends, and all of them when it drains. A replica killed with
``-9`` stops refreshing: its leases drop out of every count within ``ttl`` seconds.

Only counts live here: the global running cap, the queue and the memory budget stay per replica
(``admission.Admission``), because each replica has its own CPU and memory.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, cast

from ..execution import CallerLike

from .errors import ApiError
from .shared import SharedState, SharedStateUnavailable

__all__ = ["Lease", "Leases"]

log = logging.getLogger("wasm_runner.http")

# KEYS[1] the set; ARGV: lease id, limit, ttl ms.  Returns 1 when taken, 0 when at the limit.
_TAKE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[3]))
return 1
"""

# KEYS: sets; ARGV[1] ttl ms, ARGV[2..] the lease id in the matching set. Writes each lease again
# (also one that is missing: a Redis restarted empty learns what this replica holds within one
# refresh; only a replica that stalled past the TTL can put back one that was counted out).
_REFRESH = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ttl = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now + ttl, ARGV[i + 1])
  redis.call('PEXPIRE', key, 2 * ttl)
end
return #KEYS
"""

# KEYS[1] the set. Returns how many unexpired leases it holds.
_COUNT = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""


@dataclass(eq=False)
class Lease:
    """One held lease; ``release`` (sync, idempotent) stops refreshing it at once and removes it
    from Redis in the background (if that fails, it expires within the TTL)."""

    leases: Leases
    key: str
    id: str
    released: bool = field(default=False)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.leases._drop(self)


class Leases:
    """The leases one replica holds, and the task that keeps them alive."""

    def __init__(self, shared: SharedState) -> None:
        self.shared = shared
        self.ttl = shared.lease_ttl
        self._held: dict[str, Lease] = {}
        self._ids = itertools.count(1)
        self._refresher: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def held(self) -> int:
        """How many leases this replica holds now."""
        return len(self._held)

    def set_key(self, kind: str, tenant: str) -> str:
        return self.shared.key("lease", kind, tenant)

    async def take(self, kind: str, tenant: str, limit: int) -> Lease | None:
        """A lease of ``kind`` (``run`` or ``session``) for ``tenant`` if it holds fewer than
        ``limit`` across all replicas, else None; ``SharedStateUnavailable`` when Redis fails."""
        key = self.set_key(kind, tenant)
        lease_id = f"{self.shared.replica_id}:{next(self._ids)}"
        ttl_ms = max(1, int(self.ttl * 1000))
        script = self._eval(_TAKE, [key], lease_id, limit, ttl_ms)
        taken = await self.shared.call(script, "the shared concurrency counts")
        if not taken:
            return None
        lease = Lease(self, key, lease_id)
        self._held[lease_id] = lease
        self._ensure_refresher()
        return lease

    async def claim(
        self, kind: str, tenant: CallerLike, limit: int, retry_after: int = 30
    ) -> Lease:
        """A lease, or ``429`` (``tenant_concurrency`` for runs, ``too_many_sessions`` for
        sessions) when ``tenant`` holds ``limit`` across the replicas: the executor's ``Claims``."""
        lease = await self.take(kind, tenant.name, limit)
        if lease is not None:
            return lease
        if kind == "session":
            code, what = "too_many_sessions", f"{limit} open sessions"
        else:
            code, what = "tenant_concurrency", f"{limit} runs in flight"
        raise ApiError(
            429, code,
            f"this API key already has {what} across the replicas; wait for one to end",
            headers={"Retry-After": str(max(1, retry_after))},
        )  # fmt: skip

    def _eval(self, script: str, keys: list[str], *args: str | int) -> Awaitable[Any]:
        """One Lua script on the replica's client (redis-py types a command as ``Awaitable[T] |
        T``, one stub for its sync and asyncio clients; this one is asyncio)."""
        return cast("Awaitable[Any]", self.shared.redis.eval(script, len(keys), *keys, *args))

    async def count(self, kind: str, tenant: str) -> int:
        """Unexpired leases of ``kind`` for ``tenant`` across all replicas."""
        script = self._eval(_COUNT, [self.set_key(kind, tenant)])
        return int(await self.shared.call(script))

    def _drop(self, lease: Lease) -> None:
        self._held.pop(lease.id, None)
        try:
            task = asyncio.get_running_loop().create_task(self._remove(lease))
        except RuntimeError:  # no loop (shutdown): the lease expires within its TTL
            return
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _remove(self, lease: Lease) -> None:
        try:
            await self.shared.call(self.shared.redis.zrem(lease.key, lease.id))
        except SharedStateUnavailable:
            pass  # not refreshed any more: gone within the TTL

    def _ensure_refresher(self) -> None:
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_forever())

    async def _refresh_forever(self) -> None:
        while self._held:
            await asyncio.sleep(self.ttl / 3)
            await self.refresh()

    async def refresh(self) -> None:
        """Extend every lease this replica holds by one TTL (one script call)."""
        held = list(self._held.values())
        if not held:
            return
        ttl_ms = max(1, int(self.ttl * 1000))
        keys = [lease.key for lease in held]
        ids = [lease.id for lease in held]
        script = self._eval(_REFRESH, keys, ttl_ms, *ids)
        try:
            await self.shared.call(script)
        except SharedStateUnavailable:
            log.warning("could not refresh %d leases: Redis is unavailable", len(held))
            return
        for lease in held:  # released while the refresh was on its way: remove it (again)
            if lease.released:
                self._drop(lease)

    async def release_all(self) -> None:
        """Release every lease this replica holds and wait (bounded) for Redis to drop them."""
        for lease in list(self._held.values()):
            lease.release()
        if self._refresher is not None:
            self._refresher.cancel()
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=self.shared.timeout * 2)
