"""Webhooks (docs/lms.md, "Webhook"): each server-side check result of an API key that names a
``webhook_url``, signed (the check's ``result_token``), POSTed to that URL from the durable outbox
(``wasm_runner.outbox``: a folder of files, or Redis with ``redis_url``), retried with backoff,
with an ``Idempotency-Key`` header that stays the same on every attempt.

- ``sender``: a ``Delivery`` (the outbox entry's payload) and one POST to a checked address
  (public, or allowed by the operator's rule);
- ``dispatch``: queueing a check's result and sending the due ones, each step a line in the
  audit log (never the token).
"""

from __future__ import annotations

from .dispatch import CLAIM_SECONDS, Webhooks
from .sender import Delivery, WebhookError, WebhookRefused, WebhookSender

__all__ = ["CLAIM_SECONDS", "Delivery", "WebhookError", "WebhookRefused", "WebhookSender", "Webhooks"]
