"""What is recorded of host calls: one ``CallRecord`` per call (name, sizes, time, outcome, never
the payload), and ``CallTally``, the records of a run counted by name and outcome, as the audit
log and the metrics keep them."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["OUTCOMES", "UNKNOWN_NAME", "CallRecord", "CallTally"]

# ok: answered with the function's value; error: the function raised (the guest got it);
# refused: data rules, a name the run was not given, a malformed request, the run over;
# limit: a host-call limit ended the run at this call; stopped: Stop or the wall limit came
# during the call (its result dropped, a coroutine cancelled)
OUTCOMES = ("ok", "error", "refused", "limit", "stopped")
UNKNOWN_NAME = "<unknown>"  # a call that names no function of the run is recorded under this


@dataclass(frozen=True)
class CallRecord:
    """One host call: the function's name (``UNKNOWN_NAME`` for a name the run was not given),
    how it ended, the request's and the answer's encoded sizes, and the time inside the function."""

    name: str
    outcome: str
    request_bytes: int
    answer_bytes: int
    seconds: float


class CallTally:
    """The calls of one run, counted by (name, outcome). Thread-safe."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], list[float]] = {}
        self._lock = threading.Lock()

    def add(self, record: CallRecord) -> None:
        with self._lock:
            row = self._rows.setdefault((record.name, record.outcome), [0, 0, 0, 0.0])
            row[0] += 1
            row[1] += record.request_bytes
            row[2] += record.answer_bytes
            row[3] += record.seconds

    def __len__(self) -> int:
        with self._lock:
            return int(sum(row[0] for row in self._rows.values()))

    def rows(self) -> list[dict[str, Any]]:
        """One entry per name and outcome: ``name``, ``outcome``, ``calls``, ``request_bytes``,
        ``answer_bytes``, ``ms`` (time inside the function), sorted."""
        with self._lock:
            items = sorted(self._rows.items())
        return [{"name": name, "outcome": outcome, "calls": int(row[0]), "request_bytes": int(row[1]),
                 "answer_bytes": int(row[2]), "ms": round(row[3] * 1000, 3)}
                for (name, outcome), row in items]
