"""Host folders a guest may see (grants), safe path resolution inside them, and the disk quota.

Every guest path is resolved lexically inside its grant (``..`` never climbs out) and then opened
one component at a time with ``O_NOFOLLOW``: a symlink is never followed, whoever made it. Guests
cannot make symlinks or hard links at all. The quota counts the logical size of every regular file
and every entry across the writable grants together.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field

from .errors import WasmRunnerError

__all__ = ["DiskQuota", "Grant", "GuestPathError", "collect_files", "normalize", "open_dir"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class GuestPathError(WasmRunnerError, OSError):
    """A guest path that cannot be resolved; ``wasi_errno`` is the errno the guest sees."""

    def __init__(self, wasi_errno: int, message: str):
        super().__init__(message)
        self.wasi_errno = wasi_errno


@dataclass
class Grant:
    """A host folder shown to the guest at ``guest_path``; ``root_fd`` is held open for the run."""

    guest_path: str
    host_path: str
    writable: bool
    root_fd: int = -1

    def open(self) -> None:
        self.root_fd = os.open(self.host_path, _DIR_FLAGS)

    def close(self) -> None:
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1


def normalize(base: tuple[str, ...], path: str) -> tuple[str, ...]:
    """Lexically join ``path`` onto ``base`` (components inside a grant). ``..`` may not leave it."""
    if "\x00" in path:
        raise GuestPathError(28, "NUL in path")  # EINVAL
    if path.startswith("/"):
        raise GuestPathError(76, "absolute path")  # ENOTCAPABLE
    parts = list(base)
    for comp in path.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if not parts:
                raise GuestPathError(76, "path leaves its grant")  # ENOTCAPABLE
            parts.pop()
        else:
            parts.append(comp)
    return tuple(parts)


def open_dir(grant: Grant, parts: tuple[str, ...]) -> int:
    """A new fd for the directory ``parts`` inside ``grant``, following no symlink on the way."""
    fd = os.dup(grant.root_fd)
    try:
        for comp in parts:
            nxt = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass
class DiskQuota:
    """Bytes and entries used across all writable grants, checked before each growth.

    ``used_bytes`` is the sum of regular files' logical sizes, so sparse files count in full and
    the host disk holds at most ``max_bytes`` of file data plus filesystem block rounding (at most
    one block, 4 KiB, per entry: ``max_files`` x 4 KiB of slack).
    """

    max_bytes: int
    max_files: int
    used_bytes: int = 0
    used_files: int = 0
    refused: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count_existing(self, grant: Grant) -> None:
        """Add what a writable grant already holds (uploads, a non-empty /out)."""
        stack = [grant.root_fd]
        owned: list[int] = []
        try:
            while stack:
                dfd = stack.pop()
                for name in os.listdir(dfd):
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    self.used_files += 1
                    if stat.S_ISREG(st.st_mode):
                        self.used_bytes += st.st_size
                    elif stat.S_ISDIR(st.st_mode):
                        sub = os.open(name, _DIR_FLAGS, dir_fd=dfd)
                        owned.append(sub)
                        stack.append(sub)
        finally:
            for fd in owned:
                os.close(fd)

    def grow(self, nbytes: int) -> bool:
        """Reserve ``nbytes`` more file data; False (and ``refused`` set) when it would not fit."""
        if nbytes <= 0:
            self.used_bytes += nbytes
            return True
        with self.lock:
            if self.used_bytes + nbytes > self.max_bytes:
                self.refused = True
                return False
            self.used_bytes += nbytes
            return True

    def room(self) -> int:
        return max(0, self.max_bytes - self.used_bytes)

    def add_entry(self) -> bool:
        with self.lock:
            if self.used_files + 1 > self.max_files:
                self.refused = True
                return False
            self.used_files += 1
            return True

    def remove_entry(self, size: int) -> None:
        with self.lock:
            self.used_files = max(0, self.used_files - 1)
            self.used_bytes = max(0, self.used_bytes - size)


def collect_files(grant: Grant, max_total: int) -> list[tuple[str, bytes]]:
    """Regular files under a grant as ``(guest path, content)``, never following a symlink.

    Files are read through fds opened with ``O_NOFOLLOW`` relative to their directory, so a link
    swapped in by anyone cannot redirect a read outside the grant. At most ``max_total`` bytes.
    """
    found: list[tuple[str, bytes]] = []
    total = 0
    stack: list[tuple[int, str]] = [(os.dup(grant.root_fd), grant.guest_path.rstrip("/"))]
    while stack:
        dfd, prefix = stack.pop()
        try:
            for name in sorted(os.listdir(dfd)):
                try:
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    try:
                        stack.append((os.open(name, _DIR_FLAGS, dir_fd=dfd), f"{prefix}/{name}"))
                    except OSError:
                        continue
                elif stat.S_ISREG(st.st_mode):
                    try:
                        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
                    except OSError:
                        continue
                    try:
                        if not stat.S_ISREG(os.fstat(fd).st_mode):
                            continue
                        data = _read_all(fd, max_total - total + 1)
                    finally:
                        os.close(fd)
                    if total + len(data) > max_total:
                        continue
                    total += len(data)
                    found.append((f"{prefix}/{name}", data))
        finally:
            os.close(dfd)
    found.sort()
    return found


def _read_all(fd: int, limit: int) -> bytes:
    chunks = []
    got = 0
    while got < limit:
        b = os.read(fd, min(1 << 20, limit - got))
        if not b:
            break
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)
