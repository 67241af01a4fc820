"""One supervised child process, free loopback ports, and the binaries the cluster needs.

A ``Child`` runs in its own process group, so a Ctrl-C in the terminal reaches only the supervisor,
which then stops the children in order (replicas first, so they drain while Redis is still up).
On Linux it also gets ``PR_SET_PDEATHSIG``: if the supervisor itself is killed, the kernel sends
the child SIGTERM, so no replica, Redis or HAProxy outlives it. Its output is copied to the
supervisor's stderr line by line, prefixed with its name, and the last lines are kept to explain
an unexpected exit.
"""

from __future__ import annotations

import collections
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO

from ...errors import WasmRunnerError

__all__ = [
    "Child", "MissingBinary", "free_port", "port_in_use", "require_binary", "environ_with",
    "DEBIAN_PACKAGES",
]

# binary -> the Debian package that installs it (scripts/setup.sh installs both)
DEBIAN_PACKAGES = {"redis-server": "redis-server", "haproxy": "haproxy"}
SYSTEM_PATH = "/usr/sbin:/usr/bin"  # searched too: a user's $PATH often lacks /usr/sbin (haproxy)
_PR_SET_PDEATHSIG = 1


class MissingBinary(WasmRunnerError, RuntimeError):
    """A program the cluster needs is not installed."""


def require_binary(name: str) -> str:
    """The path of ``name`` on ``$PATH`` (and /usr/sbin), or ``MissingBinary`` naming its package."""
    path = shutil.which(name) or shutil.which(name, path=SYSTEM_PATH)
    if path is None:
        package = DEBIAN_PACKAGES.get(name, name)
        raise MissingBinary(
            f"{name} is not installed; install Debian's {package} package "
            f"(apt-get install -y --no-install-recommends {package}, or run scripts/setup.sh)"
        )
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    """True when ``host:port`` cannot be bound (someone listens there, or it is not ours)."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: Ctrl-C still stops everything in order
        pass


class Child:
    """One named child process: ``start``, ``alive``, ``stop`` (signal, wait, then SIGKILL)."""

    def __init__(self, name: str, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, echo: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.name = name
        self.argv = list(argv)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.echo = echo if echo is not None else _to_stderr
        self.proc: subprocess.Popen[str] | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self.stopping = False
        self.started_at = 0.0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self.stopping = False
        self.tail.clear()
        self.proc = subprocess.Popen(
            self.argv, env=self.env, cwd=self.cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
            process_group=0, preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )  # fmt: skip
        self.started_at = time.monotonic()
        assert self.proc.stdout is not None
        threading.Thread(target=self._copy, args=(self.proc.stdout,), daemon=True).start()

    def _copy(self, stream: IO[str]) -> None:
        for line in stream:
            line = line.rstrip("\n")
            self.tail.append(line)
            self.echo(f"[{self.name}] {line}")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exit_description(self) -> str:
        """How the process ended: ``exit status 1`` or ``signal 9 (SIGKILL)``."""
        code = self.proc.returncode if self.proc else None
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"signal {-code} ({signal.Signals(-code).name})"
            except ValueError:
                return f"signal {-code}"
        return f"exit status {code}"

    def send(self, sig: int) -> None:
        if self.alive() and self.proc is not None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to end; True when it has."""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> None:
        """Send ``sig``, wait up to ``timeout`` seconds, then SIGKILL."""
        self.stopping = True
        self.send(sig)
        if not self.wait(timeout):
            self.send(signal.SIGKILL)
            self.wait(10.0)


def _to_stderr(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")  # one write: lines of concurrent children never interleave
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: the line is still kept in the tail
        pass


def environ_with(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment plus ``extra`` (what a replica inherits: keys, config)."""
    env = dict(os.environ)
    env.update(extra)
    return env
