"""The settings' sections on their own (``wasm_runner.settings``); the server's file, environment and
flags are in tests/http/test_config.py. Here: the MCP tools' section, under its old name too, and
how ``ServerConfig`` holds its sections."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, fields
from pathlib import Path

import pytest

from wasm_runner import inputs
from wasm_runner.limits import InvalidLimits, Limits
from wasm_runner.settings import (
    DEFAULT_TOOL_LIMITS,
    SECTION_OF,
    SECTIONS,
    AdmissionSettings,
    ConfigError,
    ScaleOutSettings,
    ServerConfig,
    ToolSettings,
    load_config,
    server_keys,
)

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
    config = ServerConfig.from_keys(auth=False, max_sessions=5, session_idle_seconds=42.0, max_file_in_bytes=4096)
    tools = config.tools()
    student = config.profile(None)
    assert (tools.limits, tools.runtime) == (student.limits, student.runtime)
    assert (tools.max_sessions, tools.idle_seconds, tools.max_upload_bytes) == (5, 42.0, 4096)
    assert (tools.max_sessions_per_owner, tools.max_code_bytes) == (4, inputs.MAX_SOURCE_BYTES)
    assert config.tools("analyst").limits == config.profiles["analyst"].limits


def test_the_server_config_holds_its_sections_and_the_file_keys_map_into_them(tmp_path: Path) -> None:
    """``ServerConfig`` holds five sections; a ``[server]`` key is in exactly one of them (or is the
    config's own field), and the file, the environment and ``from_keys`` put it there."""
    own = {f.name for f in fields(ServerConfig)} - set(SECTIONS)
    assert set(SECTIONS) == {"admission", "sessions", "downloads", "client_bounds", "scale_out"}
    in_sections = [f.name for kind in SECTIONS.values() for f in fields(kind)]
    assert len(in_sections) == len(set(in_sections)) == len(SECTION_OF)  # no key in two sections
    assert not own & set(SECTION_OF)  # ...nor in a section and the config itself
    assert set(SECTION_OF) - {"cluster_secret"} <= server_keys()  # every section key is a file key
    assert not any(hasattr(ServerConfig(), key) for key in SECTION_OF)  # no flat alias left

    toml = tmp_path / "s.toml"
    toml.write_text("[server]\nmax_running = 3\nsession_idle_seconds = 60\nmax_body_bytes = 4096\n"
                    "download_ttl_seconds = 10\nlease_ttl_seconds = 4\n")
    config = load_config(toml, env={"WASM_RUNNER_MAX_QUEUE": "5"}, auth=False)
    assert isinstance(config.admission, AdmissionSettings) and isinstance(config.scale_out, ScaleOutSettings)
    assert (config.admission.max_running, config.admission.max_queue) == (3, 5)
    assert config.sessions.session_idle_seconds == 60
    assert config.client_bounds.max_body_bytes == 4096
    assert config.downloads.download_ttl_seconds == 10
    assert config.scale_out.lease_ttl_seconds == 4
    assert config == ServerConfig.from_keys(auth=False, max_running=3, max_queue=5, session_idle_seconds=60,
                                            max_body_bytes=4096, download_ttl_seconds=10, lease_ttl_seconds=4)
    toml.write_text("[server]\nmax_running = 0\n")
    with pytest.raises(ConfigError, match="max_running must be a whole number of at least 1"):
        load_config(toml, env={})  # the error names the key the operator wrote


def test_with_changes_settings_in_their_sections_and_checks_again() -> None:
    config = ServerConfig.from_keys(auth=False, max_running=2)
    changed = config.with_(max_running=4, max_sessions=9, auth=True)
    assert (changed.admission.max_running, changed.sessions.max_sessions, changed.auth) == (4, 9, True)
    assert changed.admission.max_queue == config.admission.max_queue  # the rest of the section kept
    assert config.admission.max_running == 2 and config.auth is False  # the original is unchanged
    assert changed.client_bounds is config.client_bounds  # sections not named are shared as they are
    with pytest.raises(ConfigError, match="memory_budget_mb"):
        config.with_(memory_budget_mb=1100)  # the profiles no longer fit: checked again
    with pytest.raises(TypeError):
        config.with_(no_such_setting=1)
