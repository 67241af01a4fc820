"""Short-lived download URLs for files a run wrote (``files_as: "url"``).

A file is kept in memory under an unguessable token for ``ttl`` seconds; the URL is a capability
(anyone holding it may fetch the file until it expires). The store holds at most ``max_bytes``, and
each tenant at most ``tenant_bytes`` of it: a tenant over its quota loses its own oldest links, and
when the store is full the links dropped are those of a tenant holding more than the one adding
(else the adder's own), so no tenant can evict another's links by filling the store. A file that
gets no room (larger than the quota, or a store full of others' smaller holdings) gets no link:
``put`` returns None and the caller sends it inline.
The tenant is the key a link is counted against (the HTTP face passes the caller's).

With several replicas (``redis_url``) every link is also registered in the download directory
(``scaleout/directory.py``), so ``GET /api/files/<token>`` works on any replica: the others pass it
to this one (``relay.py``). A link that cannot be registered (Redis down) is not handed out: the file is sent
inline instead, so no link works on only some replicas.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from .scaleout.directory import Directory, LocalDirectory

__all__ = ["DownloadStore", "Download"]


@dataclass(frozen=True)
class Download:
    name: str
    content: bytes
    expires_at: float
    tenant: str = ""


class DownloadStore:
    """Token -> file, expiring after ``ttl`` seconds, at most ``max_bytes`` held at once and
    ``tenant_bytes`` per tenant."""

    def __init__(
        self,
        ttl: float,
        max_bytes: int,
        tenant_bytes: int | None = None,
        directory: Directory | None = None,
    ) -> None:
        self.ttl = ttl
        self.directory = directory or LocalDirectory()
        self.max_bytes = max_bytes
        self.tenant_bytes = min(tenant_bytes or max_bytes, max_bytes)
        self._items: OrderedDict[str, Download] = OrderedDict()
        self._bytes = 0
        self._by_tenant: dict[str, int] = {}
        self._lock = threading.Lock()

    def held_by(self, tenant: str) -> int:
        with self._lock:
            return self._by_tenant.get(tenant, 0)

    def put(self, name: str, content: bytes, tenant: str) -> str | None:
        """A token for ``content``, or None when it is larger than one tenant's quota."""
        size = len(content)
        if size > self.tenant_bytes:
            return None
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._expire(time.monotonic())
            while self._by_tenant.get(tenant, 0) + size > self.tenant_bytes:
                self._drop_oldest_of(tenant)
            while self._bytes + size > self.max_bytes:
                mine = self._by_tenant.get(tenant, 0) + size
                others = [t for t, held in self._by_tenant.items() if t != tenant and held > mine]
                if others:  # someone holds more than the adder will: their oldest link goes
                    self._drop_oldest_of(max(others, key=self._by_tenant.__getitem__))
                elif self._by_tenant.get(tenant, 0):
                    self._drop_oldest_of(tenant)
                else:
                    return None  # full of others' smaller holdings: nobody is evicted for this
            self._items[token] = Download(name, content, time.monotonic() + self.ttl, tenant)
            self._bytes += size
            self._by_tenant[tenant] = self._by_tenant.get(tenant, 0) + size
        if not self.directory.put_download(token, tenant, self.ttl):
            with self._lock:
                if token in self._items:
                    self._remove(token)
            return None
        return token

    def get(self, token: str) -> Download | None:
        with self._lock:
            self._expire(time.monotonic())
            return self._items.get(token)

    def links(self) -> list[tuple[str, str, float]]:
        """``(token, tenant, seconds left)`` of every live link (to publish them again)."""
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            return [(t, d.tenant, d.expires_at - now) for t, d in self._items.items()]

    def _drop_oldest_of(self, tenant: str) -> None:
        for token, item in self._items.items():
            if item.tenant == tenant:
                self._remove(token)
                return
        raise AssertionError("no link of this tenant to drop")  # unreachable: quotas add up

    def _remove(self, token: str) -> None:
        item = self._items.pop(token)
        self._bytes -= len(item.content)
        left = self._by_tenant[item.tenant] - len(item.content)
        if left > 0:
            self._by_tenant[item.tenant] = left
        else:
            del self._by_tenant[item.tenant]

    def _expire(self, now: float) -> None:
        for token in [t for t, d in self._items.items() if d.expires_at <= now]:
            self._remove(token)
