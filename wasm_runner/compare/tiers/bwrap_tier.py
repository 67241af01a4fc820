"""Tier 2a: bubblewrap, unprivileged: new namespaces (user, pid, net, ipc, uts, mount), read-only root.

The host's ``/usr`` is mounted read-only as the whole file system; the scratch directory is the only
writable place; no network but a private loopback; rlimits as in the subprocess tier.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from ...limits import Limits
from ..outcome import Outcome
from ..process import rlimits_for, run_process
from .base import Tier
from .subprocess_tier import NOBODY, find_python

__all__ = ["BubblewrapTier"]


class BubblewrapTier(Tier):
    name = "bwrap"
    family = "container"
    description = "bubblewrap: user/pid/net/ipc/uts/mount namespaces, read-only /usr as root, no network, rlimits"

    def __init__(self) -> None:
        self.bwrap = shutil.which("bwrap")
        self.python = find_python()
        self.user = NOBODY if os.geteuid() == 0 else None

    def available(self) -> tuple[bool, str]:
        if not self.bwrap:
            return False, "bwrap not on PATH (Debian package bubblewrap)"
        if not self.python or not self.python.startswith("/usr/"):
            return False, "no python3 under /usr to mount into the sandbox"
        probe = subprocess.run(
            self._argv("/", ["/usr/bin/true"]), capture_output=True, text=True, timeout=20,
            user=self.user, group=self.user, extra_groups=[] if self.user is not None else None, env={}, check=False)
        if probe.returncode != 0:
            return False, f"bwrap cannot create namespaces here: {probe.stderr.strip()[:200]}"
        version = subprocess.run([self.bwrap, "--version"], capture_output=True, text=True, check=False).stdout.strip()
        return True, f"{version}, unprivileged" + (" (as nobody)" if self.user is not None else "")

    def _argv(self, scratch: str, command: list[str]) -> list[str]:
        assert self.bwrap
        argv = [
            self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
            "--ro-bind", "/usr", "/usr",
        ]
        for name in ("lib", "lib64", "bin", "sbin"):
            target = os.path.join("/", name)
            if os.path.islink(target):
                argv += ["--symlink", os.readlink(target), target]
            elif os.path.isdir(target):
                argv += ["--ro-bind", target, target]
        argv += [
            "--proc", "/proc", "--dev", "/dev",
            "--bind", scratch, "/scratch", "--chdir", "/scratch",
            "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/scratch",
            "--cap-drop", "ALL", "--remount-ro", "/",
        ]
        return argv + command

    def run(self, source: str, limits: Limits) -> Outcome:
        assert self.python
        scratch = tempfile.mkdtemp(prefix="wasm-runner-bwrap-")
        try:
            if self.user is not None:
                os.chown(scratch, self.user, self.user)
            with open(os.path.join(scratch, "main.py"), "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(source)
            return run_process(
                self._argv(scratch, [self.python, "-I", "main.py"]),
                limits,
                env={},
                rlimits=rlimits_for(limits),
                user=self.user,
                group=self.user,
                wrapper_exit_signals=True,
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
