"""``wasm-runner serve`` replicas as separate processes on 127.0.0.1, sharing one real redis-server
and one cluster secret, hit directly (no balancer).

``Replica(config, redis, folder, secret=..., name=...)`` starts one on a free port with nothing of
the caller's ``WASM_RUNNER_*`` environment but the compiled-module cache; its log
(``<name>.log``), audit log (``<name>-audit.jsonl``) and work folder (``<name>-work``) are in
``folder``. ``advertise=True`` gives it its own URL as ``advertise_url``, so the replicas relay
session calls and downloads to each other. ``wait_ready()`` waits for ``/readyz``; ``stop()`` kills
it (tests that stop a replica on purpose signal ``proc`` themselves).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.support.redis_process import RedisProcess, free_port

__all__ = ["Replica", "REPO", "quick_profiles"]

REPO = Path(__file__).resolve().parents[2]


def quick_profiles(wall_seconds: int = 15, memory_mb: int = 64) -> str:
    """The profiles of a test replica's TOML: ``quick`` (the plain image) as its default, and no
    warm datascience pool, so a replica starts in seconds."""
    return (
        f'[profiles.quick]\nimage = "plain"\ncpu_seconds = 5\nwall_seconds = {wall_seconds}\n'
        f"memory_mb = {memory_mb}\n\n[profiles.analyst]\npool_size = 0\n"
    )


class Replica:
    """One ``wasm-runner serve`` process on a free loopback port."""

    def __init__(
        self, config: Path, redis: RedisProcess, folder: Path, *, secret: str, name: str = "serve",
        advertise: bool = False,
    ) -> None:  # fmt: skip
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = folder / f"{name}-work"
        self.workdir.mkdir(parents=True)
        self.audit = folder / f"{name}-audit.jsonl"
        self.log_path = folder / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("WASM_RUNNER_")}
        if "WASM_RUNNER_CACHE" in os.environ:  # CI's fresh cache: the compiled modules
            env["WASM_RUNNER_CACHE"] = os.environ["WASM_RUNNER_CACHE"]
        env.update(
            PYTHONPATH=str(REPO),
            WASM_RUNNER_CLUSTER_SECRET=secret,
            WASM_RUNNER_WORKDIR=str(self.workdir),
            WASM_RUNNER_AUDIT_LOG=str(self.audit),
        )
        if advertise:
            env["WASM_RUNNER_ADVERTISE_URL"] = self.url
        self.log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "wasm_runner.cli", "serve", "--host", "127.0.0.1", "--config", str(config),
             "--port", str(self.port), "--redis-url", redis.url, "--log-level", "warning"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=folder,
        )  # fmt: skip

    def wait_ready(self, timeout: float = 90.0) -> Replica:
        """Wait until ``/readyz`` answers 200; a replica that exits or never gets there is stopped
        and the test fails with its log."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                self.stop()
                raise AssertionError(f"replica {self.name} exited with {self.proc.returncode}: "
                                     f"{self.log_path.read_text(errors='replace')[-4000:]}")  # fmt: skip
            try:
                if httpx.get(self.url + "/readyz", timeout=5, trust_env=False).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.stop()
        raise AssertionError(f"replica {self.url} not ready in {timeout} s: "
                             f"{self.log_path.read_text(errors='replace')[-4000:]}")  # fmt: skip

    def client(self, key: str | None) -> httpx.Client:
        """A client sending ``key`` (``None``: no key at all)."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, trust_env=False)

    def run(self, key: str, code: str) -> httpx.Response:
        with self.client(key) as c:
            return c.post("/api/run", json={"code": code})

    def running(self) -> int:
        return int(httpx.get(self.url + "/healthz", timeout=10, trust_env=False).json()["running"])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.log.close()
