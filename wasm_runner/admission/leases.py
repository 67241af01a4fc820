"""The cross-replica counts as admission sees them: ``Leases``, a key's (or a user's) runs in flight
and open sessions counted across every replica that shares one store, each held as a ``Ticket``.

Admission depends only on this protocol. Its implementation needs scale-out's shared state, so it
lives there: ``wasm_runner.scaleout.leases.RedisLeases`` (sorted sets in Redis, kept alive by their
owner, dropped with a dead replica's heartbeat). With one host there are none (``None``): every
count is this replica's own (``replica.Admission``).
"""

from __future__ import annotations

from typing import Protocol

from ..execution.policy import CallerLike
from .gate import Claims, Ticket

__all__ = ["Leases"]


class Leases(Claims, Protocol):
    """Per-key counts shared with the other replicas, each held as a lease (a ``Ticket``: its
    ``release`` is sync and idempotent).

    ``take`` holds one of ``kind`` (``run`` or ``session``) for ``tenant`` (a key's or a user's
    name) when it holds fewer than ``limit`` across the replicas, else None; ``claim`` is the same
    for a caller, or raises ``Refused`` (429) at the limit (the executor's ``Claims``);
    ``release_all`` releases every lease this replica holds (the drain, shutdown). Each raises
    ``Refused`` (503) when the shared store does not answer."""

    async def take(self, kind: str, tenant: str, limit: int) -> Ticket | None: ...

    async def claim(self, kind: str, tenant: CallerLike, limit: int, retry_after: int = 30) -> Ticket: ...

    async def release_all(self) -> None: ...
