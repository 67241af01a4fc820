"""Admission: a global cap on running guests and on the memory they hold, a bounded wait queue,
and a per-tenant cap on runs in flight.

A request that cannot run now waits in the queue (first come, first served); when the queue is full,
its tenant already has ``max_concurrent`` runs in flight, or it waited ``queue_timeout`` seconds, it
is refused with ``Busy`` (the routes answer ``429`` with ``Retry-After``). Sessions reserve their
memory for their whole life with ``reserve`` (refused at once when the budget is spent).
All methods run on the event loop thread; ``Ticket.release`` is idempotent.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass, field

__all__ = ["Admission", "Busy", "Ticket"]


class Busy(Exception):
    """No room now. ``code`` says why; ``retry_after`` is a whole number of seconds."""

    def __init__(self, code: str, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


@dataclass(eq=False)
class Ticket:
    """One admitted guest (a run slot, or a session's memory reservation)."""

    admission: Admission
    tenant: str
    memory_mb: int
    slot: bool
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.admission._release(self)


@dataclass(eq=False)
class _Waiter:
    tenant: str
    memory_mb: int
    future: asyncio.Future[None] = field(repr=False)


class Admission:
    """Gatekeeper for guests: at most ``max_running`` run at once within ``memory_budget_mb``."""

    def __init__(
        self,
        max_running: int,
        max_queue: int,
        memory_budget_mb: int,
        queue_timeout: float = 30.0,
    ) -> None:
        self.max_running = max_running
        self.max_queue = max_queue
        self.memory_budget_mb = memory_budget_mb
        self.queue_timeout = queue_timeout
        self.running = 0
        self.memory_mb = 0  # held by running guests and live sessions
        self._in_flight: dict[str, int] = {}
        self._queue: deque[_Waiter] = deque()
        self._mean_run_seconds = 1.0

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def in_flight(self, tenant: str) -> int:
        return self._in_flight.get(tenant, 0)

    def note_duration(self, seconds: float) -> None:
        """Feed a finished run's duration into the ``Retry-After`` estimate."""
        self._mean_run_seconds = 0.8 * self._mean_run_seconds + 0.2 * max(seconds, 0.01)

    def retry_after(self) -> int:
        rounds = (self.waiting + self.running) / max(self.max_running, 1)
        return max(1, math.ceil(rounds * self._mean_run_seconds))

    def _fits(self, memory_mb: int) -> bool:
        return (
            self.running < self.max_running and self.memory_mb + memory_mb <= self.memory_budget_mb
        )

    async def acquire(self, tenant: str, memory_mb: int, max_concurrent: int) -> Ticket:
        """A run slot for ``tenant``; waits in the queue or raises ``Busy``."""
        if memory_mb > self.memory_budget_mb:
            raise Busy(
                "memory_budget",
                f"the run asks for {memory_mb} MB, more than the server's memory budget",
                60,
            )
        if self.in_flight(tenant) >= max_concurrent:
            raise Busy(
                "tenant_concurrency",
                f"this API key already has {max_concurrent} runs in flight; wait for one to finish",
                self.retry_after(),
            )
        self._in_flight[tenant] = self.in_flight(tenant) + 1
        try:
            if not self._queue and self._fits(memory_mb):
                return self._admit(tenant, memory_mb)
            if len(self._queue) >= self.max_queue:
                raise Busy(
                    "queue_full", "the server is busy and its queue is full", self.retry_after()
                )
            waiter = _Waiter(tenant, memory_mb, asyncio.get_running_loop().create_future())
            self._queue.append(waiter)
            try:
                await asyncio.wait_for(asyncio.shield(waiter.future), self.queue_timeout)
            except (TimeoutError, asyncio.CancelledError) as exc:
                if waiter.future.done() and not waiter.future.cancelled():
                    # admitted just as we gave up: hand the slot straight back
                    self._give_back(memory_mb)
                else:
                    waiter.future.cancel()
                    self._queue.remove(waiter)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                raise Busy(
                    "queue_timeout",
                    f"the run waited {self.queue_timeout:g} s in the queue without a free slot",
                    self.retry_after(),
                ) from None
            return Ticket(self, tenant, memory_mb, slot=True)
        except BaseException:
            self._in_flight[tenant] -= 1
            raise

    def reserve(self, tenant: str, memory_mb: int) -> Ticket:
        """Hold ``memory_mb`` of the budget (for a session) without taking a run slot."""
        if self.memory_mb + memory_mb > self.memory_budget_mb:
            raise Busy(
                "memory_budget",
                "the server's memory budget is held by other runs and sessions",
                self.retry_after(),
            )
        self.memory_mb += memory_mb
        return Ticket(self, tenant, memory_mb, slot=False)

    def _admit(self, tenant: str, memory_mb: int) -> Ticket:
        self.running += 1
        self.memory_mb += memory_mb
        return Ticket(self, tenant, memory_mb, slot=True)

    def _give_back(self, memory_mb: int) -> None:
        self.running -= 1
        self.memory_mb -= memory_mb
        self._wake()

    def _release(self, ticket: Ticket) -> None:
        if ticket.slot:
            self._in_flight[ticket.tenant] -= 1
            if not self._in_flight[ticket.tenant]:
                del self._in_flight[ticket.tenant]
            self._give_back(ticket.memory_mb)
        else:
            self.memory_mb -= ticket.memory_mb
            self._wake()

    def _wake(self) -> None:
        """Admit waiters in order while the head of the queue fits."""
        while self._queue:
            head = self._queue[0]
            if head.future.done():
                self._queue.popleft()
                continue
            if not self._fits(head.memory_mb):
                return
            self._queue.popleft()
            self.running += 1
            self.memory_mb += head.memory_mb
            head.future.set_result(None)
