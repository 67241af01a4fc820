"""One entry of the outbox and the contract of its stores (``FileStore``, ``RedisStore``)."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["CLAIM_SECONDS", "Entry", "State", "Store", "new_id"]

CLAIM_SECONDS = 300.0  # a claim older than this (its replica died) goes back to the queue
State = Literal["pending", "sent", "failed", "unknown"]


def new_id() -> str:
    """A fresh id that sorts by creation time (the file store claims the oldest first)."""
    return f"{time.time_ns():020d}-{secrets.token_hex(8)}"


def valid_id(ident: str) -> bool:
    """Whether ``ident`` can be an entry's id (safe as a file name and a Redis key's part)."""
    return 0 < len(ident) <= 64 and ident.replace("-", "").isalnum() and ident.isascii()


@dataclass
class Entry:
    """One message: ``id`` (the same on every attempt: the receiver's idempotency key),
    ``payload`` (the caller's, JSON), ``attempts`` made so far, ``due`` when the next may start."""

    payload: dict[str, Any]
    id: str = field(default_factory=new_id)
    attempts: int = 0
    due: float = 0.0
    created: float = field(default_factory=time.time)

    def dumps(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes | str) -> Entry:
        """The entry ``data`` holds; ``ValueError`` when it is not one."""
        try:
            found = json.loads(data)
            entry = cls(payload=found["payload"], id=found["id"], attempts=int(found["attempts"]),
                        due=float(found["due"]), created=float(found["created"]))  # fmt: skip
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not an outbox entry ({type(exc).__name__})") from None
        if not isinstance(entry.payload, dict) or not isinstance(entry.id, str) or not valid_id(entry.id):
            raise ValueError("not an outbox entry")
        return entry


class Store(Protocol):
    """Where entries wait. Every store keeps this contract (tests/outbox/test_stores.py):

    - ``add``: kept durably, due at ``entry.due``;
    - ``claim(now, limit)``: first, claims older than ``claim_seconds`` go back to the queue;
      then up to ``limit`` entries due by ``now``, oldest due first, each handed to one caller
      only (one process, or one replica, wins each);
    - ``done``: sent (``state`` says "sent" for a while when the store keeps a trace);
    - ``retry``: back in the queue with its new ``attempts`` and ``due``;
    - ``fail``: kept aside for the operator, never tried again (``state``: "failed");
    - ``next_due``: when the earliest waiting entry is due (None: none waits).
    """

    claim_seconds: float

    async def add(self, entry: Entry) -> None: ...
    async def claim(self, now: float, limit: int = 16) -> list[Entry]: ...
    async def done(self, entry: Entry) -> None: ...
    async def retry(self, entry: Entry) -> None: ...
    async def fail(self, entry: Entry) -> None: ...
    async def state(self, ident: str) -> State: ...
    async def next_due(self) -> float | None: ...
