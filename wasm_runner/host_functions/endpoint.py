"""Host functions that call an HTTP endpoint of the app: one signed JSON request per call.

The request is ``POST <url>`` with the body ``{"function": name, "arguments": {...}, "key":
..., "user": ..., "request_id": ...}`` (``arguments`` in codec.py's tagged JSON form: bytes,
tuples, sets and non-string keys survive) and the headers ``X-Wasm-Runner-Function``,
``-Timestamp`` (Unix seconds), ``-Nonce`` (random, never reused) and ``-Signature``:
``sha256=`` + hex HMAC-SHA256 of ``timestamp + "." + nonce + "." + body`` with the function's own
secret. The app checks the signature, refuses a timestamp older than a few minutes or a nonce it
saw, and authorizes the call for the key and user named (``verify`` does all of that). It answers
``200`` with ``{"value": ...}`` (tagged), or ``{"error": {"type": ..., "message": ...}}``, which
the guest gets as an exception of that name.

The endpoint's name is resolved once per call, on a lookup thread (never on the loop the call
runs on; given up after the timeout), and the connection goes to that address (no second lookup
for a rebinding name to answer differently); an address that is loopback, private, link-local or
otherwise not public is refused unless the operator listed it (``allow``), so a function cannot be
pointed at Redis or at the replicas' internal hop: IPv6 forms holding an IPv4 address (mapped,
NAT64, 6to4) are judged by that address, IPv4-compatible and site-local ones refused
(``check_address``). ``http://`` goes only to a listed address (the signed body crosses in the
clear); elsewhere it takes ``https://``. Redirects are never followed; the answer is read up to
``MAX_ANSWER_BYTES``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from .. import addresses, codec
from ..addresses import Address, Network, Resolver, lookup_threads, parse_allow, resolve_name
from ..errors import WasmRunnerError
from ..pinned_post import address_url, post_to_address

__all__ = ["MAX_ANSWER_BYTES", "MAX_CLOCK_SKEW_SECONDS", "AppError", "Endpoint", "EndpointError", "Network",
           "Nonces", "app_error", "check_address", "parse_allow", "sign", "verify"]

MAX_ANSWER_BYTES = 16 << 20
MAX_CLOCK_SKEW_SECONDS = 300  # what ``verify`` accepts of a timestamp, either way


class EndpointError(WasmRunnerError, RuntimeError):
    """The app's endpoint could not be reached or answered with something that is not an answer
    (a redirect, an error status, not JSON, too large). The guest gets its message."""


def _refused(ip: Address, what: str) -> EndpointError:
    return EndpointError(f"the app's endpoint resolves to {ip}, {what} the operator did not allow")


def check_address(address: str, allow: tuple[Network, ...]) -> Address:
    """``address`` when an endpoint may connect to it (``addresses.check_address``: listed in
    ``allow``, or public); ``EndpointError`` naming the rule else."""
    try:
        return addresses.check_address(address, allow)
    except addresses.AddressRefused as e:
        raise _refused(e.ip, e.what) from None


def sign(secret: bytes, timestamp: str, nonce: str, body: bytes) -> str:
    """The ``X-Wasm-Runner-Signature`` of a request: ``sha256=`` + hex HMAC-SHA256."""
    mac = hmac.new(secret, timestamp.encode() + b"." + nonce.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


class Nonces:
    """Nonces seen within the accepted clock window (``verify``'s replay memory; the app keeps
    one, or the same check in its own language)."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}

    def fresh(self, nonce: str, now: float) -> bool:
        for n, t in list(self._seen.items()):
            if now - t > 2 * MAX_CLOCK_SKEW_SECONDS:
                del self._seen[n]
        if nonce in self._seen:
            return False
        self._seen[nonce] = now
        return True


def verify(secret: bytes, headers: dict[str, str], body: bytes, nonces: Nonces, now: float | None = None) -> bool:
    """What the app does with a call (a reference for apps written in Python, and the tests'
    endpoint): the signature matches, the timestamp is within ``MAX_CLOCK_SKEW_SECONDS``, the nonce
    is new. ``headers`` with lower-case names."""
    now = time.time() if now is None else now
    ts, nonce = headers.get("x-wasm-runner-timestamp", ""), headers.get("x-wasm-runner-nonce", "")
    given = headers.get("x-wasm-runner-signature", "")
    if not ts.isdigit() or abs(now - int(ts)) > MAX_CLOCK_SKEW_SECONDS or not 16 <= len(nonce) <= 128:
        return False
    if not hmac.compare_digest(sign(secret, ts, nonce, body), given):
        return False
    return nonces.fresh(nonce, now)


_resolve = resolve_name
_lookup_threads = lookup_threads


@dataclass(frozen=True)
class Endpoint:
    """One function's endpoint: its URL, its secret, the non-public addresses it may reach (and
    the addresses ``http://`` may go to: only those). ``resolver`` looks a name up (blocking: it
    runs on a thread of its own, within ``timeout_seconds``); tests give their own."""

    url: str
    secret: bytes = field(repr=False)
    allow: tuple[Network, ...] = ()
    timeout_seconds: float = 10.0
    resolver: Resolver = _resolve

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
            raise ValueError(f"an endpoint is an http:// or https:// URL without credentials, not {self.url!r}")
        if len(self.secret) < 16:
            raise ValueError("an endpoint's secret must have at least 16 bytes")

    def _host_port(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)

    def _checked(self, addresses: list[str]) -> tuple[str, str, str]:
        """The target for the name's addresses: its first one checked (``check_address``), and
        ``http://`` only to an address in ``allow`` (the signed body crosses in the clear)."""
        parts = urlsplit(self.url)
        host, port = self._host_port()
        if not addresses:
            raise EndpointError(f"the app's endpoint {host} has no address")
        ip = check_address(addresses[0], self.allow)
        if parts.scheme == "http" and not any(ip in net for net in self.allow):
            raise EndpointError(f"the app's endpoint is http:// and its address {ip} is not in allow: the signed "
                                "body would cross in the clear (use https://, or list the address)")
        return address_url(parts, ip, port), parts.netloc.rsplit("@", 1)[-1], host

    def target(self) -> tuple[str, str, str]:
        """(the URL to connect to, with the checked address; the Host header; the name for TLS):
        the name resolved once, here and now (blocking), its first address checked."""
        host, port = self._host_port()
        try:
            addresses = self.resolver(host, port)
        except OSError as e:
            raise EndpointError(f"the app's endpoint {host} cannot be resolved ({e.strerror or e})") from None
        return self._checked(addresses)

    async def resolve(self) -> tuple[str, str, str]:
        """``target()`` without blocking the loop: the lookup runs on a lookup thread and is given
        up after ``timeout_seconds``."""
        host, port = self._host_port()
        loop = asyncio.get_running_loop()
        try:
            addresses = await asyncio.wait_for(loop.run_in_executor(_lookup_threads(), self.resolver, host, port),
                                               self.timeout_seconds)
        except TimeoutError:
            raise EndpointError(f"the app's endpoint {host} could not be resolved within "
                                f"{self.timeout_seconds:g} s") from None
        except OSError as e:
            raise EndpointError(f"the app's endpoint {host} cannot be resolved ({e.strerror or e})") from None
        return self._checked(addresses)

    async def call(self, name: str, arguments: dict[str, Any], *, key: str, user: str | None,
                   request_id: str) -> Any:
        """Call the function at the endpoint: its value, or ``EndpointError`` / the app's error."""
        body = json.dumps({"function": name, "arguments": codec.to_tagged(arguments), "key": key, "user": user,
                           "request_id": request_id}, separators=(",", ":"), ensure_ascii=False).encode()
        timestamp, nonce = str(int(time.time())), secrets.token_hex(16)
        url, host_header, sni = await self.resolve()
        headers = {"Content-Type": "application/json", "X-Wasm-Runner-Function": name,
                   "X-Wasm-Runner-Timestamp": timestamp, "X-Wasm-Runner-Nonce": nonce,
                   "X-Wasm-Runner-Signature": sign(self.secret, timestamp, nonce, body)}
        try:
            async with post_to_address(url, host_header, sni, body, headers, self.timeout_seconds) as response:
                if 300 <= response.status_code < 400:
                    raise EndpointError(f"the app's endpoint answered with a redirect "
                                        f"({response.status_code}); redirects are not followed")
                if response.status_code != 200:
                    raise EndpointError(f"the app's endpoint answered {response.status_code}")
                data = b""
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_ANSWER_BYTES:
                        raise EndpointError(f"the app's endpoint answered with more than {MAX_ANSWER_BYTES} bytes")
        except httpx.HTTPError as e:
            raise EndpointError(f"the app's endpoint could not be reached ({type(e).__name__})") from None
        try:
            answer = codec.loads(data)
        except codec.PlainDataError:
            raise EndpointError("the app's endpoint answered with something that is not tagged JSON") from None
        if type(answer) is dict and set(answer) == {"value"}:
            return answer["value"]
        error = answer.get("error") if type(answer) is dict else None
        if type(error) is dict and type(error.get("message")) is str:
            raise app_error(error.get("type"), error["message"])
        raise EndpointError("the app's endpoint answered with neither a value nor an error")


_APP_ERRORS: dict[str, type[Exception]] = {}


class AppError(WasmRunnerError, Exception):
    """An error the app's endpoint answered with (a subclass named like the type it gave)."""


def app_error(type_name: Any, message: str) -> Exception:
    """The exception for an app's error answer: a class named ``type_name`` (an identifier; else
    ``AppError``), so the guest sees that name."""
    name = type_name if type(type_name) is str and type_name.isidentifier() and len(type_name) <= 100 else "AppError"
    cls = _APP_ERRORS.get(name) if len(_APP_ERRORS) < 256 or name in _APP_ERRORS else AppError
    if cls is None:
        cls = _APP_ERRORS[name] = type(name, (AppError,), {"__module__": __name__})
    return cls(message[:4000])
