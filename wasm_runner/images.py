"""Images: our own pre-initialized modules of the default runtime.

An image is the runtime's module with a memory that already holds what every run would do
first. ``plain`` is the runtime's own snapshot with CPython's C-stack window corrected (a pure
rewrite of its memory image, nothing is run). ``datascience`` starts ``plain``, runs its set-up
through the ``turn`` export (numpy, pandas and matplotlib (Agg) imported and exercised once, the
guest wrapper defined), and is written from that instance's memory (``preinit.write_image``).
Both are cached by the hash of everything that went in.
Every run still gets a brand-new instance of that module; the image only decides what memory
it starts with (copy-on-write from the compiled module, so untouched pages cost nothing).

What a restored instance needs from the host, and gets from ``sandbox``:

- the same preopens at the same fd numbers as the snapshotting run (the wasi-libc preopen table
  lives in linear memory): every image run has the warm-slot layout, ``/data`` and ``/out``
  included, hidden when a run does not ask for them;
- an entry through ``turn`` for an image made by running code (the runtime's ``run`` may be
  called once, never after ``turn``); ``plain`` is entered through ``run`` like the runtime;
- fresh randomness: the wrapper reseeds ``random``, numpy's global generator and
  ``tempfile``'s name sequence at the first job (``guest/runner.py``).

The snapshotting run must leave nothing behind: no open fd beyond stdio and the preopens (the
build fails otherwise), no name in ``__main__`` other than the wrapper's entry, and its files are
in a run folder that is removed after.

CPython's C-stack window: the runtime's interpreter computed, once, a 128 KiB window below the
stack pointer of its first start (``c_stack_soft_limit``/``c_stack_hard_limit``), far smaller
than the 16 MiB linear-memory stack. Each image sets it to ``C_STACK_WINDOW`` (the engine's
``max_wasm_stack`` is sized so the native wasm stack outlasts it: recursion ends as a clean
``RecursionError``, see engine.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wasmtime as wt

from . import preinit as snap
from .cache import build_lock, cache_dir, private_file_ok
from .errors import WasmRunnerError
from .runtimes import Runtime

__all__ = [
    "COMMAND_STACK",
    "C_RECURSION_LIMIT",
    "C_STACK_WINDOW",
    "DEFAULT_IMAGE",
    "ENTRY",
    "FORMAT",
    "IMAGES",
    "ImageBuildFailed",
    "RESIDENT_MB",
    "SETUP_CPU_S",
    "check_name",
    "command_path",
    "ensure",
    "ensure_command",
    "finish_image",
    "image_key",
    "image_names",
    "image_path",
    "image_runtime",
    "memory_of_module",
    "patch_c_recursion_limit",
    "ready",
    "relocate_stack",
    "run_setup",
    "setup_code",
    "via_turn",
    "wrapper_definitions",
]

FORMAT = 1  # bump when the way an image is made changes

# name -> what its set-up imports (after the wrapper is defined); ``plain`` runs nothing
IMAGES: dict[str, tuple[str, ...]] = {
    "plain": (),
    "datascience": ("numpy", "pandas", "matplotlib", "matplotlib.pyplot"),
}


def via_turn(name: str) -> bool:
    """Whether instances of the image are entered through ``turn`` (their interpreter ran)."""
    return name != "plain"
DEFAULT_IMAGE = "plain"

# What a live instance of an image costs in resident memory beyond what its program adds: the
# image's pages it writes (copy-on-write; pages only read stay shared with every other instance).
# Measured with `wasm-runner bench` (docs/performance.md): plain 6 MiB idle; datascience 13 MiB
# idle, 33 MiB after a pandas groupby. The HTTP server's memory budget reserves memory_mb plus this.
RESIDENT_MB = {"plain": 8, "datascience": 34}

# The C stack CPython may use below the stack's top. 2 MiB holds about 4000 levels of
# functools.cache recursion (500 bytes of linear-memory stack a level), 950 of sorted(key=...)
# recursion (2.2 KB a level), well past what the default recursion limit (1000) lets Python
# code reach; the native wasm stack a level is at most ~4x the linear-memory stack measured.
C_STACK_WINDOW = 2 << 20

_WARM = {
    # exercised once so a run's first use does not pay for lazy imports and caches
    "datascience": (
        "import numpy as _np, pandas as _pd, matplotlib.pyplot as _plt\n"
        "_df = _pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1.0, 2.0, 3.0]})\n"
        "_df.groupby('k')['v'].agg(['sum', 'mean']); _df.describe(); repr(_df); _df._repr_html_()\n"
        "_fig, _ax = _plt.subplots(); _ax.plot([1, 2], [3, 4]); _ax.set_title('t')\n"
        "import io as _io; _fig.savefig(_io.BytesIO(), format='png'); _plt.close('all')\n"
        "_np.random.default_rng(0).normal(size=3)\n"
    ),
}


class ImageBuildFailed(WasmRunnerError, RuntimeError):
    """The snapshotting run did not end as it must (its output says why)."""


def image_names() -> list[str]:
    return list(IMAGES)


def check_name(name: str) -> str:
    if name not in IMAGES:
        raise ValueError(f"unknown image {name!r}; choose one of: {', '.join(IMAGES)}")
    return name


def wrapper_definitions(boot_source: str) -> str:
    """The guest wrapper without its last line (the call): the image defines ``_wr_main``."""
    lines = boot_source.rstrip().splitlines()
    if not lines or lines[-1].strip() != "_wr_main()":
        raise ImageBuildFailed("the guest wrapper does not end with its call")
    return "\n".join(lines[:-1]) + "\n"


def setup_code(name: str, boot_source: str) -> str:
    """What the snapshotting ``turn`` runs in ``__main__``: it leaves only ``_wr_main`` there."""
    preload = IMAGES[name]
    warm = _WARM.get(name, "")
    return (
        "def _wr_image():\n"
        "    import os, sys, gc\n"
        "    os.environ.update({'HOME': '/scratch', 'LANG': 'C.UTF-8', 'MPLBACKEND': 'Agg', 'MPLCONFIGDIR': '/tmp'})\n"
        f"    for name in {preload!r}:\n"
        "        __import__(name)\n"
        "    if 'matplotlib' in sys.modules:\n"
        "        sys.modules['matplotlib'].use('agg')\n"
        f"    exec(compile({warm!r}, '<wasm-runner-image>', 'exec'), {{'__name__': '_wr_image'}})\n"
        "    fm = sys.modules.get('matplotlib.font_manager')\n"
        "    if fm is not None and hasattr(fm, '_get_font'):\n"
        "        fm._get_font.cache_clear()  # its fonts hold files open: a run opens its own\n"
        "    gc.collect()\n"
        "_wr_image()\n"
        "del _wr_image\n"
        f"exec(compile({wrapper_definitions(boot_source)!r}, '<wasm-runner>', 'exec'))\n"
    )


ENTRY = b"_wr_main()\n"  # what a restored instance's turn runs

# CPU seconds an image's set-up run takes with Cranelift's code (for the estimates of
# sandbox.default.prepare_estimate; measured, docs/performance.md)
SETUP_CPU_S = {"datascience": 4.0}


def image_key(rt: Runtime, name: str, boot_source: str) -> str:
    h = hashlib.sha256()
    wrapper = boot_source if via_turn(name) else ""
    for part in (f"format={FORMAT}", rt.module_sha256, name, repr(IMAGES[name]), _WARM.get(name, ""),
                 wrapper, f"window={C_STACK_WINDOW}",
                 hashlib.sha256(Path(snap.__file__).read_bytes()).hexdigest()):
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


def image_path(rt: Runtime, name: str, boot_source: str) -> Path:
    return cache_dir() / f"image-{rt.name}-{name}-{image_key(rt, name, boot_source)[:24]}.wasm"


def image_runtime(rt: Runtime, name: str, path: Path) -> Runtime:
    """The runtime description of an image: same build, the image's module. Its SHA-256 was
    recorded next to it when it was written (the private cache is trusted as for compiled
    modules; a compile hashes the module again)."""
    digest = _sidecar(path).read_text().strip()
    return dataclasses.replace(rt, name=f"{rt.name}-{name}", module=path, module_sha256=digest)


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def ready(path: Path) -> bool:
    return private_file_ok(path) and private_file_ok(_sidecar(path))


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def memory_of_module(module: bytes) -> bytearray:
    """The linear memory a fresh instance of ``module`` starts with (its data segments)."""
    lim = snap.memory_of(module)
    mem = bytearray(lim.min_pages * snap.PAGE)
    for seg in snap.data_segments(module):
        mem[seg.offset:seg.offset + len(seg.data)] = seg.data
    return mem


_build_locks: dict[str, threading.Lock] = {}
_build_guard = threading.Lock()


def ensure(rt: Runtime, name: str, boot_source: str,
           snapshot_run: Callable[[Runtime, bytes], tuple[bytes, dict[str, Any]]] | None = None,
           progress: Callable[[str], None] | None = None) -> Path:
    """The image's module file: cached, else made. ``plain`` is a rewrite of the runtime's
    module; any other image needs ``snapshot_run(plain_runtime, code)``, which runs the set-up
    code through ``turn`` in a fresh instance of ``plain`` and returns its memory and a report."""
    check_name(name)
    path = image_path(rt, name, boot_source)
    if ready(path):
        return path
    with _build_guard:
        lock = _build_locks.setdefault(str(path), threading.Lock())
    with lock, build_lock(path):  # one thread, and one process sharing the cache, makes it
        if ready(path):
            return path
        say = progress or (lambda m: None)
        t0 = time.monotonic()
        if name == "plain":
            module = rt.module.read_bytes()
            if hashlib.sha256(module).hexdigest() != rt.module_sha256:
                raise ImageBuildFailed(f"{rt.module} changed after it was verified")
            memory = memory_of_module(module)
        else:
            if snapshot_run is None:
                raise ImageBuildFailed(f"the {name} image needs a snapshotting run")
            plain = image_runtime(rt, "plain", ensure(rt, "plain", boot_source, None, progress))
            say(f"building the {name} image of the {rt.name} runtime (once; cached in {path.parent})")
            mem, _report = snapshot_run(plain, setup_code(name, boot_source).encode())
            memory = bytearray(mem)
            module = plain.module.read_bytes()
            if hashlib.sha256(module).hexdigest() != plain.module_sha256:
                raise ImageBuildFailed(f"{plain.module} changed after it was written")
        data = finish_image(module, memory)
        _write_private(path, data)
        _write_private(_sidecar(path), hashlib.sha256(data).hexdigest().encode())
        if name != "plain":
            say(f"built the {name} image in {time.monotonic() - t0:.1f} s "
                f"({len(memory) >> 20} MiB of memory, {len(data) >> 20} MiB module)")
        return path


def finish_image(module: bytes, memory: bytearray) -> bytes:
    """The image module from the snapshotting instance's memory: the dead stack cleared, the
    C-stack window set, the memory written as data segments."""
    secs = snap.sections(module)
    gl = snap.globals_of(module, secs)
    if snap.imported_globals(module, secs):
        raise ImageBuildFailed("the runtime imports globals; not supported")
    mutable = [i for i, g in enumerate(gl) if g.mutable]
    # wasm-ld's only mutable global is the stack pointer (global 0); an export that returned
    # has restored it, so its captured value is its initial value.
    if mutable != [0]:
        raise ImageBuildFailed(f"the runtime has mutable globals {mutable}; only the stack pointer is supported")
    stack_top = gl[0].const_value()
    segs = snap.data_segments(module, secs)
    # stack-first layout: the stack is [0, stack_top) and the data lies above it (a Wizer
    # snapshot may also hold the dead top of the stack: tolerate a segment in its last 64 KiB)
    if stack_top is None or not segs or min(s.offset for s in segs) < stack_top - (64 << 10):
        raise ImageBuildFailed("the runtime's stack is not below its data (stack-first layout expected)")
    # the stack below the pointer is dead after the export returned: keep it out of the image
    memory[0:stack_top] = bytes(stack_top)
    found = snap.c_stack_fields(memory, stack_top)
    if len(found) != 1:
        raise ImageBuildFailed(f"expected one thread state's C-stack bounds, found {len(found)}")
    snap.set_c_stack_window(memory, found[0], stack_top, C_STACK_WINDOW)
    # the rewritten memory must stand alone: no data segment beyond its end
    if len(memory) % snap.PAGE:
        raise ImageBuildFailed("the memory is not a whole number of pages")
    return snap.write_image(module, memory)


def run_setup(engine: wt.Engine, fuel: bool, pre: Any, code: bytes, layout: Callable[[], Any],
              start: Callable[[Callable[[], None]], None]) -> tuple[bytes, dict[str, Any]]:
    """Run ``code`` through ``turn`` in a fresh instance of ``pre`` (an instance-pre of
    ``engine``, metering fuel or not) on a guest thread (``start`` runs a function on one);
    return its memory and a report.
    ``layout`` makes the run folder and grants every image run will have (same fd numbers)."""
    from . import engine as _engine
    from .wasi import GuestIO, current

    out: dict[str, Any] = {}

    def body() -> None:
        ws = layout()
        io = GuestIO(ws.grants, ws.quota, ["/usr/local/bin/python.wasm"])
        io.stdout.cap = io.stderr.cap = 1 << 20
        io.deadline = time.monotonic() + 600
        fds_before = sorted(io.fds)
        store = wt.Store(engine)
        current.io = io
        try:
            if fuel:
                store.set_fuel(10**13)
            _engine.watch(store, io.should_stop)
            inst = pre.instantiate(store)
            ex = inst.exports(store)
            mem = ex["memory"]
            io.memory = mem
            p = ex["host_alloc"](store, len(code)) & 0xFFFFFFFF
            if not p:
                raise ImageBuildFailed("the guest could not allocate the set-up code")
            mem.write(store, code, p)
            value = ex["turn"](store, p, len(code))
            if value != 0 or io.stop_reason is not None:
                raise ImageBuildFailed(f"the set-up ended with {value!r} ({io.stop_reason}): "
                                       f"{io.stderr.text()[-2000:]}{io.stdout.text()[-500:]}")
            if sorted(io.fds) != fds_before:
                left = {fd: "/".join(io.fds[fd].parts) for fd in set(io.fds) - set(fds_before)}
                raise ImageBuildFailed(f"the set-up left files open: {left}")
            out["memory"] = mem.read(store, 0, mem.data_len(store))
            out["report"] = {"stdout": io.stdout.text(), "stderr": io.stderr.text(),
                             "fuel": (10**13 - store.get_fuel()) if fuel else None}
        except BaseException as e:  # noqa: BLE001 - reported on the caller's thread
            out["error"] = e
        finally:
            io.memory = None
            current.io = None
            store.close()
            io.close()
            ws.close()

    finished = threading.Event()

    def guarded() -> None:
        try:
            body()
        finally:
            finished.set()

    start(guarded)
    finished.wait()
    if "error" in out:
        err = out["error"]
        if isinstance(err, ImageBuildFailed):
            raise err
        raise ImageBuildFailed(f"the set-up run failed: {type(err).__name__}: {err}") from err
    return out["memory"], out["report"]


# ---- command modules: a larger linear-memory stack ----------------------------------------------
# The small runtime (a WASI command, CPython 3.12) was linked with a 512 KiB stack at the bottom of
# its memory (stack-first): recursion through C-level callables overflows it before 100 levels and
# traps out of bounds. A rewrite gives it a stack of its own above the module's initial memory;
# the heap keeps its place below (wasi-libc's allocator starts at __heap_base and takes new
# memory only through memory.grow, which lands above the new stack). CPython 3.12 bounds C
# recursion by counting (Py_C_RECURSION_LIMIT) and Python recursion by sys.getrecursionlimit(),
# both reached long before 16 MiB at the measured ~7 KB of stack a level.
COMMAND_STACK = 16 << 20


def command_path(rt: Runtime) -> Path:
    h = hashlib.sha256(f"format={FORMAT}|{rt.module_sha256}|stack={COMMAND_STACK}|climit={C_RECURSION_LIMIT}|".encode())
    h.update(hashlib.sha256(Path(snap.__file__).read_bytes()).digest())
    return cache_dir() / f"image-{rt.name}-stack-{h.hexdigest()[:24]}.wasm"


def ensure_command(rt: Runtime) -> Path:
    """The command module with its stack moved to a ``COMMAND_STACK`` region of its own."""
    path = command_path(rt)
    if ready(path):
        return path
    with _build_guard:
        lock = _build_locks.setdefault(str(path), threading.Lock())
    with lock, build_lock(path):
        if ready(path):
            return path
        module = rt.module.read_bytes()
        if hashlib.sha256(module).hexdigest() != rt.module_sha256:
            raise ImageBuildFailed(f"{rt.module} changed after it was verified")
        data = relocate_stack(patch_c_recursion_limit(module), COMMAND_STACK)
        _write_private(path, data)
        _write_private(_sidecar(path), hashlib.sha256(data).hexdigest().encode())
        return path


def relocate_stack(module: bytes, stack_bytes: int) -> bytes:
    """``module`` (stack-first layout, its stack pointer global 0) with a stack of
    ``stack_bytes`` above its initial memory; its data and heap stay where they are."""
    secs = snap.sections(module)
    gl = snap.globals_of(module, secs)
    mutable = [i for i, g in enumerate(gl) if g.mutable]
    if mutable != [0] or gl[0].valtype != 0x7F:
        raise ImageBuildFailed(f"expected one mutable i32 global (the stack pointer), found {mutable}")
    sp = gl[0].const_value()
    segs = snap.data_segments(module, secs)
    # stack-first; a module pre-initialized by Wizer (this one was, by wasi-vfs) may also hold
    # the dead top of its stack as data: tolerate that in the stack's last 64 KiB
    if sp is None or not segs or min(s.offset for s in segs) < sp - (64 << 10):
        raise ImageBuildFailed("the module's stack is not below its data (stack-first layout expected)")
    if stack_bytes % snap.PAGE:
        raise ImageBuildFailed("the stack size must be whole pages")
    memory = memory_of_module(module)
    top = len(memory) + stack_bytes
    memory += bytes(stack_bytes)
    return snap.write_image(module, memory, {0: top})


# CPython 3.12.0 counts C recursion in tstate->c_recursion_remaining, set once per thread state
# to C_RECURSION_LIMIT: 1500 in release builds, 500 in this build (a Py_DEBUG-style value: about
# 165 levels of functools.cache recursion, three units a level). init_threadstate stores it right
# after the Python recursion counters; this is that store in the small runtime's code. The new
# value keeps the instruction's length (two LEB128 bytes), so the code section is otherwise
# unchanged. 1500 units use about 2.6 MB of the 16 MiB stack (1.7 KB a unit measured).
C_RECURSION_LIMIT = 1500
_C_LIMIT_STORE = bytes.fromhex("3602 10 2000 28020c".replace(" ", ""))  # py_recursion_remaining = ...; tstate->
_C_LIMIT_OLD = bytes.fromhex("41f403 360218")  # i32.const 500; i32.store offset=24 (c_recursion_remaining)


def patch_c_recursion_limit(module: bytes) -> bytes:
    """``module`` with init_threadstate's C recursion limit raised to ``C_RECURSION_LIMIT``, when
    the store is found exactly once (else ``module`` as it is)."""
    secs = snap.sections(module)
    code = next((x for x in secs if x.id == snap.SEC_CODE), None)
    if code is None:
        return module
    needle = _C_LIMIT_STORE + _C_LIMIT_OLD
    at = module.find(needle, code.start, code.end)
    if at < 0 or module.find(needle, at + 1, code.end) >= 0:
        return module
    new = b"\x41" + snap.enc_sleb(C_RECURSION_LIMIT)
    if len(new) != 3:  # the same length as i32.const 500: two LEB128 bytes (values up to 8191)
        raise ImageBuildFailed("the C recursion limit does not fit the instruction")
    pos = at + len(_C_LIMIT_STORE)
    return module[:pos] + new + module[pos + len(new):]

