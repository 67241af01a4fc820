"""Docker: used when a daemon answers and has the image (``docker run`` with the comparison's rules)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from ...environment import DOCKER_IMAGE as IMAGE_VARIABLE
from ...limits import Limits
from ..outcome import Outcome
from ..process import run_process
from .base import Tier

__all__ = ["DockerTier"]

DOCKER_IMAGE = IMAGE_VARIABLE.text() or "python:3.11-slim"


class DockerTier(Tier):
    """``docker run`` with no network, read-only root, tmpfs scratch, nobody, memory/pids/cpu limits."""

    name = "docker"
    family = "container"
    description = f"docker run {DOCKER_IMAGE}: --network none, --read-only, tmpfs scratch, nobody, limits"

    def __init__(self) -> None:
        self.docker = shutil.which("docker")

    def available(self) -> tuple[bool, str]:
        if not self.docker:
            return False, "docker not on PATH"
        try:
            info = subprocess.run([self.docker, "info", "--format", "{{json .ServerVersion}}"],
                                  capture_output=True, text=True, timeout=10, check=False)
        except subprocess.TimeoutExpired:
            return False, "docker info timed out"
        if info.returncode != 0:
            why = (info.stderr.strip().splitlines() or ["docker info failed"])[-1]
            return False, f"no Docker daemon reachable ({why[:160]})"
        have = subprocess.run([self.docker, "image", "inspect", DOCKER_IMAGE], capture_output=True, check=False)
        if have.returncode != 0:
            return False, f"image {DOCKER_IMAGE} not present (set WASM_RUNNER_DOCKER_IMAGE)"
        version = info.stdout.strip().strip('"') or "?"
        return True, f"Docker {version}, image {DOCKER_IMAGE}"

    def run(self, source: str, limits: Limits) -> Outcome:
        assert self.docker
        folder = tempfile.mkdtemp(prefix="wasm-runner-docker-")
        try:
            os.chmod(folder, 0o755)
            with open(os.path.join(folder, "main.py"), "w", encoding="utf-8", errors="surrogateescape") as f:
                f.write(source)
            cpu = max(1, round(limits.cpu_seconds))
            argv = [
                self.docker, "run", "--rm", "-i", "--network", "none", "--read-only",
                "--user", "65534:65534", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                "--memory", f"{limits.memory_mb}m", "--pids-limit", "64", "--cpus", "1",
                "--ulimit", f"cpu={cpu}:{cpu + 1}", "--ulimit", f"fsize={limits.disk_bytes}",
                "--tmpfs", f"/scratch:size={limits.disk_bytes},nr_inodes={int(limits.max_files) + 2},uid=65534",
                "-v", f"{folder}:/program:ro", "-w", "/scratch", DOCKER_IMAGE, "python3", "-I", "/program/main.py",
            ]
            return run_process(argv, limits, env=dict(os.environ), wall_seconds=limits.wall_seconds + 5,
                               wrapper_exit_signals=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

