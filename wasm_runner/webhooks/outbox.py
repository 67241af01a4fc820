"""The deliveries waiting to be sent: durable, so a restart or a receiver that is down loses none.

Each ``Delivery`` waits until it is due; ``claim`` hands the due ones to one sender for
``lease_seconds`` (another process sharing the outbox does not get them meanwhile; a sender that
dies holding one lets it come back when the lease ends), ``done`` removes one, ``retry`` puts it
back with a new due time.

- ``FileOutbox``: one JSON file per delivery in a private folder (``webhook_outbox_dir``, else
  ``webhooks`` in the cache folder); a claim is a rename, which one process wins.
- ``RedisOutbox``: with ``redis_url``, a sorted set of due times and a hash of deliveries shared
  by the replicas; a claim is one Lua script, atomic in Redis.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Awaitable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from ..scaleout.state import SharedState

__all__ = ["Delivery", "FileOutbox", "Outbox", "RedisOutbox", "LEASE_SECONDS"]

log = logging.getLogger("wasm_runner.webhooks")
LEASE_SECONDS = 60.0  # a claimed delivery comes back to the outbox after this long unless done


@dataclass
class Delivery:
    """One result for one key's webhook: ``id`` is the Idempotency-Key (the same on every
    attempt), ``body`` what is POSTed, ``attempts`` made so far, ``due`` when the next may start."""

    id: str
    key: str
    url: str
    body: dict[str, Any]
    attempts: int = 0
    due: float = 0.0
    created: float = 0.0

    def dumps(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes | str) -> Delivery:
        return cls(**json.loads(data))


class Outbox(Protocol):
    async def add(self, delivery: Delivery) -> None: ...
    async def claim(self, now: float, limit: int = 16) -> list[Delivery]: ...
    async def done(self, delivery: Delivery) -> None: ...
    async def retry(self, delivery: Delivery) -> None: ...


class FileOutbox:
    """Deliveries as files in ``folder`` (mode 0700): ``<id>.json`` waiting, ``<id>.sending``
    claimed (its modification time is the claim's)."""

    def __init__(self, folder: Path, lease_seconds: float = LEASE_SECONDS) -> None:
        self.folder = folder
        self.lease_seconds = lease_seconds
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def __repr__(self) -> str:
        return f"FileOutbox({self.folder})"

    def _write(self, delivery: Delivery) -> None:
        path = self.folder / f"{delivery.id}.json"
        tmp = self.folder / f".{delivery.id}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(delivery.dumps())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    async def add(self, delivery: Delivery) -> None:
        self._write(delivery)

    async def claim(self, now: float, limit: int = 16) -> list[Delivery]:
        claimed: list[Delivery] = []
        for path in sorted(self.folder.glob("*.sending")):  # a sender that died: back when its lease ends
            try:
                if path.stat().st_mtime + self.lease_seconds < time.time():
                    os.replace(path, path.with_suffix(".json"))
            except FileNotFoundError:
                continue
        for path in sorted(self.folder.glob("*.json")):
            if len(claimed) >= limit:
                break
            try:
                delivery = Delivery.loads(path.read_bytes())
            except FileNotFoundError:
                continue
            except (ValueError, TypeError):
                os.replace(path, path.with_suffix(".unreadable"))  # kept for the operator
                continue
            if delivery.due > now:
                continue
            sending = path.with_suffix(".sending")
            try:
                os.rename(path, sending)  # one process wins
            except FileNotFoundError:
                continue
            os.utime(sending)
            claimed.append(delivery)
        return claimed

    async def done(self, delivery: Delivery) -> None:
        (self.folder / f"{delivery.id}.sending").unlink(missing_ok=True)

    async def retry(self, delivery: Delivery) -> None:
        self._write(delivery)
        (self.folder / f"{delivery.id}.sending").unlink(missing_ok=True)

    def waiting(self) -> int:
        """Deliveries not yet done (waiting or being sent)."""
        return sum(1 for p in self.folder.iterdir() if p.suffix in (".json", ".sending"))


# the due ones (score <= now), each claimed by moving its due time to the lease's end, atomically
_CLAIM = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local v = redis.call('HGET', KEYS[2], id)
  if v then
    redis.call('ZADD', KEYS[1], ARGV[2], id)
    table.insert(out, v)
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
"""


class RedisOutbox:
    """Deliveries in Redis, shared by the replicas: ``webhook:due`` (sorted set, id -> due time)
    and ``webhook:item`` (hash, id -> delivery)."""

    def __init__(self, shared: SharedState, lease_seconds: float = LEASE_SECONDS) -> None:
        self.shared = shared
        self.lease_seconds = lease_seconds
        self.due_key = shared.key("webhook", "due")
        self.item_key = shared.key("webhook", "item")

    def __repr__(self) -> str:
        return f"RedisOutbox({self.due_key})"

    async def _put(self, delivery: Delivery) -> None:
        pipe = self.shared.redis.pipeline(transaction=True)
        pipe.hset(self.item_key, delivery.id, delivery.dumps().decode())
        pipe.zadd(self.due_key, {delivery.id: delivery.due})
        await self.shared.call(pipe.execute(), "the webhook outbox")

    async def add(self, delivery: Delivery) -> None:
        await self._put(delivery)

    async def claim(self, now: float, limit: int = 16) -> list[Delivery]:
        script = self.shared.redis.eval(_CLAIM, 2, self.due_key, self.item_key, now, now + self.lease_seconds, limit)
        found = await self.shared.call(cast("Awaitable[list[bytes]]", script), "the webhook outbox")
        claimed = []
        for raw in found:
            try:
                claimed.append(Delivery.loads(raw))
            except (ValueError, TypeError):  # not one of ours: left where it is (its lease keeps it aside)
                log.warning("an unreadable delivery in the webhook outbox (Redis) was skipped")
        return claimed

    async def done(self, delivery: Delivery) -> None:
        pipe = self.shared.redis.pipeline(transaction=True)
        pipe.zrem(self.due_key, delivery.id)
        pipe.hdel(self.item_key, delivery.id)
        await self.shared.call(pipe.execute(), "the webhook outbox")

    async def retry(self, delivery: Delivery) -> None:
        await self._put(delivery)
