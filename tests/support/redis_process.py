"""A real ``redis-server`` (Debian's package) for the tests: loopback only, nothing on disk.

``RedisProcess(folder)`` runs ``redis-server --port N --bind 127.0.0.1 --save '' --appendonly no``
in its own folder; ``stop()`` and ``start()`` again keep the port, so a test can take Redis away
from running replicas and give it back. ``tests/conftest.py`` makes two fixtures of it, for every
test folder: ``redis_server``, one process for the whole session, for tests that only need *a*
Redis, and ``redis``, a module's own, for modules whose tests stop it (stopping the shared one
would disturb the others).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

__all__ = ["RedisProcess", "free_port"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisProcess:
    """One redis-server on 127.0.0.1; ``url`` is what ``redis_url`` takes."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: bash scripts/setup.sh installs it "
                               "(Debian package redis-server)")  # fmt: skip
        self.binary = binary
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> RedisProcess:
        """Start (again, on the same port) and wait until it answers PING."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        log = (self.folder / "redis.log").open("ab")
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder), "--protected-mode", "yes"],
            stdout=log, stderr=subprocess.STDOUT, cwd=self.folder,
        )  # fmt: skip
        log.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited ({self.proc.returncode}); see {self.folder}")
            if self.ping():
                return self
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port} in {timeout} s")

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL); the port is free for ``start`` again."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def command(self, *args: str) -> bytes:
        """Send one command (RESP) and return the raw reply's first line; no client library."""
        payload = f"*{len(args)}\r\n".encode() + b"".join(
            f"${len(a.encode())}\r\n{a}\r\n".encode() for a in args
        )
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            s.sendall(payload)
            return s.recv(65536).split(b"\r\n", 1)[0]

    def ping(self) -> bool:
        try:
            return self.command("PING") == b"+PONG"
        except OSError:
            return False

    def flushall(self) -> None:
        assert self.command("FLUSHALL") == b"+OK"
