"""The cluster's Redis: Debian's ``redis-server`` on a free loopback port, nothing on disk.

The replicas keep their shared state there (rate-limit counters, concurrency leases, the session
directory, download tokens: docs/scale-out.md). It is state that may be lost: no RDB snapshots, no
append-only file, so a restarted Redis starts empty and the replicas re-create what they need.
"""

from __future__ import annotations

import time
from pathlib import Path

import redis

__all__ = ["redis_argv", "redis_url", "redis_ready", "wait_for_redis"]


def redis_argv(binary: str, port: int, workdir: Path) -> list[str]:
    """redis-server listening on 127.0.0.1:``port`` only, no persistence, in the foreground."""
    return [
        binary,
        "--bind", "127.0.0.1",
        "--port", str(port),
        "--protected-mode", "yes",
        "--daemonize", "no",
        "--save", "",
        "--appendonly", "no",
        "--dir", str(workdir),
        "--logfile", "",  # to stdout, which the supervisor prefixes with [redis]
        "--loglevel", "warning",
        "--databases", "1",
    ]  # fmt: skip


def redis_url(port: int) -> str:
    return f"redis://127.0.0.1:{port}/0"


def redis_ready(url: str, timeout: float = 0.5) -> bool:
    """True when the Redis at ``url`` answers PING within ``timeout`` seconds."""
    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def wait_for_redis(url: str, deadline: float) -> bool:
    """Poll ``url`` until it answers PING or ``deadline`` (a ``time.monotonic()`` value) passes."""
    while time.monotonic() < deadline:
        if redis_ready(url):
            return True
        time.sleep(0.05)
    return False
