"""The private cache folder: compiled modules, the stdlib folder, calibration.

``$WASM_RUNNER_CACHE`` when set, else ``$XDG_CACHE_HOME/wasm-runner``, else ``~/.cache/wasm-runner``.
Compiled modules are native code wasmtime runs as found, so the folder must be ours and 0700:
one that is not is refused rather than used.

``build_lock(path)`` serialises the making of one cached file across processes (replicas sharing
a cache folder): the second waits for the first, then finds the file made.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from .environment import CACHE
from .errors import WasmRunnerError

__all__ = ["CacheUnsafe", "build_lock", "cache_dir", "private_file_ok"]


class CacheUnsafe(WasmRunnerError, RuntimeError):
    """The cache folder is not private to this user."""


def cache_dir() -> Path:
    env = CACHE.text()
    if env:
        base = Path(env)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "wasm-runner"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise CacheUnsafe(f"{base} is not a directory owned by this user")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(base, 0o700)
    return base


def private_file_ok(path: Path) -> bool:
    """True when ``path`` is a regular file (not a link) owned by us and not writable by others."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not (st.st_mode & 0o022)


@contextlib.contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """Hold the lock of the cached file ``path`` (an advisory ``flock`` on ``.NAME.lock`` beside
    it): one process at a time makes it. The lock goes with the process if it dies."""
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
