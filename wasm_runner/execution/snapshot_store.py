"""Where paused sessions' snapshots are kept: one folder, one sealed file per session.

Layout::

    <root>/<writer>.alive            held (flock) by the process that writes <root>/<writer>/
    <root>/<writer>/<session id>.snap the session's last snapshot (sealed: ``sandbox.sealing``)

``writer`` is the process that wrote the files (the replica id with several replicas, else a
random id per process). Every write is atomic (a temporary file in the same folder, then renamed over
the old one): a reader sees the old snapshot or the new one, never half of one. A
folder shared by replicas (a Kubernetes volume; ``wasm-runner cluster`` gives its replicas one)
lets another replica resume a session whose writer died (``read(session_id, writer)``).

Bounds: each tenant's files of this writer may take at most ``key_budget_bytes`` (a full budget,
and a full disk, raise ``SnapshotStoreFull``: the session then stays live, unsaved). Files whose
session no longer exists are swept (``sweep``): this writer's files of sessions it does not
hold, and the files of a writer whose process is gone (its ``.alive`` lock is free) unless
``keep`` says another replica may still resume them.

The store only moves bytes; the snapshot authenticates itself when it is opened.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WasmRunnerError

__all__ = ["MAX_STORED_BYTES", "Pausing", "SnapshotStore", "SnapshotStoreFull"]

MAX_STORED_BYTES = 512 << 20  # a stored snapshot, at most (sealing.MAX_SNAPSHOT_BYTES)
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # session ids and writer ids
_SUFFIX = ".snap"


class SnapshotStoreFull(WasmRunnerError):
    """A snapshot that does not fit: ``code`` is ``snapshot_budget`` (the key's disk budget) or
    ``snapshot_disk_full`` (the store's disk)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _check(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"not a valid {what}: {name!r}")
    return name


@dataclass(frozen=True)
class Pausing:
    """How a session store pauses idle sessions: its ``store``, after how many idle seconds a
    session is paused (``after_seconds``), how long a paused session is kept after its last use
    (``lifetime_seconds``), the ``secret`` its snapshots are sealed with (owner: the tenant), and
    ``keep``: which snapshots of dead writers another replica may still resume."""

    store: SnapshotStore
    after_seconds: float = 120.0
    lifetime_seconds: float = 86400.0
    secret: bytes | None = field(default=None, repr=False)
    save_after_seconds: float = 0.3  # a session is saved this long after a call (if none follows)
    # which of (writer, session id) of dead writers another replica may still resume (the
    # session directory); None: none (one host)
    keep: Callable[[list[tuple[str, str]]], Awaitable[set[tuple[str, str]]]] | None = None


class SnapshotStore:
    """One process's view of the snapshot folder ``root`` (made 0700 when missing)."""

    def __init__(self, root: str | os.PathLike[str], *, writer: str | None = None,
                 key_budget_bytes: int = 4 << 30) -> None:
        self.root = Path(root)
        self.writer = _check(writer or secrets.token_hex(8), "writer id")
        self.key_budget_bytes = key_budget_bytes
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(self.root)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise WasmRunnerError(f"the snapshot folder {self.root} is not a folder owned by this user")
        self.folder = self.root / self.writer
        self.folder.mkdir(mode=0o700, exist_ok=True)
        # held while this process lives: a free lock means the writer is gone (``sweep``)
        self._alive = os.open(self.root / f"{self.writer}.alive",
                              os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._alive, fcntl.LOCK_EX)
        self._sizes: dict[str, tuple[str, int]] = {}  # session id -> (tenant, bytes) of this writer

    # -- one session's file -----------------------------------------------------------------
    def path(self, session_id: str, writer: str | None = None) -> Path:
        return self.root / _check(writer or self.writer, "writer id") / (_check(session_id, "session id") + _SUFFIX)

    def used(self, tenant: str) -> int:
        """Bytes this writer holds for ``tenant``."""
        return sum(n for t, n in self._sizes.values() if t == tenant)

    @property
    def total_bytes(self) -> int:
        return sum(n for _, n in self._sizes.values())

    def __len__(self) -> int:
        return len(self._sizes)

    def put(self, session_id: str, tenant: str, blob: bytes) -> int:
        """Store ``blob`` as ``session_id``'s snapshot (replacing the previous one), atomically;
        returns its size. Raises ``SnapshotStoreFull`` (nothing changed) when it does not fit."""
        target = self.path(session_id)
        size = len(blob)
        if size > MAX_STORED_BYTES:
            raise SnapshotStoreFull("snapshot_budget", f"the snapshot is {size >> 20} MiB, over the "
                                                       f"{MAX_STORED_BYTES >> 20} MiB one may have")
        old = self._sizes.get(session_id, (tenant, 0))[1]
        if self.used(tenant) - old + size > self.key_budget_bytes:
            raise SnapshotStoreFull(
                "snapshot_budget",
                f"this key's paused sessions would take {(self.used(tenant) - old + size) >> 20} MiB, "
                f"over its snapshot disk budget of {self.key_budget_bytes >> 20} MiB; the session "
                "stays live (close sessions you no longer need)",
            )
        tmp = target.with_name(f".{session_id}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:  # no fsync: a process that dies keeps what it wrote; a torn file fails its MAC
                view = memoryview(blob)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise SnapshotStoreFull(
                    "snapshot_disk_full",
                    "the disk that keeps paused sessions is full; the session stays live",
                ) from None
            raise
        self._sizes[session_id] = (tenant, size)
        return size

    def read(self, session_id: str, writer: str | None = None) -> bytes:
        """The stored snapshot of ``session_id`` (written by ``writer``, default this process);
        ``FileNotFoundError`` when there is none."""
        fd = os.open(self.path(session_id, writer), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_STORED_BYTES + 1)
        if len(data) > MAX_STORED_BYTES:
            raise ValueError("the stored snapshot is larger than a snapshot may be")
        return data

    def adopt(self, session_id: str, tenant: str, writer: str) -> None:
        """Take over ``writer``'s snapshot of ``session_id`` (that writer is gone and this process
        resumed the session): moved into this writer's folder, counted in its budget."""
        if writer == self.writer:
            return
        source, target = self.path(session_id, writer), self.path(session_id)
        try:
            os.replace(source, target)
        except FileNotFoundError:
            return
        with contextlib.suppress(OSError):
            self._sizes[session_id] = (tenant, os.lstat(target).st_size)

    def delete(self, session_id: str, writer: str | None = None) -> None:
        """Remove ``session_id``'s snapshot (missing: nothing to do)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(session_id, writer))
        if writer in (None, self.writer):
            self._sizes.pop(session_id, None)

    # -- orphans ----------------------------------------------------------------------------
    def _writer_alive(self, writer: str) -> bool:
        try:
            fd = os.open(self.root / f"{writer}.alive", os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops a lock we took
        return False

    def dead_writer_files(self) -> list[tuple[str, str]]:
        """(writer, session id) of every snapshot whose writer process is gone."""
        found: list[tuple[str, str]] = []
        try:
            folders = [p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink()]
        except OSError:
            return found
        for folder in folders:
            if folder.name == self.writer or not _NAME.fullmatch(folder.name) or self._writer_alive(folder.name):
                continue
            with contextlib.suppress(OSError):
                found += [(folder.name, n[: -len(_SUFFIX)]) for n in os.listdir(folder)
                          if n.endswith(_SUFFIX) and _NAME.fullmatch(n[: -len(_SUFFIX)])]
        return found

    def sweep(self, holds: Callable[[str], bool],
              keep: Callable[[str, str], bool] | None = None) -> int:
        """Remove orphans; returns how many files went. This writer's files (and leftover
        temporary files) of sessions ``holds(session_id)`` denies; a dead writer's files unless
        ``keep(writer, session_id)`` (another replica may resume them), and its folder and lock
        once empty. Live writers' files are theirs to sweep."""
        removed = 0
        try:
            folders = [p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink()]
        except OSError:
            return 0
        for folder in folders:
            writer = folder.name
            if not _NAME.fullmatch(writer):
                continue
            mine = writer == self.writer
            if not mine and self._writer_alive(writer):
                continue
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                session_id = name[: -len(_SUFFIX)] if name.endswith(_SUFFIX) else ""
                if name.startswith(".") and name.endswith(".tmp"):
                    session_id = name[1:].split(".")[0]
                    if mine and holds(session_id):
                        continue  # being written now
                elif not _NAME.fullmatch(session_id):
                    continue
                elif mine and holds(session_id):
                    continue
                elif not mine and keep is not None and keep(writer, session_id):
                    continue
                with contextlib.suppress(OSError):
                    os.unlink(folder / name)
                    removed += 1
                if mine:
                    self._sizes.pop(session_id, None)
            if not mine:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty
                    os.unlink(self.root / f"{writer}.alive")
        return removed

    def close(self) -> None:
        """Let go of the writer's lock (its files stay for ``sweep``)."""
        fd, self._alive = self._alive, -1
        if fd >= 0:
            os.close(fd)
