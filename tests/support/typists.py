"""Input sources for ``Sandbox.run(..., input_source=...)`` that stand for a person at the
keyboard: one who answers late, one who never does."""

from __future__ import annotations

import threading
import time

__all__ = ["TypesLate"]


class TypesLate:
    """Answers ``answer`` once, ``after`` seconds after ``input()`` first asks (counted from the
    first read, not from creation: a busy machine can take longer than ``after`` to start the
    run). An empty ``answer`` never types."""

    def __init__(self, answer: bytes, after: float) -> None:
        self.answer, self.after = answer, after
        self.asked: float | None = None

    def read(self, max_bytes: int, timeout: float) -> bytes | None:
        if self.asked is None:
            self.asked = time.monotonic()
        if self.answer and time.monotonic() - self.asked >= self.after:
            data, self.answer = self.answer, b""
            return data
        threading.Event().wait(timeout)
        return None
