"""Tier 3: a QEMU ``microvm`` per run: its own Debian kernel, an initramfs root, no devices but a serial
console, no network. Inside, a supervisor runs the program as nobody under rlimits in a tmpfs scratch
sized to the disk limit, and reports over the console.

KVM is used when ``/dev/kvm`` can run a stock kernel; otherwise QEMU's software emulator (TCG), which
isolates the same way but boots slower. ``WASM_RUNNER_VM_ACCEL=kvm|tcg`` overrides the choice.
QEMU loads the kernel unpacked (``kernel.boot_kernel``), which spares each TCG boot 10-12 s of
emulated decompression; if that does not boot, the tier falls back to the ``vmlinuz`` itself.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import replace

from ...environment import VM_ACCEL
from ...limits import Limits
from ...result import Status
from ..images import (
    ImageError,
    build_initramfs,
    find_kernel,
    initramfs_path,
    program_cpio,
    rootfs_ready,
)
from ..kernel import boot_kernel
from ..outcome import Outcome
from ..process import classify, run_process
from .base import Tier

__all__ = ["QemuMicrovmTier", "choose_accel"]

MARK = "@@WR-RESULT@@"
CMDLINE = "console=ttyS0 quiet loglevel=1 nokaslr panic=-1 reboot=t rdinit=/init"
# Under TCG a loaded host makes the kernel's timer calibration fail and hang: give it the figures.
TCG_CMDLINE = " tsc_early_khz=2000000 lpj=4000000 no_timer_check"
# prepare's boot check: generous, since under TCG the guest's CPU clock follows the host's wall
# clock and a busy host charges the guest's Python start-up (0.5 s idle) several seconds
PROBE_LIMITS = Limits(cpu_seconds=10, wall_seconds=30)
# Under TCG the emulated CPU does a fraction of the host's work per second (Python's start-up alone
# is 0.5 s of guest CPU, 20 ms natively) and the guest's CPU clock follows the host's wall clock, so
# a busy host charges a guest for time it was not even scheduled: with the comparison's 1 CPU second
# print("hi") was refused at load 10. There the guest's CPU limit is this many times the
# comparison's; the wall limit (wall is wall) is unchanged and is what stops a busy loop.
TCG_CPU_SCALE = 10


def choose_accel() -> tuple[str, str]:
    """(``kvm`` or ``tcg``, why)."""
    forced = VM_ACCEL.raw()
    if forced in ("kvm", "tcg"):
        return forced, f"forced by WASM_RUNNER_VM_ACCEL={forced}"
    if not os.path.exists("/dev/kvm"):
        return "tcg", "no /dev/kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg", "/dev/kvm not accessible"
    if os.path.isdir("/sys/module/kvm_pvm"):
        return "tcg", "/dev/kvm is PVM (kvm_pvm), which runs only PVM-built guest kernels, not Debian's"
    return "kvm", "/dev/kvm usable"


class QemuMicrovmTier(Tier):
    name = "qemu-microvm"
    family = "microvm"

    def __init__(self) -> None:
        self.qemu = shutil.which("qemu-system-x86_64")
        self.kernel = find_kernel()
        self.boot_image = self.kernel  # what QEMU loads: the unpacked kernel once prepared
        self.accel, self.accel_why = choose_accel()
        self.boot_allowance = 20.0 if self.accel == "kvm" else 90.0
        self.cpu_scale = 1 if self.accel == "kvm" else TCG_CPU_SCALE
        self.grace = self.boot_allowance + 15
        self.description = (f"QEMU microvm ({self.accel}): own kernel, initramfs root, no network device, "
                            "nobody + rlimits inside, tmpfs scratch sized to the disk limit"
                            + (f"; emulated CPU: {self.cpu_scale}x the CPU limit inside" if self.cpu_scale > 1 else ""))

    def available(self) -> tuple[bool, str]:
        if not self.qemu:
            return False, "qemu-system-x86_64 not on PATH (Debian package qemu-system-x86)"
        if not self.kernel:
            return False, "no readable kernel in /boot (Debian package linux-image-amd64)"
        if not rootfs_ready() and not initramfs_path().is_file() and os.geteuid() != 0:
            return False, "no cached initramfs and not root to build one"
        return True, f"{self.kernel.name}, accel {self.accel} ({self.accel_why})"

    def prepare(self) -> None:
        try:
            build_initramfs()
        except ImageError as exc:
            raise RuntimeError(str(exc)) from exc
        assert self.kernel is not None
        self.boot_image = boot_kernel(self.kernel)
        probe = self.run('print("probe")\n', PROBE_LIMITS)
        if (not probe.ok or "probe" not in probe.stdout) and self.boot_image != self.kernel:
            self.boot_image = self.kernel  # the unpacked kernel did not boot here: the vmlinuz does
            probe = self.run('print("probe")\n', PROBE_LIMITS)
        if not probe.ok or "probe" not in probe.stdout:
            raise RuntimeError(f"the microVM did not boot with {self.accel}: {probe.message} "
                               f"{probe.stderr[-300:]}")

    def _argv(self, image: str, memory_mb: int) -> list[str]:
        assert self.qemu and self.boot_image
        argv = [self.qemu, "-M", "microvm,x-option-roms=off,rtc=on,pit=on,pic=on", "-accel", self.accel]
        if self.accel == "kvm":
            argv += ["-cpu", "host,-arch-capabilities"]
        return argv + [
            "-m", str(memory_mb), "-smp", "1", "-nodefaults", "-no-user-config", "-nographic",
            "-no-reboot", "-serial", "stdio", "-kernel", str(self.boot_image), "-initrd", image,
            "-append", CMDLINE + (TCG_CMDLINE if self.accel == "tcg" else ""),
        ]

    def run(self, source: str, limits: Limits) -> Outcome:
        work = tempfile.mkdtemp(prefix="wasm-runner-microvm-")
        try:
            image = os.path.join(work, "initrd.cpio")
            guest_limits = {
                "cpu_seconds": limits.cpu_seconds * self.cpu_scale, "wall_seconds": limits.wall_seconds,
                "memory_bytes": limits.memory_bytes, "disk_bytes": limits.disk_bytes,
                "stdout_bytes": limits.stdout_bytes, "stderr_bytes": limits.stderr_bytes,
            }
            tmpfs = f"size={max(1, limits.disk_bytes // 1024)}k,nr_inodes={int(limits.max_files) + 4},mode=755"
            with open(initramfs_path(), "rb") as base, open(image, "wb") as out:
                shutil.copyfileobj(base, out, 1 << 20)
                out.write(program_cpio(source, json.dumps(guest_limits), tmpfs))
            console_cap = 4 * (limits.stdout_bytes + limits.stderr_bytes) + (1 << 20)
            proc = run_process(
                self._argv(image, limits.memory_mb + 256),
                replace(limits, stdout_bytes=console_cap, stderr_bytes=1 << 20),
                env={"PATH": "/usr/bin:/bin"},
                wall_seconds=limits.wall_seconds + self.boot_allowance,
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith(MARK)), None)
        if line is None:
            killed = proc.status is Status.TIMEOUT
            return Outcome(Status.TIMEOUT if killed else Status.INTERNAL_ERROR, wall_ms=proc.wall_ms,
                           stderr=(proc.stdout[-1500:] + proc.stderr[-500:]), harness_killed=killed,
                           message="the VM gave no result" + (" before its boot allowance ran out" if killed else ""))
        data = json.loads(line[len(MARK):])
        if "supervisor_error" in data:
            return Outcome(Status.INTERNAL_ERROR, wall_ms=proc.wall_ms, message=data["supervisor_error"])
        killed_for = {"timeout": Status.TIMEOUT, "output_limit": Status.OUTPUT_LIMIT}.get(data["killed_for"] or "")
        inside = replace(limits, cpu_seconds=limits.cpu_seconds * self.cpu_scale)  # what the guest had
        outcome = classify(data["returncode"], data["stdout"].encode(), data["stderr"].encode(),
                           proc.wall_ms, inside, killed_for=killed_for, cpu_used=data["cpu_used"])
        return outcome
