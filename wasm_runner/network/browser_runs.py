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
profile's wall limit).

Where grants live: in this process (``MAX_OPEN`` at most, the oldest dropped first) on one host;
with ``redis_url``, in Redis (``scaleout.state.SharedState``), so a request may reach any
replica. There a grant is kept under a hash of its token (never the token), expiring with it, and
names its rules (each replica has the same ``[network]`` tables); its caps are counted in Redis
too (``budget.SharedBudget``), so requests answered by several replicas share one run's caps.
Redis not answering refuses the request with a sentence (the guest's exception), never a hang.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .budget import MemoryBudget, RunBudget, SharedBudget, SharedCalls
from .fetcher import NetworkRecord, RunNetwork
from .rules import NetworkRule

__all__ = ["MAX_OPEN", "BrowserGrant", "BrowserRuns"]

MAX_OPEN = 10_000  # grants held at once in one process's memory; the oldest goes first


@dataclass
class BrowserGrant:
    """One browser-tier run's network: who it is for (the key's name, the user's ``user_key``,
    the client's address), its ``RunNetwork`` and until when (``time.monotonic()`` of this
    process)."""

    run: str  # a short id of the grant for the audit log (never the token)
    tenant: str
    user: str | None
    client: str
    network: RunNetwork
    deadline: float


@dataclass
class _Kept:
    """A grant as kept: its id, who, its rules' names, until when (``time.time()``)."""

    run: str
    tenant: str
    user: str | None
    client: str
    rules: tuple[str, ...]
    expires_at: float

    def to_json(self) -> str:
        return json.dumps({"run": self.run, "tenant": self.tenant, "user": self.user, "client": self.client,
                           "rules": list(self.rules), "expires_at": self.expires_at})

    @classmethod
    def from_json(cls, raw: bytes | str) -> _Kept | None:
        try:
            d: Any = json.loads(raw)
            return cls(str(d["run"]), str(d["tenant"]), None if d["user"] is None else str(d["user"]),
                       str(d["client"]), tuple(str(r) for r in d["rules"]), float(d["expires_at"]))
        except (ValueError, KeyError, TypeError):
            return None


def _token_key(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class BrowserRuns:
    """The grants given, by token: in this process, or in Redis with ``shared`` (every replica
    then answers every grant's requests). ``rules``: the server's ``[network]`` rules by name
    (a replica finds a grant's rules by their names); ``on_request(grant, record)`` hears of every
    request (the audit log)."""

    def __init__(self, on_request: Callable[[BrowserGrant, NetworkRecord], None] | None = None,
                 max_open: int = MAX_OPEN, *, shared: SharedCalls | None = None,
                 rules: Mapping[str, NetworkRule] | None = None) -> None:
        self.on_request = on_request
        self.max_open = max_open
        self.shared = shared
        self._rules: dict[str, NetworkRule] = dict(rules or {})
        self._grants: OrderedDict[str, _Kept] = OrderedDict()
        self._budgets: dict[str, MemoryBudget] = {}
        self._lock = threading.Lock()

    async def open(self, rules: Sequence[NetworkRule], *, tenant: str, user: str | None, client: str,
                   seconds: float) -> str:
        """A token for one run under ``rules`` (not empty), valid for ``seconds``;
        ``SharedStateUnavailable`` (a 503) when the grant cannot be kept in Redis."""
        token = secrets.token_urlsafe(32)
        kept = _Kept(secrets.token_hex(8), tenant, user, client, tuple(r.name for r in rules), time.time() + seconds)
        with self._lock:
            for rule in rules:
                self._rules.setdefault(rule.name, rule)
        if self.shared is not None:
            if seconds > 0:  # an instant grant is expired already: nothing to keep
                op = self.shared.redis.set(self.shared.key("netgrant", _token_key(token)), kept.to_json(),
                                           px=max(1, int(seconds * 1000)))
                await self.shared.call(op, "the browser runs' network grants")
            return token
        with self._lock:
            self._forget_expired()
            self._grants[token] = kept
            self._budgets[kept.run] = MemoryBudget()
            while len(self._grants) > self.max_open:
                _, dropped = self._grants.popitem(last=False)
                self._budgets.pop(dropped.run, None)
        return token

    async def get(self, token: str) -> BrowserGrant | None:
        """The grant of ``token`` while it lasts, else None; ``SharedStateUnavailable`` when
        Redis does not answer."""
        budget: RunBudget
        if self.shared is not None:
            raw = await self.shared.call(self.shared.redis.get(self.shared.key("netgrant", _token_key(token))),
                                         "the browser runs' network grants")
            kept = None if raw is None else _Kept.from_json(raw)
            if kept is None or kept.expires_at <= time.time():
                return None
            budget = SharedBudget(self.shared, kept.run, kept.expires_at)
        else:
            with self._lock:
                found = self._grants.get(token)
                if found is not None and found.expires_at <= time.time():
                    del self._grants[token]
                    self._budgets.pop(found.run, None)
                    found = None
                if found is None:
                    return None
                kept, budget = found, self._budgets[found.run]
        with self._lock:
            rules = tuple(self._rules[name] for name in kept.rules if name in self._rules)
        if not rules:  # the grant's rules are gone from this replica's configuration
            return None
        grant = BrowserGrant(kept.run, kept.tenant, kept.user, kept.client, RunNetwork(rules, budget=budget),
                             time.monotonic() + (kept.expires_at - time.time()))
        grant.network.on_request = lambda record: self._heard(grant, record)
        return grant

    def __len__(self) -> int:
        """The grants held in this process (none with Redis)."""
        with self._lock:
            return len(self._grants)

    def _forget_expired(self) -> None:
        now = time.time()
        for token in [t for t, g in self._grants.items() if g.expires_at <= now]:
            self._budgets.pop(self._grants.pop(token).run, None)

    def _heard(self, grant: BrowserGrant, record: NetworkRecord) -> None:
        if self.on_request is not None:
            self.on_request(grant, record)
