"""What the two tiers (the server's CPython on WASI, the browser's Pyodide) say and do alike,
written once: the end line of a run and the output flush window.

The browser's copy, ``web/src/tiers.js``, is generated from this module (``browser/tiers_js.py``)::

    python -m wasm_runner.browser.tiers_js           # writes web/src/tiers.js
    python -m wasm_runner.browser.tiers_js --check   # exit status 1 when it is stale

``render.js`` words the end line the playground shows from ``END_LINES`` with the same choice
of line (``end_line_key``) and the same number formats as ``end_line`` here; both tiers batch
output with the guest package's ``guest/output.py``, whose window is ``FLUSH_SECONDS``.
``tests/test_tiers.py`` fails when the file is stale, when the browser's end line for a result
differs from this one, or when the window differs.

Pure data and pure functions: no I/O, nothing of the sandbox.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["END_LINES", "FLUSH_SECONDS", "end_line", "end_line_key"]

# Output written faster than this goes out in batches (guest/output.py, both tiers; its WINDOW is
# the same number): on the server the host raises the wrapper's pace flag every FLUSH_SECONDS of
# the guest's CPU time (wasi.guestio.PACE_S); without that flag (the browser) the guest's clock
# measures the pace.
FLUSH_SECONDS = 0.05

# How a run ended, in one line without a final period. ``{name:kind}`` is a limit (or the exit
# code) formatted as ``kind`` says: seconds, bytes, mb, files; ``{name}`` is a whole number.
END_LINES: dict[str, str] = {
    "ok": "Your program finished",
    "error": "Your program stopped with an error",
    "error_exit": "Your program exited with code {exit_code}",
    "error_stack": "Stopped: Python ran out of stack (the recursion went too deep)",
    "output_limit": "Stopped: it printed more than {stdout_bytes:bytes}",
    "output_limit_stderr": "Stopped: it wrote more than {stderr_bytes:bytes} to stderr",
    "timeout": "Stopped: it ran for more than {wall_seconds:seconds}",
    "input_wait": "Stopped: it waited for input for more than {input_wait_seconds:seconds}",
    "cpu_limit": "Stopped: it used more than {cpu_seconds:seconds} of CPU time",
    "memory_limit": "Stopped: it needed more than {memory_mb:mb} of memory",
    "disk_limit": "Stopped: its files went over the disk quota of {disk_mb:mb} or {max_files:files}",
    "cancelled": "Stopped: the run was cancelled",
    "host_calls_limit": "Stopped: it called the app's functions more than {host_calls} times",
    "host_bytes_limit": "Stopped: a call of the app's functions passed or returned more than {host_call_bytes:bytes}",
    "host_time_limit": "Stopped: the app's functions it called took more than {host_seconds:seconds}",
    "invalid_input": "Not run: its code, input or limits are not valid",
    "internal_error": "The sandbox failed internally",
}

_PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")


def end_line_key(status: str, *, limit: str | None = None, exit_code: int | None = None,
                 stream: str = "stdout") -> str:
    """Which of ``END_LINES`` a result gets (``render.js`` chooses the same way). ``stream`` is
    the stream that hit the output limit."""
    if status == "error":
        if limit == "stack":
            return "error_stack"
        return "error" if exit_code is None or exit_code == 1 else "error_exit"
    if status == "output_limit":
        return "output_limit_stderr" if stream == "stderr" else "output_limit"
    if status == "timeout" and limit == "input_wait":
        return "input_wait"
    return status if status in END_LINES else "internal_error"


def _missing(value: Any) -> bool:
    return not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value)


def _num(x: float) -> str:
    """``5.0`` -> ``5``, ``0.5`` -> ``0.5``: numbers as JavaScript writes them."""
    return str(int(x)) if float(x) == int(x) else repr(float(x))


def _seconds(s: Any) -> str:
    if _missing(s):
        return "the time limit"
    if s >= 120 and s % 60 == 0:
        return f"{_num(s / 60)} minutes"
    return f"{_num(s)} second{'' if s == 1 else 's'}"


def _bytes(n: Any) -> str:
    """A size as a person reads it: ``1 MB`` for 1 MiB, ``64 KB``, ``10 bytes``."""
    if _missing(n):
        return "the limit"
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{_num(n // size)} {unit}"
    return f"{_num(n)} byte{'' if n == 1 else 's'}"


def _mb(x: Any) -> str:
    return "the allowed amount" if _missing(x) else f"{_num(x)} MB"


def _files(n: Any) -> str:
    return "the allowed number of files" if _missing(n) else f"{_num(n)} file{'' if n == 1 else 's'}"


_FORMATS = {"seconds": _seconds, "bytes": _bytes, "mb": _mb, "files": _files}


def end_line(status: str, limits: Mapping[str, Any], *, limit: str | None = None,
             exit_code: int | None = None, stream: str = "stdout") -> str:
    """The end line of a run, without a final period: ``END_LINES`` filled in with ``limits``
    (a mapping of the run's limits by name; a missing one is named in words)."""
    values: dict[str, Any] = {**limits, "exit_code": exit_code}

    def fill(m: re.Match[str]) -> str:
        value: Any = values.get(m.group(1))
        kind = m.group(2)
        return _FORMATS[kind](value) if kind else ("?" if _missing(value) else _num(value))

    key = end_line_key(status, limit=limit, exit_code=exit_code, stream=stream)
    return _PLACEHOLDER.sub(fill, END_LINES[key])
