"""Leases and replica heartbeats (``wasm_runner.scaleout.leases``) on a real redis-server, without
guests: two replicas' handles on one Redis. A replica that stops beating (as one killed with -9
does) has its leases counted out within the heartbeat's lapse, long before their own TTL; one
that only stalled gets them back at its next beat. (End to end with real replicas and kill -9:
``tests/cluster/test_shared_state.py``.)"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tests.support.redis_process import RedisProcess

from wasm_runner.scaleout.leases import HEARTBEAT_TTL_SECONDS, RedisLeases
from wasm_runner.scaleout.state import SharedState

LEASE_TTL = 60.0  # far longer than the heartbeat: whatever ends a lease here, it is not its TTL


def replica(redis: RedisProcess, name: str, prefix: str) -> SharedState:
    return SharedState(redis.url, secret="s" * 32, lease_ttl=LEASE_TTL, key_prefix=prefix, replica_id=name)


async def until(check: Callable[[], Awaitable[bool]], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if await check():
            return True
        await asyncio.sleep(0.2)
    return await check()


def test_a_replica_that_stops_beating_loses_its_leases_within_the_heartbeat(
    redis_server: RedisProcess,
) -> None:
    async def scenario() -> None:
        a_state, b_state = replica(redis_server, "alive", "t1:"), replica(redis_server, "dead", "t1:")
        await a_state.start()
        await b_state.start()
        a, dead = RedisLeases(a_state), RedisLeases(b_state)
        beating = asyncio.ensure_future(a.beat_forever())
        try:
            held = await dead.take("run", "class", 2)
            assert held is not None and await dead.take("run", "class", 2) is not None
            assert await a.take("run", "class", 2) is None  # both places held by "dead"
            assert await a.count("run", "class") == 2
            # "dead" never beats again (its refresher would keep the leases for LEASE_TTL)
            start = time.monotonic()
            assert await until(lambda: _zero(a, "run", "class"), timeout=HEARTBEAT_TTL_SECONDS + 10)
            assert time.monotonic() - start < LEASE_TTL / 4
            mine = await a.take("run", "class", 2)
            assert mine is not None and await a.count("run", "class") == 1
            # the survivor keeps its own lease: its heartbeat is alive
            await asyncio.sleep(HEARTBEAT_TTL_SECONDS + 0.5)
            assert await a.count("run", "class") == 1
            mine.release()
            assert await until(lambda: _zero(a, "run", "class"), timeout=10)
        finally:
            beating.cancel()
            await a_state.close()
            await b_state.close()

    asyncio.run(scenario())


def test_a_stalled_replica_writes_its_leases_back_at_its_next_beat(
    redis_server: RedisProcess,
) -> None:
    async def scenario() -> None:
        s_state, o_state = replica(redis_server, "stalled", "t2:"), replica(redis_server, "other", "t2:")
        await s_state.start()
        await o_state.start()
        stalled, other = RedisLeases(s_state), RedisLeases(o_state)
        try:
            assert await stalled.take("session", "k", 1) is not None
            await asyncio.sleep(HEARTBEAT_TTL_SECONDS + 0.5)  # no beat: as a stalled event loop
            assert await other.count("session", "k") == 0  # counted out meanwhile
            await stalled.beat()  # the loop runs again: its first beat sees the lapse
            assert await other.count("session", "k") == 1  # and its lease counts again
            assert await other.take("session", "k", 1) is None
        finally:
            await stalled.release_all()
            await s_state.close()
            await o_state.close()

    asyncio.run(scenario())


async def _zero(leases: RedisLeases, kind: str, tenant: str) -> bool:
    return await leases.count(kind, tenant) == 0


