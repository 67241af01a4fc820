"""The outbox's stores keep one contract (``wasm_runner.outbox.store.Store``), checked on each: the
file store in a private folder and the Redis store on a real redis-server. Two stores on the same
folder or Redis stand for two replicas (or a restarted one)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.redis_process import RedisProcess
from wasm_runner.outbox import Entry, FileStore, RedisStore, Store
from wasm_runner.scaleout.state import SharedState, SharedStateUnavailable

# a factory of stores on ONE place: each call is another replica (or the same one started again)
Place = Callable[..., Store]


@asynccontextmanager
async def place(kind: str, tmp_path: Path, redis_server: RedisProcess | None) -> AsyncIterator[Place]:
    if kind == "files":
        yield lambda **options: FileStore(tmp_path / "outbox", **options)
        return
    assert redis_server is not None
    prefix, clients = f"outbox-test-{time.time_ns()}:", []

    def make(**options: Any) -> Store:
        shared = SharedState(redis_server.url, secret="s" * 32, key_prefix=prefix)
        clients.append(shared)
        return RedisStore(shared, "test", **options)

    try:
        yield make
    finally:
        for shared in clients:
            await shared.close()


async def started(store: Store) -> Store:
    if isinstance(store, RedisStore):
        await store.shared.start()
    return store


@pytest.fixture(params=["files", "redis"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run_on(kind: str, tmp_path: Path, request: pytest.FixtureRequest, test: Callable[[Place], Any]) -> None:
    redis_server = request.getfixturevalue("redis_server") if kind == "redis" else None

    async def go() -> None:
        async with place(kind, tmp_path, redis_server) as make:
            await test(make)

    asyncio.run(go())


def entry(n: int, due: float) -> Entry:
    return Entry({"n": n}, due=due)


def test_due_entries_are_claimed_once_in_due_order(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async def test(make: Place) -> None:
        store = await started(make())
        now = time.time()
        later, second, first = entry(3, now + 3600), entry(2, now - 1), entry(1, now - 2)
        for e in (later, second, first):
            await store.add(e)
        assert await store.next_due() == pytest.approx(first.due)
        claimed = await store.claim(now + 1)
        assert [e.payload for e in claimed] == [{"n": 1}, {"n": 2}]  # the earliest due first; not the later one
        assert await store.claim(now + 1) == []  # claimed: never handed out twice
        assert [await store.state(e.id) for e in (first, later)] == ["pending", "pending"]
        claimed[0].attempts, claimed[0].due = 1, now + 10
        await store.retry(claimed[0])
        await store.done(claimed[1])
        assert await store.state(second.id) == "unknown"  # no trace kept unless asked
        assert await store.claim(now + 5) == []  # the retried one waits for its new due time
        again = await store.claim(now + 11)
        assert [(e.id, e.attempts, e.payload) for e in again] == [(first.id, 1, {"n": 1})]
        await store.done(again[0])
        assert [e.id for e in await store.claim(now + 7200)] == [later.id]
        assert await store.next_due() is None

    run_on(kind, tmp_path, request, test)


def test_sent_failed_and_unknown_entries_say_so(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async def test(make: Place) -> None:
        store = await started(make(sent_keep_seconds=3600))
        sent, refused = entry(1, 0), entry(2, 0)
        await store.add(sent)
        await store.add(refused)
        one, two = await store.claim(time.time())
        await store.done(one)
        await store.fail(two)
        assert [await store.state(e.id) for e in (sent, refused)] == ["sent", "failed"]
        assert await store.claim(time.time() + 3600) == []  # a failed entry is never tried again
        for unknown in ("00000000000000000000-0000000000000000", "../../etc/passwd", "", "x" * 65):
            assert await store.state(unknown) == "unknown"

    run_on(kind, tmp_path, request, test)


def test_a_dead_replicas_claim_comes_back_after_claim_seconds(kind: str, tmp_path: Path,
                                                              request: pytest.FixtureRequest) -> None:
    async def test(make: Place) -> None:
        dead, alive = await started(make(claim_seconds=30)), await started(make(claim_seconds=30))
        now = time.time()
        waiting = entry(1, now)
        await dead.add(waiting)
        (claimed,) = await dead.claim(now)  # and its replica dies before done
        assert await alive.claim(now + 29) == []  # still within its claim
        (back,) = await alive.claim(now + 31)
        assert (back.id, back.payload) == (waiting.id, {"n": 1})
        assert await dead.claim(now + 31) == []  # taken back once, by one replica

    run_on(kind, tmp_path, request, test)


def test_two_replicas_racing_claim_each_entry_once(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async def test(make: Place) -> None:
        replicas = [await started(make()) for _ in range(2)]
        entries = [entry(n, 0) for n in range(40)]
        for e in entries:
            await replicas[0].add(e)
        now = time.time()
        rounds = await asyncio.gather(*(r.claim(now, limit=5) for _ in range(6) for r in replicas))
        got = [e.id for found in rounds for e in found]
        assert sorted(got) == sorted(e.id for e in entries)  # all claimed, none twice

    run_on(kind, tmp_path, request, test)


def test_entries_survive_a_restart(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    async def test(make: Place) -> None:
        before = await started(make(claim_seconds=30))
        now = time.time()
        waiting, in_flight = entry(1, now), entry(2, now)
        await before.add(waiting)
        await before.add(in_flight)
        assert len(await before.claim(now, limit=1)) == 1  # one claimed when the replica stopped
        after = await started(make(claim_seconds=30))  # the replica started again
        assert {await after.state(e.id) for e in (waiting, in_flight)} == {"pending"}
        (found,) = await after.claim(now)  # the one that waited
        await after.done(found)
        assert len(await after.claim(now + 31)) == 1  # the one in flight, back after claim_seconds

    run_on(kind, tmp_path, request, test)


def test_an_unreadable_entry_is_kept_aside_and_the_rest_still_flows(kind: str, tmp_path: Path,
                                                                     request: pytest.FixtureRequest) -> None:
    async def test(make: Place) -> None:
        store = await started(make())
        good = entry(1, 0)
        await store.add(good)
        if isinstance(store, FileStore):
            (store.folder / "00000000000000000001-broken.json").write_text("{not json")
        else:
            assert isinstance(store, RedisStore)
            await store.shared.redis.hset(store.shared.key("outbox", "test", "items"), "broken", "{not json")
            await store.shared.redis.zadd(store.shared.key("outbox", "test", "due"), {"broken": 0})
        (found,) = await store.claim(time.time())
        assert found.id == good.id
        await store.done(found)
        assert await store.claim(time.time() + 3600) == []  # not handed out again, not lost either
        assert await store.state("broken") in ("failed", "unknown")
        if isinstance(store, FileStore):
            assert (store.folder / "failed" / "00000000000000000001-broken.unreadable").exists()
        else:
            assert await store.state("broken") == "failed"

    run_on(kind, tmp_path, request, test)


def test_the_file_store_is_private(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "outbox")
    asyncio.run(store.add(entry(1, 0)))
    (path,) = store.folder.glob("*.json")
    assert store.folder.stat().st_mode & 0o777 == 0o700 and path.stat().st_mode & 0o777 == 0o600
    assert not list(store.folder.glob(".*.tmp"))  # written atomically: no temporary file left


def test_redis_down_is_a_bounded_503_and_the_store_works_again(redis: RedisProcess) -> None:
    """Every Redis call goes through the replica's bounded client: Redis stopped is
    ``SharedStateUnavailable`` (503 shared_state_unavailable), not a hang; back, the store works."""

    async def test() -> None:
        shared = SharedState(redis.url, secret="s" * 32, key_prefix=f"outbox-down-{time.time_ns()}:", timeout=1.0)
        await shared.start()
        store = RedisStore(shared, "test")
        try:
            kept = entry(1, 0)
            await store.add(kept)
            redis.stop()
            try:
                with pytest.raises(SharedStateUnavailable) as refused:
                    await store.add(entry(2, 0))
                assert (refused.value.status, refused.value.code) == (503, "shared_state_unavailable")
                assert "the test outbox (Redis) is not reachable" in str(refused.value)
                with pytest.raises(SharedStateUnavailable):
                    await store.claim(time.time())
                assert not shared.up
            finally:
                redis.start()
            await store.add(entry(3, 0))  # the same client connects again
            assert [e.payload["n"] for e in await store.claim(time.time())] == [3]  # (no persistence: --save "")
            assert shared.up
        finally:
            await shared.close()

    asyncio.run(test())
