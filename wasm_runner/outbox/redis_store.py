"""``RedisStore``: the outbox in Redis, one queue for every replica, through the replica's bounded
client (``SharedState.call``: each call within ``redis_timeout_seconds``, else
``SharedStateUnavailable``, a 503 ``shared_state_unavailable`` when a request waits on it).

Keys under ``<prefix>outbox:<name>:``: ``items`` (hash, id -> entry), ``due`` (sorted set, id ->
due time), ``working`` (sorted set, id -> claim time), ``failed`` (hash, id -> entry), and
``sent:<id>`` (expires after ``sent_keep_seconds``). A claim is one Lua script: the stale claims
back to ``due``, then the due ones moved to ``working``, atomically in Redis."""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .store import CLAIM_SECONDS, Entry, State, valid_id

if TYPE_CHECKING:
    from ..scaleout.state import SharedState

__all__ = ["RedisStore"]

log = logging.getLogger("wasm_runner.outbox")
T = TypeVar("T")

# KEYS: due, working, items; ARGV: now, claims made before this are stale, limit
_CLAIM = """
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[2])) do
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZADD', KEYS[1], ARGV[1], id)
end
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))) do
  redis.call('ZREM', KEYS[1], id)
  local v = redis.call('HGET', KEYS[3], id)
  if v then
    redis.call('ZADD', KEYS[2], ARGV[1], id)
    table.insert(out, id)
    table.insert(out, v)
  end
end
return out
"""


class RedisStore:
    def __init__(self, shared: SharedState, name: str, *, claim_seconds: float = CLAIM_SECONDS,
                 sent_keep_seconds: float = 0.0) -> None:  # fmt: skip
        self.shared = shared
        self.name = name
        self.claim_seconds = claim_seconds
        self.sent_keep_seconds = sent_keep_seconds
        self._k = {part: shared.key("outbox", name, part) for part in ("items", "due", "working", "failed")}

    def __repr__(self) -> str:
        return f"RedisStore({self._k['items']})"

    async def _call(self, awaitable: Awaitable[T]) -> T:
        return await self.shared.call(awaitable, f"the {self.name} outbox")

    def _sent_key(self, ident: str) -> str:
        return self.shared.key("outbox", self.name, "sent", ident)

    async def add(self, entry: Entry) -> None:
        pipe = self.shared.redis.pipeline(transaction=True)
        pipe.hset(self._k["items"], entry.id, entry.dumps().decode())
        pipe.zadd(self._k["due"], {entry.id: entry.due})
        await self._call(pipe.execute())

    async def retry(self, entry: Entry) -> None:
        pipe = self.shared.redis.pipeline(transaction=True)
        pipe.hset(self._k["items"], entry.id, entry.dumps().decode())
        pipe.zrem(self._k["working"], entry.id)
        pipe.zadd(self._k["due"], {entry.id: entry.due})
        await self._call(pipe.execute())

    async def done(self, entry: Entry) -> None:
        pipe = self.shared.redis.pipeline(transaction=True)
        if self.sent_keep_seconds > 0:
            pipe.set(self._sent_key(entry.id), b"1", ex=max(1, int(self.sent_keep_seconds)))
        pipe.hdel(self._k["items"], entry.id)
        pipe.zrem(self._k["working"], entry.id)
        await self._call(pipe.execute())

    async def _aside(self, ident: str, raw: str) -> None:
        pipe = self.shared.redis.pipeline(transaction=True)
        pipe.hset(self._k["failed"], ident, raw)
        pipe.hdel(self._k["items"], ident)
        pipe.zrem(self._k["working"], ident)
        pipe.zrem(self._k["due"], ident)
        await self._call(pipe.execute())

    async def fail(self, entry: Entry) -> None:
        await self._aside(entry.id, entry.dumps().decode())

    async def claim(self, now: float, limit: int = 16) -> list[Entry]:
        script = self.shared.redis.eval(_CLAIM, 3, self._k["due"], self._k["working"], self._k["items"], repr(now),
                                        repr(now - self.claim_seconds), limit)  # fmt: skip
        found = await self._call(cast("Awaitable[list[bytes]]", script))
        claimed = []
        for ident, raw in zip(found[::2], found[1::2], strict=True):
            try:
                claimed.append(Entry.loads(raw))
            except ValueError:  # not one of ours: kept aside for the operator, not claimed again
                log.warning("an unreadable entry in the %s outbox (Redis) was moved to its failed hash", self.name)
                await self._aside(ident.decode(errors="replace"), raw.decode(errors="replace"))
        return claimed

    async def state(self, ident: str) -> State:
        if not valid_id(ident):
            return "unknown"
        pipe = self.shared.redis.pipeline(transaction=False)
        pipe.exists(self._sent_key(ident))
        pipe.hexists(self._k["failed"], ident)
        pipe.hexists(self._k["items"], ident)
        sent, failed, pending = cast("list[Any]", await self._call(pipe.execute()))
        return "sent" if sent else "failed" if failed else "pending" if pending else "unknown"

    async def next_due(self) -> float | None:
        first = await self._call(cast("Awaitable[list[tuple[bytes, float]]]",
                                      self.shared.redis.zrange(self._k["due"], 0, 0, withscores=True)))  # fmt: skip
        return float(first[0][1]) if first else None
