"""Run one host process under a wall deadline and output caps, and read how it ended.

Shared by the tiers that start a process (native subprocess, bubblewrap, crun, QEMU, Node): the
deadline and the caps are enforced here, resource limits by the kernel (rlimits) or by the runtime.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..limits import Limits
from ..result import Status
from .outcome import Outcome

__all__ = ["become_subreaper", "classify", "rlimits_for", "run_process"]

_PR_SET_CHILD_SUBREAPER = 36


def rlimits_for(limits: Limits, *, nproc: int | None = 64) -> dict[int, tuple[int, int]]:
    """The rlimits that approximate ``limits`` for a native process."""
    cpu = max(1, round(limits.cpu_seconds))
    out = {
        resource.RLIMIT_CPU: (cpu, cpu + 1),
        resource.RLIMIT_AS: (limits.memory_bytes, limits.memory_bytes),
        resource.RLIMIT_FSIZE: (limits.disk_bytes, limits.disk_bytes),
        resource.RLIMIT_NOFILE: (256, 256),
        resource.RLIMIT_CORE: (0, 0),
    }
    if nproc is not None:
        out[resource.RLIMIT_NPROC] = (nproc, nproc)
    return out


def become_subreaper() -> bool:
    """Make this process adopt orphaned descendants, so a daemon that escapes a run is found."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


@dataclass
class _Capture:
    data: bytearray
    overflow: bool = False


def _reader(stream, cap: int, capture: _Capture, on_overflow: Callable[[], None]) -> None:
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            return
        room = cap - len(capture.data)
        if len(chunk) > room:
            capture.data += chunk[: max(room, 0)]
            if not capture.overflow:
                capture.overflow = True
                on_overflow()
        else:
            capture.data += chunk


def run_process(
    argv: Sequence[str],
    limits: Limits,
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    rlimits: Mapping[int, tuple[int, int]] | None = None,
    user: int | None = None,
    group: int | None = None,
    wall_seconds: float | None = None,
    on_kill: Callable[[], None] | None = None,
    stdin_bytes: bytes | None = None,
    wrapper_exit_signals: bool = False,
) -> Outcome:
    """Start ``argv`` in a new session, enforce the wall deadline and output caps, and report.

    ``wrapper_exit_signals``: the process is a runtime (bwrap, crun) that reports its child's death
    by signal N as exit code 128 + N. ``on_kill`` runs after the process group has been killed (a runtime's own clean-up, e.g.
    ``crun kill``). The process group is always killed at the end, so children left behind in it
    do not outlive the run; children that left the group are the host probes' business.
    """
    deadline_s = limits.wall_seconds if wall_seconds is None else wall_seconds
    limits_to_set = dict(rlimits or {})

    def preexec() -> None:
        for res, pair in limits_to_set.items():
            resource.setrlimit(res, pair)

    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if stdin_bytes is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env or {}),
        start_new_session=True,
        preexec_fn=preexec,  # noqa: PLW1509 - only setrlimit; must apply before exec
        user=user,
        group=group,
        extra_groups=[] if user is not None else None,
        close_fds=True,
    )
    reason: list[Status] = []
    lock = threading.Lock()

    def kill(why: Status) -> None:
        with lock:
            if not reason:
                reason.append(why)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    out = _Capture(bytearray())
    err = _Capture(bytearray())
    readers = [
        threading.Thread(target=_reader, args=(proc.stdout, limits.stdout_bytes, out,
                                               lambda: kill(Status.OUTPUT_LIMIT)), daemon=True),
        threading.Thread(target=_reader, args=(proc.stderr, limits.stderr_bytes, err,
                                               lambda: kill(Status.OUTPUT_LIMIT)), daemon=True),
    ]
    for t in readers:
        t.start()
    if stdin_bytes is not None and proc.stdin is not None:
        try:
            proc.stdin.write(stdin_bytes)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
    timer = threading.Timer(deadline_s, kill, args=(Status.TIMEOUT,))
    timer.daemon = True
    timer.start()
    _, wait_status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(wait_status)
    timer.cancel()
    wall_ms = (time.monotonic() - started) * 1000
    # The group may still hold children; end them, then let the readers drain.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if reason and on_kill is not None:
        on_kill()
    for t in readers:
        t.join(timeout=5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    cpu_used = usage.ru_utime + usage.ru_stime
    code = proc.returncode
    if wrapper_exit_signals and 128 < code < 128 + 65:
        code = -(code - 128)
    return classify(
        code,
        bytes(out.data),
        bytes(err.data),
        wall_ms,
        limits,
        killed_for=reason[0] if reason else None,
        cpu_used=cpu_used,
    )


def classify(
    returncode: int,
    stdout: bytes,
    stderr: bytes,
    wall_ms: float,
    limits: Limits,
    *,
    killed_for: Status | None = None,
    cpu_used: float = 0.0,
) -> Outcome:
    """Turn an exit status into an ``Outcome``, naming the limit that stopped the run."""
    text_out = stdout.decode("utf-8", "replace")
    text_err = stderr.decode("utf-8", "replace")
    status, limit, message = Status.OK, None, ""
    code: int | None = returncode if returncode >= 0 else None
    if killed_for is Status.TIMEOUT:
        status, limit, message = Status.TIMEOUT, "wall", f"wall deadline of {limits.wall_seconds} s reached"
    elif killed_for is Status.OUTPUT_LIMIT:
        status, limit, message = Status.OUTPUT_LIMIT, "output", "output cap reached"
    elif returncode < 0:
        sig = -returncode
        # RLIMIT_CPU sends SIGXCPU at the soft limit and SIGKILL at the hard one (soft + 1 s). A
        # SIGKILL nobody here sent, after at least the CPU limit in time, is read as the hard limit
        # (a wrapper such as bwrap does not always pass its child's CPU time up).
        elapsed_enough = max(cpu_used, wall_ms / 1000) >= limits.cpu_seconds * 0.9
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and elapsed_enough):
            status, limit, message = Status.CPU_LIMIT, "cpu", f"CPU limit of {limits.cpu_seconds} s reached"
        elif sig == signal.SIGXFSZ:
            status, limit, message = Status.DISK_LIMIT, "disk", "file size limit reached"
        else:
            status, message = Status.ERROR, f"killed by signal {signal.Signals(sig).name}"
    elif returncode != 0:
        tail = text_err[-400:]
        if "MemoryError" in tail:
            status, limit, message = Status.MEMORY_LIMIT, "memory", "memory limit reached"
        elif "No space left on device" in tail or "Disk quota exceeded" in tail or "File too large" in tail:
            status, limit, message = Status.DISK_LIMIT, "disk", "disk limit reached"
        else:
            status, message = Status.ERROR, f"exit code {returncode}"
    return Outcome(status=status, exit_code=code, stdout=text_out, stderr=text_err,
                   wall_ms=wall_ms, limit=limit, message=message)
