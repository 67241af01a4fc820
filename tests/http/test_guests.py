"""The bridges between guest threads and the event loop: output decoding and interactive input."""

from __future__ import annotations

import asyncio
import threading

from wasm_runner.downloads import DownloadStore
from wasm_runner.http.guests import OutputBridge, QueuedInput


def test_output_bridge_never_splits_a_character() -> None:
    async def scenario() -> list[tuple[str, str]]:
        bridge = OutputBridge(asyncio.get_running_loop())
        data = "héllo ✓".encode()
        chunks = [data[:2], data[2:9], data[9:]]  # splits inside 'é' and inside '✓'

        def worker() -> None:
            for c in chunks:
                bridge("stdout", c)
            bridge("stderr", b"\xff")  # not UTF-8: replaced, never an exception

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        await asyncio.sleep(0.05)
        return bridge.flush()

    got = asyncio.run(scenario())
    assert "".join(t for s, t in got if s == "stdout") == "héllo ✓"
    assert [t for s, t in got if s == "stderr"] == ["\ufffd"]


def test_queued_input_reads_waits_and_ends() -> None:
    wanted: list[int] = []
    inp = QueuedInput(on_wait=lambda: wanted.append(1), max_buffer=8)
    assert inp.read(10, timeout=0.01) is None  # nothing yet: the caller checks its deadline
    assert wanted == [1]
    assert inp.read(10, timeout=0.01) is None
    assert wanted == [1]  # announced once per wait, not once per poll
    assert inp.feed(b"abc\n")
    assert inp.read(2, timeout=0.01) == b"ab"
    assert inp.read(10, timeout=0.01) == b"c\n"
    assert not inp.feed(b"123456789")  # over the buffer: refused, not truncated
    inp.close()
    assert inp.read(10, timeout=0.01) == b""
    assert not inp.feed(b"late")


def test_queued_input_wakes_a_blocked_reader() -> None:
    inp = QueuedInput()
    got: list[bytes | None] = []
    t = threading.Thread(target=lambda: got.append(inp.read(100, timeout=30)))
    t.start()
    inp.feed(b"line\n")
    t.join(30)
    assert got == [b"line\n"]


def test_download_store_expires_and_keeps_its_budget() -> None:
    store = DownloadStore(ttl=60, max_bytes=10)
    first = store.put("a.txt", b"12345", "class")
    second = store.put("b.txt", b"67890", "class")
    assert store.get(first) is not None and store.get(second) is not None
    third = store.put("c.txt", b"abc", "class")  # over budget: the oldest goes
    assert store.get(first) is None and store.get(third) is not None
    assert store.get("guess") is None
    short = DownloadStore(ttl=0.01, max_bytes=100)
    token = short.put("x", b"x", "class")
    threading.Event().wait(0.05)
    assert short.get(token) is None
