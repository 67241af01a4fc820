"""The internal hop over HTTP: a session call or a download for another replica is relayed to it.

``Hop`` asks ``scaleout.forwarding.Forwarding`` who holds the session or link; when another
replica does, it sends the request there (``httpx``, the client's body, content type and Host, the
signed internal headers, never the client's API key) and answers with the owner's answer
(status, body, ``Content-Type``, ``Retry-After``, ``X-Request-Id`` ...) as it arrives: an SSE
stream is relayed chunk by chunk, never buffered (``Relay``). An owner that refuses the connection
or does not accept it within ``CONNECT_TIMEOUT_SECONDS`` is gone: a session whose entry records a
snapshot is resumed here (``recover``: ``sessions.SessionRecovery``; the call is then answered
here), else ``410 session_lost`` (a link: ``410 download_lost``) and a tombstone in the directory.
See ``scaleout/forwarding.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

import httpx
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from ..execution import Refused
from ..sessions import Entry
from ..scaleout.forwarding import CONNECT_TIMEOUT_SECONDS, Forwarding, lost
from ..scaleout.signing import target_of
from .errors import ApiError, error_response
from .guests import cancel_on_disconnect, until_disconnected
from .internal import client_of, internal_call

__all__ = ["Hop", "Recover", "Relay"]

log = logging.getLogger("wasm_runner.http")

_RELAYED_HEADERS = (
    "content-type", "retry-after", "content-disposition", "cache-control", "www-authenticate",
    "x-request-id", "x-accel-buffering",
)  # fmt: skip


class Hop:
    """This replica's relaying to the owner of a session or link.

    One ``httpx.AsyncClient`` per replica (connect bounded by ``CONNECT_TIMEOUT_SECONDS``; read by
    ``read_timeout``: the longest run a profile allows plus the queue timeout)."""

    def __init__(self, forwarding: Forwarding, read_timeout: float,
                 recover: Recover | None = None) -> None:
        self.forwarding = forwarding
        self.read_timeout = read_timeout
        # a lost owner's session resumed here from its stored snapshot (True), or not
        self.recover = recover
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    connect=CONNECT_TIMEOUT_SECONDS, read=self.read_timeout, write=30.0, pool=5.0
                ),
                # idle connections close before the owner's keep-alive does (no stale sockets)
                limits=httpx.Limits(
                    max_connections=256, max_keepalive_connections=32, keepalive_expiry=2.0
                ),
                trust_env=False,  # never through a proxy named in the environment
                follow_redirects=False,
            )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def session_call(self, request: Request, session_id: str, tenant: str,
                           user: str | None = None, user_token: bool = False) -> Response | None:
        """The owner's answer to this session call of ``tenant`` (for its ``user``, an id or None,
        carried signed: ``user_token`` when a signed token named it), or None to answer here (the
        session is here, unknown, another tenant's, or the call already came by a hop)."""
        if internal_call(request) is not None:
            return None
        for _ in range(2):  # a lost owner's session taken over meanwhile by another replica: once more
            entry = await self.forwarding.session_owner(session_id, tenant)
            if entry is None:
                return None
            answer = await self._owner_answer(request, entry, tenant, "session", session_id,
                                              user=user, user_token=user_token)  # fmt: skip
            if answer is not _AGAIN:
                return answer
        return error_response(lost("session"))

    async def take_over(self, session_id: str, tenant: str) -> str:
        """For a face that cannot relay a call (the MCP tools): ``tenant``'s session
        ``session_id``, which this replica does not hold, resumed here when its owner is gone and
        its entry records a snapshot (``recover``). ``here``: held here now; ``unknown``: no
        replica has it (or it is another key's), answered as an unknown id; ``lost``: its owner
        is gone and it cannot be resumed; ``busy``: a replica that still holds it runs a call
        in it now; ``elsewhere``: a replica that still holds it could not leave it (unsaved).
        An owner that still answers is asked to leave it here (``POST .../hand-over``, signed):
        the key's MCP calls reach this replica now, so they would not reach it there."""
        handed = False
        for _ in range(3):  # handed over, or taken over meanwhile by another replica: look again
            entry = await self.forwarding.session_owner(session_id, tenant)
            if entry is None:
                return "unknown"
            if entry.lost:
                return "lost"
            if not handed and not self.forwarding.restarted_here(entry) and await self._answers(entry):
                if self.recover is None or not self.recover.readable(session_id, entry):
                    return "elsewhere"  # it could not be resumed here: it stays where it is
                status = await self._hand_over(session_id, entry, tenant)
                if status == 409:
                    return "busy"
                if status != 204:
                    return "unknown" if status == 404 else "elsewhere"
                handed = True
                continue
            recovered = None
            if entry.saved is not None and self.recover is not None:
                recovered = await self.recover(session_id, entry, tenant)
            if recovered:
                return "here"
            if recovered is None:
                with contextlib.suppress(Refused):  # Redis down too: the entry expires on its own
                    await self.forwarding.mark_lost("session", session_id, entry)
                return "lost"
        return "elsewhere"

    async def _hand_over(self, session_id: str, entry: Entry, tenant: str) -> int:
        """Ask ``entry``'s owner to leave ``session_id`` to this replica; its status (0: no answer)."""
        target = f"/api/sessions/{session_id}/hand-over"
        headers = self.forwarding.headers(method="POST", target=target, tenant=tenant,
                                          client="replica", entry=entry, body=b"")  # fmt: skip
        try:
            response = await self.client().post(entry.owner + target, headers=headers, content=b"")
        except (httpx.HTTPError, OSError):
            return 0
        if response.status_code != 204:
            log.info("internal hop: the owner of a session did not hand it over: %s", response.status_code)
        return response.status_code

    async def download(self, request: Request, token: str) -> Response | None:
        """The owner's answer for the link ``token``, or None to answer here."""
        if internal_call(request) is not None:
            return None
        entry = await self.forwarding.download_owner(token)
        if entry is None:
            return None
        return await self._owner_answer(request, entry, entry.tenant, "download", token)

    async def _owner_answer(
        self, request: Request, entry: Entry, tenant: str, kind: str, key_id: str,
        *, user: str | None = None, user_token: bool = False,
    ) -> Response | None:
        """410 for a tombstone or an owner at this replica's own address (it restarted: this
        is the new process), else the owner's answer relayed. A session whose owner is gone
        and whose snapshot its entry records is resumed here instead (None: answer here)."""

        async def mark() -> None:
            await self.forwarding.mark_lost(kind, key_id, entry)

        async def gone() -> Response | None:
            if kind == "session" and entry.saved is not None and self.recover is not None:
                recovered = await self.recover(key_id, entry, tenant)
                if recovered is not None:
                    return None if recovered else _AGAIN
            return await self._lost(kind, entry, mark)

        if entry.lost:
            return error_response(lost(kind))
        if self.forwarding.restarted_here(entry):
            return await gone()
        return await self._relay(request, entry, tenant, kind, gone, user, user_token)

    async def _relay(
        self,
        request: Request,
        entry: Entry,
        tenant: str,
        kind: str,
        gone: Callable[[], Awaitable[Response | None]],
        user: str | None = None,
        user_token: bool = False,
    ) -> Response | None:
        body = await request.body()
        target = target_of(request.url.path, request.scope.get("query_string", b""))
        headers = {
            "accept-encoding": "identity",
            **self.forwarding.headers(method=request.scope.get("method", "GET"), target=target,
                                      tenant=tenant, client=client_of(request), entry=entry,
                                      body=body, user=user, user_token=user_token),  # fmt: skip
        }
        for name in ("host", "content-type", "accept"):
            if name in request.headers:
                headers[name] = request.headers[name]
        client = self.client()
        upstream_request = client.build_request(
            request.method, entry.owner + target, headers=headers, content=body
        )
        sending = asyncio.ensure_future(client.send(upstream_request, stream=True))
        try:
            upstream = await cancel_on_disconnect(request.receive, sending)
        except (httpx.ConnectError, httpx.ConnectTimeout):
            return await gone()
        except httpx.PoolTimeout:
            raise ApiError(
                503, "hop_busy", "too many calls to other replicas right now; retry",
                headers={"Retry-After": "1"},
            ) from None  # fmt: skip
        except httpx.TimeoutException:
            raise ApiError(
                504, "hop_timeout", "the replica holding this session did not answer in time"
            ) from None
        except (httpx.TransportError, OSError) as exc:
            # the owner dropped the connection mid-call (a reset, an early close, a half-written
            # answer: how it shows depends on timing): lost, unless it still answers
            log.info("internal hop: the call to %s broke: %s", entry.owner, type(exc).__name__)
            if not await self._answers(entry):
                return await gone()
            raise ApiError(
                503, "hop_interrupted",
                "the replica holding this session dropped the call; retry",
                headers={"Retry-After": "1"},
            ) from None  # fmt: skip
        if upstream.status_code == 410:  # the owner's address runs another process now
            await upstream.aclose()
            return await gone()
        relayed = {k: v for k, v in upstream.headers.items() if k.lower() in _RELAYED_HEADERS}
        return Relay(upstream, relayed, kind)

    async def _answers(self, entry: Entry) -> bool:
        """Whether the owner accepts a fresh connection and answers ``/healthz``."""
        try:
            response = await self.client().get(
                entry.owner + "/healthz", timeout=CONNECT_TIMEOUT_SECONDS * 2
            )
        except (httpx.HTTPError, OSError):
            return False
        return response.status_code < 500

    async def _lost(
        self, kind: str, entry: Entry, forget: Callable[[], Awaitable[None]]
    ) -> Response:
        log.info("internal hop: the %s owner at %s is gone", kind, entry.owner)
        with contextlib.suppress(Refused):  # Redis down too: the entry expires on its own
            await forget()
        return error_response(lost(kind))


_AGAIN = Response(status_code=503)  # a marker: another replica took the session over; look again
class Recover(Protocol):
    """A lost owner's session resumed here (``sessions.SessionRecovery``)."""

    async def __call__(self, session_id: str, entry: Entry, tenant: str) -> bool | None:
        """True: resumed here; False: another replica took it over; None: it cannot be."""

    def readable(self, session_id: str, entry: Entry) -> bool:
        """Whether its snapshot is one this replica could resume."""


class Relay(Response):
    """The owner's answer, relayed as it arrives (SSE included); the upstream response is closed
    when the body ends or the client leaves."""

    def __init__(self, upstream: httpx.Response, headers: dict[str, str], kind: str) -> None:
        self.upstream = upstream
        self.status_code = upstream.status_code
        self.relayed = headers
        self.kind = kind
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": [(k.lower().encode("latin-1"), v.encode("latin-1"))
                        for k, v in self.relayed.items()],
        }  # fmt: skip
        pump = asyncio.ensure_future(self._pump(send, start))
        gone = asyncio.ensure_future(until_disconnected(receive))
        try:
            await asyncio.wait({pump, gone}, return_when=asyncio.FIRST_COMPLETED)
            if pump.done() and not pump.cancelled() and pump.exception() is not None:
                # the answer has started: nothing can be said to the client any more
                log.info("internal hop: relaying stopped: %s", type(pump.exception()).__name__)
        finally:
            pump.cancel()
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump
            await self.upstream.aclose()  # the owner sees the client leave and cancels the run

    async def _pump(self, send: Send, start: Message) -> None:
        await send(start)
        try:
            async for chunk in self.upstream.aiter_raw():
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.HTTPError:
            log.info("internal hop: the owner went away while its answer was relayed")
            if self.relayed.get("content-type", "").startswith("text/event-stream"):
                err = json.dumps(lost(self.kind).body())
                tail = f"event: error\ndata: {err}\n\n".encode()
                await send({"type": "http.response.body", "body": tail, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
