"""The server's settings as the HTTP face has always imported them: ``wasm_runner.settings``.

The settings live in ``wasm_runner/settings.py`` (small frozen sections, TOML keys from their
fields, the one reader of the server's ``WASM_RUNNER_*`` variables), which the launcher, the tool
schemas and the benchmark use too; these names stay importable from here for older callers.
"""

from __future__ import annotations

from ..settings import (
    DEFAULT_PROFILES,
    LOOPBACK_HOSTS,
    USER_MAX_CONCURRENT,
    USER_RATE,
    ApiKey,
    ConfigError,
    Profile,
    ServerConfig,
    hash_key,
    is_loopback,
    load_config,
)

__all__ = [
    "ConfigError", "Profile", "ApiKey", "ServerConfig", "load_config", "DEFAULT_PROFILES", "LOOPBACK_HOSTS",
    "USER_MAX_CONCURRENT", "USER_RATE", "hash_key", "is_loopback",
]  # fmt: skip
