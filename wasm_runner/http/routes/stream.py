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
UTF-8 characters are never split). ``: keep-alive`` comment lines arrive every 15 s while the
program is silent. ``result`` is always the last event; the result's ``stdout``/``stderr`` hold the
whole output again. Should the run fail inside the server after the stream started, the last event
is ``event: error`` with ``{"error": {"code", "message"}}`` instead. Closing the connection cancels
the run at once.

The same events are available over a WebSocket with interactive input: see ``interactive.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ..errors import ApiError, error_response
from ..guests import OutputBridge, until_disconnected
from ..service import Job, Service
from ._common import service_of
from .run import job_from_request

KEEPALIVE_SECONDS = 15.0


def sse_event(event: str, data: Any) -> bytes:
    """One Server-Sent Event with a JSON payload on a single ``data:`` line."""
    payload = json.dumps(data, ensure_ascii=True, separators=(",", ":"))
    return f"event: {event}\ndata: {payload}\n\n".encode("ascii")


class RunEventStream(Response):
    """An ASGI response that admits the job, then streams its output and result as SSE."""

    def __init__(self, service: Service, job: Job, files_as: str) -> None:
        self.service = service
        self.job = job
        self.files_as = files_as
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        bridge = OutputBridge(loop)
        admitted = asyncio.Event()
        disconnected = asyncio.ensure_future(until_disconnected(receive))
        work = asyncio.ensure_future(
            self.service.run_job(self.job, on_output=bridge, on_admitted=admitted.set)
        )
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
                except ApiError as exc:
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
            await self._body(send, sse_event("start", self._start_info()))
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
        while True:
            getter = asyncio.ensure_future(bridge.queue.get())
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
        for stream, text in bridge.flush():
            await self._body(send, sse_event(stream, {"data": text}))
        try:
            final = sse_event("result", self.service.render(work.result(), self.files_as))
        except ApiError as exc:
            final = sse_event("error", exc.body())
        except Exception:
            error = ApiError(500, "internal_error", "the run failed inside the server")
            final = sse_event("error", error.body())
        await self._body(send, final, more=False)


async def stream_endpoint(request: Request) -> Response:
    service = service_of(request)
    job, body = await job_from_request(service, request, "stream")
    return RunEventStream(service, job, body.files_as)


def routes() -> list[BaseRoute]:
    return [Route("/api/run/stream", stream_endpoint, methods=["POST"])]
