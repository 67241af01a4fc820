"""WASI host calls on paths. Every path is resolved inside the grant of its directory fd
(``grants.normalize``: no ``..`` above the grant, no absolute paths) and opened beneath the grant's
root fd without following symlinks, so nothing outside a grant's folder is reachable; writes to a
read-only grant are ``EROFS``; new entries and growth are counted against the disk quota.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

import wasmtime as wt

from ..grants import GuestPathError, normalize, open_dir
from .abi import (
    EACCES, EEXIST, EISDIR, ELOOP, EMFILE, ENOENT, ENOSPC, ENOTDIR, EPERM, EROFS, EXDEV, EINVAL,
    FDFLAG_APPEND, O_CREAT, O_DIRECTORY, O_EXCL, O_TRUNC, RIGHT_FD_READ, SUCCESS, WRITE_RIGHTS, Mem,
    filestat,
)
from .fd_calls import set_times
from .fdtable import MAX_FDS, Fd, add_fd, lookup
from .guestio import GuestIO, current_io, memory

__all__ = [
    "path_create_directory", "path_filestat_get", "path_filestat_set_times", "path_link",
    "path_open", "path_readlink", "path_remove_directory", "path_rename", "path_symlink",
    "path_unlink_file", "resolve",
]


def resolve(io: GuestIO, m: Mem, dirfd: int, ptr: int, n: int) -> tuple[Fd, tuple[str, ...]]:
    d = lookup(io, dirfd, "dir")
    return d, normalize(d.parts, m.string(ptr, n))


def _parent(d: Fd, parts: tuple[str, ...]) -> tuple[int, str]:
    """An fd of the parent directory of ``parts`` and the last name; ``parts`` is not the root."""
    if not parts:
        raise GuestPathError(EPERM, "the grant's root itself")
    assert d.grant is not None
    return open_dir(d.grant, parts[:-1]), parts[-1]


def path_open(
    caller: wt.Caller, dirfd: int, lookup: int, ptr: int, n: int, oflags: int,
    rights: int, rights_inh: int, fdflags: int, out: int,
) -> int:
    io, m = current_io(), memory(caller)
    d, parts = resolve(io, m, dirfd, ptr, n)
    grant = d.grant
    assert grant is not None
    write = bool(rights & WRITE_RIGHTS) or bool(oflags & (O_CREAT | O_TRUNC))
    if write and not grant.writable:
        return EROFS
    if len(io.fds) >= MAX_FDS:
        return EMFILE
    if not parts:  # the grant's root
        if write:
            return EISDIR
        hfd = open_dir(grant, ())
        return add_fd(io, m, out, Fd("dir", hfd, grant, parts))
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
            return add_fd(io, m, out, Fd("dir", hfd, grant, parts))
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
        return add_fd(io, m, out, Fd("file", hfd, grant, parts, bool(fdflags & FDFLAG_APPEND), write))
    finally:
        os.close(pfd)


def path_filestat_get(caller: wt.Caller, dirfd: int, lookup: int, ptr: int, n: int, out: int) -> int:
    io, m = current_io(), memory(caller)
    d, parts = resolve(io, m, dirfd, ptr, n)
    assert d.grant is not None
    if not parts:
        st = os.fstat(d.grant.root_fd)
    else:
        pfd, name = _parent(d, parts)
        try:
            st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        finally:
            os.close(pfd)
    m.write(out, filestat(st))
    return SUCCESS


@contextmanager
def _in_parent(io: GuestIO, m: Mem, dirfd: int, ptr: int, n: int, *, write: bool) -> Iterator[tuple[int, str]]:
    """The parent folder's fd and the last name of a guest path (refusing writes to read-only
    grants with EROFS); the fd is closed afterwards."""
    d, parts = resolve(io, m, dirfd, ptr, n)
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
    with _in_parent(current_io(), memory(caller), dirfd, ptr, n, write=True) as (pfd, name):
        set_times(name, pfd, atim, mtim, flags)
    return SUCCESS


def path_create_directory(caller: wt.Caller, dirfd: int, ptr: int, n: int) -> int:
    io = current_io()
    with _in_parent(io, memory(caller), dirfd, ptr, n, write=True) as (pfd, name):
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
    io = current_io()
    with _in_parent(io, memory(caller), dirfd, ptr, n, write=True) as (pfd, name):
        os.rmdir(name, dir_fd=pfd)
        io.quota.remove_entry(0)
    return SUCCESS


def path_unlink_file(caller: wt.Caller, dirfd: int, ptr: int, n: int) -> int:
    io = current_io()
    with _in_parent(io, memory(caller), dirfd, ptr, n, write=True) as (pfd, name):
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            return EISDIR
        os.unlink(name, dir_fd=pfd)
        io.quota.remove_entry(st.st_size if stat.S_ISREG(st.st_mode) else 0)
    return SUCCESS


def path_rename(caller: wt.Caller, fd1: int, p1: int, n1: int, fd2: int, p2: int, n2: int) -> int:
    io, m = current_io(), memory(caller)
    d1, parts1 = resolve(io, m, fd1, p1, n1)
    d2, parts2 = resolve(io, m, fd2, p2, n2)
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
    m = memory(caller)
    with _in_parent(current_io(), m, dirfd, ptr, n, write=False) as (pfd, name):
        target = os.readlink(name, dir_fd=pfd).encode()[:buf_len]
    m.write(buf, target)
    m.u32(used, len(target))
    return SUCCESS


def path_symlink(caller: wt.Caller, *_: int) -> int:
    return EPERM  # guests never make links: nothing can point out of a grant


def path_link(caller: wt.Caller, *_: int) -> int:
    return EPERM
