"""Tier 1: a native CPython subprocess with rlimits, a fresh temp dir and an empty environment."""

from __future__ import annotations

import os
import shutil
import tempfile

from ...limits import Limits
from ..outcome import Outcome
from ..process import rlimits_for, run_process
from .base import Tier

__all__ = ["NOBODY", "SubprocessTier", "find_python"]

NOBODY = 65534


def find_python() -> str | None:
    """A system CPython every user may execute (a venv under a private home may not be)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("python3")


class SubprocessTier(Tier):
    name = "subprocess"
    family = "subprocess"
    description = "native CPython, rlimits (CPU, address space, file size, processes), fresh temp dir, empty env"

    def __init__(self) -> None:
        self.python = find_python()
        # As root, RLIMIT_NPROC does not apply and every file is writable: drop to nobody.
        self.user = NOBODY if os.geteuid() == 0 else None

    def available(self) -> tuple[bool, str]:
        if not self.python:
            return False, "no python3 on PATH"
        who = "as nobody" if self.user is not None else "as the current user"
        return True, f"{self.python} {who}"

    def run(self, source: str, limits: Limits) -> Outcome:
        assert self.python
        scratch = tempfile.mkdtemp(prefix="wasm-runner-subprocess-")
        try:
            if self.user is not None:
                os.chown(scratch, self.user, self.user)
            path = os.path.join(scratch, "main.py")
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(source)
            return run_process(
                [self.python, "-I", "main.py"],
                limits,
                cwd=scratch,
                env={},
                rlimits=rlimits_for(limits),
                user=self.user,
                group=self.user,
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
