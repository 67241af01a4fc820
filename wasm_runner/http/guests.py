"""Between guests on worker threads and the event loop: the bridges that carry output and
interactive input, and cancel on disconnect.

Guests themselves are admitted and run by the server's ``wasm_runner.execution.Executor``. When
the awaiting task is cancelled (the client went away), the run's ``cancel`` event is set and the
guest stops at once; its admission slot is released, and its metrics and audit record written, when
the worker thread returns.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import ApiError

__all__ = ["OutputBridge", "QueuedInput", "cancel_on_disconnect"]

T = TypeVar("T")


class OutputBridge:
    """``on_output`` for the sandbox: chunks from the worker thread arrive in ``queue`` as text.

    Each stream has its own incremental UTF-8 decoder, so a character split across chunks is
    decoded whole. ``queue`` yields ``(stream, text)`` pairs.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._decoders = {
            "stdout": codecs.getincrementaldecoder("utf-8")("replace"),
            "stderr": codecs.getincrementaldecoder("utf-8")("replace"),
        }

    def __call__(self, stream: str, chunk: bytes) -> None:  # worker thread
        self._loop.call_soon_threadsafe(self._deliver, stream, chunk)

    def _deliver(self, stream: str, chunk: bytes) -> None:
        decoder = self._decoders.get(stream)
        if decoder is None:
            return
        text = decoder.decode(chunk)
        if text:
            self.queue.put_nowait((stream, text))

    def flush(self) -> list[tuple[str, str]]:
        """Whatever is still queued or half-decoded, in order (call after the run ended)."""
        out: list[tuple[str, str]] = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        for stream, decoder in self._decoders.items():
            rest = decoder.decode(b"", final=True)
            if rest:
                out.append((stream, rest))
        return out


class QueuedInput:
    """Interactive stdin: the event loop ``feed``s bytes, the guest's thread ``read``s them.

    ``read(max_bytes, timeout)`` returns bytes, ``b""`` at end of input, or ``None`` when nothing
    arrived within ``timeout`` (the sandbox then checks its wall deadline and asks again).
    ``on_wait`` is called (from the worker thread) each time the guest starts waiting for input.
    """

    def __init__(
        self, on_wait: Callable[[], None] | None = None, max_buffer: int = 1 << 20
    ) -> None:
        self._buf = bytearray()
        self._eof = False
        self._cond = threading.Condition()
        self._on_wait = on_wait
        self._announced = False
        self.max_buffer = max_buffer

    def feed(self, data: bytes) -> bool:
        """Queue input for the guest; False (nothing queued) when the buffer is full or closed."""
        with self._cond:
            if self._eof or len(self._buf) + len(data) > self.max_buffer:
                return False
            self._buf += data
            self._announced = False
            self._cond.notify_all()
            return True

    def close(self) -> None:
        """End of input: the guest's next read returns ``b""``."""
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes | None:
        with self._cond:
            if not self._buf and not self._eof:
                if not self._announced and self._on_wait is not None:
                    self._announced = True
                    self._on_wait()
                self._cond.wait(timeout)
            if self._buf:
                size = max(1, min(max_bytes, len(self._buf)))
                data = bytes(self._buf[:size])
                del self._buf[:size]
                return data
            if self._eof:
                return b""
            return None


async def until_disconnected(receive: Callable[[], Any]) -> None:
    """Return when the HTTP client has gone away (after the request body was read)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


async def cancel_on_disconnect(receive: Callable[[], Any], work: asyncio.Future[T]) -> T:
    """Await ``work``; if the client disconnects first, cancel it (which cancels its guest)."""
    watcher: asyncio.Future[Any] = asyncio.ensure_future(until_disconnected(receive))
    try:
        pending: set[asyncio.Future[Any]] = {work, watcher}
        done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        if work not in done:
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
            # nobody reads this answer: the client has gone
            raise ApiError(
                400, "client_disconnected", "the client went away; the run was cancelled"
            )
        return await work
    finally:
        watcher.cancel()
