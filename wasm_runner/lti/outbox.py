"""The durable outbox of scores: a check puts its score here and answers at once; a worker
delivers it (``GradeService.post``) and, when the platform is down or slow, tries again after
``retry_seconds``, doubled each time up to ``retry_max_seconds``, until it lands. A score the
platform refuses for good (a 4xx other than 401/408/425/429) is kept aside in ``failed/``.

On disk (``[lti] outbox_dir``, default ``lti-outbox`` in the private cache folder): one JSON file
per score, written atomically, so a restart loses nothing. A worker claims a score by renaming its
file into ``working/`` (one rename wins when replicas share the folder); a claim older than
``STALE_SECONDS`` (its replica died) goes back to the queue."""

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
from typing import Any, Literal

from .ags import GradeError, Score

__all__ = ["Outbox", "OutboxState"]

OutboxState = Literal["pending", "sent", "failed", "unknown"]
STALE_SECONDS = 300.0
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
    def __init__(self, folder: Path, deliver: Callable[[str, Score], Awaitable[None]], *,
                 retry_seconds: float, retry_max_seconds: float) -> None:  # fmt: skip
        self.folder = folder
        self._deliver = deliver  # (platform name, score)
        self.retry_seconds = retry_seconds
        self.retry_max_seconds = retry_max_seconds
        for sub in ("", "working", "sent", "failed"):
            (folder / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
        self._wake = asyncio.Event()

    def put(self, platform: str, score: Score) -> str:
        """Keep ``score`` for ``platform``; its id (``state(id)`` says how it goes)."""
        ident = f"{time.time_ns():020d}-{secrets.token_hex(8)}"
        entry = {"id": ident, "platform": platform, "score": dataclasses.asdict(score), "attempts": 0,
                 "next_at": 0.0}  # fmt: skip
        _write(self.folder / f"{ident}.json", entry)
        self._wake.set()
        return ident

    def state(self, ident: str) -> OutboxState:
        if not ident.replace("-", "").isalnum():
            return "unknown"
        if (self.folder / "sent" / ident).exists():
            return "sent"
        if (self.folder / "failed" / f"{ident}.json").exists():
            return "failed"
        if (self.folder / f"{ident}.json").exists() or (self.folder / "working" / f"{ident}.json").exists():
            return "pending"
        return "unknown"

    def pending(self) -> int:
        return len(list(self.folder.glob("*.json"))) + len(list((self.folder / "working").glob("*.json")))

    def _backoff(self, attempts: int) -> float:
        return float(min(self.retry_max_seconds, self.retry_seconds * 2 ** max(0, attempts - 1)))

    def _requeue_stale(self) -> None:
        now = time.time()
        for path in (self.folder / "working").glob("*.json"):
            try:
                if now - path.stat().st_mtime > STALE_SECONDS:
                    os.rename(path, self.folder / path.name)
            except OSError:
                continue
        for path in (self.folder / "sent").iterdir():
            try:
                if now - path.stat().st_mtime > SENT_KEEP_SECONDS:
                    path.unlink()
            except OSError:
                continue

    async def deliver_due(self) -> float:
        """Deliver every score that is due; the seconds until the next one is (or a while)."""
        self._requeue_stale()
        now = time.time()
        wait = self.retry_max_seconds
        for path in sorted(self.folder.glob("*.json")):
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if entry["next_at"] > now:
                wait = min(wait, entry["next_at"] - now)
                continue
            claimed = self.folder / "working" / path.name
            try:
                os.rename(path, claimed)  # one replica wins the claim
            except OSError:
                continue
            wait = min(wait, await self._attempt(entry, claimed))
        return max(0.05, wait)

    async def _attempt(self, entry: dict[str, Any], claimed: Path) -> float:
        ident = entry["id"]
        try:
            await self._deliver(entry["platform"], Score(**entry["score"]))
        except GradeError as exc:
            entry["attempts"] += 1
            if not exc.retry:
                log.warning("score %s refused for good by platform %r: %s", ident, entry["platform"], exc)
                _write(self.folder / "failed" / f"{ident}.json", entry)
                claimed.unlink(missing_ok=True)
                return self.retry_max_seconds
            delay = self._backoff(entry["attempts"])
            entry["next_at"] = time.time() + delay
            log.info("score %s not delivered (attempt %d): %s; next try in %.1f s", ident, entry["attempts"],
                     exc, delay)  # fmt: skip
            _write(self.folder / f"{ident}.json", entry)
            claimed.unlink(missing_ok=True)
            return delay
        except Exception:  # a bug must not lose the score: it waits like an unanswered call
            log.exception("delivering score %s failed", ident)
            entry["attempts"] += 1
            entry["next_at"] = time.time() + self._backoff(entry["attempts"])
            _write(self.folder / f"{ident}.json", entry)
            claimed.unlink(missing_ok=True)
            return self._backoff(entry["attempts"])
        (self.folder / "sent" / ident).touch()
        claimed.unlink(missing_ok=True)
        return self.retry_max_seconds

    async def run_forever(self) -> None:
        """The worker: delivers what is due, sleeps until the next is due or a score comes in."""
        while True:
            try:
                wait = await self.deliver_due()
            except Exception:  # housekeeping never stops
                log.exception("the LTI outbox failed; trying again")
                wait = self.retry_seconds
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=min(wait, 5.0))
            except TimeoutError:
                pass
