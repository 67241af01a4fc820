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

__all__ = ["limit_sentence", "trim_traceback", "is_user_file", "exception_line"]

_TRACEBACK_HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^  File "(?P<file>[^"]*)", line \d+(?:, in .*)?$')
_USER_PREFIXES = ("/scratch/", "/data/", "/out/")


def _num(x: float) -> str:
    """``5.0`` -> ``5``, ``0.5`` -> ``0.5``: numbers as a person writes them."""
    return str(int(x)) if float(x) == int(x) else f"{x:g}"


def _plural(x: float, unit: str) -> str:
    return f"{_num(x)} {unit}" + ("" if float(x) == 1 else "s")


def _bytes(n: int) -> str:
    """A size as a person reads it: ``1 MB`` for 1 MiB, ``64 KB``, ``10 bytes``."""
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return _plural(n, "byte")


def limit_sentence(
    status: Status | str,
    limits: Limits,
    stream: str = "stdout",
    *,
    limit: str | None = None,
    exit_code: int | None = None,
) -> str:
    """The end line of a run in plain language: how it ended and, for a limit, which one and its
    value, then what to try. The browser tier words its end line the same way.

    ``stream`` names the stream that hit the output limit (``stdout`` or ``stderr``); ``limit``
    is the result's ``limit`` (``input_wait`` and ``stack`` have sentences of their own);
    ``exit_code`` is named for an ``error``. Returns an empty string for ``ok``.
    """
    status = Status(status)
    if status is Status.OK:
        return ""
    if status is Status.ERROR:
        if limit == "stack":
            return (
                "Your program stopped with an error: Python ran out of stack (the recursion "
                "went too deep); make the recursion shallower or use a loop."
            )
        if exit_code is None:
            return "Your program stopped with an error."
        return f"Your program stopped with an error (exit status {exit_code})."
    if status is Status.CPU_LIMIT:
        return (
            f"Stopped: it used more than {_plural(limits.cpu_seconds, 'second')} of CPU time; "
            f"look for an endless loop, or make it do less work (smaller data, fewer "
            f"iterations, vectorised numpy/pandas)."
        )
    if status is Status.TIMEOUT:
        if limit == "input_wait":
            wait = limits.input_wait_seconds
            span = _plural(wait / 60, "minute") if wait >= 60 and wait % 60 == 0 else _plural(wait, "second")
            return f"Stopped: it waited more than {span} for input."
        return (
            f"Stopped: it ran for more than {_plural(limits.wall_seconds, 'second')} "
            f"(time spent waiting for your input does not count); it may be stuck in a loop, "
            f"sleeping, or doing too much work."
        )
    if status is Status.MEMORY_LIMIT:
        return (
            f"Stopped: it needed more than {limits.memory_mb} MB of memory; load less data at "
            f"once or use smaller data types."
        )
    if status is Status.OUTPUT_LIMIT:
        cap = limits.stderr_bytes if stream == "stderr" else limits.stdout_bytes
        what = "printed" if stream == "stdout" else "wrote to stderr"
        return (
            f"Stopped: it {what} more than {_bytes(cap)}; print a summary (such as df.head()) "
            f"instead of everything, and check for an endless loop."
        )
    if status is Status.DISK_LIMIT:
        return (
            f"Stopped: its files went over the disk quota of {_num(limits.disk_mb)} MB or "
            f"{limits.max_files} files; write fewer or smaller files."
        )
    if status is Status.CANCELLED:
        return "Stopped: the run was cancelled before it finished."
    if status is Status.INVALID_INPUT:
        return "Not run: its code, input or limits are not valid."
    if status is Status.INTERNAL_ERROR:
        return "The sandbox failed internally; this is not caused by the code, so trying again may help."
    return "Your program stopped with an error."


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
