"""The security boundary, fd side: the fd table's bounds, the disk quota, the output caps and
bad guest pointers, with host calls driven directly (``tests/support/wasi_host.py``)."""

from __future__ import annotations

import struct
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.support.wasi_host import DATA_FD, MEM_SIZE, SCRATCH_FD, Host

from wasm_runner.grants import Grant
from wasm_runner.wasi.abi import (
    CALL_MAGIC, EBADF, EFAULT, EINVAL, EISDIR, EMFILE, ENOENT, ENOSPC, ESPIPE, FDFLAG_APPEND, O_CREAT, O_TRUNC,
    SUCCESS,
)
from wasm_runner.wasi.control import MAX_CALL_BYTES, MAX_REPORT_BYTES
from wasm_runner.wasi.fdtable import MAX_FDS


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    h = Host(tmp_path / "grants")
    yield h
    h.close()


def _small(tmp_path: Path, **quota: int) -> Host:
    return Host(tmp_path / "small", **quota)


# ---- the fd table -----------------------------------------------------------------------------
@pytest.mark.parametrize("fd", [-1, 5, 99, 2**31 - 1])
def test_unknown_fds_are_ebadf(host: Host, fd: int) -> None:
    assert host.write(fd, b"x")[0] == EBADF
    assert host.read(fd, 4)[0] == EBADF
    assert host.call("fd_close", fd) == EBADF
    assert host.call("fd_seek", fd, 0, 0, host.alloc(8)) == EBADF
    assert host.call("fd_fdstat_get", fd, host.alloc(24)) == EBADF
    assert host.call("fd_prestat_get", fd, host.alloc(8)) == EBADF
    assert host.call("fd_readdir", fd, host.alloc(64), 64, 0, host.alloc(4)) == EBADF
    assert host.open("x", dirfd=fd)[0] == EBADF
    assert host.write(1, b"ok")[0] == SUCCESS  # stdout still answers


def test_the_table_only_holds_stdio_and_the_grants(host: Host) -> None:
    out = host.alloc(8)
    assert host.call("fd_prestat_get", SCRATCH_FD, out) == SUCCESS
    assert host.u32(out + 4) == len("/scratch")
    buf = host.alloc(16)
    assert host.call("fd_prestat_dir_name", SCRATCH_FD, buf, 16) == SUCCESS
    assert host.mem.read(buf, 8) == b"/scratch"
    assert host.call("fd_prestat_dir_name", SCRATCH_FD, buf, 3) == EINVAL  # buffer too short
    assert host.call("fd_prestat_get", DATA_FD + 1, out) == EBADF  # no third grant
    assert host.call("fd_prestat_get", 1, out) == EBADF  # stdio is no preopen


def test_a_closed_fd_is_gone(host: Host) -> None:
    err, fd = host.open("f", oflags=O_CREAT, write=True)
    assert err == SUCCESS
    assert host.call("fd_close", fd) == SUCCESS
    assert host.call("fd_close", fd) == EBADF
    assert host.write(fd, b"x")[0] == EBADF


def test_a_file_is_no_directory_and_a_directory_no_file(host: Host) -> None:
    err, fd = host.open("f", oflags=O_CREAT, write=True)
    assert host.open("x", dirfd=fd)[0] == EBADF
    assert host.read(SCRATCH_FD, 4)[0] == EISDIR
    assert host.write(SCRATCH_FD, b"x")[0] == EBADF
    assert host.call("fd_seek", 1, 0, 0, host.alloc(8)) == ESPIPE


def test_the_table_is_bounded(host: Host) -> None:
    (host.scratch / "f").write_text("x")
    opened = []
    while True:
        err, fd = host.open("f")
        if err != SUCCESS:
            break
        opened.append(fd)
        assert len(opened) <= MAX_FDS
    assert err == EMFILE
    assert len(host.io.fds) == MAX_FDS
    assert host.call("fd_close", opened[0]) == SUCCESS
    assert host.open("f")[0] == SUCCESS  # room again after a close


def test_a_hidden_preopen_is_not_reachable(host: Host) -> None:
    (host.data / "in.csv").write_text("x")
    host.io.rebind("/data", None)
    assert host.open("in.csv", dirfd=DATA_FD)[0] == ENOENT
    assert host.call("fd_fdstat_get", DATA_FD, host.alloc(24)) == ENOENT
    other = host.scratch.parent / "other"
    other.mkdir()
    (other / "b.csv").write_text("b")
    g = Grant("/data", str(other), writable=False)
    g.open()
    try:
        host.io.rebind("/data", g)
        assert host.open("in.csv", dirfd=DATA_FD)[0] == ENOENT  # the old folder is gone
        err, fd = host.open("b.csv", dirfd=DATA_FD)
        assert err == SUCCESS and host.read(fd, 10) == (SUCCESS, b"b")
    finally:
        host.io.close()
        g.close()


# ---- the disk quota ---------------------------------------------------------------------------
def test_writes_past_the_quota_are_short_then_enospc(tmp_path: Path) -> None:
    h = _small(tmp_path, max_bytes=100)
    try:
        err, fd = h.open("big", oflags=O_CREAT, write=True)
        assert err == SUCCESS
        assert h.write(fd, b"a" * 150) == (SUCCESS, 100)  # cut, as a full disk does
        assert h.write(fd, b"b") == (ENOSPC, -1)
        assert h.quota.refused
        assert (h.scratch / "big").stat().st_size == 100
        # positional writes and size changes are held to the same quota
        pw = h.iovecs([h.put(b"z")])
        assert h.call("fd_pwrite", fd, pw, 1, 10_000, h.alloc(4)) == ENOSPC
        assert h.call("fd_filestat_set_size", fd, 10_000) == ENOSPC
        assert h.call("fd_allocate", fd, 0, 10_000) == ENOSPC
        assert (h.scratch / "big").stat().st_size == 100
        # shrinking gives room back
        assert h.call("fd_filestat_set_size", fd, 40) == SUCCESS
        assert h.call("fd_seek", fd, 40, 0, h.alloc(8)) == SUCCESS
        assert h.write(fd, b"c" * 60) == (SUCCESS, 60)
        assert h.write(1, b"still answers")[0] == SUCCESS
    finally:
        h.close()


def test_truncating_and_unlinking_give_room_back(tmp_path: Path) -> None:
    h = _small(tmp_path, max_bytes=100)
    try:
        err, fd = h.open("f", oflags=O_CREAT, write=True)
        assert h.write(fd, b"a" * 100) == (SUCCESS, 100)
        assert h.write(fd, b"a")[0] == ENOSPC
        err, fd2 = h.open("f", oflags=O_TRUNC, write=True)
        assert err == SUCCESS and h.quota.used_bytes == 0
        assert h.write(fd2, b"b" * 100) == (SUCCESS, 100)
        assert h.path("path_unlink_file", "f") == SUCCESS
        assert h.quota.used_bytes == 0
    finally:
        h.close()


def test_too_many_entries_is_enospc(tmp_path: Path) -> None:
    h = _small(tmp_path, max_files=2)
    try:
        assert h.open("a", oflags=O_CREAT, write=True)[0] == SUCCESS
        assert h.path("path_create_directory", "d") == SUCCESS
        assert h.open("b", oflags=O_CREAT, write=True)[0] == ENOSPC
        assert h.path("path_create_directory", "e") == ENOSPC
        assert sorted(p.name for p in h.scratch.iterdir()) == ["a", "d"]
        assert h.open("a", write=True)[0] == SUCCESS  # existing entries still open
    finally:
        h.close()


# ---- output caps ------------------------------------------------------------------------------
@pytest.mark.parametrize("fd", [1, 2])
def test_output_past_its_cap_is_cut_and_stops_the_run(host: Host, fd: int) -> None:
    stream = host.io.stdout if fd == 1 else host.io.stderr
    stream.cap = 10
    assert host.write(fd, b"0123456")[0] == SUCCESS
    assert host.io.stop_reason is None
    assert host.write(fd, b"789abcdef")[0] == SUCCESS
    assert stream.text() == "0123456789" and stream.truncated
    assert host.io.stop_reason == "output"


def test_a_failing_output_callback_is_dropped(host: Host) -> None:
    seen: list[bytes] = []

    def boom(name: str, data: bytes) -> None:
        seen.append(data)
        raise RuntimeError("a face's bug")

    host.io.stdout.on_chunk = boom
    assert host.write(1, b"a")[0] == SUCCESS
    assert host.write(1, b"b")[0] == SUCCESS
    assert seen == [b"a"] and host.io.stdout.text() == "ab"
    assert host.io.stop_reason is None


# ---- stdin and the control channel --------------------------------------------------------------
def test_stdin_given_up_front(host: Host) -> None:
    host.io.stdin = b"hello"
    assert host.read(0, 3) == (SUCCESS, b"hel")
    assert host.read(0, 10) == (SUCCESS, b"lo")
    assert host.read(0, 10) == (SUCCESS, b"")


def test_the_control_channel_hands_over_a_job_and_takes_reports(host: Host) -> None:
    host.io.control = True
    seen: list[dict[str, object]] = []
    host.io.on_handover = seen.append
    host.io.submit({"code": "print(1)", "budget": None})
    err, frame = host.read(0, 4096)
    assert err == SUCCESS and frame.startswith(b"WRJB")
    assert seen == [{"code": "print(1)", "budget": None}]
    assert not host.io.control  # fd 0 is the program's stdin now
    assert host.write(0, b"not json")[0] == EINVAL
    assert host.write(0, b'{"exit": 0}')[0] == SUCCESS
    assert host.io.reports == [{"exit": 0}] and host.io.control
    host.io.end_jobs()
    assert host.read(0, 16) == (SUCCESS, b"")  # no job will come: the run ends
    assert host.io.stop_reason == "closed"


# ---- what a write's bytes may cost the host (issue 39, items 1 and 3) ----------------------------
def _many(h: Host, chunk: bytes, count: int, head: bytes = b"", tail: bytes = b"") -> tuple[int, int, int]:
    """(iovec array, total bytes) of ``head``, then ``count`` iovecs all pointing at one buffer
    holding ``chunk``, then ``tail``: a few KiB of guest memory that ask for far more."""
    buf = h.put(chunk)
    vecs = ([h.put(head)] if head else []) + [buf] * count + ([h.put(tail)] if tail else [])
    return h.iovecs(vecs), len(vecs), len(head) + count * len(chunk) + len(tail)


def _peak(fn: Callable[[], object]) -> tuple[object, int]:
    """(what ``fn`` returned, the most memory Python allocated meanwhile)."""
    tracemalloc.start()
    try:
        got = fn()
        return got, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_write_of_1024_iovecs_copies_only_what_can_be_used(tmp_path: Path) -> None:
    h = _small(tmp_path, max_bytes=100)
    try:
        iov, n, total = _many(h, b"x" * 32768, 1024)  # 32 MiB asked for, 32 KiB in memory
        out = h.alloc(4)
        h.io.stdout.cap = 1000
        err, peak = _peak(lambda: h.call("fd_write", 1, iov, n, out))
        assert err == SUCCESS and h.io.stdout.size == 1000 and h.io.stop_reason == "output"
        assert peak < 1 << 20, peak  # not 32 MiB: only the room under the cap was copied
        _, fd = h.open("f", oflags=O_CREAT, write=True)
        err, peak = _peak(lambda: h.call("fd_write", fd, iov, n, out))
        assert err == SUCCESS and h.u32(out) == 100 and peak < 1 << 20, peak  # the quota's room
        assert h.quota.refused and (h.scratch / "f").stat().st_size == 100
        assert h.call("fd_pwrite", fd, iov, n, 0, out) == SUCCESS and h.u32(out) == 100
        assert h.call("fd_pwrite", fd, iov, n, 100, out) == ENOSPC
        # a read asks the host for no more than MAX_READ_BYTES at once
        assert h.call("fd_read", fd, iov, n, out) == SUCCESS
    finally:
        h.close()


def test_reports_on_fd_0_are_bounded_before_they_are_parsed(tmp_path: Path) -> None:
    host = Host(tmp_path / "big", mem_size=1 << 20)
    host.io.control = True
    out = host.alloc(4)
    # 12 MiB of [{},{},...]: under the report's byte bound, but 4 million values (the host used
    # to build them all: about 27 bytes of objects per byte written)
    iov, n, total = _many(host, b"{}," * 10922, 384, head=b"[", tail=b"{}]")
    assert MAX_REPORT_BYTES > total > 12_000_000
    err, peak = _peak(lambda: host.call("fd_write", 0, iov, n, out))
    assert err == EINVAL and host.io.reports == []
    assert peak < 48 << 20, peak  # the text's copies, no objects
    assert host.io.stop_reason is None  # refused; the wrapper's failing report ends the run
    # past the byte bound: the run ends as an internal error, nothing copied
    iov, n, total = _many(host, b"{}," * 21845, 1000, head=b"[", tail=b"{}]")
    assert total > MAX_REPORT_BYTES
    err, peak = _peak(lambda: host.call("fd_write", 0, iov, n, out))
    assert err == EINVAL and peak < 1 << 20, peak
    assert host.io.stop_reason == "internal" and "over its bound" in (host.io.internal_error or "")
    # a host call past its bound likewise (the magic first, then 1,000 x 64 KiB)
    host.io.stop_reason = None
    host.io.host_call = lambda request, stop: b"{}"
    iov, n, total = _many(host, b"x" * 65535, 1000, head=CALL_MAGIC)
    assert total > MAX_CALL_BYTES
    err, peak = _peak(lambda: host.call("fd_write", 0, iov, n, out))
    assert err == EINVAL and peak < 1 << 20 and host.io.stop_reason == "internal"
    # a report of ordinary size still goes through
    assert host.write(0, b'{"exit": 0, "outputs": []}')[0] == SUCCESS
    assert host.io.reports == [{"exit": 0, "outputs": []}]
    host.close()


# ---- bad pointers -----------------------------------------------------------------------------
def test_bad_pointers_and_lengths_are_efault(host: Host) -> None:
    ok_iov = host.iovecs([host.put(b"x")])
    out = host.alloc(4)
    assert host.call("fd_write", 1, MEM_SIZE - 4, 1, out) == EFAULT  # iovec array out of bounds
    assert host.call("fd_write", 1, -8, 1, out) == EFAULT
    assert host.call("fd_write", 1, ok_iov, 1025, out) == EFAULT  # too many iovecs
    assert host.call("fd_write", 1, ok_iov, -1, out) == EFAULT
    bad_buf = host.iovecs([(MEM_SIZE - 2, 16)])
    assert host.call("fd_write", 1, bad_buf, 1, out) == EFAULT  # a buffer out of bounds
    host.io.stdin = b"abc"
    assert host.call("fd_read", 0, bad_buf, 1, out) == EFAULT
    assert host.call("fd_fdstat_get", 1, MEM_SIZE) == EFAULT
    assert host.call("fd_filestat_get", SCRATCH_FD, MEM_SIZE - 8) == EFAULT
    assert host.call("fd_readdir", SCRATCH_FD, MEM_SIZE - 8, 64, 0, out) == EFAULT
    assert host.call("fd_prestat_dir_name", SCRATCH_FD, MEM_SIZE - 2, 16) == EFAULT
    assert host.io.stop_reason is None  # errors, not a stopped run
    assert host.io.stdout.text() == ""  # nothing was written by the refused calls
    assert host.call("fd_write", 1, ok_iov, 1, out) == SUCCESS
    assert host.io.stdout.text() == "x"


def test_append_and_seek(host: Host) -> None:
    err, fd = host.open("log", oflags=O_CREAT, write=True, fdflags=FDFLAG_APPEND)
    assert host.write(fd, b"ab")[0] == SUCCESS
    out = host.alloc(8)
    assert host.call("fd_seek", fd, 0, 0, out) == SUCCESS
    assert host.write(fd, b"cd")[0] == SUCCESS  # append: still at the end
    assert (host.scratch / "log").read_bytes() == b"abcd"
    assert host.call("fd_seek", fd, 0, 7, out) == EINVAL  # bad whence
    assert host.call("fd_tell", fd, out) == SUCCESS
    assert struct.unpack("<Q", host.mem.read(out, 8))[0] == 4
