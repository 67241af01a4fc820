"""Tier 2b: an OCI runtime used directly (crun, runc; gVisor's runsc) on a Debian rootfs we build.

Read-only root, a tmpfs scratch sized to the disk limit, new pid/net/ipc/uts/mount/cgroup
namespaces, no capabilities, no new privileges, nobody, rlimits, and a cgroup memory/pids limit.

gVisor (``runsc``, the ``gvisor`` tier) runs the same bundle on its user-space kernel, with
``--network=none`` and an explicit platform: systrap when the build has it, else ptrace (its KVM
platform needs a ``/dev/kvm`` that runs its guest mode; on PVM hosts ``runsc --platform=kvm`` hung).
Its kernel implements the rlimits and the tmpfs itself, so ``prepare`` measures which of the rules
hold there and reports the ones that do not (``Tier.caveats``); the cgroup limits are set by runsc
on the host, on the whole sandbox (gVisor's kernel included).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from typing import Any

from ...limits import Limits
from ..images import ImageError, build_rootfs, rootfs_dir, rootfs_ready
from ..outcome import Outcome
from ..process import run_process
from .base import Tier
from .microvm_tier import choose_accel

__all__ = ["OciTier", "gvisor_platform", "oci_config"]

NOBODY = 65534
_MASKED = ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
           "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"]
_READONLY = ["/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]


def oci_config(rootfs: str, program_dir: str, limits: Limits, *, cgroups: bool) -> dict[str, Any]:
    """The OCI runtime spec for one run."""
    cpu = max(1, round(limits.cpu_seconds))
    rl = [
        ("RLIMIT_CPU", cpu, cpu + 1),
        ("RLIMIT_AS", limits.memory_bytes, limits.memory_bytes),
        ("RLIMIT_FSIZE", limits.disk_bytes, limits.disk_bytes),
        ("RLIMIT_NPROC", 64, 64),
        ("RLIMIT_NOFILE", 256, 256),
        ("RLIMIT_CORE", 0, 0),
    ]
    scratch_opts = ["nosuid", "nodev", "mode=1777", f"uid={NOBODY}", f"gid={NOBODY}", f"size={max(1, limits.disk_bytes // 1024)}k",
                    f"nr_inodes={int(limits.max_files) + 2}"]
    linux: dict[str, Any] = {
        "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount", "cgroup")],
        "maskedPaths": _MASKED,
        "readonlyPaths": _READONLY,
    }
    if cgroups:
        linux["resources"] = {"memory": {"limit": limits.memory_bytes}, "pids": {"limit": 64}}
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": NOBODY, "gid": NOBODY},
            "args": ["/usr/bin/python3", "-I", "/program/main.py"],
            "env": ["PATH=/usr/bin:/bin", "HOME=/scratch"],
            "cwd": "/scratch",
            "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")},
            "rlimits": [{"type": t, "soft": s, "hard": h} for t, s, h in rl],
            "noNewPrivileges": True,
        },
        "root": {"path": rootfs, "readonly": True},
        "hostname": "sandbox",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=1024k"]},
            {"destination": "/scratch", "type": "tmpfs", "source": "tmpfs", "options": scratch_opts},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=1777", "size=1024k"]},
            {"destination": "/program", "type": "bind", "source": program_dir,
             "options": ["rbind", "ro", "nosuid", "nodev"]},
        ],
        "linux": linux,
    }


def gvisor_platform(binary: str) -> tuple[str, str]:
    """(platform, why) for ``runsc``: systrap when this build lists it, else ptrace; never kvm, which
    needs a ``/dev/kvm`` that runs gVisor's guest mode (on a PVM host it hung)."""
    try:
        flags = subprocess.run([binary, "flags"], capture_output=True, text=True, timeout=20, check=False)
        text = flags.stdout + flags.stderr
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    found = re.search(r"platform to use: ([^.\n]*)", text)
    listed = re.findall(r"[a-z]+", found.group(1).replace("(default)", "")) if found else []
    accel, accel_why = choose_accel()
    if "kvm_pvm" in accel_why:
        accel_why = "/dev/kvm is PVM (kvm_pvm), on which runsc --platform=kvm hung"
    kvm = ("not kvm: " + (accel_why if accel == "tcg" else "not tried")) if "kvm" in listed else ""
    if "systrap" in listed:
        return "systrap", f"this build lists {', '.join(listed)}" + (f"; {kvm}" if kvm else "")
    why = f"this build lists {', '.join(listed)}, no systrap" if listed else "runsc flags lists no platforms"
    return "ptrace", why + (f"; {kvm}" if kvm else "")


# Measures the rules gVisor's own kernel must enforce: the tmpfs inode limit (nr_inodes) and
# RLIMIT_CPU. Creates files past the inode limit, then spins past the CPU limit's hard value while
# asking the kernel for its CPU time; a kernel that enforces RLIMIT_CPU kills it before "cpu".
_RULE_PROBE = """import time
n = 0
try:
    while n < {tries}:
        open(f"f{{n}}", "w").close()
        n += 1
except OSError:
    pass
print("files", n, flush=True)
start = time.process_time()
while time.process_time() - start < {spin}:
    pass
print("cpu", round(time.process_time() - start, 2), flush=True)
"""
_RULE_LIMITS = Limits(cpu_seconds=1, wall_seconds=10, max_files=64)


def _hybrid_cgroup_v2_controllers() -> str:
    """Controllers enabled on a cgroup v2 hierarchy mounted beside v1 ones ('' when not hybrid)."""
    try:
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return ""
    v1 = any(m[2] == "cgroup" for m in mounts if len(m) > 2)
    for m in mounts:
        if len(m) > 2 and m[2] == "cgroup2" and v1:
            try:
                with open(os.path.join(m[1], "cgroup.controllers")) as f:
                    return f.read().strip()
            except OSError:
                return ""
    return ""


class OciTier(Tier):
    family = "container"

    def __init__(self, runtime: str = "crun") -> None:
        self.runtime = runtime
        self.name = runtime if runtime != "runsc" else "gvisor"
        self.binary = shutil.which(runtime)
        self.platform, self.platform_why = ("", "")
        if runtime == "runsc" and self.binary:
            self.platform, self.platform_why = gvisor_platform(self.binary)
        kind = f"gVisor user-space kernel, platform {self.platform or 'ptrace'}" if runtime == "runsc" else "OCI runtime"
        self.description = (f"{runtime} ({kind}): Debian rootfs read-only, tmpfs scratch sized to the disk "
                            "limit, pid/net/ipc/uts/mount namespaces, no caps, nobody, rlimits, cgroup limits"
                            + (" (set by runsc on the host, on the whole sandbox), --network=none" if runtime == "runsc" else ""))
        self.caveats: tuple[str, ...] = ()
        self.cgroups = True
        self.cgroup_problem = ""
        self._state = tempfile.mkdtemp(prefix=f"wasm-runner-{runtime}-state-")

    def _cmd(self, *args: str) -> list[str]:
        assert self.binary
        base = [self.binary, "--root", self._state]
        if self.runtime == "runsc":
            base += ["--network=none", f"--platform={self.platform}"]
        elif self.runtime == "crun" and not self.cgroups:
            base += ["--cgroup-manager=disabled"]
        return base + list(args)

    def available(self) -> tuple[bool, str]:
        if not self.binary:
            pkg = {"crun": "Debian package crun", "runc": "Debian package runc",
                   "runsc": "Debian package runsc"}.get(self.runtime, "")
            return False, f"{self.runtime} not on PATH ({pkg})"
        if os.geteuid() != 0:
            return False, f"{self.runtime} is used as root here (rootless needs a user-namespace config)"
        if not rootfs_ready() and not (shutil.which("debootstrap") or os.path.exists("/usr/sbin/debootstrap")):
            return False, "no rootfs cached and debootstrap not installed"
        if self.runtime == "crun":
            hybrid = _hybrid_cgroup_v2_controllers()
            if hybrid:
                return False, (f"crun refuses hybrid cgroups while cgroup v2 has controllers ({hybrid}) "
                               "on this host")
        version = subprocess.run([self.binary, "--version"], capture_output=True, text=True, check=False).stdout
        first = version.strip().splitlines()[0] if version.strip() else self.runtime
        if self.runtime == "runsc":
            first += f", platform {self.platform} ({self.platform_why})"
        return True, first + ("" if rootfs_ready() else " (rootfs will be built)")

    def prepare(self) -> None:
        try:
            build_rootfs()
        except ImageError as exc:
            raise RuntimeError(str(exc)) from exc
        try:
            self._start_probe()
        except RuntimeError:
            if self.platform != "systrap":
                raise
            # listed is not working: fall back to ptrace, and say so in the row's description
            self.platform, self.platform_why = "ptrace", "systrap is listed but did not start a sandbox here"
            self.description = self.description.replace("platform systrap", "platform ptrace (systrap failed)")
            self.cgroups, self.cgroup_problem = True, ""
            self._start_probe()
        if self.runtime == "runsc":
            self.caveats = self._measure_rules()

    def _start_probe(self) -> None:
        probe = self._run_once('print("probe")\n', Limits(cpu_seconds=2, wall_seconds=20), cgroups=True)
        if not probe.ok:
            self.cgroup_problem = (probe.stderr or probe.message).strip()[-200:]
            self.cgroups = False
            probe = self._run_once('print("probe")\n', Limits(cpu_seconds=2, wall_seconds=20), cgroups=False)
            if not probe.ok:
                raise RuntimeError(f"{self.runtime} cannot start a container here: "
                                   f"{(probe.stderr or probe.message).strip()[-300:]}")

    def _measure_rules(self) -> tuple[str, ...]:
        """The description's rules that gVisor's kernel does not enforce here, each with the figure."""
        lim = _RULE_LIMITS
        inodes = int(lim.max_files) + 2  # oci_config's nr_inodes
        spin = max(1, round(lim.cpu_seconds)) + 1.0  # past RLIMIT_CPU's hard limit (soft + 1)
        probe = self._run_once(_RULE_PROBE.format(tries=inodes + 64, spin=spin), lim, cgroups=self.cgroups)
        said = dict(line.split(" ", 1) for line in probe.stdout.splitlines() if " " in line)
        out = []
        files = int(said.get("files", "0"))
        if files > inodes:
            out.append(f"tmpfs nr_inodes not enforced: a probe created {files} files in scratch under a "
                       f"{inodes}-inode limit (the tmpfs size and the memory limit still bound it)")
        if "cpu" in said:
            out.append(f"RLIMIT_CPU not enforced: a probe used {said['cpu']} s of CPU under a "
                       f"{lim.cpu_seconds:g} s limit and ended by itself; CPU loops end at the wall limit")
        elif probe.limit != "cpu":
            out.append(f"RLIMIT_CPU not measured: the probe ended {probe.status.value} "
                       f"({probe.message or 'no message'})")
        return tuple(out)

    def run(self, source: str, limits: Limits) -> Outcome:
        return self._run_once(source, limits, cgroups=self.cgroups)

    def _run_once(self, source: str, limits: Limits, *, cgroups: bool) -> Outcome:
        bundle = tempfile.mkdtemp(prefix=f"wasm-runner-{self.runtime}-")
        cid = "wasm-runner-" + secrets.token_hex(6)
        try:
            program_dir = os.path.join(bundle, "program")
            os.mkdir(program_dir)
            os.chmod(bundle, 0o755)
            with open(os.path.join(program_dir, "main.py"), "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(source)
            os.chmod(os.path.join(program_dir, "main.py"), 0o644)
            with open(os.path.join(bundle, "config.json"), "w") as f:
                json.dump(oci_config(str(rootfs_dir()), program_dir, limits, cgroups=cgroups), f)

            def force_stop() -> None:
                subprocess.run(self._cmd("kill", cid, "KILL"), capture_output=True, timeout=10, check=False)

            return run_process(
                self._cmd("run", "--bundle", bundle, cid),
                limits,
                env={"PATH": "/usr/bin:/bin"},
                on_kill=force_stop,
                wrapper_exit_signals=True,
            )
        finally:
            subprocess.run(self._cmd("delete", "--force", cid), capture_output=True, timeout=20, check=False)
            shutil.rmtree(bundle, ignore_errors=True)

    def cleanup(self) -> None:
        shutil.rmtree(self._state, ignore_errors=True)
