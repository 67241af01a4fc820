"""WASI host calls on file descriptors: stdio (output caps, stdin, the control channel on fd 0),
files under the grants (every growth checked against the disk quota first), directories.

Host calls never raise into wasmtime: ``linker.guarded`` turns a ``Fault`` into ``EFAULT`` and an
``OSError`` into its errno.
"""

from __future__ import annotations

import ctypes
import os
import struct
import time
from typing import Any

import wasmtime as wt

from ..grants import GuestPathError
from .abi import (
    ALL_RIGHTS, CALL_MAGIC, EBADF, EINVAL, EISDIR, ENOSPC, EROFS, ESPIPE, FDFLAG_APPEND, FT_CHAR, FT_DIR, FT_REG,
    FT_SYMLINK, FT_UNKNOWN, STDIO_RIGHTS, SUCCESS, Mem, filestat,
)
from .fdtable import Fd, lookup
from .control import MAX_CALL_BYTES, MAX_REPORT_BYTES
from .guestio import GuestIO, current_io, memory

__all__ = [
    "fd_allocate", "fd_close", "fd_fdstat_get", "fd_fdstat_set_flags", "fd_filestat_get",
    "fd_filestat_set_size", "fd_filestat_set_times", "fd_noop", "fd_prestat_dir_name",
    "fd_prestat_get", "fd_pread", "fd_pwrite", "fd_read", "fd_readdir", "fd_seek", "fd_tell",
    "fd_write", "set_times",
]


# one read's bytes, at most: the host allocates what a read asks for before it reads (a file's
# read of 1,024 iovecs of 512 MiB each would ask for 512 GiB); a read past it is short
MAX_READ_BYTES = 16 << 20


def _gather(m: Mem, vecs: list[tuple[int, int]], limit: int) -> bytes:
    """The first ``limit`` bytes the iovecs point at: a write's bytes are copied out of the
    guest only as far as they can be used, never 1,024 times one large buffer."""
    parts, left = [], max(limit, 0)
    for p, ln in vecs:
        if left <= 0:
            break
        take = min(ln, left)
        parts.append(m.read(p, take))
        left -= take
    return b"".join(parts)


def _too_much(io: GuestIO, what: str, size: int, bound: int) -> int:
    """A write to the control channel past its bound: the run ends as an internal error, before
    any of it was copied out of the guest."""
    io.internal_error = f"the guest wrote {size} bytes as {what} on fd 0, over its bound of {bound}"
    io.stop("internal")
    return EINVAL


def fd_write(caller: wt.Caller, fd: int, iovs: int, n: int, nwritten: int) -> int:
    io, m = current_io(), memory(caller)
    vecs = m.iovecs(iovs, n)
    total = sum(ln for _, ln in vecs)
    if fd in (1, 2):
        if io.fds.get(fd) is None:
            return EBADF
        stream = io.stdout if fd == 1 else io.stderr
        # what fits under the cap, and one byte more to see that it did not
        if not stream.write(_gather(m, vecs, stream.cap - stream.size + 1)):
            io.stop("output")
        m.u32(nwritten, min(total, 0xFFFFFFFF))
        return SUCCESS
    if fd == 0:  # a host call or one of the wrapper's reports: bounded before it is copied
        if _gather(m, vecs, len(CALL_MAGIC)) == CALL_MAGIC:  # a host call: its answer is what fd 0 reads next
            if total > len(CALL_MAGIC) + MAX_CALL_BYTES:
                return _too_much(io, "a host call", total - len(CALL_MAGIC), MAX_CALL_BYTES)
            if not io.take_call(_gather(m, vecs, total)[len(CALL_MAGIC):]):
                return EINVAL
            m.u32(nwritten, min(total, 0xFFFFFFFF))
            return SUCCESS
        if total > MAX_REPORT_BYTES:
            return _too_much(io, "a report", total, MAX_REPORT_BYTES)
        if not io.take_report(_gather(m, vecs, total)):
            return EINVAL
        if io.tick_addr is not None and io.tick_host is None:
            io.tick_host = _pace_flag(m, io.tick_addr)
            if io.tick_host is not None:
                # "output is due" at once: from its first write the wrapper knows the host
                # paces it, so a fast printer goes to blocks after BURST lines instead of
                # writing line by line until the first timed flag (10-50 ms of lines)
                ctypes.memset(io.tick_host, 2, 1)
        m.u32(nwritten, min(total, 0xFFFFFFFF))
        return SUCCESS
    f = lookup(io, fd, "file")
    if not f.writable:
        return EBADF
    pos = os.lseek(f.host_fd, 0, os.SEEK_END if f.append else os.SEEK_CUR)
    data = _gather(m, m.iovecs(iovs, n), _room_at(io, f, pos))
    written = _write_at(io, f, data, pos, positional=False)
    m.u32(nwritten, written)
    return SUCCESS


def _room_at(io: GuestIO, f: Fd, pos: int) -> int:
    """How many bytes of a write at ``pos`` are copied out of the guest: those the disk quota
    lets it write (the file's bytes from ``pos`` on, then the quota's room), and one more, so
    that a longer write still finds the quota full as before (a short write, or ENOSPC)."""
    room = os.fstat(f.host_fd).st_size + io.quota.room() - pos
    return max(room, 0) + 1


PACE_MAGIC = b"WRTK"  # follows the wrapper's one-byte pace flag


def _pace_flag(m: Mem, addr: int) -> int | None:
    """The host address of the wrapper's pace flag: the content of the ``bytearray`` at guest
    address ``addr`` (a flag byte, then ``PACE_MAGIC``), found through the object's header and
    checked; None when it does not check out (the wrapper then paces itself by the clock).
    Linear memory never moves nor shrinks while the instance lives, so the address holds."""
    base = getattr(m, "base", None)
    if base is None or not 0 <= addr <= m.size - 32:
        return None
    head = m.read(addr, 32)
    for off in range(12, 32, 4):  # ob_bytes / ob_start of a 32-bit PyByteArrayObject
        ptr = struct.unpack_from("<I", head, off)[0]
        if 0 < ptr <= m.size - 1 - len(PACE_MAGIC) and m.read(ptr + 1, len(PACE_MAGIC)) == PACE_MAGIC:
            return int(base) + int(ptr)
    return None


def _write_at(io: GuestIO, f: Fd, data: bytes, pos: int, positional: bool) -> int:
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
    io, m = current_io(), memory(caller)
    f = lookup(io, fd, "file")
    if not f.writable:
        return EBADF
    data = _gather(m, m.iovecs(iovs, n), _room_at(io, f, offset))
    m.u32(nwritten, _write_at(io, f, data, offset, positional=True))
    return SUCCESS


def fd_read(caller: wt.Caller, fd: int, iovs: int, n: int, nread: int) -> int:
    io, m = current_io(), memory(caller)
    vecs = m.iovecs(iovs, n)
    want = min(sum(ln for _, ln in vecs), MAX_READ_BYTES)  # a short read past it, as POSIX allows
    if fd == 0:
        data = io.read_stdin(want)
    else:
        f = lookup(io, fd, "file", "dir")
        if f.kind == "dir":
            return EISDIR
        data = os.read(f.host_fd, want)
    _scatter(m, vecs, data)
    m.u32(nread, len(data))
    return SUCCESS


def _scatter(m: Mem, vecs: list[tuple[int, int]], data: bytes) -> None:
    off = 0
    for p, ln in vecs:
        if off >= len(data):
            break
        chunk = data[off : off + ln]
        m.write(p, chunk)
        off += len(chunk)


def fd_pread(caller: wt.Caller, fd: int, iovs: int, n: int, offset: int, nread: int) -> int:
    io, m = current_io(), memory(caller)
    f = lookup(io, fd, "file")
    vecs = m.iovecs(iovs, n)
    data = os.pread(f.host_fd, min(sum(ln for _, ln in vecs), MAX_READ_BYTES), offset)
    _scatter(m, vecs, data)
    m.u32(nread, len(data))
    return SUCCESS


def fd_seek(caller: wt.Caller, fd: int, offset: int, whence: int, out: int) -> int:
    io = current_io()
    if fd in (0, 1, 2):
        return ESPIPE
    f = lookup(io, fd, "file")
    if whence not in (0, 1, 2):
        return EINVAL
    pos = os.lseek(f.host_fd, offset, (os.SEEK_SET, os.SEEK_CUR, os.SEEK_END)[whence])
    memory(caller).u64(out, pos)
    return SUCCESS


def fd_tell(caller: wt.Caller, fd: int, out: int) -> int:
    f = lookup(current_io(), fd, "file")
    memory(caller).u64(out, os.lseek(f.host_fd, 0, os.SEEK_CUR))
    return SUCCESS


def fd_close(caller: wt.Caller, fd: int) -> int:
    io = current_io()
    f = io.fds.pop(fd, None)
    if f is None:
        return EBADF
    if f.host_fd >= 0:
        os.close(f.host_fd)
    return SUCCESS


def fd_fdstat_get(caller: wt.Caller, fd: int, out: int) -> int:
    io = current_io()
    f = lookup(io, fd)
    if f.kind == "stdio":
        ft, flags, rights = FT_CHAR, 0, STDIO_RIGHTS
    elif f.kind == "dir":
        ft, flags, rights = FT_DIR, 0, ALL_RIGHTS
    else:
        ft, flags, rights = FT_REG, FDFLAG_APPEND if f.append else 0, ALL_RIGHTS
    memory(caller).write(out, struct.pack("<BxHxxxxQQ", ft, flags, rights, ALL_RIGHTS))
    return SUCCESS


def fd_fdstat_set_flags(caller: wt.Caller, fd: int, flags: int) -> int:
    f = lookup(current_io(), fd)
    if f.kind == "file":
        f.append = bool(flags & FDFLAG_APPEND)
    return SUCCESS


def fd_filestat_get(caller: wt.Caller, fd: int, out: int) -> int:
    f = lookup(current_io(), fd)
    if f.kind == "stdio":
        memory(caller).write(out, struct.pack("<QQBxxxxxxxQQQQQ", 0, 0, FT_CHAR, 1, 0, 0, 0, 0))
        return SUCCESS
    memory(caller).write(out, filestat(os.fstat(f.host_fd)))
    return SUCCESS


def fd_filestat_set_size(caller: wt.Caller, fd: int, size: int) -> int:
    io = current_io()
    f = lookup(io, fd, "file")
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
    io = current_io()
    f = lookup(io, fd, "file")
    if not f.writable:
        return EBADF
    old = os.fstat(f.host_fd).st_size
    new = offset + length
    if new > old:
        if not io.quota.grow(new - old):
            return ENOSPC
        os.ftruncate(f.host_fd, new)
    return SUCCESS


def set_times(fd_or_name: Any, dir_fd: int | None, atim: int, mtim: int, flags: int) -> None:
    st = os.stat(fd_or_name, dir_fd=dir_fd, follow_symlinks=False) if dir_fd is not None else os.fstat(fd_or_name)
    now = time.time_ns()
    a = now if flags & 2 else (atim if flags & 1 else st.st_atime_ns)
    m = now if flags & 8 else (mtim if flags & 4 else st.st_mtime_ns)
    if dir_fd is not None:
        os.utime(fd_or_name, ns=(a, m), dir_fd=dir_fd, follow_symlinks=False)
    else:
        os.utime(fd_or_name, ns=(a, m))


def fd_filestat_set_times(caller: wt.Caller, fd: int, atim: int, mtim: int, flags: int) -> int:
    f = lookup(current_io(), fd, "file", "dir")
    if not (f.grant and f.grant.writable):
        return EROFS
    set_times(f.host_fd, None, atim, mtim, flags)
    return SUCCESS


def fd_noop(caller: wt.Caller, fd: int, *_: int) -> int:
    lookup(current_io(), fd)
    return SUCCESS


def fd_prestat_get(caller: wt.Caller, fd: int, out: int) -> int:
    f = current_io().fds.get(fd)
    if f is None or f.preopen is None:
        return EBADF
    memory(caller).write(out, struct.pack("<BxxxI", 0, len(f.preopen.encode())))
    return SUCCESS


def fd_prestat_dir_name(caller: wt.Caller, fd: int, buf: int, n: int) -> int:
    f = current_io().fds.get(fd)
    if f is None or f.preopen is None:
        return EBADF
    name = f.preopen.encode()
    if n < len(name):
        return EINVAL
    memory(caller).write(buf, name)
    return SUCCESS


def fd_readdir(caller: wt.Caller, fd: int, buf: int, buf_len: int, cookie: int, used: int) -> int:
    io, m = current_io(), memory(caller)
    f = lookup(io, fd, "dir")
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
