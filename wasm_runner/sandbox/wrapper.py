"""The guest-side wrapper (``guest/runner.py`` with the guest package) and what the host hands it.

The wrapper's program (``BOOT_SOURCE``) installs the guest package ``_wasm_runner_guest``
(``guest/install.py`` with the modules of ``GUEST_MODULES``: output, tracebacks, limits, figures,
program, explain, which the browser tier runs too; the rules of guest code: ``guest/__init__.py``) and
then runs ``guest/runner.py``. The guest starts ``python -c <loader>``; the loader runs the
wrapper from its marshalled code object and the package from its marshalled modules (both
compiled once per runtime and wrapper version by the guest itself, cached), and the wrapper then
reads jobs (``job``) from the control channel.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from importlib.resources import files as _pkg_files
from pathlib import Path
from typing import Any

from ..cache import cache_dir, private_file_ok
from ..limits import Limits
from ..result import Result

__all__ = ["ARGV0", "BOOT_SOURCE", "GUEST_INSTALLER", "GUEST_MODULES", "GUEST_SOURCES", "RunCode", "argv",
           "compiled_wrapper", "job"]

ARGV0 = "/usr/local/bin/python.wasm"
_GUEST = _pkg_files("wasm_runner") / "guest"
# the guest package, in the order its modules are installed (none imports another)
GUEST_MODULES = ("output", "tracebacks", "limits", "figures", "rich", "program", "explain")
GUEST_SOURCES = {name: (_GUEST / f"{name}.py").read_text() for name in GUEST_MODULES}
GUEST_INSTALLER = (_GUEST / "install.py").read_text()  # defines _wr_guest(sources, codes_file)
_CODES = "/wasm-runner/guest.bin"  # the package's modules compiled by the guest (compiled_wrapper)
# installs the package, leaves no name in __main__ (images check), then the runner: its last line
# is the call ``_wr_main()`` (images.wrapper_definitions)
BOOT_SOURCE = (
    GUEST_INSTALLER
    + f"_wr_guest({GUEST_SOURCES!r}, {_CODES!r})\ndel _wr_guest\n"
    + (_GUEST / "runner.py").read_text()
)
# the window-less turtle (guest/lib/turtle.py) ships in the wrapper's folder: /wasm-runner/turtle.py
TURTLE_SOURCE = (_pkg_files("wasm_runner") / "guest" / "lib" / "turtle.py").read_text()
_BOOT_LOADER = "exec(__import__('marshal').loads(open('/wasm-runner/boot.bin', 'rb').read()))"  # no name left in __main__


def argv(boot: Path | None) -> list[str]:
    """The guest's command line: the cached wrapper's loader, or (bootstrapping) its source."""
    if boot is None:
        return [ARGV0, "-c", BOOT_SOURCE]
    return [ARGV0, "-c", _BOOT_LOADER]


RunCode = Callable[[str, "dict[str, bytes]", Limits], Result]  # (code, files, limits) -> how it ended


def compiled_wrapper(module_sha256: str, run: RunCode) -> Path:
    """A folder holding the wrapper as the guest's own marshalled code object, made by ``run``
    (a run on the runtime whose module has that SHA-256) the first time.

    Compiling the wrapper inside the guest costs ~10 ms of CPU on every run; the guest
    compiles it once (per runtime and wrapper version) and later runs load the code object.
    """
    digest = hashlib.sha256((BOOT_SOURCE + TURTLE_SOURCE).encode()).hexdigest()[:16]
    d = cache_dir() / f"boot-{module_sha256[:16]}-{digest}"
    target = d / "boot.bin"
    if private_file_ok(target):
        return d
    code = (
        "import marshal, base64, json, sys\n"
        "src = open('/scratch/runner.py').read()\n"
        "mods = json.load(open('/scratch/guest.json'))\n"
        "codes = {name: compile(s, '<wasm-runner>', 'exec') for name, s in mods.items()}\n"
        "sys.stdout.write(base64.b64encode(marshal.dumps(compile(src, '<wasm-runner>', 'exec'))).decode()\n"
        "                 + '\\n' + base64.b64encode(marshal.dumps(codes)).decode())"
    )
    res = run(code, {"runner.py": BOOT_SOURCE.encode(), "guest.json": json.dumps(GUEST_SOURCES).encode()},
              Limits(cpu_seconds=60, wall_seconds=120, stdout_bytes=8 << 20))
    if not res.ok:
        raise RuntimeError(f"could not compile the guest wrapper: {res.status}: {res.stderr[-500:]}")
    boot, _, guest = res.stdout.partition("\n")
    d.mkdir(mode=0o700, exist_ok=True)
    tmp = d / f".turtle.{os.getpid()}.tmp"
    tmp.write_text(TURTLE_SOURCE)
    os.replace(tmp, d / "turtle.py")  # before boot.bin: a folder with boot.bin is complete
    _write_private(d / "guest.bin", base64.b64decode(guest))
    _write_private(target, base64.b64decode(boot))
    return d


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def job(code: str, limits: Limits, fuel: int, filename: str | None, *, once: bool,
        session: bool, display: bool | str, memory_cap: int | None = None) -> dict[str, Any]:
    """One program for the wrapper, with the budgets armed at its hand-over. ``memory_cap``:
    the store's linear-memory cap (``Sandbox.memory_cap``; the run's own memory_mb alone when
    not given)."""
    return {
        "code": code,
        "filename": filename or "<string>",
        "cwd": "/scratch",
        "once": once,
        "session": session,
        "display": display,
        "budget": {"fuel": fuel, "wall": limits.wall_seconds,
                   "memory": limits.memory_bytes if memory_cap is None else memory_cap,
                   "input_wait": limits.input_wait_seconds},
    }
