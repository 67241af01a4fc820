"""Short-lived download URLs for files a run wrote (``files_as: "url"``).

A file is kept in memory under an unguessable token for ``ttl`` seconds; the URL is a capability
(anyone holding it may fetch the file until it expires). The store has a byte budget and drops the
oldest files first.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["DownloadStore", "Download"]


@dataclass(frozen=True)
class Download:
    name: str
    content: bytes
    expires_at: float


class DownloadStore:
    """Token -> file, expiring after ``ttl`` seconds, at most ``max_bytes`` held at once."""

    def __init__(self, ttl: float, max_bytes: int) -> None:
        self.ttl = ttl
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, Download] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, name: str, content: bytes) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._expire(time.monotonic())
            while self._items and self._bytes + len(content) > self.max_bytes:
                _, old = self._items.popitem(last=False)
                self._bytes -= len(old.content)
            self._items[token] = Download(name, content, time.monotonic() + self.ttl)
            self._bytes += len(content)
        return token

    def get(self, token: str) -> Download | None:
        with self._lock:
            self._expire(time.monotonic())
            return self._items.get(token)

    def _expire(self, now: float) -> None:
        for token in [t for t, d in self._items.items() if d.expires_at <= now]:
            self._bytes -= len(self._items.pop(token).content)
