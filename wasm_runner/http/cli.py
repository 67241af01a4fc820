"""``wasm-runner serve``: the HTTP service (API + playground) under uvicorn.

wasm-runner serve --no-auth                 # local playground at http://127.0.0.1:8000/
WASM_RUNNER_API_KEYS=site:SECRET wasm-runner serve --host 0.0.0.0 --allowed-host runner.example.org

Several replicas share state through Redis (``--redis-url``; docs/configuration.md, "Several
replicas"): each needs the same ``WASM_RUNNER_CLUSTER_SECRET`` and its own ``--advertise-url``
(derived from ``--host``/``--port`` when the host is a loopback address).

uvicorn runs with the bounds of ``serving.uvicorn_config`` (header size and time, connections per
address, WebSocket first-message cap); the app adds the rest (docs/security.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]



def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="wasm-runner serve",
        description="Serve the HTTP API and the playground pages with uvicorn. API keys are "
        "required unless --no-auth (local use only, loopback addresses only).",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--config", metavar="TOML", help="server config file (profiles, keys, limits)")
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="LOCAL USE ONLY: no API keys; refused unless --host is a loopback address",
    )
    p.add_argument("--max-running", type=int, help="guests running at once (default 2)")
    p.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                   help="an origin that may call the API from a browser (repeatable)")  # fmt: skip
    p.add_argument("--allowed-host", action="append", metavar="NAME",
                   help="a host name this server answers to (repeatable; default: the loopback "
                   "names and --host; '*' = any, only behind a proxy that checks Host)")  # fmt: skip
    p.add_argument("--audit-log", metavar="PATH", help="append a JSON line per run to PATH")
    p.add_argument("--exercises", metavar="DIR", help="serve the exercises in DIR at /api/exercises")
    p.add_argument("--redis-url", metavar="URL",
                   help="share rate limits, leases and sessions with other replicas through this "
                   "Redis (redis://host:6379/0); needs WASM_RUNNER_CLUSTER_SECRET")  # fmt: skip
    p.add_argument("--advertise-url", metavar="URL",
                   help="this replica's internal base URL other replicas reach it at "
                   "(default http://HOST:PORT when --host is a loopback address)")  # fmt: skip
    p.add_argument("--drain-seconds", type=float, metavar="S",
                   help="on SIGTERM, in-flight runs get this long to finish (default 30)")  # fmt: skip
    p.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """``wasm-runner serve [options]``; returns the exit status (0 after a drain on SIGTERM)."""
    from ..settings import LOOPBACK_HOSTS, ConfigError, is_loopback, load_config

    args = _parser().parse_args(argv)

    overrides = {
        "auth": False if args.no_auth else None,
        "max_running": args.max_running,
        "cors_origins": args.cors_origin,
        "audit_log": args.audit_log,
        "exercises_dir": args.exercises,
        "allowed_hosts": tuple(args.allowed_host) if args.allowed_host else None,
        "redis_url": args.redis_url,
        "advertise_url": args.advertise_url,
        "drain_seconds": args.drain_seconds,
    }
    try:
        config = load_config(args.config, **overrides)
    except ConfigError as exc:
        print(f"wasm-runner serve: {exc}", file=sys.stderr)
        return 2
    if not config.auth and not is_loopback(args.host):
        print(
            f"wasm-runner serve: refusing to serve without API keys on {args.host}; "
            "--no-auth is for local use on 127.0.0.1 only",
            file=sys.stderr,
        )
        return 2
    wildcard = args.host in ("0.0.0.0", "::", "")
    if config.client_bounds.allowed_hosts == LOOPBACK_HOSTS and not is_loopback(args.host):
        if wildcard:
            print(
                f"wasm-runner serve: listening on {args.host or 'every address'} needs the host "
                "names clients use: pass --allowed-host NAME (repeatable) or set allowed_hosts "
                "in [server] (['*'] only behind a proxy that checks Host)",
                file=sys.stderr,
            )
            return 2
        config = config.with_(allowed_hosts=(*config.client_bounds.allowed_hosts, args.host))
    if config.scale_out.shared and config.scale_out.advertise_url is None:
        if not is_loopback(args.host) or args.port == 0:
            print(
                "wasm-runner serve: with redis_url set, other replicas must reach this one: pass "
                "--advertise-url http://ADDRESS:PORT (or WASM_RUNNER_ADVERTISE_URL); it is derived "
                "only for a loopback --host with a fixed --port",
                file=sys.stderr,
            )
            return 2
        host = f"[{args.host}]" if ":" in args.host else args.host
        config = config.with_(advertise_url=f"http://{host}:{args.port}")
    if config.locked:
        print(
            "wasm-runner serve: API keys are required but none are configured. Add [[api_keys]] "
            "to --config, set WASM_RUNNER_API_KEYS=name:key, or use --no-auth for local use.",
            file=sys.stderr,
        )
        return 2
    if not config.auth:
        print(
            "wasm-runner serve: auth is OFF (local use only). Playground: "
            f"http://{args.host}:{args.port}/",
            file=sys.stderr,
        )
    from ..native_heap import limit_arenas
    from ..observability.memory_report import install_from_environment
    from .app import create_app
    from .serving import AFTER_DRAIN_SECONDS, DrainingServer, uvicorn_config

    limit_arenas()  # before the server's threads start (native_heap.py)
    app = create_app(config)
    install_from_environment()  # a diagnosis hook, on only with WASM_RUNNER_MEMORY_REPORT set
    server = DrainingServer(
        uvicorn_config(
            app,
            config,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            timeout_graceful_shutdown=AFTER_DRAIN_SECONDS,
        ),
        app.state.service.drain,
        config.scale_out.drain_seconds,
    )
    server.run()
    return 0
