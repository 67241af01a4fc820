"""Warm pools: budgets start at hand-over, slots are never reused, runs stay isolated."""

from __future__ import annotations

import pytest

from wasm_runner import Limits, Sandbox, Status

MARKER = "wr-isolation-marker-7f3a"


@pytest.fixture(scope="module")
def pooled() -> Sandbox:
    sb = Sandbox("default")
    sb.add_pool("ds", size=2, preload=("numpy", "pandas"))
    sb.add_pool("plain", size=2)
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
    fresh = pooled.run(code, limits=Limits(cpu_seconds=0.5))  # the same run, cold: over budget
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
