"""Engines, compiled modules (cached on disk), the epoch ticker and each store's deadline check.

One engine per (fuel on/off, compiler) setting per process. A compiled module is cached as a
``.cwasm`` in the private cache folder, keyed by the module's SHA-256, wasmtime's version and the
engine settings; the first compile takes about a minute and shows progress. Processes sharing
the cache folder never compile one module at once: the second waits for the first's file lock
and loads what it wrote.

Wall-clock limits: a ticker thread advances every engine's epoch each ``TICK_S``; every store
asks to be called back at each tick (``watch``), and the callback ends the guest when its
``GuestIO`` says so (deadline passed, cancelled, output cap reached, ...). This is how host code
stops a guest without raising through wasmtime.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import wasmtime as wt
from wasmtime import _ffi as ffi

from .cache import build_lock, cache_dir, private_file_ok
from .environment import ALLOCATOR
from .runtimes import Runtime

__all__ = [
    "COMPILE_CPU_S_PER_MIB", "CRANELIFT", "QUICK", "QUICK_SLOWDOWN", "TICK_S", "compile_estimate",
    "cpu_estimate", "get_engine", "get_module", "is_compiled", "module_cache_path", "quick_module",
    "retained_bytes", "watch",
]

TICK_S = 0.01
# The native stack wasm code may use (wasmtime's max_wasm_stack; its default is 512 KiB). Guests
# run on threads with a 32 MiB stack (sandbox.GUEST_STACK), so host calls keep 8 MiB below it.
# It must outlast CPython's own C-stack window (images.C_STACK_WINDOW, 2 MiB of linear-memory
# stack): a level of C recursion uses at most ~4x as much native stack as linear-memory stack,
# so the interpreter raises RecursionError long before wasmtime would trap. wasmtime counts this
# from where wasm is entered, so wasm may only run on threads with a larger stack: guest threads
# (sandbox.guest.start_thread). On a default 8 MiB thread a runaway recursion would hit the guard
# page (a crash of the host process) instead of a clean stack-overflow trap.
MAX_WASM_STACK = 24 << 20

# How modules are compiled (docs/security.md, "How the runtimes are compiled"; figures in
# docs/performance.md, "Compiling the runtimes").
# Every module a run uses is compiled by Cranelift, wasmtime's optimising compiler, at its default
# optimisation level, with wasmtime's parallel compilation (one function per core at a time).
# QUICK: Winch, wasmtime's baseline compiler, compiles with a fraction of Cranelift's CPU time
# (16% for the small runtime, 12-28% for the default runtime's images), into code ~1.3-1.9x
# slower for the same fuel. Since wasmtime 50 it compiles the default runtime with fuel metering
# (49 failed: "Illegal fuel state"). Its modules are never cached to disk and serve two things:
# - the run that builds an image from our own set-up code (images.py), without fuel (the wall
#   deadline holds), when the Cranelift module it would otherwise need is not compiled yet;
# - the quick tier of serve's first start (sandbox/default.py, ``quick_first``): runs of the
#   default runtime, with fuel, from a Winch module while Cranelift compiles the module behind
#   it; new runs move to Cranelift's code when it is ready. A CPU limit counts the same wasm
#   operations (fuel) with either, so on the quick tier it allows up to ~2x the CPU time; the
#   wall limit holds as always (docs/security.md, "How the runtimes are compiled").
CRANELIFT = "cranelift"
QUICK = "winch"
_WASMTIME_STRATEGY = {CRANELIFT: 1, QUICK: 2}  # wasmtime_strategy_t (wasmtime-py: auto/cranelift only)

_lock = threading.Lock()
_engines: dict[tuple[bool, str], wt.Engine] = {}
_modules: dict[tuple[bool, str], wt.Module] = {}
_compiling: dict[tuple[bool, str], threading.Lock] = {}


def _config(fuel: bool, compiler: str = CRANELIFT) -> wt.Config:
    cfg = wt.Config()
    ffi.wasmtime_config_strategy_set(cfg.ptr(), _WASMTIME_STRATEGY[compiler])
    cfg.parallel_compilation = True
    cfg.consume_fuel = fuel
    cfg.epoch_interruption = True
    cfg.wasm_exceptions = True
    cfg.memory_init_cow = True
    set_async_stack_size(cfg, MAX_WASM_STACK)  # wasmtime refuses a max_wasm_stack above it
    cfg.max_wasm_stack = MAX_WASM_STACK
    if compiler == CRANELIFT:  # the quick engine serves first-start runs only: no pool of slots
        use_pooling(cfg)
    else:  # wasmtime 50's Winch refuses the modules (exception types) without it
        cfg.gc_support = True
    return cfg


# The pooling allocator: instances take pre-reserved slots instead of mapping (and unmapping) a
# 4 GiB reservation each; a released slot keeps its module's image mapped for the next instance
# of the same module (WARM_SLOTS such slots are preferred) and gives its written pages back
# (isolation is wasmtime's guarantee and the sandbox tests check it). KEEP_RESIDENT is what a
# released slot keeps resident instead, reset for reuse: wasmtime keeps it for EVERY slot ever
# used, not only the warm ones, so idle RSS grew to peak instances x KEEP_RESIDENT and closing
# sessions raised it (issue 20: 128 MiB gave 840 MB idle after 8 sessions, against 88 MB with 0),
# and resetting 128 MiB cost each run time too. With 0 nothing stays resident after an instance
# (retained_bytes), and fresh runs were as fast as or faster than on-demand allocation here
# (benchmarks/allocator.py; docs/performance.md). SLOTS bounds the instances alive at once per
# engine (address space only: 4 GiB each, never committed).
POOL_SLOTS = 400
POOL_WARM_SLOTS = 2
POOL_KEEP_RESIDENT = 0


def retained_bytes() -> int:
    """The most memory the instance allocator keeps resident between instances, per engine (the
    memory budget counts it): released slots keep ``POOL_KEEP_RESIDENT`` each, at most
    ``POOL_SLOTS`` of them; nothing with the on-demand allocator."""
    if ALLOCATOR.raw() == "ondemand":
        return 0
    return POOL_SLOTS * POOL_KEEP_RESIDENT


def use_pooling(cfg: wt.Config) -> bool:
    """Switch ``cfg`` to the pooling allocator through wasmtime's C API (wasmtime-py has no
    wrapper for it); False (on-demand allocation) when this wasmtime lacks those calls or
    ``WASM_RUNNER_ALLOCATOR=ondemand``."""
    if ALLOCATOR.raw() == "ondemand":
        return False
    try:  # the slots are reserved address space (never committed) when the engine is made; a
        # capped address space would make wasmtime abort the process rather than fail
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            return False
    except (ImportError, OSError, ValueError):
        return False
    try:
        p = ffi.wasmtime_pooling_allocation_config_new()
        ffi.wasmtime_pooling_allocation_config_total_memories_set(p, POOL_SLOTS)
        ffi.wasmtime_pooling_allocation_config_total_tables_set(p, POOL_SLOTS)
        ffi.wasmtime_pooling_allocation_config_total_core_instances_set(p, POOL_SLOTS)
        ffi.wasmtime_pooling_allocation_config_total_stacks_set(p, 0)
        ffi.wasmtime_pooling_allocation_config_max_memory_size_set(p, 4 << 30)
        ffi.wasmtime_pooling_allocation_config_max_core_instance_size_set(p, 16 << 20)
        ffi.wasmtime_pooling_allocation_config_table_elements_set(p, 1 << 20)
        ffi.wasmtime_pooling_allocation_config_max_unused_warm_slots_set(p, POOL_WARM_SLOTS)
        ffi.wasmtime_pooling_allocation_config_linear_memory_keep_resident_set(p, POOL_KEEP_RESIDENT)
        ffi.wasmtime_pooling_allocation_strategy_set(cfg.ptr(), p)
    except AttributeError:
        return False
    return True


def set_async_stack_size(cfg: wt.Config, size: int) -> None:
    """wasmtime's async stack size, through the C API (wasmtime-py does not expose it); the
    engine refuses a ``max_wasm_stack`` larger than it, even without async support."""
    ffi.wasmtime_config_async_stack_size_set(cfg.ptr(), size)


def _settings(fuel: bool) -> str:
    # Cranelift at its default level is what every cached module so far was made with: the key
    # names another compiler or level when one is chosen (a module is only loaded by its own kind)
    return f"fuel={int(fuel)},epoch=1,exceptions=1,cow=1"


def get_engine(fuel: bool = True, compiler: str = CRANELIFT) -> wt.Engine:
    with _lock:
        eng = _engines.get((fuel, compiler))
        if eng is None:
            eng = _engines[(fuel, compiler)] = wt.Engine(_config(fuel, compiler))
        _ensure_ticker()
        return eng


def quick_module(rt: Runtime, progress: Callable[[str], None] | None = None,
                 fuel: bool = False) -> tuple[wt.Engine, wt.Module]:
    """``rt``'s module compiled by the quick compiler, not cached: without fuel for the one run
    that builds an image, with fuel for the quick tier's runs (see ``QUICK``)."""
    say = progress or stderr_progress
    data = rt.module.read_bytes()
    if hashlib.sha256(data).hexdigest() != rt.module_sha256:
        raise RuntimeError(f"{rt.module} changed after it was verified; not compiling it")
    eng = get_engine(fuel, QUICK)
    start = time.monotonic()
    say(f"compiling the {rt.name} runtime with the quick compiler "
        + ("for runs until Cranelift's module is ready" if fuel else "for the image's set-up run"))
    mod = wt.Module(eng, data)
    say(f"compiled the {rt.name} runtime (quick) in {time.monotonic() - start:.1f} s")
    return eng, mod


# CPU seconds one MiB of wasm takes to compile, measured on a 2-core x86-64 machine
# (docs/performance.md, "Compiling the runtimes"): what the estimates of ``compile_estimate`` use.
COMPILE_CPU_S_PER_MIB = {CRANELIFT: 1.0, QUICK: 0.39}
QUICK_SLOWDOWN = 2.0  # how much more CPU time the quick compiler's code takes (a Python loop)


def compile_estimate(size: int, compiler: str = CRANELIFT) -> float:
    """About how many seconds (wall clock) compiling ``size`` bytes of wasm takes here now:
    its CPU time spread over this process's cores (Cranelift's; Winch's keeps about one busy:
    its CPU time is about its wall time in every measurement), less the share other work takes."""
    return cpu_estimate(size / 2**20 * COMPILE_CPU_S_PER_MIB[compiler], parallel=compiler == CRANELIFT)


def cpu_estimate(cpu_seconds: float, *, parallel: bool) -> float:
    """Wall seconds ``cpu_seconds`` of work take on this machine now, on all its cores
    (``parallel``) or on one, given its load average."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = 0.0
    threads = cores if parallel else 1
    share = min(1.0, cores / (load + threads))  # of a core, for each of our threads
    return cpu_seconds / (threads * share)


def is_compiled(rt: Runtime, fuel: bool = True) -> bool:
    """Whether ``rt``'s module is compiled in this process or in the cache (not checked further)."""
    with _lock:
        if (fuel, rt.module_sha256) in _modules:
            return True
    return private_file_ok(module_cache_path(rt, fuel))


def module_cache_path(rt: Runtime, fuel: bool) -> Path:
    key = hashlib.sha256(
        f"{rt.module_sha256}|wasmtime-{version('wasmtime')}|{_settings(fuel)}".encode()
    ).hexdigest()[:32]
    return cache_dir() / f"{rt.name}-{key}.cwasm"


def get_module(rt: Runtime, fuel: bool = True, progress: Callable[[str], None] | None = None) -> wt.Module:
    """The compiled module: from this process, else the disk cache, else compiled (and cached)."""
    engine = get_engine(fuel)
    key = (fuel, rt.module_sha256)
    with _lock:
        mod = _modules.get(key)
        guard = _compiling.setdefault(key, threading.Lock())
    if mod is not None:
        return mod
    with guard:
        with _lock:
            mod = _modules.get(key)
        if mod is not None:
            return mod
        path = module_cache_path(rt, fuel)
        mod = _cached(engine, path)
        if mod is None:
            with build_lock(path):  # another process sharing the cache may be compiling it
                mod = _cached(engine, path)
                if mod is None:
                    mod = _compile(engine, rt, path, progress)
        with _lock:
            _modules[key] = mod
        return mod


def _cached(engine: wt.Engine, path: Path) -> wt.Module | None:
    if not private_file_ok(path):
        return None
    try:
        return wt.Module.deserialize_file(engine, str(path))
    except wt.WasmtimeError:
        return None  # stale or damaged: compile again


def _compile(engine: wt.Engine, rt: Runtime, path: Path, progress: Callable[[str], None] | None) -> wt.Module:
    say = progress or stderr_progress
    data = rt.module.read_bytes()
    if hashlib.sha256(data).hexdigest() != rt.module_sha256:
        raise RuntimeError(f"{rt.module} changed after it was verified; not compiling it")
    done = threading.Event()
    start = time.monotonic()

    def report() -> None:
        while not done.wait(5.0):
            say(f"compiling the {rt.name} runtime ({len(data) >> 20} MiB of wasm): {time.monotonic() - start:.0f} s ...")

    say(f"compiling the {rt.name} runtime once; it is cached in {path.parent} (about a minute for the default runtime)")
    t = threading.Thread(target=report, daemon=True)
    t.start()
    try:
        mod = wt.Module(engine, data)
    finally:
        done.set()
    took = time.monotonic() - start
    say(f"compiled the {rt.name} runtime in {took:.1f} s")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(mod.serialize())
    os.replace(tmp, path)
    try:  # how long it took, for `wasm-runner bench`
        path.with_name(path.name + ".compile-s").write_text(f"{took:.1f}\n")
    except OSError:
        pass
    return mod


def compile_seconds(rt: Runtime, fuel: bool = True) -> float | None:
    """How long compiling ``rt`` took when its cached module was made (None when unknown)."""
    try:
        return float(module_cache_path(rt, fuel).with_name(module_cache_path(rt, fuel).name + ".compile-s").read_text())
    except (OSError, ValueError):
        return None


def stderr_progress(msg: str) -> None:
    print(f"wasm-runner: {msg}", file=sys.stderr, flush=True)


# ---- the epoch ticker -------------------------------------------------------------------------
_ticker: threading.Thread | None = None


def _ensure_ticker() -> None:
    global _ticker
    if _ticker is None or not _ticker.is_alive():
        _ticker = threading.Thread(target=_tick, name="wasm-runner-epoch", daemon=True)
        _ticker.start()


def _tick() -> None:
    while True:
        time.sleep(TICK_S)
        with _lock:
            engines = list(_engines.values())
        for e in engines:
            e.increment_epoch()


# ---- each store's callback at every tick --------------------------------------------------------
_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_size_t,
    ctypes.POINTER(ffi.wasmtime_context_t),
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(ctypes.c_uint8),
)
_FINALIZER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_watched: dict[int, Callable[[], str | None]] = {}
_next_id = [1]


@_CALLBACK
def _on_tick(ctx, data, delta, kind):  # type: ignore[no-untyped-def]
    check = _watched.get(data or 0)
    try:
        reason = check() if check is not None else None
    except Exception:  # noqa: BLE001
        reason = "internal"
    if reason is not None:
        err = ffi.wasmtime_error_new(ctypes.create_string_buffer(f"wasm-runner stop: {reason}".encode()))
        return ctypes.cast(err, ctypes.c_void_p).value or 0
    delta[0] = 1
    kind[0] = 0  # continue
    return 0


@_FINALIZER
def _on_drop(data):  # type: ignore[no-untyped-def]
    _watched.pop(data or 0, None)


def watch(store: wt.Store, check: Callable[[], str | None]) -> None:
    """Call ``check`` on the guest's thread at every tick; a non-None answer ends the guest."""
    with _lock:
        ident = _next_id[0]
        _next_id[0] += 1
    _watched[ident] = check
    ffi.wasmtime_store_epoch_deadline_callback(store.ptr(), _on_tick, ident, _on_drop)
    store.set_epoch_deadline(1)
