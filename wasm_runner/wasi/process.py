"""WASI host calls of the process: arguments, environment, clocks, randomness, ``proc_exit`` and
``poll_oneoff`` (sleeps and waits end at the run's deadline, or when it is stopped).
"""

from __future__ import annotations

import os
import struct
import time

import wasmtime as wt

from .abi import EBADF, EINVAL, SUCCESS, Mem
from .guestio import current_io, memory

__all__ = [
    "args_get", "args_sizes_get", "clock_res_get", "clock_time_get", "environ_get",
    "environ_sizes_get", "poll_oneoff", "proc_exit", "random_get", "sched_yield",
]

MAX_RANDOM_BYTES = 1 << 20
MAX_POLL_SUBSCRIPTIONS = 64


def args_sizes_get(caller: wt.Caller, argc: int, size: int) -> int:
    io, m = current_io(), memory(caller)
    m.u32(argc, len(io.argv))
    m.u32(size, sum(len(a) + 1 for a in io.argv))
    return SUCCESS


def _put_list(m: Mem, items: list[bytes], ptrs: int, buf: int) -> int:
    for i, item in enumerate(items):
        m.u32(ptrs + 4 * i, buf)
        m.write(buf, item + b"\0")
        buf += len(item) + 1
    return SUCCESS


def args_get(caller: wt.Caller, ptrs: int, buf: int) -> int:
    return _put_list(memory(caller), current_io().argv, ptrs, buf)


def environ_sizes_get(caller: wt.Caller, count: int, size: int) -> int:
    io, m = current_io(), memory(caller)
    m.u32(count, len(io.env))
    m.u32(size, sum(len(e) + 1 for e in io.env))
    return SUCCESS


def environ_get(caller: wt.Caller, ptrs: int, buf: int) -> int:
    return _put_list(memory(caller), current_io().env, ptrs, buf)


def clock_res_get(caller: wt.Caller, clock_id: int, out: int) -> int:
    memory(caller).u64(out, 1000)
    return SUCCESS


def clock_time_get(caller: wt.Caller, clock_id: int, precision: int, out: int) -> int:
    if clock_id == 0:
        now = time.time_ns()
    elif clock_id == 1:
        now = time.monotonic_ns()
    elif clock_id in (2, 3):
        now = time.thread_time_ns()
    else:
        return EINVAL
    memory(caller).u64(out, now)
    return SUCCESS


def random_get(caller: wt.Caller, buf: int, n: int) -> int:
    if n > 1 << 20:
        return EINVAL
    memory(caller).write(buf, os.urandom(n))
    return SUCCESS


def sched_yield(caller: wt.Caller) -> int:
    return SUCCESS


def proc_exit(caller: wt.Caller, code: int) -> None:
    io = current_io()
    io.exit_code = code
    io.stop("exit")


# ---- poll_oneoff: sleeps and waits end at the deadline -----------------------------------------
def poll_oneoff(caller: wt.Caller, subs: int, events: int, nsubs: int, nevents: int) -> int:
    io, m = current_io(), memory(caller)
    if nsubs == 0 or nsubs > 64:
        return EINVAL
    raw = m.read(subs, 48 * nsubs)
    ready: list[bytes] = []
    timeout: float | None = None
    clock_user: list[tuple[int, float]] = []
    now_mono, now_real = time.monotonic(), time.time()
    for i in range(nsubs):
        userdata, tag = struct.unpack_from("<QB", raw, 48 * i)
        if tag == 0:  # clock
            clock_id, t, _prec, flags = struct.unpack_from("<IxxxxQQH", raw, 48 * i + 16)
            secs = t / 1e9
            if flags & 1:  # absolute
                secs -= now_real if clock_id == 0 else (now_mono if clock_id == 1 else 0)
            secs = max(0.0, secs)
            clock_user.append((userdata, secs))
            timeout = secs if timeout is None else min(timeout, secs)
        else:  # fd_read / fd_write: files and stdio are always ready
            (fd,) = struct.unpack_from("<I", raw, 48 * i + 16)
            err = SUCCESS if fd in io.fds else EBADF
            ready.append(struct.pack("<QHBxxxxxQHxxxxxx", userdata, err, tag, 0, 0))
    if not ready and timeout is not None:
        end = time.monotonic() + timeout
        while True:
            if io.should_stop():
                break
            left = min(end, io.deadline) - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, 0.02))
        io.should_stop()
        done = time.monotonic()
        for userdata, secs in clock_user:
            if now_mono + secs <= done + 1e-4:
                ready.append(struct.pack("<QHBxxxxxQHxxxxxx", userdata, 0, 0, 0, 0))
        if not ready:  # stopped early: report the first clock anyway; the run is ending
            ready.append(struct.pack("<QHBxxxxxQHxxxxxx", clock_user[0][0], 0, 0, 0, 0))
    m.write(events, b"".join(ready))
    m.u32(nevents, len(ready))
    return SUCCESS
