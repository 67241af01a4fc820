"""The guest's network requests as host calls: ``NetworkCalls`` answers ``{"op": "net", ...}``
(``guest/network.py`` writes them on fd 0, like the ``host`` module's calls) and hands every
other call to the run's host functions (``HostCalls``), when it has them.

A request is ``{"op": "net", "method", "url", "headers": [[name, value], ...], "body": base64}``;
the answer ``{"value": {"status", "reason", "headers", "body": base64}}`` or ``{"error": {"type",
"message"}}`` (``NetworkRefused`` as ``ConnectionRefusedError``, ``TimeoutError``), which the
guest raises. Nothing the guest sends is trusted: the request's shape is checked here and its
destination by ``RunNetwork``. The request runs on the host functions' background loop; Stop or
the run's end cancels it. A refused request is an exception in the guest: the run goes on.
"""

from __future__ import annotations

import re

import asyncio
import base64
import binascii
import concurrent.futures
import json
from collections.abc import Callable
from typing import Any

from ..host_functions import NETWORK_SHIM, RunState, background_loop
from .fetcher import NetworkRefused, RunNetwork

__all__ = ["NET_PREFIX", "SHIM_REQUEST", "NetworkCalls", "answer_request", "encode_answer", "encode_error",
           "may_reach_network", "parse_request"]

NET_PREFIX = b'{"op":"net"'  # how the guest's shim starts each request (compact JSON)
SHIM_REQUEST = b'{"op":"net-shim"}'  # the loader asks for the shim's source

# Words without which a program cannot reach the network: the modules that make requests
# (socket, http.client, urllib.request, requests, ssl), a URL, pandas' readers, and the ways to
# import or run code by a name the text does not show. Checked in the program's text, not parsed.
_NETWORK_WORDS = re.compile(r"socket|http|url|request|ssl|read_\w+\(|__import__|importlib|exec|eval|compile|getattr")


def may_reach_network(code: str) -> bool:
    """Whether ``code`` may try the network. A run without a network rule whose program cannot
    (``False``: none of the words above in its text) runs as it is, without the loader that
    installs the refusal (``host_functions/program.py``): the guest compiles that loader at each
    run's start (about 8 M of fuel, ten times a ``print(1)``). A program that slips by anyway
    (an import hidden in another module of the image) still reaches nothing: WASI gives the
    guest no socket, it is only told so less plainly."""
    return _NETWORK_WORDS.search(code) is not None
POLL_S = 0.05  # how often a request in progress looks for Stop
HostCall = Callable[[bytes, Callable[[], str | None]], bytes | None]


def encode_answer(answer: dict[str, Any]) -> bytes:
    """An answer as the guest reads it (compact ASCII JSON)."""
    return json.dumps(answer, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def encode_error(kind: str, message: str) -> bytes:
    """A refusal the guest raises as ``kind`` (``ConnectionRefusedError``, ``TimeoutError``)."""
    return encode_answer({"error": {"type": kind, "message": message[:4000]}})


class NetworkCalls:
    """A run's host calls when it has a network: ``net`` requests answered by ``network``, the
    others by ``functions`` (the run's ``HostCalls``; None: refused)."""

    def __init__(self, network: RunNetwork, run: RunState, functions: HostCall | None = None) -> None:
        self.network, self.run, self.functions = network, run, functions

    def _ended(self) -> bool:
        run = self.run
        return bool(run.reports) or run.stop_reason is not None or (run.cancel is not None and run.cancel.is_set())

    def __call__(self, request: bytes, stop: Callable[[], str | None]) -> bytes | None:
        if request == SHIM_REQUEST:
            return None if self._ended() else NETWORK_SHIM
        if not request.startswith(NET_PREFIX):
            return None if self.functions is None else self.functions(request, stop)
        if self._ended():
            return None
        future = asyncio.run_coroutine_threadsafe(
            answer_request(self.network, request, self.run.deadline), background_loop())
        while not future.done():
            concurrent.futures.wait([future], timeout=POLL_S)
            if not future.done() and stop() is not None:
                future.cancel()
                return None
        try:
            answer = future.result()
        except concurrent.futures.CancelledError:
            return None
        return None if stop() is not None else answer


async def answer_request(network: RunNetwork, request: bytes, deadline: float) -> bytes:
    """The answer to one ``net`` request (its JSON bytes) as the guest reads it: the response, or
    the refusal naming the rule. ``deadline``: ``time.monotonic()`` of the run's wall limit.
    Both tiers answer through here (``NetworkCalls``; the browser's ``POST /api/network/fetch``)."""
    try:
        method, url, headers, body = parse_request(request)
    except ValueError as e:
        return encode_error("ConnectionRefusedError", f"a network request the host cannot read ({e})")
    try:
        answer = await network.fetch(method, url, headers, body, deadline)
    except NetworkRefused as e:
        return encode_error("ConnectionRefusedError", str(e))
    except TimeoutError as e:
        return encode_error("TimeoutError", str(e))
    except Exception as e:  # noqa: BLE001 - the host's failure: the guest gets a refusal, the run goes on
        return encode_error("ConnectionRefusedError", f"the network request failed on the host ({type(e).__name__})")
    return encode_answer({"value": {**answer, "body": base64.b64encode(answer["body"]).decode("ascii")}})


def parse_request(request: bytes) -> tuple[str, str, list[tuple[str, str]], bytes]:
    """A request's method (upper case), URL, headers and body; ``ValueError`` saying what is wrong."""
    try:
        msg = json.loads(request)
    except (ValueError, RecursionError):
        raise ValueError("not JSON") from None
    if type(msg) is not dict:
        raise ValueError("not an object")
    method, url, headers, body = msg.get("method"), msg.get("url"), msg.get("headers"), msg.get("body")
    if type(method) is not str or type(url) is not str or type(headers) is not list or type(body) is not str:
        raise ValueError("method, url, headers and body are needed")
    pairs = []
    for h in headers:
        if type(h) is not list or len(h) != 2 or not all(type(x) is str for x in h):
            raise ValueError("a header is a [name, value] pair of strings")
        pairs.append((h[0], h[1]))
    try:
        data = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the body is not base64") from None
    return method.upper(), url, pairs, data
