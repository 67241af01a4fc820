"""This replica's admission: a global cap on running guests and on the memory they hold, a bounded
wait queue, and a per-tenant cap on runs in flight.

A request that cannot run now waits in the queue (first come, first served); when the queue is full,
its tenant already has ``max_concurrent`` runs in flight, or it waited ``queue_timeout`` seconds, it
is refused with ``Busy`` (the server's gate refuses it as ``Busy.refusal()``, a ``Refused`` 429
with ``Retry-After``, which the faces answer). Sessions reserve their
memory for their whole life with ``reserve`` (refused at once when the budget is spent).
All methods run on the event loop thread; ``ReplicaTicket.release`` is idempotent.

A run waiting for interactive input (``input()`` over the WebSocket) is *parked* with ``park``:
it gives back its run slot and its place among its tenant's runs in flight, keeps its memory, and
counts against the bounds of waiting runs instead (``max_waiting`` in all, ``tenant_waiting`` per
tenant; when they are full it keeps its slot, as before parking existed). When its input arrives,
``resume`` gives it a slot again ahead of every queued run (it was admitted already; it is in the
middle of a run, and its student is looking at it).

Fair shares, so one key cannot hold the whole server: a tenant's sessions (memory held for up to
an hour) may hold at most ``tenant_memory_mb`` with its runs; a tenant takes at most
``tenant_queue`` places in the queue; and while other tenants wait, a run that would take its
tenant over ``tenant_memory_mb`` waits behind them (with nobody else waiting it runs: runs end
within their wall-clock limit, so the share is only enforced when someone needs it).

``Retry-After`` tells the truth: a memory refusal says when enough memory will be free, from what
holds it now (a running guest: the mean run time; a session: when it expires, from the ticket's
``expires_in``, else ``hold_seconds``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import WasmRunnerError
from ..execution.refusal import Refused

__all__ = ["Admission", "Busy", "ReplicaTicket"]


class Busy(WasmRunnerError):
    """No room now. ``code`` says why; ``retry_after`` is a whole number of seconds."""

    def __init__(self, code: str, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after

    def refusal(self) -> Refused:
        """This refusal as every face answers it: ``429``, its code, ``Retry-After``."""
        return Refused(429, self.code, self.message, headers={"Retry-After": str(self.retry_after)})


@dataclass(eq=False)
class ReplicaTicket:
    """One admitted guest (a run slot, or a session's memory reservation)."""

    admission: Admission
    tenant: str
    memory_mb: int
    slot: bool
    released: bool = False
    user: str | None = None  # the user inside the tenant this run is for (counted per user)
    parked: bool = False  # a run slot given back while the run waits for input (``park``)
    # seconds from a ``time.monotonic()`` value until this ticket is released (sessions set it)
    expires_in: Callable[[float], float] | None = field(default=None, repr=False)

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.admission._release(self)


@dataclass(eq=False)
class _Waiter:
    tenant: str
    memory_mb: int
    future: asyncio.Future[ReplicaTicket] = field(repr=False)
    user: str | None = None


@dataclass(eq=False)
class _Resumer:
    ticket: ReplicaTicket
    future: asyncio.Future[None] = field(repr=False)


class Admission:
    """Gatekeeper for guests: at most ``max_running`` run at once within ``memory_budget_mb``."""

    def __init__(
        self,
        max_running: int,
        max_queue: int,
        memory_budget_mb: int,
        queue_timeout: float = 30.0,
        *,
        tenant_memory_mb: int | None = None,
        tenant_queue: int | None = None,
        hold_seconds: float = 300.0,
        max_waiting: int = 256,
        tenant_waiting: int | None = None,
    ) -> None:
        self.max_running = max_running
        self.max_queue = max_queue
        self.memory_budget_mb = memory_budget_mb
        self.queue_timeout = queue_timeout
        self.running = 0
        self.memory_mb = 0  # held by running guests and live sessions
        self.server_mb = 0  # held by the server itself (hold_for_server), never released
        self._in_flight: dict[str, int] = {}
        self._user_in_flight: dict[str, int] = {}  # per user inside a tenant (tenant/user/...)
        self._queue: deque[_Waiter] = deque()
        self._mean_run_seconds = 1.0
        self.tenant_memory_mb = tenant_memory_mb or memory_budget_mb
        self.tenant_queue = max_queue if tenant_queue is None else tenant_queue
        self.hold_seconds = hold_seconds  # how long a reservation without expires_in may last
        self._tenant_memory: dict[str, int] = {}
        self._tickets: set[ReplicaTicket] = set()
        # parked runs: waiting for interactive input, holding memory but no slot
        self.max_waiting = max_waiting
        self.tenant_waiting = max_waiting if tenant_waiting is None else tenant_waiting
        self.parked = 0
        self._parked: dict[str, int] = {}
        self._resuming: deque[_Resumer] = deque()  # parked runs whose input came, in order

    def set_shares(
        self, tenant_memory_mb: int, tenant_queue: int, hold_seconds: float | None = None
    ) -> None:
        """Per-tenant shares: memory one tenant may hold, queue places it may take."""
        self.tenant_memory_mb = tenant_memory_mb
        self.tenant_queue = tenant_queue
        if hold_seconds is not None:
            self.hold_seconds = hold_seconds

    def hold_for_server(self, memory_mb: int) -> None:
        """Memory the server holds of the budget for as long as it runs: instances started ahead
        of time and what the instance allocator keeps resident (``memory.server_memory_mb``)."""
        self.server_mb = max(0, memory_mb)

    @property
    def room_mb(self) -> int:
        """The budget guests and sessions may hold: ``memory_budget_mb`` less the server's."""
        return self.memory_budget_mb - self.server_mb

    def tenant_memory(self, tenant: str) -> int:
        return self._tenant_memory.get(tenant, 0)

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def in_flight(self, tenant: str) -> int:
        return self._in_flight.get(tenant, 0)

    def user_in_flight(self, user: str) -> int:
        return self._user_in_flight.get(user, 0)

    def parked_for(self, tenant: str) -> int:
        """``tenant``'s runs parked now (waiting for interactive input)."""
        return self._parked.get(tenant, 0)

    @property
    def resuming(self) -> int:
        """Parked runs whose input arrived, waiting for a slot (ahead of the queue)."""
        return len(self._resuming)

    def note_duration(self, seconds: float) -> None:
        """Feed a finished run's duration into the ``Retry-After`` estimate."""
        self._mean_run_seconds = 0.8 * self._mean_run_seconds + 0.2 * max(seconds, 0.01)

    def retry_after(self) -> int:
        rounds = (self.waiting + self.running) / max(self.max_running, 1)
        return max(1, math.ceil(rounds * self._mean_run_seconds))

    def _fits(self, memory_mb: int, tenant: str | None = None) -> bool:
        return (
            self.running < self.max_running
            and self.memory_mb + memory_mb <= self.room_mb
            and (tenant is None or self.tenant_memory(tenant) + memory_mb <= self.tenant_memory_mb)
        )

    def memory_retry_after(self, memory_mb: int, tenant: str | None = None) -> int:
        """Seconds until ``memory_mb`` could fit (in the budget, or in ``tenant``'s share), from
        when the tickets holding memory now are expected to be released."""
        now = time.monotonic()
        if tenant is None:
            need = self.memory_mb + memory_mb - self.room_mb
        else:
            need = self.tenant_memory(tenant) + memory_mb - self.tenant_memory_mb
        if need <= 0:
            return 1
        releases = []
        for ticket in self._tickets:
            if tenant is not None and ticket.tenant != tenant or ticket.memory_mb <= 0:
                continue
            if ticket.expires_in is not None:
                seconds = ticket.expires_in(now)
            else:
                seconds = self._mean_run_seconds if ticket.slot else self.hold_seconds
            releases.append((max(0.0, seconds), ticket.memory_mb))
        freed = 0
        for seconds, memory in sorted(releases):
            freed += memory
            if freed >= need:
                return max(1, math.ceil(seconds))
        return max(1, math.ceil(self.hold_seconds))

    async def acquire(
        self,
        tenant: str,
        memory_mb: int,
        max_concurrent: int,
        *,
        user: str | None = None,
        user_max: int = 0,
        who: str = "this API key",
    ) -> ReplicaTicket:
        """A run slot for ``tenant`` (and its ``user``, who may have ``user_max`` runs in flight
        inside the tenant's ``max_concurrent``); waits in the queue or raises ``Busy``. A user
        over its cap is refused before anything is counted for the tenant. ``who`` names the
        tenant in refusals ("this API key", or "this client" without keys)."""
        if memory_mb > self.room_mb:
            raise Busy(
                "memory_budget",
                f"the run asks for {memory_mb} MB, more than the server's memory budget",
                60,
            )
        if user is not None and self.user_in_flight(user) >= user_max:
            raise Busy(
                "user_concurrency",
                f"this user already has {user_max} runs in flight; wait for one to finish "
                f"(other users of {who} are not held back)",
                self.retry_after(),
            )
        if self.in_flight(tenant) >= max_concurrent:
            raise Busy(
                "tenant_concurrency",
                f"{who} already has {max_concurrent} runs in flight; wait for one to finish",
                self.retry_after(),
            )
        if memory_mb > self.tenant_memory_mb:
            raise Busy(
                "memory_budget",
                f"the run asks for {memory_mb} MB, more than one key's share of the memory "
                f"budget ({self.tenant_memory_mb} MB)",
                60,
            )
        self._in_flight[tenant] = self.in_flight(tenant) + 1
        if user is not None:
            self._count_user(user, +1)
        try:
            if not self._queue and not self._resuming and self._fits(memory_mb):
                return self._admit(tenant, memory_mb, user)  # nobody waits: no share to protect
            if len(self._queue) >= self.max_queue:
                raise Busy(
                    "queue_full", "the server is busy and its queue is full", self.retry_after()
                )
            if sum(1 for w in self._queue if w.tenant == tenant) >= self.tenant_queue:
                raise Busy(
                    "tenant_queue",
                    f"{who} already holds its {self.tenant_queue} places in the queue",
                    self.retry_after(),
                )
            waiter = _Waiter(tenant, memory_mb, asyncio.get_running_loop().create_future(), user)
            self._queue.append(waiter)
            try:
                await asyncio.wait_for(asyncio.shield(waiter.future), self.queue_timeout)
            except (TimeoutError, asyncio.CancelledError) as exc:
                if waiter.future.done() and not waiter.future.cancelled():
                    # admitted just as we gave up: hand the slot straight back
                    self._release(waiter.future.result(), count_in_flight=False)
                else:
                    waiter.future.cancel()
                    self._queue.remove(waiter)
                if isinstance(exc, asyncio.CancelledError):
                    raise
                retry = self.retry_after()
                if self.memory_mb + memory_mb > self.room_mb:
                    retry = max(retry, self.memory_retry_after(memory_mb))
                elif self.tenant_memory(tenant) + memory_mb > self.tenant_memory_mb:
                    retry = max(retry, self.memory_retry_after(memory_mb, tenant))
                raise Busy(
                    "queue_timeout",
                    f"the run waited {self.queue_timeout:g} s in the queue without a free slot",
                    retry,
                ) from None
            return waiter.future.result()
        except BaseException:
            self._count_in_flight(tenant, -1)
            if user is not None:
                self._count_user(user, -1)
            raise

    def park(self, ticket: ReplicaTicket) -> bool:
        """Give back ``ticket``'s run slot and its tenant's in-flight place while the run waits
        for input; its memory stays held. False (nothing changes: the run keeps its slot) when
        it is not a running slot or the bounds of waiting runs are full."""
        if ticket.released or not ticket.slot or ticket.parked or ticket not in self._tickets:
            return False
        if self.parked >= self.max_waiting or self.parked_for(ticket.tenant) >= self.tenant_waiting:
            return False
        ticket.parked = True
        self.running -= 1
        self._count_in_flight(ticket.tenant, -1)
        if ticket.user is not None:
            self._count_user(ticket.user, -1)
        self.parked += 1
        self._parked[ticket.tenant] = self.parked_for(ticket.tenant) + 1
        self._wake()
        return True

    async def resume(self, ticket: ReplicaTicket) -> None:
        """A run slot again for a parked ``ticket``, ahead of every queued run (no refusal: the
        run was admitted; runs end within their limits, so a slot comes). Cancel-safe: a
        cancelled resume leaves the ticket parked, and ``release`` ends it either way."""
        if not ticket.parked or ticket.released:
            return
        if not self._resuming and self.running < self.max_running:
            self._unpark(ticket)
            return
        resumer = _Resumer(ticket, asyncio.get_running_loop().create_future())
        self._resuming.append(resumer)
        try:
            await asyncio.shield(resumer.future)
        except asyncio.CancelledError:
            if not resumer.future.done():
                resumer.future.cancel()
                self._resuming.remove(resumer)
            raise

    def _unpark(self, ticket: ReplicaTicket) -> None:
        ticket.parked = False
        self.running += 1
        self._count_in_flight(ticket.tenant, +1)
        if ticket.user is not None:
            self._count_user(ticket.user, +1)
        self.parked -= 1
        self._count_parked(ticket.tenant, -1)

    def _count_in_flight(self, tenant: str, step: int) -> None:
        left = self.in_flight(tenant) + step
        if left > 0:
            self._in_flight[tenant] = left
        else:
            self._in_flight.pop(tenant, None)

    def _count_user(self, user: str, step: int) -> None:
        left = self.user_in_flight(user) + step
        if left > 0:
            self._user_in_flight[user] = left
        else:
            self._user_in_flight.pop(user, None)

    def _count_parked(self, tenant: str, step: int) -> None:
        left = self.parked_for(tenant) + step
        if left > 0:
            self._parked[tenant] = left
        else:
            self._parked.pop(tenant, None)

    def reserve(
        self,
        tenant: str,
        memory_mb: int,
        expires_in: Callable[[float], float] | None = None,
        who: str = "this API key",
    ) -> ReplicaTicket:
        """Hold ``memory_mb`` of the budget (for a session) without taking a run slot.
        ``expires_in(now)`` (optional, may be set on the ticket later) says when it ends."""
        if self.memory_mb + memory_mb > self.room_mb:
            raise Busy(
                "memory_budget",
                "the server's memory budget is held by other runs and sessions",
                self.memory_retry_after(memory_mb),
            )
        if self.tenant_memory(tenant) + memory_mb > self.tenant_memory_mb:
            raise Busy(
                "tenant_memory",
                f"{who} already holds {self.tenant_memory(tenant)} MB of its "
                f"{self.tenant_memory_mb} MB share of the memory budget; end a session first",
                self.memory_retry_after(memory_mb, tenant),
            )
        return self._hold(ReplicaTicket(self, tenant, memory_mb, slot=False, expires_in=expires_in))

    def _hold(self, ticket: ReplicaTicket) -> ReplicaTicket:
        if ticket.slot:
            self.running += 1
        self.memory_mb += ticket.memory_mb
        self._tenant_memory[ticket.tenant] = self.tenant_memory(ticket.tenant) + ticket.memory_mb
        self._tickets.add(ticket)
        return ticket

    def _admit(self, tenant: str, memory_mb: int, user: str | None = None) -> ReplicaTicket:
        return self._hold(ReplicaTicket(self, tenant, memory_mb, slot=True, user=user))

    def _release(self, ticket: ReplicaTicket, count_in_flight: bool = True) -> None:
        ticket.released = True
        if ticket not in self._tickets:
            return
        self._tickets.discard(ticket)
        if ticket.parked:  # ended while waiting for input (abandoned, cancelled, disconnected)
            self.parked -= 1
            self._count_parked(ticket.tenant, -1)
            for resumer in [r for r in self._resuming if r.ticket is ticket]:
                self._resuming.remove(resumer)
                resumer.future.cancel()
        elif ticket.slot:
            self.running -= 1
            if count_in_flight:
                self._count_in_flight(ticket.tenant, -1)
                if ticket.user is not None:
                    self._count_user(ticket.user, -1)
        self.memory_mb -= ticket.memory_mb
        left = self.tenant_memory(ticket.tenant) - ticket.memory_mb
        if left > 0:
            self._tenant_memory[ticket.tenant] = left
        else:
            self._tenant_memory.pop(ticket.tenant, None)
        self._wake()

    def _wake(self) -> None:
        """Give slots back to resuming parked runs first (their memory is held already), then
        admit waiters in order while they fit. A waiter whose tenant would go over its share
        is passed over while another tenant waits (it is admitted when nobody else does); one that
        does not fit the budget stops the scan (first come, first served for big requests)."""
        while self._resuming and self.running < self.max_running:
            resumer = self._resuming.popleft()
            if resumer.future.done() or not resumer.ticket.parked:
                continue
            self._unpark(resumer.ticket)
            resumer.future.set_result(None)
        if self._resuming:
            return
        for waiter in list(self._queue):
            if waiter.future.done():
                self._queue.remove(waiter)
                continue
            if self.running >= self.max_running:
                return
            over_share = (
                self.tenant_memory(waiter.tenant) + waiter.memory_mb > self.tenant_memory_mb
            )
            if over_share and any(
                w.tenant != waiter.tenant and not w.future.done() for w in self._queue
            ):
                continue
            if self.memory_mb + waiter.memory_mb > self.room_mb:
                return
            self._queue.remove(waiter)
            waiter.future.set_result(self._admit(waiter.tenant, waiter.memory_mb, waiter.user))
