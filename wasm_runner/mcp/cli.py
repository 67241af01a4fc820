"""``wasm-runner mcp``: serve the MCP tools over stdio, for a chat client that launches it."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import anyio

from ..limits import InvalidLimits, Limits
from ..settings import DEFAULT_TOOL_LIMITS, ToolSettings
from .server import build_server, warm_in_background

__all__ = ["main", "add_arguments", "run_from_args", "tool_settings"]


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``mcp`` subcommand's options (shared by ``wasm-runner mcp`` and ``python -m``)."""
    parser.add_argument("--runtime", default="default", choices=["default", "small"],
                        help="Python runtime for the tools (default: numpy, pandas, matplotlib inside)")
    parser.add_argument("--cpu-seconds", type=float, help="CPU time per call (default 20)")
    parser.add_argument("--wall-seconds", type=float, help="wall-clock time per call (default 60)")
    parser.add_argument("--memory-mb", type=int, help="memory per guest (default 512)")
    parser.add_argument("--max-sessions", type=int, default=4, help="open sessions at once (default 4)")
    parser.add_argument("--idle-seconds", type=float, default=900.0,
                        help="close a session idle this long (default 900)")
    parser.add_argument("--no-warm", action="store_true",
                        help="do not prepare the sandbox at start-up (the first call then waits)")
    return parser


def tool_settings(args: argparse.Namespace) -> ToolSettings:
    """The tools' settings (``settings.ToolSettings``) the flags give; ``InvalidLimits`` with
    the flag's name when one is out of its range."""
    given = {
        "cpu_seconds": args.cpu_seconds,
        "wall_seconds": args.wall_seconds,
        "memory_mb": args.memory_mb,
    }
    limits = Limits.from_dict({k: v for k, v in given.items() if v is not None}, base=DEFAULT_TOOL_LIMITS)
    if args.max_sessions < 1 or not args.idle_seconds > 0:
        raise InvalidLimits("--max-sessions must be at least 1 and --idle-seconds above 0")
    return ToolSettings(
        limits=limits,
        runtime=args.runtime,
        max_sessions=args.max_sessions,
        max_sessions_per_owner=args.max_sessions,
        idle_seconds=args.idle_seconds,
    )


def run_from_args(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin. Returns the exit code."""
    try:
        config = tool_settings(args)
    except InvalidLimits as exc:
        print(f"wasm-runner mcp: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)  # stdout carries the protocol
    if not args.no_warm:
        warm_in_background(args.runtime)
    server, executor = build_server(config)  # a local executor: no server, the same session caps

    async def serve() -> None:
        try:
            await server.run_stdio_async()
        finally:
            with anyio.CancelScope(shield=True):
                await executor.sessions.close_all()  # no session folder outlives the server
            executor.shutdown()

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = add_arguments(
        argparse.ArgumentParser(
            prog="wasm-runner mcp",
            description="Serve the run_python / session tools to an MCP client over stdio.",
        )
    )
    return run_from_args(parser.parse_args(argv))
