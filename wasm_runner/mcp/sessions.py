"""The sessions the MCP tools keep open: one sandbox session and one private folder each.

Each session owns a temporary folder with ``data/`` (shown to the guest read-only at ``/data``)
and ``out/`` (writable at ``/out``). Closing a session, or leaving it idle too long, ends its
guest and deletes the folder. Ids are long random tokens, and a session is visible only to the
owner that opened it (the API key over HTTP; the one local client over stdio).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import inputs
from ..limits import Limits
from ..result import FileOut, Result

__all__ = [
    "SandboxLike",
    "SessionLike",
    "SessionError",
    "McpSession",
    "SessionRegistry",
    "check_file_name",
]



class SessionLike(Protocol):
    """What the tools need of a sandbox session (``wasm_runner.Sandbox.session(...)``)."""

    @property
    def alive(self) -> bool: ...

    def run(self, code: str, **kwargs: Any) -> Result: ...

    def upload(self, name: str, data: bytes) -> None: ...

    def close(self) -> None: ...


class SandboxLike(Protocol):
    """What the tools need of a sandbox (``wasm_runner.Sandbox``)."""

    def run(self, code: str, **kwargs: Any) -> Result: ...

    def session(self, **kwargs: Any) -> SessionLike: ...


class SessionError(ValueError):
    """A session request that cannot be served; the message says what to do instead."""


def check_file_name(name: str) -> str:
    """``name`` when it is a plain file name (no folder, no ``..``, no hidden file); else raise."""
    try:
        return inputs.check_file_name(name)
    except ValueError as e:
        raise SessionError(str(e)) from None


@dataclass
class McpSession:
    """One open session: its sandbox session, private folder and last-seen output files."""

    id: str
    owner: str
    sandbox_session: SessionLike
    root: Path
    created: float
    last_used: float
    lock: threading.Lock = field(default_factory=threading.Lock)  # one cell at a time
    cancel: threading.Event = field(default_factory=threading.Event)  # set to stop the running cell
    uploaded_bytes: int = 0
    files: dict[str, FileOut] = field(default_factory=dict)  # guest path -> last content seen

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def out_dir(self) -> Path:
        return self.root / "out"

    def new_files(self, result: Result) -> list[FileOut]:
        """Files in ``result`` that are new or changed since the previous cell; remembers them."""
        fresh = [f for f in result.files if self.files.get(f.path, None) != f]
        for f in result.files:
            self.files[f.path] = f
        return fresh


class SessionRegistry:
    """Open, find, use and close sessions; thread-safe; closes idle sessions lazily.

    ``sandbox`` is a callable returning the shared sandbox (created on first use, since the
    first compile of a runtime takes a while).
    """

    def __init__(
        self,
        sandbox: Callable[[], SandboxLike],
        limits: Limits,
        *,
        max_sessions: int = 16,
        max_sessions_per_owner: int = 4,
        idle_seconds: float = 900.0,
        max_upload_bytes: int = 16 << 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sandbox = sandbox
        self.limits = limits
        self.max_sessions = max_sessions
        self.max_sessions_per_owner = max_sessions_per_owner
        self.idle_seconds = idle_seconds
        self.max_upload_bytes = max_upload_bytes
        self._clock = clock
        self._sessions: dict[str, McpSession] = {}
        self._ended: dict[str, str] = {}  # id -> owner of recently ended sessions, for clear replies
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)

    def open(self, owner: str) -> McpSession:
        """A new session for ``owner``; raises ``SessionError`` when the caps are reached."""
        self.close_idle()
        with self._lock:
            if len(self._sessions) >= self.max_sessions:
                raise SessionError(
                    f"the server already has {self.max_sessions} open sessions; close one with "
                    "close_session, or use run_python for a one-off run"
                )
            mine = sum(1 for s in self._sessions.values() if s.owner == owner)
            if mine >= self.max_sessions_per_owner:
                raise SessionError(
                    f"you already have {mine} open sessions (the most allowed); close one with "
                    "close_session first"
                )
            session_id = secrets.token_urlsafe(18)
            # Reserve the slot before the slow part so concurrent opens respect the caps.
            self._sessions[session_id] = None  # type: ignore[assignment]
        root = Path(tempfile.mkdtemp(prefix="wasm-runner-mcp-"))
        try:
            (root / "data").mkdir(mode=0o700)
            (root / "out").mkdir(mode=0o700)
            sandbox_session = self._sandbox().session(
                limits=self.limits, data_dir=root / "data", out_dir=root / "out"
            )
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            with self._lock:
                self._sessions.pop(session_id, None)
            raise
        now = self._clock()
        session = McpSession(session_id, owner, sandbox_session, root, now, now)
        with self._lock:
            self._sessions[session_id] = session
        return session

    def ended(self, session_id: str, owner: str) -> bool:
        """Whether ``session_id`` was ``owner``'s and has ended (closed, idle, or stopped by a limit)."""
        with self._lock:
            return self._ended.get(session_id) == owner

    def get(self, session_id: str, owner: str) -> McpSession:
        """The open session ``session_id`` of ``owner``; raises ``SessionError`` otherwise."""
        self.close_idle()
        with self._lock:
            session = self._sessions.get(session_id) if isinstance(session_id, str) else None
            if session is None or session.owner != owner:
                if self._ended.get(session_id) == owner:
                    raise SessionError(
                        f"session {session_id} has ended (closed, idle too long, or stopped by a "
                        "limit), and its variables and files are gone; call open_session for a new "
                        "one and upload the data again"
                    )
                raise SessionError(
                    f"no open session {session_id!r}: it was closed, timed out after "
                    f"{self.idle_seconds:g} s idle, or never existed; call open_session for a new one"
                )
            session.last_used = self._clock()
            return session

    def upload(self, session: McpSession, name: str, data: bytes, destination: str = "data") -> str:
        """Place ``data`` at ``/data/<name>`` (read-only to the guest) or ``/scratch/<name>``.

        Returns the guest path. Raises ``SessionError`` for a bad name, destination or size.
        """
        check_file_name(name)
        if len(data) > self.max_upload_bytes:
            raise SessionError(
                f"{name} is {len(data)} bytes; uploads are limited to {self.max_upload_bytes} bytes per file"
            )
        if destination == "scratch":
            with session.lock:
                session.sandbox_session.upload(name, data)
            session.uploaded_bytes += len(data)
            return f"/scratch/{name}"
        if destination != "data":
            raise SessionError(f"destination must be 'data' or 'scratch', got {destination!r}")
        total = session.uploaded_bytes + len(data)
        if total > 4 * self.max_upload_bytes:
            raise SessionError(
                f"this session already holds {session.uploaded_bytes} uploaded bytes; the most is "
                f"{4 * self.max_upload_bytes}; open a new session for more data"
            )
        _write_new_file(session.data_dir, name, data)
        session.uploaded_bytes = total
        return f"/data/{name}"

    def close(self, session_id: str, owner: str) -> bool:
        """End the session and delete its folder. False when there was no such open session."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.owner != owner:
                return False
            del self._sessions[session_id]
            self._remember_ended(session)
        _dispose(session)
        return True

    def close_idle(self) -> int:
        """Close every session idle longer than ``idle_seconds`` or whose guest has ended."""
        now = self._clock()
        with self._lock:
            stale = [
                s
                for s in self._sessions.values()
                if s is not None and now - s.last_used > self.idle_seconds
            ]
            for s in stale:
                del self._sessions[s.id]
                self._remember_ended(s)
        for s in stale:
            _dispose(s)
        return len(stale)

    def _remember_ended(self, session: McpSession) -> None:
        self._ended[session.id] = session.owner
        while len(self._ended) > 4096:
            self._ended.pop(next(iter(self._ended)))

    def close_all(self) -> None:
        with self._lock:
            sessions = [s for s in self._sessions.values() if s is not None]
            self._sessions.clear()
        for s in sessions:
            _dispose(s)


def _write_new_file(folder: Path, name: str, data: bytes) -> None:
    """Write ``folder/name`` through a temporary file, never following a symlink."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        tmp = f".upload-{secrets.token_hex(8)}"
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
        )
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
            raise
    finally:
        os.close(dir_fd)


def _dispose(session: McpSession) -> None:
    session.cancel.set()  # a running cell stops at once
    try:
        with session.lock:  # waits for a running cell to end
            session.sandbox_session.close()
    finally:
        shutil.rmtree(session.root, ignore_errors=True)
