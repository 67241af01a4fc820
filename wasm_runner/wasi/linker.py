"""The linker side: every import of the guest module, defined by us. WASI preview1 calls go to our
host calls, each ``guarded`` so a failure becomes an errno (a bug stops the run as ``internal``,
never the host); sockets, ``host::*`` and anything else are present and refuse.

Our WASI calls are entered through wasmtime's unchecked (raw) callback: the arguments are read
straight from the raw value array, the guest's caller is a ``RawCaller`` (its store context, all
that ``memory()`` needs) and the result is written back in place. wasmtime-py's own trampoline
builds a ``Caller``, a ``Val`` per argument and compares value types through the C API for the
result, which cost more CPU than most of our calls themselves (``docs/performance.md``). The
function types are checked by wasmtime when the linker defines them, as before.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any

import wasmtime as wt
from wasmtime import _ffi as ffi

from ..grants import GuestPathError
from .abi import EFAULT, EIO, ENOTSUP, Fault, wasi_errno
from .fd_calls import (
    fd_allocate, fd_close, fd_fdstat_get, fd_fdstat_set_flags, fd_filestat_get,
    fd_filestat_set_size, fd_filestat_set_times, fd_noop, fd_prestat_dir_name, fd_prestat_get,
    fd_pread, fd_pwrite, fd_read, fd_readdir, fd_seek, fd_tell, fd_write,
)
from .guestio import current
from .path_calls import (
    path_create_directory, path_filestat_get, path_filestat_set_times, path_link, path_open,
    path_readlink, path_remove_directory, path_rename, path_symlink, path_unlink_file,
)
from .process import (
    args_get, args_sizes_get, clock_res_get, clock_time_get, environ_get, environ_sizes_get,
    poll_oneoff, proc_exit, random_get, sched_yield,
)

__all__ = ["HOST_CALLS", "RawCaller", "define_imports", "guarded"]

_I32, _I64 = wt.ValType.i32(), wt.ValType.i64()

# name -> (function, params, results). "i"=i32, "I"=i64.
HOST_CALLS: dict[str, tuple[Callable[..., Any], str, str]] = {
    "args_get": (args_get, "ii", "i"),
    "args_sizes_get": (args_sizes_get, "ii", "i"),
    "environ_get": (environ_get, "ii", "i"),
    "environ_sizes_get": (environ_sizes_get, "ii", "i"),
    "clock_res_get": (clock_res_get, "ii", "i"),
    "clock_time_get": (clock_time_get, "iIi", "i"),
    "random_get": (random_get, "ii", "i"),
    "sched_yield": (sched_yield, "", "i"),
    "proc_exit": (proc_exit, "i", ""),
    "fd_write": (fd_write, "iiii", "i"),
    "fd_pwrite": (fd_pwrite, "iiiIi", "i"),
    "fd_read": (fd_read, "iiii", "i"),
    "fd_pread": (fd_pread, "iiiIi", "i"),
    "fd_seek": (fd_seek, "iIii", "i"),
    "fd_tell": (fd_tell, "ii", "i"),
    "fd_close": (fd_close, "i", "i"),
    "fd_fdstat_get": (fd_fdstat_get, "ii", "i"),
    "fd_fdstat_set_flags": (fd_fdstat_set_flags, "ii", "i"),
    "fd_filestat_get": (fd_filestat_get, "ii", "i"),
    "fd_filestat_set_size": (fd_filestat_set_size, "iI", "i"),
    "fd_filestat_set_times": (fd_filestat_set_times, "iIIi", "i"),
    "fd_allocate": (fd_allocate, "iII", "i"),
    "fd_advise": (fd_noop, "iIIi", "i"),
    "fd_sync": (fd_noop, "i", "i"),
    "fd_datasync": (fd_noop, "i", "i"),
    "fd_prestat_get": (fd_prestat_get, "ii", "i"),
    "fd_prestat_dir_name": (fd_prestat_dir_name, "iii", "i"),
    "fd_readdir": (fd_readdir, "iiiIi", "i"),
    "path_open": (path_open, "iiiiiIIii", "i"),
    "path_filestat_get": (path_filestat_get, "iiiii", "i"),
    "path_filestat_set_times": (path_filestat_set_times, "iiiiIIi", "i"),
    "path_create_directory": (path_create_directory, "iii", "i"),
    "path_remove_directory": (path_remove_directory, "iii", "i"),
    "path_unlink_file": (path_unlink_file, "iii", "i"),
    "path_rename": (path_rename, "iiiiii", "i"),
    "path_readlink": (path_readlink, "iiiiii", "i"),
    "path_symlink": (path_symlink, "iiiii", "i"),
    "path_link": (path_link, "iiiiiii", "i"),
    "poll_oneoff": (poll_oneoff, "iiii", "i"),
}


def guarded(name: str, fn: Callable[..., Any], has_result: bool) -> Callable[..., Any]:
    """Turn every failure into an errno; a bug here stops the run as ``internal``, never the host."""

    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except GuestPathError as e:
            return e.wasi_errno if has_result else None
        except Fault:
            return EFAULT if has_result else None
        except OSError as e:
            return wasi_errno(e) if has_result else None
        except Exception as e:  # noqa: BLE001 - recorded, never raised into wasm
            io = getattr(current, "io", None)
            if io is not None:
                io.internal_error = f"{name}: {type(e).__name__}: {e}"
                io.stop("internal")
            return EIO if has_result else None

    call.__name__ = name
    return call


class RawCaller:
    """The guest calling a host function, as our calls see it: its store context (wasmtime-py's
    ``Memory.data_len``/``data_ptr`` take any object with ``_context()``) and its exports by name.
    Valid only during the call."""

    __slots__ = ("_ptr", "_ctx")

    def __init__(self, ptr: Any) -> None:
        self._ptr = ptr
        self._ctx = ffi.wasmtime_caller_context(ptr)

    def _context(self) -> Any:
        return self._ctx

    def get(self, name: str) -> Any:
        return wt.Caller(self._ptr).get(name)


def _raw_callback(name: str, fn: Callable[..., Any], params: str, has_result: bool) -> Any:
    """``fn`` as a wasmtime unchecked callback: i32/i64 arguments read from the raw array, the
    i32 result written to its first slot. Nothing escapes into wasmtime: ``guarded`` answers
    every ``Exception`` with an errno; anything else (``KeyboardInterrupt``, ``SystemExit``)
    stops the run and traps."""
    call = guarded(name, fn, has_result)
    wide = tuple(c == "I" for c in params)

    def trampoline(_env: Any, caller: Any, vals: Any, _n: int) -> int:
        try:
            args = [vals[i].i64 if w else vals[i].i32 for i, w in enumerate(wide)]
            result = call(RawCaller(caller), *args)
            if has_result:
                vals[0].i32 = result
            return 0
        except BaseException as e:  # noqa: BLE001 - never into wasmtime: the run ends
            io = getattr(current, "io", None)
            if io is not None:
                io.internal_error = f"{name}: {type(e).__name__}"
                io.stop("internal")
            msg = f"wasm-runner host call {name} failed".encode()
            return ctypes.cast(ffi.wasmtime_trap_new(ctypes.create_string_buffer(msg), len(msg)),
                               ctypes.c_void_p).value or 0

    return ffi.wasmtime_func_unchecked_callback_t(trampoline)


_NO_FINALIZER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)()  # a NULL function pointer: nothing to free
# One callback per host call for the process: a linker keeps a pointer to it, never a reference,
# so the callback handed to a linker must live as long as the process. Made under a lock: two
# sandboxes loading at once (the start's warm-up threads) must not each make one and keep only the
# other's (the one dropped is freed while its linker still calls it: a crash of the whole server).
_callbacks: dict[tuple[str, Callable[..., Any]], Any] = {}
_callbacks_lock = threading.Lock()


def _define_raw(linker: wt.Linker, module: str, name: str, ty: wt.FuncType, fn: Callable[..., Any],
                params: str, has_result: bool) -> None:
    with _callbacks_lock:
        cb = _callbacks.get((name, fn))
        if cb is None:
            cb = _callbacks[(name, fn)] = _raw_callback(name, fn, params, has_result)
    mod, nm = module.encode(), name.encode()
    error = ffi.wasmtime_linker_define_func_unchecked(
        linker.ptr(), ctypes.create_string_buffer(mod), len(mod), ctypes.create_string_buffer(nm), len(nm),
        ty.ptr(), cb, None, _NO_FINALIZER)
    if error:
        raise wt.WasmtimeError._from_ptr(error)


def define_imports(linker: wt.Linker, module: wt.Module) -> None:
    """Define every import ``module`` has: ours for WASI, a refusal for sockets and the rest."""
    types = {"i": _I32, "I": _I64}
    for imp in module.imports:
        name = imp.name or ""
        ty = imp.type
        if not isinstance(ty, wt.FuncType):
            raise RuntimeError(f"unsupported import {imp.module}::{name}")
        if imp.module == "wasi_snapshot_preview1" and name in HOST_CALLS:
            fn, params, results = HOST_CALLS[name]
            ft = wt.FuncType([types[c] for c in params], [types[c] for c in results])
            _define_raw(linker, imp.module, name, ft, fn, params, bool(results))
        else:
            # sockets, host::call and anything else: present, and refusing. -1 for a host door.
            res = ty.results
            value = -1 if imp.module == "host" else ENOTSUP
            linker.define_func(
                imp.module, name, ty, (lambda *a, _v=value, _r=bool(res): _v if _r else None)
            )
