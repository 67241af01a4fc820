"""A replica: one ``wasm-runner serve`` on an internal loopback port, pointed at the cluster's Redis.

Every replica runs with the same interpreter as the supervisor (``python -m wasm_runner.cli serve``,
so a checkout's code and its ``.venv`` are the ones served), the same ``--config`` and the same
environment (API keys from ``WASM_RUNNER_API_KEYS`` reach every replica), plus:

- ``--redis-url``: the cluster's Redis (shared rate limits, leases, session directory, downloads);
- ``--advertise-url http://127.0.0.1:<its port>``: where the other replicas reach it (session hops);
- ``WASM_RUNNER_CLUSTER_SECRET`` in its environment (never on a command line, where ``ps`` shows
  it): the key of the internal hop between replicas (and of session snapshots), the same for all;
- ``WASM_RUNNER_SNAPSHOT_DIR`` (unless the config names ``snapshot_dir``): one folder for every
  replica's paused sessions, so a session resumes on another replica when its own dies.

A replica is ready when its ``/readyz`` answers 200 (warmed up, not draining).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

__all__ = [
    "ReplicaSpec", "replica_argv", "replica_ready", "CLUSTER_SECRET_ENV", "MEMORY_BUDGET_ENV",
    "SNAPSHOT_DIR_ENV",
]  # fmt: skip

CLUSTER_SECRET_ENV = "WASM_RUNNER_CLUSTER_SECRET"
MEMORY_BUDGET_ENV = "WASM_RUNNER_MEMORY_BUDGET_MB"  # a replica's part of the host's memory
SNAPSHOT_DIR_ENV = "WASM_RUNNER_SNAPSHOT_DIR"  # the paused sessions' folder, one for all replicas
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class ReplicaSpec:
    """What differs between replicas (name, port) and what they share (everything else)."""

    name: str
    port: int
    redis_url: str
    config: str | None = None
    drain_seconds: float | None = None
    log_level: str = "warning"
    no_auth: bool = False
    max_running: int | None = None
    allowed_hosts: Sequence[str] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def replica_argv(spec: ReplicaSpec) -> list[str]:
    """The ``serve`` command line of one replica."""
    argv = [
        sys.executable, "-m", "wasm_runner.cli", "serve",
        "--host", "127.0.0.1", "--port", str(spec.port),
        "--redis-url", spec.redis_url, "--advertise-url", spec.url,
        "--log-level", spec.log_level,
    ]  # fmt: skip
    if spec.config:
        argv += ["--config", spec.config]
    if spec.drain_seconds is not None:
        argv += ["--drain-seconds", f"{spec.drain_seconds:g}"]
    if spec.no_auth:
        argv.append("--no-auth")
    if spec.max_running is not None:
        argv += ["--max-running", str(spec.max_running)]
    if spec.allowed_hosts:  # the names clients use, and the loopback names health checks and hops use
        for host in (*LOOPBACK_NAMES, *spec.allowed_hosts):
            argv += ["--allowed-host", host]
    return argv


def replica_ready(url: str, timeout: float = 1.0) -> bool:
    """True when ``url``/readyz answers 200."""
    try:
        return httpx.get(url + "/readyz", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False
