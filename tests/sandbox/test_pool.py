"""Warm pools: budgets start at hand-over, slots are never reused, runs stay isolated."""

from __future__ import annotations

import threading
import time

import pytest

from wasm_runner import Limits, Sandbox, Status
from wasm_runner.sandbox import default_prestart
from wasm_runner.sandbox import pool as pool_module

MARKER = "wr-isolation-marker-7f3a"


@pytest.fixture(scope="module")
def pooled() -> Sandbox:
    sb = Sandbox("default", prestart=2)  # the "plain" pool every run without a pool takes from
    sb.add_pool("ds", size=2, preload=("numpy", "pandas"))
    assert sb.pools["ds"].wait_ready() and sb.pools["plain"].wait_ready()
    yield sb
    sb.close()


def test_budget_starts_at_handover(pooled: Sandbox) -> None:
    pool = pooled.pools["ds"]
    assert pool.wait_ready(1)
    taken = pool.taken
    # importing numpy and pandas costs several CPU-seconds of fuel; in a warm slot it is done
    code = "import numpy as np, pandas as pd\nprint(pd.DataFrame({'a': np.arange(4)})['a'].sum())"
    r = pooled.run(code, pool="ds", limits=Limits(cpu_seconds=0.5))
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "6\n"
    assert pool.taken == taken + 1
    assert r.fuel_used < pooled.fuel_for(0.5)
    # the same run, cold (a plain instance): over budget (a generous wall: a busy host is slow)
    fresh = pooled.run(code, limits=Limits(cpu_seconds=0.5, wall_seconds=120))
    assert fresh.status is Status.CPU_LIMIT


def test_pooled_runs_are_isolated(pooled: Sandbox) -> None:
    pool = pooled.pools["plain"]
    assert pool.wait_ready(2)
    writer = (
        "import sys, types\n"
        f"secret = {MARKER!r}\n"
        "sys.modules['planted'] = types.ModuleType('planted')\n"
        "import builtins; builtins.planted = secret\n"
        "open('/scratch/left-behind.txt', 'w').write(secret)\n"
        "keep = [secret * 1000 for _ in range(100)]\n"
    )
    assert pooled.run(writer).ok
    reader = (
        "import sys, os, gc, builtins\n"
        "found = []\n"
        "found += ['global'] if 'secret' in globals() else []\n"
        "found += ['module'] if 'planted' in sys.modules else []\n"
        "found += ['builtin'] if hasattr(builtins, 'planted') else []\n"
        "found += ['file'] if os.listdir('/scratch') else []\n"
        f"m = {MARKER[:8]!r} + {MARKER[8:]!r}\n"
        "g = globals()\n"
        "found += ['heap'] if any(m in repr(o)[:100000] for o in gc.get_objects() if isinstance(o, (list, dict)) and o is not g) else []\n"
        "print(found)\n"
    )
    # the detector works: in the same instance it finds every plant
    same = pooled.run(writer + "del secret\n" + reader.replace("found = []", "found = []", 1))
    assert same.ok, same.stderr
    assert same.stdout == "['module', 'builtin', 'file', 'heap']\n"
    for _ in range(2):
        r = pooled.run(reader)
        assert r.ok, r.stderr
        assert r.stdout == "[]\n"


def test_a_slot_is_used_once(pooled: Sandbox) -> None:
    pool = pooled.pools["plain"]
    assert pool.wait_ready(2)
    seen = set()
    for _ in range(2):
        g = pool.take()
        assert g is not None and id(g) not in seen
        seen.add(id(g))
        g.cancel()
        g.done.wait(5)
        g.ws.close()
    assert pool.wait_ready(2)
    r = pooled.run("print('after')")
    assert r.ok and r.stdout == "after\n"


def test_empty_pool_falls_back_to_a_fresh_instance() -> None:
    sb = Sandbox("default")
    try:
        pool = sb.add_pool("empty", size=0)
        r = sb.run("print('fresh')", pool="empty")
        assert r.ok and r.stdout == "fresh\n"
        assert pool.misses == 1 and pool.taken == 0
        assert sb.run("print(1)", pool="nope").status is Status.INVALID_INPUT
    finally:
        sb.close()


def test_pooled_grants_are_bound_per_run(pooled: Sandbox, tmp_path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("from data")
    out = tmp_path / "out"
    out.mkdir()
    pool = pooled.pools["plain"]
    assert pool.wait_ready(2)
    r = pooled.run("print(open('/data/in.txt').read())\nopen('/out/o.txt', 'w').write('x')", data_dir=data, out_dir=out)
    assert r.ok, r.stderr
    assert r.stdout == "from data\n" and (out / "o.txt").read_text() == "x"
    r = pooled.run("import os\nfor p in ('/data', '/out'):\n    try:\n        os.listdir(p); print('SEEN', p)\n    except OSError as e:\n        print('absent', e.errno)")
    assert "SEEN" not in r.stdout, r.stdout


def test_runs_take_a_prestarted_instance_by_default() -> None:
    """The fast path is the default: ``Sandbox()`` keeps ``default_prestart()`` instances started,
    a run takes one (never a used one) and the pool refills behind it."""
    sb = Sandbox("default")
    try:
        pool = sb.pools["plain"]
        assert pool.size == default_prestart() >= 1
        assert pool.wait_ready()
        seen: set[int] = set()
        for i in range(4):
            assert pool.wait_ready(1)
            slot = pool._ready[0]
            assert id(slot) not in seen
            seen.add(id(slot))
            taken = pool.taken
            r = sb.run(f"print({i})")
            assert r.ok and r.stdout == f"{i}\n", r.stderr
            assert pool.taken == taken + 1 and slot.done.is_set()  # it ran, and is gone
        assert pool.wait_ready()  # refilled in the background
    finally:
        sb.close()


def test_a_run_takes_the_instance_being_started_rather_than_a_second_one() -> None:
    """With nothing ready, a run claims the slot the refill is warming and waits for it (it
    started earlier than a fresh one could): one instance started, not two."""
    sb = Sandbox("default", prestart=0)
    try:
        # numpy and pandas take a while to import: the run comes while the slot is warming
        pool = sb.add_pool("slow", size=1, preload=("numpy", "pandas"), refill=False)
        end = time.monotonic() + 60
        while not pool.warming and time.monotonic() < end:
            time.sleep(0.005)
        assert pool.warming and pool.ready == 0
        r = sb.run("import sys\nprint('pandas' in sys.modules)", pool="slow")
        assert r.ok and r.stdout == "True\n", r.stderr  # the warmed slot ran it
        assert pool.taken == 1 and pool.misses == 0 and pool.warmed == 1
        # refill=False (a process that runs once, like `wasm-runner run`): none started after
        time.sleep(1.0)
        assert pool.warmed == 1 and pool.ready == 0 and not pool.warming
        r = sb.run("print('fresh')", pool="slow")  # empty: a fresh instance, as before
        assert r.ok and r.stdout == "fresh\n" and pool.misses == 1
    finally:
        sb.close()


def test_prestart_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WASM_RUNNER_PRESTART", "0")
    assert default_prestart() == 0
    sb = Sandbox("default")
    try:
        assert "plain" not in sb.pools and sb.run("print(1)").ok  # fresh instances, as before
    finally:
        sb.close()
    monkeypatch.setenv("WASM_RUNNER_PRESTART", "3")
    assert default_prestart() == 3
    for bad in ("-1", "99", "many"):
        monkeypatch.setenv("WASM_RUNNER_PRESTART", bad)
        with pytest.raises(ValueError, match="WASM_RUNNER_PRESTART"):
            default_prestart()


def test_the_pool_refills_between_runs_not_during_them() -> None:
    """Starting an instance is mostly host Python: a refill during a run would make the run's own
    host calls wait for the interpreter lock. It waits for the gap after the run instead."""
    sb = Sandbox("default", prestart=1)
    try:
        pool = sb.pools["plain"]
        assert pool.wait_ready()
        done: list[str] = []
        worker = threading.Thread(target=lambda: done.append(sb.run("import time\ntime.sleep(5)\nprint('slept')").stdout))
        worker.start()
        assert wait_for(lambda: pool.taken == 1, 60)
        for _ in range(10):  # the run is sleeping: nothing is being started meanwhile
            assert sb.runs_in_flight == 1 and pool.ready == 0 and not pool.warming
            time.sleep(0.1)
        worker.join(60)
        assert done == ["slept\n"] and sb.runs_in_flight == 0
        assert pool.wait_ready()  # and refilled once it ended
    finally:
        sb.close()


def wait_for(check, timeout: float) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.01)
    return bool(check())


def test_a_refill_lets_the_callers_work_go_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a run ends its caller still has work (the result's JSON, an HTTP response): the
    refill waits ``SETTLE_S`` after the last run before it starts an instance."""
    monkeypatch.setattr(pool_module, "SETTLE_S", 3.0)
    sb = Sandbox("default", prestart=1)
    try:
        pool = sb.pools["plain"]
        assert pool.wait_ready()
        assert sb.run("print('one')").stdout == "one\n"
        assert pool.taken == 1
        for _ in range(5):  # the run ended a moment ago: nothing is being started yet
            assert pool.ready == 0 and not pool.warming
            time.sleep(0.05)
        assert pool.wait_ready()  # and it refills once the sandbox was quiet that long
        assert sb.run("print('two')").stdout == "two\n" and pool.taken == 2
    finally:
        sb.close()
