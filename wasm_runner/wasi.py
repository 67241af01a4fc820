"""Our own WASI preview1 host: every import the guest has is implemented here, none by wasmtime.

Owning every call is what makes the limits exact: output is counted as it is written and ends the
run at its cap, the disk quota is checked before each byte lands, a sleep or a wait for stdin ends
at the deadline, the fd table only ever holds the grants, and ``proc_exit`` keeps the full code.
Nothing of the host is reachable but the grants' folders; sockets are refused.

Host functions never raise into wasmtime: they record why a run must stop on the ``GuestIO`` and
ask the store's epoch callback to end it (see ``engine.py``), then return an errno.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import stat
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import wasmtime as wt

from .grants import DiskQuota, Grant, GuestPathError, normalize, open_dir

# errno values of WASI preview1
SUCCESS, E2BIG, EACCES, EAGAIN, EBADF = 0, 1, 2, 6, 8
EEXIST, EFAULT, EINVAL, EIO, EISDIR, ELOOP = 20, 21, 28, 29, 31, 32
ENOENT, ENOSPC, ENOSYS, ENOTDIR, ENOTEMPTY, ENOTSUP, EPERM = 44, 51, 52, 54, 55, 58, 63
EROFS, ESPIPE, EXDEV, ENOTCAPABLE, EMFILE = 69, 70, 75, 76, 33

_HOST_TO_WASI = {
    errno.EPERM: 63, errno.ENOENT: 44, errno.EEXIST: 20, errno.EISDIR: 31, errno.ENOTDIR: 54,
    errno.ENOTEMPTY: 55, errno.ELOOP: 32, errno.ENAMETOOLONG: 37, errno.ENOSPC: 51,
    errno.EXDEV: 75, errno.EROFS: 69, errno.EBADF: 8, errno.EINVAL: 28, errno.EFBIG: 22,
    errno.ESPIPE: 70, errno.EACCES: 2, errno.ETXTBSY: 74, errno.EDQUOT: 19, errno.EMFILE: 33,
    errno.ENOMEM: 48, errno.EIO: 29, errno.EOPNOTSUPP: 58, errno.EBUSY: 10,
}


def _errno(e: OSError) -> int:
    if isinstance(e, GuestPathError):
        return e.wasi_errno
    return _HOST_TO_WASI.get(e.errno or 0, EIO)


# filetypes
FT_UNKNOWN, FT_CHAR, FT_DIR, FT_REG, FT_SYMLINK = 0, 2, 3, 4, 7
# rights: everything, so wasi-libc never masks an operation; the grant decides.
ALL_RIGHTS = (1 << 30) - 1
RIGHT_FD_READ, RIGHT_FD_SEEK, RIGHT_FD_TELL, RIGHT_FD_WRITE = 1 << 1, 1 << 2, 1 << 5, 1 << 6
STDIO_RIGHTS = ALL_RIGHTS  # seek/tell rights: isatty() is False, as for a pipe
# oflags / fdflags / lookup flags
O_CREAT, O_DIRECTORY, O_EXCL, O_TRUNC = 1, 2, 4, 8
FDFLAG_APPEND = 1
WRITE_RIGHTS = RIGHT_FD_WRITE | (1 << 8) | (1 << 22)  # fd_write, fd_allocate, fd_filestat_set_size

CONTROL_MAGIC = b"WRJB"  # host -> guest job frames on fd 0 during the control phase


class InputSource(Protocol):
    """Interactive stdin: ``read`` returns bytes, ``b""`` at end of input, ``None`` when nothing
    arrived within ``timeout`` seconds (the run keeps waiting, up to its deadline)."""

    def read(self, max_bytes: int, timeout: float) -> bytes | None: ...


@dataclass
class Stream:
    """One output stream with its cap. ``on_chunk`` streams what is written, as it is written."""

    name: str
    cap: int
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    truncated: bool = False
    on_chunk: Callable[[str, bytes], None] | None = None

    def write(self, data: bytes) -> bool:
        """Keep what fits under the cap; False when the cap was reached (the run must stop)."""
        room = self.cap - self.size
        if len(data) > room:
            data = data[: max(room, 0)]
            self.truncated = True
        if data:
            self.chunks.append(data)
            self.size += len(data)
            if self.on_chunk is not None:
                try:
                    self.on_chunk(self.name, data)
                except Exception:  # a face's callback must not break the guest
                    self.on_chunk = None
        return not self.truncated

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    def reset(self, cap: int, on_chunk: Callable[[str, bytes], None] | None) -> None:
        self.chunks, self.size, self.truncated, self.cap, self.on_chunk = [], 0, False, cap, on_chunk


@dataclass
class _Fd:
    kind: str  # "stdio", "dir", "file"
    host_fd: int = -1
    grant: Grant | None = None
    parts: tuple[str, ...] = ()
    append: bool = False
    writable: bool = False
    preopen: str | None = None  # guest path, for preopened dirs
    listing: list[tuple[str, int, int]] | None = None  # readdir cache: (name, ino, filetype)


class StopRun(Exception):
    """Recorded on a GuestIO when a host call decides the run must end (never raised into wasm)."""


class GuestIO:
    """The host side of one guest instance: fd table, grants, quota, streams, stdin, control."""

    def __init__(self, grants: list[Grant], quota: DiskQuota, argv: list[str]):
        self.argv = [a.encode() for a in argv]
        self.env: list[bytes] = [b"LANG=C.UTF-8", b"HOME=/scratch", b"PYTHONHASHSEED=0"]
        self.grants = grants
        self.quota = quota
        self.fds: dict[int, _Fd] = {0: _Fd("stdio"), 1: _Fd("stdio"), 2: _Fd("stdio")}
        for g in grants:
            self.fds[len(self.fds)] = _Fd("dir", os.dup(g.root_fd), g, (), preopen=g.guest_path)
        self.next_fd = len(self.fds)
        self.stdout = Stream("stdout", 1 << 20)
        self.stderr = Stream("stderr", 1 << 20)
        self.stdin: bytes = b""
        self.stdin_pos = 0
        self.input_source: InputSource | None = None
        self.memory: wt.Memory | None = None
        # control channel
        self.jobs: list[bytes] = []
        self.jobs_cv = threading.Condition()
        self.control = True  # fd 0 serves job frames until a job was handed over
        self.pending_frame = b""
        self.reports: list[dict[str, Any]] = []
        self.on_handover: Callable[[Any], None] | None = None  # called on the guest thread
        self.on_report: Callable[[], None] | None = None  # likewise, when a job reports
        # run state
        self.deadline: float = float("inf")
        self.cancel: threading.Event | None = None
        self.stop_reason: str | None = None  # "timeout", "output", "cancelled", "internal", "exit"
        self.exit_code: int | None = None
        self.closed_for_jobs = False
        self.internal_error: str | None = None
        self.idle = False

    # ---- the run's end -------------------------------------------------------------------
    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason

    def should_stop(self) -> str | None:
        if self.stop_reason is not None:
            return self.stop_reason
        if self.cancel is not None and self.cancel.is_set():
            self.stop("cancelled")
        elif time.monotonic() >= self.deadline:
            self.stop("timeout")
        return self.stop_reason

    def rebind(self, guest_path: str, grant: Grant | None) -> None:
        """Point the preopen at ``guest_path`` to another host folder, or hide it (``None``).

        Used by warm pools before a run is handed over: the guest's libc only knows the fd
        number, and every path is resolved through the grant at call time.
        """
        for fd, f in list(self.fds.items()):
            if f.preopen == guest_path:
                if f.host_fd >= 0:
                    os.close(f.host_fd)
                if grant is None:
                    f.host_fd, f.grant, f.kind = -1, None, "hidden"
                else:
                    f.host_fd, f.grant, f.kind = os.dup(grant.root_fd), grant, "dir"

    def close(self) -> None:
        for f in self.fds.values():
            if f.host_fd >= 0:
                try:
                    os.close(f.host_fd)
                except OSError:
                    pass
        self.fds.clear()

    # ---- control channel ------------------------------------------------------------------
    def submit(self, job: dict[str, Any]) -> None:
        data = json.dumps(job).encode()
        with self.jobs_cv:
            self.jobs.append(CONTROL_MAGIC + struct.pack("<I", len(data)) + data)
            self.jobs_cv.notify_all()

    def end_jobs(self) -> None:
        with self.jobs_cv:
            self.closed_for_jobs = True
            self.jobs_cv.notify_all()

    def _next_frame(self) -> bytes | None:
        with self.jobs_cv:
            self.idle = True
            self.jobs_cv.notify_all()
            while not self.jobs and not self.closed_for_jobs:
                self.jobs_cv.wait(0.5)
            self.idle = False
            if not self.jobs:
                return None
            return self.jobs.pop(0)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the guest asks for its next job (it finished the previous one)."""
        end = time.monotonic() + timeout
        with self.jobs_cv:
            while not (self.idle and not self.jobs):
                left = end - time.monotonic()
                if left <= 0 or self.stop_reason is not None:
                    return False
                self.jobs_cv.wait(min(left, 0.1))
            return True


# ---------------------------------------------------------------------------------------------
# The import functions. They find their GuestIO through the calling thread: every guest runs on
# a thread of its own, which sets ``current.io`` before it enters wasm.

current = threading.local()


def _io() -> GuestIO:
    return current.io  # type: ignore[no-any-return]


class _Mem:
    """Bounds-checked access to the caller's linear memory."""

    __slots__ = ("base", "size")

    def __init__(self, caller: wt.Caller, mem: wt.Memory):
        self.size = mem.data_len(caller)
        self.base = ctypes.addressof(mem.data_ptr(caller).contents)

    def read(self, addr: int, n: int) -> bytes:
        if addr < 0 or n < 0 or addr + n > self.size:
            raise _Fault()
        return ctypes.string_at(self.base + addr, n)

    def write(self, addr: int, data: bytes) -> None:
        if addr < 0 or addr + len(data) > self.size:
            raise _Fault()
        ctypes.memmove(self.base + addr, data, len(data))

    def u32(self, addr: int, value: int) -> None:
        self.write(addr, struct.pack("<I", value & 0xFFFFFFFF))

    def u64(self, addr: int, value: int) -> None:
        self.write(addr, struct.pack("<Q", value & 0xFFFFFFFFFFFFFFFF))

    def iovecs(self, iovs: int, n: int) -> list[tuple[int, int]]:
        if n > 1024:
            raise _Fault()
        raw = self.read(iovs, 8 * n)
        return [struct.unpack_from("<II", raw, 8 * i) for i in range(n)]

    def string(self, ptr: int, n: int) -> str:
        if n > 4096:
            raise GuestPathError(37, "name too long")  # ENAMETOOLONG
        try:
            return self.read(ptr, n).decode("utf-8")
        except UnicodeDecodeError:
            raise GuestPathError(25, "path is not UTF-8") from None  # EILSEQ


class _Fault(Exception):
    pass


def _mem(caller: wt.Caller) -> _Mem:
    io = _io()
    if io.memory is None:
        got = caller.get("memory")
        if not isinstance(got, wt.Memory):
            raise _Fault()
        io.memory = got
    return _Mem(caller, io.memory)


def _filestat(st: os.stat_result) -> bytes:
    if stat.S_ISDIR(st.st_mode):
        ft = FT_DIR
    elif stat.S_ISREG(st.st_mode):
        ft = FT_REG
    elif stat.S_ISLNK(st.st_mode):
        ft = FT_SYMLINK
    else:
        ft = FT_UNKNOWN
    return struct.pack(
        "<QQBxxxxxxxQQQQQ", 0, st.st_ino, ft, st.st_nlink, st.st_size,
        st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns,
    )


def _fd(io: GuestIO, fd: int, *kinds: str) -> _Fd:
    f = io.fds.get(fd)
    if f is not None and f.kind == "hidden":
        raise GuestPathError(ENOENT, "not granted to this run")
    if f is None or (kinds and f.kind not in kinds):
        raise GuestPathError(EBADF, "bad fd")
    return f


# ---- args, environment, clocks, randomness ----------------------------------------------------
def args_sizes_get(caller: wt.Caller, argc: int, size: int) -> int:
    io, m = _io(), _mem(caller)
    m.u32(argc, len(io.argv))
    m.u32(size, sum(len(a) + 1 for a in io.argv))
    return SUCCESS


def _put_list(m: _Mem, items: list[bytes], ptrs: int, buf: int) -> int:
    for i, item in enumerate(items):
        m.u32(ptrs + 4 * i, buf)
        m.write(buf, item + b"\0")
        buf += len(item) + 1
    return SUCCESS


def args_get(caller: wt.Caller, ptrs: int, buf: int) -> int:
    return _put_list(_mem(caller), _io().argv, ptrs, buf)


def environ_sizes_get(caller: wt.Caller, count: int, size: int) -> int:
    io, m = _io(), _mem(caller)
    m.u32(count, len(io.env))
    m.u32(size, sum(len(e) + 1 for e in io.env))
    return SUCCESS


def environ_get(caller: wt.Caller, ptrs: int, buf: int) -> int:
    return _put_list(_mem(caller), _io().env, ptrs, buf)


def clock_res_get(caller: wt.Caller, clock_id: int, out: int) -> int:
    _mem(caller).u64(out, 1000)
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
    _mem(caller).u64(out, now)
    return SUCCESS


def random_get(caller: wt.Caller, buf: int, n: int) -> int:
    if n > 1 << 20:
        return EINVAL
    _mem(caller).write(buf, os.urandom(n))
    return SUCCESS


def sched_yield(caller: wt.Caller) -> int:
    return SUCCESS


def proc_exit(caller: wt.Caller, code: int) -> None:
    io = _io()
    io.exit_code = code
    io.stop("exit")


def _refuse(*_: Any) -> int:
    return ENOTSUP


# ---- stdio and files --------------------------------------------------------------------------
def fd_write(caller: wt.Caller, fd: int, iovs: int, n: int, nwritten: int) -> int:
    io, m = _io(), _mem(caller)
    data = b"".join(m.read(p, ln) for p, ln in m.iovecs(iovs, n))
    if fd in (1, 2):
        if io.fds.get(fd) is None:
            return EBADF
        stream = io.stdout if fd == 1 else io.stderr
        if not stream.write(data):
            io.stop("output")
        m.u32(nwritten, len(data))
        return SUCCESS
    if fd == 0:  # the wrapper's reports on the control channel
        try:
            io.reports.append(json.loads(data.decode()))
        except (ValueError, UnicodeDecodeError):
            return EINVAL
        if io.on_report is not None:
            io.on_report()
        io.control = True
        m.u32(nwritten, len(data))
        return SUCCESS
    f = _fd(io, fd, "file")
    if not f.writable:
        return EBADF
    pos = os.lseek(f.host_fd, 0, os.SEEK_END if f.append else os.SEEK_CUR)
    written = _write_at(io, f, data, pos, positional=False)
    m.u32(nwritten, written)
    return SUCCESS


def _write_at(io: GuestIO, f: _Fd, data: bytes, pos: int, positional: bool) -> int:
    """Write ``data`` at ``pos``, growing the file only within the quota: what does not fit is
    cut (a short write, as a full disk gives), and nothing fitting is ENOSPC."""
    size = os.fstat(f.host_fd).st_size
    growth = pos + len(data) - size
    if growth > 0 and not io.quota.grow(growth):
        keep = min(len(data), size + io.quota.room() - pos)  # up to the furthest byte allowed
        if keep <= 0 or not io.quota.grow(pos + keep - size):
            raise GuestPathError(ENOSPC, "quota")
        data = data[:keep]
    if positional:
        return os.pwrite(f.host_fd, data, pos)
    return os.write(f.host_fd, data)


def fd_pwrite(caller: wt.Caller, fd: int, iovs: int, n: int, offset: int, nwritten: int) -> int:
    io, m = _io(), _mem(caller)
    f = _fd(io, fd, "file")
    if not f.writable:
        return EBADF
    data = b"".join(m.read(p, ln) for p, ln in m.iovecs(iovs, n))
    m.u32(nwritten, _write_at(io, f, data, offset, positional=True))
    return SUCCESS


def fd_read(caller: wt.Caller, fd: int, iovs: int, n: int, nread: int) -> int:
    io, m = _io(), _mem(caller)
    vecs = m.iovecs(iovs, n)
    want = sum(ln for _, ln in vecs)
    if fd == 0:
        data = _read_stdin(io, want)
    else:
        f = _fd(io, fd, "file", "dir")
        if f.kind == "dir":
            return EISDIR
        data = os.read(f.host_fd, want)
    _scatter(m, vecs, data)
    m.u32(nread, len(data))
    return SUCCESS


def _scatter(m: _Mem, vecs: list[tuple[int, int]], data: bytes) -> None:
    off = 0
    for p, ln in vecs:
        if off >= len(data):
            break
        chunk = data[off : off + ln]
        m.write(p, chunk)
        off += len(chunk)


def _read_stdin(io: GuestIO, want: int) -> bytes:
    if io.control:
        if not io.pending_frame:
            frame = _next_frame_for_guest(io)
            if frame is None:
                return b""
            io.pending_frame = frame
        data, io.pending_frame = io.pending_frame[:want], io.pending_frame[want:]
        if not io.pending_frame:
            io.control = False
        return data
    if io.input_source is not None:
        while True:
            if io.should_stop():
                return b""
            left = io.deadline - time.monotonic()
            got = io.input_source.read(want, max(0.0, min(0.05, left)))
            if got is not None:
                return got
    data = io.stdin[io.stdin_pos : io.stdin_pos + want]
    io.stdin_pos += len(data)
    return data


def _next_frame_for_guest(io: GuestIO) -> bytes | None:
    """Block (on the guest's thread) until a job is handed over; arm its budgets there."""
    frame = io._next_frame()
    if frame is None:
        io.stop("closed")
        return None
    job = json.loads(frame[8:])
    if io.on_handover is not None:
        io.on_handover(job)
    return frame


def fd_pread(caller: wt.Caller, fd: int, iovs: int, n: int, offset: int, nread: int) -> int:
    io, m = _io(), _mem(caller)
    f = _fd(io, fd, "file")
    vecs = m.iovecs(iovs, n)
    data = os.pread(f.host_fd, sum(ln for _, ln in vecs), offset)
    _scatter(m, vecs, data)
    m.u32(nread, len(data))
    return SUCCESS


def fd_seek(caller: wt.Caller, fd: int, offset: int, whence: int, out: int) -> int:
    io = _io()
    if fd in (0, 1, 2):
        return ESPIPE
    f = _fd(io, fd, "file")
    if whence not in (0, 1, 2):
        return EINVAL
    pos = os.lseek(f.host_fd, offset, (os.SEEK_SET, os.SEEK_CUR, os.SEEK_END)[whence])
    _mem(caller).u64(out, pos)
    return SUCCESS


def fd_tell(caller: wt.Caller, fd: int, out: int) -> int:
    f = _fd(_io(), fd, "file")
    _mem(caller).u64(out, os.lseek(f.host_fd, 0, os.SEEK_CUR))
    return SUCCESS


def fd_close(caller: wt.Caller, fd: int) -> int:
    io = _io()
    f = io.fds.pop(fd, None)
    if f is None:
        return EBADF
    if f.host_fd >= 0:
        os.close(f.host_fd)
    return SUCCESS


def fd_fdstat_get(caller: wt.Caller, fd: int, out: int) -> int:
    io = _io()
    f = _fd(io, fd)
    if f.kind == "stdio":
        ft, flags, rights = FT_CHAR, 0, STDIO_RIGHTS
    elif f.kind == "dir":
        ft, flags, rights = FT_DIR, 0, ALL_RIGHTS
    else:
        ft, flags, rights = FT_REG, FDFLAG_APPEND if f.append else 0, ALL_RIGHTS
    _mem(caller).write(out, struct.pack("<BxHxxxxQQ", ft, flags, rights, ALL_RIGHTS))
    return SUCCESS


def fd_fdstat_set_flags(caller: wt.Caller, fd: int, flags: int) -> int:
    f = _fd(_io(), fd)
    if f.kind == "file":
        f.append = bool(flags & FDFLAG_APPEND)
    return SUCCESS


def fd_filestat_get(caller: wt.Caller, fd: int, out: int) -> int:
    f = _fd(_io(), fd)
    if f.kind == "stdio":
        _mem(caller).write(out, struct.pack("<QQBxxxxxxxQQQQQ", 0, 0, FT_CHAR, 1, 0, 0, 0, 0))
        return SUCCESS
    _mem(caller).write(out, _filestat(os.fstat(f.host_fd)))
    return SUCCESS


def fd_filestat_set_size(caller: wt.Caller, fd: int, size: int) -> int:
    io = _io()
    f = _fd(io, fd, "file")
    if not f.writable:
        return EBADF
    old = os.fstat(f.host_fd).st_size
    if size > old and not io.quota.grow(size - old):
        return ENOSPC
    os.ftruncate(f.host_fd, size)
    if size < old:
        io.quota.grow(size - old)
    return SUCCESS


def fd_allocate(caller: wt.Caller, fd: int, offset: int, length: int) -> int:
    io = _io()
    f = _fd(io, fd, "file")
    if not f.writable:
        return EBADF
    old = os.fstat(f.host_fd).st_size
    new = offset + length
    if new > old:
        if not io.quota.grow(new - old):
            return ENOSPC
        os.ftruncate(f.host_fd, new)
    return SUCCESS


def _set_times(fd_or_name: Any, dir_fd: int | None, atim: int, mtim: int, flags: int) -> None:
    st = os.stat(fd_or_name, dir_fd=dir_fd, follow_symlinks=False) if dir_fd is not None else os.fstat(fd_or_name)
    now = time.time_ns()
    a = now if flags & 2 else (atim if flags & 1 else st.st_atime_ns)
    m = now if flags & 8 else (mtim if flags & 4 else st.st_mtime_ns)
    if dir_fd is not None:
        os.utime(fd_or_name, ns=(a, m), dir_fd=dir_fd, follow_symlinks=False)
    else:
        os.utime(fd_or_name, ns=(a, m))


def fd_filestat_set_times(caller: wt.Caller, fd: int, atim: int, mtim: int, flags: int) -> int:
    f = _fd(_io(), fd, "file", "dir")
    if not (f.grant and f.grant.writable):
        return EROFS
    _set_times(f.host_fd, None, atim, mtim, flags)
    return SUCCESS


def fd_noop(caller: wt.Caller, fd: int, *_: int) -> int:
    _fd(_io(), fd)
    return SUCCESS


def fd_prestat_get(caller: wt.Caller, fd: int, out: int) -> int:
    f = _io().fds.get(fd)
    if f is None or f.preopen is None:
        return EBADF
    _mem(caller).write(out, struct.pack("<BxxxI", 0, len(f.preopen.encode())))
    return SUCCESS


def fd_prestat_dir_name(caller: wt.Caller, fd: int, buf: int, n: int) -> int:
    f = _io().fds.get(fd)
    if f is None or f.preopen is None:
        return EBADF
    name = f.preopen.encode()
    if n < len(name):
        return EINVAL
    _mem(caller).write(buf, name)
    return SUCCESS


def fd_readdir(caller: wt.Caller, fd: int, buf: int, buf_len: int, cookie: int, used: int) -> int:
    io, m = _io(), _mem(caller)
    f = _fd(io, fd, "dir")
    if f.listing is None or cookie == 0:
        entries = [(".", 0, FT_DIR), ("..", 0, FT_DIR)]
        with os.scandir(f.host_fd) as it:
            for e in it:
                try:
                    ft = FT_DIR if e.is_dir(follow_symlinks=False) else (
                        FT_REG if e.is_file(follow_symlinks=False) else (
                            FT_SYMLINK if e.is_symlink() else FT_UNKNOWN))
                    entries.append((e.name, e.inode(), ft))
                except OSError:
                    continue
        f.listing = entries
    out = bytearray()
    for i in range(cookie, len(f.listing)):
        name, ino, ft = f.listing[i]
        raw = name.encode()
        out += struct.pack("<QQIBxxx", i + 1, ino, len(raw), ft) + raw
        if len(out) >= buf_len:
            break
    out = out[:buf_len]
    m.write(buf, bytes(out))
    m.u32(used, len(out))
    return SUCCESS


# ---- paths ---------------------------------------------------------------------------------
def _resolve(io: GuestIO, m: _Mem, dirfd: int, ptr: int, n: int) -> tuple[_Fd, tuple[str, ...]]:
    d = _fd(io, dirfd, "dir")
    return d, normalize(d.parts, m.string(ptr, n))


def _parent(d: _Fd, parts: tuple[str, ...]) -> tuple[int, str]:
    """An fd of the parent directory of ``parts`` and the last name; ``parts`` is not the root."""
    if not parts:
        raise GuestPathError(EPERM, "the grant's root itself")
    assert d.grant is not None
    return open_dir(d.grant, parts[:-1]), parts[-1]


def path_open(
    caller: wt.Caller, dirfd: int, lookup: int, ptr: int, n: int, oflags: int,
    rights: int, rights_inh: int, fdflags: int, out: int,
) -> int:
    io, m = _io(), _mem(caller)
    d, parts = _resolve(io, m, dirfd, ptr, n)
    grant = d.grant
    assert grant is not None
    write = bool(rights & WRITE_RIGHTS) or bool(oflags & (O_CREAT | O_TRUNC))
    if write and not grant.writable:
        return EROFS
    if len(io.fds) >= 512:
        return EMFILE
    if not parts:  # the grant's root
        if write:
            return EISDIR
        hfd = open_dir(grant, ())
        return _new_fd(io, m, out, _Fd("dir", hfd, grant, parts))
    pfd, name = _parent(d, parts)
    try:
        try:
            st: os.stat_result | None = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            return ELOOP
        if st is not None and oflags & O_CREAT and oflags & O_EXCL:
            return EEXIST
        if st is None:
            if not oflags & O_CREAT:
                return ENOENT
            if oflags & O_DIRECTORY:
                return ENOENT
            if not io.quota.add_entry():
                return ENOSPC
        if st is not None and stat.S_ISDIR(st.st_mode):
            if write:
                return EISDIR
            hfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
            return _new_fd(io, m, out, _Fd("dir", hfd, grant, parts))
        if oflags & O_DIRECTORY:
            return ENOTDIR
        if st is not None and not stat.S_ISREG(st.st_mode):
            return EACCES  # fifos, devices: never opened
        readable = bool(rights & RIGHT_FD_READ) or not write
        mode = os.O_RDWR if (write and readable) else (os.O_WRONLY if write else os.O_RDONLY)
        flags = mode | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        if oflags & O_CREAT:
            flags |= os.O_CREAT
        if oflags & O_EXCL:
            flags |= os.O_EXCL
        if oflags & O_TRUNC and st is not None and st.st_size:
            io.quota.grow(-st.st_size)
        if oflags & O_TRUNC:
            flags |= os.O_TRUNC
        hfd = os.open(name, flags, 0o644, dir_fd=pfd)
        os.set_blocking(hfd, True)
        return _new_fd(io, m, out, _Fd("file", hfd, grant, parts, bool(fdflags & FDFLAG_APPEND), write))
    finally:
        os.close(pfd)


def _new_fd(io: GuestIO, m: _Mem, out: int, f: _Fd) -> int:
    fd = io.next_fd
    io.next_fd += 1
    io.fds[fd] = f
    try:
        m.u32(out, fd)
    except _Fault:
        io.fds.pop(fd)
        os.close(f.host_fd)
        raise
    return SUCCESS


def path_filestat_get(caller: wt.Caller, dirfd: int, lookup: int, ptr: int, n: int, out: int) -> int:
    io, m = _io(), _mem(caller)
    d, parts = _resolve(io, m, dirfd, ptr, n)
    assert d.grant is not None
    if not parts:
        st = os.fstat(d.grant.root_fd)
    else:
        pfd, name = _parent(d, parts)
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        finally:
            os.close(pfd)
    m.write(out, _filestat(st))
    return SUCCESS


@contextmanager
def _in_parent(io: GuestIO, m: _Mem, dirfd: int, ptr: int, n: int, *, write: bool) -> Iterator[tuple[int, str]]:
    """The parent folder's fd and the last name of a guest path (refusing writes to read-only
    grants with EROFS); the fd is closed afterwards."""
    d, parts = _resolve(io, m, dirfd, ptr, n)
    if write and not (d.grant and d.grant.writable):
        raise GuestPathError(EROFS, "read-only grant")
    pfd, name = _parent(d, parts)
    try:
        yield pfd, name
    finally:
        os.close(pfd)


def path_filestat_set_times(
    caller: wt.Caller, dirfd: int, lookup: int, ptr: int, n: int, atim: int, mtim: int, flags: int
) -> int:
    with _in_parent(_io(), _mem(caller), dirfd, ptr, n, write=True) as (pfd, name):
        _set_times(name, pfd, atim, mtim, flags)
    return SUCCESS


def path_create_directory(caller: wt.Caller, dirfd: int, ptr: int, n: int) -> int:
    io = _io()
    with _in_parent(io, _mem(caller), dirfd, ptr, n, write=True) as (pfd, name):
        try:
            os.stat(name, dir_fd=pfd, follow_symlinks=False)
            return EEXIST
        except FileNotFoundError:
            pass
        if not io.quota.add_entry():
            return ENOSPC
        try:
            os.mkdir(name, 0o755, dir_fd=pfd)
        except OSError:
            io.quota.remove_entry(0)
            raise
    return SUCCESS


def path_remove_directory(caller: wt.Caller, dirfd: int, ptr: int, n: int) -> int:
    io = _io()
    with _in_parent(io, _mem(caller), dirfd, ptr, n, write=True) as (pfd, name):
        os.rmdir(name, dir_fd=pfd)
        io.quota.remove_entry(0)
    return SUCCESS


def path_unlink_file(caller: wt.Caller, dirfd: int, ptr: int, n: int) -> int:
    io = _io()
    with _in_parent(io, _mem(caller), dirfd, ptr, n, write=True) as (pfd, name):
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            return EISDIR
        os.unlink(name, dir_fd=pfd)
        io.quota.remove_entry(st.st_size if stat.S_ISREG(st.st_mode) else 0)
    return SUCCESS


def path_rename(caller: wt.Caller, fd1: int, p1: int, n1: int, fd2: int, p2: int, n2: int) -> int:
    io, m = _io(), _mem(caller)
    d1, parts1 = _resolve(io, m, fd1, p1, n1)
    d2, parts2 = _resolve(io, m, fd2, p2, n2)
    if d1.grant is not d2.grant:
        return EXDEV
    if parts2[: len(parts1)] == parts1:
        return EINVAL  # into itself
    with _in_parent(io, m, fd1, p1, n1, write=True) as (pfd1, name1), \
            _in_parent(io, m, fd2, p2, n2, write=True) as (pfd2, name2):
        src = os.stat(name1, dir_fd=pfd1, follow_symlinks=False)
        try:
            dst: os.stat_result | None = os.stat(name2, dir_fd=pfd2, follow_symlinks=False)
        except FileNotFoundError:
            dst = None
        os.rename(name1, name2, src_dir_fd=pfd1, dst_dir_fd=pfd2)
        if dst is not None and (dst.st_ino, dst.st_dev) != (src.st_ino, src.st_dev):
            io.quota.remove_entry(dst.st_size if stat.S_ISREG(dst.st_mode) else 0)
    return SUCCESS


def path_readlink(caller: wt.Caller, dirfd: int, ptr: int, n: int, buf: int, buf_len: int, used: int) -> int:
    m = _mem(caller)
    with _in_parent(_io(), m, dirfd, ptr, n, write=False) as (pfd, name):
        target = os.readlink(name, dir_fd=pfd).encode()[:buf_len]
    m.write(buf, target)
    m.u32(used, len(target))
    return SUCCESS


def path_symlink(caller: wt.Caller, *_: int) -> int:
    return EPERM  # guests never make links: nothing can point out of a grant


def path_link(caller: wt.Caller, *_: int) -> int:
    return EPERM


# ---- poll_oneoff: sleeps and waits end at the deadline -----------------------------------------
def poll_oneoff(caller: wt.Caller, subs: int, events: int, nsubs: int, nevents: int) -> int:
    io, m = _io(), _mem(caller)
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


# ---------------------------------------------------------------------------------------------
_I32, _I64 = wt.ValType.i32(), wt.ValType.i64()

# name -> (function, params, results). "i"=i32, "I"=i64.
_TABLE: dict[str, tuple[Callable[..., Any], str, str]] = {
    "args_get": (args_get, "ii", "i"),
    "args_sizes_get": (args_sizes_get, "ii", "i"),
    "environ_get": (environ_get, "ii", "i"),
    "environ_sizes_get": (environ_sizes_get, "ii", "i"),
    "clock_res_get": (clock_res_get, "ii", "i"),
    "clock_time_get": (clock_time_get, "iIi", "i"),
    "random_get": (random_get, "ii", "i"),
    "sched_yield": (sched_yield, "", "i"),
    "proc_exit": (proc_exit, "i", ""),
    "fd_write": (fd_write, "iiii", "i"),
    "fd_pwrite": (fd_pwrite, "iiiIi", "i"),
    "fd_read": (fd_read, "iiii", "i"),
    "fd_pread": (fd_pread, "iiiIi", "i"),
    "fd_seek": (fd_seek, "iIii", "i"),
    "fd_tell": (fd_tell, "ii", "i"),
    "fd_close": (fd_close, "i", "i"),
    "fd_fdstat_get": (fd_fdstat_get, "ii", "i"),
    "fd_fdstat_set_flags": (fd_fdstat_set_flags, "ii", "i"),
    "fd_filestat_get": (fd_filestat_get, "ii", "i"),
    "fd_filestat_set_size": (fd_filestat_set_size, "iI", "i"),
    "fd_filestat_set_times": (fd_filestat_set_times, "iIIi", "i"),
    "fd_allocate": (fd_allocate, "iII", "i"),
    "fd_advise": (fd_noop, "iIIi", "i"),
    "fd_sync": (fd_noop, "i", "i"),
    "fd_datasync": (fd_noop, "i", "i"),
    "fd_prestat_get": (fd_prestat_get, "ii", "i"),
    "fd_prestat_dir_name": (fd_prestat_dir_name, "iii", "i"),
    "fd_readdir": (fd_readdir, "iiiIi", "i"),
    "path_open": (path_open, "iiiiiIIii", "i"),
    "path_filestat_get": (path_filestat_get, "iiiii", "i"),
    "path_filestat_set_times": (path_filestat_set_times, "iiiiIIi", "i"),
    "path_create_directory": (path_create_directory, "iii", "i"),
    "path_remove_directory": (path_remove_directory, "iii", "i"),
    "path_unlink_file": (path_unlink_file, "iii", "i"),
    "path_rename": (path_rename, "iiiiii", "i"),
    "path_readlink": (path_readlink, "iiiiii", "i"),
    "path_symlink": (path_symlink, "iiiii", "i"),
    "path_link": (path_link, "iiiiiii", "i"),
    "poll_oneoff": (poll_oneoff, "iiii", "i"),
}


def _guarded(name: str, fn: Callable[..., Any], has_result: bool) -> Callable[..., Any]:
    """Turn every failure into an errno; a bug here stops the run as ``internal``, never the host."""

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except GuestPathError as e:
            return e.wasi_errno if has_result else None
        except _Fault:
            return EFAULT if has_result else None
        except OSError as e:
            return _errno(e) if has_result else None
        except Exception as e:  # noqa: BLE001 - recorded, never raised into wasm
            io = getattr(current, "io", None)
            if io is not None:
                io.internal_error = f"{name}: {type(e).__name__}: {e}"
                io.stop("internal")
            return EIO if has_result else None

    call.__name__ = name
    return call


def define_imports(linker: wt.Linker, module: wt.Module) -> None:
    """Define every import ``module`` has: ours for WASI, a refusal for sockets and the rest."""
    types = {"i": _I32, "I": _I64}
    for imp in module.imports:
        name = imp.name or ""
        ty = imp.type
        if not isinstance(ty, wt.FuncType):
            raise RuntimeError(f"unsupported import {imp.module}::{name}")
        if imp.module == "wasi_snapshot_preview1" and name in _TABLE:
            fn, params, results = _TABLE[name]
            ft = wt.FuncType([types[c] for c in params], [types[c] for c in results])
            linker.define_func(imp.module, name, ft, _guarded(name, fn, bool(results)), access_caller=True)
        else:
            # sockets, host::call and anything else: present, and refusing. -1 for a host door.
            res = ty.results
            value = -1 if imp.module == "host" else ENOTSUP
            linker.define_func(
                imp.module, name, ty, (lambda *a, _v=value, _r=bool(res): _v if _r else None)
            )
