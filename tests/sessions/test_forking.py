"""A session's copies (``sessions.forking``) on a real sandbox: a fork is admitted as new sessions
of the same caller would be, all or none."""

from __future__ import annotations

import pytest
from tests.execution.gates import CountingGate
from tests.sessions.test_store import LIMITS, POLICY, Told, with_executor

from wasm_runner import Sandbox
from wasm_runner.admission import Ticket
from wasm_runner.execution import Caller, CallerLike, Executor, Job, Refused

ALICE4 = Caller("alice", max_concurrent=4)


class Places:
    """Claims of a count shared with other processes with ``left`` places (``execution.Claims``)."""

    def __init__(self, left: int) -> None:
        self.left = left

    async def claim(self, kind: str, tenant: CallerLike, limit: int) -> Ticket:
        if self.left <= 0:
            raise Refused(429, "too_many_sessions", f"{tenant.name} holds {limit} sessions elsewhere")
        self.left -= 1
        gate = CountingGate()
        return gate.reserve(tenant, 0)


def test_a_fork_is_admitted_as_new_sessions_all_or_nothing(default_sandbox: Sandbox) -> None:
    """Copies are sessions of the same caller, each holding its memory; a fork that does not fit
    (here: one place left elsewhere for two copies) makes nothing and holds nothing."""
    gate = CountingGate()
    told = Told()
    places = Places(3)

    async def scenario(executor: Executor) -> list[str]:
        store = executor.sessions
        live = await store.create(ALICE4, POLICY, LIMITS, "default")
        await store.run(live, Job("items = [1]", tenant=ALICE4, limits=LIMITS, session_id=live.id))
        (copy,) = await store.fork(live, ALICE4, 1)
        assert copy.tenant == "alice" and gate.memory_mb == 128 and len(store) == 2
        await store.run(copy, Job("items.append(2)", tenant=ALICE4, limits=LIMITS, session_id=copy.id))
        with pytest.raises(Refused) as refused:
            await store.fork(live, ALICE4, 2)  # one place left elsewhere
        assert refused.value.code == "too_many_sessions"
        assert len(store) == 2 and gate.memory_mb == 128  # nothing made, nothing held
        with pytest.raises(Refused) as too_many:
            await store.fork(live, ALICE4, store.max_fork_copies + 1)
        assert too_many.value.status == 422
        out = []
        for s in (live, copy):
            r = await store.run(s, Job("print(items)", tenant=ALICE4, limits=LIMITS, session_id=s.id))
            out.append(r.stdout)
        return out

    result = with_executor(default_sandbox, scenario, gate=gate, session_claims=places, session_listener=told)
    assert result == ["[1]\n", "[1, 2]\n"]
    assert [e for e, _ in told.events].count("opened") == 2
    assert gate.memory_mb == 0
