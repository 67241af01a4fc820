"""Queueing a check's result for its key's webhook, and the loop that delivers the due ones.

``enqueue`` writes the delivery to the outbox (the check answers without waiting for the
receiver); ``run_forever`` (the server's lifetime, ``assembly.running``) claims due deliveries and
sends each. A receiver that is down or answers an error gets the same delivery again, with the
same ``Idempotency-Key``, after ``retry_seconds``, doubled each time (at most ``MAX_DELAY_SECONDS``,
with up to 10 % jitter) until ``max_attempts``; then it is given up. A delivery whose key no longer
names that URL (the operator changed the config) or whose address the rules refuse is dropped.
Every step is an audit line (``webhook_queued``, ``webhook_delivered``, ``webhook_failed``,
``webhook_refused``, ``webhook_dropped``, ``webhook_given_up``): the key, the delivery's id, the
URL's host, the attempt, never the token.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

from .outbox import Delivery, Outbox
from .sender import WebhookError, WebhookRefused, WebhookSender

__all__ = ["Webhooks", "WebhookRule", "MAX_DELAY_SECONDS", "POLL_SECONDS"]

MAX_DELAY_SECONDS = 3600.0
POLL_SECONDS = 0.5
log = logging.getLogger("wasm_runner.webhooks")


class WebhookRule(Protocol):
    """What the operator's config says of a key's webhook (``settings.ApiKey``)."""

    @property
    def webhook_url(self) -> str | None: ...
    @property
    def webhook_allow(self) -> tuple[str, ...]: ...


Note = Callable[..., None]  # (event, **fields): one audit line


class Webhooks:
    """The webhooks of the keys in ``rules`` (key name -> its rule), through ``outbox``."""

    def __init__(self, outbox: Outbox, rules: Mapping[str, WebhookRule], note: Note, *,
                 sender: WebhookSender | None = None, retry_seconds: float = 5.0, max_attempts: int = 12) -> None:
        self.outbox = outbox
        self.rules = rules
        self.note = note
        self.sender = sender or WebhookSender()
        self.retry_seconds = retry_seconds
        self.max_attempts = max_attempts
        self.wake = asyncio.Event()

    def url_for(self, key: str) -> str | None:
        rule = self.rules.get(key)
        return rule.webhook_url if rule is not None else None

    async def enqueue(self, key: str, result_token: str, exercise: str) -> str | None:
        """Queue a check's signed result for ``key``'s webhook: the delivery's id (its
        Idempotency-Key), or None when the key names no webhook."""
        url = self.url_for(key)
        if url is None:
            return None
        now = time.time()
        delivery = Delivery(id=uuid.uuid4().hex, key=key, url=url, due=now, created=now, body={
            "event": "check.result", "exercise": exercise, "result_token": result_token})
        await self.outbox.add(delivery)
        self._note("webhook_queued", delivery)
        self.wake.set()
        return delivery.id

    def _note(self, event: str, delivery: Delivery, **fields: Any) -> None:
        self.note(event, tenant=delivery.key, delivery=delivery.id, host=urlsplit(delivery.url).netloc,
                  attempt=str(delivery.attempts), **{k: str(v) for k, v in fields.items()})

    def delay(self, attempts: int) -> float:
        """Seconds before attempt ``attempts + 1`` (after ``attempts`` failed)."""
        base = min(self.retry_seconds * 2.0 ** max(0, attempts - 1), MAX_DELAY_SECONDS)
        return base * (1 + random.random() / 10)

    async def deliver(self, delivery: Delivery) -> None:
        """One attempt at a claimed delivery: done, put back for later, or dropped."""
        rule = self.rules.get(delivery.key)
        if rule is None or rule.webhook_url != delivery.url:
            await self.outbox.done(delivery)
            self._note("webhook_dropped", delivery, reason="the key no longer names this webhook_url")
            return
        try:
            status = await self.sender.send(delivery, rule.webhook_allow)
        except asyncio.CancelledError:  # the server stops: back to the outbox for the next start
            await asyncio.shield(self.outbox.retry(delivery))
            raise
        except WebhookRefused as e:
            await self.outbox.done(delivery)
            self._note("webhook_refused", delivery, reason=str(e))
            return
        except WebhookError as e:
            delivery.attempts += 1
            if delivery.attempts >= self.max_attempts:
                await self.outbox.done(delivery)
                self._note("webhook_given_up", delivery, reason=str(e))
                return
            delivery.due = time.time() + self.delay(delivery.attempts)
            await self.outbox.retry(delivery)
            self._note("webhook_failed", delivery, reason=str(e), retry_in=f"{delivery.due - time.time():.1f}")
            return
        delivery.attempts += 1
        await self.outbox.done(delivery)
        self._note("webhook_delivered", delivery, status=status)

    async def deliver_due(self) -> int:
        """Claim and attempt every due delivery (at once); how many were claimed."""
        claimed = await self.outbox.claim(time.time())
        await asyncio.gather(*(self.deliver(d) for d in claimed))
        return len(claimed)

    async def run_forever(self, poll_seconds: float = POLL_SECONDS) -> None:
        """Deliver due deliveries until cancelled; a failing outbox (Redis down) is retried."""
        failing = False
        while True:
            try:
                await self.deliver_due()
                failing = False
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not failing:  # once per outage, not every poll
                    log.warning("the webhook outbox could not be read (%s); trying again", type(exc).__name__)
                failing = True
            self.wake.clear()
            try:
                await asyncio.wait_for(self.wake.wait(), poll_seconds)
            except TimeoutError:
                pass
