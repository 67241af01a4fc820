"""The durable outbox (docs/outbox.md): messages that must reach another server (a key's webhook,
an LMS's gradebook) wait here until they are sent, across restarts and replicas.

- ``store``: one ``Entry`` (an id, the caller's payload, attempts, when it is due) and the
  ``Store`` contract every store keeps: ``add``, an atomic ``claim`` of the due ones (a claim
  older than ``claim_seconds``, whose replica died, goes back first), ``done``, ``retry``,
  ``fail`` (kept aside), ``state``, ``next_due``;
- ``files``: ``FileStore``, one JSON file per entry in a private folder (a claim is a rename);
- ``redis_store``: ``RedisStore``, shared by the replicas through their bounded Redis client
  (``scaleout.state.SharedState.call``; a claim is one Lua script);
- ``worker``: ``Worker``, the loop that claims, sends (the caller's ``send``), retries with
  doubled waits and gives up; the caller keeps only its payload and its sending.
"""

from __future__ import annotations

from .files import FileStore
from .redis_store import RedisStore
from .store import Entry, State, Store
from .worker import NotYet, Undeliverable, Worker

__all__ = ["Entry", "FileStore", "NotYet", "RedisStore", "State", "Store", "Undeliverable", "Worker"]
