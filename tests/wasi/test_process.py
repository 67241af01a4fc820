"""Host calls of the process (args, clocks, random, exit, poll) and the linker's guard, driven
directly (``tests/support/wasi_host.py``): bad input is an errno, never an exception into wasm."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.wasi_host import MEM_SIZE, Host

from wasm_runner.wasi.abi import EBADF, EFAULT, EINVAL, EIO, SUCCESS
from wasm_runner.wasi.linker import guarded


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    h = Host(tmp_path / "grants")
    yield h
    h.close()


def test_args_and_environment(host: Host) -> None:
    argc, size = host.alloc(4), host.alloc(4)
    assert host.call("args_sizes_get", argc, size) == SUCCESS
    assert host.u32(argc) == 3 and host.u32(size) == len(b"python\0-c\0pass\0")
    ptrs, buf = host.alloc(12), host.alloc(host.u32(size))
    assert host.call("args_get", ptrs, buf) == SUCCESS
    assert host.mem.read(buf, host.u32(size)) == b"python\0-c\0pass\0"
    assert host.call("args_get", MEM_SIZE - 4, buf) == EFAULT
    assert host.call("environ_sizes_get", argc, MEM_SIZE) == EFAULT
    assert host.call("environ_get", ptrs, MEM_SIZE - 1) == EFAULT


def test_clocks_and_randomness(host: Host) -> None:
    out = host.alloc(8)
    for clock in (0, 1, 2, 3):
        assert host.call("clock_time_get", clock, 1, out) == SUCCESS
    assert host.call("clock_time_get", 9, 1, out) == EINVAL
    assert host.call("clock_time_get", 0, 1, MEM_SIZE - 4) == EFAULT
    buf = host.alloc(64)
    assert host.call("random_get", buf, 64) == SUCCESS
    assert host.mem.read(buf, 64) != bytes(64)
    assert host.call("random_get", buf, (1 << 20) + 1) == EINVAL
    assert host.call("random_get", MEM_SIZE - 8, 64) == EFAULT


def test_exit_keeps_the_full_code(host: Host) -> None:
    assert host.call("proc_exit", 300) is None
    assert host.io.exit_code == 300 and host.io.stop_reason == "exit"


def _clock_sub(userdata: int, seconds: float) -> bytes:
    return struct.pack("<QB7xIxxxxQQH6x", userdata, 0, 1, int(seconds * 1e9), 0, 0)


def test_a_sleep_ends_at_the_deadline(host: Host) -> None:
    subs = host.alloc(48)
    host.mem.write(subs, _clock_sub(7, 30.0))
    events, nevents = host.alloc(32), host.alloc(4)
    host.io.deadline = time.monotonic() + 0.2
    t0 = time.monotonic()
    assert host.call("poll_oneoff", subs, events, 1, nevents) == SUCCESS
    assert time.monotonic() - t0 < 5.0  # not 30 s
    assert host.io.stop_reason == "timeout"
    assert host.u32(nevents) == 1
    assert struct.unpack_from("<Q", host.mem.read(events, 8))[0] == 7


def test_poll_refuses_bad_subscriptions(host: Host) -> None:
    subs, events, nevents = host.alloc(48), host.alloc(32), host.alloc(4)
    assert host.call("poll_oneoff", subs, events, 0, nevents) == EINVAL
    assert host.call("poll_oneoff", subs, events, 65, nevents) == EINVAL
    assert host.call("poll_oneoff", MEM_SIZE - 8, events, 1, nevents) == EFAULT
    host.mem.write(subs, struct.pack("<QB7xI", 1, 1, 99))  # fd_read on fd 99: not in the table
    assert host.call("poll_oneoff", subs, events, 1, nevents) == SUCCESS
    assert struct.unpack_from("<QH", host.mem.read(events, 10)) == (1, EBADF)


def test_a_bug_in_a_host_call_stops_the_run_not_the_host(host: Host) -> None:
    def broken(caller: object) -> int:
        raise KeyError("bug")

    assert guarded("broken", broken, True)(host.mem) == EIO
    assert host.io.stop_reason == "internal"
    assert "broken: KeyError" in (host.io.internal_error or "")
    assert guarded("broken", broken, False)(host.mem) is None
