"""What one run has spent of its network rules' caps (requests, bytes out, bytes in), counted
where every party that makes the run's requests sees it.

A server-tier run's requests are all made by one process: ``MemoryBudget`` (the default of
``RunNetwork``). A browser-tier run's requests may reach any replica (``browser_runs.py``):
``SharedBudget`` counts them in Redis (``scaleout.state.SharedState``), one hash per grant that
expires with it. Both ``take`` atomically: an amount is added only when the total stays within
the cap, so two replicas answering the same run at once cannot together pass it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable
from typing import Any, Protocol, TypeVar, cast

from ..errors import WasmRunnerError

__all__ = ["BudgetUnavailable", "MemoryBudget", "RunBudget", "SharedBudget", "SharedCalls"]

T = TypeVar("T")


class SharedCalls(Protocol):
    """What the network uses of ``scaleout.state.SharedState`` (the core does not import it):
    its Redis client, its key namespace, and its bounded calls (a failure raises its
    ``SharedStateUnavailable``, a ``WasmRunnerError`` answered as a 503)."""

    @property
    def redis(self) -> Any: ...

    def key(self, *parts: str) -> str: ...

    async def call(self, awaitable: Awaitable[T], what: str = ...) -> T: ...


class BudgetUnavailable(WasmRunnerError):
    """The shared count did not answer (Redis down or slow): the request is not made."""


class RunBudget(Protocol):
    async def take(self, rule: str, kind: str, amount: int, cap: int) -> bool:
        """Add ``amount`` to the run's ``kind`` count under ``rule`` when the total stays within
        ``cap`` (True); else change nothing (False)."""


class MemoryBudget:
    """This process's count of one run."""

    def __init__(self) -> None:
        self._spent: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    async def take(self, rule: str, kind: str, amount: int, cap: int) -> bool:
        with self._lock:
            have = self._spent.get((rule, kind), 0)
            if have + amount > cap:
                return False
            self._spent[(rule, kind)] = have + amount
            return True

    def spent(self, rule: str, kind: str) -> int:
        """The run's ``kind`` count under ``rule`` so far."""
        with self._lock:
            return self._spent.get((rule, kind), 0)


_TAKE = """
local field = ARGV[1]
local have = tonumber(redis.call('HGET', KEYS[1], field) or '0')
local amount = tonumber(ARGV[2])
if have + amount > tonumber(ARGV[3]) then return 0 end
redis.call('HINCRBY', KEYS[1], field, amount)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""


class SharedBudget:
    """One grant's count in Redis (``<prefix>netgrant-spent:<run>``), kept until ``expires_at``
    (``time.time()``) and a minute more."""

    def __init__(self, shared: SharedCalls, run: str, expires_at: float) -> None:
        self.shared, self.key, self.expires_at = shared, shared.key("netgrant-spent", run), expires_at

    async def take(self, rule: str, kind: str, amount: int, cap: int) -> bool:
        keep_ms = max(1000, int((self.expires_at - time.time() + 60) * 1000))
        script = self.shared.redis.eval(_TAKE, 1, self.key, f"{rule}:{kind}", amount, cap, keep_ms)
        try:
            return bool(await self.shared.call(cast("Awaitable[int]", script), "the run's network count"))
        except WasmRunnerError:  # SharedStateUnavailable
            raise BudgetUnavailable("the runner's shared state (Redis) did not answer, so the run's network caps "
                                    "cannot be counted; the request was not made") from None
