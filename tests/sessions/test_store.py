"""``SessionStore`` on a real sandbox: a session keeps its variables between calls, belongs to the
caller that opened it, is capped (in all, per caller, its memory held for its whole life), runs one
call at a time, ends when idle too long or when a call leaves its instance unusable, and tells its
listener; a refused claim opens nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from tests.execution.gates import CountingGate

from wasm_runner import Limits, Sandbox, Status
from wasm_runner.admission import Ticket
from wasm_runner.execution import Caller, CallerLike, Executor, Job, OneSandbox, Policy, Refused
from wasm_runner.sessions import LiveSession

T = TypeVar("T")
ALICE = Caller("alice", max_concurrent=2)
BOB = Caller("bob", max_concurrent=2)
POLICY = Policy("test")
LIMITS = Limits(memory_mb=64)


class Told:
    """A session listener that writes down what it is told (``sessions.SessionListener``)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def opened(self, live: LiveSession) -> None:
        self.events.append(("opened", live.id))

    async def used(self, live: LiveSession) -> None:
        self.events.append(("used", live.id))

    async def closed(self, live: LiveSession) -> None:
        self.events.append(("closed", live.id))


class NoRoomElsewhere:
    """Claims of a count shared with other processes that is always full (``execution.Claims``)."""

    async def claim(self, kind: str, tenant: CallerLike, limit: int) -> Ticket:
        raise Refused(429, "too_many_sessions", f"{tenant.name} holds {limit} sessions elsewhere")


def with_executor(sandbox: Sandbox, scenario: Callable[[Executor], Awaitable[T]], **kwargs: Any) -> T:
    executor = Executor(OneSandbox(sandbox), **kwargs)

    async def run() -> T:
        try:
            return await scenario(executor)
        finally:
            await executor.sessions.close_all()

    try:
        return asyncio.run(run())
    finally:
        executor.shutdown()


def test_a_session_keeps_its_variables_and_tells_its_listener(default_sandbox: Sandbox) -> None:
    told = Told()
    gate = CountingGate()

    async def scenario(executor: Executor) -> tuple[str, list[str]]:
        store = executor.sessions
        live = await store.create(ALICE, POLICY, LIMITS, "default")
        assert store.holds(live.id) and len(store) == 1 and gate.memory_mb == 64
        first = await store.run(live, Job("x = 41", tenant=ALICE, limits=LIMITS, session_id=live.id))
        second = await store.run(live, Job("print(x + 1)", tenant=ALICE, limits=LIMITS, session_id=live.id))
        assert first.status is Status.OK and live.calls == 2
        assert await store.close(live.id)
        assert not store.holds(live.id) and store.ended(live.id, ALICE) and gate.memory_mb == 0
        return live.id, [second.stdout]

    session_id, outputs = with_executor(default_sandbox, scenario, gate=gate, session_listener=told)
    assert outputs == ["42\n"]
    assert told.events == [("opened", session_id), ("used", session_id), ("used", session_id),
                           ("closed", session_id)]
    assert gate.admitted == 2 and gate.running == 0  # each call took a run slot, and gave it back


def test_a_session_is_its_callers_alone(default_sandbox: Sandbox) -> None:
    async def scenario(executor: Executor) -> list[tuple[int, str]]:
        store = executor.sessions
        live = await store.create(ALICE, POLICY, LIMITS, "default")
        refusals = []
        for asker, session_id in ((BOB, live.id), (ALICE, "no-such-session")):
            with pytest.raises(Refused) as refused:
                store.get(session_id, asker)
            refusals.append((refused.value.status, refused.value.code))
        assert store.get(live.id, ALICE) is live
        await store.close(live.id)
        with pytest.raises(Refused) as gone:
            store.get(live.id, ALICE)
        refusals.append((gone.value.status, gone.value.code))
        return refusals

    assert with_executor(default_sandbox, scenario) == [(404, "unknown_session")] * 3


def test_sessions_are_capped_in_all_and_per_caller(default_sandbox: Sandbox) -> None:
    async def scenario(executor: Executor) -> list[str]:
        store = executor.sessions
        lonely = Caller("carol", max_concurrent=1)
        first = await store.create(lonely, POLICY, LIMITS, "default")
        messages = []
        with pytest.raises(Refused) as per_caller:
            await store.create(lonely, POLICY, LIMITS, "default")
        messages.append(per_caller.value.message)
        await store.create(ALICE, POLICY, LIMITS, "default")
        with pytest.raises(Refused) as in_all:
            await store.create(BOB, POLICY, LIMITS, "default")
        messages.append(in_all.value.message)
        assert {per_caller.value.code, in_all.value.code} == {"too_many_sessions"}
        await store.close(first.id)
        await store.create(BOB, POLICY, LIMITS, "default")  # a place is free again
        assert len(store) == 2
        return messages

    messages = with_executor(default_sandbox, scenario, max_sessions=2)
    assert messages == [
        "this caller already has 1 open sessions; close one first",
        "the server has its maximum of 2 open sessions",
    ]


def test_one_call_at_a_time(default_sandbox: Sandbox) -> None:
    async def scenario(executor: Executor) -> tuple[int, str, str]:
        store = executor.sessions
        live = await store.create(ALICE, POLICY, LIMITS, "default")
        slow_job = Job("import time\ntime.sleep(1)\nprint('slow')", tenant=ALICE, limits=LIMITS)
        slow = asyncio.ensure_future(store.run(live, slow_job))
        deadline = time.monotonic() + 120
        while not live.lock.locked():
            assert not slow.done(), slow.result()
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        with pytest.raises(Refused) as busy:
            await store.run(live, Job("print('second')", tenant=ALICE, limits=LIMITS))
        return busy.value.status, busy.value.code, (await slow).stdout

    assert with_executor(default_sandbox, scenario) == (409, "session_busy", "slow\n")


def test_a_call_that_leaves_the_instance_unusable_ends_the_session(default_sandbox: Sandbox) -> None:
    told = Told()

    async def scenario(executor: Executor) -> tuple[Status, bool, bool]:
        store = executor.sessions
        live = await store.create(ALICE, POLICY, Limits(memory_mb=64, wall_seconds=60), "default")
        # a generous wall: the CPU limit (fuel) must be what stops it, however busy the host
        spin = Job("while True:\n    pass\n", tenant=ALICE, limits=Limits(cpu_seconds=0.5, wall_seconds=60, memory_mb=64))
        result = await store.run(live, spin)
        return result.status, store.holds(live.id), store.ended(live.id, ALICE)

    status, held, ended = with_executor(default_sandbox, scenario, session_listener=told)
    assert status is Status.CPU_LIMIT and not held and ended
    assert [event for event, _ in told.events] == ["opened", "closed"]


def test_an_idle_session_is_swept(default_sandbox: Sandbox) -> None:
    gate = CountingGate()

    async def scenario(executor: Executor) -> tuple[int, int, int]:
        store = executor.sessions
        await store.create(ALICE, POLICY, LIMITS, "default")
        fresh = await store.sweep()  # not idle yet
        await asyncio.sleep(1.0)  # past its idle time of 0.3 s
        return fresh, await store.sweep(), len(store)

    assert with_executor(default_sandbox, scenario, gate=gate, session_idle_seconds=0.3) == (0, 1, 0)
    assert gate.memory_mb == 0


def test_a_refused_claim_opens_nothing_and_holds_nothing(default_sandbox: Sandbox) -> None:
    gate = CountingGate()
    told = Told()

    async def scenario(executor: Executor) -> tuple[str, int]:
        with pytest.raises(Refused) as refused:
            await executor.sessions.create(ALICE, POLICY, LIMITS, "default")
        return refused.value.code, len(executor.sessions)

    result = with_executor(default_sandbox, scenario, gate=gate, session_claims=NoRoomElsewhere(),
                           session_listener=told)
    assert result == ("too_many_sessions", 0)
    assert gate.memory_mb == 0 and told.events == []
