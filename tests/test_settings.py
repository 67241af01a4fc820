"""The settings' sections on their own (``wasm_runner.settings``); the server's file, environment and
flags are in tests/http/test_config.py. Here: the MCP tools' section, under its old name too."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields

import pytest

from wasm_runner import inputs
from wasm_runner.limits import InvalidLimits, Limits
from wasm_runner.settings import DEFAULT_TOOL_LIMITS, ConfigError, ServerConfig, ToolSettings

# every keyword ToolConfig took before it became a section of the settings
OLD_TOOL_KEYWORDS = {
    "limits", "runtime", "max_sessions", "max_sessions_per_owner", "idle_seconds", "max_lifetime_seconds",
    "max_upload_bytes", "max_code_bytes",
}  # fmt: skip


def test_the_tools_section_is_toolconfig_under_its_old_names() -> None:
    from wasm_runner.mcp import ToolConfig
    from wasm_runner.mcp import server

    assert ToolConfig is server.ToolConfig is ToolSettings
    assert server.DEFAULT_TOOL_LIMITS is DEFAULT_TOOL_LIMITS
    assert {f.name for f in fields(ToolSettings)} == OLD_TOOL_KEYWORDS  # its keys are its fields


def test_the_tools_defaults_are_the_old_ones() -> None:
    config = ToolSettings()
    assert config.limits == Limits(cpu_seconds=20.0, wall_seconds=60.0) == DEFAULT_TOOL_LIMITS
    assert (config.runtime, config.max_sessions, config.max_sessions_per_owner) == ("default", 16, 4)
    assert (config.idle_seconds, config.max_lifetime_seconds) == (900.0, 24 * 3600.0)
    assert (config.max_upload_bytes, config.max_code_bytes) == (16 << 20, inputs.MAX_SOURCE_BYTES)
    assert ToolSettings(limits=None).limits == DEFAULT_TOOL_LIMITS  # type: ignore[arg-type]  # as before


def test_the_tools_keywords_set_what_they_name_and_are_checked() -> None:
    config = ToolSettings(limits=Limits(cpu_seconds=3.0), runtime="small", max_sessions=2,
                          max_sessions_per_owner=1, idle_seconds=30.0, max_lifetime_seconds=60.0,
                          max_upload_bytes=1024, max_code_bytes=2048)
    assert (config.limits.cpu_seconds, config.runtime, config.max_sessions, config.max_sessions_per_owner,
            config.idle_seconds, config.max_lifetime_seconds, config.max_upload_bytes,
            config.max_code_bytes) == (3.0, "small", 2, 1, 30.0, 60.0, 1024, 2048)
    with pytest.raises(FrozenInstanceError):
        config.max_sessions = 3  # type: ignore[misc]
    with pytest.raises(InvalidLimits, match="cpu_seconds"):
        ToolSettings(limits=Limits(cpu_seconds=-1.0))
    with pytest.raises(ConfigError, match="max_sessions must be a whole number of at least 1"):
        ToolSettings(max_sessions=0)
    with pytest.raises(ConfigError, match="runtime must be"):
        ToolSettings(runtime="pypy")


def test_a_server_gives_its_tools_its_profile_and_caps() -> None:
    """What ``McpHttp.for_service`` hands the tools: the profile's limits and runtime, the server's
    session cap and idle expiry, its upload bound; the rest are the tools' defaults."""
    config = ServerConfig(auth=False, max_sessions=5, session_idle_seconds=42.0, max_file_in_bytes=4096)
    tools = config.tools()
    student = config.profile(None)
    assert (tools.limits, tools.runtime) == (student.limits, student.runtime)
    assert (tools.max_sessions, tools.idle_seconds, tools.max_upload_bytes) == (5, 42.0, 4096)
    assert (tools.max_sessions_per_owner, tools.max_code_bytes) == (4, inputs.MAX_SOURCE_BYTES)
    assert config.tools("analyst").limits == config.profiles["analyst"].limits
