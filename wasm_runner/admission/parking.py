"""Parking: a run waiting for interactive input gives its slot back meanwhile.

``Parking`` is the input source the executor hands an admitted run's guest: while the guest waits
for input its slot is parked (``Gate.park``: the place counts against the bounds of waiting runs
instead, its memory stays held); when input arrives it takes a slot again (``Gate.resume``, ahead of
queued runs) before the guest reads it (``replica.Admission.park`` and ``resume`` do the counting).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING

from ..execution.policy import CallerLike
from .gate import Gate, Ticket

if TYPE_CHECKING:
    from ..wasi.guestio import InputSource

__all__ = ["Parking"]

log = logging.getLogger("wasm_runner.execution")


class Parking:
    """The input source of an admitted run: while the guest waits for input its slot is parked
    (``Gate.park``); when input arrives it takes a slot again (``Gate.resume``) before the guest
    reads it. ``read`` runs on the guest's thread; the gate lives on the event loop."""

    def __init__(
        self,
        source: InputSource,
        gate: Gate,
        ticket: Ticket,
        tenant: CallerLike,
        loop: asyncio.AbstractEventLoop,
        cancel: threading.Event,
    ) -> None:
        self.source = source
        self.gate = gate
        self.ticket = ticket
        self.tenant = tenant
        self.loop = loop
        self.cancel = cancel
        self.parked = False
        self.resume_seconds = 0.0  # time spent waiting for a slot after input arrived

    def read(self, max_bytes: int, timeout: float) -> bytes | None:
        got: bytes | None
        if not self.parked:
            got = self.source.read(max_bytes, 0.0)
            if got is not None:
                return got  # input was there: no wait, nothing to park
            self.parked = self._park()
        got = self.source.read(max_bytes, timeout)
        if got is not None and self.parked:
            self.parked = False
            if not self._resume():
                return b""  # cancelled (or the server stops) while waiting for a slot
        return got

    def _park(self) -> bool:
        async def park() -> bool:
            return self.gate.park(self.ticket)

        try:
            return asyncio.run_coroutine_threadsafe(park(), self.loop).result()
        except Exception:  # the loop is gone (shutdown): keep the slot
            log.debug("could not park a run waiting for input", exc_info=True)
            return False

    def _resume(self) -> bool:
        started = time.monotonic()
        try:
            fut = asyncio.run_coroutine_threadsafe(
                self.gate.resume(self.ticket, self.tenant), self.loop
            )
        except RuntimeError:  # the loop is closed
            return False
        try:
            while True:
                try:
                    fut.result(timeout=0.05)
                    return True
                except TimeoutError:
                    if self.cancel.is_set():
                        fut.cancel()
                        return False
                except Exception:  # cancelled on the loop (shutdown), or a gate failure
                    log.warning("a parked run could not resume", exc_info=True)
                    return False
        finally:
            self.resume_seconds += time.monotonic() - started
