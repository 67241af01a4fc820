"""``WebSocket /api/run/ws``: a run with interactive input; ``input()`` waits for the client.

The API key goes in a header or, from browsers (which cannot set WebSocket headers), as
``api_key`` in the first message (or the ``api_key`` query parameter, which lands in access logs).
Browsers connecting from another origin must be in the CORS allowlist. Every message is a JSON
text frame.

Client -> server::

    {"type": "run", "api_key"?: "...", "user"?: "...", "user_token"?: "...", "code": "...",
     "stdin"?: "...", "limits"?: {...}, "profile"?: "...", "filename"?: "main.py",
     "display"?: true|false|"figures", "files"?: [...], "runtime"?: "...",
     "files_as"?: "base64"|"url"}                                        # first message, once
    {"type": "stdin", "data": "Ada\\n"}    # input for the program (a line, or any text)
    {"type": "eof"}                       # end of input: the program's next read gets EOF
    {"type": "cancel"}                    # stop the program; a "cancelled" result follows

Server -> client::

    {"type": "start", "request_id": "...", "profile": "...", "runtime": "...", "python": "3.15",
     "limits": {...}}
    {"type": "stdout", "data": "What is your name? "}
    {"type": "stderr", "data": "..."}
    {"type": "input_wanted"}              # the program is blocked reading stdin
    {"type": "result", "result": {...the result object...}}      # last message; then close 1000
    {"type": "error", "error": {"code": "...", "message": "...", "retry_after"?: n}}

An ``error`` before ``start`` is fatal (bad first message, auth, rate limit, queue full) and the
socket closes (code 1008, or 1013 "try again later" when busy). An ``error`` after ``start`` reports
a bad client message and the run continues. Time the program spends waiting for input does not
count toward the wall-clock limit (the student is thinking, not running); one wait longer than the
``input_wait_seconds`` limit (default 5 minutes) ends the run as abandoned: status ``timeout``,
limit ``input_wait``. A waiting run uses no CPU: it is parked, without its run slot or its key's
in-flight place (``admission.Admission.park``), and resumes ahead of queued runs. The result's
``input_wait_ms`` says how long the run waited in all (it is part of ``wall_ms``). ``user`` and
``user_token`` name the user inside the key (``users.py``), as the headers do on other routes. Output messages are coalesced as on the SSE stream
(see ``stream.py``); everything printed before a read goes out before ``input_wanted``. Closing
the socket cancels the run at once.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from ...execution import Refused
from ..auth import WS_SUBPROTOCOL
from ..errors import ApiError
from ..middleware import host_allowed
from ..serving import WS_MARGIN_BYTES, WS_MAX_SIZE_EXTENSION
from ..guests import OutputBridge, QueuedInput
from ..schemas import WsStart, decode_json, parse_model
from ..service import Job, client_address
from ..faces import InteractiveFace
from ._common import app_service
from .stream import Coalescer, python_version

__all__ = ["FIRST_MESSAGE_SECONDS", "MAX_MESSAGE_BYTES", "origin_allowed", "interactive_endpoint", "routes"]

FIRST_MESSAGE_SECONDS = 30.0
MAX_MESSAGE_BYTES = 1 << 20


def service_of(conn: HTTPConnection) -> InteractiveFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


def origin_allowed(
    ws: WebSocket, allowlist: tuple[str, ...], allowed_hosts: tuple[str, ...] = ()
) -> bool:
    """Non-browser clients send no Origin; browsers must be on the allowlist, or same-host with a
    host name this server is configured to answer to (a rebinding page's Host is its own name)."""
    origin = ws.headers.get("origin")
    if origin is None:
        return True
    if origin in allowlist or "*" in allowlist:
        return True
    netloc = urlsplit(origin).netloc
    return netloc == ws.headers.get("host", "") and host_allowed(netloc, allowed_hosts)


def _set_max_message(ws: WebSocket, max_bytes: int) -> None:
    """Let messages up to ``max_bytes`` through the server's WebSocket protocol (serving.py)."""
    ext = ws.scope.get("extensions", {}).get(WS_MAX_SIZE_EXTENSION)
    if ext is not None:
        ext["set"](max_bytes)


async def _fatal(ws: WebSocket, error: Refused) -> None:
    body = error.body()
    if "Retry-After" in error.headers:
        body["error"]["retry_after"] = int(error.headers["Retry-After"])
    await ws.send_json({"type": "error", **body})
    await ws.close(code=1013 if error.status == 429 else 1008)


async def _first_message(
    ws: WebSocket, service: InteractiveFace, max_bytes: int
) -> tuple[Any, dict[str, str | None]]:
    """The run message, decoded (not yet validated), and the API key, user id and user token it
    carried (each None when absent)."""
    try:
        raw = await asyncio.wait_for(ws.receive_text(), FIRST_MESSAGE_SECONDS)
    except TimeoutError:
        raise ApiError(400, "no_run_message", "send the run message within 30 seconds") from None
    except KeyError:  # a binary frame
        raise ApiError(400, "bad_message", "messages must be JSON text frames") from None
    if len(raw) > max_bytes:
        raise ApiError(413, "body_too_large", f"the run message is over {max_bytes} bytes")
    bounds = service.client_bounds
    message = await asyncio.get_running_loop().run_in_executor(
        None, decode_json, raw, bounds.max_json_structure, bounds.max_json_depth
    )
    who: dict[str, str | None] = {}
    for name in ("api_key", "user", "user_token"):
        value = message.pop(name, None) if isinstance(message, dict) else None
        if value is not None and not isinstance(value, str):
            raise ApiError(422, "invalid_request", f"{name}: must be a string")
        who[name] = value
    return message, who


async def interactive_endpoint(ws: WebSocket) -> None:
    service = service_of(ws)
    bounds = service.client_bounds
    if not origin_allowed(ws, service.cors_origins, bounds.allowed_hosts):
        await ws.close(code=1008, reason="origin not allowed")
        return
    # A key in the handshake (header, subprotocol, query) lets a full-size run message through;
    # without one, the first message is capped small before it is buffered (serving.py).
    first_max = bounds.ws_first_message_bytes
    if service.gatekeeper.would_authenticate(ws.headers, ws.query_params, allow_query=True):
        first_max = bounds.max_body_bytes + WS_MARGIN_BYTES
        _set_max_message(ws, first_max)
    offered = ws.scope.get("subprotocols", [])
    await ws.accept(subprotocol=WS_SUBPROTOCOL if WS_SUBPROTOCOL in offered else None)
    try:
        message, who = await _first_message(ws, service, first_max)
        tenant = await service.caller(
            ws, allow_query_key=True, key=who["api_key"], user=who["user"],
            user_token=who["user_token"],
        )  # fmt: skip
        _set_max_message(ws, MAX_MESSAGE_BYTES + 1024)
        start = parse_model(WsStart, message)
        profile, limits, runtime = service.policy(
            tenant, start.profile, start.limits, start.runtime
        )
        job = Job(
            tenant=tenant,
            client=client_address(ws),
            kind="ws",
            profile=profile,
            limits=limits,
            runtime=runtime,
            code=start.code,
            stdin=None,
            files=service.files_in(start.files),
            display=profile.display if start.display is None else start.display,
            filename=start.filename,
            packages=tuple(start.packages or ()),
        )
        job.functions = service.host_functions(tenant, profile, start.functions, job.request_id)
        service.network_for(job)
    except Refused as exc:  # ApiError, or the shared state's refusals
        await _fatal(ws, exc)
        return
    except WebSocketDisconnect:
        return
    await _run_interactive(ws, service, job, start)


async def _run_interactive(ws: WebSocket, service: InteractiveFace, job: Job, start: WsStart) -> None:
    loop = asyncio.get_running_loop()
    bridge = OutputBridge(loop)
    wanted = asyncio.Event()

    def input_wanted() -> None:  # called on the guest's thread
        loop.call_soon_threadsafe(wanted.set)

    inp = QueuedInput(on_wait=input_wanted)
    if start.stdin:
        inp.feed(start.stdin.encode("utf-8"))
    cancel = threading.Event()
    admitted = asyncio.Event()
    work = asyncio.ensure_future(
        service.run_job(
            job, on_output=bridge, input_source=inp, cancel=cancel, on_admitted=admitted.set
        )
    )
    reader = asyncio.ensure_future(_read_client(ws, inp, cancel))
    try:
        admitted_wait = asyncio.ensure_future(admitted.wait())
        await asyncio.wait({work, admitted_wait, reader}, return_when=asyncio.FIRST_COMPLETED)
        admitted_wait.cancel()
        if reader.done():  # client went away while queued
            return
        if not admitted.is_set():
            try:
                work.result()
            except Refused as exc:  # ApiError, admission's or the scale-out refusals (draining)
                await _fatal(ws, exc)
            return
        await ws.send_json(
            {
                "type": "start",
                "request_id": job.request_id,
                "profile": job.profile.name,
                "runtime": job.runtime,
                "python": await python_version(service, job.runtime),
                "limits": job.limits.to_dict(),
            }
        )
        events = Coalescer(bridge.queue)
        await _pump(ws, events, wanted, work, reader)
        if reader.done():
            return
        for stream, text in events.drain(bridge.flush()):
            await ws.send_json({"type": stream, "data": text})
        result = service.render(work.result(), start.files_as, start.lang)
        await ws.send_text(json.dumps({"type": "result", "result": result}, ensure_ascii=True))
        await ws.close(code=1000)
    except (WebSocketDisconnect, RuntimeError):
        pass  # the client went away mid-send
    finally:
        inp.close()
        reader.cancel()
        if not work.done():
            cancel.set()
            work.cancel()


async def _pump(
    ws: WebSocket,
    events: Coalescer,
    wanted: asyncio.Event,
    work: asyncio.Future[Any],
    reader: asyncio.Future[None],
) -> None:
    """Forward output and input requests until the run ends or the client leaves."""
    while True:
        getter = asyncio.ensure_future(events.get())
        want = asyncio.ensure_future(wanted.wait())
        done, _ = await asyncio.wait(
            {getter, want, work, reader}, return_when=asyncio.FIRST_COMPLETED
        )
        if getter in done:
            stream, text = getter.result()
            await ws.send_json({"type": stream, "data": text})
        else:
            getter.cancel()
        if want in done:
            wanted.clear()
            # output printed before the prompt goes out first
            for stream, text in events.drain():
                await ws.send_json({"type": stream, "data": text})
            await ws.send_json({"type": "input_wanted"})
        else:
            want.cancel()
        if reader in done or (work in done and getter not in done):
            return


async def _read_client(ws: WebSocket, inp: QueuedInput, cancel: threading.Event) -> None:
    """Feed client messages to the program; returns when the client disconnects."""
    while True:
        try:
            message = await ws.receive()
        except RuntimeError:
            return
        if message["type"] == "websocket.disconnect":
            cancel.set()
            return
        error = _apply(message.get("text"), inp, cancel)
        if error is not None and ws.application_state is WebSocketState.CONNECTED:
            try:
                await ws.send_json({"type": "error", **error.body()})
            except (WebSocketDisconnect, RuntimeError):
                return


def _apply(text: str | None, inp: QueuedInput, cancel: threading.Event) -> ApiError | None:
    """Act on one client message; an ``ApiError`` to report when it is not understood."""
    if text is None:
        return ApiError(400, "bad_message", "messages must be JSON text frames")
    if len(text) > MAX_MESSAGE_BYTES:
        return ApiError(
            413, "message_too_large", f"messages are limited to {MAX_MESSAGE_BYTES} bytes"
        )
    try:
        msg = decode_json(text)
    except ApiError as exc:
        return exc
    kind = msg.get("type") if isinstance(msg, dict) else None
    if kind == "stdin":
        data = msg.get("data")
        if not isinstance(data, str):
            return ApiError(422, "bad_message", "a stdin message needs 'data' as a string")
        try:
            encoded = data.encode("utf-8")
        except UnicodeEncodeError:
            return ApiError(422, "bad_message", "stdin data is not valid Unicode text")
        if not inp.feed(encoded):
            return ApiError(409, "input_refused", "input is closed or its buffer is full")
        return None
    if kind == "eof":
        inp.close()
        return None
    if kind == "cancel":
        cancel.set()
        return None
    return ApiError(422, "bad_message", "message type must be one of: stdin, eof, cancel")


def routes() -> list[BaseRoute]:
    return [WebSocketRoute("/api/run/ws", interactive_endpoint)]
