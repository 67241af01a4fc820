"""One run's network: ``RunNetwork`` makes the guest's HTTP requests on the host, within the
operator's rules (``rules.py``) and the run's caps, and records each one.

For each request: the URL's scheme, host and port must match a destination of a rule that
applies to the run (else it is refused naming the rules); the rule's caps must have room
(requests, bytes out); the host resolves the name itself (``resolver``, on a lookup thread) and
checks the address (``addresses.check_address``: public, or named by the rule), then connects to
that address (the name only in the Host header and for TLS: no second lookup). Redirects are
not followed (the guest's client follows them, each one a new request checked again). The
request's headers are bounded and stripped of hop-by-hop and proxy headers; the client has no
cookie jar, no credentials and reads no proxy settings of the host (``trust_env`` off). The
response is read raw (no decompression) up to the rule's ``max_bytes_in`` left, with at most
``MAX_RESPONSE_HEADERS`` headers, within ``request_seconds`` and the run's wall limit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from ..addresses import AddressRefused, Resolver, check_address, lookup_threads, resolve_name
from ..errors import WasmRunnerError
from .budget import BudgetUnavailable, MemoryBudget, RunBudget
from .rules import NetworkRule, describe_off

__all__ = ["MAX_OUTBOUND", "MAX_REQUEST_HEADER_BYTES", "MAX_REQUEST_HEADERS", "MAX_RESPONSE_BYTES",
           "MAX_RESPONSE_HEADERS", "METHODS", "NetworkRecord", "NetworkRefused", "RunNetwork"]

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
MAX_REQUEST_HEADERS = 64
MAX_REQUEST_HEADER_BYTES = 32 << 10
MAX_RESPONSE_HEADERS = 100
MAX_RESPONSE_HEADER_BYTES = 64 << 10
MAX_RESPONSE_BYTES = 20 << 20  # one answer, at most (it crosses to the guest in one host call)
MAX_OUTBOUND = 32  # requests in flight at once, all runs of the process together
_DROPPED = frozenset({"host", "connection", "keep-alive", "proxy-authorization", "proxy-connection",
                      "te", "trailer", "transfer-encoding", "upgrade", "content-length"})
_outbound: dict[int, asyncio.Semaphore] = {}


class NetworkRefused(WasmRunnerError, ConnectionRefusedError):
    """A request the rules or caps refuse, or that failed on the way (the guest gets the message)."""


@dataclass(frozen=True)
class NetworkRecord:
    """One request as the audit log keeps it (never the payload): the rule that allowed it (None:
    refused before one did), the method, destination, the address connected to (None: none),
    the status, the bytes each way, and how it ended (``ok``, ``refused``, ``capped``,
    ``failed``, ``timeout``) with the sentence the guest got."""

    rule: str | None
    method: str
    url: str
    address: str | None
    status: int | None
    bytes_out: int
    bytes_in: int
    outcome: str
    message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "method": self.method, "url": self.url, "address": self.address,
                "status": self.status, "bytes_out": self.bytes_out, "bytes_in": self.bytes_in,
                "outcome": self.outcome, "message": self.message}


@dataclass
class _Progress:
    """How far one request got: the rule that allowed it, the address, the status, the bytes."""

    rule: str | None = None
    address: str | None = None
    status: int | None = None
    out: int = 0
    got: int = 0

    def record(self, method: str, url: str, outcome: str, message: str | None = None) -> NetworkRecord:
        return NetworkRecord(self.rule, method[:16], url, self.address, self.status, self.out, self.got,
                             outcome, message)


@dataclass
class RunNetwork:
    """The network of one run: ``rules`` (those that apply to it; none: every request refused
    with ``off``), the host's ``resolver`` (tests inject one), who hears of each request, and
    where the caps are counted (``budget.py``: this process's memory, or the replicas' Redis for
    a browser-tier run)."""

    rules: Sequence[NetworkRule]
    off: str = field(default_factory=lambda: describe_off(None, None))
    resolver: Resolver = resolve_name
    on_request: Callable[[NetworkRecord], None] | None = None
    records: list[NetworkRecord] = field(default_factory=list)
    budget: RunBudget = field(default_factory=MemoryBudget)

    @property
    def on(self) -> bool:
        return bool(self.rules)

    def _record(self, record: NetworkRecord) -> None:
        self.records.append(record)
        if self.on_request is not None:
            try:
                self.on_request(record)
            except Exception:  # noqa: BLE001, S110 - a listener's failure is not the run's
                pass

    async def fetch(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes,
                    deadline: float) -> dict[str, Any]:
        """The answer to one request: ``{"status", "reason", "headers", "body"}`` (body bytes);
        ``NetworkRefused`` or ``TimeoutError`` with the sentence the guest gets. ``deadline``:
        ``time.monotonic()`` of the run's wall limit."""
        short_url = url[:300]
        state = _Progress()
        try:
            answer = await self._fetch(method, url, headers, body, deadline, state)
        except NetworkRefused as e:
            capped = "(max_bytes_in)" in str(e)
            self._record(state.record(method, short_url, "capped" if capped else
                                      ("refused" if state.address is None else "failed"), str(e)))
            raise
        except TimeoutError as e:
            self._record(state.record(method, short_url, "timeout", str(e)))
            raise
        self._record(state.record(method, short_url, "ok"))
        return answer

    def _match(self, method: str, url: str) -> tuple[NetworkRule, Any, str, int]:
        if not self.rules:
            raise NetworkRefused(self.off)
        if method not in METHODS:
            raise NetworkRefused(f"the method {method[:16]!r} is not one a run may use ({', '.join(sorted(METHODS))})")
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise NetworkRefused(f"{url[:200]!r} is not a URL the network rules can judge") from None
        host = (parts.hostname or "").lower().rstrip(".")
        if parts.scheme not in ("http", "https") or not host:
            raise NetworkRefused(f"{url[:200]!r} is not an http:// or https:// URL")
        if parts.username or parts.password:
            raise NetworkRefused("a URL with credentials in it is refused (send them in a header)")
        for rule in self.rules:
            destination = rule.destination(parts.scheme, host, port)
            if destination is not None:
                return rule, destination, host, port
        shown = f"[{host}]" if ":" in host else host
        names = ", ".join(repr(r.name) for r in self.rules)
        raise NetworkRefused(f"{parts.scheme}://{shown}:{port} is not a destination of this run's network "
                             f"rules ({names}); the operator allows: "
                             + ", ".join(str(d) for r in self.rules for d in r.destinations)[:600])

    async def _fetch(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes,
                     deadline: float, state: _Progress) -> dict[str, Any]:
        rule, destination, host, port = self._match(method, url)
        state.rule = rule.name
        where = f"the network rule {rule.name!r}"
        sent = _request_headers(headers)
        if not await self._take(rule, "requests", 1, rule.max_requests):
            raise NetworkRefused(f"this run has made the {rule.max_requests} requests {where} allows (max_requests)")
        out = len(body) + sum(len(k) + len(v) + 4 for k, v in sent) + len(url) + 16
        state.out = out
        if not await self._take(rule, "bytes_out", out, rule.max_bytes_out):
            raise NetworkRefused(f"this request would take the run over the {rule.max_bytes_out} bytes out "
                                 f"{where} allows (max_bytes_out)")
        seconds = min(rule.request_seconds, deadline - time.monotonic())
        if seconds <= 0:
            raise TimeoutError("the run's wall limit leaves no time for the request")
        give_up = time.monotonic() + seconds
        loop = asyncio.get_running_loop()
        if destination.address() is not None:  # an IP literal: nothing to resolve
            addresses = [host]
        else:
            try:
                addresses = await asyncio.wait_for(
                    loop.run_in_executor(lookup_threads(), self.resolver, host, port), seconds)
            except TimeoutError:
                raise TimeoutError(f"{host} could not be resolved within {seconds:.3g} s") from None
            except OSError as e:
                raise NetworkRefused(f"{host} cannot be resolved ({e.strerror or e})") from None
            except Exception as e:  # noqa: BLE001 - a resolver's failure is the request's
                raise NetworkRefused(f"{host} cannot be resolved ({type(e).__name__})") from None
        if not addresses:
            raise NetworkRefused(f"{host} has no address")
        try:
            ip = check_address(str(addresses[0]), rule.allowed_addresses(destination))
        except ValueError as e:
            if not isinstance(e, AddressRefused):
                raise NetworkRefused(f"{host} resolves to {str(addresses[0])[:100]!r}, not an address") from None
            raise NetworkRefused(f"{host} resolves to {e.ip}, {e.what} that {where} does not name "
                                 "(the host connects only to public addresses unless a rule names them)") from None
        state.address = str(ip)
        literal = f"[{ip}]" if ip.version == 6 else str(ip)
        parts = urlsplit(url)
        target = urlunsplit((parts.scheme, f"{literal}:{port}", parts.path or "/", parts.query, ""))
        default = 443 if parts.scheme == "https" else 80
        host_header = (f"[{host}]" if ":" in host else host) + ("" if port == default else f":{port}")
        semaphore = _outbound.setdefault(id(loop), asyncio.Semaphore(MAX_OUTBOUND))
        try:
            async with asyncio.timeout(max(0.0, give_up - time.monotonic())):
                async with semaphore:
                    return await self._send(method, target, host_header, host, sent, body, rule, state)
        except TimeoutError:
            raise TimeoutError(f"the request to {host} took longer than the {seconds:.3g} s {where} allows "
                               "(request_seconds, or the run's wall limit)") from None

    async def _take(self, rule: NetworkRule, kind: str, amount: int, cap: int) -> bool:
        try:
            return await self.budget.take(rule.name, kind, amount, cap)
        except BudgetUnavailable as e:
            raise NetworkRefused(str(e)) from None

    async def _send(self, method: str, target: str, host_header: str, host: str, sent: list[tuple[str, str]],
                    body: bytes, rule: NetworkRule, state: _Progress) -> dict[str, Any]:
        where = f"the network rule {rule.name!r}"
        over_run = NetworkRefused(f"the answer of {host} took the run over the {rule.max_bytes_in} "
                                  f"bytes in {where} allows (max_bytes_in)")
        extensions = {"sni_hostname": host} if target.startswith("https:") else {}
        try:
            async with httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=rule.request_seconds,
                                         limits=httpx.Limits(max_connections=1)) as client:
                request = client.build_request(method, target, content=body or None, extensions=extensions)
                for name in ("accept-encoding", "user-agent", "accept"):
                    request.headers.pop(name, None)
                request.headers["Host"] = host_header
                for name, value in sent:
                    request.headers[name] = value
                response = await client.send(request, stream=True)
                try:
                    state.status = response.status_code
                    raw_headers = response.headers.raw
                    size = sum(len(k) + len(v) + 4 for k, v in raw_headers) + 32
                    if len(raw_headers) > MAX_RESPONSE_HEADERS or size > MAX_RESPONSE_HEADER_BYTES:
                        raise NetworkRefused(f"the answer of {host} has more than {MAX_RESPONSE_HEADERS} headers "
                                             f"or {MAX_RESPONSE_HEADER_BYTES} bytes of them")
                    received, chunks = size, []
                    state.got = received
                    if not await self._take(rule, "bytes_in", size, rule.max_bytes_in):
                        raise over_run
                    async for chunk in response.aiter_raw():
                        received += len(chunk)
                        state.got = received
                        if received > MAX_RESPONSE_BYTES:
                            raise NetworkRefused(f"the answer of {host} is over {MAX_RESPONSE_BYTES} bytes, "
                                                 "the most one request may bring in (max_bytes_in)")
                        if not await self._take(rule, "bytes_in", len(chunk), rule.max_bytes_in):
                            raise over_run
                        chunks.append(chunk)
                    state.got = received
                finally:
                    await response.aclose()
        except httpx.TimeoutException:
            raise TimeoutError(f"the request to {host} timed out ({where}: request_seconds "
                               f"{rule.request_seconds:g})") from None
        except httpx.HTTPError as e:
            raise NetworkRefused(f"the request to {host} failed ({type(e).__name__}: {str(e)[:200]})") from None
        return {"status": response.status_code, "reason": response.reason_phrase[:200],
                "headers": [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw_headers],
                "body": b"".join(chunks)}


def _request_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The guest's headers as sent: bounded in number and size; hop-by-hop, proxy and Host ones
    dropped (the host writes Host itself)."""
    if len(headers) > MAX_REQUEST_HEADERS:
        raise NetworkRefused(f"a request may have at most {MAX_REQUEST_HEADERS} headers ({len(headers)} given)")
    if sum(len(k) + len(v) + 4 for k, v in headers) > MAX_REQUEST_HEADER_BYTES:
        raise NetworkRefused(f"a request's headers may hold at most {MAX_REQUEST_HEADER_BYTES} bytes")
    out = []
    for name, value in headers:
        if not name or not all(33 <= ord(c) < 127 and c != ":" for c in name) or any(c in value for c in "\r\n\0"):
            raise NetworkRefused(f"the header {name[:100]!r} is not a valid HTTP header")
        if name.lower() not in _DROPPED:
            out.append((name, value))
    return out
