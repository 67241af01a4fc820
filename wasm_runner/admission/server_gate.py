"""The server's admission as the executor's ``Gate``: ``AdmissionGate``.

A run first takes its leases of the counts shared by every replica (``leases.Leases``: its user's
runs in flight, then its key's ``max_concurrent``), then a place of this replica's own admission
(``replica.Admission``: running cap, queue, memory budget). Every refusal is a ``Refused`` (429
with ``Retry-After``; ``503 draining`` while the replica drains), which the faces answer (the HTTP
face as JSON, ``http.errors``), and its code is told to ``on_refused`` (the server's metrics).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from ..execution.policy import CallerLike
from ..execution.refusal import Refused
from .gate import Ticket
from .leases import Leases
from .replica import Admission, Busy, ReplicaTicket

__all__ = ["AdmissionGate", "Opening"]

log = logging.getLogger("wasm_runner.admission")

_NO_LIMIT = 1 << 30  # a lease taken whatever the count (a parked run resuming)


class Opening(Protocol):
    """Whether this replica takes new work (``scaleout.drain.Lifecycle``): ``check_admit`` raises
    ``Refused`` (``503 draining``) once it drains, and ``draining`` says so."""

    @property
    def draining(self) -> bool: ...

    def check_admit(self) -> None: ...


class _LeasedTicket:
    """A run slot of this replica plus its leases in the counts shared by all replicas: its
    key's runs in flight, and its user's when it has one (none while the run is parked, waiting
    for input)."""

    def __init__(self, ticket: ReplicaTicket, leases: list[Ticket]) -> None:
        self.ticket = ticket
        self.leases = leases

    def drop_leases(self) -> None:
        leases, self.leases = self.leases, []
        for lease in leases:
            lease.release()

    def release(self) -> None:
        self.ticket.release()
        self.drop_leases()


def _who(tenant: CallerLike) -> str:
    return getattr(tenant, "who", "this API key")


def _user_name(tenant: CallerLike) -> str | None:
    return getattr(tenant, "user_name", None)


class AdmissionGate:
    """The server's admission as the executor's ``Gate``: a refusal becomes a ``Refused`` (429)
    and its code is told to ``on_refused`` (a metric).

    With shared state a run first takes a lease of its key's ``max_concurrent`` across the
    replicas (``leases``), then a slot of this replica's own admission; while the replica
    drains (``opening``), new work gets ``503 draining``."""

    def __init__(
        self,
        admission: Admission,
        on_refused: Callable[[str], None] | None = None,
        leases: Leases | None = None,
        opening: Opening | None = None,
    ) -> None:
        self.admission = admission
        self.on_refused = on_refused
        self.leases = leases
        self.opening = opening

    def _refused(self, code: str) -> None:
        if self.on_refused is not None:
            self.on_refused(code)

    def _check_admit(self) -> None:
        if self.opening is not None:
            self.opening.check_admit()

    async def acquire(self, tenant: CallerLike, memory_mb: int) -> Ticket:
        user = _user_name(tenant)
        user_max = getattr(tenant, "user_max_concurrent", 0)
        leases: list[Ticket] = []
        try:
            self._check_admit()
            if self.leases is not None:
                if user is not None:  # the user's place first: a refused user takes no key's
                    leases.append(await self._user_lease(tenant, user, user_max))
                leases.append(await self.leases.claim(
                    "run", tenant, tenant.max_concurrent, self.admission.retry_after()
                ))  # fmt: skip
                if self.opening is not None and self.opening.draining:  # the drain began while Redis answered
                    self._check_admit()
        except BaseException as exc:
            for lease in leases:
                lease.release()
            if isinstance(exc, Refused):
                self._refused(exc.code)
            raise
        try:
            ticket = await self.admission.acquire(
                tenant.name, memory_mb, tenant.max_concurrent,
                user=user, user_max=user_max, who=_who(tenant),
            )  # fmt: skip
        except BaseException as exc:
            for lease in leases:
                lease.release()
            if isinstance(exc, Busy):
                self._refused(exc.code)
                raise exc.refusal() from None
            raise
        return _LeasedTicket(ticket, leases) if self.leases is not None else ticket

    async def _user_lease(self, tenant: CallerLike, user: str, user_max: int) -> Ticket:
        assert self.leases is not None
        lease = await self.leases.take("run", user, user_max)
        if lease is None:
            raise Refused(
                429, "user_concurrency",
                f"this user already has {user_max} runs in flight across the replicas; wait for "
                f"one to finish (other users of {_who(tenant)} are not held back)",
                headers={"Retry-After": str(max(1, self.admission.retry_after()))},
            )  # fmt: skip
        return lease

    def reserve(self, tenant: CallerLike, memory_mb: int) -> Ticket:
        try:
            self._check_admit()
        except Refused as exc:
            self._refused(exc.code)
            raise
        try:
            return self.admission.reserve(tenant.name, memory_mb, who=_who(tenant))
        except Busy as exc:
            self._refused(exc.code)
            raise exc.refusal() from None

    def note_duration(self, seconds: float) -> None:
        self.admission.note_duration(seconds)

    def park(self, ticket: Ticket) -> bool:
        """A run waiting for input gives back its slot here and its lease of the key's runs in
        flight (every replica sees the place free at once); False: it keeps both."""
        leased = ticket if isinstance(ticket, _LeasedTicket) else None
        inner = leased.ticket if leased is not None else ticket
        if not isinstance(inner, ReplicaTicket) or not self.admission.park(inner):
            return False
        if leased is not None:
            leased.drop_leases()
        return True

    async def resume(self, ticket: Ticket, tenant: CallerLike) -> None:
        """A slot again, ahead of queued runs, and a lease again whatever the key's count (the
        run was admitted; Redis down: it runs on without one, as its lease would expire)."""
        leased = ticket if isinstance(ticket, _LeasedTicket) else None
        inner = leased.ticket if leased is not None else ticket
        if not isinstance(inner, ReplicaTicket):
            return
        await self.admission.resume(inner)
        if leased is None or self.leases is None or inner.released:
            return
        names = [n for n in (_user_name(tenant), tenant.name) if n is not None]
        taken: list[Ticket] = []
        try:
            for name in names:
                lease = await self.leases.take("run", name, _NO_LIMIT)
                if lease is not None:
                    taken.append(lease)
        except Refused:
            log.warning("a resumed run took no lease: shared state unavailable")
        if inner.released:  # ended meanwhile
            for lease in taken:
                lease.release()
        else:
            leased.leases = taken
