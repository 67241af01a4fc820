"""Tier 3b: a Firecracker microVM per run, the same guest as the QEMU microVM tier.

Firecracker gets Debian's kernel unpacked to its ELF ``vmlinux`` (``kernel.boot_kernel``: Firecracker
boots no bzImage on x86_64), the QEMU tier's initramfs with the run's program appended as its root
(``guest_console.write_run_initrd``), one vCPU, the memory limit plus room for the guest kernel,
no drive, no network interface, no vsock, balloon or metadata service: a serial console and the i8042
reset line are all the guest has. It is started without an API socket from a configuration file
(``firecracker --no-api --config-file``); inside, the same supervisor runs the program as nobody
under rlimits in a sized tmpfs and reports over the console, read by the same code as QEMU's.

No drive, though Firecracker's usual set-up boots a block device: Debian's kernel builds
``virtio_blk`` and ``virtio_mmio`` as modules and leaves out ``CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES``,
while Firecracker's kernel policy asks for ``CONFIG_VIRTIO_BLK=y`` to boot from a root device.
Its policy for booting from an initrd (``CONFIG_BLK_DEV_INITRD``, ``CONFIG_KVM_GUEST``) is what
Debian's kernel meets; ``kernel_fit`` reads the kernel's config and says which applies.

Used where a ``firecracker`` binary is installed and ``/dev/kvm`` runs a stock kernel (the microVM
tier's ``kvm_status``): Firecracker has no emulator to fall back to. Otherwise the row says which
of those is missing. No package registry ships firecracker (searched 2026-12-06, docs/comparison.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...limits import Limits
from ..images import find_kernel, initramfs_path, rootfs_ready
from ..outcome import Outcome
from ..vm_launch import ready_boot_image, run_in_vm
from .base import Tier
from .microvm_tier import PROBE_LIMITS, kvm_status

__all__ = ["BOOT_ARGS", "FirecrackerTier", "KernelFit", "firecracker_config", "firecracker_reasons", "firecracker_version", "kernel_fit"]

# Firecracker's documented arguments (reboot=k: the guest's reboot is an i8042 reset, on which
# Firecracker exits; panic=1: a dead init reboots, so ends the VM; i8042.*: skip the probes that
# cost boot time), then the QEMU tier's: quiet, the initramfs's /init.
BOOT_ARGS = ("console=ttyS0 reboot=k panic=1 pci=off i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd "
             "quiet loglevel=1 nokaslr rdinit=/init")
GUEST_KERNEL_MIB = 256  # guest memory beyond the program's limit: the kernel and the initramfs root
BOOT_ALLOWANCE = 20.0  # seconds past the wall limit for the boot and the power-off (KVM only)
NO_REGISTRY = ("no package registry ships a firecracker binary (Debian has no package; "
               "PyPI and npm hold only clients and SDKs)")

# Firecracker's kernel policy (docs/kernel-policy.md, "Minimal boot requirements", x86_64): what an
# initrd boot needs, plus the serial console the supervisor reports on and the i8042 keyboard
# controller that carries reboot=k; and what booting from a root block device would need.
_INITRD_BOOT = ("CONFIG_BLK_DEV_INITRD", "CONFIG_KVM_GUEST", "CONFIG_SERIAL_8250_CONSOLE",
                "CONFIG_SERIO_I8042", "CONFIG_KEYBOARD_ATKBD")
_BLOCK_ROOT = ("CONFIG_VIRTIO_MMIO", "CONFIG_VIRTIO_BLK", "CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES")


@dataclass(frozen=True)
class KernelFit:
    """What a kernel's build configuration lets Firecracker boot: each list names the options that are
    not built in (``=y``), with their value (``=m``, ``unset``)."""

    initrd_missing: tuple[str, ...]
    block_root_missing: tuple[str, ...]

    @property
    def boots_from_initrd(self) -> bool:
        return not self.initrd_missing


def kernel_fit(config_text: str) -> KernelFit:
    """Read a kernel's ``.config`` (Debian's ``/boot/config-VERSION``) against Firecracker's policy."""
    values = dict(re.findall(r"^(CONFIG_\w+)=(\S+)$", config_text, re.MULTILINE))

    def missing(options: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(f"{o}={values.get(o, 'unset')}" for o in options if values.get(o) != "y")

    return KernelFit(missing(_INITRD_BOOT), missing(_BLOCK_ROOT))


def kernel_config(kernel: Path) -> Path | None:
    """Debian's ``/boot/config-VERSION`` beside ``/boot/vmlinuz-VERSION``, if present."""
    config = kernel.with_name(kernel.name.replace("vmlinuz-", "config-", 1))
    return config if config != kernel and config.is_file() else None


def firecracker_config(kernel: str, initrd: str, memory_mib: int, boot_args: str = BOOT_ARGS) -> dict[str, Any]:
    """The VM, as ``firecracker --config-file`` reads it (the API's full VM configuration): one vCPU,
    ``memory_mib`` of memory, the kernel and initramfs, and no device beyond the serial console."""
    return {
        "boot-source": {"kernel_image_path": kernel, "initrd_path": initrd, "boot_args": boot_args},
        "drives": [],
        "machine-config": {"vcpu_count": 1, "mem_size_mib": memory_mib, "smt": False, "track_dirty_pages": False},
        "network-interfaces": [],
    }


def firecracker_reasons(binary: str | None, version: str, kvm: tuple[bool, str], fit: KernelFit | None,
                        kernel: Path | None, guest_image: bool) -> list[str]:
    """Why Firecracker cannot run here, every reason that applies (none: it can). ``version``: what
    ``firecracker --version`` printed, or why it failed (starting with ``failed``)."""
    reasons = []
    if not binary:
        reasons.append(f"firecracker not on PATH: {NO_REGISTRY}")
    elif version.startswith("failed"):
        reasons.append(f"{binary} --version {version}")
    usable, why = kvm
    if not usable:
        reasons.append(f"it needs a /dev/kvm that runs a stock kernel (it has no emulator), but {why}")
    if kernel is None:
        reasons.append("no readable kernel in /boot (Debian package linux-image-amd64)")
    elif fit is not None and not fit.boots_from_initrd:
        reasons.append(f"{kernel.name} lacks what Firecracker needs to boot from an initrd: "
                       + ", ".join(fit.initrd_missing))
    if not guest_image:
        reasons.append("no cached initramfs and not root to build one")
    return reasons


def firecracker_version(binary: str) -> str:
    """The first line ``binary --version`` prints (``Firecracker vX.Y.Z``), or ``failed...`` and why."""
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"failed: {exc}"
    first = (proc.stdout.strip().splitlines() or [""])[0]
    if proc.returncode != 0 or not first:
        said = " ".join((proc.stderr.strip() or proc.stdout.strip()).split())[-160:]
        return f"failed (exit {proc.returncode})" + (f": {said}" if said else " with no output")
    return first


class FirecrackerTier(Tier):
    name = "firecracker"
    family = "microvm"
    grace = BOOT_ALLOWANCE + 15

    def __init__(self) -> None:
        self.firecracker = shutil.which("firecracker")
        self.kernel = find_kernel()
        self.boot_image = self.kernel
        config = kernel_config(self.kernel) if self.kernel else None
        self.fit = kernel_fit(config.read_text(errors="replace")) if config else None
        self.description = ("Firecracker (KVM): Debian's kernel, the microVM tier's initramfs root, no drive, "
                            "no network device, serial console only; nobody + rlimits inside, "
                            "tmpfs scratch sized to the disk limit")

    def available(self) -> tuple[bool, str]:
        version = firecracker_version(self.firecracker) if self.firecracker else ""
        guest_image = rootfs_ready() or initramfs_path().is_file() or os.geteuid() == 0
        reasons = firecracker_reasons(self.firecracker, version, kvm_status(), self.fit, self.kernel, guest_image)
        if reasons:
            return False, "; ".join(reasons)
        assert self.kernel is not None
        return True, f"{version}, {self.kernel.name}, initrd root, no drive or network device"

    def prepare(self) -> None:
        self.boot_image = ready_boot_image(self.kernel)
        if self.boot_image == self.kernel:
            raise RuntimeError(f"Firecracker boots an ELF vmlinux only on x86_64, and {self.kernel.name} "
                               "does not unpack to one (an xz or gzip payload with a PVH entry)")
        probe = self.run('print("probe")\n', PROBE_LIMITS)
        if not probe.ok or "probe" not in probe.stdout:
            raise RuntimeError(f"the Firecracker VM did not boot: {probe.message} {probe.stderr[-300:]}")

    def argv(self, config_file: str) -> list[str]:
        assert self.firecracker
        return [self.firecracker, "--no-api", "--config-file", config_file, "--level", "Error"]

    def vm_config(self, initrd: str, limits: Limits) -> dict[str, Any]:
        """One run's VM: the booted kernel, that run's initramfs, the memory limit plus the guest's own."""
        return firecracker_config(str(self.boot_image), initrd, limits.memory_mb + GUEST_KERNEL_MIB)

    def run(self, source: str, limits: Limits) -> Outcome:
        def configured(work: str, initrd: str) -> list[str]:
            config_file = os.path.join(work, "vm.json")
            with open(config_file, "w", encoding="utf-8") as f:
                json.dump(self.vm_config(initrd, limits), f)
            return self.argv(config_file)

        return run_in_vm("firecracker", source, limits, configured, BOOT_ALLOWANCE)
