"""``FileStore``: the outbox as files in a private folder (mode 0700), which replicas on one
host (or a shared folder) may share. ``<id>.json`` waits (its modification time is its due time,
so a look at the queue reads only the files that are due); ``working/<id>.json`` is claimed (its
modification time is the claim's ``now``); ``failed/<id>.json`` is kept aside;
``sent/<id>`` (empty) says it was sent, kept ``sent_keep_seconds``. Every write is a new file
flushed to disk then renamed into place, so a crash leaves the old entry or the new one, never
half of one; a claim is a rename, which exactly one process wins."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import time
from pathlib import Path

from .store import CLAIM_SECONDS, Entry, State, valid_id

__all__ = ["FileStore"]

log = logging.getLogger("wasm_runner.outbox")
PRUNE_EVERY_SECONDS = 60.0  # how often the old "sent" traces are looked for


class FileStore:
    def __init__(self, folder: Path, *, claim_seconds: float = CLAIM_SECONDS, sent_keep_seconds: float = 0.0) -> None:
        self.folder = folder
        self.claim_seconds = claim_seconds
        self.sent_keep_seconds = sent_keep_seconds
        self._working, self._sent, self._failed = folder / "working", folder / "sent", folder / "failed"
        for sub in (folder, self._working, self._sent, self._failed):
            sub.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._pruned = 0.0

    def __repr__(self) -> str:
        return f"FileStore({self.folder})"

    # -- writing ---------------------------------------------------------------------------
    def _write(self, path: Path, entry: Entry, stamp: float) -> None:
        """``entry`` in ``path``, whole or not at all, the file's time ``stamp``."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(entry.dumps())
            f.flush()
            os.fsync(f.fileno())
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, path)

    def _move_out(self, entry: Entry, target: Path) -> None:
        """The claimed ``entry``, as it is now, moved from ``working/`` to ``target`` (one rename:
        never lost, never a second copy). Rewritten in ``working/`` with the time now, so no
        other process takes the claim back meanwhile."""
        working = self._working / f"{entry.id}.json"
        self._write(working, entry, time.time())
        os.replace(working, target)

    def _requeue(self, entry: Entry) -> None:
        path = self.folder / f"{entry.id}.json"
        self._move_out(entry, path)
        try:
            os.utime(path, (entry.due, entry.due))  # until then it is read and found not yet due
        except FileNotFoundError:  # due already, and claimed by another process
            pass

    async def add(self, entry: Entry) -> None:
        await asyncio.to_thread(self._write, self.folder / f"{entry.id}.json", entry, entry.due)

    async def retry(self, entry: Entry) -> None:
        await asyncio.to_thread(self._requeue, entry)

    async def fail(self, entry: Entry) -> None:
        await asyncio.to_thread(self._move_out, entry, self._failed / f"{entry.id}.json")

    async def done(self, entry: Entry) -> None:
        if self.sent_keep_seconds > 0:
            (self._sent / entry.id).touch()
        (self._working / f"{entry.id}.json").unlink(missing_ok=True)

    # -- claiming --------------------------------------------------------------------------
    def _read(self, path: Path) -> Entry | None:
        """The entry in ``path``; None when it is gone (another process took it) or unreadable
        (then moved aside to ``failed/`` for the operator)."""
        try:
            return Entry.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:
            log.warning("an unreadable outbox entry %s was moved to %s", path.name, self._failed)
            try:
                os.replace(path, self._failed / f"{path.stem}.unreadable")
            except OSError:
                pass
            return None

    def _return_stale(self, now: float) -> None:
        for path in self._working.glob("*.json"):
            try:
                if now - path.stat().st_mtime > self.claim_seconds:
                    os.rename(path, self.folder / path.name)
                    log.warning("outbox entry %s was claimed more than %.0f s ago and not sent: back in the queue",
                                path.stem, self.claim_seconds)  # fmt: skip
            except OSError:
                continue

    def _prune_sent(self) -> None:
        if self.sent_keep_seconds <= 0 or time.time() - self._pruned < PRUNE_EVERY_SECONDS:
            return
        self._pruned = time.time()
        for path in self._sent.iterdir():
            try:
                if self._pruned - path.stat().st_mtime > self.sent_keep_seconds:
                    path.unlink()
            except OSError:
                continue

    def _due_files(self, now: float | None) -> list[tuple[float, Path]]:
        """The waiting files by due time (their modification time), those due by ``now`` only
        unless None."""
        found = []
        for path in self.folder.glob("*.json"):
            try:
                due = path.stat().st_mtime
            except OSError:
                continue
            if now is None or due <= now:
                found.append((due, path))
        return sorted(found)

    def _claim(self, now: float, limit: int) -> list[Entry]:
        self._return_stale(now)
        self._prune_sent()
        claimed: list[Entry] = []
        for _, path in self._due_files(now):  # the earliest due first
            if len(claimed) >= limit:
                break
            entry = self._read(path)
            if entry is None or entry.due > now:
                continue
            try:
                os.utime(path, (now, now))  # the claim's time, for _return_stale
                os.rename(path, self._working / path.name)  # one process wins
            except OSError:
                continue
            claimed.append(entry)
        return claimed

    async def claim(self, now: float, limit: int = 16) -> list[Entry]:
        return await asyncio.to_thread(self._claim, now, limit)

    # -- looking ---------------------------------------------------------------------------
    async def state(self, ident: str) -> State:
        if not valid_id(ident):
            return "unknown"
        if (self._sent / ident).exists():
            return "sent"
        if (self._failed / f"{ident}.json").exists():
            return "failed"
        if (self.folder / f"{ident}.json").exists() or (self._working / f"{ident}.json").exists():
            return "pending"
        return "unknown"

    def _next_due(self) -> float | None:
        found = self._due_files(None)
        return found[0][0] if found else None

    async def next_due(self) -> float | None:
        return await asyncio.to_thread(self._next_due)
