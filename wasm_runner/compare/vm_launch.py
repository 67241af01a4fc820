"""The launch step the microVM tiers share (QEMU ``microvm`` and Firecracker): the guest image
made ready once (``ready_boot_image``: the initramfs built, the kernel unpacked), then one VM per
run (``run_in_vm``: that run's initramfs written to a scratch folder, the VMM started on it with
the console capped, the program's ``Outcome`` read from the console, the folder removed)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..limits import Limits
from .guest_console import console_cap, outcome_from_console, write_run_initrd
from .images import ImageError, build_initramfs
from .kernel import boot_kernel
from .outcome import Outcome
from .process import run_process

__all__ = ["VmArgv", "ready_boot_image", "run_in_vm"]

# (the run's scratch folder, its initramfs there) -> the VMM's command line
VmArgv = Callable[[str, str], list[str]]


def ready_boot_image(kernel: Path | None) -> Path:
    """Build the tiers' initramfs (once; ``RuntimeError`` saying why it cannot be) and return the
    image of ``kernel`` a VMM boots (``kernel.boot_kernel``: unpacked when it can be)."""
    try:
        build_initramfs()
    except ImageError as exc:
        raise RuntimeError(str(exc)) from exc
    assert kernel is not None
    return boot_kernel(kernel)


def run_in_vm(name: str, source: str, limits: Limits, argv: VmArgv, boot_allowance: float,
              cpu_scale: int = 1) -> Outcome:
    """Run ``source`` in one VM: ``argv`` gives the VMM's command line for the run's initramfs
    (in a scratch folder ``wasm-runner-<name>-*``, its working directory), given ``boot_allowance``
    seconds beyond the wall limit to boot; the program's ``Outcome`` from the console."""
    work = tempfile.mkdtemp(prefix=f"wasm-runner-{name}-")
    try:
        initrd = os.path.join(work, "initrd.cpio")
        write_run_initrd(initrd, source, limits, cpu_scale)
        console = run_process(
            argv(work, initrd),
            replace(limits, stdout_bytes=console_cap(limits), stderr_bytes=1 << 20),
            cwd=work, env={"PATH": "/usr/bin:/bin"},
            wall_seconds=limits.wall_seconds + boot_allowance,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return outcome_from_console(console, limits, cpu_scale)
