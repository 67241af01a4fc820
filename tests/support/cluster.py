"""A real local cluster for the tests: ``wasm-runner cluster`` as a person starts it (Redis, three
``serve`` replicas, HAProxy), with a config made for fast starts (the ``plain`` image, small limits,
no warm pools) and API keys for each test's limits.

``start_cluster(tmp)`` runs the command, reads the lines it prints (the pid and URL of every part,
then ``ready at``) and returns a ``LiveCluster``; ``LiveCluster.stop()`` sends SIGTERM (or SIGINT)
and returns the exit status.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from wasm_runner.scaleout.launcher.children import free_port
from wasm_runner.scaleout.launcher.haproxy import REPLICA_HEADER, server_states

__all__ = ["LiveCluster", "Part", "start_cluster", "wait_until", "KEYS", "REPLICA_HEADER", "server_states"]

# key name -> (rate, max_concurrent); each test uses its own key so counters never mix
KEYS: dict[str, tuple[str, int]] = {
    "main": ("100000/minute", 32),
    "rate": ("20/minute", 8),
    "conc": ("100000/minute", 2),
    "lease": ("100000/minute", 2),
    "load": ("100000/minute", 64),
    "redis": ("100000/minute", 16),
    "class": ("100000/minute", 2),
}
# more settings of a key (TOML lines)
KEY_EXTRA: dict[str, str] = {"class": "user_max_concurrent = 1\n"}

CONFIG = """\
[server]
default_profile = "quick"
max_running = 2
max_queue = 16
queue_timeout_seconds = 20
memory_budget_mb = 1024
tenant_memory_share = 1.0
lease_ttl_seconds = {lease_ttl}
redis_timeout_seconds = 2  # above a loaded CI machine's worst Redis round trip; a hung Redis still answers 503 within it
drain_seconds = {drain}

[profiles.quick]
image = "plain"
cpu_seconds = 5
wall_seconds = 20
memory_mb = 64

[profiles.analyst]
pool_size = 0  # no warm datascience pool per replica: the replicas start in seconds
memory_mb = 256

{keys}
"""

LEASE_TTL = 3.0
DRAIN_SECONDS = 8.0


def wait_until(check: Callable[[], bool], timeout: float = 30.0, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


@dataclass
class Part:
    name: str
    pid: int
    url: str


@dataclass
class LiveCluster:
    proc: subprocess.Popen[str]
    url: str
    keys: dict[str, str]
    stats_socket: Path | None
    parts: dict[str, Part] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def client(self, key: str = "main", timeout: float = 60.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.keys[key]}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def direct(self, replica: str, key: str = "main") -> httpx.Client:
        """A client of one replica's internal address, bypassing HAProxy."""
        headers = {"Authorization": f"Bearer {self.keys[key]}"}
        return httpx.Client(base_url=self.parts[replica].url, headers=headers, timeout=60)

    @property
    def replicas(self) -> list[str]:
        return sorted(n for n in self.parts if re.fullmatch(r"r\d+", n))

    def said(self, pattern: str) -> re.Match[str] | None:
        for line in list(self.lines):
            m = re.search(pattern, line)
            if m:
                return m
        return None

    def wait_said(self, pattern: str, timeout: float = 30.0) -> re.Match[str]:
        assert wait_until(lambda: self.said(pattern) is not None, timeout), (pattern, self.lines[-20:])
        m = self.said(pattern)
        assert m is not None
        return m

    def refresh_pids(self) -> None:
        """Pids of parts that were restarted (the supervisor prints ``NAME restarted (pid N)``)."""
        for line in list(self.lines):
            m = re.search(r"cluster: (\S+) restarted \(pid (\d+)\)", line)
            if m and m.group(1) in self.parts:
                self.parts[m.group(1)].pid = int(m.group(2))

    def states(self) -> dict[str, str]:
        """HAProxy's view of each replica, from its stats socket."""
        return server_states(self.stats_socket) if self.stats_socket else {}

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


def start_cluster(tmp: Path, replicas: int = 3, extra_args: tuple[str, ...] = ()) -> LiveCluster:
    keys = {name: secrets.token_urlsafe(16) for name in KEYS}
    key_tables = "\n".join(
        f'[[api_keys]]\nname = "{name}"\nkey = "{keys[name]}"\nrate = "{rate}"\nmax_concurrent = {conc}\n'
        + KEY_EXTRA.get(name, "")
        for name, (rate, conc) in KEYS.items()
    )
    cfg = tmp / "cluster.toml"
    cfg.write_text(CONFIG.format(keys=key_tables, lease_ttl=LEASE_TTL, drain=DRAIN_SECONDS))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WASM_RUNNER_") or k == "WASM_RUNNER_CACHE"}
    cmd = [sys.executable, "-m", "wasm_runner.cli", "cluster", "--replicas", str(replicas),
           "--port", str(port), "--config", str(cfg), *extra_args]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    live = LiveCluster(proc=proc, url=f"http://127.0.0.1:{port}", keys=keys, stats_socket=None)

    def read(stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            live.lines.append(line.rstrip("\n"))

    assert proc.stdout is not None and proc.stderr is not None
    threading.Thread(target=read, args=(proc.stderr,), daemon=True).start()
    threading.Thread(target=read, args=(proc.stdout,), daemon=True).start()
    ready = wait_until(lambda: live.said(r"cluster: ready at") is not None or proc.poll() is not None, 240)
    assert ready and proc.poll() is None, "\n".join(live.lines[-40:])
    for line in list(live.lines):
        m = re.search(r"cluster: replica (r\d+) (http://127\.0\.0\.1:\d+) \(pid (\d+)\)", line)
        if m:
            live.parts[m.group(1)] = Part(m.group(1), int(m.group(3)), m.group(2))
        m = re.search(r"cluster: redis-server (redis://127\.0\.0\.1:\d+/0) \(pid (\d+)\)", line)
        if m:
            live.parts["redis"] = Part("redis", int(m.group(2)), m.group(1))
        m = re.search(r"cluster: haproxy (\S+) \(pid (\d+), stats socket (\S+)\)", line)
        if m:
            live.parts["haproxy"] = Part("haproxy", int(m.group(2)), m.group(1))
            live.stats_socket = Path(m.group(3))
    assert len(live.replicas) == replicas and "redis" in live.parts and live.stats_socket, live.lines
    return live
