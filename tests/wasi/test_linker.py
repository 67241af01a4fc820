"""The linker's raw host-call entry, through real instances: 64-bit arguments arrive whole, a bug in
a host call ends the run as ``internal_error`` (never the host), and so does an exception that is
not an ``Exception`` (it must not escape into wasmtime)."""

from __future__ import annotations

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
