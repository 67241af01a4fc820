"""``wasm_runner.warmup``: a runtime prepared in the background, runs waiting for it (bounded),
refused with ``503 warming`` and a Retry-After meanwhile, a failure reported and kept, not
swallowed. The maker here is a plain function that blocks until released (what a compile does);
the real compile is in ``tests/http/test_first_start.py``."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any

import pytest

from wasm_runner.execution import Refused
from wasm_runner.warmup import Warmup


def run_in_own_loop(coro: Coroutine[Any, Any, None]) -> None:
    """asyncio.run in a thread of its own: earlier tests in the same process (Playwright's sync
    API) can leave an event loop running in the main thread, where asyncio.run refuses to start."""
    failure: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:  # handed back to the test's thread
            failure.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]

def test_runs_wait_then_are_refused_while_the_runtime_is_prepared_then_pass() -> None:
    release = threading.Event()
    made: list[tuple[str, str | None]] = []

    def make(runtime: str, image: str | None) -> None:
        release.wait(60)
        made.append((runtime, image))

    warmup = Warmup(make, estimate=lambda runtime, image: 90.0)

    async def scenario() -> None:
        with pytest.raises(Refused) as refused:
            await warmup.wait("default", "datascience", timeout=0.3)
        assert refused.value.status == 503 and refused.value.code == "warming"
        assert 5 <= int(refused.value.headers["Retry-After"]) <= 90
        assert "first start only" in refused.value.message
        [prep] = warmup.preparations()
        assert prep.describe()["state"] == "preparing" and prep.describe()["seconds_left"] >= 5
        waiting = asyncio.ensure_future(warmup.wait("default", "datascience", timeout=60))
        await asyncio.sleep(0.2)
        release.set()
        await waiting  # ready: the run goes on
        await warmup.wait("default", "datascience", timeout=0)  # ready: no wait at all
        assert prep.state == "ready" and prep.describe() == {
            "runtime": "default", "image": "datascience", "state": "ready"}

    run_in_own_loop(scenario())
    assert made == [("default", "datascience")]  # made once, however many waited


def test_a_failed_preparation_is_logged_and_refused_not_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    def make(runtime: str, image: str | None) -> None:
        raise RuntimeError("the compiler ran out of memory")

    warmup = Warmup(make, estimate=lambda runtime, image: 30.0)

    async def scenario() -> None:
        with pytest.raises(Refused) as refused:
            await warmup.wait("small", None, timeout=30)
        assert refused.value.status == 503 and refused.value.code == "runtime_failed"
        assert int(refused.value.headers["Retry-After"]) >= 1
        [prep] = warmup.preparations()
        assert prep.describe()["state"] == "failed"
        with pytest.raises(Refused):  # not tried again at once
            await warmup.wait("small", None, timeout=30)

    with caplog.at_level(logging.ERROR, logger="wasm_runner.warmup"):
        run_in_own_loop(scenario())
    assert "preparing the small runtime failed" in caplog.text
    assert "the compiler ran out of memory" in caplog.text
    assert len(warmup.preparations()) == 1


def test_a_sandbox_made_already_is_ready_at_once() -> None:
    warmup = Warmup(lambda runtime, image: None, made=lambda runtime, image: True)
    prep = warmup.start("default", "plain")
    assert prep.state == "ready" and prep.seconds_left() == 0
    run_in_own_loop(warmup.wait("default", "plain", timeout=0))
