"""The outbox's worker over a real file store: what a send's outcome does to the entry (sent,
tried again with doubled waits, given up, kept aside), and a stop mid-send losing nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from wasm_runner.outbox import Entry, FileStore, NotYet, Undeliverable, Worker
from wasm_runner.outbox.worker import Outcome

Reports = list[tuple[Outcome, int, str]]
Send = Callable[[Entry], Awaitable[str]]


async def never_called(entry: Entry) -> str:
    raise AssertionError("not sent in this test")


def worker(tmp_path: Path, send: Send, reports: Reports, *, retry_seconds: float = 10.0,
           max_attempts: int | None = None, jitter: float = 0.0) -> Worker:
    def report(outcome: Outcome, entry: Entry, detail: str, error: BaseException | None) -> None:
        reports.append((outcome, entry.attempts, detail))

    return Worker(FileStore(tmp_path / "outbox", sent_keep_seconds=60), send, name="test", report=report,
                  retry_seconds=retry_seconds, retry_max_seconds=25.0, max_attempts=max_attempts, jitter=jitter)


def test_waits_double_up_to_the_most(tmp_path: Path) -> None:
    w = worker(tmp_path, never_called, [])
    assert [w.delay(n) for n in (1, 2, 3, 4)] == [10.0, 20.0, 25.0, 25.0]
    jittered = worker(tmp_path, never_called, [], jitter=0.1)
    assert all(10.0 <= jittered.delay(1) <= 11.0 for _ in range(50))


def test_each_outcome_of_a_send(tmp_path: Path) -> None:
    answers: dict[str, list[BaseException | str]] = {
        "lands": ["204"], "flaky": [NotYet("down"), RuntimeError("a bug"), "200"],
        "refused": [Undeliverable("no")], "never": [NotYet("down")] * 3,
    }  # fmt: skip

    async def send(entry: Entry) -> str:
        answer = answers[entry.payload["name"]].pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def test() -> None:
        reports: Reports = []
        w = worker(tmp_path, send, reports, max_attempts=3, retry_seconds=0.0)
        ids = {name: (await w.put({"name": name})).id for name in answers}
        for _ in range(4):
            await w.deliver_due()
        states = {name: await w.state(ident) for name, ident in ids.items()}
        assert states == {"lands": "sent", "flaky": "sent", "refused": "failed", "never": "failed"}
        assert sorted(reports) == sorted([
            ("sent", 1, "204"), ("retry", 1, "down"), ("retry", 2, "a bug"), ("sent", 3, "200"),
            ("undeliverable", 1, "no"), ("retry", 1, "down"), ("retry", 2, "down"), ("gave_up", 3, "down"),
        ])  # fmt: skip

    asyncio.run(test())


def test_a_retried_entry_waits_its_delay(tmp_path: Path) -> None:
    async def send(entry: Entry) -> str:
        raise NotYet("down")

    async def test() -> None:
        w = worker(tmp_path, send, [])
        entry = await w.put({"n": 1})
        await w.deliver_due()
        assert await w.store.claim(time.time()) == []  # not due for another 10 s
        (again,) = await w.store.claim(time.time() + 11)
        assert (again.id, again.attempts) == (entry.id, 1)

    asyncio.run(test())


def test_a_server_stopped_mid_send_keeps_the_entry(tmp_path: Path) -> None:
    started = asyncio.Event()

    async def send(entry: Entry) -> str:
        started.set()
        await asyncio.sleep(3600)  # a receiver that never answers
        return "200"

    async def test() -> None:
        w = worker(tmp_path, send, [])
        task = asyncio.ensure_future(w.run_forever())
        entry = await w.put({"n": 1})  # wakes the worker: no poll wait
        await asyncio.wait_for(started.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await w.state(entry.id) == "pending"
        (back,) = await w.store.claim(time.time())  # due at once for the next start, not after a claim expires
        assert (back.id, back.attempts) == (entry.id, 0)

    asyncio.run(test())


def test_a_server_stopped_mid_claim_or_before_the_rest_hands_every_entry_back(tmp_path: Path) -> None:
    """Stopped while the store's claim is under way (its renames finish in their thread all the
    same), or while sending the first of several claimed entries one after the other: every
    claimed entry is due again at once for the next start, none waits for its claim to go stale
    (a restarted server would sit on it for claim_seconds)."""
    started = asyncio.Event()

    async def send(entry: Entry) -> str:
        started.set()
        await asyncio.sleep(3600)
        return "200"

    class SlowClaims(FileStore):
        """The real file store, its claim answering only once the test has stopped the worker."""

        release = asyncio.Event()

        async def claim(self, now: float, limit: int = 16) -> list[Entry]:
            claimed = await super().claim(now, limit)
            await self.release.wait()
            return claimed

    async def test() -> None:
        for store in (FileStore(tmp_path / "one-by-one"), SlowClaims(tmp_path / "slow")):
            started.clear()
            w = Worker(store, send, name="test", retry_seconds=10.0, retry_max_seconds=25.0)
            entries = [await w.put({"n": n}) for n in range(3)]
            task = asyncio.ensure_future(w.run_forever())
            if isinstance(store, SlowClaims):
                for _ in range(600):  # until the claim has taken them all (none due), not yet answered
                    if await store.next_due() is None:
                        break
                    await asyncio.sleep(0.05)
                assert await store.next_due() is None
                task.cancel()
                store.release.set()
            else:
                await asyncio.wait_for(started.wait(), 30)
                task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            back = await store.claim(time.time())
            assert sorted(e.id for e in back) == sorted(e.id for e in entries), store

    asyncio.run(test())
