"""Queueing a check's result for its key's webhook, and sending the due ones.

``enqueue`` puts the delivery in the outbox (``wasm_runner.outbox``: the check answers without
waiting for the receiver); the outbox's worker (``outbox.run_forever``, the server's lifetime)
claims due deliveries and sends each, at once. A receiver that is down or answers an error gets
the same delivery again, with the same ``Idempotency-Key``, after ``retry_seconds``, doubled each
time (at most ``MAX_DELAY_SECONDS``, with up to 10 % jitter) until ``max_attempts``; then it is
given up (kept aside in the outbox's failed entries). A delivery whose key no longer names that
URL (the operator changed the config) or whose address the rules refuse is not sent either.
Every step is an audit line (``webhook_queued``, ``webhook_delivered``, ``webhook_failed``,
``webhook_refused``, ``webhook_dropped``, ``webhook_given_up``): the key, the delivery's id, the
URL's host, the attempt, never the token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from ..outbox import Entry, Store, Undeliverable, Worker
from ..outbox.worker import Outcome
from .sender import Delivery, WebhookRefused, WebhookSender

__all__ = ["Webhooks", "WebhookRule", "CLAIM_SECONDS", "MAX_DELAY_SECONDS", "POLL_SECONDS"]

CLAIM_SECONDS = 60.0  # a claimed delivery comes back to the queue after this long unless sent (6 sends' timeout)
MAX_DELAY_SECONDS = 3600.0
POLL_SECONDS = 0.5


class WebhookRule(Protocol):
    """What the operator's config says of a key's webhook (``settings.ApiKey``)."""

    @property
    def webhook_url(self) -> str | None: ...
    @property
    def webhook_allow(self) -> tuple[str, ...]: ...


Note = Callable[..., None]  # (event, **fields): one audit line
_EVENTS: dict[Outcome, str] = {"sent": "webhook_delivered", "retry": "webhook_failed",
                               "gave_up": "webhook_given_up", "undeliverable": "webhook_dropped"}  # fmt: skip


class Webhooks:
    """The webhooks of the keys in ``rules`` (key name -> its rule), through ``store``."""

    def __init__(self, store: Store, rules: Mapping[str, WebhookRule], note: Note, *,
                 sender: WebhookSender | None = None, retry_seconds: float = 5.0, max_attempts: int = 12) -> None:
        self.rules = rules
        self.note = note
        self.sender = sender or WebhookSender()
        self.outbox = Worker(store, self._send, name="webhook", retry_seconds=retry_seconds,
                             retry_max_seconds=MAX_DELAY_SECONDS, max_attempts=max_attempts, jitter=0.1,
                             parallel=True, poll_seconds=POLL_SECONDS, report=self._report)  # fmt: skip

    def url_for(self, key: str) -> str | None:
        rule = self.rules.get(key)
        return rule.webhook_url if rule is not None else None

    async def enqueue(self, key: str, result_token: str, exercise: str) -> str | None:
        """Queue a check's signed result for ``key``'s webhook: the delivery's id (its
        Idempotency-Key), or None when the key names no webhook."""
        url = self.url_for(key)
        if url is None:
            return None
        body = {"event": "check.result", "exercise": exercise, "result_token": result_token}
        entry = await self.outbox.put(Delivery("", key, url, body).payload())
        self._note("webhook_queued", Delivery.of(entry))
        return entry.id

    def _note(self, event: str, delivery: Delivery, **fields: Any) -> None:
        self.note(event, tenant=delivery.key, delivery=delivery.id, host=urlsplit(delivery.url).netloc,
                  attempt=str(delivery.attempts), **{k: str(v) for k, v in fields.items()})

    async def _send(self, entry: Entry) -> str:
        """One attempt: the receiver's status, else ``WebhookError`` (later) or an ``Undeliverable``."""
        delivery = Delivery.of(entry)
        rule = self.rules.get(delivery.key)
        if rule is None or rule.webhook_url != delivery.url:
            raise Undeliverable("the key no longer names this webhook_url")
        return str(await self.sender.send(delivery, rule.webhook_allow))

    def _report(self, outcome: Outcome, entry: Entry, detail: str, error: BaseException | None) -> None:
        event = "webhook_refused" if isinstance(error, WebhookRefused) else _EVENTS[outcome]
        if outcome == "sent":
            self._note(event, Delivery.of(entry), status=detail)
        elif outcome == "retry":
            self._note(event, Delivery.of(entry), reason=detail, retry_in=f"{entry.due - time.time():.1f}")
        else:
            self._note(event, Delivery.of(entry), reason=detail)
