"""``/readyz`` beside ``/healthz``: ready once warm, not ready while warming or draining; a
draining replica refuses new work with ``503 draining`` (the SIGTERM drain of real ``serve``
processes is in ``tests/cluster/test_shared_state.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from tests.support.live_server import LiveServer, make_config

from wasm_runner.execution import Caller, Refused
from wasm_runner.assembly import assemble


def test_readyz_is_ready_once_warm_and_answers_any_host(server: LiveServer) -> None:
    r = httpx.get(server.url + "/readyz", timeout=30)
    assert r.status_code == 200 and r.json() == {"status": "ready", "ready": True}
    assert r.headers["cache-control"] == "no-store"
    probe = httpx.get(server.url + "/readyz", headers={"Host": "10.0.0.7:8000"}, timeout=30)
    assert probe.status_code == 200  # probes by pod address are not refused by HostGuard
    api = httpx.get(server.url + "/api/profiles", headers={"Host": "10.0.0.7:8000"}, timeout=30)
    assert api.status_code == 400 and api.json()["error"]["code"] == "host_not_allowed"


def test_warming_then_draining_refuses_new_work(tmp_path: Path) -> None:
    async def scenario() -> None:
        service = assemble(make_config(tmp_path))  # no lifespan yet: nothing is warm
        try:
            assert await service.lifecycle.readiness() == (False, "warming")
            service.lifecycle.warm = True  # what the lifespan's warm-up sets when it is done
            assert await service.lifecycle.readiness() == (True, "ready")
            await service.drain.run(1.0)  # nothing in flight: returns at once
            assert await service.lifecycle.readiness() == (False, "draining")
            gate = service.executor.gate
            assert gate is not None
            with pytest.raises(Refused) as run:
                await gate.acquire(Caller("alice"), 32)
            assert run.value.status == 503 and run.value.code == "draining"
            assert int(run.value.headers["Retry-After"]) >= 1
            with pytest.raises(Refused) as session:
                await service.sessions.create(
                    Caller("alice"), service.config.profile(None),
                    service.config.profile(None).limits, "default",
                )  # fmt: skip
            assert session.value.code == "draining"
            assert len(service.sessions) == 0 and service.admission.memory_mb == 0
        finally:
            await service.shutdown()

    asyncio.run(scenario())
