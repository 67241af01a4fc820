"""A session's private folders: made (``new_folders``), copied for a fork (``copy_files``),
sealed with its saved state (``seal_folders``, ``SessionStore.save``) and restored
(``unseal_folders``, ``restore_folders``).

A session opened with private folders (the MCP tools' sessions) has ``data/`` (uploads, shown
read-only at ``/data``) and ``out/`` (written at ``/out``) on the host, outside its snapshot. Saving
it packs their regular files and folders into one body, sealed as a snapshot is
(``sandbox.sealing``: encrypted and authenticated for the key, under the server secret, with its
own tag so it never opens as a snapshot); resuming authenticates it, then unpacks it into the new
session's fresh folders. Links and anything else but files and folders are left out.

Body: ``u32`` header length | header (JSON: ``[[path, "d" | "f", size], ...]``, parents first) |
the files' bytes, in order. Unpacking treats it as hostile even though it authenticated: each path
is checked (``data/`` or ``out/``, plain names, bounded depth), sizes must add up, nothing outside
the new folders is written and nothing is followed.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import shutil
import tempfile
from pathlib import Path

from ..result import FileOut

__all__ = [
    "FOLDERS_TAG", "MAX_FOLDER_BYTES", "Folders", "copy_files", "files_under", "new_folders", "restore_folders",
    "seal_folders", "str_or_none", "unseal_folders",
]  # fmt: skip

FOLDERS_TAG = hashlib.sha256(b"wasm-runner private folders v1").hexdigest()  # the sealing's "image"
MAX_FOLDER_BYTES = 256 << 20  # a session's folders, at most, packed
MAX_ENTRIES = 10_000
MAX_DEPTH = 32
_LEN = struct.Struct("<I")
_TOPS = ("data", "out")

Folders = tuple[Path | None, Path | None]  # a session's (data_dir, out_dir)


def _walk(folder: Path, rel: str, entries: list[list[object]], chunks: list[bytes], total: list[int]) -> None:
    with os.scandir(folder) as found:
        for entry in sorted(found, key=lambda e: e.name):
            path = f"{rel}/{entry.name}"
            if len(entries) >= MAX_ENTRIES:
                raise ValueError(f"the session's folders hold more than {MAX_ENTRIES} entries")
            if entry.is_dir(follow_symlinks=False):
                entries.append([path, "d", 0])
                _walk(Path(entry.path), path, entries, chunks, total)
            elif entry.is_file(follow_symlinks=False):
                fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as f:
                    data = f.read(MAX_FOLDER_BYTES + 1)
                total[0] += len(data)
                if total[0] > MAX_FOLDER_BYTES:
                    raise ValueError(f"the session's folders hold more than {MAX_FOLDER_BYTES >> 20} MiB")
                entries.append([path, "f", len(data)])
                chunks.append(data)


def _pack(root: Path) -> bytes:
    entries: list[list[object]] = []
    chunks: list[bytes] = []
    total = [0]
    for top in _TOPS:
        if (root / top).is_dir():
            _walk(root / top, top, entries, chunks, total)
    head = json.dumps(entries, separators=(",", ":")).encode()
    return _LEN.pack(len(head)) + head + b"".join(chunks)


def seal_folders(root: Path, *, owner: str, secret: bytes | None) -> bytes:
    """``root``'s ``data/`` and ``out/`` packed and sealed for ``owner`` (``secret``: the server's,
    None: ``sealing.default_secret()``). ``ValueError`` when they hold too much."""
    from ..sandbox.sealing import default_secret, seal

    return seal(_pack(root), owner=owner, secret=default_secret() if secret is None else secret, image=FOLDERS_TAG)


def _checked(path: object) -> tuple[str, ...]:
    if not isinstance(path, str):
        raise ValueError("a packed path is not text")
    parts = tuple(path.split("/"))
    if parts[0] not in _TOPS or len(parts) < 2 or len(parts) > MAX_DEPTH:
        raise ValueError(f"a packed path is outside data/ and out/: {path!r}")
    for part in parts[1:]:
        if part in ("", ".", "..") or "\x00" in part or len(part.encode()) > 255:
            raise ValueError(f"a packed path has a bad name: {path!r}")
    return parts


def unseal_folders(blob: bytes, *, owner: str, secret: bytes | None, data_dir: Path, out_dir: Path) -> int:
    """Authenticate ``blob`` (``sealing.SnapshotRefused`` otherwise) and write its files into the
    empty folders ``data_dir`` and ``out_dir``; returns the bytes written into ``data_dir`` (the
    session's uploads). ``ValueError`` for a body that does not unpack."""
    from ..sandbox.sealing import default_secret, open_sealed

    body = open_sealed(blob, owner=owner, secret=default_secret() if secret is None else secret,
                       image=FOLDERS_TAG, max_body=MAX_FOLDER_BYTES + (4 << 20))  # fmt: skip
    if len(body) < _LEN.size:
        raise ValueError("the saved folders are truncated")
    (head_len,) = _LEN.unpack_from(body, 0)
    start = _LEN.size + head_len
    entries = json.loads(body[_LEN.size:start])
    if not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        raise ValueError("the saved folders' list is not one")
    sizes = [e[2] for e in entries if isinstance(e, list) and len(e) == 3]
    if len(sizes) != len(entries) or not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise ValueError("the saved folders' list is not one")
    if start + sum(sizes) != len(body):
        raise ValueError("the saved folders' sizes do not add up")
    tops = {"data": data_dir, "out": out_dir}
    offset, uploaded = start, 0
    for path, kind, size in entries:
        parts = _checked(path)
        target = tops[parts[0]].joinpath(*parts[1:])
        if kind == "d" and size == 0:
            os.mkdir(target, 0o700)  # its parent was made first; an existing name fails
        elif kind == "f":
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(body[offset:offset + size])
            offset += size
            if parts[0] == "data":
                uploaded += size
        else:
            raise ValueError(f"a packed entry of unknown kind {kind!r}")
    return uploaded


def str_or_none(path: Path | None) -> str | None:
    return str(path) if path else None


def new_folders() -> Path:
    """A new private folder with empty ``data/`` and ``out/`` (a session's ``root``)."""
    root = Path(tempfile.mkdtemp(prefix="wasm-runner-session-"))
    (root / "data").mkdir(mode=0o700)
    (root / "out").mkdir(mode=0o700)
    return root


def files_under(folder: Path, guest: str) -> dict[str, FileOut]:
    """The regular files under ``folder`` as the guest sees them under ``guest`` (links and
    anything else left out, nothing outside ``folder`` followed)."""
    found: dict[str, FileOut] = {}
    for top, _, names in os.walk(folder):  # never into a linked folder
        for file_name in sorted(names):
            path = Path(top) / file_name
            if path.is_file() and not path.is_symlink():
                name = f"{guest}/{path.relative_to(folder).as_posix()}"
                found[name] = FileOut(name, path.read_bytes())
    return found


def restore_folders(root: Path, folders: bytes | None, *, owner: str, secret: bytes | None) -> int:
    """``root``'s ``data/`` and ``out/`` emptied, then filled from ``folders`` (sealed,
    ``folders``; None: left empty); returns the bytes of ``data/`` (its uploads)."""
    for name in ("data", "out"):
        shutil.rmtree(root / name, ignore_errors=True)
        (root / name).mkdir(mode=0o700)
    if folders is None:
        return 0
    return unseal_folders(folders, owner=owner, secret=secret, data_dir=root / "data", out_dir=root / "out")


def copy_files(source: Path, target: Path) -> None:
    """The regular files and folders under ``source`` copied into ``target`` (a fork's private
    folders); links and anything else are left out, nothing outside ``source`` is followed."""
    with os.scandir(source) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                (target / entry.name).mkdir(mode=0o700)
                copy_files(Path(entry.path), target / entry.name)
            elif entry.is_file(follow_symlinks=False):
                shutil.copyfile(entry.path, target / entry.name, follow_symlinks=False)
