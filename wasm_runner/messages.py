"""Messages a person or a model can act on: which limit stopped a run, and a traceback trimmed to
the user's own frames.

Pure functions over strings and the result contract; no I/O, no sandbox. Every face (CLI, HTTP,
MCP) and the core may use them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from .limits import Limits
from .result import Status
from .tiers import end_line, end_line_key

__all__ = ["limit_sentence", "trim_traceback", "is_user_file", "exception_line"]

_TRACEBACK_HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line \d+(?:, in .*)?$')
_USER_PREFIXES = ("/scratch/", "/data/", "/out/")


# What to try, after the end line (the server's messages; the browser shows the end line alone).
_ADVICE = {
    "error_stack": "make the recursion shallower or use a loop",
    "cpu_limit": (
        "look for an endless loop, or make it do less work (smaller data, fewer iterations, "
        "vectorised numpy/pandas)"
    ),
    "timeout": (
        "it may be stuck in a loop, sleeping, or doing too much work (time spent waiting for "
        "your input does not count)"
    ),
    "memory_limit": "load less data at once or use smaller data types",
    "output_limit": "print a summary (such as df.head()) instead of everything, and check for an endless loop",
    "output_limit_stderr": "write less to stderr, and check for an endless loop",
    "disk_limit": "write fewer or smaller files",
    "host_calls_limit": "call the app's functions fewer times (ask for more at once), and check for an endless loop",
    "host_bytes_limit": "pass or ask for less data in one call",
    "host_time_limit": "call the app's slow functions fewer times",
    "internal_error": "this is not caused by the code, so trying again may help",
}


def limit_sentence(
    status: Status | str,
    limits: Limits,
    stream: str = "stdout",
    *,
    limit: str | None = None,
    exit_code: int | None = None,
) -> str:
    """The end line of a run in plain language: how it ended and, for a limit, which one and its
    value, then what to try. The end line is the browser tier's too (``tiers.END_LINES``).

    ``stream`` names the stream that hit the output limit (``stdout`` or ``stderr``); ``limit``
    is the result's ``limit`` (``input_wait`` and ``stack`` have sentences of their own);
    ``exit_code`` is named for an ``error`` that exited with another code than 1. Returns an
    empty string for ``ok``.
    """
    status = Status(status)
    if status is Status.OK:
        return ""
    line = end_line(status.value, limits.to_dict(), limit=limit, exit_code=exit_code, stream=stream)
    advice = _ADVICE.get(end_line_key(status.value, limit=limit, exit_code=exit_code, stream=stream))
    return f"{line}; {advice}." if advice else f"{line}."


def is_user_file(filename: str) -> bool:
    """Whether a traceback frame's file is the user's code rather than the stdlib or a package.

    User code runs under a pseudo-filename such as ``<cell>`` or ``<string>``, or from a file the
    user placed in ``/scratch``, ``/data`` or ``/out`` (or a relative path in the working directory).
    """
    if filename.startswith("<"):
        return not filename.startswith("<frozen")
    if filename.startswith(_USER_PREFIXES):
        return "site-packages" not in filename
    return not filename.startswith("/")


def trim_traceback(
    text: str, is_user: Callable[[str], bool] = is_user_file, *, keep_last: bool = True
) -> str:
    """``text`` with every traceback trimmed to the user's own frames.

    Frames before the first user frame (the runner that started the code) are dropped silently;
    library frames called from user code are replaced by one line saying how many were hidden.
    The exception line and anything that is not a traceback pass through unchanged, as do chained
    tracebacks (each trimmed on its own). When no frame is the user's, the innermost frame is
    kept (``keep_last``) so the place of the error is never lost.
    """
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i] != _TRACEBACK_HEADER:
            out.append(lines[i])
            i += 1
            continue
        i += 1
        frames: list[tuple[str, list[str]]] = []
        while i < len(lines) and lines[i].startswith(" "):
            match = _FRAME.match(lines[i])
            if match or not frames:
                frames.append((match.group("file") if match else "", [lines[i]]))
            else:
                frames[-1][1].append(lines[i])
            i += 1
        out.extend(_trimmed_block(frames, is_user, keep_last))
    return "\n".join(out)


def _trimmed_block(
    frames: list[tuple[str, list[str]]], is_user: Callable[[str], bool], keep_last: bool
) -> list[str]:
    user_seen = False
    hidden = 0
    kept: list[str] = []
    for filename, frame_lines in frames:
        if filename and is_user(filename):
            if hidden:
                kept.append(_hidden_note(hidden))
                hidden = 0
            kept.extend(frame_lines)
            user_seen = True
        elif user_seen:
            hidden += 1
    if hidden:
        kept.append(_hidden_note(hidden))
    if not user_seen and frames and keep_last:
        kept = list(frames[-1][1])
    # A SyntaxError's location line has no ", in" part; alone it reads best without a header.
    if kept and not any(_FRAME.match(line) and ", in " in line for line in kept):
        return kept
    return [_TRACEBACK_HEADER, *kept] if kept else []


def _hidden_note(count: int) -> str:
    return f"  [{count} frame{'s' if count != 1 else ''} in library code hidden]"


def exception_line(text: str) -> str:
    """The last exception line of a traceback (``ValueError: bad``), or ``""`` when there is none."""
    candidates: Iterable[str] = (
        line for line in reversed(text.rstrip("\n").split("\n")) if line and not line[0].isspace()
    )
    for line in candidates:
        if re.match(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Group)\b", line):
            return line
        if re.match(r"^[A-Za-z_][\w.]*: ", line):
            return line
    return ""
