"""The paused-session store (``PausedStore``): where paused sessions' states are kept, and
sessions saved under a handle: one folder, one sealed file per session.

Layout::

    <root>/<writer>.alive            held (flock) by the process that writes <root>/<writer>/
    <root>/<writer>/<session id>.snap the session's last snapshot (sealed: ``sandbox.sealing``);
                                     for a session with private folders (an MCP tool session)
                                     a short frame, the snapshot and its folders' files (sealed:
                                     ``folders``), one file so the two always match
    <root>/.saved/<key>/<handle>.saved a session saved on purpose (``save_state``): a short
                                     header (its profile, runtime, expiry), its sealed snapshot
                                     and, for a session with private folders, their files (sealed)
    <root>/.usage/<key>/<writer>     the bytes of <key>'s paused sessions in <writer>'s folder
    <root>/.usage/<key>.lock         held (flock) while a write for <key> checks its budget

``<key>`` is a hash of the tenant that saved it: a handle is found only in its own key's folder,
so another key cannot read, resume or delete it. Saved states are in a folder every replica
reads, last ``lifetime`` seconds (``saved_lifetime``) and count in their key's budget with its
paused sessions.

``writer`` is the process that wrote the files (the replica id with several replicas, else a
random id per process). Every write is atomic (a temporary file in the same folder, then renamed over
the old one): a reader sees the old snapshot or the new one, never half of one. A
folder shared by replicas (a Kubernetes volume; ``wasm-runner cluster`` gives its replicas one)
lets another replica resume a session whose writer died (``read(session_id, writer)``).

Bounds: each tenant's files may take at most ``key_budget_bytes`` in all: its paused sessions in
every writer's folder (each writer keeps its own count per key in ``.usage``, so the replicas sharing
the folder share one budget per key) and its saved states. The check and the write happen under the
key's lock (a ``flock`` every process sharing the folder takes), so two saves at once never both fit
a budget that has room for one. A full budget, and a full disk, raise ``PausedStoreFull``: the
session then stays live, unsaved. The count of a writer that died stays until its folder is swept
(a budget counts its files until then). Files whose
session no longer exists are swept (``sweep``): this writer's files of sessions it does not
hold, and the files of a writer whose process is gone (its ``.alive`` lock is free) unless
``keep`` says another replica may still resume them.

The store only moves bytes; the snapshot authenticates itself when it is opened.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import struct
import threading
import time
from collections.abc import Iterator
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WasmRunnerError

__all__ = [
    "MAX_STORED_BYTES", "PausedStore", "PausedStoreFull", "Pausing", "SavedState", "SavedStateMissing",
    "missing_saved", "paused_store",
]  # fmt: skip

MAX_STORED_BYTES = 512 << 20  # a stored snapshot, at most (sealing.MAX_SNAPSHOT_BYTES)
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # session ids and writer ids
_SUFFIX = ".snap"
_SAVED = ".saved"  # the folder of saved states (a dot: never taken for a writer's folder)
_USAGE = ".usage"  # each writer's bytes per key, and the keys' locks
_SAVED_SUFFIX = ".saved"
_SAVED_HEAD = struct.Struct("<8sIQ")  # magic, header length, snapshot length
_SAVED_MAGIC = b"WRSAVED1"
MAX_SAVED_HEADER = 4096
_FOLDERS_HEAD = struct.Struct("<8sQ")  # magic, snapshot length: a snapshot stored with its folders
_FOLDERS_MAGIC = b"WRSNAPF1"  # never a sealed snapshot's start (``sealing.MAGIC``)


class PausedStoreFull(WasmRunnerError):
    """A snapshot that does not fit: ``code`` is ``snapshot_budget`` (the key's disk budget) or
    ``snapshot_disk_full`` (the store's disk)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class SavedStateMissing(WasmRunnerError, LookupError):
    """No saved state under this handle for this key: ``reason`` is ``expired`` (its lifetime
    passed; it is now deleted) or ``unknown`` (never saved, another key's, or deleted)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class SavedState:
    """A saved session's handle and what its header records (``profile``, ``runtime``: what it
    was opened under; ``created_at`` and ``expires_at``: wall-clock seconds), its ``size`` on disk;
    ``snapshot`` and ``files`` (the sealed private folders, or None) when it was read."""

    handle: str
    profile: str
    runtime: str
    created_at: float
    expires_at: float
    size: int
    snapshot: bytes = field(default=b"", repr=False)
    files: bytes | None = field(default=None, repr=False)

    def describe(self, now: float | None = None) -> dict[str, object]:
        now = time.time() if now is None else now
        return {"saved_id": self.handle, "profile": self.profile, "runtime": self.runtime,
                "bytes": self.size, "expires_in": round(max(0.0, self.expires_at - now), 3)}  # fmt: skip


def _tenant_folder(tenant: str) -> str:
    """The name a key's folders have in the store (a hash: no key name on disk)."""
    return hashlib.sha256(b"wasm-runner saved sessions\x00" + tenant.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _check(name: str, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"not a valid {what}: {name!r}")
    return name


@dataclass(frozen=True)
class Pausing:
    """How a session store pauses idle sessions: its ``store``, after how many idle seconds a
    session is paused (``after_seconds``), how long a paused session is kept after its last use
    (``lifetime_seconds``), how many of one key's sessions may be paused to make room for its
    new ones (``per_key``), the ``secret`` its snapshots are sealed with (owner: the tenant), and
    ``keep``: which snapshots of dead writers another replica may still resume."""

    store: PausedStore
    after_seconds: float = 120.0
    lifetime_seconds: float = 86400.0
    # the most sessions of one key this store keeps paused to make room for its new ones
    # (``PausingSessions._pause_one``); their bytes are bounded by ``store.key_budget_bytes``
    per_key: int = 512
    secret: bytes | None = field(default=None, repr=False)
    save_after_seconds: float = 0.3  # a session is saved this long after a call (if none follows)
    save_every_seconds: float = 5.0  # ...and right after a call when its last save is older
    # which of (writer, session id) of dead writers another replica may still resume (the
    # session directory); None: none (one host)
    keep: Callable[[list[tuple[str, str]]], Awaitable[set[tuple[str, str]]]] | None = None


class PausedStore:
    """The paused-session store: one process's view of its folder ``root`` (made 0700 when missing)."""

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
        self._usage = self.root / _USAGE
        self._usage.mkdir(mode=0o700, exist_ok=True)
        self._thread_lock = threading.Lock()  # this process's threads (a flock is per open file)
        for ledger in self._usage.glob(f"*/{self.writer}"):  # a previous life's counts
            with contextlib.suppress(OSError):
                ledger.unlink()

    # -- one session's file -----------------------------------------------------------------
    def path(self, session_id: str, writer: str | None = None) -> Path:
        return self.root / _check(writer or self.writer, "writer id") / (_check(session_id, "session id") + _SUFFIX)

    def used(self, tenant: str) -> int:
        """Bytes counted in ``tenant``'s budget: its paused sessions' snapshots in every writer's
        folder (this writer's own count, the others' from their ``.usage`` files) and its saved
        states (``save_state``)."""
        return self._mine(tenant) + self._others(tenant) + self._saved_bytes(tenant)

    def _mine(self, tenant: str) -> int:
        return sum(n for t, n in self._sizes.values() if t == tenant)

    def _others(self, tenant: str) -> int:
        """What the other writers last recorded of ``tenant``'s paused sessions."""
        total = 0
        with contextlib.suppress(OSError), os.scandir(self._usage / _tenant_folder(tenant)) as entries:
            for entry in entries:
                if entry.name != self.writer and _NAME.fullmatch(entry.name):
                    total += _read_count(entry.path)
        return total

    @contextlib.contextmanager
    def _key_lock(self, tenant: str) -> Iterator[None]:
        """Held while a write for ``tenant`` checks its budget and changes its counts: this
        process's threads and every other process sharing the folder wait."""
        with self._thread_lock:
            path = self._usage / f"{_tenant_folder(tenant)}.lock"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # drops the flock

    def _record(self, tenant: str) -> None:
        """Under ``tenant``'s lock: this writer's count of its paused sessions, for the others."""
        folder = self._usage / _tenant_folder(tenant)
        mine = self._mine(tenant)
        # best effort: a count not written (a full disk) leaves the others' view of it stale
        with contextlib.suppress(OSError, PausedStoreFull):
            if not mine:
                os.unlink(folder / self.writer)
                return
            folder.mkdir(mode=0o700, exist_ok=True)
            _write_atomic(folder / self.writer, self.writer, (str(mine).encode(),))

    @property
    def total_bytes(self) -> int:
        return sum(n for _, n in self._sizes.values())

    def __len__(self) -> int:
        return len(self._sizes)

    def put(self, session_id: str, tenant: str, blob: bytes, folders: bytes | None = None) -> int:
        """Store ``blob`` as ``session_id``'s snapshot (replacing the previous one), atomically,
        with ``folders`` (its private folders' files, sealed: ``folders``) in the same file;
        returns its size. Raises ``PausedStoreFull`` (nothing changed) when it does not fit."""
        target = self.path(session_id)
        parts = (blob,) if folders is None else (_FOLDERS_HEAD.pack(_FOLDERS_MAGIC, len(blob)), blob, folders)
        size = sum(len(p) for p in parts)
        if size > MAX_STORED_BYTES:
            raise PausedStoreFull("snapshot_budget", f"the snapshot is {size >> 20} MiB, over the "
                                                       f"{MAX_STORED_BYTES >> 20} MiB one may have")
        with self._key_lock(tenant):
            old = self._sizes.get(session_id, (tenant, 0))[1]
            would = self.used(tenant) - old + size
            if would > self.key_budget_bytes:
                raise PausedStoreFull(
                    "snapshot_budget",
                    f"this key's paused sessions would take {would >> 20} MiB, over its snapshot "
                    f"disk budget of {self.key_budget_bytes >> 20} MiB; the session stays live "
                    "(close sessions you no longer need)",
                )
            _write_atomic(target, session_id, parts)
            self._sizes[session_id] = (tenant, size)
            self._record(tenant)
        return size

    def read(self, session_id: str, writer: str | None = None) -> bytes:
        """The stored snapshot of ``session_id`` (written by ``writer``, default this process);
        ``FileNotFoundError`` when there is none."""
        return self.read_parts(session_id, writer)[0]

    def read_parts(self, session_id: str, writer: str | None = None) -> tuple[bytes, bytes | None]:
        """The stored snapshot of ``session_id`` and its private folders' files (None: it was
        stored without); ``FileNotFoundError`` when there is none."""
        fd = os.open(self.path(session_id, writer), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_STORED_BYTES + 1)
        if len(data) > MAX_STORED_BYTES:
            raise ValueError("the stored snapshot is larger than a snapshot may be")
        if not data.startswith(_FOLDERS_MAGIC):
            return data, None
        if len(data) < _FOLDERS_HEAD.size:
            raise ValueError("the stored snapshot is truncated")
        _, length = _FOLDERS_HEAD.unpack_from(data, 0)
        end = _FOLDERS_HEAD.size + length
        if end > len(data):
            raise ValueError("the stored snapshot is truncated")
        return data[_FOLDERS_HEAD.size:end], data[end:]

    def adopt(self, session_id: str, tenant: str, writer: str) -> None:
        """Take over ``writer``'s snapshot of ``session_id`` (that writer is gone and this process
        resumed the session): moved into this writer's folder, counted in its budget."""
        if writer == self.writer:
            return
        source, target = self.path(session_id, writer), self.path(session_id)
        with self._key_lock(tenant):
            try:
                os.replace(source, target)
            except FileNotFoundError:
                return
            with contextlib.suppress(OSError):
                size = os.lstat(target).st_size
                self._sizes[session_id] = (tenant, size)
                self._record(tenant)
                # no longer in a dead writer's folder: its count gives the bytes back (a live
                # writer that handed the session over counts its own: ``release``)
                theirs = self._usage / _tenant_folder(tenant) / writer
                if theirs.exists() and not self._writer_alive(writer):
                    left = max(0, _read_count(str(theirs)) - size)
                    with contextlib.suppress(PausedStoreFull):
                        _write_atomic(theirs, writer, (str(left).encode(),))

    def release(self, session_id: str) -> None:
        """No longer count ``session_id``'s file in this writer's budget (this process left the
        session to another replica, which adopts the file)."""
        self._forget(session_id)

    def delete(self, session_id: str, writer: str | None = None) -> None:
        """Remove ``session_id``'s snapshot (missing: nothing to do)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path(session_id, writer))
        if writer in (None, self.writer):
            self._forget(session_id)

    def _forget(self, session_id: str) -> None:
        """``session_id`` no longer counted in this writer's count of its key."""
        held = self._sizes.get(session_id)
        if held is not None:
            with self._key_lock(held[0]):
                if self._sizes.pop(session_id, None) is not None:
                    self._record(held[0])

    # -- saved states (a handle a face gives its caller) --------------------------------------
    def _saved_folder(self, tenant: str) -> Path:
        return self.root / _SAVED / _tenant_folder(tenant)

    def _saved_path(self, handle: str, tenant: str) -> Path:
        return self._saved_folder(tenant) / (_check(handle, "saved session id") + _SAVED_SUFFIX)

    def _saved_bytes(self, tenant: str) -> int:
        folder = self._saved_folder(tenant)
        total = 0
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        return total

    def save_state(self, tenant: str, snapshot: bytes, files: bytes | None, *, profile: str,
                   runtime: str, lifetime_seconds: float) -> SavedState:
        """Keep ``snapshot`` (and the sealed private folders ``files``) for ``tenant`` under a new
        handle for ``lifetime_seconds``. Raises ``PausedStoreFull`` (nothing kept) when it is
        over the key's budget or the disk is full."""
        now = time.time()
        head = json.dumps({"profile": profile, "runtime": runtime, "created_at": now,
                           "expires_at": now + lifetime_seconds}).encode()  # fmt: skip
        if len(head) > MAX_SAVED_HEADER:
            raise ValueError("a saved state's profile and runtime names are too long")
        parts = (_SAVED_HEAD.pack(_SAVED_MAGIC, len(head), len(snapshot)), head, snapshot, files or b"")
        size = sum(len(p) for p in parts)
        if size > MAX_STORED_BYTES:
            raise PausedStoreFull("snapshot_budget", f"the saved session is {size >> 20} MiB, over "
                                                       f"the {MAX_STORED_BYTES >> 20} MiB one may have")
        self._sweep_saved_folder(self._saved_folder(tenant), now)  # expired ones no longer count
        handle = "saved_" + secrets.token_urlsafe(18)
        with self._key_lock(tenant):
            would = self.used(tenant) + size
            if would > self.key_budget_bytes:
                raise PausedStoreFull(
                    "snapshot_budget",
                    f"this key's saved and paused sessions would take {would >> 20} MiB, over its "
                    f"snapshot disk budget of {self.key_budget_bytes >> 20} MiB; the session stays "
                    "live (delete saved sessions you no longer need)",
                )
            folder = self._saved_folder(tenant)
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            _write_atomic(self._saved_path(handle, tenant), handle, parts)
        return SavedState(handle, profile, runtime, now, now + lifetime_seconds, size)

    def load_state(self, handle: str, tenant: str) -> SavedState:
        """``tenant``'s saved state ``handle`` with its snapshot and files; ``SavedStateMissing``
        when there is none for this key (or it expired: then it is deleted)."""
        try:
            path = self._saved_path(handle, tenant)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except (ValueError, OSError):
            raise missing_saved(handle) from None
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_STORED_BYTES + 1)
        state = _parse_saved(handle, data)
        if state is None:
            raise missing_saved(handle)
        if state.expires_at <= time.time():
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise SavedStateMissing("expired", f"the saved session {handle} has expired (saved states "
                                               "are kept for a limited time) and is deleted")
        return state

    def delete_state(self, handle: str, tenant: str) -> bool:
        """Delete ``tenant``'s saved state ``handle``; False when this key has none by that handle."""
        try:
            os.unlink(self._saved_path(handle, tenant))
        except (ValueError, OSError):
            return False
        return True

    def _sweep_saved_folder(self, folder: Path, now: float) -> int:
        removed = 0
        with contextlib.suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                name = entry.name
                try:
                    if name.endswith(".tmp"):  # a write that died; a live one renames within seconds
                        stale = entry.stat(follow_symlinks=False).st_mtime < now - 3600
                    elif name.endswith(_SAVED_SUFFIX):
                        fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                        with os.fdopen(fd, "rb") as f:
                            head = f.read(_SAVED_HEAD.size + MAX_SAVED_HEADER)
                        state = _parse_saved(name, head, header_only=True)
                        stale = state is None or state.expires_at <= now
                    else:
                        continue
                    if stale:
                        os.unlink(entry.path)
                        removed += 1
                except OSError:
                    continue
        return removed

    def sweep_saved(self) -> int:
        """Remove every key's expired saved states (any replica may: the folder is shared)."""
        now, removed = time.time(), 0
        with contextlib.suppress(OSError), os.scandir(self.root / _SAVED) as folders:
            for folder in folders:
                if folder.is_dir(follow_symlinks=False):
                    removed += self._sweep_saved_folder(Path(folder.path), now)
        return removed

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
                    self._forget(session_id)
            if not mine:
                with contextlib.suppress(OSError):
                    folder.rmdir()  # only when empty
                    os.unlink(self.root / f"{writer}.alive")
                if not folder.exists():  # its files are gone: so are its counts
                    for ledger in self._usage.glob(f"*/{writer}"):
                        with contextlib.suppress(OSError):
                            ledger.unlink()
        return removed

    def close(self) -> None:
        """Let go of the writer's lock (its files stay for ``sweep``)."""
        fd, self._alive = self._alive, -1
        if fd >= 0:
            os.close(fd)


def paused_store(folder: str | os.PathLike[str] | None, writer: str | None, key_budget_bytes: int) -> PausedStore:
    """The paused-session store in ``folder`` (the server's ``snapshot_dir``; None: default
    ``<cache>/paused-sessions``; ``writer``: the replica id, else one per process)."""
    from ..cache import cache_dir

    root = Path(folder) if folder else cache_dir() / "paused-sessions"
    return PausedStore(root, writer=writer, key_budget_bytes=key_budget_bytes)


def _read_count(path: str) -> int:
    """A writer's count in ``.usage`` (0 when it is unreadable or not a count)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            return max(0, int(f.read(32)))
    except (OSError, ValueError):
        return 0


def missing_saved(handle: object) -> SavedStateMissing:
    shown = handle if isinstance(handle, str) and _NAME.fullmatch(handle) else "with that id"
    return SavedStateMissing(
        "unknown", f"no saved session {shown} for this key: it was never saved, belongs to another "
                   "key, or was deleted",
    )  # fmt: skip


def _parse_saved(handle: str, data: bytes, *, header_only: bool = False) -> SavedState | None:
    """A saved state's file (or its start, ``header_only``), or None when it is not one."""
    if len(data) < _SAVED_HEAD.size:
        return None
    magic, head_len, snap_len = _SAVED_HEAD.unpack_from(data, 0)
    start = _SAVED_HEAD.size + head_len
    if magic != _SAVED_MAGIC or head_len > MAX_SAVED_HEADER or len(data) < start:
        return None
    try:
        head = json.loads(data[_SAVED_HEAD.size:start])
        profile, runtime = str(head["profile"]), str(head["runtime"])
        created_at, expires_at = float(head["created_at"]), float(head["expires_at"])
    except (ValueError, KeyError, TypeError):
        return None
    if header_only:
        return SavedState(handle, profile, runtime, created_at, expires_at, len(data))
    if len(data) < start + snap_len:
        return None
    files = bytes(data[start + snap_len:]) or None
    return SavedState(handle, profile, runtime, created_at, expires_at, len(data),
                      snapshot=bytes(data[start:start + snap_len]), files=files)


def _write_atomic(target: Path, name: str, parts: tuple[bytes, ...]) -> None:
    """``parts`` written to ``target`` through a temporary file in its folder, renamed over it.
    ``PausedStoreFull`` when the disk is full (nothing changed)."""
    tmp = target.with_name(f".{name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:  # no fsync: a process that dies keeps what it wrote; a torn file fails its MAC
            for part in parts:
                view = memoryview(part)
                while view:
                    view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise PausedStoreFull(
                "snapshot_disk_full",
                "the disk that keeps paused and saved sessions is full; the session stays live",
            ) from None
        raise
