"""The fd table of one guest: what each guest fd number stands for on the host.

The table only ever holds stdio, the grants' preopened folders and what was opened beneath them;
a lookup of anything else is ``EBADF``, a preopen hidden for this run is ``ENOENT``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol

from ..grants import Grant, GuestPathError
from .abi import EBADF, ENOENT, Fault, Mem, SUCCESS

__all__ = ["Fd", "FdHolder", "MAX_FDS", "add_fd", "initial_table", "lookup"]

MAX_FDS = 512


@dataclass
class Fd:
    kind: str  # "stdio", "dir", "file", "hidden"
    host_fd: int = -1
    grant: Grant | None = None
    parts: tuple[str, ...] = ()
    append: bool = False
    writable: bool = False
    preopen: str | None = None  # guest path, for preopened dirs
    listing: list[tuple[str, int, int]] | None = None  # readdir cache: (name, ino, filetype)


class FdHolder(Protocol):
    """Whoever holds a guest's table (``guestio.GuestIO``): its entries and the next free number."""

    fds: dict[int, Fd]
    next_fd: int


def initial_table(grants: list[Grant]) -> dict[int, Fd]:
    """fds 0-2 are stdio, then one preopened folder per grant (a dup of its root fd)."""
    fds: dict[int, Fd] = {0: Fd("stdio"), 1: Fd("stdio"), 2: Fd("stdio")}
    for g in grants:
        fds[len(fds)] = Fd("dir", os.dup(g.root_fd), g, (), preopen=g.guest_path)
    return fds


def lookup(io: FdHolder, fd: int, *kinds: str) -> Fd:
    """The entry of ``fd`` when it is one of ``kinds`` (any kind when none given)."""
    f = io.fds.get(fd)
    if f is not None and f.kind == "hidden":
        raise GuestPathError(ENOENT, "not granted to this run")
    if f is None or (kinds and f.kind not in kinds):
        raise GuestPathError(EBADF, "bad fd")
    return f


def add_fd(io: FdHolder, m: Mem, out: int, f: Fd) -> int:
    """Enter ``f`` under the next fd number and write that number to ``out``; on a bad ``out``
    the entry is removed and its host fd closed again."""
    fd = io.next_fd
    io.next_fd += 1
    io.fds[fd] = f
    try:
        m.u32(out, fd)
    except Fault:
        io.fds.pop(fd)
        os.close(f.host_fd)
        raise
    return SUCCESS
