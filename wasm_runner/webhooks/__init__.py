"""Webhooks (docs/lms.md, "Webhook"): each server-side check result of an API key that names a
``webhook_url``, signed (the check's ``result_token``), POSTed to that URL from a durable outbox,
retried with backoff, with an ``Idempotency-Key`` header that stays the same on every attempt.

- ``outbox``: the deliveries waiting (a folder of files, or Redis with ``redis_url``);
- ``sender``: one POST to a checked address (public, or allowed by the operator's rule);
- ``dispatch``: queueing a check's result and the loop that delivers, retries and gives up,
  each step a line in the audit log (never the token).
"""

from __future__ import annotations

from .dispatch import Webhooks
from .outbox import Delivery, FileOutbox, Outbox, RedisOutbox
from .sender import WebhookError, WebhookRefused, WebhookSender

__all__ = ["Delivery", "FileOutbox", "Outbox", "RedisOutbox", "WebhookError", "WebhookRefused",
           "WebhookSender", "Webhooks"]
