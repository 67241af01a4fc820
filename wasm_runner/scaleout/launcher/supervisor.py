"""``Cluster``: Redis, N replicas and HAProxy, started in order, watched, and stopped in order.

Start: Redis (until it answers PING), the replicas (each with the cluster's Redis URL, its own
advertise URL and the shared secret), then HAProxy; ready when every replica's ``/readyz`` answers
200 and HAProxy reports every server ``UP``. Then the supervisor prints the URL and watches.

A child that dies while the cluster runs is reported (name, pid, how it ended, its last lines) and
started again after ``RESTART_DELAY`` seconds, on the same port: a replica comes back as a fresh
process (its sessions resume on the replica their next call reaches, from their last snapshot in
the folder every replica shares, ``<workdir>/paused-sessions``; a session without one is lost:
``410 session_lost``; its leases expire within their TTL), Redis comes back empty (the replicas reconnect; rate windows start over,
the replicas write their leases and directory entries back). A child already restarted
``MAX_RESTARTS`` times within ``RESTART_WINDOW`` seconds is not started again when it dies once
more; when HAProxy or Redis gives up, or no replica is
left, the cluster stops with exit status 1.

Stop (Ctrl-C, SIGTERM, or ``stop()``): SIGTERM to every replica at once, so each drains (``/readyz``
503, in-flight runs finish within ``drain_seconds``, sessions closed, leases released) while Redis
is still there; SIGKILL for a replica still running after the drain bound; then HAProxy, then Redis.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import WasmRunnerError
from ...settings import ServerConfig
from .children import Child, environ_with, free_port, require_binary
from .haproxy import check_config, haproxy_argv, render_config, server_states
from .redis import redis_argv, redis_ready, redis_url, wait_for_redis
from .replicas import (
    CLUSTER_SECRET_ENV, MEMORY_BUDGET_ENV, SNAPSHOT_DIR_ENV, ReplicaSpec, replica_argv, replica_ready,
)  # fmt: skip

__all__ = ["Cluster", "ClusterError", "ClusterOptions", "RESTART_DELAY", "MAX_RESTARTS", "RESTART_WINDOW"]

RESTART_DELAY = 1.0
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0
DRAIN_MARGIN = 10.0  # beyond drain_seconds: closing sessions, releasing leases, exiting


class ClusterError(WasmRunnerError, RuntimeError):
    """The cluster could not start, or lost a part it cannot run without."""


@dataclass(frozen=True)
class ClusterOptions:
    """What ``wasm-runner cluster`` was asked for (see ``cli.py`` for each flag)."""

    replicas: int
    port: int
    host: str = "127.0.0.1"
    config_path: str | None = None
    no_auth: bool = False
    max_running: int | None = None
    drain_seconds: float | None = None
    allowed_hosts: tuple[str, ...] = ()
    log_level: str = "warning"
    ready_timeout: float = 300.0  # a fresh machine compiles the runtime on the first start
    # each replica's memory_budget_mb when the config leaves it to the host's default: the
    # replicas share one host, so each gets its part (host_memory.default_memory_budget_mb)
    memory_budget_mb: int | None = None


@dataclass
class _Watched:
    child: Child
    kind: str  # redis | replica | haproxy
    url: str = ""
    restarts: list[float] = field(default_factory=list)
    restart_at: float | None = None
    given_up: bool = False
    back_pending: bool = False


class Cluster:
    """The running cluster; ``start()``, ``wait_ready()``, ``watch(stop_event)``, ``stop()``."""

    def __init__(self, options: ClusterOptions, config: ServerConfig,
                 say: Callable[[str], None]) -> None:  # fmt: skip
        self.options = options
        self.config = config
        self.say = say
        self.redis_bin = require_binary("redis-server")
        self.haproxy_bin = require_binary("haproxy")
        self.workdir = Path(tempfile.mkdtemp(prefix="wasm-runner-cluster-"))
        self.secret = secrets.token_hex(32)
        self.redis_port = free_port()
        self.redis_url = redis_url(self.redis_port)
        self.stats_socket = self.workdir / "haproxy.sock"
        self.parts: list[_Watched] = []
        self.url = f"http://{'[' + options.host + ']' if ':' in options.host else options.host}:{options.port}"
        self._lock = threading.Lock()
        self.redis_quiet = True  # until it first answers PING, and again while it restarts

    # -- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start Redis, the replicas and HAProxy (raises ``ClusterError`` with a plain reason)."""
        # Redis's start-up banner is noise; later lines (a crash, a warning) are shown
        redis_child = Child("redis", redis_argv(self.redis_bin, self.redis_port, self.workdir),
                            echo=self._redis_line)  # fmt: skip
        self._launch(_Watched(redis_child, "redis", self.redis_url))
        if not wait_for_redis(self.redis_url, time.monotonic() + 10):
            raise ClusterError(f"redis-server did not answer on {self.redis_url}: "
                               + " | ".join(redis_child.tail))  # fmt: skip
        self.redis_quiet = False
        self.say(f"redis-server {self.redis_url} (pid {redis_child.pid})")
        extra = {CLUSTER_SECRET_ENV: self.secret}
        if not self.config.sessions.snapshot_dir:  # one folder for every replica's paused sessions
            extra[SNAPSHOT_DIR_ENV] = str(self.workdir / "paused-sessions")
        if self.options.memory_budget_mb is not None:
            extra[MEMORY_BUDGET_ENV] = str(self.options.memory_budget_mb)
        env = environ_with(extra)
        backends = []
        for i in range(self.options.replicas):
            spec = ReplicaSpec(
                name=f"r{i + 1}", port=free_port(), redis_url=self.redis_url,
                config=self.options.config_path, drain_seconds=self.options.drain_seconds,
                log_level=self.options.log_level, no_auth=self.options.no_auth,
                max_running=self.options.max_running, allowed_hosts=self.options.allowed_hosts,
            )  # fmt: skip
            child = Child(spec.name, replica_argv(spec), env=env)
            self._launch(_Watched(child, "replica", spec.url))
            backends.append((spec.name, spec.port))
            self.say(f"replica {spec.name} {spec.url} (pid {child.pid})")
        cfg = self.workdir / "haproxy.cfg"
        cfg.write_text(render_config(self.options.host, self.options.port, backends, self.config,
                                     self.stats_socket))  # fmt: skip
        problem = check_config(self.haproxy_bin, cfg)
        if problem:
            raise ClusterError(f"the generated haproxy.cfg is not valid: {problem}")
        proxy = Child("haproxy", haproxy_argv(self.haproxy_bin, cfg))
        self._launch(_Watched(proxy, "haproxy", self.url))
        self.say(f"haproxy {self.url} (pid {proxy.pid}, stats socket {self.stats_socket})")

    def _redis_line(self, line: str) -> None:
        if not self.redis_quiet:
            print(line, file=sys.stderr, flush=True)

    def _launch(self, part: _Watched) -> None:
        part.child.start()
        with self._lock:
            if part not in self.parts:
                self.parts.append(part)

    @property
    def replicas(self) -> list[_Watched]:
        return [p for p in self.parts if p.kind == "replica"]

    def wait_ready(self, stop: threading.Event) -> bool:
        """Block until every replica is ready and HAProxy sees them all ``UP``; False when
        ``stop`` was set first. Raises ``ClusterError`` when a part died or time ran out."""
        deadline = time.monotonic() + self.options.ready_timeout
        pending = {p.child.name for p in self.replicas}
        while not stop.is_set():
            for part in self.parts:
                if not part.child.alive():
                    raise ClusterError(
                        f"{part.child.name} exited while starting ({part.child.exit_description()}): "
                        + " | ".join(list(part.child.tail)[-5:])
                    )
            for part in self.replicas:
                if part.child.name in pending and replica_ready(part.url):
                    pending.discard(part.child.name)
            states = server_states(self.stats_socket)
            if not pending and states and all(s == "UP" for s in states.values()):
                return True
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"not ready after {self.options.ready_timeout:g} s (waiting for "
                    f"{', '.join(sorted(pending)) or 'HAProxy health checks'})"
                )
            stop.wait(0.1)
        return False

    # -- watch ---------------------------------------------------------------------------------

    def watch(self, stop: threading.Event) -> int:
        """Watch the children until ``stop`` is set (returns 0) or the cluster cannot go on (1)."""
        while not stop.wait(0.2):
            now = time.monotonic()
            for part in list(self.parts):
                child = part.child
                if part.back_pending and part.kind == "replica" and child.alive() and replica_ready(part.url):
                    part.back_pending = False
                    self.say(f"replica {child.name} is back (pid {child.pid})")
                if child.alive() or child.stopping or part.given_up:
                    continue
                if part.restart_at is None:
                    self._report_exit(part)
                    part.restarts = [t for t in part.restarts if now - t < RESTART_WINDOW]
                    if len(part.restarts) >= MAX_RESTARTS:
                        part.given_up = True
                        self.say(f"{child.name} died {MAX_RESTARTS} times within "
                                 f"{RESTART_WINDOW:g} s; not starting it again")  # fmt: skip
                        if part.kind != "replica":
                            return 1
                        if all(p.given_up for p in self.replicas):
                            self.say("no replica is left")
                            return 1
                        continue
                    part.restart_at = now + RESTART_DELAY
                elif now >= part.restart_at:
                    part.restart_at = None
                    part.restarts.append(now)
                    if part.kind == "redis":
                        self.redis_quiet = True
                    child.start()
                    part.back_pending = True
                    self.say(f"{child.name} restarted (pid {child.pid})")
                    if part.kind == "redis" and wait_for_redis(self.redis_url, time.monotonic() + 5):
                        part.back_pending = False
                        self.redis_quiet = False
                        self.say(f"redis-server is back on {self.redis_url} (empty)")
        return 0

    def _report_exit(self, part: _Watched) -> None:
        child = part.child
        last = " | ".join(list(child.tail)[-3:])
        self.say(
            f"{child.name} (pid {child.pid}) exited unexpectedly: {child.exit_description()}"
            + (f"; last output: {last}" if last else "")
            + f"; restarting it in {RESTART_DELAY:g} s"
        )

    def status(self) -> dict[str, str]:
        """HAProxy's view of each replica (``UP``, ``DOWN``, ...)."""
        return server_states(self.stats_socket)

    def redis_up(self) -> bool:
        return redis_ready(self.redis_url)

    # -- stop ----------------------------------------------------------------------------------

    def stop(self) -> None:
        """Replicas drain (SIGTERM, then SIGKILL after the drain bound), then HAProxy, then Redis."""
        drain = self.options.drain_seconds
        if drain is None:
            drain = self.config.scale_out.drain_seconds
        replicas = self.replicas
        for part in replicas:
            part.child.stopping = True
            part.child.send(signal.SIGTERM)
        deadline = time.monotonic() + drain + DRAIN_MARGIN
        for part in replicas:
            if not part.child.wait(max(0.0, deadline - time.monotonic())):
                self.say(f"replica {part.child.name} did not finish draining; killing it")
                part.child.stop(signal.SIGKILL, 5.0)
        for kind in ("haproxy", "redis"):
            for part in self.parts:
                if part.kind == kind:
                    part.child.stop(signal.SIGTERM, 10.0)
        shutil.rmtree(self.workdir, ignore_errors=True)
