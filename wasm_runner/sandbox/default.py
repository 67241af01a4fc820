"""The process-wide sandboxes (one per runtime and image) behind ``wasm_runner.run`` and the
server, and how long making one would take here (``prepare_estimate``, for ``warmup``).

The quick tier (the server's first start, ``quick_first``): while the Cranelift module of a
default-runtime sandbox is not compiled, the process-wide sandbox is first made with the quick
compiler (``engine.QUICK``, Winch: about a quarter of the compile time, slower code, with fuel),
and a thread makes the Cranelift one behind it; once that is ready it replaces the quick one
for every new run, and the quick one is retired: its prestarted instances are dropped (never
used for a run), and its module is freed once the runs and sessions already on it have ended.
The small runtime compiles in seconds: no quick tier."""

from __future__ import annotations

import atexit
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path

from .. import engine, images
from ..host_functions import HostFunction, HostFunctions
from ..images import DEFAULT_IMAGE
from ..network import RunNetwork
from ..limits import Limits
from ..result import Result
from ..runtimes import Runtime, get_runtime
from . import wrapper
from .core import Sandbox

__all__ = ["close_default_sandboxes", "default_sandbox", "default_sandboxes", "is_made", "prepare_estimate", "run",
           "sandbox_key"]

log = logging.getLogger("wasm_runner.sandbox")

_default_sandboxes: dict[tuple[str, str | None], Sandbox] = {}
_default_lock = threading.Lock()
_making: dict[tuple[str, str | None], threading.Lock] = {}  # one maker per key; others wait


@atexit.register
def close_default_sandboxes() -> None:
    """Warm slots and run folders of the process-wide sandboxes go with the process."""
    with _default_lock:
        boxes = list(_default_sandboxes.values())
        _default_sandboxes.clear()
    for sb in boxes:
        sb.close()


def sandbox_key(runtime: str | None = None, image: str | None = None) -> tuple[str, str | None]:
    """(runtime, image) as the process-wide sandboxes are keyed: the default runtime's image
    named (its default when None), no image for the others."""
    name = runtime or "default"
    return (name, image or DEFAULT_IMAGE) if name == "default" else (name, None)


def default_sandbox(runtime: str | None = None, image: str | None = None, *, quick_first: bool = False) -> Sandbox:
    """The process-wide sandbox of ``runtime`` (and ``image``, default runtime only), made on
    first use. Making one (a compile, the first time on a machine) holds up only callers of the
    same runtime and image. ``quick_first`` (the server): the quick tier while Cranelift's
    module is compiled (see the module's docstring)."""
    key = sandbox_key(runtime, image)
    with _default_lock:
        sb = _default_sandboxes.get(key)
        if sb is not None:
            return sb
        making = _making.setdefault(key, threading.Lock())
    with making:
        with _default_lock:
            sb = _default_sandboxes.get(key)
        if sb is None:
            quick = quick_first and key[0] == "default" and prepare_estimate(*key) > 0
            sb = Sandbox(key[0], image=key[1], compiler=engine.QUICK if quick else engine.CRANELIFT)
            with _default_lock:
                _default_sandboxes[key] = sb
            if quick:
                log.warning("the %s/%s runtime runs on its quick tier (Winch) while Cranelift compiles it", *key)
                threading.Thread(target=_replace_quick, args=(key, sb), name=f"wasm-runner-cranelift-{key[1]}",
                                 daemon=True).start()  # fmt: skip
        return sb


def _replace_quick(key: tuple[str, str | None], quick: Sandbox) -> None:
    """Make the Cranelift sandbox of ``key`` and put it in place of ``quick`` for new runs."""
    try:
        full = Sandbox(key[0], image=key[1])
    except Exception:  # noqa: BLE001 - the quick tier goes on serving; the log says why
        log.error("compiling the %s/%s runtime with Cranelift failed; its quick tier goes on", *key, exc_info=True)
        return
    with _default_lock:
        ending = _default_sandboxes.get(key) is not quick  # closed meanwhile: the process is ending
        if not ending:
            _default_sandboxes[key] = full
    if ending:
        full.close()
        return
    quick.retire()  # its prestarted instances are never handed to a run; its module goes with it
    log.warning("the %s/%s runtime now runs Cranelift's code (its quick tier is retired)", *key)


def is_made(runtime: str | None = None, image: str | None = None) -> bool:
    """Whether the process-wide sandbox of ``runtime`` and ``image`` exists already."""
    with _default_lock:
        return sandbox_key(runtime, image) in _default_sandboxes


def prepare_estimate(runtime: str | None = None, image: str | None = None, *, quick_first: bool = False) -> float:
    """About how many seconds making the process-wide sandbox of ``runtime`` and ``image`` takes
    on this machine now: 0 when it is made or its module is compiled; else the compile (the
    quick tier's with ``quick_first``, default runtime), and for an image made by running code
    and not built yet, the set-up run (after a quick compile when the plain image is not
    compiled either) before it."""
    name, image = sandbox_key(runtime, image)
    if is_made(name, image):
        return 0.0
    rt = get_runtime(name)
    size = rt.module.stat().st_size
    if image is None:  # a command runtime: its module with a larger stack (images.ensure_command)
        return _compile_left(rt, images.command_path(rt), "stack", size)
    compiler = engine.QUICK if quick_first else engine.CRANELIFT
    path = images.image_path(rt, image, wrapper.BOOT_SOURCE)
    if not images.via_turn(image) or images.ready(path):
        return _compile_left(rt, path, image, size, compiler)
    plain = images.image_path(rt, "plain", wrapper.BOOT_SOURCE)
    setup = images.SETUP_CPU_S.get(image, 10.0)
    if not quick_first and images.ready(plain) and engine.is_compiled(images.image_runtime(rt, "plain", plain)):
        before = engine.cpu_estimate(setup, parallel=False)
    else:
        before = engine.compile_estimate(size, engine.QUICK) + engine.cpu_estimate(
            setup * engine.QUICK_SLOWDOWN, parallel=False)
    return before + engine.compile_estimate(size, compiler)  # the image's module: about the runtime's size


def _compile_left(rt: Runtime, path: Path, name: str, size: int, compiler: str = engine.CRANELIFT) -> float:
    if images.ready(path) and engine.is_compiled(images.image_runtime(rt, name, path)):
        return 0.0
    return engine.compile_estimate(size, compiler)


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
    functions: Mapping[str, HostFunction] | HostFunctions | None = None,
    network: RunNetwork | None = None,
) -> Result:
    """Run ``code`` once in a fresh sandbox of ``runtime`` (``default`` or ``small``).
    ``functions``: the app's functions the code may call (``from host import name``);
    ``network``: where it may connect (``network.RunNetwork``; none: the network is off)."""
    return default_sandbox(runtime).run(code, stdin=stdin, limits=limits, data_dir=data_dir, out_dir=out_dir,
                                        functions=functions, network=network)
