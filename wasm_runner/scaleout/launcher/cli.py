"""``wasm-runner cluster``: Redis, N ``serve`` replicas and HAProxy on this machine, in the foreground.

    wasm-runner cluster --replicas 3 --port 8000 --config server.toml
    WASM_RUNNER_API_KEYS=site:SECRET wasm-runner cluster --replicas 2 --port 8000

API keys and profiles come from the same ``--config`` and environment as ``serve``. The command
prints one line per part (``redis-server ...``, ``replica r1 http://127.0.0.1:PORT (pid N)``), then
``ready at http://HOST:PORT`` once every replica is ready; Ctrl-C or SIGTERM stops everything and
exits 0. See docs/scale-out.md and ``supervisor.py`` for what happens when a part dies.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from .children import MissingBinary, port_in_use

__all__ = ["main"]

PROG = "wasm-runner cluster"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Start Redis, N wasm-runner serve replicas on internal loopback ports and "
        "HAProxy in front on HOST:PORT, in the foreground; Ctrl-C or SIGTERM stops them all.",
    )
    p.add_argument("--replicas", type=int, default=3, help="serve replicas to start (default 3)")
    p.add_argument("--port", type=int, default=8000, help="HAProxy's port (default 8000)")
    p.add_argument("--host", default="127.0.0.1", help="HAProxy's address (default 127.0.0.1)")
    p.add_argument("--config", metavar="TOML", help="the replicas' config file (as for serve)")
    p.add_argument("--no-auth", action="store_true",
                   help="LOCAL USE ONLY: no API keys; refused unless --host is a loopback address")  # fmt: skip
    p.add_argument("--max-running", type=int, help="guests running at once, per replica")
    p.add_argument("--drain-seconds", type=float, metavar="S",
                   help="on stop, in-flight runs get this long to finish (default: the config's)")  # fmt: skip
    p.add_argument("--allowed-host", action="append", metavar="NAME",
                   help="a host name clients use (repeatable; needed with a non-loopback --host)")  # fmt: skip
    p.add_argument("--ready-timeout", type=float, default=300.0, metavar="S",
                   help="how long the replicas may take to be ready (default 300)")  # fmt: skip
    p.add_argument("--log-level", default="warning",
                   choices=["critical", "error", "warning", "info", "debug"],
                   help="the replicas' log level (default warning)")  # fmt: skip
    return p


def _say(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``wasm-runner cluster [options]``; returns the exit status."""
    from ...settings import LOOPBACK_HOSTS, ConfigError, is_loopback, load_config
    from .replicas import CLUSTER_SECRET_ENV
    from ...host_memory import default_memory_budget_mb
    from .supervisor import Cluster, ClusterError, ClusterOptions

    args = _parser().parse_args(argv)
    if not 1 <= args.replicas <= 64:
        _say(f"--replicas must be from 1 to 64, got {args.replicas}")
        return 2
    if not 1 <= args.port <= 65535:
        _say(f"--port must be from 1 to 65535, got {args.port}")
        return 2
    # the replicas' settings, checked here first so a mistake is said once, not by N replicas
    env = dict(os.environ)
    env.setdefault(CLUSTER_SECRET_ENV, "x" * 64)  # the cluster makes its own; only checked here
    try:
        config = load_config(args.config, env=env, auth=False if args.no_auth else None,
                             max_running=args.max_running, drain_seconds=args.drain_seconds)  # fmt: skip
    except ConfigError as exc:
        _say(str(exc))
        return 2
    if not config.auth and not is_loopback(args.host):
        _say(f"refusing to serve without API keys on {args.host}; --no-auth is for local use on "
             "127.0.0.1 only")  # fmt: skip
        return 2
    if config.locked:
        _say("API keys are required but none are configured. Add [[api_keys]] to --config, set "
             "WASM_RUNNER_API_KEYS=name:key, or use --no-auth for local use.")  # fmt: skip
        return 2
    allowed = tuple(args.allowed_host or ())
    if not is_loopback(args.host) and not allowed and config.client_bounds.allowed_hosts == LOOPBACK_HOSTS:
        _say(f"on {args.host} the replicas need the host names clients use: pass --allowed-host "
             "NAME (repeatable) or set allowed_hosts in [server]")  # fmt: skip
        return 2
    if port_in_use(args.host, args.port):
        _say(f"port {args.port} on {args.host} is in use (or not ours to bind); choose another "
             "with --port")  # fmt: skip
        return 2
    options = ClusterOptions(
        replicas=args.replicas, port=args.port, host=args.host, config_path=args.config,
        no_auth=args.no_auth, max_running=args.max_running, drain_seconds=args.drain_seconds,
        allowed_hosts=allowed, log_level=args.log_level, ready_timeout=args.ready_timeout,
        # the replicas share this host's memory: each gets its part of the default budget
        memory_budget_mb=default_memory_budget_mb(shares=args.replicas)
        if config.admission.memory_budget_mb == default_memory_budget_mb() else None,
    )  # fmt: skip

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            return
        _say(f"{signal.Signals(signum).name}: stopping (replicas drain first)")
        stop.set()

    try:
        cluster = Cluster(options, config, _say)
    except MissingBinary as exc:
        _say(str(exc))
        return 2
    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        cluster.start()
        if cluster.wait_ready(stop):
            _say(f"ready at {cluster.url} ({args.replicas} replica"
                 f"{'s' if args.replicas != 1 else ''} behind HAProxy); Ctrl-C stops")  # fmt: skip
            print(cluster.url, flush=True)
            status = cluster.watch(stop)
    except ClusterError as exc:
        _say(str(exc))
        status = 1
    except OSError as exc:
        _say(f"cannot start: {exc}")
        status = 1
    finally:
        cluster.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    _say("stopped" if status == 0 else "stopped after an error")
    return status
