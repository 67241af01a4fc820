"""``Executor`` on a real sandbox: a job runs and is recorded once, a gate admits it and gets its
slot back, a refusal runs nothing, cancelling the awaiting task (or the whole executor) stops the
guest, and ``run_sync`` is refused where runs are admitted on an event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from tests.execution.gates import CountingGate

from wasm_runner import Limits, Result, Sandbox, Status
from wasm_runner.execution import Caller, Executor, Job, OneSandbox, Refused

LOOP_FOREVER = "while True:\n    pass\n"
LONG = Limits(cpu_seconds=60, wall_seconds=120)  # a limit never ends these runs: the cancel does


class Done:
    """A recorder keeping every finished run (``execution.Recorder``)."""

    def __init__(self, done: list[tuple[Job, Result, float]]) -> None:
        self.done = done

    def record(self, job: Job, result: Result, waited: float) -> None:
        self.done.append((job, result, waited))

    def session_event(self, event: str, live: Any, fields: dict[str, str]) -> None:
        pass


def executor_on(sandbox: Sandbox, **kwargs: Any) -> tuple[Executor, list[tuple[Job, Result, float]]]:
    done: list[tuple[Job, Result, float]] = []
    executor = Executor(OneSandbox(sandbox), recorder=Done(done), **kwargs)
    return executor, done


async def until(check: Callable[[], bool], seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "the executor never got there"
        await asyncio.sleep(0.02)


def test_a_job_runs_and_is_recorded_once(default_sandbox: Sandbox) -> None:
    executor, done = executor_on(default_sandbox)
    job = Job("print(6 * 7)", kind="cli")
    try:
        result = executor.run_sync(job)
    finally:
        executor.shutdown()
    assert result.status is Status.OK and result.stdout == "42\n"
    assert done == [(job, result, 0.0)]


def test_an_admitted_run_holds_its_slot_until_it_ends(default_sandbox: Sandbox) -> None:
    gate = CountingGate()
    executor, done = executor_on(default_sandbox, gate=gate)
    held_when_admitted: list[int] = []

    async def scenario() -> Result:
        result = await executor.run(Job("print('hi')", tenant=Caller("alice"), limits=Limits(memory_mb=64)),
                                    on_admitted=lambda: held_when_admitted.append(gate.memory_mb))
        await until(lambda: gate.running == 0)
        return result

    try:
        result = asyncio.run(scenario())
    finally:
        executor.shutdown()
    assert result.status is Status.OK and result.stdout == "hi\n"
    assert held_when_admitted == [64] and gate.admitted == 1
    assert gate.running == 0 and gate.memory_mb == 0 and len(gate.durations) == 1
    assert [r for _, r, _ in done] == [result]


def test_a_refused_job_runs_nothing(default_sandbox: Sandbox) -> None:
    executor, done = executor_on(default_sandbox, gate=CountingGate(refuse=True))
    try:
        with pytest.raises(Refused) as refused:
            asyncio.run(executor.run(Job("print('never')", tenant=Caller("alice"))))
    finally:
        executor.shutdown()
    assert refused.value.status == 429 and refused.value.code == "busy"
    assert refused.value.headers == {"Retry-After": "1"}
    assert done == [] and executor.guests_in_threads == 0


def test_cancelling_the_awaiting_task_stops_the_guest(default_sandbox: Sandbox) -> None:
    gate = CountingGate()
    executor, done = executor_on(default_sandbox, gate=gate)

    async def scenario() -> Result:
        task = asyncio.ensure_future(executor.run(Job(LOOP_FOREVER, limits=LONG)))
        await until(lambda: executor.guests_in_threads == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: executor.guests_in_threads == 0 and gate.running == 0 and len(done) == 1)
        return await executor.run(Job("print('still here')"))  # the executor goes on

    try:
        after = asyncio.run(scenario())
    finally:
        executor.shutdown()
    assert done[0][1].status is Status.CANCELLED
    assert after.status is Status.OK and after.stdout == "still here\n"
    assert gate.running == 0 and gate.memory_mb == 0 and gate.admitted == 2


def test_cancel_running_ends_every_guest_as_cancelled(default_sandbox: Sandbox) -> None:
    executor, done = executor_on(default_sandbox)

    async def scenario() -> list[Result]:
        runs = [asyncio.ensure_future(executor.run(Job(LOOP_FOREVER, limits=LONG))) for _ in range(2)]
        await until(lambda: executor.guests_in_threads == 2)
        executor.cancel_running()
        return list(await asyncio.gather(*runs))

    try:
        results = asyncio.run(scenario())
    finally:
        executor.shutdown()
    assert [r.status for r in results] == [Status.CANCELLED, Status.CANCELLED]
    assert sorted(r.status for _, r, _ in done) == [Status.CANCELLED, Status.CANCELLED]


def test_run_sync_is_refused_where_runs_are_admitted_on_a_loop(default_sandbox: Sandbox) -> None:
    executor, done = executor_on(default_sandbox, gate=CountingGate())
    try:
        with pytest.raises(RuntimeError, match="await run"):
            executor.run_sync(Job("print(1)"))
    finally:
        executor.shutdown()
    assert done == []
