"""What the server records about its work: the audit log (``audit.py``: one JSON line per run or
refusal, who and under which limits, never a key or a user id), the Prometheus metrics
(``metrics.py``: runs by status, latency, fuel, queues, sessions) and ``RunRecord``
(``run_record.py``), the executor's recorder that writes a finished run to both.

The HTTP face only serves them (``GET /metrics``); the composition root (``wasm_runner.assembly``)
builds one of each per app.
"""

from __future__ import annotations

from .audit import AuditLog
from .metrics import Metrics
from .run_record import RunRecord

__all__ = ["AuditLog", "Metrics", "RunRecord"]
