"""``wasm-runner mcp``'s flags: what settings they give the tools (the server itself: test_stdio.py)."""

from __future__ import annotations

import argparse

import pytest

from wasm_runner.limits import InvalidLimits
from wasm_runner.mcp.cli import add_arguments, tool_settings
from wasm_runner.settings import DEFAULT_TOOL_LIMITS, ToolSettings


def _parse(*argv: str) -> argparse.Namespace:
    return add_arguments(argparse.ArgumentParser()).parse_args(list(argv))


def test_no_flags_give_the_cli_defaults() -> None:
    config = tool_settings(_parse())
    assert config == ToolSettings(limits=DEFAULT_TOOL_LIMITS, max_sessions=4, max_sessions_per_owner=4)


def test_every_flag_sets_its_setting() -> None:
    config = tool_settings(_parse("--runtime", "small", "--cpu-seconds", "5", "--wall-seconds", "9",
                                  "--memory-mb", "128", "--max-sessions", "2", "--idle-seconds", "30"))
    assert (config.limits.cpu_seconds, config.limits.wall_seconds, config.limits.memory_mb) == (5.0, 9.0, 128)
    assert (config.runtime, config.max_sessions, config.max_sessions_per_owner, config.idle_seconds) == (
        "small", 2, 2, 30.0)


def test_a_flag_out_of_range_says_which() -> None:
    with pytest.raises(InvalidLimits, match="--max-sessions must be at least 1"):
        tool_settings(_parse("--max-sessions", "0"))
    with pytest.raises(InvalidLimits, match="cpu_seconds"):
        tool_settings(_parse("--cpu-seconds", "-3"))
