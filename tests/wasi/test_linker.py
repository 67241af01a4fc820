"""The linker's raw host-call entry, through real instances: 64-bit arguments arrive whole, a bug in
a host call ends the run as ``internal_error`` (never the host), and so does an exception that is
not an ``Exception`` (it must not escape into wasmtime)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from wasm_runner import Sandbox
from wasm_runner.result import Status
from wasm_runner.wasi import linker

URANDOM = "import os\nprint(len(os.urandom(8)))"


def test_64_bit_arguments_arrive_whole(default_sandbox: Sandbox) -> None:
    code = ("f = open('/scratch/big', 'wb')\n"
            "print(f.seek(5_000_000_123), f.tell(), f.seek(-3, 1))\n"
            "import time\nprint(time.time_ns() > 1_600_000_000 * 10**9)")
    r = default_sandbox.run(code)
    assert r.ok, r.stderr
    assert r.stdout == "5000000123 5000000123 5000000120\nTrue\n"


@pytest.mark.parametrize("error", [RuntimeError("a bug"), KeyboardInterrupt()], ids=["Exception", "BaseException"])
def test_a_failing_host_call_ends_the_run_not_the_host(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    def broken(caller: Any, buf: int, n: int) -> int:
        raise error

    monkeypatch.setitem(linker.HOST_CALLS, "random_get", (broken, "ii", "i"))
    sb = Sandbox("default", prestart=0)
    try:
        r = sb.run(URANDOM)
        assert r.status is Status.INTERNAL_ERROR, (r.status, r.stdout, r.stderr)
        assert "random_get" in r.message
        assert sb.run("print('still here')").stdout == "still here\n"  # the sandbox goes on
    finally:
        sb.close()
    monkeypatch.undo()
    fresh = Sandbox("default", prestart=0)
    try:
        r = fresh.run(URANDOM)
        assert r.ok and r.stdout == "8\n", r.stderr
    finally:
        fresh.close()


RACE = '''
import gc, threading, time
import wasmtime as wt
from wasm_runner.wasi import linker

WAT = """(module (import "wasi_snapshot_preview1" "sched_yield" (func $y (result i32)))
 (func (export "go") (result i32) call $y))"""
engine = wt.Engine()
module = wt.Module(engine, WAT)
make_callback = linker._raw_callback

def slow(*args):  # widens the window between looking a callback up and keeping it
    cb = make_callback(*args)
    time.sleep(0.05)
    return cb

linker._raw_callback = slow
barrier = threading.Barrier(2)
pres = []

def load():
    lk = wt.Linker(engine)
    barrier.wait()
    linker.define_imports(lk, module)
    pres.append(lk.instantiate_pre(module))

threads = [threading.Thread(target=load) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
junk = [bytearray(64) for _ in range(100_000)]  # reuse what a dropped callback would have freed
gc.collect()
for pre in pres:
    store = wt.Store(engine)
    go = pre.instantiate(store).exports(store)["go"]
    print(*(go(store) for _ in range(3)))
'''


def test_two_sandboxes_loading_at_once_share_live_host_calls() -> None:
    """The start's warm-up threads load sandboxes at once: each linker's host calls stay alive (a
    callback made twice and kept once crashed a whole replica with SIGSEGV)."""
    proc = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout == "0 0 0\n0 0 0\n"
