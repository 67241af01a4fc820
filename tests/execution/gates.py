"""A gate with counted slots and memory: what admission is to the executor (``admission.Gate``),
small enough to read every number it holds. The runs behind it are real sandbox runs."""

from __future__ import annotations

from wasm_runner.admission import Ticket
from wasm_runner.execution import CallerLike, Refused


class Slot:
    """One held slot or reservation; ``release`` is idempotent, as ``Ticket`` asks."""

    def __init__(self, gate: CountingGate, memory_mb: int, run: bool) -> None:
        self.gate, self.memory_mb, self.run, self.released = gate, memory_mb, run, False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.gate.memory_mb -= self.memory_mb
            self.gate.running -= 1 if self.run else 0


class CountingGate:
    """Admits every run unless ``refuse``; counts runs in flight, memory held and run times."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.running = 0
        self.admitted = 0
        self.memory_mb = 0
        self.durations: list[float] = []

    async def acquire(self, tenant: CallerLike, memory_mb: int) -> Ticket:
        if self.refuse:
            raise Refused(429, "busy", f"no room for {tenant.name} now", headers={"Retry-After": "1"})
        self.running += 1
        self.admitted += 1
        self.memory_mb += memory_mb
        return Slot(self, memory_mb, run=True)

    def reserve(self, tenant: CallerLike, memory_mb: int) -> Ticket:
        if self.refuse:
            raise Refused(429, "busy", f"no memory for {tenant.name} now")
        self.memory_mb += memory_mb
        return Slot(self, memory_mb, run=False)

    def park(self, ticket: Ticket) -> bool:
        return False  # a waiting run keeps its slot

    async def resume(self, ticket: Ticket, tenant: CallerLike) -> None:
        return None

    def note_duration(self, seconds: float) -> None:
        self.durations.append(seconds)
