"""Tier 5: this project's browser tier engine, Pyodide, in a Node worker thread, fresh per run.

Pyodide comes from the ``pyodide`` npm package the web front end installs (``web/node_modules``),
or from the folder named by ``WASM_RUNNER_PYODIDE_DIR``. Node inherits this process's environment,
as a server embedding Pyodide would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

from ...environment import PYODIDE_DIR
from ...limits import Limits
from ...result import Status
from ..outcome import Outcome
from ..process import run_process
from .base import Tier

__all__ = ["PyodideNodeTier", "find_pyodide"]

RUNNER = Path(__file__).with_name("pyodide_runner.mjs")
LOAD_ALLOWANCE_S = 30.0  # Pyodide's own start-up, on top of the program's wall deadline


def find_pyodide() -> Path | None:
    """The Pyodide npm package folder, or None."""
    env = PYODIDE_DIR.text()
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[3] / "web" / "node_modules" / "pyodide")
    for c in candidates:
        if (c / "pyodide.mjs").is_file() and (c / "pyodide.asm.wasm").is_file():
            return c
    return None


class PyodideNodeTier(Tier):
    name = "pyodide-node"
    family = "pyodide"
    description = "Pyodide in a Node worker thread: wall deadline and output caps by terminating the worker"
    grace = LOAD_ALLOWANCE_S + 10

    def __init__(self) -> None:
        self.node = shutil.which("node")
        self.pyodide = find_pyodide()
        self._procs: set[int] = set()

    def available(self) -> tuple[bool, str]:
        if not self.node:
            return False, "node not on PATH"
        if not self.pyodide:
            return False, "pyodide npm package not installed (npm ci in web/, or set WASM_RUNNER_PYODIDE_DIR)"
        node_version = subprocess.run([self.node, "--version"], capture_output=True, text=True, check=False).stdout.strip()
        try:
            version = json.loads((self.pyodide / "package.json").read_text())["version"]
        except (OSError, ValueError, KeyError):
            version = "?"
        return True, f"node {node_version}, pyodide {version}"

    def run(self, source: str, limits: Limits) -> Outcome:
        assert self.node and self.pyodide
        budget = {
            "wall_ms": int(limits.wall_seconds * 1000),
            "stdout_bytes": limits.stdout_bytes,
            "stderr_bytes": limits.stderr_bytes,
        }
        channel = replace(limits, stdout_bytes=4 * (limits.stdout_bytes + limits.stderr_bytes) + (1 << 20),
                          stderr_bytes=1 << 20)
        proc = run_process(
            [self.node, str(RUNNER), str(self.pyodide), json.dumps(budget)],
            channel,
            env=dict(os.environ),
            wall_seconds=limits.wall_seconds + LOAD_ALLOWANCE_S,
            stdin_bytes=source.encode("utf-8", "surrogateescape"),
        )
        lines = proc.stdout.strip().splitlines()
        try:
            data = json.loads(lines[-1])
        except (IndexError, ValueError):
            killed = proc.status is Status.TIMEOUT
            return Outcome(Status.INTERNAL_ERROR if not killed else Status.TIMEOUT,
                           exit_code=proc.exit_code, stderr=proc.stderr[-4000:], wall_ms=proc.wall_ms,
                           harness_killed=killed,
                           message=f"node runner gave no result ({proc.message or 'no output'})")
        return Outcome(
            status=Status(data["status"]),
            exit_code=data.get("exit_code"),
            stdout=data.get("stdout", ""),
            stderr=data.get("stderr", ""),
            wall_ms=proc.wall_ms,
            limit=data.get("limit"),
            message=data.get("message", ""),
        )
