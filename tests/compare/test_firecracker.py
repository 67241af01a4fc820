"""The Firecracker tier: the VM it configures, the guest it boots, and the reason its row gives.

No package registry ships a firecracker binary and these machines' /dev/kvm is PVM, so no test here
starts one (test_tiers runs the tier's contract wherever ``available()`` says it can run). What runs
here is checked for real: the generated configuration against Firecracker's documented schema
(written below from its API description, independently of the adapter), this machine's Debian kernel
against Firecracker's kernel policy, the run's initramfs read back with a cpio reader of the test's
own, the console protocol it shares with the QEMU microVM tier, and the row's reason on this machine.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from wasm_runner.compare.guest_console import MARK, outcome_from_console, write_run_initrd
from wasm_runner.compare.images import CpioWriter, find_kernel, initramfs_path
from wasm_runner.compare.kernel import boot_kernel
from wasm_runner.compare.outcome import Outcome
from wasm_runner.compare.runner import COMPARE_LIMITS
from wasm_runner.compare.tiers.firecracker_tier import (
    FirecrackerTier,
    KernelFit,
    firecracker_config,
    firecracker_reasons,
    firecracker_version,
    kernel_config,
    kernel_fit,
)
from wasm_runner.compare.tiers.microvm_tier import kvm_status
from wasm_runner.result import Status

# Firecracker's full VM configuration as its API description (swagger/firecracker.yaml:
# FullVmConfiguration, BootSource, Drive, MachineConfiguration, NetworkInterface) documents it. The
# sections refuse unknown fields (Firecracker deserializes them with deny_unknown_fields); the top
# level is held to the documented section names, since a misspelt section would be ignored.
FIRECRACKER_VM_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "balloon": {"type": "object"}, "cpu-config": {"type": "object"}, "logger": {"type": "object"},
        "metrics": {"type": "object"}, "memory-hotplug": {"type": "object"}, "mmds-config": {"type": "object"},
        "vsock": {"type": "object"}, "entropy": {"type": "object"}, "pmem": {"type": "array"},
        "boot-source": {
            "type": "object", "additionalProperties": False, "required": ["kernel_image_path"],
            "properties": {"kernel_image_path": {"type": "string"}, "initrd_path": {"type": "string"},
                           "boot_args": {"type": "string"}},
        },
        "machine-config": {
            "type": "object", "additionalProperties": False, "required": ["mem_size_mib", "vcpu_count"],
            "properties": {
                "vcpu_count": {"type": "integer", "minimum": 1, "maximum": 32},
                "mem_size_mib": {"type": "integer"}, "smt": {"type": "boolean"},
                "track_dirty_pages": {"type": "boolean"}, "cpu_template": {"type": "string"},
                "huge_pages": {"enum": ["None", "Transparent", "2M"]},
            },
        },
        "drives": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["drive_id", "is_root_device"],
            "properties": {"drive_id": {"type": "string"}, "is_root_device": {"type": "boolean"},
                           "is_read_only": {"type": "boolean"}, "path_on_host": {"type": "string"},
                           "partuuid": {"type": "string"}, "cache_type": {"enum": ["Unsafe", "Writeback"]},
                           "io_engine": {"enum": ["Sync", "Async"]}, "rate_limiter": {"type": "object"},
                           "socket": {"type": "string"}},
        }},
        "network-interfaces": {"type": "array"},
    },
}


def read_newc(data: bytes) -> dict[str, bytes]:
    """Every member of the concatenated newc cpio archives in ``data``, as the kernel unpacks them
    (later archives add to earlier ones)."""
    members: dict[str, bytes] = {}
    pos = 0
    while pos + 110 <= len(data):
        assert data[pos:pos + 6] == b"070701", f"not a newc header at {pos}"
        size, namesize = int(data[pos + 54:pos + 62], 16), int(data[pos + 94:pos + 102], 16)
        name = data[pos + 110:pos + 110 + namesize - 1].decode()
        pos += 110 + namesize
        pos += -pos % 4
        body = data[pos:pos + size]
        pos += size
        pos += -pos % 4
        if name != "TRAILER!!!":
            members[name] = body
        while pos < len(data) and data[pos] == 0:  # padding between archives
            pos += 1
    return members


def test_the_vm_config_is_firecrackers_documented_schema_with_no_device_but_the_console():
    tier = FirecrackerTier()
    config = tier.vm_config("/runs/1/initrd.cpio", COMPARE_LIMITS)
    jsonschema.validate(config, FIRECRACKER_VM_SCHEMA)
    json.loads(json.dumps(config))  # what --config-file reads
    assert config["drives"] == [] and config["network-interfaces"] == []
    assert not {"vsock", "balloon", "mmds-config", "entropy", "pmem"} & set(config)
    machine = config["machine-config"]
    assert machine["vcpu_count"] == 1
    assert machine["mem_size_mib"] == COMPARE_LIMITS.memory_mb + 256  # the limit plus the guest kernel's
    boot = config["boot-source"]
    assert boot["initrd_path"] == "/runs/1/initrd.cpio"
    # Firecracker's documented arguments (console on the serial port, a reboot ends the VM, a panic
    # reboots) and the initramfs's /init
    args = boot["boot_args"].split()
    assert {"console=ttyS0", "reboot=k", "panic=1", "rdinit=/init"} <= set(args)
    assert not any(a.startswith(("root=", "ip=", "virtio_mmio.")) for a in args)  # no drive, no network
    with pytest.raises(jsonschema.ValidationError):  # the schema above does refuse what Firecracker would
        jsonschema.validate({**config, "machine-config": {**machine, "vcpus": 1}}, FIRECRACKER_VM_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(firecracker_config("k", "i", 0) | {"boot_source": {}}, FIRECRACKER_VM_SCHEMA)


def test_debians_kernel_boots_in_firecracker_from_an_initrd_not_from_a_block_device(tmp_path: Path):
    """This machine's kernel (setup.sh's linux-image-amd64) read against Firecracker's kernel policy:
    the initrd boot is what it supports; virtio-blk and virtio-mmio are modules, and virtio-mmio
    devices from the command line are not built, so a root drive would not be found."""
    kernel = find_kernel()
    if kernel is None:
        ok, why = FirecrackerTier().available()
        assert not ok and "no readable kernel in /boot" in why
        return
    config = kernel_config(kernel)
    assert config is not None, f"no config beside {kernel}"
    fit = kernel_fit(config.read_text())
    assert fit.boots_from_initrd, fit.initrd_missing
    assert "CONFIG_VIRTIO_BLK=m" in fit.block_root_missing
    assert "CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=unset" in fit.block_root_missing
    # and Firecracker gets the ELF inside it (it boots no bzImage on x86_64)
    assert boot_kernel(kernel).read_bytes()[:4] == b"\x7fELF"


def test_kernel_fit_names_each_option_that_is_not_built_in():
    fit = kernel_fit("CONFIG_BLK_DEV_INITRD=y\nCONFIG_KVM_GUEST=m\n# CONFIG_SERIO_I8042 is not set\n"
                     "CONFIG_SERIAL_8250_CONSOLE=y\nCONFIG_KEYBOARD_ATKBD=y\nCONFIG_VIRTIO_MMIO=y\n"
                     "CONFIG_VIRTIO_BLK=y\nCONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y\n")
    assert fit.initrd_missing == ("CONFIG_KVM_GUEST=m", "CONFIG_SERIO_I8042=unset")
    assert not fit.boots_from_initrd and fit.block_root_missing == ()


def test_the_row_says_exactly_why_firecracker_cannot_run_here():
    ok, why = FirecrackerTier().available()
    usable, kvm_why = kvm_status()
    if shutil.which("firecracker") is None:
        assert not ok
        assert "firecracker not on PATH: no package registry ships a firecracker binary" in why
    if not usable:
        assert not ok
        assert f"it needs a /dev/kvm that runs a stock kernel (it has no emulator), but {kvm_why}" in why
        if Path("/sys/module/kvm_pvm").is_dir():
            assert "PVM (kvm_pvm)" in why  # these machines: the reason the QEMU tier runs on TCG
    if ok:
        assert why.startswith("Firecracker v"), why


KERNEL = Path("/boot/vmlinuz-6.1.0-test-amd64")
FITS = KernelFit(initrd_missing=(), block_root_missing=("CONFIG_VIRTIO_BLK=m",))


def test_a_binary_that_does_not_answer_its_version_is_a_reason(tmp_path: Path):
    failing = firecracker_version("/bin/false")  # coreutils' false prints its version, then exits 1
    assert failing.startswith("failed (exit 1): ") and "\n" not in failing and len(failing) < 200
    assert firecracker_version(str(tmp_path / "firecracker")).startswith("failed: ")  # not there
    why = firecracker_reasons("/bin/false", failing, (True, "ok"), FITS, KERNEL, True)
    assert why == [f"/bin/false --version {failing}"]


@pytest.mark.parametrize(
    ("binary", "version", "kvm", "fit", "kernel", "image", "expected"),
    [
        ("/usr/bin/firecracker", "Firecracker v1.12.0", (True, "/dev/kvm usable"), FITS, KERNEL, True, []),
        (None, "", (True, "/dev/kvm usable"), FITS, KERNEL, True, ["firecracker not on PATH"]),
        ("/usr/bin/firecracker", "failed (exit 1): bad CPU", (True, "ok"), FITS, KERNEL, True,
         ["/usr/bin/firecracker --version failed (exit 1): bad CPU"]),
        ("/usr/bin/firecracker", "Firecracker v1.12.0", (False, "no /dev/kvm"), FITS, KERNEL, True,
         ["but no /dev/kvm"]),
        ("/usr/bin/firecracker", "Firecracker v1.12.0", (True, "ok"), None, None, True, ["no readable kernel"]),
        ("/usr/bin/firecracker", "Firecracker v1.12.0", (True, "ok"), KernelFit(("CONFIG_KVM_GUEST=unset",), ()),
         KERNEL, True, ["vmlinuz-6.1.0-test-amd64 lacks what Firecracker needs to boot from an initrd: "
                        "CONFIG_KVM_GUEST=unset"]),
        (None, "", (False, "/dev/kvm is PVM (kvm_pvm)"), FITS, KERNEL, False,
         ["firecracker not on PATH", "but /dev/kvm is PVM (kvm_pvm)", "no cached initramfs"]),
    ],
    ids=["runs", "no-binary", "binary-fails", "no-kvm", "no-kernel", "kernel-lacks", "everything-missing"],
)
def test_every_reason_that_applies_is_named(binary, version, kvm, fit, kernel, image, expected):
    reasons = firecracker_reasons(binary, version, kvm, fit, kernel, image)
    assert len(reasons) == len(expected), reasons
    for reason, part in zip(reasons, expected, strict=True):
        assert part in reason


def test_a_runs_initrd_is_the_base_image_then_the_program_its_limits_and_its_scratch(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    base = initramfs_path()
    base.parent.mkdir(parents=True)
    with open(base, "wb") as f:
        w = CpioWriter(f)
        w.file("init", b"#!/bin/sh\n", 0o755)
        w.trailer()
    run = tmp_path / "initrd.cpio"
    limits = replace(COMPARE_LIMITS, max_files=64)
    write_run_initrd(str(run), 'print("hé")\n', limits)
    members = read_newc(run.read_bytes())
    assert members["init"] == b"#!/bin/sh\n"
    assert members["job/main.py"].decode() == 'print("hé")\n'
    inside = json.loads(members["job/limits.json"])
    assert inside["cpu_seconds"] == limits.cpu_seconds and inside["memory_bytes"] == limits.memory_bytes
    assert members["job/tmpfs_opts"].decode() == f"size={limits.disk_bytes // 1024}k,nr_inodes=68,mode=755"


def console(stdout: str, status: Status = Status.OK) -> Outcome:
    return Outcome(status, stdout=stdout, wall_ms=900.0)


def result_line(**fields) -> str:
    data = {"returncode": 0, "killed_for": None, "cpu_used": 0.02, "wall_ms": 30.0, "stdout": "", "stderr": ""}
    return "\n" + MARK + json.dumps(data | fields) + "\n"


def test_the_console_protocol_reads_the_supervisors_line_among_the_vmms_and_kernels():
    noise = ("2026-12-06T10:00:00.000000000 [anonymous-instance:main] Running Firecracker v1.12.0\n"
             "[    0.412000] Run /init as init process\n")
    ok = outcome_from_console(console(noise + result_line(stdout="hi\n") + "reboot: Restarting system\n"),
                              COMPARE_LIMITS)
    assert ok.status is Status.OK and ok.stdout == "hi\n" and ok.wall_ms == 900.0
    stopped = outcome_from_console(console(noise + result_line(returncode=-9, killed_for="timeout")), COMPARE_LIMITS)
    assert stopped.status is Status.TIMEOUT and stopped.limit == "wall" and not stopped.harness_killed
    cpu = outcome_from_console(console(result_line(returncode=-24, cpu_used=1.0)), COMPARE_LIMITS)
    assert cpu.limit == "cpu"


def test_a_vm_that_gave_no_result_is_said_so_never_read_as_the_programs():
    hung = outcome_from_console(console("[    0.4] Kernel panic\n", Status.TIMEOUT), COMPARE_LIMITS)
    assert hung.status is Status.TIMEOUT and hung.harness_killed and "Kernel panic" in hung.stderr
    died = outcome_from_console(console("Error creating the VM\n", Status.ERROR), COMPARE_LIMITS)
    assert died.status is Status.INTERNAL_ERROR and "gave no result" in died.message
    cut = outcome_from_console(console(MARK + '{"returncode": 0, "stdo'), COMPARE_LIMITS)
    assert cut.status is Status.INTERNAL_ERROR and "cut short" in cut.message
    broke = outcome_from_console(console(MARK + json.dumps({"supervisor_error": "OSError()"})), COMPARE_LIMITS)
    assert broke.status is Status.INTERNAL_ERROR and broke.message == "OSError()"

