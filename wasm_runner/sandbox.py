"""One run, one fresh wasmtime instance: ``Sandbox.run``, ``Sandbox.session`` and ``run``.

A ``Sandbox`` holds what is expensive and shareable (engine, compiled module, linker); every run
gets a new Store and instance on a thread of its own (32 MiB native stack, so deep C recursion
becomes a clean trap), a fresh scratch folder, its own fd table and quota, and is destroyed after.
The guest-side wrapper (``guest/runner.py``) receives the program on the control channel; budgets
(fuel, deadline) are armed at that hand-over, on the guest's thread.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files as _pkg_files
from pathlib import Path
from typing import Any

import wasmtime as wt

from . import engine as _engine
from . import pool as _pool
from .cache import cache_dir, private_file_ok
from .grants import DiskQuota, Grant, collect_files
from .limits import MAX_SOURCE_BYTES, MAX_STDIN_BYTES, InvalidLimits, Limits
from .messages import limit_sentence
from .result import FileOut, Output, Result, Status
from .runtimes import Runtime, data_dirs, get_runtime, stdlib_dir
from .wasi import GuestIO, InputSource, current, define_imports

ARGV0 = "/usr/local/bin/python.wasm"
GUEST_STACK = 32 << 20
WARMUP_FUEL = 400_000_000_000  # start-up and pre-imports, before any budget is armed
WARMUP_SECONDS = 120.0
MAX_FILES_OUT_BYTES = 64 << 20
MAX_OUTPUTS_BYTES = 16 << 20

_stack_lock = threading.Lock()
_BOOT = (_pkg_files("wasm_runner") / "guest" / "runner.py").read_text()
_BOOT_LOADER = "import marshal\nexec(marshal.loads(open('/wasm-runner/boot.bin', 'rb').read()))"

OutputCallback = Callable[[str, bytes], None]


class _GuestThreads:
    """Threads with a 32 MiB native stack that run guests, reused across runs.

    A thread carries no guest state from one run to the next: each run has its own Store,
    instance and GuestIO, and sets the thread-local ``current.io`` itself. Reuse saves the
    thread's creation and its stack's page faults (about 0.3 ms a run). Threads idle for
    ``IDLE_S`` exit; there are never fewer threads than runs waiting to start.
    """

    IDLE_S = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._work: list[Callable[[], None]] = []
        self._cv = threading.Condition(self._lock)
        self._idle = 0

    def submit(self, fn: Callable[[], None]) -> None:
        with self._lock:
            self._work.append(fn)
            if self._idle >= len(self._work):  # enough idle threads for all waiting work
                self._cv.notify()
                return
        with _stack_lock:
            old = threading.stack_size(GUEST_STACK)
            try:
                threading.Thread(target=self._loop, name="wasm-runner-guest", daemon=True).start()
            finally:
                threading.stack_size(old)

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._work:
                    self._idle += 1
                    woke = self._cv.wait(self.IDLE_S)
                    self._idle -= 1
                    if not woke and not self._work:
                        return
                fn = self._work.pop(0)
            try:
                fn()
            except BaseException:  # noqa: BLE001 - a guest's failure never kills the worker
                pass


_threads = _GuestThreads()


def _start_thread(target: Callable[[], None], name: str) -> None:
    _threads.submit(target)


def _min_memory_mb(module: wt.Module) -> int:
    """The linear memory an instance of ``module`` starts with, in whole MB."""
    for e in module.exports:
        if isinstance(e.type, wt.MemoryType):
            return -(-(e.type.limits.min * 65536) // (1024 * 1024))
    return 0


def _lower_priority() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except OSError:
        pass


def restore_priority(native_id: int | None = None) -> None:
    """Back to normal priority (a warm slot's thread, once warm); without CAP_SYS_NICE a slot
    keeps the lower priority, which only costs its run some scheduling latency."""
    try:
        os.setpriority(os.PRIO_PROCESS, native_id or threading.get_native_id(), 0)
    except OSError:
        pass


def _work_root() -> str | None:
    """Where run folders go: ``$WASM_RUNNER_WORKDIR``, else /dev/shm (memory: fast to make and
    remove, and bounded by each run's quota), else the system's temporary folder."""
    env = os.environ.get("WASM_RUNNER_WORKDIR")
    if env:
        return env
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return None


def _sweep_stale(root: str | None) -> None:
    """Remove run folders left by wasm-runner processes that died without cleaning up (killed)."""
    base = Path(root or tempfile.gettempdir())
    try:
        entries = list(base.glob("wasm-runner-*-*"))
    except OSError:
        return
    for d in entries:
        pid = d.name.split("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if d.is_symlink() or os.lstat(d).st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)  # its process is gone
        except OSError:
            continue


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
    if filename is not None and ("\x00" in filename or len(filename) > 255):
        return "the file name is not usable"
    return None


def _stdin_bytes(stdin: bytes | str | None) -> bytes:
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


def _check_upload_name(name: str) -> str:
    if not isinstance(name, str) or not name or "\x00" in name or len(name) > 255:
        raise ValueError(f"bad file name {name!r}")
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts) or name.startswith("/"):
        raise ValueError(f"file name {name!r} must be a relative path without '..'")
    return "/".join(parts)


def _place_files(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        rel = _check_upload_name(name)
        if not isinstance(data, (bytes, bytearray)):
            raise ValueError(f"file {name!r} content must be bytes")
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)


@dataclass
class _Workspace:
    """The host folders of one instance: its run folder (scratch, tmp) and the grants."""

    root: Path
    grants: list[Grant]
    quota: DiskQuota
    out: Grant | None
    scratch: Grant
    data: Grant | None = None
    extra: list[Grant] = field(default_factory=list)

    def close(self) -> None:
        for g in self.extra:
            g.close()
        for g in self.grants:
            g.close()
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class _Outcome:
    trap: str | None = None
    out_of_fuel: bool = False
    stack_overflow: bool = False
    fuel_used: int = 0
    memory_bytes: int = 0
    cpu_s: float = 0.0  # the guest thread's CPU time from hand-over to the end


class _Guest:
    """One instance on its own thread, from instantiation to its end."""

    def __init__(self, sb: Sandbox, ws: _Workspace, limits: Limits, argv: list[str], nice: bool = False):
        self.sb = sb
        self.nice = nice
        self.ws = ws
        self.limits = limits
        self.io = GuestIO(ws.grants, ws.quota, argv)
        self.io.stdout.cap = limits.stdout_bytes
        self.io.stderr.cap = limits.stderr_bytes
        self.io.deadline = time.monotonic() + WARMUP_SECONDS
        self.io.on_handover = self._handover
        self.io.on_report = self._record_fuel
        self.outcome = _Outcome()
        self.done = threading.Event()
        self.handed_over = threading.Event()
        self.store: wt.Store | None = None
        self.native_id: int | None = None
        self._fuel_at_handover = 0
        self._budget: dict[str, Any] = {}
        _start_thread(self._main, "wasm-runner-guest")

    # runs on the guest thread, inside fd_write of the control channel: a session cell's fuel
    def _record_fuel(self) -> None:
        store = self.store
        if store is not None and self.sb.fuel and self._fuel_at_handover:
            self.outcome.fuel_used = max(0, self._fuel_at_handover - store.get_fuel())

    # runs on the guest thread, inside fd_read of the control channel
    def _handover(self, job: dict[str, Any]) -> None:
        budget = job.get("budget")
        if budget is None:  # a warm-up job: no user code, keep the warm-up allowance
            return
        if self.nice:  # a warm slot's run starts now: count it, at normal priority
            self.nice = False
            _pool.run_started()
            restore_priority()
        store = self.store
        assert store is not None
        if "memory" in budget:
            store.set_limits(memory_size=int(budget["memory"]))
        if self.sb.fuel:
            store.set_fuel(int(budget["fuel"]))
            self._fuel_at_handover = int(budget["fuel"])
        self.io.deadline = time.monotonic() + float(budget["wall"])
        self._cpu_at_handover = time.thread_time()
        self.handed_over.set()

    def _main(self) -> None:
        io = self.io
        current.io = io
        self.native_id = threading.get_native_id()
        _pool.run_started() if not self.nice else _lower_priority()
        store = wt.Store(self.sb.engine)
        self.store = store
        try:
            store.set_limits(memory_size=self.limits.memory_bytes)
            if self.sb.fuel:
                store.set_fuel(WARMUP_FUEL)
            _engine.watch(store, io.should_stop)
            inst = self.sb.pre.instantiate(store)
            exports = inst.exports(store)
            mem = exports.get("memory")
            if isinstance(mem, wt.Memory):
                io.memory = mem
            entry = exports["run"] if self.sb.runtime.kind == "reactor" else exports["_start"]
            assert isinstance(entry, wt.Func)
            entry(store)
        except wt.Trap as t:
            code = t.trap_code
            self.outcome.out_of_fuel = code == wt.TrapCode.OUT_OF_FUEL
            self.outcome.stack_overflow = code == wt.TrapCode.STACK_OVERFLOW
            # the message (a symbolized backtrace of a 100 MB module) costs milliseconds: only
            # an unexpected trap needs it; an exit or a host-requested stop does not
            if io.stop_reason is None and not self.outcome.out_of_fuel:
                self.outcome.trap = t.message.splitlines()[0] if t.message else "trap"
            else:
                self.outcome.trap = "trap"
        except wt.WasmtimeError as e:
            self.outcome.trap = "error" if io.stop_reason is not None else (str(e).splitlines() or ["error"])[0]
        except BaseException as e:  # noqa: BLE001 - another thread's exception surfacing here
            self.outcome.trap = f"{type(e).__name__}"
        finally:
            if self.handed_over.is_set():
                self.outcome.cpu_s = time.thread_time() - self._cpu_at_handover
            try:
                if self.sb.fuel and self._fuel_at_handover:
                    self.outcome.fuel_used = max(0, self._fuel_at_handover - store.get_fuel())
                if io.memory is not None:
                    self.outcome.memory_bytes = io.memory.data_len(store)
            except wt.WasmtimeError:
                pass
            io.memory = None
            current.io = None
            self.store = None
            # The result is complete: tell the caller first, then release the instance. Dropping
            # a large linear memory (say numpy and pandas loaded) takes milliseconds that no run
            # needs to wait for; it still happens here, at once, before this thread takes work.
            self.done.set()
            store.close()
            io.close()
            if not self.nice:
                _pool.run_ended()

    def cancel(self) -> None:
        self.io.stop("cancelled")
        self.io.end_jobs()


class Sandbox:
    """A reusable runner: engine, compiled module and linker for one runtime. Thread-safe.

    >>> sb = Sandbox()
    >>> sb.run("print('hi')").stdout
    'hi\\n'
    """

    def __init__(
        self,
        runtime: str | None = None,
        *,
        fuel: bool = True,
        progress: Callable[[str], None] | None = None,
        prestart: int = 0,
    ) -> None:
        """``prestart`` keeps that many plain instances started ahead of time (pool ``plain``);
        runs that name no pool take one when ready, so their start-up is off the critical path."""
        self.runtime: Runtime = get_runtime(runtime)
        self.fuel = fuel
        self.engine = _engine.get_engine(fuel)
        self.module = _engine.get_module(self.runtime, fuel, progress)
        linker = wt.Linker(self.engine)
        define_imports(linker, self.module)
        self.pre = linker.instantiate_pre(self.module)
        self.min_memory_mb = _min_memory_mb(self.module)
        self._stdlib = stdlib_dir(self.runtime)
        self._inner = data_dirs(self.runtime)
        _sweep_stale(_work_root())
        self._base = Path(tempfile.mkdtemp(prefix=f"wasm-runner-{os.getpid()}-", dir=_work_root()))
        os.chmod(self._base, 0o700)
        self.pools: dict[str, Any] = {}
        self._boot: Path | None = None
        self._boot = self._compiled_wrapper()
        if prestart:
            self.add_pool("plain", size=prestart)

    @property
    def name(self) -> str:
        return self.runtime.name

    def fuel_for(self, cpu_seconds: float) -> int:
        return max(1, int(cpu_seconds * self.runtime.fuel_per_cpu_second))

    # ---- set-up ------------------------------------------------------------------------------
    def _workspace(
        self,
        limits: Limits,
        data_dir: str | os.PathLike[str] | None,
        out_dir: str | os.PathLike[str] | None,
        files: dict[str, bytes] | None,
        collect_out: bool,
        placeholders: bool = False,
    ) -> _Workspace:
        root = Path(tempfile.mkdtemp(prefix="run-", dir=self._base))
        try:
            (root / "scratch").mkdir(mode=0o700)
            (root / "tmp").mkdir(mode=0o700)
            if placeholders:  # a warm slot: /data and /out exist, bound at hand-over
                (root / "data").mkdir(mode=0o700)
                data_dir, collect_out = root / "data", True
            if files:
                _place_files(root / "scratch", files)
            grants: list[Grant] = []
            if self._stdlib is not None:
                grants.append(Grant("/usr/local/lib", str(self._stdlib), writable=False))
            if self._boot is not None:
                grants.append(Grant("/wasm-runner", str(self._boot), writable=False))
            for guest_path, host in self._inner:
                grants.append(Grant(guest_path, str(host), writable=False))
            scratch = Grant("/scratch", str(root / "scratch"), writable=True)
            grants += [scratch, Grant("/tmp", str(root / "tmp"), writable=True)]
            data: Grant | None = None
            if data_dir is not None:
                if not Path(data_dir).is_dir():
                    raise ValueError(f"data_dir {str(data_dir)!r} is not a directory")
                data = Grant("/data", str(data_dir), writable=False)
                grants.append(data)
            out: Grant | None = None
            if out_dir is None and collect_out:
                (root / "out").mkdir(mode=0o700)
                out_dir = root / "out"
            if out_dir is not None:
                if not Path(out_dir).is_dir():
                    raise ValueError(f"out_dir {str(out_dir)!r} is not a directory")
                out = Grant("/out", str(out_dir), writable=True)
                grants.append(out)
            quota = DiskQuota(limits.disk_bytes, int(limits.max_files))
            for g in grants:
                g.open()
                if g.writable:
                    quota.count_existing(g)
            return _Workspace(root, grants, quota, out, scratch, data)
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    def _argv(self) -> list[str]:
        if self._boot is None:  # bootstrapping: the wrapper compiled from source
            return [ARGV0, "-c", _BOOT]
        return [ARGV0, "-c", _BOOT_LOADER]

    def _compiled_wrapper(self) -> Path:
        """A folder holding the wrapper as the guest's own marshalled code object.

        Compiling the wrapper inside the guest costs ~10 ms of CPU on every run; the guest
        compiles it once (per runtime and wrapper version) and later runs load the code object.
        """
        digest = hashlib.sha256(_BOOT.encode()).hexdigest()[:16]
        d = cache_dir() / f"boot-{self.runtime.module_sha256[:16]}-{digest}"
        target = d / "boot.bin"
        if private_file_ok(target):
            return d
        code = (
            "import marshal, base64, sys\n"
            "src = open('/scratch/runner.py').read()\n"
            "sys.stdout.write(base64.b64encode(marshal.dumps(compile(src, '<wasm-runner>', 'exec'))).decode())"
        )
        res = self.run(code, files={"runner.py": _BOOT.encode()},
                       limits=Limits(cpu_seconds=60, wall_seconds=120, stdout_bytes=8 << 20))
        if not res.ok:
            raise RuntimeError(f"could not compile the guest wrapper: {res.status}: {res.stderr[-500:]}")
        d.mkdir(mode=0o700, exist_ok=True)
        tmp = d / f".boot.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64decode(res.stdout))
        os.replace(tmp, target)
        return d

    def _job(self, code: str, limits: Limits, filename: str | None, *, once: bool,
             session: bool, display: bool) -> dict[str, Any]:
        return {
            "code": code,
            "filename": filename or "<string>",
            "cwd": "/scratch",
            "once": once,
            "session": session,
            "display": display,
            "budget": {"fuel": self.fuel_for(limits.cpu_seconds), "wall": limits.wall_seconds,
                       "memory": limits.memory_bytes},
        }

    # ---- one run ------------------------------------------------------------------------------
    def run(
        self,
        code: str,
        *,
        stdin: bytes | str | None = None,
        limits: Limits | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        out_dir: str | os.PathLike[str] | None = None,
        files: dict[str, bytes] | None = None,
        collect_out: bool = False,
        filename: str | None = None,
        display: bool = False,
        on_output: OutputCallback | None = None,
        input_source: InputSource | None = None,
        cancel: threading.Event | None = None,
        pool: str | None = None,
    ) -> Result:
        """Run ``code`` in a fresh instance and return how it ended. Never raises for guest behaviour.

        ``files`` are placed in ``/scratch`` first. With ``collect_out`` and no ``out_dir``, a fresh
        ``/out`` is granted and what the program leaves there comes back in ``Result.files``.
        ``display`` captures matplotlib figures and the last expression's value in ``outputs``.
        ``pool`` names a warm pool (``add_pool``): a pre-warmed, never-used instance is taken from it
        when one is ready, else the run starts a fresh instance as usual.
        """
        t0 = time.perf_counter()
        rt = self.runtime.name
        problem = check_source(code, filename)
        if problem:
            return Result.invalid(problem[0].upper() + problem[1:] + ".", rt)
        if isinstance(code, bytes):
            code = code.decode("utf-8")
        try:
            limits = (limits or Limits()).validate()
            data = _stdin_bytes(stdin)
        except InvalidLimits as e:
            return Result.invalid(f"Invalid limits: {e}.", rt)
        except ValueError as e:
            return Result.invalid(f"Invalid input: {e}.", rt)
        if limits.memory_mb < self.min_memory_mb:
            return Result.invalid(
                f"Invalid limits: memory_mb={limits.memory_mb} is below the {self.min_memory_mb} MB "
                f"the {rt} runtime needs to start.", rt)
        if pool is None and "plain" in self.pools:
            pool = "plain"
        if pool is not None and pool not in self.pools:
            return Result.invalid(f"Unknown pool {pool!r}; this sandbox has: {', '.join(self.pools) or 'none'}.", rt)
        guest = self.pools[pool].take() if pool is not None else None
        try:
            if guest is not None:
                ws = guest.ws
                _bind_pooled(guest, limits, data_dir, out_dir, files, collect_out)
            else:
                ws = self._workspace(limits, data_dir, out_dir, files, collect_out)
        except (ValueError, OSError) as e:
            if guest is not None:
                guest.cancel()
                guest.ws.close()
            return Result.invalid(f"Cannot prepare the run: {e}.", rt)
        try:
            if guest is None:
                guest = _Guest(self, ws, limits, self._argv())
            io = guest.io
            io.stdin = data
            io.input_source = input_source
            io.stdout.on_chunk = on_output
            io.stderr.on_chunk = on_output
            io.cancel = cancel
            io.submit(self._job(code, limits, filename, once=True, session=False, display=display))
            io.end_jobs()
            _wait(guest, limits, cancel)
            result = self._result(guest, limits, t0)
            if ws.out is not None:
                result.files = [FileOut(p, c) for p, c in collect_files(ws.out, MAX_FILES_OUT_BYTES)]
            return result
        finally:
            if guest is not None and not guest.done.is_set():
                guest.cancel()
                guest.done.wait(5.0)
            ws.close()

    def add_pool(self, name: str, *, size: int = 2, preload: tuple[str, ...] = (),
                 memory_mb: int = 1024) -> Any:
        """Keep ``size`` instances warm (``preload`` imported), refilled in the background."""
        from .pool import WarmPool

        if name in self.pools:
            raise ValueError(f"pool {name!r} exists")
        p = WarmPool(self, name, size=size, preload=preload, memory_mb=memory_mb)
        self.pools[name] = p
        p.start()
        return p

    def _result(self, guest: _Guest, limits: Limits, t0: float, cell_done: bool = False) -> Result:
        """How the run ended. ``cell_done``: a session cell that reported while its instance
        lives on, so it ended like an exit with the code it reported."""
        io, oc = guest.io, guest.outcome
        report = io.reports[-1] if io.reports else None
        res = Result(
            status=Status.OK,
            stdout=io.stdout.text(),
            stderr=io.stderr.text(),
            stdout_truncated=io.stdout.truncated,
            stderr_truncated=io.stderr.truncated,
            fuel_used=oc.fuel_used,
            wall_ms=round((time.perf_counter() - t0) * 1000, 3),
            runtime=self.runtime.name,
        )
        if report is not None:
            res.outputs = _outputs(report.get("outputs"))
        reason = "exit" if cell_done else io.stop_reason
        exit_code = None if cell_done else (io.exit_code if reason == "exit" else None)
        if reason == "exit" and exit_code is None and report is not None:
            exit_code = report.get("exit")
        if reason == "internal":
            res.status, res.limit = Status.INTERNAL_ERROR, None
            res.message = f"wasm-runner failed inside a host call ({io.internal_error}); the run was stopped."
        elif reason == "cancelled":
            res.status = Status.CANCELLED
        elif reason == "timeout":
            res.status, res.limit = Status.TIMEOUT, "wall"
        elif reason == "output":
            res.status, res.limit = Status.OUTPUT_LIMIT, "output"
        elif oc.out_of_fuel:
            res.status, res.limit = Status.CPU_LIMIT, "cpu"
        elif exit_code is not None:
            res.exit_code = exit_code
            mem_err = bool(report and report.get("memory_error"))
            if exit_code == 0:
                res.status = Status.OK
            elif mem_err:
                res.status, res.limit = Status.MEMORY_LIMIT, "memory"
            elif io.quota.refused:
                res.status, res.limit = Status.DISK_LIMIT, "disk"
            else:
                res.status = Status.ERROR
        elif oc.trap is not None:
            near_cap = oc.memory_bytes >= limits.memory_bytes * 0.9
            if near_cap and not oc.stack_overflow:
                res.status, res.limit = Status.MEMORY_LIMIT, "memory"
            else:
                res.status = Status.ERROR
                res.exit_code = None
                what = "its stack overflowed (recursion too deep)" if oc.stack_overflow else oc.trap
                res.message = f"The program crashed the interpreter: {what}."
        else:
            res.status = Status.INTERNAL_ERROR
            res.message = "The guest ended without reporting how."
        if not res.message and res.status is not Status.OK:
            if res.status is Status.ERROR and res.exit_code is not None:
                res.message = f"The program exited with status {res.exit_code}."
            else:
                stream = "stderr" if io.stderr.truncated and not io.stdout.truncated else "stdout"
                res.message = limit_sentence(res.status, limits, stream)
        return res

    # ---- sessions ------------------------------------------------------------------------------
    def session(
        self,
        *,
        limits: Limits | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        out_dir: str | os.PathLike[str] | None = None,
        files: dict[str, bytes] | None = None,
    ) -> Session:
        """A long-lived instance that keeps variables and files across ``Session.run`` calls."""
        limits = (limits or Limits()).validate()
        if limits.memory_mb < self.min_memory_mb:
            raise InvalidLimits(f"memory_mb={limits.memory_mb} is below the {self.min_memory_mb} MB "
                                f"the {self.runtime.name} runtime needs to start")
        return Session(self, limits, data_dir, out_dir, files)

    def close(self) -> None:
        for p in list(self.pools.values()):
            p.close()
        self.pools.clear()
        shutil.rmtree(self._base, ignore_errors=True)


def _extra_grant(ws: _Workspace, guest_path: str, host: Any, *, writable: bool) -> Grant | None:
    """An opened grant of ``host`` at ``guest_path`` owned by ``ws``, or None without a host folder."""
    if host is None:
        return None
    if not Path(host).is_dir():
        raise ValueError(f"{guest_path.strip('/')}_dir {str(host)!r} is not a directory")
    g = Grant(guest_path, str(host), writable=writable)
    g.open()
    ws.extra.append(g)
    return g


def _bind_pooled(guest: _Guest, limits: Limits, data_dir: Any, out_dir: Any,
                 files: dict[str, bytes] | None, collect_out: bool) -> None:
    """Give a warm slot this run's grants, quota and caps before the program is handed over."""
    ws, io = guest.ws, guest.io
    io.reports.clear()
    if files:
        _place_files(Path(ws.scratch.host_path), files)
    io.rebind("/data", _extra_grant(ws, "/data", data_dir, writable=False))
    out = _extra_grant(ws, "/out", out_dir, writable=True)
    if out is not None or not collect_out:  # with collect_out alone the slot's own /out serves
        io.rebind("/out", out)
        ws.out = out
    quota = DiskQuota(limits.disk_bytes, int(limits.max_files))
    for f in io.fds.values():
        if f.preopen is not None and f.grant is not None and f.grant.writable:
            quota.count_existing(f.grant)
    io.quota = quota
    ws.quota = quota
    io.stdout.cap, io.stderr.cap = limits.stdout_bytes, limits.stderr_bytes
    guest.limits = limits


def _wait(guest: _Guest, limits: Limits, cancel: threading.Event | None) -> None:
    """Wait for the guest; the epoch callback enforces the deadline, this is a last resort."""
    hard_stop = time.monotonic() + WARMUP_SECONDS + limits.wall_seconds + 5.0
    while not guest.done.wait(0.05):
        if cancel is not None and cancel.is_set():
            guest.io.stop("cancelled")
        if time.monotonic() > hard_stop:
            guest.io.stop("timeout")
            guest.done.wait(2.0)
            return


def _outputs(raw: Any) -> list[Output]:
    out: list[Output] = []
    total = 0
    if not isinstance(raw, list):
        return out
    for item in raw:
        if not isinstance(item, dict):
            continue
        kind, mime, data = item.get("kind"), item.get("mime"), item.get("data")
        if kind not in ("image", "table", "text") or not isinstance(mime, str) or not isinstance(data, str):
            continue
        total += len(data)
        if total > MAX_OUTPUTS_BYTES:
            break
        out.append(Output(kind, mime, data))
    return out


class SessionEnded(RuntimeError):
    """The session's instance is gone (closed, or ended by a limit)."""


class Session:
    """One long-lived instance: each ``run`` is a cell with its own CPU and wall limits.

    A cell that hits its CPU or wall limit, the output cap or crashes the interpreter ends the
    instance (``alive`` becomes False): its state cannot be trusted after a forced stop. A cell
    that raises an exception or calls ``sys.exit`` keeps the session alive.
    """

    def __init__(self, sb: Sandbox, limits: Limits, data_dir: Any, out_dir: Any, files: dict[str, bytes] | None):
        self.sb = sb
        self.limits = limits
        self._ws = sb._workspace(limits, data_dir, out_dir, files, collect_out=out_dir is None)
        self._guest = _Guest(sb, self._ws, limits, sb._argv())
        self._lock = threading.Lock()
        self._closed = False
        self.created = time.monotonic()
        self.last_used = self.created

    @property
    def alive(self) -> bool:
        return not self._closed and not self._guest.done.is_set()

    def upload(self, name: str, data: bytes) -> str:
        """Place a file in the session's ``/scratch``; returns its guest path."""
        rel = _check_upload_name(name)
        if not self.alive:
            raise SessionEnded("the session has ended")
        if len(data) > self._ws.quota.room():
            raise ValueError(f"{name!r} ({len(data)} bytes) does not fit in the session's disk quota")
        with self._lock:
            target = Path(self._ws.scratch.host_path) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            self._ws.quota.used_bytes += len(data)
            self._ws.quota.used_files += 1
        return f"/scratch/{rel}"

    def run(
        self,
        code: str,
        *,
        limits: Limits | None = None,
        stdin: bytes | str | None = None,
        on_output: OutputCallback | None = None,
        input_source: InputSource | None = None,
        cancel: threading.Event | None = None,
        display: bool = True,
    ) -> Result:
        t0 = time.perf_counter()
        rt = self.sb.runtime.name
        problem = check_source(code)
        if problem:
            return Result.invalid(problem[0].upper() + problem[1:] + ".", rt)
        try:
            cell = self.limits.tightened(limits) if limits is not None else self.limits
            data = _stdin_bytes(stdin)
        except InvalidLimits as e:
            return Result.invalid(f"Invalid limits: {e}.", rt)
        except ValueError as e:
            return Result.invalid(f"Invalid input: {e}.", rt)
        with self._lock:
            if not self.alive:
                raise SessionEnded("the session has ended")
            g = self._guest
            io = g.io
            io.reports.clear()
            io.stdout.reset(cell.stdout_bytes, on_output)
            io.stderr.reset(cell.stderr_bytes, on_output)
            io.stdin, io.stdin_pos, io.input_source, io.cancel = data, 0, input_source, cancel
            io.quota.refused = False
            io.submit(self.sb._job(code, cell, None, once=False, session=True, display=display))
            # wait for the cell's report (the wrapper flips to the control channel) or the end
            hard_stop = time.monotonic() + WARMUP_SECONDS + cell.wall_seconds + 5.0
            while not g.done.wait(0.01):
                if io.reports and io.control:
                    break
                if cancel is not None and cancel.is_set():
                    io.stop("cancelled")
                if time.monotonic() > hard_stop:
                    io.stop("timeout")
            if g.done.is_set():
                res = self.sb._result(g, cell, t0)
            else:
                res = self.sb._result(g, cell, t0, cell_done=True)
            self.last_used = time.monotonic()
            if self._ws.out is not None:
                res.files = [FileOut(p, c) for p, c in collect_files(self._ws.out, MAX_FILES_OUT_BYTES)]
            return res

    def close(self) -> None:
        """End the instance and remove its folders."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._guest.cancel()
            self._guest.done.wait(5.0)
            self._ws.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default_sandboxes: dict[str, Sandbox] = {}
_default_lock = threading.Lock()


@atexit.register
def _close_default_sandboxes() -> None:
    """Warm slots and run folders of the process-wide sandboxes go with the process."""
    with _default_lock:
        boxes = list(_default_sandboxes.values())
        _default_sandboxes.clear()
    for sb in boxes:
        sb.close()


def default_sandbox(runtime: str | None = None) -> Sandbox:
    name = runtime or "default"
    with _default_lock:
        sb = _default_sandboxes.get(name)
        if sb is None:
            sb = _default_sandboxes[name] = Sandbox(name)
        return sb


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
