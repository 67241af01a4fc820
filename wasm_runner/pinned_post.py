"""One POST to an address already checked (``addresses.check_address``): the connection goes to
that address, not to a second lookup of the name, with the name kept for the ``Host`` header and
for TLS (SNI and the certificate's check), redirects never followed and no proxy of the
environment. The app's endpoints (``host_functions/endpoint.py``) and the webhooks
(``webhooks/sender.py``) send this way."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from urllib.parse import SplitResult, urlunsplit

import httpx

from .addresses import Address

__all__ = ["address_url", "post_to_address"]


def address_url(parts: SplitResult, ip: Address, port: int) -> str:
    """The URL ``parts`` with its host replaced by the checked address ``ip`` (``port`` explicit)."""
    literal = f"[{ip}]" if ip.version == 6 else str(ip)
    return urlunsplit((parts.scheme, f"{literal}:{port}", parts.path or "/", parts.query, ""))


@asynccontextmanager
async def post_to_address(url: str, host_header: str, sni: str, body: bytes, headers: Mapping[str, str],
                          timeout_seconds: float) -> AsyncIterator[httpx.Response]:
    """POST ``body`` to ``url`` (an ``address_url``) with ``Host: host_header`` and, over
    https, ``sni`` as the TLS name: the response, its body not read yet (``httpx.HTTPError``
    when the address cannot be reached)."""
    extensions = {"sni_hostname": sni} if url.startswith("https:") else {}
    async with httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=timeout_seconds) as client:
        async with client.stream("POST", url, content=body, headers={"Host": host_header, **headers},
                                 extensions=extensions) as response:
            yield response
