"""Per-key counts shared by replicas, as leases in Redis that their owner keeps alive.

A key's runs in flight (``max_concurrent``) and its open sessions are counted in one sorted set
per key and kind, ``wasm-runner:lease:<kind>:<tenant>``, member = lease id (``<replica>:<n>``),
score = when it expires (Redis server time, milliseconds, so replicas' clocks do not matter).
Taking a lease is one Lua script: drop expired members, count the rest, add one if under the
limit, all atomic. The replica that holds leases refreshes them every ``ttl / 3`` seconds; it
releases them when the run or session ends, and all of them when it drains.

A replica that dies (``kill -9``, a lost host) stops refreshing, but its leases are not left to
count until their TTL: every replica beats a heartbeat, its id in ``wasm-runner:replicas`` scored
with when the beat lapses (every ``HEARTBEAT_SECONDS``, lapsing after ``HEARTBEAT_TTL_SECONDS``),
and every count (``take``, ``count``) first drops the leases of replicas whose heartbeat has
lapsed. So a dead replica's leases stop counting within ``HEARTBEAT_TTL_SECONDS`` (3 s) of its
last beat, whatever ``lease_ttl_seconds`` is. A replica whose event loop stalled past its
heartbeat may see its leases counted out; its next beat notices and writes them back at once.

Only counts live here: the global running cap, the queue and the memory budget stay per replica
(``wasm_runner.admission.Admission``), because each replica has its own CPU and memory.

``RedisLeases`` implements admission's ``wasm_runner.admission.Leases`` (admission depends only on
that protocol); it lives here because it needs scale-out's shared state.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, cast

from ..execution import CallerLike, Refused
from .state import SharedState, SharedStateUnavailable

__all__ = ["HEARTBEAT_SECONDS", "HEARTBEAT_TTL_SECONDS", "Lease", "RedisLeases"]

log = logging.getLogger("wasm_runner.scaleout")

HEARTBEAT_SECONDS = 1.0  # how often a replica beats
HEARTBEAT_TTL_SECONDS = 3.0  # a replica whose last beat is older is dead: its leases stop counting

_HEARTBEAT_TTL_MS = int(HEARTBEAT_TTL_SECONDS * 1000)

_NOW = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
"""

# Drops from the set KEYS[1] its expired leases and the leases of replicas whose heartbeat in
# KEYS[2] has lapsed (a lease id is ``<replica>:<n>``; a set holds at most a key's limit, so few).
_PRUNE = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local replica = string.match(member, '^(.*):[^:]*$')
  if replica == nil or not redis.call('ZSCORE', KEYS[2], replica) then
    redis.call('ZREM', KEYS[1], member)
  end
end
"""

# KEYS[1] the set, KEYS[2] the heartbeats; ARGV: lease id, limit, ttl ms, replica id, heartbeat
# ttl ms. Returns 1 when taken, 0 when at the limit. The taker beats first (it is alive).
_TAKE = _NOW + """
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[4])
redis.call('PEXPIRE', KEYS[2], 60000)
""" + _PRUNE + """
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[3]))
return 1
"""

# KEYS[1] the heartbeats; ARGV: replica id, heartbeat ttl ms. Returns 1 when the replica's last
# beat was still alive, 0 when it had lapsed (or Redis restarted empty): its leases may have been
# counted out, so it writes them back at once (``RedisLeases.beat``).
_BEAT = _NOW + """
local last = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], 60000)
if last and tonumber(last) > now then return 1 end
return 0
"""

# KEYS[1] the heartbeats, KEYS[2..] sets; ARGV[1] ttl ms, ARGV[2] replica id, ARGV[3] heartbeat
# ttl ms, ARGV[4..] the lease id in the matching set. Beats, then writes each lease again (also one
# that is missing: a Redis restarted empty learns what this replica holds within one refresh; only
# a replica that stalled past the TTL or its heartbeat can put back one that was counted out).
_REFRESH = _NOW + """
local ttl = tonumber(ARGV[1])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], 60000)
for i = 2, #KEYS do
  redis.call('ZADD', KEYS[i], now + ttl, ARGV[i + 2])
  redis.call('PEXPIRE', KEYS[i], 2 * ttl)
end
return #KEYS - 1
"""

# KEYS[1] the set, KEYS[2] the heartbeats. Returns how many live leases it holds.
_COUNT = _NOW + _PRUNE + """
return redis.call('ZCARD', KEYS[1])
"""


@dataclass(eq=False)
class Lease:
    """One held lease; ``release`` (sync, idempotent) stops refreshing it at once and removes it
    from Redis in the background (if that fails, it expires within the TTL)."""

    leases: RedisLeases
    key: str
    id: str
    released: bool = field(default=False)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.leases._drop(self)


class RedisLeases:
    """The leases one replica holds, and the task that keeps them alive (``admission.Leases``)."""

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

    @property
    def heartbeats(self) -> str:
        """The sorted set of live replicas: id -> when its heartbeat lapses (ms, Redis time)."""
        return self.shared.key("replicas")

    async def take(self, kind: str, tenant: str, limit: int) -> Lease | None:
        """A lease of ``kind`` (``run`` or ``session``) for ``tenant`` if it holds fewer than
        ``limit`` across all replicas, else None; ``SharedStateUnavailable`` when Redis fails."""
        key = self.set_key(kind, tenant)
        lease_id = f"{self.shared.replica_id}:{next(self._ids)}"
        ttl_ms = max(1, int(self.ttl * 1000))
        script = self._eval(_TAKE, [key, self.heartbeats], lease_id, limit, ttl_ms,
                            self.shared.replica_id, _HEARTBEAT_TTL_MS)
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
        raise Refused(
            429, code,
            f"{getattr(tenant, 'who', 'this API key')} already has {what} across the replicas; "
            "wait for one to end",
            headers={"Retry-After": str(max(1, retry_after))},
        )  # fmt: skip

    def _eval(self, script: str, keys: list[str], *args: str | int) -> Awaitable[Any]:
        """One Lua script on the replica's client (redis-py types a command as ``Awaitable[T] |
        T``, one stub for its sync and asyncio clients; this one is asyncio)."""
        return cast("Awaitable[Any]", self.shared.redis.eval(script, len(keys), *keys, *args))

    async def count(self, kind: str, tenant: str) -> int:
        """Unexpired leases of ``kind`` for ``tenant`` across all replicas."""
        script = self._eval(_COUNT, [self.set_key(kind, tenant), self.heartbeats])
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
        keys = [self.heartbeats, *(lease.key for lease in held)]
        ids = [lease.id for lease in held]
        script = self._eval(_REFRESH, keys, ttl_ms, self.shared.replica_id, _HEARTBEAT_TTL_MS, *ids)
        try:
            await self.shared.call(script)
        except SharedStateUnavailable:
            log.warning("could not refresh %d leases: Redis is unavailable", len(held))
            return
        for lease in held:  # released while the refresh was on its way: remove it (again)
            if lease.released:
                self._drop(lease)

    async def beat(self) -> None:
        """One heartbeat: this replica is alive for ``HEARTBEAT_TTL_SECONDS`` more. When its last
        beat had lapsed (a stalled loop, Redis restarted empty), others may have counted its
        leases out: write them back now rather than at the next refresh."""
        script = self._eval(_BEAT, [self.heartbeats], self.shared.replica_id, _HEARTBEAT_TTL_MS)
        try:
            alive = await self.shared.call(script)
        except SharedStateUnavailable:
            return  # Redis down: nothing counts meanwhile; the next beat tries again
        if not alive and self._held:
            await self.refresh()

    async def beat_forever(self) -> None:
        """Beat every ``HEARTBEAT_SECONDS`` while the replica lives (the app's lifespan runs it)."""
        while True:
            await self.beat()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    async def release_all(self) -> None:
        """Release every lease this replica holds and wait (bounded) for Redis to drop them."""
        for lease in list(self._held.values()):
            lease.release()
        if self._refresher is not None:
            self._refresher.cancel()
        if self._pending:
            await asyncio.wait(list(self._pending), timeout=self.shared.timeout * 2)
