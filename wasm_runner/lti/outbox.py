"""The durable outbox of scores: a check puts its score here and answers at once; a worker
delivers it (``GradeService.post``) and, when the platform is down or slow, tries again after
``retry_seconds``, doubled each time up to ``retry_max_seconds``, until it lands. A score the
platform refuses for good (a 4xx other than 401/408/425/429) is kept aside in ``failed/``.

Two stores, one worker logic (``Outbox``): ``FileOutbox`` on disk (``[lti] outbox_dir``, default
``lti-outbox`` in the private cache folder): one JSON file per score, written atomically, so a
restart loses nothing; a worker claims a score by renaming its file into ``working/`` (one rename
wins when replicas share the folder). ``RedisOutbox`` in Redis when the server has ``redis_url``
(every replica's worker serves one queue; a claim is one atomic script). Either way a claim older
than ``claim_seconds`` (its replica died between the claim and the post) goes back to the queue."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal, cast

from redis.asyncio import Redis

from .ags import GradeError, Score

__all__ = ["FileOutbox", "Outbox", "OutboxState", "RedisOutbox"]

OutboxState = Literal["pending", "sent", "failed", "unknown"]
SENT_KEEP_SECONDS = 24 * 3600.0
log = logging.getLogger("wasm_runner.lti")


def _write(path: Path, entry: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(entry, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Outbox:
    """The worker's logic over a store (``FileOutbox``, ``RedisOutbox``)."""

    poll_seconds = 5.0  # the longest sleep between looks at the queue (other replicas put there too)

    def __init__(self, deliver: Callable[[str, Score], Awaitable[None]], *, retry_seconds: float,
                 retry_max_seconds: float, claim_seconds: float = 300.0) -> None:  # fmt: skip
        self._deliver = deliver  # (platform name, score)
        self.claim_seconds = claim_seconds
        self.retry_seconds = retry_seconds
        self.retry_max_seconds = retry_max_seconds
        self._wake = asyncio.Event()

    # -- the store's part ---------------------------------------------------------------------
    async def _add(self, entry: dict[str, Any]) -> None:
        raise NotImplementedError

    async def state(self, ident: str) -> OutboxState:
        """Whether the score ``ident`` is waiting, sent, refused for good, or unknown here."""
        raise NotImplementedError

    async def _claim_due(self, now: float) -> tuple[list[dict[str, Any]], float]:
        """The entries due now, each claimed by this worker, and the seconds until the next."""
        raise NotImplementedError

    async def _sent(self, entry: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _again(self, entry: dict[str, Any]) -> None:
        raise NotImplementedError

    async def _failed(self, entry: dict[str, Any]) -> None:
        raise NotImplementedError

    # -- the worker -------------------------------------------------------------------------
    async def put(self, platform: str, score: Score) -> str:
        """Keep ``score`` for ``platform``; its id (``state(id)`` says how it goes)."""
        ident = f"{time.time_ns():020d}-{secrets.token_hex(8)}"
        await self._add({"id": ident, "platform": platform, "score": dataclasses.asdict(score), "attempts": 0,
                         "next_at": 0.0})  # fmt: skip
        self._wake.set()
        return ident

    def _backoff(self, attempts: int) -> float:
        return float(min(self.retry_max_seconds, self.retry_seconds * 2 ** max(0, attempts - 1)))

    async def deliver_due(self) -> float:
        """Deliver every score that is due; the seconds until the next one is (or a while)."""
        entries, wait = await self._claim_due(time.time())
        for entry in entries:
            wait = min(wait, await self._attempt(entry))
        return max(0.05, wait)

    async def _attempt(self, entry: dict[str, Any]) -> float:
        ident = entry["id"]
        try:
            await self._deliver(entry["platform"], Score(**entry["score"]))
        except asyncio.CancelledError:  # the server stops: the score goes back to the queue at once
            try:
                await self._again(entry)
            except Exception:  # then a later claim takes it back after claim_seconds
                log.warning("score %s stays claimed until claim_seconds pass", ident)
            raise
        except GradeError as exc:
            entry["attempts"] += 1
            if not exc.retry:
                log.warning("score %s refused for good by platform %r: %s", ident, entry["platform"], exc)
                await self._failed(entry)
                return self.retry_max_seconds
            delay = self._backoff(entry["attempts"])
            entry["next_at"] = time.time() + delay
            log.info("score %s not delivered (attempt %d): %s; next try in %.1f s", ident, entry["attempts"],
                     exc, delay)  # fmt: skip
            await self._again(entry)
            return delay
        except Exception:  # a bug must not lose the score: it waits like an unanswered call
            log.exception("delivering score %s failed", ident)
            entry["attempts"] += 1
            entry["next_at"] = time.time() + self._backoff(entry["attempts"])
            await self._again(entry)
            return self._backoff(entry["attempts"])
        await self._sent(entry)
        return self.retry_max_seconds

    async def run_forever(self) -> None:
        """The worker: delivers what is due, sleeps until the next is due or a score comes in."""
        while True:
            try:
                wait = await self.deliver_due()
            except Exception:  # housekeeping never stops (Redis down: the next look tries again)
                log.exception("the LTI outbox failed; trying again")
                wait = self.retry_seconds
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=min(wait, self.poll_seconds))
            except TimeoutError:
                pass


class FileOutbox(Outbox):
    """One JSON file per score in ``folder`` (see the module's docstring)."""

    def __init__(self, folder: Path, deliver: Callable[[str, Score], Awaitable[None]], *, retry_seconds: float,
                 retry_max_seconds: float, claim_seconds: float = 300.0) -> None:  # fmt: skip
        super().__init__(deliver, retry_seconds=retry_seconds, retry_max_seconds=retry_max_seconds,
                         claim_seconds=claim_seconds)  # fmt: skip
        self.folder = folder
        for sub in ("", "working", "sent", "failed"):
            (folder / sub).mkdir(parents=True, exist_ok=True, mode=0o700)

    async def _add(self, entry: dict[str, Any]) -> None:
        await asyncio.to_thread(_write, self.folder / f"{entry['id']}.json", entry)

    async def state(self, ident: str) -> OutboxState:
        if not ident.replace("-", "").isalnum():
            return "unknown"
        if (self.folder / "sent" / ident).exists():
            return "sent"
        if (self.folder / "failed" / f"{ident}.json").exists():
            return "failed"
        if (self.folder / f"{ident}.json").exists() or (self.folder / "working" / f"{ident}.json").exists():
            return "pending"
        return "unknown"

    def _requeue_stale(self, now: float) -> None:
        for path in (self.folder / "working").glob("*.json"):
            try:
                if now - path.stat().st_mtime > self.claim_seconds:
                    os.rename(path, self.folder / path.name)
            except OSError:
                continue
        for path in (self.folder / "sent").iterdir():
            try:
                if now - path.stat().st_mtime > SENT_KEEP_SECONDS:
                    path.unlink()
            except OSError:
                continue

    async def _claim_due(self, now: float) -> tuple[list[dict[str, Any]], float]:
        self._requeue_stale(now)
        wait = self.retry_max_seconds
        claimed = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if entry["next_at"] > now:
                wait = min(wait, entry["next_at"] - now)
                continue
            try:
                os.rename(path, self.folder / "working" / path.name)  # one replica wins the claim
            except OSError:
                continue
            claimed.append(entry)
        return claimed, wait

    def _working(self, entry: dict[str, Any]) -> Path:
        return self.folder / "working" / f"{entry['id']}.json"

    async def _sent(self, entry: dict[str, Any]) -> None:
        (self.folder / "sent" / entry["id"]).touch()
        self._working(entry).unlink(missing_ok=True)

    async def _again(self, entry: dict[str, Any]) -> None:
        _write(self.folder / f"{entry['id']}.json", entry)
        self._working(entry).unlink(missing_ok=True)

    async def _failed(self, entry: dict[str, Any]) -> None:
        _write(self.folder / "failed" / f"{entry['id']}.json", entry)
        self._working(entry).unlink(missing_ok=True)


_CLAIM = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
  return redis.call('HGET', KEYS[3], ARGV[1])
end
return false
"""
_REQUEUE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1]) end
return 1
"""


class RedisOutbox(Outbox):
    """The scores in Redis, one queue for every replica: ``items`` (a hash of the entries),
    ``due`` (a sorted set by when each is due), ``working`` (claimed, by when), ``failed`` and
    ``sent:ID`` (kept a day, for the page's "grade sent")."""

    poll_seconds = 1.0  # another replica's new score is looked at within a second

    def __init__(self, redis: Callable[[], Redis], prefix: str, deliver: Callable[[str, Score], Awaitable[None]], *,
                 retry_seconds: float, retry_max_seconds: float, claim_seconds: float = 300.0) -> None:  # fmt: skip
        super().__init__(deliver, retry_seconds=retry_seconds, retry_max_seconds=retry_max_seconds,
                         claim_seconds=claim_seconds)  # fmt: skip
        self._client = redis
        self._k = {name: prefix + name for name in ("items", "due", "working", "failed")}
        self._prefix = prefix

    @property
    def _redis(self) -> Redis:
        return self._client()

    async def _add(self, entry: dict[str, Any]) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._k["items"], entry["id"], json.dumps(entry))
            pipe.zadd(self._k["due"], {entry["id"]: 0.0})
            await pipe.execute()

    async def state(self, ident: str) -> OutboxState:
        r = self._redis
        if await r.exists(self._prefix + "sent:" + ident):
            return "sent"
        if await cast("Awaitable[bool]", r.hexists(self._k["failed"], ident)):
            return "failed"
        if await cast("Awaitable[bool]", r.hexists(self._k["items"], ident)):
            return "pending"
        return "unknown"

    async def _claim_due(self, now: float) -> tuple[list[dict[str, Any]], float]:
        r = self._redis
        for ident in await r.zrangebyscore(self._k["working"], "-inf", now - self.claim_seconds):
            await cast("Awaitable[Any]", r.eval(_REQUEUE, 2, self._k["working"], self._k["due"], ident, 0))
        claimed = []
        for ident in await r.zrangebyscore(self._k["due"], "-inf", now, start=0, num=50):
            raw = await cast("Awaitable[Any]", r.eval(_CLAIM, 3, self._k["due"], self._k["working"],
                                                      self._k["items"], ident, now))  # fmt: skip
            if raw:
                claimed.append(json.loads(raw))
        upcoming = await r.zrange(self._k["due"], 0, 0, withscores=True)
        wait = self.retry_max_seconds if not upcoming else max(0.0, float(upcoming[0][1]) - now)
        return claimed, wait

    async def _sent(self, entry: dict[str, Any]) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(self._prefix + "sent:" + entry["id"], "1", ex=int(SENT_KEEP_SECONDS))
            pipe.hdel(self._k["items"], entry["id"])
            pipe.zrem(self._k["working"], entry["id"])
            await pipe.execute()

    async def _again(self, entry: dict[str, Any]) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._k["items"], entry["id"], json.dumps(entry))
            pipe.zrem(self._k["working"], entry["id"])
            pipe.zadd(self._k["due"], {entry["id"]: entry["next_at"]})
            await pipe.execute()

    async def _failed(self, entry: dict[str, Any]) -> None:
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._k["failed"], entry["id"], json.dumps(entry))
            pipe.hdel(self._k["items"], entry["id"])
            pipe.zrem(self._k["working"], entry["id"])
            await pipe.execute()
