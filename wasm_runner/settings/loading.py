"""Reading the settings: the TOML file, then ``WASM_RUNNER_*`` variables, then the command line's
flags (``load_config``)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..environment import variables
from ..execution import Policy
from ..host_functions.declared import functions_from
from ..network.rules import network_from
from ..limits import InvalidLimits, Limits
from ..lti.registration import LtiSettings
from .rules import (
    ConfigError, ENV_PREFIX, FromText, KEY_MAX_CONCURRENT, KEY_RATE, PROFILE_IMAGE,
    USER_MAX_CONCURRENT, USER_RATE, _on_off,
)
from .config import ApiKey, DEFAULT_PROFILES, Profile, ServerConfig, _flat_fields, hash_key, server_keys

__all__ = ["environment", "load_config"]


# -- reading ----------------------------------------------------------------------------------
_PROFILE_KEYS = {"data_dir", "files_out", "runtime", "display", "pool_size", "preload", "image"}
_KEY_KEYS = {
    "name", "key", "key_sha256", "profiles", "rate", "max_concurrent", "user_rate",
    "user_max_concurrent", "user_token_secret", "user_token_secret_file", "user_token_required",
    "webhook_url", "webhook_allow",
}  # fmt: skip


def _profile_from(name: str, table: Mapping[str, Any], base: Policy | None) -> Policy:
    if not isinstance(table, Mapping):
        raise ConfigError(f"[profiles.{name}] must be a table")
    limit_values = {k: v for k, v in table.items() if k not in _PROFILE_KEYS}
    try:
        limits = Limits.from_dict(limit_values, base=base.limits if base else Limits())
    except InvalidLimits as exc:
        raise ConfigError(f"[profiles.{name}]: {exc}") from None
    data_dir = table.get("data_dir", base.data_dir if base else None)
    pool_size = table.get("pool_size", base.pool_size if base else 0)
    preload = table.get("preload", base.preload if base else ())
    if isinstance(pool_size, bool) or not isinstance(pool_size, int) or not 0 <= pool_size <= 64:
        raise ConfigError(f"[profiles.{name}]: pool_size must be a whole number from 0 to 64")
    if not isinstance(preload, (list, tuple)) or not all(isinstance(m, str) and m for m in preload):
        raise ConfigError(f"[profiles.{name}]: preload must be a list of module names")
    return Profile(
        name,
        limits,
        data_dir=Path(data_dir) if data_dir else None,
        files_out=bool(table.get("files_out", base.files_out if base else True)),
        runtime=str(table.get("runtime", base.runtime if base else "default")),
        display=bool(table.get("display", base.display if base else False)),
        pool_size=pool_size,
        preload=tuple(preload),
        image=str(table.get("image", base.image if base else PROFILE_IMAGE)),
    )


def _key_from(entry: Mapping[str, Any]) -> ApiKey:
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise ConfigError("each [[api_keys]] entry needs a name")
    unknown = set(entry) - _KEY_KEYS
    if unknown:
        raise ConfigError(f"api key {entry['name']!r}: unknown setting(s) {sorted(unknown)}")
    if "key_sha256" in entry:
        digest = str(entry["key_sha256"]).lower()
    elif "key" in entry:
        digest = hash_key(str(entry["key"]))
    else:
        raise ConfigError(f"api key {entry['name']!r} needs key or key_sha256")
    secret = entry.get("user_token_secret")
    if secret is None and entry.get("user_token_secret_file"):
        secret = _read_secret(Path(str(entry["user_token_secret_file"])), "user_token_secret_file")
    return ApiKey(
        name=str(entry["name"]),
        key_sha256=digest,
        profiles=tuple(entry.get("profiles", ())),
        rate=str(entry.get("rate", KEY_RATE)),
        max_concurrent=int(entry.get("max_concurrent", KEY_MAX_CONCURRENT)),
        user_rate=str(entry.get("user_rate", USER_RATE)),
        user_max_concurrent=int(entry.get("user_max_concurrent", USER_MAX_CONCURRENT)),
        user_token_secret=None if secret is None else str(secret),
        user_token_required=bool(entry.get("user_token_required", False)),
        webhook_url=None if entry.get("webhook_url") is None else str(entry["webhook_url"]),
        webhook_allow=_webhook_allow(entry),
    )


def _webhook_allow(entry: Mapping[str, Any]) -> tuple[str, ...]:
    allow = entry.get("webhook_allow", [])
    if not isinstance(allow, list) or not all(isinstance(a, str) for a in allow):
        raise ConfigError(f"api key {entry['name']!r}: webhook_allow must be a list of addresses")
    return tuple(allow)


def environment(env: Mapping[str, str]) -> dict[str, Any]:
    """The ``[server]`` settings ``env`` sets: ``WASM_RUNNER_<KEY>`` for every field that declares
    how its variable reads, and ``WASM_RUNNER_CLUSTER_SECRET_FILE``. The one place that turns the
    server's variables into settings (with ``load_config``'s ``CONFIG``, ``API_KEYS``, ``DATA_DIR``)."""
    out: dict[str, Any] = {}
    for f in _flat_fields():
        read: FromText | None = f.metadata.get("env")
        variable = ENV_PREFIX + f.name.upper()
        if read is None or variable not in env:
            continue
        if read is _on_off or env[variable]:  # an empty variable sets nothing (on/off: an error)
            out[f.name] = read(variable, env[variable])
    if env.get(ENV_PREFIX + "CLUSTER_SECRET_FILE"):
        out["cluster_secret_file"] = env[ENV_PREFIX + "CLUSTER_SECRET_FILE"]
    return out


def _env_keys(raw: str) -> list[ApiKey]:
    keys = []
    for item in filter(None, (p.strip() for p in raw.split(","))):
        name, sep, key = item.partition(":")
        if not sep or not name or not key:
            raise ConfigError("WASM_RUNNER_API_KEYS must look like name:key,name:key")
        keys.append(ApiKey(name=name, key_sha256=hash_key(key)))
    return keys


def _read_secret(path: Path, setting: str = "cluster_secret_file") -> str:
    """A secret from ``path`` (surrounding whitespace dropped); its text is never put into an
    error message."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ConfigError(f"cannot read {setting} {path}: {reason}") from None


def load_config(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> ServerConfig:
    """Settings from the TOML file at ``path`` (or ``$WASM_RUNNER_CONFIG``), then the environment,
    then keyword ``overrides`` (the CLI's flags). Raises ``ConfigError`` with a plain message."""
    env = variables() if env is None else env
    path = path or env.get(ENV_PREFIX + "CONFIG") or None
    doc: dict[str, Any] = {}
    if path:
        try:
            doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config {path} is not valid TOML: {exc}") from None
    unknown_tables = set(doc) - {"server", "profiles", "api_keys", "functions", "lti", "network"}
    if unknown_tables:
        raise ConfigError(f"unknown config table(s): {sorted(unknown_tables)}")

    server = dict(doc.get("server", {}))
    if "cluster_secret" in server:
        raise ConfigError(
            "[server] cluster_secret is not read from the config file: put the secret in a file "
            "named by cluster_secret_file, or in WASM_RUNNER_CLUSTER_SECRET"
        )
    unknown = set(server) - server_keys()
    if unknown:
        raise ConfigError(f"unknown [server] setting(s): {sorted(unknown)}")
    server.update(environment(env))
    server.update({k: v for k, v in overrides.items() if v is not None})

    profiles = dict(DEFAULT_PROFILES)
    if env.get(ENV_PREFIX + "DATA_DIR"):
        profiles["analyst"] = replace(profiles["analyst"], data_dir=Path(env[ENV_PREFIX + "DATA_DIR"]))
    for name, table in doc.get("profiles", {}).items():
        profiles[name] = _profile_from(name, table, profiles.get(name))

    keys = [_key_from(e) for e in doc.get("api_keys", [])]
    if env.get(ENV_PREFIX + "API_KEYS"):
        keys += _env_keys(env[ENV_PREFIX + "API_KEYS"])

    for tuple_field in ("cors_origins", "runtimes", "allowed_hosts"):
        if tuple_field in server:
            server[tuple_field] = tuple(server[tuple_field])
    if server.get("audit_log"):
        server["audit_log"] = Path(server["audit_log"])
    if server.get("exercises_dir"):
        server["exercises_dir"] = Path(server["exercises_dir"])
    if server.get("result_key_file"):
        server["result_key_file"] = Path(server["result_key_file"])
    if server.get("webhook_outbox_dir"):
        server["webhook_outbox_dir"] = Path(server["webhook_outbox_dir"])
    secret_file = server.pop("cluster_secret_file", None)
    if secret_file and not server.get("cluster_secret"):
        server["cluster_secret"] = _read_secret(Path(secret_file))
    try:  # host functions the operator declares (docs/host-functions.md#the-http-service-and-mcp)
        functions = functions_from(doc.get("functions", {}))
        network = network_from(doc.get("network", {}))  # docs/security.md, "Network"
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:  # LTI 1.3 platforms (wasm_runner.lti.registration, docs/lms.md)
        lti = LtiSettings.from_table(dict(doc.get("lti", {})))
    except (ValueError, TypeError) as exc:
        raise ConfigError(str(exc)) from None
    try:
        return ServerConfig.from_keys(api_keys=tuple(keys), profiles=profiles, functions=functions, lti=lti, network=network,
                                      **server)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
