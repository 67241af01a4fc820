"""Admission: global cap, memory budget, bounded FIFO queue, per-tenant cap, reservations."""

from __future__ import annotations

import asyncio

import pytest

from wasm_runner.admission import Admission, Busy


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_queue_is_bounded_and_fifo() -> None:
    async def scenario() -> None:
        adm = Admission(max_running=1, max_queue=2, memory_budget_mb=1000, queue_timeout=5)
        first = await adm.acquire("a", 10, 10)
        order: list[str] = []

        async def waiter(name: str) -> None:
            t = await adm.acquire(name, 10, 10)
            order.append(name)
            t.release()

        w1 = asyncio.ensure_future(waiter("b"))
        await asyncio.sleep(0)
        w2 = asyncio.ensure_future(waiter("c"))
        await asyncio.sleep(0)
        assert adm.waiting == 2
        with pytest.raises(Busy) as info:
            await adm.acquire("d", 10, 10)
        assert info.value.code == "queue_full" and info.value.retry_after >= 1
        first.release()
        await asyncio.gather(w1, w2)
        assert order == ["b", "c"]
        assert adm.running == 0 and adm.memory_mb == 0 and adm.waiting == 0

    run(scenario())


def test_memory_budget_holds_runs_back() -> None:
    async def scenario() -> None:
        adm = Admission(max_running=4, max_queue=4, memory_budget_mb=100, queue_timeout=5)
        big = await adm.acquire("a", 80, 10)
        pending = asyncio.ensure_future(adm.acquire("b", 40, 10))
        await asyncio.sleep(0.01)
        assert not pending.done() and adm.waiting == 1
        big.release()
        ticket = await pending
        assert adm.memory_mb == 40
        ticket.release()
        ticket.release()  # idempotent
        assert adm.memory_mb == 0 and adm.running == 0
        with pytest.raises(Busy, match="memory budget"):
            await adm.acquire("c", 101, 10)

    run(scenario())


def test_per_tenant_cap_and_queue_timeout() -> None:
    async def scenario() -> None:
        adm = Admission(max_running=1, max_queue=4, memory_budget_mb=100, queue_timeout=0.05)
        held = await adm.acquire("a", 10, max_concurrent=1)
        with pytest.raises(Busy) as info:
            await adm.acquire("a", 10, max_concurrent=1)
        assert info.value.code == "tenant_concurrency"
        with pytest.raises(Busy) as info:
            await adm.acquire("b", 10, max_concurrent=1)
        assert info.value.code == "queue_timeout"
        assert adm.waiting == 0 and adm.in_flight("b") == 0
        held.release()
        assert adm.in_flight("a") == 0

    run(scenario())


def test_cancelled_waiter_leaves_no_trace() -> None:
    async def scenario() -> None:
        adm = Admission(max_running=1, max_queue=4, memory_budget_mb=100, queue_timeout=5)
        held = await adm.acquire("a", 10, 5)
        pending = asyncio.ensure_future(adm.acquire("b", 10, 5))
        await asyncio.sleep(0)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        assert adm.waiting == 0 and adm.in_flight("b") == 0
        held.release()
        assert adm.running == 0

    run(scenario())


def test_session_reservations_count_against_the_budget() -> None:
    async def scenario() -> None:
        adm = Admission(max_running=2, max_queue=0, memory_budget_mb=100, queue_timeout=5)
        reservation = adm.reserve("s", 70)
        with pytest.raises(Busy):
            adm.reserve("s", 40)
        with pytest.raises(Busy):  # no queue: a run that does not fit is refused at once
            await adm.acquire("a", 40, 5)
        reservation.release()
        (await adm.acquire("a", 40, 5)).release()
        assert adm.memory_mb == 0

    run(scenario())


def test_a_parked_run_frees_its_slot_and_place_and_resumes_ahead_of_the_queue() -> None:
    async def scenario() -> None:
        adm = Admission(max_running=1, max_queue=4, memory_budget_mb=100, queue_timeout=5,
                        max_waiting=2, tenant_waiting=1)  # fmt: skip
        thinker = await adm.acquire("a", 30, max_concurrent=1)
        assert adm.park(thinker) and adm.parked == 1 and adm.running == 0
        assert adm.memory_mb == 30  # the memory stays held
        runner = await adm.acquire("a", 30, max_concurrent=1)  # its place and slot were free
        queued = asyncio.ensure_future(adm.acquire("b", 30, max_concurrent=1))
        await asyncio.sleep(0)
        resumed = asyncio.ensure_future(adm.resume(thinker))
        await asyncio.sleep(0)
        assert adm.resuming == 1 and not resumed.done()
        runner.release()  # the slot goes to the resumed run, not to the queued one
        await resumed
        assert not thinker.parked and adm.running == 1 and adm.waiting == 1
        assert adm.in_flight("a") == 1
        thinker.release()
        (await queued).release()
        # the bounds of waiting runs: the tenant's one place is taken, so the next keeps its slot
        one, two = await adm.acquire("c", 10, 5), None
        assert adm.park(one)
        two = await adm.acquire("c", 10, 5)
        assert not adm.park(two) and not two.parked and adm.running == 1
        one.release()  # ended while parked (abandoned input): its waiting place comes back
        assert adm.parked == 0 and adm.park(two)
        two.release()
        assert adm.running == 0 and adm.memory_mb == 0 and adm.parked == 0
        assert adm.in_flight("a") == adm.in_flight("c") == 0

    run(scenario())


def test_a_user_over_its_cap_is_refused_without_touching_the_tenant() -> None:
    async def scenario() -> None:
        adm = Admission(max_running=4, max_queue=4, memory_budget_mb=1000)
        ada = await adm.acquire("class", 10, 3, user="class/user/ada", user_max=1)
        with pytest.raises(Busy) as info:
            await adm.acquire("class", 10, 3, user="class/user/ada", user_max=1, who="this client")
        assert info.value.code == "user_concurrency" and "this client" in info.value.message
        assert adm.in_flight("class") == 1  # the refusal counted nothing for the tenant
        bea = await adm.acquire("class", 10, 3, user="class/user/bea", user_max=1)
        assert adm.park(ada) and adm.user_in_flight("class/user/ada") == 0
        again = await adm.acquire("class", 10, 3, user="class/user/ada", user_max=1)
        for t in (ada, bea, again):
            t.release()
        assert adm.in_flight("class") == 0 and adm.user_in_flight("class/user/ada") == 0

    run(scenario())
