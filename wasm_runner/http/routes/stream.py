"""``POST /api/run/stream``: one run whose output arrives while it runs, as Server-Sent Events.

Request: the same JSON body as ``POST /api/run`` (``{code, stdin?, limits?, profile?, files?,
runtime?, files_as?}``), sent with ``fetch`` (``EventSource`` cannot POST); read the body stream.
Refusals (bad body, auth, rate limit, queue full) come before the stream starts, as ordinary
4xx JSON errors. Once admitted the response is ``200 text/event-stream``::

    event: start
    data: {"request_id": "…", "profile": "student", "runtime": "default", "limits": {…}}

    event: stdout
    data: {"data": "hello\\n"}

    event: stderr
    data: {"data": "Traceback …"}

    event: result
    data: {…the result object, exactly as POST /api/run returns it…}

``stdout``/``stderr`` events carry text in the order the program printed it (chunks, not lines;
UTF-8 characters are never split). Output is coalesced: consecutive chunks of one stream become
one event, sent at most ``COALESCE_SECONDS`` (20 ms) after its first chunk arrived or once it holds
``COALESCE_CHARS`` (16 Ki characters); a switch between stdout and stderr always starts a new event,
so the order across the two streams is the order written. A print loop that hits the 1 MiB cap
arrives as a few dozen events. ``start`` also names the Python version (``"python": "3.15"``). ``: keep-alive`` comment lines arrive every 15 s while the
program is silent. ``result`` is always the last event; the result's ``stdout``/``stderr`` hold the
whole output again. Should the run fail inside the server after the stream started, the last event
is ``event: error`` with ``{"error": {"code", "message"}}`` instead. Closing the connection cancels
the run at once.

The same events are available over a WebSocket with interactive input: see ``interactive.py``,
and for a cell of a session at ``POST /api/sessions/{id}/run/stream`` (``sessions.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ..errors import ApiError, error_response
from ..guests import OutputBridge, until_disconnected
from ...execution import Refused
from ...result import Result
from ..service import Job
from ..faces import StreamFace, Streams
from ._common import app_service
from .run import job_from_request

__all__ = ["Coalescer", "RunEventStream", "python_version", "sse_event", "stream_endpoint", "routes"]

KEEPALIVE_SECONDS = 15.0
COALESCE_SECONDS = 0.02
COALESCE_CHARS = 16 << 10


def service_of(conn: HTTPConnection) -> StreamFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


class Coalescer:
    """Output chunks from an ``OutputBridge`` queue merged into fewer, larger events.

    ``get`` waits for the first chunk, then takes more of the same stream until the event holds
    ``COALESCE_CHARS`` or ``COALESCE_SECONDS`` passed; a chunk of the other stream is held for
    the next event. Cancelling ``get`` loses nothing: what it gathered stays here, and the next
    ``get`` or ``drain`` returns it first.
    """

    def __init__(self, queue: asyncio.Queue[tuple[str, str]]) -> None:
        self.queue = queue
        self.held: tuple[str, str] | None = None
        self.stream: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.started = 0.0
        self._task: asyncio.Future[tuple[str, str]] | None = None  # a queue.get() under way

    async def _next(self, timeout: float | None) -> tuple[str, str] | None:
        """The next queued chunk, or None after ``timeout``. The get under way survives a
        timeout or a cancel of the caller: its chunk is returned later, never dropped."""
        if self._task is None:
            self._task = asyncio.ensure_future(self.queue.get())
        done, _ = await asyncio.wait({self._task}, timeout=timeout)
        if not done:
            return None
        item, self._task = self._task.result(), None
        return item

    def _take(self, item: tuple[str, str]) -> bool:
        """Add ``item`` to the event being gathered; False (item held) on a stream switch."""
        if self.stream is None:
            self.stream, self.started = item[0], asyncio.get_running_loop().time()
        elif item[0] != self.stream:
            self.held = item
            return False
        self.parts.append(item[1])
        self.size += len(item[1])
        return True

    def _event(self) -> tuple[str, str]:
        assert self.stream is not None
        event = (self.stream, "".join(self.parts))
        self.stream, self.parts, self.size = None, [], 0
        return event

    async def get(self) -> tuple[str, str]:
        loop = asyncio.get_running_loop()
        if self.stream is None:
            first = self.held
            self.held = None
            if first is None:
                first = await self._next(None)
            assert first is not None
            self._take(first)
        while self.size < COALESCE_CHARS and self.held is None:
            item: tuple[str, str] | None = None
            if self._task is None and not self.queue.empty():
                item = self.queue.get_nowait()
            else:
                left = self.started + COALESCE_SECONDS - loop.time()
                if left <= 0:
                    break
                item = await self._next(left)
                if item is None:
                    break
            if not self._take(item):
                break
        return self._event()

    def drain(self, rest: list[tuple[str, str]] = ()) -> list[tuple[str, str]]:  # type: ignore[assignment]
        """Everything gathered, held or still queued, then ``rest``, as events in order
        (consecutive chunks of one stream merged)."""
        items: list[tuple[str, str]] = []
        if self.stream is not None:
            items.append(self._event())
        if self.held is not None:
            items.append(self.held)
            self.held = None
        if self._task is not None:
            if self._task.done() and not self._task.cancelled():
                items.append(self._task.result())
            else:
                self._task.cancel()  # Queue.get gives its item back when cancelled
            self._task = None
        while not self.queue.empty():
            items.append(self.queue.get_nowait())
        items.extend(rest)
        events: list[tuple[str, str]] = []
        for stream, text in items:
            if events and events[-1][0] == stream:
                events[-1] = (stream, events[-1][1] + text)
            elif text:
                events.append((stream, text))
        return events


async def python_version(service: Streams, runtime: str) -> str | None:
    """The Python version (``3.15``) of ``runtime``, for the start event; None if unknown."""
    try:
        sandbox = await asyncio.get_running_loop().run_in_executor(None, service.sandboxes.sandbox_for, runtime, None)
        return str(sandbox.runtime.python_version)
    except Exception:  # noqa: BLE001 - the run reports its own failure
        return None


def sse_event(event: str, data: Any) -> bytes:
    """One Server-Sent Event with a JSON payload on a single ``data:`` line."""
    payload = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return f"event: {event}\ndata: {payload}\n\n".encode("ascii")


class RunEventStream(Response):
    """An ASGI response that admits the job, then streams its output and result as SSE.

    ``run(on_output=..., on_admitted=...)`` runs the job (default: ``service.run_job``; a session
    cell: ``sessions.run``); ``finish(payload)`` may add to the result event (the session)."""

    def __init__(
        self,
        service: Streams,
        job: Job,
        files_as: str,
        *,
        run: Callable[..., Awaitable[Result]] | None = None,
        finish: Callable[[dict[str, Any]], None] | None = None,
        lang: str | None = None,
    ) -> None:
        self.service = service
        self.job = job
        self.files_as = files_as
        self.lang = lang  # the explanation's language
        self.run = run or (lambda **kw: service.run_job(job, **kw))
        self.finish = finish
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        bridge = OutputBridge(loop)
        admitted = asyncio.Event()
        disconnected = asyncio.ensure_future(until_disconnected(receive))
        work = asyncio.ensure_future(self.run(on_output=bridge, on_admitted=admitted.set))
        admitted_wait = asyncio.ensure_future(admitted.wait())
        try:
            await asyncio.wait(
                {work, admitted_wait, disconnected}, return_when=asyncio.FIRST_COMPLETED
            )
            if disconnected.done():
                return
            if not admitted.is_set():  # refused before the stream started: an ordinary 4xx
                try:
                    work.result()
                except Refused as exc:  # ApiError, or the session store's refusals
                    await error_response(exc)(scope, receive, send)
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"text/event-stream; charset=utf-8"),
                        (b"cache-control", b"no-store"),
                        (b"x-accel-buffering", b"no"),
                    ],
                }
            )
            info = self._start_info()
            info["python"] = await python_version(self.service, self.job.runtime)
            await self._body(send, sse_event("start", info))
            await self._pump(send, bridge, work, disconnected)
        finally:
            admitted_wait.cancel()
            disconnected.cancel()
            if not work.done():
                work.cancel()  # client gone: cancels the guest

    def _start_info(self) -> dict[str, Any]:
        return {
            "request_id": self.job.request_id,
            "profile": self.job.profile.name,
            "runtime": self.job.runtime,
            "limits": self.job.limits.to_dict(),
        }

    async def _body(self, send: Send, chunk: bytes, more: bool = True) -> None:
        await send({"type": "http.response.body", "body": chunk, "more_body": more})

    async def _pump(
        self,
        send: Send,
        bridge: OutputBridge,
        work: asyncio.Future[Any],
        disconnected: asyncio.Future[None],
    ) -> None:
        events = Coalescer(bridge.queue)
        while True:
            getter = asyncio.ensure_future(events.get())
            done, _ = await asyncio.wait(
                {getter, work, disconnected},
                timeout=KEEPALIVE_SECONDS,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if getter in done:
                stream, text = getter.result()
                await self._body(send, sse_event(stream, {"data": text}))
                continue
            getter.cancel()
            if disconnected in done:
                return
            if work in done:
                break
            await self._body(send, b": keep-alive\n\n")
        for stream, text in events.drain(bridge.flush()):
            await self._body(send, sse_event(stream, {"data": text}))
        try:
            payload = self.service.render(work.result(), self.files_as, self.lang)
            if self.finish is not None:
                self.finish(payload)
            final = sse_event("result", payload)
        except Refused as exc:
            final = sse_event("error", exc.body())
        except Exception:
            error = ApiError(500, "internal_error", "the run failed inside the server")
            final = sse_event("error", error.body())
        await self._body(send, final, more=False)


async def stream_endpoint(request: Request) -> Response:
    service = service_of(request)
    job, body = await job_from_request(service, request, "stream")
    return RunEventStream(service, job, body.files_as, lang=body.lang)


def routes() -> list[BaseRoute]:
    return [Route("/api/run/stream", stream_endpoint, methods=["POST"])]
