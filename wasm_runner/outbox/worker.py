"""``Worker``: the loop over a store. ``put`` keeps a payload (the caller answers at once);
``run_forever`` (the server's lifetime) claims the due entries and hands each to the caller's
``send``. ``send`` returning is sent (``done``); raising ``NotYet`` tries again after
``retry_seconds``, doubled each time up to ``retry_max_seconds`` (plus up to ``jitter`` of it),
until ``max_attempts`` (then given up, kept aside); raising ``Undeliverable`` keeps it aside at
once. Any other error is a bug that must not lose the entry: logged, tried again like ``NotYet``.
A server that stops mid-send puts the entry back for the next start. Each outcome goes to
``report`` (the caller's audit line or log)."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ..errors import WasmRunnerError
from .store import Entry, State, Store

__all__ = ["NotYet", "Outcome", "Undeliverable", "Worker"]

log = logging.getLogger("wasm_runner.outbox")
Outcome = Literal["sent", "retry", "gave_up", "undeliverable"]
# (outcome, the entry, what the receiver said or why, the exception when there was one)
Report = Callable[[Outcome, Entry, str, BaseException | None], None]


class NotYet(WasmRunnerError):
    """This attempt failed (the receiver down, slow, an error status): tried again later."""


class Undeliverable(WasmRunnerError):
    """Never to be sent (refused for good, no longer wanted): kept aside, not tried again."""


def _no_report(outcome: Outcome, entry: Entry, detail: str, error: BaseException | None) -> None:
    pass


class Worker:
    def __init__(self, store: Store, send: Callable[[Entry], Awaitable[str]], *, name: str,
                 retry_seconds: float, retry_max_seconds: float, max_attempts: int | None = None,
                 jitter: float = 0.0, parallel: bool = False, poll_seconds: float = 1.0,
                 report: Report = _no_report) -> None:  # fmt: skip
        self.store = store
        self._send = send
        self.name = name
        self.retry_seconds = retry_seconds
        self.retry_max_seconds = retry_max_seconds
        self.max_attempts = max_attempts
        self.jitter = jitter
        self.parallel = parallel  # send the claimed entries at once (else one after the other, in order)
        self.poll_seconds = poll_seconds  # the longest sleep: other replicas put entries too
        self.report = report
        self.wake = asyncio.Event()

    def __repr__(self) -> str:
        return f"Worker({self.name}, {self.store!r})"

    async def put(self, payload: dict[str, Any]) -> Entry:
        """Keep ``payload``, due now; its entry (``id``: what ``state`` takes)."""
        entry = Entry(payload, due=time.time())
        await self.store.add(entry)
        self.wake.set()
        return entry

    async def state(self, ident: str) -> State:
        return await self.store.state(ident)

    def delay(self, attempts: int) -> float:
        """Seconds before attempt ``attempts + 1`` (after ``attempts`` failed)."""
        base = min(self.retry_max_seconds, self.retry_seconds * 2.0 ** max(0, attempts - 1))
        return base * (1 + self.jitter * random.random())

    async def attempt(self, entry: Entry) -> None:
        """One attempt at a claimed entry: sent, back for later, or kept aside."""
        try:
            detail = await self._send(entry)
        except asyncio.CancelledError:  # the server stops: back in the queue for the next start
            try:
                await asyncio.shield(self.store.retry(entry))
            except Exception:  # then it comes back when its claim is stale
                log.warning("%s outbox: entry %s stays claimed until claim_seconds pass", self.name, entry.id)
            raise
        except Undeliverable as exc:
            entry.attempts += 1
            await self.store.fail(entry)
            self.report("undeliverable", entry, str(exc), exc)
        except Exception as exc:
            if not isinstance(exc, NotYet):  # a bug must not lose the entry
                log.exception("%s outbox: sending entry %s failed", self.name, entry.id)
            entry.attempts += 1
            if self.max_attempts is not None and entry.attempts >= self.max_attempts:
                await self.store.fail(entry)
                self.report("gave_up", entry, str(exc), exc)
                return
            entry.due = time.time() + self.delay(entry.attempts)
            await self.store.retry(entry)
            self.report("retry", entry, str(exc), exc)
        else:
            entry.attempts += 1
            await self.store.done(entry)
            self.report("sent", entry, detail, None)

    async def _hand_back(self, entries: list[Entry]) -> None:
        """Claimed ``entries`` not attempted (the server stops): back in the queue for the next
        start, else (the store failing) back when their claim is stale."""
        for entry in entries:
            try:
                await asyncio.shield(self.store.retry(entry))
            except Exception:
                log.warning("%s outbox: entry %s stays claimed until claim_seconds pass", self.name, entry.id)

    async def deliver_due(self) -> float:
        """Claim and attempt every due entry; the seconds until the next is due (at most
        ``poll_seconds``, at least a twentieth of a second)."""
        claiming = asyncio.ensure_future(self.store.claim(time.time()))
        try:
            claimed = await asyncio.shield(claiming)
        except asyncio.CancelledError:  # the server stops while claiming: what it claimed goes back
            await self._hand_back(await claiming)
            raise
        if self.parallel:
            await asyncio.gather(*(self.attempt(entry) for entry in claimed))
        else:
            for n, entry in enumerate(claimed):
                try:
                    await self.attempt(entry)
                except asyncio.CancelledError:  # this entry is back already; the rest follow it
                    await self._hand_back(claimed[n + 1:])
                    raise
        upcoming = await self.store.next_due()
        wait = self.poll_seconds if upcoming is None else upcoming - time.time()
        return min(self.poll_seconds, max(0.05, wait))

    async def run_forever(self) -> None:
        """Deliver until cancelled; a failing store (Redis down) is tried again, logged once per outage."""
        failing = False
        while True:
            self.wake.clear()  # before the look: a put meanwhile wakes the next sleep at once
            try:
                wait = await self.deliver_due()
                failing = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not failing:
                    log.warning("the %s outbox could not be read (%s); trying again", self.name, type(exc).__name__)
                failing = True
                wait = self.poll_seconds
            try:
                await asyncio.wait_for(self.wake.wait(), wait)
            except TimeoutError:
                pass
