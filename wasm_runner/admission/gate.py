"""Admission, as the executor sees it: the ``Gate`` that admits runs and holds memory for sessions,
the ``Ticket`` it hands out, and the ``Claims`` of counts shared with other processes.

A server's admission implements these (``server_gate.AdmissionGate``; the cross-replica
``leases.Leases``, in Redis ``scaleout.leases.RedisLeases``); an executor without a gate (the CLI,
MCP over stdio, Python callers) admits every run.
"""

from __future__ import annotations

from typing import Protocol

from ..execution.policy import CallerLike

__all__ = ["Claims", "Gate", "Ticket"]


class Ticket(Protocol):
    """A held run slot or memory reservation; ``release`` is idempotent."""

    def release(self) -> None: ...


class Gate(Protocol):
    """Admission (``replica.Admission`` behind the server's ``server_gate.AdmissionGate``). Refuses with
    ``Refused`` (status 429) when there is no room.

    ``park`` gives a run's slot (and its caller's in-flight place) back while the run waits for
    interactive input, keeping its memory; False when there is no room for one more waiting run
    (it keeps its slot). ``resume`` takes a slot again for a parked run, ahead of new runs; it
    never refuses. Both are called on the event loop."""

    async def acquire(self, tenant: CallerLike, memory_mb: int) -> Ticket: ...

    def reserve(self, tenant: CallerLike, memory_mb: int) -> Ticket: ...

    def park(self, ticket: Ticket) -> bool: ...

    async def resume(self, ticket: Ticket, tenant: CallerLike) -> None: ...

    def note_duration(self, seconds: float) -> None: ...


class Claims(Protocol):
    """Counts shared with other processes (the server's leases, ``leases.Leases``, when several
    replicas share one store): ``claim`` holds one of ``kind`` (``session``) for ``tenant`` and returns
    a ticket to release, or raises ``Refused`` when ``tenant`` already holds ``limit``."""

    async def claim(self, kind: str, tenant: CallerLike, limit: int) -> Ticket: ...
