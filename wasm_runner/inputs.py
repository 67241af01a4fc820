"""The input rules every face shares: how much source and stdin a run takes, and which file names
an upload may have. The Python API, the CLI, HTTP and MCP all check input through this module, so
a program or file accepted by one face is accepted by every other.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "FILE_NAME_PATTERN",
    "MAX_FILE_NAME_CHARS",
    "MAX_SOURCE_BYTES",
    "MAX_STDIN_BYTES",
    "check_file_name",
    "check_source",
    "stdin_bytes",
    "upload_path",
]

MAX_SOURCE_BYTES = 1 << 20  # 1 MiB of UTF-8 source
MAX_STDIN_BYTES = 8 << 20  # 8 MiB of stdin given up front
MAX_FILE_NAME_CHARS = 255

# A plain file name as the faces take it (HTTP ``files[].name``, MCP ``upload_file``): starts with a
# letter, digit or '_' (never hidden, never '.' or '..'), then letters, digits, '.', '_', '-' and
# inner spaces; no folders. Written without look-arounds so JSON Schema validators can run it.
FILE_NAME_PATTERN = r"^[A-Za-z0-9_](?:[A-Za-z0-9._ -]{0,253}[A-Za-z0-9._-])?$"
_FILE_NAME = re.compile(FILE_NAME_PATTERN)


def check_source(code: Any, filename: str | None = None) -> str | None:
    """Why ``code`` cannot be run (a plain sentence), or None when it can."""
    if isinstance(code, bytes):
        try:
            code = code.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"the source is not valid UTF-8 (byte {e.start})"
    if not isinstance(code, str):
        return f"the source must be text, not {type(code).__name__}"
    if "\x00" in code:
        return "the source contains a NUL byte"
    try:
        size = len(code.encode("utf-8"))
    except UnicodeEncodeError:
        return "the source contains text that cannot be encoded as UTF-8 (lone surrogates)"
    if size > MAX_SOURCE_BYTES:
        return f"the source is {size} bytes; the maximum is {MAX_SOURCE_BYTES} bytes"
    if filename is not None and ("\x00" in filename or len(filename) > MAX_FILE_NAME_CHARS):
        return "the file name is not usable"
    return None


def stdin_bytes(stdin: bytes | str | None) -> bytes:
    """``stdin`` given up front as bytes; ``ValueError`` when it is not text or bytes, or too long."""
    if stdin is None:
        return b""
    if isinstance(stdin, str):
        try:
            stdin = stdin.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("stdin contains text that cannot be encoded as UTF-8") from None
    if not isinstance(stdin, (bytes, bytearray)):
        raise ValueError(f"stdin must be bytes or text, not {type(stdin).__name__}")
    if len(stdin) > MAX_STDIN_BYTES:
        raise ValueError(f"stdin is {len(stdin)} bytes; the maximum is {MAX_STDIN_BYTES} bytes")
    return bytes(stdin)


def check_file_name(name: Any) -> str:
    """``name`` when it is a plain file name (``FILE_NAME_PATTERN``); else ``ValueError``."""
    if not isinstance(name, str) or not _FILE_NAME.match(name):
        raise ValueError(
            f"invalid file name {name!r}: use a plain name such as 'sales.csv' (letters, digits, "
            f"'.', '_', '-', spaces; no folders; at most {MAX_FILE_NAME_CHARS} characters)"
        )
    return name


def upload_path(name: Any) -> str:
    """The relative path a file given to the Python API lands at under ``/scratch`` (folders are
    allowed there, ``..`` and absolute paths are not); ``ValueError`` otherwise."""
    if not isinstance(name, str) or not name or "\x00" in name or len(name) > MAX_FILE_NAME_CHARS:
        raise ValueError(f"bad file name {name!r}")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or name.startswith("/"):
        raise ValueError(f"file name {name!r} must be a relative path without '..'")
    return "/".join(parts)
