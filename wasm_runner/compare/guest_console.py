"""The microVM tiers' side of the guest supervisor's protocol, shared by QEMU and Firecracker.

A run's guest is the cached base initramfs (``images.build_initramfs``) with a small cpio appended
that holds the program, its limits and its scratch size (``write_run_initrd``). The kernel unpacks
both; ``guest_supervisor.py`` runs the program and prints one framed JSON line on the serial console,
``@@WR-RESULT@@{...}``, which the host reads back with ``outcome_from_console``. The VMM (QEMU,
Firecracker) only changes how the guest is started; what runs inside and how it reports is this.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

from ..limits import Limits
from ..result import Status
from .images import initramfs_path, program_cpio
from .outcome import Outcome
from .process import classify

__all__ = ["MARK", "console_cap", "guest_limits", "outcome_from_console", "scratch_tmpfs_options", "write_run_initrd"]

MARK = "@@WR-RESULT@@"


def guest_limits(limits: Limits, cpu_scale: int = 1) -> dict[str, float | int]:
    """What the supervisor enforces inside (``cpu_scale``: the CPU limit's factor under emulation)."""
    return {
        "cpu_seconds": limits.cpu_seconds * cpu_scale, "wall_seconds": limits.wall_seconds,
        "memory_bytes": limits.memory_bytes, "disk_bytes": limits.disk_bytes,
        "stdout_bytes": limits.stdout_bytes, "stderr_bytes": limits.stderr_bytes,
    }


def scratch_tmpfs_options(limits: Limits) -> str:
    """The guest's ``/scratch`` tmpfs: sized to the disk limit, its inodes to the file limit."""
    return f"size={max(1, limits.disk_bytes // 1024)}k,nr_inodes={int(limits.max_files) + 4},mode=755"


def write_run_initrd(path: str, source: str, limits: Limits, cpu_scale: int = 1) -> None:
    """Write one run's initramfs to ``path``: the base image, then the program's own archive."""
    with open(initramfs_path(), "rb") as base, open(path, "wb") as out:
        shutil.copyfileobj(base, out, 1 << 20)
        out.write(program_cpio(source, json.dumps(guest_limits(limits, cpu_scale)), scratch_tmpfs_options(limits)))


def console_cap(limits: Limits) -> int:
    """Bytes of console output the host keeps: the result line escapes what the guest printed."""
    return 4 * (limits.stdout_bytes + limits.stderr_bytes) + (1 << 20)


def outcome_from_console(console: Outcome, limits: Limits, cpu_scale: int = 1) -> Outcome:
    """The program's ``Outcome`` from the VMM process's (``console``: its serial output as stdout).

    No result line: the VM died or was killed before the supervisor reported (``TIMEOUT`` when the
    host's deadline ended it, else ``INTERNAL_ERROR``), with the console's tail to say why. Lines
    before the result (the VMM's log, kernel messages) are ignored."""
    line = next((ln for ln in console.stdout.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        killed = console.status is Status.TIMEOUT
        return Outcome(Status.TIMEOUT if killed else Status.INTERNAL_ERROR, wall_ms=console.wall_ms,
                       stderr=(console.stdout[-1500:] + console.stderr[-500:]), harness_killed=killed,
                       message="the VM gave no result" + (" before its boot allowance ran out" if killed else ""))
    try:
        data = json.loads(line[len(MARK):])
    except json.JSONDecodeError:
        return Outcome(Status.INTERNAL_ERROR, wall_ms=console.wall_ms, stderr=console.stdout[-1500:],
                       message="the VM's result line was cut short")
    if "supervisor_error" in data:
        return Outcome(Status.INTERNAL_ERROR, wall_ms=console.wall_ms, message=data["supervisor_error"])
    killed_for = {"timeout": Status.TIMEOUT, "output_limit": Status.OUTPUT_LIMIT}.get(data["killed_for"] or "")
    inside = replace(limits, cpu_seconds=limits.cpu_seconds * cpu_scale)  # what the guest had
    return classify(data["returncode"], data["stdout"].encode(), data["stderr"].encode(),
                    console.wall_ms, inside, killed_for=killed_for, cpu_used=data["cpu_used"])
