"""One webhook POST: the URL's name resolved once (off the loop), its first address checked by
the host functions' rule (``host_functions.endpoint.check_address``: public, or listed in the key's
``webhook_allow``), the connection made to that address (no second lookup for a rebinding name),
``http://`` only to a listed address, redirects never followed, the answer's body not read.
A refused address is refused before any connection; a receiver that cannot be reached or does
not answer 2xx is a failure the dispatcher retries."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..addresses import Resolver, resolve_name
from ..host_functions.endpoint import EndpointError, Network, check_address, parse_allow
from ..outbox import Entry, NotYet, Undeliverable
from ..pinned_post import address_url, post_to_address

__all__ = ["Delivery", "Resolver", "WebhookError", "WebhookRefused", "WebhookSender", "IDEMPOTENCY_HEADER"]

IDEMPOTENCY_HEADER = "Idempotency-Key"


class WebhookError(NotYet):
    """This attempt failed (not reached, an error status, a redirect): tried again later."""


class WebhookRefused(Undeliverable, PermissionError):
    """The operator's rules do not let the server send there: never tried again."""


@dataclass
class Delivery:
    """One result for one key's webhook (an outbox entry's payload, with its entry's ``id``: the
    Idempotency-Key, the same on every attempt, and ``attempts`` made so far)."""

    id: str
    key: str
    url: str
    body: dict[str, Any]
    attempts: int = 0

    def payload(self) -> dict[str, Any]:
        return {"key": self.key, "url": self.url, "body": self.body}

    @classmethod
    def of(cls, entry: Entry) -> Delivery:
        p = entry.payload
        return cls(entry.id, str(p["key"]), str(p["url"]), dict(p["body"]), entry.attempts)


class WebhookSender:
    """Sends deliveries; ``resolver`` looks a name up (blocking: run on a thread, within
    ``timeout_seconds``); tests give their own."""

    def __init__(self, resolver: Resolver = resolve_name, timeout_seconds: float = 10.0) -> None:
        self.resolver = resolver
        self.timeout_seconds = timeout_seconds

    async def target(self, url: str, allow: tuple[Network, ...]) -> tuple[str, str, str]:
        """(the URL with the checked address, the Host header, the name for TLS), or
        ``WebhookRefused`` / ``WebhookError`` (the name does not resolve)."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = await asyncio.wait_for(asyncio.to_thread(self.resolver, host, port), self.timeout_seconds)
        except (OSError, TimeoutError) as e:
            raise WebhookError(f"the webhook's host {host} cannot be resolved ({type(e).__name__})") from None
        if not addresses:
            raise WebhookError(f"the webhook's host {host} has no address")
        try:
            ip = check_address(addresses[0], allow)
        except EndpointError as e:
            raise WebhookRefused(str(e).replace("the app's endpoint", f"the webhook's host {host}")
                                 .replace("the operator did not allow", "not in the key's webhook_allow")) from None
        if parts.scheme == "http" and not any(ip in net for net in allow):
            raise WebhookRefused(f"the webhook is http:// and its address {ip} is not in the key's webhook_allow "
                                 "(use https://, or list the address)")
        return address_url(parts, ip, port), parts.netloc, host

    async def send(self, delivery: Delivery, allow: tuple[str, ...]) -> int:
        """POST ``delivery`` to its URL: the receiver's status (2xx), else an exception."""
        url, host_header, sni = await self.target(delivery.url, parse_allow(allow))
        body = json.dumps(delivery.body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", IDEMPOTENCY_HEADER: delivery.id,
                   "User-Agent": "wasm-runner-webhook", "X-Wasm-Runner-Attempt": str(delivery.attempts + 1)}
        try:
            async with post_to_address(url, host_header, sni, body, headers, self.timeout_seconds) as response:
                status = response.status_code  # its body is never read
        except httpx.HTTPError as e:
            raise WebhookError(f"the webhook could not be reached ({type(e).__name__})") from None
        if not 200 <= status < 300:
            raise WebhookError(f"the webhook answered {status}")
        return status
