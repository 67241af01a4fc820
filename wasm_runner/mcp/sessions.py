"""What the MCP tools add to the one session manager (``wasm_runner.sessions.SessionStore``).

Sessions the tools open live in the same store as the HTTP API's sessions (same caps per key,
same memory budget, same expiry). Each tool session is opened with a private folder: ``data/``
(shown read-only at ``/data``, filled by ``upload_file``) and ``out/`` (writable at ``/out``,
read back as resources). This module holds only the tools' part: file-name rules, writing an
upload into ``/data``, finding a session another replica held (``find_anywhere``), and the
sentences a model reads when a session is gone or moved.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path

from .. import inputs
from ..errors import WasmRunnerError
from ..execution import CallerLike, Refused
from ..sessions import LiveSession, SessionStore

__all__ = [
    "Locate", "SessionError", "check_file_name", "find", "find_anywhere", "gone_message", "moved_message",
    "write_upload",
]  # fmt: skip

# (session id, tenant) -> where it is now: "here" (resumed here from its snapshot: its owner was
# lost, or left it here), "unknown", "lost", "busy" or "elsewhere" (``http.relay.Hop.take_over``)
Locate = Callable[[str, str], Awaitable[str]]


class SessionError(WasmRunnerError, ValueError):
    """A session request that cannot be served; the message says what to do instead."""


def check_file_name(name: str) -> str:
    """``name`` when it is a plain file name (``wasm_runner.inputs``: no folder, no ``..``, no
    hidden file); else ``SessionError``."""
    try:
        return inputs.check_file_name(name)
    except ValueError as e:
        raise SessionError(str(e)) from None


def gone_message(store: SessionStore, session_id: str, caller: CallerLike) -> str:
    if store.ended(session_id, caller):
        return (
            f"session {session_id} has ended (closed, idle too long, or stopped by a limit), and "
            "its variables and files are gone; call open_session for a new one and upload the "
            "data again"
        )
    idle = store.pausing.lifetime_seconds if store.pausing is not None else store.idle_seconds
    return (
        f"no open session {session_id!r}: it was closed, timed out after "
        f"{idle:g} s idle, or never existed; call open_session for a new one"
    )


def find(store: SessionStore, session_id: str, caller: CallerLike) -> LiveSession:
    """``caller``'s open session, or ``SessionError`` with a sentence for the model."""
    try:
        return store.get(session_id, caller)
    except Refused:
        raise SessionError(gone_message(store, session_id, caller)) from None


async def find_anywhere(store: SessionStore, session_id: str, caller: CallerLike,
                        locate: Locate | None) -> LiveSession:
    """``caller``'s open session, here or, when another replica held it and is gone, resumed
    here from its last snapshot (``locate``: the server's directory; None over stdio); else
    ``SessionError`` with a sentence for the model. Another key's id is unknown, as here."""
    try:
        return find(store, session_id, caller)
    except SessionError:
        if locate is None or not isinstance(session_id, str) or store.ended(session_id, caller):
            raise
    try:
        where = await locate(session_id, caller.name)
    except Refused as exc:
        raise SessionError(
            f"session {session_id} could not be looked up on the other replicas of this server "
            f"({exc.message}); try again in a few seconds"
        ) from None
    if where == "here":
        return find(store, session_id, caller)
    if where == "lost":
        raise SessionError(
            f"session {session_id} was lost with the server replica that held it (it had no saved "
            "state to continue from), and its variables and files are gone; call open_session for "
            "a new one and upload the data again"
        )
    if where == "busy":
        raise SessionError(
            f"session {session_id} is running a cell on another replica of this server and moves "
            "here when that cell ends; try again in a few seconds"
        )
    if where == "elsewhere":
        raise SessionError(
            f"session {session_id} is open on another replica of this server, which these tool "
            "calls no longer reach (a replica restarted), and it could not be moved here (its "
            "state is not saved where this replica can read it); call open_session for a new one"
        )
    raise SessionError(gone_message(store, session_id, caller))


def moved_message(live: LiveSession) -> str:
    """What a model reads on its first cell after its session moved to this replica."""
    text = ("This session moved to another replica of the server (server replicas stopped or "
            "restarted) and continues from its last saved state: its variables, imports and files "
            "in /data and /out.")  # fmt: skip
    if not live.lost_cells:
        return text + " No cell was lost."
    numbers = ", ".join(str(n) for n in live.lost_cells)
    return (text + f" The effects of the last {len(live.lost_cells)} cell(s) before the move "
            f"(cell number(s) {numbers} of this session) were lost: run them again if you need them.")  # fmt: skip


def write_upload(live: LiveSession, name: str, data: bytes, max_upload_bytes: int) -> str:
    """Place ``data`` at ``/data/<name>`` of a tool session (read-only to the guest)."""
    check_file_name(name)
    if len(data) > max_upload_bytes:
        raise SessionError(
            f"{name} is {len(data)} bytes; uploads are limited to {max_upload_bytes} bytes per file"
        )
    if live.data_dir is None:
        raise SessionError(
            "this session has no private /data (it was opened through the HTTP API); upload "
            "with destination 'scratch'"
        )
    total = live.uploaded_bytes + len(data)
    if total > 4 * max_upload_bytes:
        raise SessionError(
            f"this session already holds {live.uploaded_bytes} uploaded bytes; the most is "
            f"{4 * max_upload_bytes}; open a new session for more data"
        )
    _write_new_file(live.data_dir, name, data)
    live.uploaded_bytes = total
    return f"/data/{name}"


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
