"""The browser tier's network: the same rules, caps and audit entries as the server tier's, the
requests made by this server on behalf of a run in a visitor's browser.

A browser-tier run has no host process of ours, so the page asks first (``POST
/api/network/runs``, authenticated with its API key and user like every API route): a caller
whose key and profile a ``[network.NAME]`` rule names gets a grant, a random token for one run
(``BrowserRuns.open``); a caller no rule names gets the sentence instead, and the guest raises
it for every request, as on the server tier. The page hands the token to the sandbox frame with
the run; the worker's network shim sends each request with it (``POST /api/network/fetch``, a
synchronous XMLHttpRequest from the worker), and the server makes it through the run's
``RunNetwork``: the destination matched, the name resolved and the address checked by the host,
the caps counted per grant (one grant per run), each request recorded. The key never reaches
the frame or the guest: the token opens only that run's network, until the grant's deadline (the
profile's wall limit). Grants live in this process (``MAX_OPEN`` at most, the oldest dropped
first): behind several replicas, a request that reaches another replica than the grant's is
refused as unknown (``docs/security.md``, "Network").
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .fetcher import NetworkRecord, RunNetwork
from .rules import NetworkRule

__all__ = ["MAX_OPEN", "BrowserGrant", "BrowserRuns"]

MAX_OPEN = 10_000  # grants held at once; the oldest goes first


@dataclass
class BrowserGrant:
    """One browser-tier run's network: who it is for (the key's name, the user's ``user_key``,
    the client's address), its ``RunNetwork`` and until when (``time.monotonic()``)."""

    run: str  # a short id of the grant for the audit log (never the token)
    tenant: str
    user: str | None
    client: str
    network: RunNetwork
    deadline: float


class BrowserRuns:
    """The grants this process gave, by token. ``on_request(grant, record)`` hears of every
    request (the audit log)."""

    def __init__(self, on_request: Callable[[BrowserGrant, NetworkRecord], None] | None = None,
                 max_open: int = MAX_OPEN) -> None:
        self.on_request = on_request
        self.max_open = max_open
        self._grants: OrderedDict[str, BrowserGrant] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, rules: Sequence[NetworkRule], *, tenant: str, user: str | None, client: str,
             seconds: float) -> str:
        """A token for one run under ``rules`` (not empty), valid for ``seconds``."""
        token = secrets.token_urlsafe(32)
        grant = BrowserGrant(secrets.token_hex(8), tenant, user, client, RunNetwork(tuple(rules)),
                             time.monotonic() + seconds)
        grant.network.on_request = lambda record: self._heard(grant, record)
        with self._lock:
            self._forget_expired()
            self._grants[token] = grant
            while len(self._grants) > self.max_open:
                self._grants.popitem(last=False)
        return token

    def get(self, token: str) -> BrowserGrant | None:
        """The grant of ``token`` while it lasts, else None."""
        with self._lock:
            grant = self._grants.get(token)
            if grant is not None and grant.deadline <= time.monotonic():
                del self._grants[token]
                return None
            return grant

    def __len__(self) -> int:
        with self._lock:
            return len(self._grants)

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for token in [t for t, g in self._grants.items() if g.deadline <= now]:
            del self._grants[token]

    def _heard(self, grant: BrowserGrant, record: NetworkRecord) -> None:
        if self.on_request is not None:
            self.on_request(grant, record)
