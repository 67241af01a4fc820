"""Where a coroutine host function runs when the run's caller has no event loop to offer: one
background loop on a daemon thread of its own, started on first use, shared by every run."""

from __future__ import annotations

import asyncio
import threading

__all__ = ["background_loop"]

_lock = threading.Lock()
_loop: list[asyncio.AbstractEventLoop] = []


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background loop for host functions, running."""
    with _lock:
        if _loop and not _loop[0].is_closed():
            return _loop[0]
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(started.set)
            loop.run_forever()

        threading.Thread(target=run, name="wasm-runner-host-functions", daemon=True).start()
        started.wait()
        _loop[:] = [loop]
        return loop
