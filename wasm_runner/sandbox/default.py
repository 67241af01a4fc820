"""The process-wide sandboxes (one per runtime) behind ``wasm_runner.run``."""

from __future__ import annotations

import atexit
import os
import threading

from ..images import DEFAULT_IMAGE
from ..limits import Limits
from ..result import Result
from .core import Sandbox

__all__ = ["close_default_sandboxes", "default_sandbox", "default_sandboxes", "run"]

_default_sandboxes: dict[tuple[str, str | None], Sandbox] = {}
_default_lock = threading.Lock()


@atexit.register
def close_default_sandboxes() -> None:
    """Warm slots and run folders of the process-wide sandboxes go with the process."""
    with _default_lock:
        boxes = list(_default_sandboxes.values())
        _default_sandboxes.clear()
    for sb in boxes:
        sb.close()


def default_sandbox(runtime: str | None = None, image: str | None = None) -> Sandbox:
    """The process-wide sandbox of ``runtime`` (and ``image``, default runtime only), made on
    first use."""
    name = runtime or "default"
    if name == "default":
        image = image or DEFAULT_IMAGE
    with _default_lock:
        sb = _default_sandboxes.get((name, image))
        if sb is None:
            sb = _default_sandboxes[(name, image)] = Sandbox(name, image=image)
        return sb


def default_sandboxes() -> list[Sandbox]:
    """The process-wide sandboxes made so far."""
    with _default_lock:
        return list(_default_sandboxes.values())


def run(
    code: str,
    *,
    stdin: bytes | str | None = None,
    limits: Limits | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    runtime: str | None = None,
) -> Result:
    """Run ``code`` once in a fresh sandbox of ``runtime`` (``default`` or ``small``)."""
    return default_sandbox(runtime).run(code, stdin=stdin, limits=limits, data_dir=data_dir, out_dir=out_dir)
