"""Guests: one wasmtime instance on a thread of its own, from instantiation to its end.

Threads have a 32 MiB native stack (deep C recursion becomes a clean trap, not a crash) and are
reused across runs. The wrapper (``guest/runner.py``) asks for its job on the control channel; at
that hand-over, on the guest's own thread, ``Guest.handover`` arms the run's budgets (memory cap,
fuel, deadline), so start-up and warm-up never count against the run.
"""

from __future__ import annotations

import ctypes
import os
import queue
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import wasmtime as wt

from .. import engine, images
from ..limits import Limits
from ..wasi import GuestIO, current
from .workspace import Workspace

__all__ = [
    "GUEST_STACK",
    "Guest",
    "GuestModule",
    "GuestThreads",
    "Outcome",
    "OutputCallback",
    "WARMUP_FUEL",
    "WARMUP_SECONDS",
    "RELEASE_DELAY_S",
    "busy",
    "lower_priority",
    "restore_priority",
    "run_ended",
    "run_started",
    "start_thread",
]

GUEST_STACK = 32 << 20
WARMUP_FUEL = 400_000_000_000  # start-up and pre-imports, before any budget is armed
WARMUP_SECONDS = 120.0
# after a guest ended (``done``), its instance is released this much later: the caller's work
# with the result (classify, the HTTP response) does not wait for the interpreter lock behind
# the release's host Python and system calls (docs/performance.md, the fast path)
RELEASE_DELAY_S = 0.01

_stack_lock = threading.Lock()
PENDING_MAGIC = b"WRPB"  # after the stream byte of the wrapper's pending-output buffer
MAX_RECOVERED_BYTES = 8 << 20
STACK_LINE = "RecursionError: Python ran out of stack (the recursion went too deep)\n"

OutputCallback = Callable[[str, bytes], None]


class GuestThreads:
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


_threads = GuestThreads()


def start_thread(target: Callable[[], None]) -> None:
    """Run ``target`` on a guest thread."""
    _threads.submit(target)


# ---- how many runs are active: warm pools refill only while cores are free ------------------
_active = [0]
_active_lock = threading.Lock()


def run_started() -> None:
    with _active_lock:
        _active[0] += 1


def run_ended() -> None:
    with _active_lock:
        _active[0] -= 1


def busy() -> bool:
    """True while at least as many runs are active as there are cores: refills wait."""
    with _active_lock:
        return _active[0] >= (os.cpu_count() or 1)


def lower_priority() -> None:
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


@dataclass
class Outcome:
    """How the instance ended, as the host saw it (the wrapper's own report is on ``io.reports``)."""

    trap: str | None = None
    out_of_fuel: bool = False
    stack_overflow: bool = False
    fuel_used: int = 0
    memory_bytes: int = 0
    cpu_s: float = 0.0  # the guest thread's CPU time from hand-over to the end


@dataclass(frozen=True)
class GuestModule:
    """What a guest starts from, handed over by the sandbox that loaded it (``core.Sandbox``):
    the engine and the instantiable module, whether fuel is metered, how the instance is entered
    (``via_turn``: an image whose interpreter already ran; ``reactor``: the ``run`` export, else
    ``_start``), the linear memory the module starts with, and who is told of every guest's end
    (``on_end``, on the guest's thread; it must not raise or block)."""

    engine: wt.Engine
    pre: wt.InstancePre
    fuel: bool
    via_turn: bool
    reactor: bool
    start_memory_bytes: int
    on_end: Callable[[Outcome], None] | None = None

    def memory_cap(self, limits: Limits) -> int:
        """The store's linear-memory cap: what the module starts with plus the run's memory_mb."""
        return self.start_memory_bytes + limits.memory_bytes


class Guest:
    """One instance on its own thread, from instantiation to its end.

    ``nice``: a warm pool's slot, started at lower priority and not counted as an active run
    until its program is handed over.
    """

    def __init__(self, module: GuestModule, ws: Workspace, limits: Limits, argv: list[str], nice: bool = False,
                 prepare: Callable[[Guest], None] | None = None, rest: bool = False,
                 restore: Callable[[Guest, wt.Store, wt.Memory], None] | None = None):
        self.module = module
        # rest: a session's guest, entered through ``turn``, that returns to the host between
        # cells (``resting`` set, waiting for ``wake``); restore: make a fresh instance a saved
        # session's (its memory, fd table, files) instead of entering it
        self.rest = rest or restore is not None
        self.restore = restore
        self.resting = threading.Event()
        self._wakes: queue.SimpleQueue[Callable[[wt.Store], None] | str | None] = queue.SimpleQueue()
        self.cells_woken = 0  # cells handed to a resting guest (``wake``) ...
        self.cells_returned = 0  # ... and those whose turn returned
        self.nice = nice
        self.ws = ws
        self.limits = limits
        self.io = GuestIO(ws.grants, ws.quota, argv)
        self.io.stdout.cap = limits.stdout_bytes
        self.io.stderr.cap = limits.stderr_bytes
        self.io.deadline = time.monotonic() + WARMUP_SECONDS
        self.io.on_handover = self.handover
        self.io.on_report = self.record_fuel
        self.outcome = Outcome()
        self.done = threading.Event()
        self._released = False  # the store and fds are closed (after ``done``)
        self._after_release: list[Callable[[], None]] = []
        self._release_lock = threading.Lock()
        self.handed_over = threading.Event()
        self.store: wt.Store | None = None
        self.native_id: int | None = None
        self._fuel_at_handover = 0
        self._cpu_at_handover = 0.0
        if prepare is not None:  # before the guest runs: an image run's grants and quota
            prepare(self)
        start_thread(self.main)

    # runs on the guest thread, inside fd_write of the control channel: a session cell's fuel
    def record_fuel(self) -> None:
        store = self.store
        if store is not None and self.module.fuel and self._fuel_at_handover:
            self.outcome.fuel_used = max(0, self._fuel_at_handover - store.get_fuel())

    # runs on the guest thread, inside fd_read of the control channel
    def handover(self, job: dict[str, Any]) -> None:
        budget = job.get("budget")
        if budget is None:  # a warm-up job: no user code, keep the warm-up allowance
            return
        if self.nice:  # a warm slot's run starts now: count it, at normal priority
            self.nice = False
            run_started()
            restore_priority()
        store = self.store
        assert store is not None
        if "memory" in budget:
            store.set_limits(memory_size=int(budget["memory"]))
        if self.module.fuel:
            store.set_fuel(int(budget["fuel"]))
            self._fuel_at_handover = int(budget["fuel"])
        self.io.deadline = time.monotonic() + float(budget["wall"])
        self.io.input_wait_seconds = float(budget.get("input_wait", self.io.input_wait_seconds))
        self.io.input_wait_s = 0.0
        self._cpu_at_handover = time.thread_time()
        self.handed_over.set()

    def main(self) -> None:
        """The guest thread's body: instantiate, run the entry point, record how it ended."""
        io = self.io
        current.io = io
        self.native_id = threading.get_native_id()
        if self.nice:
            lower_priority()
        else:
            run_started()
        store = wt.Store(self.module.engine)
        self.store = store
        try:
            store.set_limits(memory_size=self.module.memory_cap(self.limits))
            if self.module.fuel:
                store.set_fuel(WARMUP_FUEL)
            engine.watch(store, io.should_stop)
            inst = self.module.pre.instantiate(store)
            exports = inst.exports(store)
            mem = exports.get("memory")
            if isinstance(mem, wt.Memory):
                io.memory = mem
            if self.restore is not None:  # a saved session: its state, then at rest
                assert io.memory is not None
                restore, self.restore = self.restore, None  # the saved state (the whole body)
                restore(self, store, io.memory)  # is not kept once it is in the instance
                del restore
                self._rest(store, exports)
            elif self.rest:  # a session that rests between cells: entered through turn, with
                # the program of its command line (``wrapper.argv``: python -c PROGRAM), or the
                # entry of an image whose interpreter ran; later turns run ``images.ENTRY``,
                # which goes on where the wrapper rested
                first = images.ENTRY if self.module.via_turn else io.argv[-1] + b"\n"
                self._turn(store, exports, first)
                self._rest(store, exports)
            elif self.module.via_turn:  # an image whose interpreter already ran: enter through turn
                self._turn(store, exports, images.ENTRY)
            else:
                entry = exports["run"] if self.module.reactor else exports["_start"]
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
            if io.memory is not None:
                try:
                    self.recover_output(store)
                except Exception:  # noqa: BLE001 - best effort: the run's end must not fail
                    pass
            if self.outcome.stack_overflow and io.stop_reason is None and not io.reports:
                # the interpreter itself ran out of stack: say so where the student looks
                io.stderr.write(STACK_LINE.encode())
            try:
                if self.module.fuel and self._fuel_at_handover:
                    self.outcome.fuel_used = max(0, self._fuel_at_handover - store.get_fuel())
                if io.memory is not None:
                    self.outcome.memory_bytes = io.memory.data_len(store)
            except wt.WasmtimeError:
                pass
            io.memory = None
            io.tick_host = None  # the memory goes with the store: no more pace flags
            current.io = None
            self.store = None
            hook = self.module.on_end
            if hook is not None:
                try:
                    hook(self.outcome)
                except Exception:  # noqa: BLE001 - an observer never breaks a run
                    pass
            # The result is complete: tell the caller first, then release the instance, a moment
            # later (RELEASE_DELAY_S: the caller goes first). Dropping a large linear memory (say
            # numpy and pandas loaded) takes milliseconds that no run needs to wait for; it still
            # happens on this thread before it takes other work.
            self.done.set()
            if not self.nice:
                run_ended()
            time.sleep(RELEASE_DELAY_S)
            store.close()
            io.close()
            with self._release_lock:
                self._released = True
                after, self._after_release = self._after_release, []
            for fn in after:
                try:
                    fn()
                except Exception:  # noqa: BLE001 - cleanup of a finished run never raises here
                    pass

    def after_release(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once this guest's instance is released (now, when it already is): a run
        folder removed after its instance, off the caller's way."""
        with self._release_lock:
            if not self._released:
                self._after_release.append(fn)
                return
        fn()

    def _turn(self, store: wt.Store, exports: Any, code: bytes) -> int:
        p = exports["host_alloc"](store, len(code)) & 0xFFFFFFFF
        self.io.memory.write(store, code, p)  # type: ignore[union-attr]
        return int(exports["turn"](store, p, len(code)))

    def _rest(self, store: wt.Store, exports: Any) -> None:
        """Between cells: wait on this thread for the next cell (``wake()``), a call on the
        resting store (``at_rest``) or the end (``cancel``). A cell is one more ``turn`` of the
        wrapper's entry: it reads the cell's job (already submitted) and returns after its report."""
        io = self.io
        while io.stop_reason is None:
            io.control = True  # what fd 0 reads next is the next cell's job
            self.resting.set()
            cmd = self._wakes.get()
            if cmd is None:
                return
            if callable(cmd):
                cmd(store)
                continue
            self.resting.clear()
            # the way back in, to the job's hand-over, runs on the warm-up allowance
            if self.module.fuel:
                store.set_fuel(WARMUP_FUEL)
            io.deadline = time.monotonic() + WARMUP_SECONDS
            value = self._turn(store, exports, images.ENTRY)
            self.cells_returned += 1
            if value != 0 and io.stop_reason is None:
                self.outcome.trap = f"the session's wrapper failed ({value})"
                return

    def wake(self) -> int:
        """Run the job just submitted (a resting guest); the cell's number (``cells_returned``
        reaches it when its turn returned)."""
        self.cells_woken += 1
        self._wakes.put("cell")
        return self.cells_woken

    def at_rest(self, fn: Callable[[wt.Store], None], timeout: float) -> bool:
        """Run ``fn(store)`` on the guest's thread while it rests; False when it did not rest
        within ``timeout`` (or ended)."""
        if not self.rest:
            return False
        end = time.monotonic() + timeout
        while not self.resting.wait(0.05):
            if self.done.is_set() or time.monotonic() > end:
                return False
        finished = threading.Event()
        error: list[BaseException] = []

        def call(store: wt.Store) -> None:
            try:
                fn(store)
            except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
                error.append(e)
            finally:
                finished.set()

        self._wakes.put(call)
        while not finished.wait(0.05):
            if self.done.is_set():
                return False
        if error:
            raise error[0]
        return True

    def recover_output(self, store: wt.Store) -> None:
        """Write out what the wrapper held in its pending buffer when the run ended by force
        (a limit, a trap, a cancel): output is buffered in the guest, never lost.

        The wrapper told us (``io.outbuf``) the address of a ``bytearray`` whose content is
        one byte naming the stream (1 or 2), ``PENDING_MAGIC``, then the pending bytes. Its
        header is read from the guest's memory and checked before anything is believed.
        """
        io = self.io
        addr = io.outbuf
        if addr is None or io.memory is None:
            return
        size = io.memory.data_len(store)
        base = ctypes.addressof(io.memory.data_ptr(store).contents)
        if not 0 <= addr <= size - 32:
            return
        head = ctypes.string_at(base + addr, 32)
        length = struct.unpack_from("<I", head, 8)[0]  # ob_size of a 32-bit PyVarObject
        if not len(PENDING_MAGIC) + 1 < length <= MAX_RECOVERED_BYTES:
            return
        for off in range(12, 32, 4):  # ob_bytes / ob_start: the pointer to the content
            ptr = struct.unpack_from("<I", head, off)[0]
            if not 0 < ptr <= size - length:
                continue
            data = ctypes.string_at(base + ptr, length)
            if data[1 : 1 + len(PENDING_MAGIC)] == PENDING_MAGIC and data[0] in (1, 2):
                stream = io.stdout if data[0] == 1 else io.stderr
                if not stream.write(data[1 + len(PENDING_MAGIC) :]):
                    io.stop("output")
                return

    def cancel(self) -> None:
        self.io.stop("cancelled")
        self.io.end_jobs()
        self._wakes.put(None)

    def wait(self, limits: Limits, cancel: threading.Event | None) -> None:
        """Wait for the guest; the epoch callback enforces the deadline, this is a last resort."""
        hard_stop = time.monotonic() + WARMUP_SECONDS + limits.wall_seconds + 5.0
        while not self.done.wait(0.05):
            if cancel is not None and cancel.is_set():
                self.io.stop("cancelled")
            if self.io.past(hard_stop):
                self.io.stop("timeout")
                self.done.wait(2.0)
                return
