"""Tier 3: a QEMU ``microvm`` per run: its own Debian kernel, an initramfs root, no devices but a serial
console, no network. Inside, a supervisor runs the program as nobody under rlimits in a tmpfs scratch
sized to the disk limit, and reports over the console.

KVM is used when ``/dev/kvm`` can run a stock kernel; otherwise QEMU's software emulator (TCG), which
isolates the same way but boots slower. ``WASM_RUNNER_VM_ACCEL=kvm|tcg`` overrides the choice.
QEMU loads the kernel unpacked (``kernel.boot_kernel``), which spares each TCG boot 10-12 s of
emulated decompression; if that does not boot, the tier falls back to the ``vmlinuz`` itself.
"""

from __future__ import annotations

import os
import shutil

from ...environment import VM_ACCEL
from ...limits import Limits
from ..images import find_kernel, initramfs_path, rootfs_ready
from ..outcome import Outcome
from ..vm_launch import ready_boot_image, run_in_vm
from .base import Tier

__all__ = ["PROBE_LIMITS", "QemuMicrovmTier", "choose_accel", "kvm_status"]

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


def kvm_status() -> tuple[bool, str]:
    """Whether ``/dev/kvm`` can run a stock guest kernel such as Debian's: (usable, why)."""
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm not accessible"
    if os.path.isdir("/sys/module/kvm_pvm"):
        return False, "/dev/kvm is PVM (kvm_pvm), which runs only PVM-built guest kernels, not Debian's"
    return True, "/dev/kvm usable"


def choose_accel() -> tuple[str, str]:
    """(``kvm`` or ``tcg``, why)."""
    forced = VM_ACCEL.raw()
    if forced in ("kvm", "tcg"):
        return forced, f"forced by WASM_RUNNER_VM_ACCEL={forced}"
    usable, why = kvm_status()
    return ("kvm" if usable else "tcg"), why


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
        self.boot_image = ready_boot_image(self.kernel)
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
        return run_in_vm("microvm", source, limits,
                         lambda _work, initrd: self._argv(initrd, limits.memory_mb + 256),
                         self.boot_allowance, self.cpu_scale)
