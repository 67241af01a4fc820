"""What a setting's value must be (the rules each section checks when it is made), the constants
the sections share, and how a ``WASM_RUNNER_*`` variable's text is read."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from limits import parse as parse_rate

from ..environment import PREFIX
from ..errors import WasmRunnerError
from ..limits import Limits

__all__ = [
    "ConfigError", "KEY_MAX_CONCURRENT", "KEY_RATE", "LOOPBACK_HOSTS", "USER_MAX_CONCURRENT",
    "USER_RATE", "is_loopback",
]


Rule = Callable[[str, Any], None]  # (setting, value): raises ConfigError when the value is wrong
FromText = Callable[[str, str], Any]  # (variable, text) -> value, for a WASM_RUNNER_* variable

RUNTIMES = ("default", "small")
MIN_SECRET_CHARS = 32  # the cluster secret: at least this many characters (e.g. openssl rand -hex 16)
REDIS_SCHEMES = ("redis", "rediss", "unix")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
ENV_PREFIX = PREFIX

# A key's caps fit a class of 30 students on one key (a platform's key, or one client address
# under --no-auth); each student's share inside them is the per-user caps (http/users.py).
KEY_RATE = "600/minute"
KEY_MAX_CONCURRENT = 32
USER_RATE = "60/minute"
USER_MAX_CONCURRENT = 2
PROFILE_IMAGE = "datascience"  # a server profile's image unless it names one


class ConfigError(WasmRunnerError, ValueError):
    """The TOML file or an environment variable holds a setting the server cannot use."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address to listen on) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- rules: what a setting's value must be --------------------------------------------------------
def whole(minimum: int) -> Rule:
    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{name} must be a whole number of at least {minimum}, got {value!r}")

    return check


def whole_between(minimum: int, maximum: int) -> Rule:
    def check(name: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            raise ConfigError(f"{name} must be a whole number from {minimum} to {maximum}, got {value!r}")

    return check


def seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ConfigError(f"{name} must be a number of seconds above 0, got {value!r}")


def seconds_or_none(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ConfigError(f"{name} must be a number of seconds of at least 0, got {value!r}")


def fraction(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigError(f"{name} must be a fraction above 0 and at most 1, got {value!r}")


def rate(name: str, value: Any) -> None:
    try:
        parse_rate(value)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{name}: rate {value!r} is not like '120/minute' ({exc})") from None


def host_names(name: str, value: Any) -> None:
    if not isinstance(value, tuple) or not all(isinstance(h, str) and h.strip() for h in value):
        raise ConfigError(f"{name} must be a list of host names, got {value!r}")


def limits_in_range(name: str, value: Any) -> None:
    if not isinstance(value, Limits):
        raise ConfigError(f"{name} must be a Limits, got {value!r}")
    value.validate()  # InvalidLimits says which limit is out of its range


def one_of(*choices: str) -> Rule:
    def check(name: str, value: Any) -> None:
        if value not in choices:
            raise ConfigError(f"{name} must be {' or '.join(map(repr, choices))}, got {value!r}")

    return check


# -- reading a WASM_RUNNER_* variable -------------------------------------------------------------
def _int(variable: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{variable} must be a whole number, got {text!r}") from None


def _text(variable: str, text: str) -> str:
    return text


def _names(variable: str, text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _on_off(variable: str, text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "on", "yes"):
        return True
    if low in ("0", "false", "off", "no"):
        return False
    raise ConfigError(f"{variable} must be on or off, got {text!r}")


def rule(check: Rule | None = None, env: FromText | None = None) -> dict[str, Any]:
    """A field's metadata: its ``check``, and how ``WASM_RUNNER_<FIELD>`` is read (None: never)."""
    return {"rule": check, "env": env}


class _Section:
    """Checks every field by its rule when made (``ConfigError`` with a plain message)."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]  # every subclass is a dataclass
            check = f.metadata.get("rule")
            if check is not None:
                check(f.name, getattr(self, f.name))


