"""One run, one fresh wasmtime instance: ``Sandbox.run`` and ``Sandbox.session``.

A ``Sandbox`` holds what is expensive and shareable (engine, compiled module, linker); every run
gets a new Store and instance on a thread of its own (``guest``), a fresh run folder
(``workspace``), its own fd table and quota, and is destroyed after. The guest-side wrapper
(``guest/runner.py``) receives the program on the control channel (``wrapper``); budgets (fuel,
deadline) are armed at that hand-over, on the guest's thread. ``classify`` turns how the guest
ended into a ``Result``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import wasmtime as wt

from .. import engine, images
from ..grants import collect_files
from ..network import NetworkCalls, RunNetwork, may_reach_network
from ..host_functions import HostCalls, HostFunction, HostFunctions, InvalidFunctions, prepare_program
from ..inputs import check_source, stdin_bytes
from ..limits import InvalidLimits, Limits
from ..result import FileOut, Result
from ..runtimes import Runtime, data_dirs, get_runtime, stdlib_dir
from ..wasi import HostCall, InputSource, define_imports
from . import wrapper
from .classify import classify
from .guest import Guest, GuestModule, Outcome, OutputCallback, start_thread
from .pool import WarmPool, bind_slot, default_prestart
from .sealing import MAX_BODY_BYTES, default_secret, open_sealed
from .session import Restore, Session, SessionHost
from .session_state import PAGE, Reference, body_bound, parse
from .site_mount import WRAPPER_FILE, loader, view_folder
from .workspace import MAX_FILES_OUT_BYTES, Workspace, extra_grant, make_workspace, sweep_stale, work_root

__all__ = ["OutputCallback", "Sandbox", "min_memory_mb", "start_memory_bytes"]


def min_memory_mb(module: wt.Module) -> int:
    """The linear memory an instance of ``module`` starts with, in whole MB."""
    for e in module.exports:
        if isinstance(e.type, wt.MemoryType):
            return -(-(e.type.limits.min * 65536) // (1024 * 1024))
    return 0


def start_memory_bytes(module: wt.Module) -> int:
    """The linear memory an instance of ``module`` starts with, in bytes."""
    for e in module.exports:
        if isinstance(e.type, wt.MemoryType):
            return int(e.type.limits.min) * 65536
    return 0


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
        prestart: int | None = None,
        image: str | None = None,
        compiler: str = engine.CRANELIFT,
    ) -> None:
        """``prestart`` keeps that many plain instances started ahead of time (pool ``plain``;
        default ``pool.default_prestart()``: 2, or ``WASM_RUNNER_PRESTART``; 0: none); runs that
        name no pool take one, so their start-up is off the critical path. Each is still used for
        one run only.

        ``image`` (default runtime only): the pre-initialized image every instance starts from,
        ``plain`` (the default: the runtime's snapshot with CPython's C-stack window corrected)
        or ``datascience`` (numpy, pandas and matplotlib imported too); built and compiled once,
        cached (images.py). A run's ``memory_mb`` counts what it adds beyond the memory its
        module (runtime or image) starts with (``memory_cap``).

        ``compiler``: ``engine.CRANELIFT`` (the default: compiled once, cached) or ``engine.QUICK``
        (Winch: compiled in a fraction of the time into slower code, never cached; serve's quick
        tier while Cranelift compiles, see ``default.default_sandbox``)."""
        self.runtime: Runtime = get_runtime(runtime)
        self.fuel = fuel
        self.compiler = compiler
        self.engine = engine.get_engine(fuel, compiler)
        if self.runtime.kind == "reactor":
            self.image: str | None = images.check_name(image or images.DEFAULT_IMAGE)
        elif image is not None:
            raise ValueError(f"the {self.runtime.name} runtime has no images; only the default runtime has")
        else:
            self.image = None
        self.via_turn = self.image is not None and images.via_turn(self.image)
        self._progress = progress
        # observes every guest's end on its thread, before the run's result is ready (bench uses
        # it for the guest's CPU time); it must not raise or block
        self.on_guest_end: Callable[[Outcome], None] | None = None
        self._stdlib = stdlib_dir(self.runtime)
        self._inner = data_dirs(self.runtime)
        sweep_stale(work_root())
        self._base = Path(tempfile.mkdtemp(prefix=f"wasm-runner-{os.getpid()}-", dir=work_root()))
        os.chmod(self._base, 0o700)
        self.pools: dict[str, WarmPool] = {}
        self._in_flight = 0  # runs between their start and their result (pools refill at 0)
        self._in_flight_lock = threading.Lock()
        self.boot: Path | None = None  # the compiled wrapper's folder; None while bootstrapping
        if self.image is None:  # a command runtime: its stack enlarged (images.relocate_stack)
            path = images.ensure_command(self.runtime)
            self._load(images.image_runtime(self.runtime, "stack", path))
            self.boot = wrapper.compiled_wrapper(self.runtime.module_sha256, self._compile_run)
        elif not self.via_turn:  # plain: a rewrite of the runtime's snapshot (nothing runs)
            path = images.ensure(self.runtime, self.image, wrapper.BOOT_SOURCE)
            self._load(images.image_runtime(self.runtime, self.image, path))
            self.boot = wrapper.compiled_wrapper(self.runtime.module_sha256, self._compile_run)
        else:
            self.boot = self._base / "no-boot"  # the image holds the wrapper; the grant keeps fd numbers
            self.boot.mkdir(mode=0o700)
            path = images.image_path(self.runtime, self.image, wrapper.BOOT_SOURCE)
            if not images.ready(path):
                images.ensure(self.runtime, self.image, wrapper.BOOT_SOURCE, self._snapshot_run,
                              progress or engine.stderr_progress)
            self._load(images.image_runtime(self.runtime, self.image, path))
        self.prestart = default_prestart() if prestart is None else prestart
        if self.prestart:
            self.add_pool("plain", size=self.prestart)

    def _load(self, rt: Runtime) -> None:
        if self.compiler == engine.CRANELIFT:
            self.module = engine.get_module(rt, self.fuel, self._progress)
        else:
            self.module = engine.quick_module(rt, self._progress, self.fuel)[1]
        self._module_sha256 = rt.module_sha256
        self._reference: Reference | None = None
        linker = wt.Linker(self.engine)
        define_imports(linker, self.module)
        self.pre = linker.instantiate_pre(self.module)
        self.start_memory_bytes = start_memory_bytes(self.module)
        self.min_memory_mb = 1  # memory_mb counts what a run adds beyond the module's start
        # what every guest of this module starts from (guest.Guest is handed this, not the sandbox)
        self.guest_module = GuestModule(self.engine, self.pre, self.fuel, self.via_turn,
                                        self.runtime.kind == "reactor", self.start_memory_bytes,
                                        self._guest_ended)

    def _guest_ended(self, outcome: Outcome) -> None:
        hook = self.on_guest_end  # read at each end: bench sets it after the sandbox is made
        if hook is not None:
            hook(outcome)

    def _compile_run(self, code: str, files: dict[str, bytes], limits: Limits) -> Result:
        return self.run(code, files=files, limits=limits)

    def memory_cap(self, limits: Limits) -> int:
        """The store's linear-memory cap: what the module starts with plus the run's memory_mb."""
        return self.guest_module.memory_cap(limits)

    def _snapshot_run(self, base: Runtime, code: bytes) -> tuple[bytes, dict[str, Any]]:
        """Run an image's set-up in an instance of ``base`` (the plain image), in the run-folder
        layout every run of the image has (warm-slot grants: /data and /out present)."""
        def layout() -> Workspace:
            return self.new_workspace(Limits(), None, None, None, False, placeholders=True)

        if self.compiler == engine.CRANELIFT and engine.is_compiled(base, self.fuel):  # plain is compiled: use it
            self._load(base)
            return images.run_setup(self.engine, self.fuel, self.pre, code, layout, start_thread)
        # else a quick compile for this one run of our own code (engine.QUICK), not the
        # minute or more that compiling plain for runs takes (serve's first start)
        quick, module = engine.quick_module(base, self._progress)
        linker = wt.Linker(quick)
        define_imports(linker, module)
        return images.run_setup(quick, False, linker.instantiate_pre(module), code, layout, start_thread)

    def start_guest(self, limits: Limits, data_dir: Any, out_dir: Any, files: dict[str, bytes] | None,
                    collect_out: bool, rest: bool = False, restore: Restore | None = None,
                    view: Path | None = None) -> tuple[Guest, Workspace]:
        """A fresh instance with its run folder. A turn-entered image's folder has the image's fd
        layout (the warm-slot one: /data and /out always preopened, hidden unless the run asks).
        ``rest`` and ``restore``: a session's (``Guest``). ``view``: the run's packages' view of
        the wrapper's folder (``site_mount``), at ``/wasm-runner`` in place of the wrapper's."""
        def bind(g: Guest) -> None:
            bind_slot(g, limits, data_dir, out_dir, files, collect_out)
            if view is not None:
                self._show_view(g, view)

        if self.via_turn:
            ws = self.new_workspace(limits, None, None, None, False, placeholders=True)
        else:
            ws = self.new_workspace(limits, data_dir, out_dir, files, collect_out, boot=view)
        try:
            guest = Guest(self.guest_module, ws, limits, wrapper.argv(self.boot),
                          prepare=bind if self.via_turn else None, rest=rest, restore=restore)
        except BaseException:
            ws.close()
            raise
        return guest, ws

    @staticmethod
    def _show_view(guest: Guest, view: Path) -> None:
        """Point an instance's ``/wasm-runner`` at ``view`` (a warm slot's or an image's, before hand-over)."""
        guest.io.rebind("/wasm-runner", extra_grant(guest.ws, "/wasm-runner", view, writable=False))

    def _start_slot(self, limits: Limits) -> Guest:
        """A warm pool's slot: a fresh instance at low priority, in a run folder of its own."""
        ws = self.new_workspace(limits, None, None, None, False, placeholders=True)
        return Guest(self.guest_module, ws, limits, wrapper.argv(self.boot), nice=True)

    def _runs_in_flight(self) -> int:
        return self._in_flight

    def _session_host(self) -> SessionHost:
        """What a session of this sandbox uses of it."""
        return SessionHost(self.runtime.name, self.runtime.kind == "reactor", self.start_guest, self.fuel_for,
                           self.memory_cap, self.snapshot_reference, self.snapshot_image)

    @property
    def name(self) -> str:
        return self.runtime.name

    def fuel_for(self, cpu_seconds: float) -> int:
        return max(1, int(cpu_seconds * self.runtime.fuel_per_cpu_second))

    # ---- set-up ------------------------------------------------------------------------------
    def new_workspace(
        self,
        limits: Limits,
        data_dir: str | os.PathLike[str] | None,
        out_dir: str | os.PathLike[str] | None,
        files: dict[str, bytes] | None,
        collect_out: bool,
        placeholders: bool = False,
        boot: Path | None = None,
    ) -> Workspace:
        """A fresh run folder with this runtime's read-only folders granted (``boot``: the folder
        at ``/wasm-runner``, default the wrapper's)."""
        fixed: list[tuple[str, str]] = []
        if self._stdlib is not None:
            fixed.append(("/usr/local/lib", str(self._stdlib)))
        if self.boot is not None:
            fixed.append(("/wasm-runner", str(boot or self.boot)))
        for guest_path, host in self._inner:
            fixed.append((guest_path, str(host)))
        return make_workspace(self._base, fixed, limits, data_dir, out_dir, files, collect_out,
                              placeholders)

    @property
    def runs_in_flight(self) -> int:
        """Runs of this sandbox between their start and their result."""
        return self._in_flight

    # ---- one run ------------------------------------------------------------------------------
    def run(
        self,
        code: str | bytes,
        *,
        stdin: bytes | str | None = None,
        limits: Limits | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        out_dir: str | os.PathLike[str] | None = None,
        files: dict[str, bytes] | None = None,
        collect_out: bool = False,
        filename: str | None = None,
        display: bool | str = False,
        on_output: OutputCallback | None = None,
        input_source: InputSource | None = None,
        cancel: threading.Event | None = None,
        pool: str | None = None,
        host_call: HostCall | None = None,
        functions: Mapping[str, HostFunction] | HostFunctions | None = None,
        network: RunNetwork | None = None,
        packages: Sequence[Path] = (),
    ) -> Result:
        """Run ``code`` in a fresh instance and return how it ended. Never raises for guest behaviour.

        ``files`` are placed in ``/scratch`` first. With ``collect_out`` and no ``out_dir``, a fresh
        ``/out`` is granted and what the program leaves there comes back in ``Result.files``.
        ``display`` captures matplotlib figures and the last expression's value in ``outputs``
        (``"figures"``: the figures only); ``plt.show()`` always puts the figures shown there.
        ``pool`` names a warm pool (``add_pool``): a pre-warmed, never-used instance is taken from it
        when one is ready, else the run starts a fresh instance as usual.
        ``host_call`` answers the run's host calls (``wasi.control``: a request written on fd 0,
        the answer read back), on the guest's thread; without it they are refused.
        ``functions`` (name -> callable, or ``HostFunctions``) are the app's functions the code
        may call (``from host import name``; docs/host-functions.md), within the limits
        ``host_calls``, ``host_call_bytes`` and ``host_seconds``; not with ``host_call``.
        ``network``: the run's network (``network.RunNetwork``: the operator's rules that apply
        to it; docs/security.md, "Network"); without it, or without rules, every request of
        ``urllib.request``/``http.client`` raises the sentence that says the network is off.
        ``packages``: unpacked, compiled package folders (``wasm_runner.packages``: the
        operator's wheelhouse) the code may import, read-only at ``/wasm-runner/site``
        (``site_mount``).
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
            data = stdin_bytes(stdin)
        except InvalidLimits as e:
            return Result.invalid(f"Invalid limits: {e}.", rt)
        except ValueError as e:
            return Result.invalid(f"Invalid input: {e}.", rt)
        if limits.memory_mb < self.min_memory_mb:
            return Result.invalid(
                f"Invalid limits: memory_mb={limits.memory_mb} is below the {self.min_memory_mb} MB "
                f"the {rt} runtime needs to start.", rt)
        host_functions = None
        if functions is not None and host_call is not None:
            return Result.invalid("A run takes functions or a host_call handler, not both.", rt)
        if host_call is None:
            net = network or RunNetwork(())
            if functions is not None or net.on or may_reach_network(code):  # else: no loader to compile
                try:
                    host_functions, code, filename = prepare_program(functions, code, filename, display, limits,
                                                                     (net.on, net.off))
                except InvalidFunctions as e:
                    return Result.invalid(f"Invalid functions: {e}.", rt)
            network = net
        view: Path | None = None
        if packages:
            if self.boot is None:
                return Result.invalid("The wrapper is still being prepared: packages cannot be mounted yet.", rt)
            try:
                view = view_folder(self.boot, [Path(p) for p in packages])
            except OSError as e:
                return Result.invalid(f"Cannot prepare the run's packages: {e}.", rt)
            code, filename = loader(code, filename, display), WRAPPER_FILE
        if pool is None and "plain" in self.pools:
            pool = "plain"
        if pool is not None and pool not in self.pools:
            return Result.invalid(f"Unknown pool {pool!r}; this sandbox has: {', '.join(self.pools) or 'none'}.", rt)
        with self._in_flight_lock:
            self._in_flight += 1
        try:
            return self._run_in_instance(code, data, limits, data_dir, out_dir, files, collect_out,
                                         filename, display, on_output, input_source, cancel, pool, t0,
                                         host_call, host_functions, network, view)
        finally:
            with self._in_flight_lock:
                self._in_flight -= 1
                idle = not self._in_flight
            if idle:  # the gap between runs: the pools refill now
                for p in list(self.pools.values()):
                    p.nudge()

    def _run_in_instance(self, code: str, data: bytes, limits: Limits, data_dir: Any, out_dir: Any,
                         files: dict[str, bytes] | None, collect_out: bool, filename: str | None,
                         display: bool | str, on_output: OutputCallback | None,
                         input_source: InputSource | None, cancel: threading.Event | None,
                         pool: str | None, t0: float, host_call: HostCall | None,
                         host_functions: HostFunctions | None, network: RunNetwork | None = None,
                         view: Path | None = None) -> Result:
        rt = self.runtime.name
        guest = self.pools[pool].take() if pool is not None else None
        try:
            if guest is not None:
                ws = guest.ws
                bind_slot(guest, limits, data_dir, out_dir, files, collect_out)
                if view is not None:
                    self._show_view(guest, view)
            else:
                guest, ws = self.start_guest(limits, data_dir, out_dir, files, collect_out, view=view)
        except (ValueError, OSError) as e:
            if guest is not None:
                guest.cancel()
                guest.ws.close()
            return Result.invalid(f"Cannot prepare the run: {e}.", rt)
        try:
            io = guest.io
            io.stdin = data
            io.input_source = input_source
            io.stdout.on_chunk = on_output
            io.stderr.on_chunk = on_output
            io.cancel = cancel
            io.host_call = host_call
            if host_functions is not None:
                io.host_call = HostCalls(host_functions, limits, io)
            if network is not None:
                io.host_call = NetworkCalls(network, io, io.host_call)
            io.submit(wrapper.job(code, limits, self.fuel_for(limits.cpu_seconds), filename,
                                  once=True, session=False, display=display,
                                  memory_cap=self.memory_cap(limits)))
            io.end_jobs()
            guest.wait(limits, cancel)
            result = classify(guest, limits, t0, rt)
            if ws.out is not None:
                result.files = [FileOut(p, c) for p, c in collect_files(ws.out, MAX_FILES_OUT_BYTES)]
            return result
        finally:
            if not guest.done.is_set():
                guest.cancel()
                guest.done.wait(5.0)
            if guest.done.is_set():  # the run folder goes with the instance, after the result
                guest.after_release(ws.close)
            else:
                ws.close()

    def add_pool(self, name: str, *, size: int = 2, preload: tuple[str, ...] = (),
                 memory_mb: int = 1024, refill: bool = True) -> WarmPool:
        """Keep ``size`` instances warm (``preload`` imported), refilled in the background
        (``refill=False``: warmed once, for a process that runs once)."""
        if name in self.pools:
            raise ValueError(f"pool {name!r} exists")
        p = WarmPool(name, self._start_slot, self._runs_in_flight, size=size, preload=preload,
                     memory_mb=memory_mb, refill=refill)
        self.pools[name] = p
        p.start()
        return p

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
        return Session(self._session_host(), limits, data_dir, out_dir, files)

    # ---- snapshots ----------------------------------------------------------------------------
    @property
    def snapshot_image(self) -> str:
        """What a session snapshot belongs to: this sandbox's module and guest wrapper (SHA-256)."""
        return hashlib.sha256(f"{self._module_sha256}|{wrapper.BOOT_SOURCE}".encode()).hexdigest()

    def snapshot_reference(self) -> Reference:
        """A never-run instance of this sandbox's module (made once): what snapshots diff against."""
        with self._in_flight_lock:
            if self._reference is None:
                self._reference = Reference(self.engine, self.pre)
            return self._reference

    def resume(
        self,
        snapshot: bytes,
        *,
        owner: str = "",
        secret: bytes | None = None,
        limits: Limits | None = None,
        data_dir: str | os.PathLike[str] | None = None,
        out_dir: str | os.PathLike[str] | None = None,
        within: Limits | None = None,
        user: str = "",
    ) -> Session:
        """A new session that continues the one ``snapshot`` saved (``Session.snapshot``), on
        this sandbox's image: its variables, imported modules, random state, files and open
        files as they were. The snapshot is hostile input: it is refused (``SnapshotRefused``)
        unless it authenticates for ``owner`` under ``secret`` (default
        ``sealing.default_secret()``), has this format version and this image, and fits its
        bounds. ``limits`` may tighten the saved session's limits; ``data_dir`` and ``out_dir``
        must be given when the saved session had them (its fd layout must match). ``within`` (a
        profile's limits: the most the saved session may have) bounds what the snapshot may
        inflate to by their memory cap and disk quota, checked before it is inflated (default:
        ``sealing.MAX_BODY_BYTES``). ``user``: the user of ``owner`` a snapshot sealed for one
        (``Session.snapshot(user=...)``) must name; one past its expiry is refused."""
        bound = MAX_BODY_BYTES if within is None else body_bound(self.memory_cap(within), within.disk_bytes)
        body = open_sealed(snapshot, owner=owner, secret=default_secret() if secret is None else secret,
                           image=self.snapshot_image, max_body=bound, user=user)
        state = parse(body, 65536)
        try:
            saved = Limits.from_dict(state.header["limits"]).validate()
        except (InvalidLimits, TypeError, ValueError, KeyError) as e:
            raise InvalidLimits(f"the snapshot's limits: {e}") from None
        limits = saved.tightened(limits) if limits is not None else saved
        if state.header["memory_pages"] * PAGE > self.memory_cap(limits):
            raise InvalidLimits(f"the snapshot's memory ({state.header['memory_pages'] * PAGE >> 20} MiB) is over "
                                f"these limits' memory ({self.memory_cap(limits) >> 20} MiB)")
        return Session(self._session_host(), limits, data_dir, out_dir, None, restore=state)

    def retire(self) -> None:
        """No more prestarted instances: every pool's are dropped and none are started again (the
        pools stay named: a run that names one starts its own instance), and the run folder goes
        when the last reference to the sandbox does (runs and sessions on it end there first).
        For a quick-tier sandbox that Cranelift's replaced (``default.default_sandbox``)."""
        for p in list(self.pools.values()):
            p.close()
        weakref.finalize(self, shutil.rmtree, self._base, True)

    def close(self) -> None:
        for p in list(self.pools.values()):
            p.close()
        self.pools.clear()
        shutil.rmtree(self._base, ignore_errors=True)
        ref, self._reference = self._reference, None
        if ref is not None:
            ref.store.close()
