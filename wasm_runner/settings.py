"""The server's settings, in small frozen sections, from a TOML file and ``WASM_RUNNER_*`` variables.

Each section is a frozen dataclass; its fields are the ``[server]`` keys of the TOML file, and each
field declares its rule beside its default (``rule(whole(1))``: a whole number of at least 1), so a
new setting is one line in one section:

- ``AdmissionSettings`` (``config.admission``): the running cap, the queue, the memory budget, runs
  waiting for input, and the caps of callers without a key (auth off).
- ``SessionSettings`` (``config.sessions``): how many sessions, how long they live, forks and snapshots.
- ``DownloadSettings`` (``config.downloads``): links to files a run wrote: how long, how many bytes, per key.
- ``ClientBounds`` (``config.client_bounds``): what a hostile client may send (docs/security.md, "Hostile clients").
- ``ScaleOutSettings`` (``config.scale_out``): several replicas sharing Redis (docs/configuration.md,
  "Several replicas").
- ``ToolSettings`` (not part of ``ServerConfig``): the MCP tools' limits and caps (``wasm-runner
  mcp``'s flags; over HTTP ``ServerConfig.tools()``, from the server's profile and caps).

``ServerConfig`` holds the five sections as fields (``config.admission``, ``config.sessions``,
``config.downloads``, ``config.client_bounds``, ``config.scale_out``: read a setting through its
section, ``config.admission.max_running``; there is no flat alias) beside its own fields: who may
call (``auth``, ``api_keys``), the policy profiles (``execution.Policy`` values), the default
profile, the runtimes, declared host functions, CORS origins, the audit log, the exercises and the
quick tier. The file and the environment stay flat: every ``[server]`` key is a field of one
section or of ``ServerConfig`` itself (``SECTION_OF`` maps a key to its section), so an error names
the key the operator wrote. ``ServerConfig.from_keys(max_running=4, auth=False)`` builds a config
from flat keys, ``config.with_(max_running=8)`` is a changed copy (both put each key in its
section). ``load_config`` reads the TOML file, then the environment (``environment``: the server's
``WASM_RUNNER_*`` variables, each named after its key, from ``wasm_runner.environment.variables()``,
the one reader of the process's variables), then the CLI's flags. This module is the settings' one
import path.

A profile names the limits a run gets (``student``: 2 s CPU, 64 MB; ``analyst``: 30 s CPU, 1 GB and
a read-only data directory). A request may tighten its profile's limits, never loosen them.

TOML layout (every table and key optional)::

    [server]
    auth = true                       # false only for local use (or `wasm-runner serve --no-auth`)
    default_profile = "student"
    max_running = 2                   # guests running at once, all tenants together
    max_queue = 64                    # requests waiting for a slot; more get 429 + Retry-After
    memory_budget_mb = 4096           # memory running guests and live sessions may hold together
                                      # (default: half the host's or container's memory)
    max_waiting_runs = 256            # runs waiting for input() (no run slot; memory still held)
    max_waiting_runs_per_key = 128    # ...of them, per key
    cors_origins = ["https://course.example"]
    audit_log = "audit.jsonl"
    audit_code = "hash"               # "hash" (sha256 only) or "full" (keep the code text)
    allowed_hosts = ["runner.example.org"]  # Host names served (default: loopback names)
    tenant_memory_share = 0.6         # share of memory_budget_mb one key may hold at once
    # ...and the client-facing bounds of docs/security.md ("Hostile clients"): max_header_bytes,
    # header_timeout_seconds, body_timeout_seconds, body_idle_seconds, max_connections,
    # max_connections_per_address, ws_first_message_bytes, failed_auth_rate, ...

    [profiles.student]
    cpu_seconds = 2
    memory_mb = 64

    [[api_keys]]
    name = "course-site"
    key_sha256 = "…"                  # or key = "…" (plain text: tests only, not production)
    profiles = ["student"]
    rate = "600/minute"               # the key's caps: a class of 30 on one key
    max_concurrent = 32
    user_rate = "60/minute"           # each user id's share inside them (X-Wasm-Runner-User)
    user_max_concurrent = 2
    user_token_secret_file = "…"      # signs user tokens for browser pages (http/users.py)

    [functions.lookup_order]          # a host function (host_functions/declared.py)
    description = "An order by its id."
    parameters = { type = "object", properties = { order_id = { type = "integer" } } }
    url = "https://shop.example/api/tools/lookup_order"   # or entry_point = "pkg.module:fn"
    secret_file = "…"                 # the endpoint's own secret; signs every call
    keys = ["course-site"]            # who may use it; profiles = [...] narrows it

Environment (overrides the file): ``WASM_RUNNER_CONFIG`` (path of the TOML file),
``WASM_RUNNER_AUTH`` (``on``/``off``), ``WASM_RUNNER_API_KEYS`` (``name:key,name:key``),
``WASM_RUNNER_CORS_ORIGINS`` (comma-separated), ``WASM_RUNNER_AUDIT_LOG``,
``WASM_RUNNER_AUDIT_CODE``,
``WASM_RUNNER_MAX_RUNNING``, ``WASM_RUNNER_MAX_QUEUE``, ``WASM_RUNNER_MEMORY_BUDGET_MB``,
``WASM_RUNNER_MAX_WAITING_RUNS``, ``WASM_RUNNER_MAX_WAITING_RUNS_PER_KEY``,
``WASM_RUNNER_DEFAULT_PROFILE``, ``WASM_RUNNER_EXERCISES_DIR`` (``[server] exercises_dir``: the
exercises served at ``/api/exercises``), ``WASM_RUNNER_DATA_DIR`` (the ``analyst`` profile's data
directory), ``WASM_RUNNER_ALLOWED_HOSTS`` (comma-separated).

Scale-out: ``[server] redis_url`` / ``WASM_RUNNER_REDIS_URL`` turns shared state on;
``advertise_url`` / ``WASM_RUNNER_ADVERTISE_URL`` is this replica's internal base URL; the
replicas' shared secret comes from ``WASM_RUNNER_CLUSTER_SECRET`` or the file named by ``[server]
cluster_secret_file`` / ``WASM_RUNNER_CLUSTER_SECRET_FILE`` (never from the TOML file itself,
never shown in ``repr``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from limits import parse as parse_rate

from .environment import PREFIX, variables
from .errors import WasmRunnerError
from .execution import Policy
from .host_functions.declared import DeclaredFunction, functions_from
from .host_memory import default_memory_budget_mb
from .images import RESIDENT_MB, image_names
from .inputs import MAX_SOURCE_BYTES
from .limits import InvalidLimits, Limits

__all__ = [
    "AdmissionSettings", "ApiKey", "ClientBounds", "ConfigError", "DEFAULT_PROFILES", "DownloadSettings",
    "DEFAULT_TOOL_LIMITS", "KEY_MAX_CONCURRENT", "KEY_RATE", "LOOPBACK_HOSTS", "Profile", "ScaleOutSettings",
    "SECTION_OF", "SECTIONS", "ServerConfig", "SessionSettings", "ToolSettings", "USER_MAX_CONCURRENT", "USER_RATE",
    "environment", "hash_key", "is_loopback", "load_config", "server_keys",
]  # fmt: skip

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


# -- the sections ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class AdmissionSettings(_Section):
    """Admission (``wasm_runner.admission``): runs at once, the queue, the memory budget, runs waiting for
    input, each key's shares, and the caps of callers without a key (auth off: per address)."""

    max_running: int = field(default=2, metadata=rule(whole(1), _int))
    # a class on one key (or one address) takes half: 32 places (16 refused a class's burst: 429
    # tenant_queue while two endless loops held both slots, benchmarks/classroom.py)
    max_queue: int = field(default=64, metadata=rule(whole(0), _int))
    queue_timeout_seconds: float = field(default=30.0, metadata=rule(seconds))
    # half the memory of the host (or its container), at least 1024 (host_memory.py): a class of
    # 30 each holding a session (98 MB with the default profile) did not fit in a fixed 2048
    memory_budget_mb: int = field(default_factory=default_memory_budget_mb, metadata=rule(whole(1), _int))
    # runs parked while they wait for interactive input (no run slot, memory held), all / per key
    max_waiting_runs: int = field(default=256, metadata=rule(whole(1), _int))
    max_waiting_runs_per_key: int = field(default=128, metadata=rule(whole(1), _int))
    tenant_memory_share: float = field(default=0.6, metadata=rule(fraction))  # of memory_budget_mb
    tenant_queue_share: float = field(default=0.5, metadata=rule(fraction))  # of max_queue places
    anonymous_rate: str = field(default=KEY_RATE, metadata=rule(rate))  # per client address, auth off
    anonymous_max_concurrent: int = field(default=KEY_MAX_CONCURRENT, metadata=rule(whole(1)))
    anonymous_user_rate: str = field(default=USER_RATE, metadata=rule(rate))  # per user id, auth off
    anonymous_user_max_concurrent: int = field(default=USER_MAX_CONCURRENT, metadata=rule(whole(1)))

    @property
    def tenant_memory_mb(self) -> int:
        """Memory one tenant may hold at once (runs and sessions together)."""
        return max(1, int(self.memory_budget_mb * self.tenant_memory_share))

    @property
    def tenant_queue_places(self) -> int:
        """Queue places one tenant may hold at once."""
        return max(1, math.ceil(self.max_queue * self.tenant_queue_share))


@dataclass(frozen=True)
class SessionSettings(_Section):
    """Sessions (``sessions.SessionStore``): how many live ones in all, idle and lifetime expiry,
    and idle sessions paused to disk (``sessions.paused``; docs/configuration.md)."""

    max_sessions: int = field(default=64, metadata=rule(whole(1)))  # all keys' live ones (a class of 30 fits)
    session_idle_seconds: float = field(default=300.0, metadata=rule(seconds))
    session_max_lifetime_seconds: float = field(default=3600.0, metadata=rule(seconds))
    max_fork_copies: int = field(default=8, metadata=rule(whole_between(1, 64)))  # one fork's copies
    # a snapshot POST /api/sessions/resume takes, at most (its body's bound; sealing's is 512 MiB)
    max_snapshot_bytes: int = field(default=128 << 20, metadata=rule(whole_between(1 << 20, 512 << 20)))
    # a snapshot GET /api/sessions/{id}/snapshot gives resumes for this long (in its authenticated header)
    snapshot_expiry_seconds: float = field(default=7 * 86400.0, metadata=rule(seconds))
    # a session that can be saved is paused (its instance freed) after this many idle seconds; 0: never
    session_pause_seconds: float = field(default=120.0, metadata=rule(seconds_or_none))
    # ...and a paused session is kept this long after its last call
    session_paused_lifetime_seconds: float = field(default=86400.0, metadata=rule(seconds))
    # where paused sessions are kept (shared by replicas: one folder for all); default <cache>/paused-sessions
    snapshot_dir: str | None = field(default=None, metadata=rule(env=_text))
    snapshot_key_bytes: int = field(default=4 << 30, metadata=rule(whole(1), _int))  # disk per key
    # the most sessions of one key a replica keeps paused to make room for its new ones; more: 429
    session_paused_per_key: int = field(default=512, metadata=rule(whole(1)))


@dataclass(frozen=True)
class DownloadSettings(_Section):
    """Links to files a run wrote (``http.downloads``): how long, how many bytes, per key."""

    download_ttl_seconds: float = field(default=300.0, metadata=rule(seconds))
    download_store_bytes: int = field(default=256 << 20, metadata=rule(whole(1)))
    download_tenant_share: float = field(default=0.25, metadata=rule(fraction))  # of the store

    @property
    def download_tenant_bytes(self) -> int:
        """Bytes of download links one tenant may hold at once."""
        return max(1, int(self.download_store_bytes * self.download_tenant_share))


@dataclass(frozen=True)
class ClientBounds(_Section):
    """What a client may send (docs/security.md, "Hostile clients": which bound stops which attack)."""

    max_body_bytes: int = field(default=12 << 20, metadata=rule(whole(1)))
    max_files_in: int = field(default=32, metadata=rule(whole(1)))
    max_file_in_bytes: int = field(default=4 << 20, metadata=rule(whole(1)))
    # Host header values served; "*" = any
    allowed_hosts: tuple[str, ...] = field(default=LOOPBACK_HOSTS, metadata=rule(host_names, _names))
    # request line + headers; more: 400 and the socket closes
    max_header_bytes: int = field(default=16 << 10, metadata=rule(whole(1)))
    header_timeout_seconds: float = field(default=10.0, metadata=rule(seconds))  # request line, headers
    body_timeout_seconds: float = field(default=60.0, metadata=rule(seconds))  # the whole body; then 408
    body_idle_seconds: float = field(default=10.0, metadata=rule(seconds))  # longest pause in a body
    keep_alive_seconds: float = field(default=5.0, metadata=rule(seconds))  # idle kept-alive connection
    max_connections: int = field(default=2048, metadata=rule(whole(1)))  # all addresses; more: 503
    # open connections from one address (IPv6: per /64)
    max_connections_per_address: int = field(default=64, metadata=rule(whole(1)))
    # a WebSocket's first message before authentication
    ws_first_message_bytes: int = field(default=64 << 10, metadata=rule(whole(1)))
    failed_auth_rate: str = field(default="30/minute", metadata=rule(rate))  # 401s per address; then 429
    max_json_structure: int = field(default=65536, metadata=rule(whole(1)))  # JSON bytes outside strings
    max_json_depth: int = field(default=32, metadata=rule(whole(1)))


@dataclass(frozen=True)
class ScaleOutSettings(_Section):
    """Several replicas sharing state through Redis (docs/configuration.md, "Several replicas");
    without ``redis_url`` all state is local."""

    # redis://[:password@]host:port/db; shared rate limits, leases, directory (may hold a password)
    redis_url: str | None = field(default=None, repr=False, metadata=rule(env=_text))
    # this replica's internal base URL, e.g. http://10.0.0.5:8000
    advertise_url: str | None = field(default=None, metadata=rule(env=_text))
    # the replicas' internal hop (WASM_RUNNER_CLUSTER_SECRET, or cluster_secret_file; never TOML)
    cluster_secret: str | None = field(default=None, repr=False, metadata=rule(env=_text))
    redis_timeout_seconds: float = field(default=1.0, metadata=rule(seconds))  # every Redis call
    lease_ttl_seconds: float = field(default=10.0, metadata=rule(seconds))  # a lease unrefreshed
    # on SIGTERM, in-flight runs get this long before they are cancelled
    drain_seconds: float = field(default=30.0, metadata=rule(seconds_or_none))

    def check(self) -> None:
        super().check()
        if self.redis_url is not None:
            if not isinstance(self.redis_url, str) or urlsplit(self.redis_url).scheme not in REDIS_SCHEMES:
                shown = urlsplit(str(self.redis_url)).scheme or "no scheme"  # never a password
                raise ConfigError(
                    "redis_url must look like redis://host:6379/0 (or rediss://, unix://), got "
                    f"a URL with {shown!r}"
                )
            if not self.cluster_secret:
                raise ConfigError(
                    "redis_url is set but no cluster secret is: the replicas authenticate their "
                    "internal calls with it. Set WASM_RUNNER_CLUSTER_SECRET (e.g. $(openssl rand "
                    "-hex 32)) or [server] cluster_secret_file, the same on every replica"
                )
        if self.cluster_secret is not None and (
            not isinstance(self.cluster_secret, str) or len(self.cluster_secret) < MIN_SECRET_CHARS
        ):
            raise ConfigError(
                f"the cluster secret must be at least {MIN_SECRET_CHARS} characters "
                "(e.g. openssl rand -hex 32)"
            )
        if self.advertise_url is not None:
            parts = urlsplit(self.advertise_url) if isinstance(self.advertise_url, str) else None
            if (
                parts is None
                or parts.scheme not in ("http", "https")
                or not parts.hostname
                or parts.path not in ("", "/")
                or parts.query
                or parts.fragment
                or parts.username
            ):
                raise ConfigError(
                    "advertise_url must be a base URL like http://10.0.0.5:8000 (no path), got "
                    f"{self.advertise_url!r}"
                )

    @property
    def shared(self) -> bool:
        """Whether state is shared between replicas through Redis (``redis_url`` set)."""
        return self.redis_url is not None


# MCP tool calls, per call. Importing pandas alone costs about 4.5 s of metered CPU, so chat cells
# need more room than a tutor's exercise; the memory and output caps stay at the core's defaults.
DEFAULT_TOOL_LIMITS = Limits(cpu_seconds=20.0, wall_seconds=60.0)


@dataclass(frozen=True)
class ToolSettings(_Section):
    """The MCP tools (``mcp.server``): the limits and runtime of a call, the caps of the tools'
    sessions, uploads and code. Over stdio ``wasm-runner mcp``'s flags set them; over HTTP
    ``ServerConfig.tools(profile)`` takes them from the server's profile and caps (a field's name
    is its keyword; ``limits=None`` is ``DEFAULT_TOOL_LIMITS``)."""

    limits: Limits = field(default=DEFAULT_TOOL_LIMITS, metadata=rule(limits_in_range))
    runtime: str = field(default="default", metadata=rule(one_of(*RUNTIMES)))
    max_sessions: int = field(default=16, metadata=rule(whole(1)))
    max_sessions_per_owner: int = field(default=4, metadata=rule(whole(1)))
    idle_seconds: float = field(default=900.0, metadata=rule(seconds))
    max_lifetime_seconds: float = field(default=24 * 3600.0, metadata=rule(seconds))
    max_upload_bytes: int = field(default=16 << 20, metadata=rule(whole(1)))
    max_code_bytes: int = field(default=MAX_SOURCE_BYTES, metadata=rule(whole(1)))

    def __post_init__(self) -> None:
        if self.limits is None:  # the old ToolConfig(limits=None): the tools' defaults
            object.__setattr__(self, "limits", DEFAULT_TOOL_LIMITS)
        super().__post_init__()


# -- keys and profiles ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ApiKey:
    """One tenant: the sha256 of its key, the profiles it may use, its rate and concurrency caps,
    and the caps of each of its users (``http/users.py``: a user id sent with a request)."""

    name: str
    key_sha256: str
    profiles: tuple[str, ...] = ()  # empty: every profile
    rate: str = KEY_RATE
    max_concurrent: int = KEY_MAX_CONCURRENT
    user_rate: str = USER_RATE  # per user id of this key
    user_max_concurrent: int = USER_MAX_CONCURRENT
    # the secret this key's platform signs user tokens with (browser pages), or None
    user_token_secret: str | None = field(default=None, repr=False)
    user_token_required: bool = False  # every request must carry a signed user token

    def may_use(self, profile: str) -> bool:
        return not self.profiles or profile in self.profiles

    def check(self, profiles: Mapping[str, Policy]) -> None:
        where = f"api key {self.name!r}"
        rate(where, self.rate)
        rate(f"{where} user_rate", self.user_rate)
        if isinstance(self.user_max_concurrent, bool) or not isinstance(self.user_max_concurrent, int) \
                or self.user_max_concurrent < 1:
            raise ConfigError(f"{where}: user_max_concurrent must be a whole "
                              f"number of at least 1, got {self.user_max_concurrent!r}")
        if self.user_token_secret is not None and len(self.user_token_secret) < MIN_SECRET_CHARS:
            raise ConfigError(f"{where}: user_token_secret must be at least "
                              f"{MIN_SECRET_CHARS} characters (e.g. openssl rand -hex 32)")
        if self.user_token_required and self.user_token_secret is None:
            raise ConfigError(f"{where}: user_token_required needs a "
                              "user_token_secret (or user_token_secret_file)")
        unknown = [p for p in self.profiles if p not in profiles]
        if unknown:
            raise ConfigError(f"{where} names unknown profile(s): {unknown}")


def Profile(name: str, limits: Limits, **settings: Any) -> Policy:
    """A server profile, ``[profiles.NAME]``: an ``execution.Policy`` with the server's defaults
    (files written to ``/out`` come back; the ``datascience`` image)."""
    return Policy(name, limits, **{"files_out": True, "image": PROFILE_IMAGE, **settings})


DEFAULT_PROFILES: dict[str, Policy] = {
    "student": Profile(
        "student",
        Limits(cpu_seconds=2.0, wall_seconds=10.0, memory_mb=64, disk_mb=16.0, max_files=64),
    ),
    "analyst": Profile(
        "analyst",
        Limits(cpu_seconds=30.0, wall_seconds=120.0, memory_mb=1024, disk_mb=256.0),
        display=True,
        pool_size=1,
        preload=("numpy", "pandas", "matplotlib.pyplot"),
    ),
}


# -- the whole server -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ServerConfig(_Section):
    """Everything the HTTP app needs to know: who may call, the profiles, the audit log and the
    server's own switches (its fields), and the five sections (``admission``, ``sessions``,
    ``downloads``, ``client_bounds``, ``scale_out``), read as ``config.admission.max_running``.
    Built by ``load_config``, or directly: ``ServerConfig(auth=False, admission=AdmissionSettings(
    max_running=4))``, or from the ``[server]`` file's flat keys: ``ServerConfig.from_keys(auth=False,
    max_running=4)``; ``config.with_(max_running=8)`` is a copy with settings changed."""

    auth: bool = field(default=True, metadata=rule(env=_on_off))
    api_keys: tuple[ApiKey, ...] = ()
    profiles: Mapping[str, Policy] = field(default_factory=lambda: dict(DEFAULT_PROFILES))
    # host functions declared by the operator (``[functions.NAME]``, host_functions/declared.py)
    functions: Mapping[str, DeclaredFunction] = field(default_factory=dict)
    default_profile: str = field(default="student", metadata=rule(env=_text))
    runtimes: tuple[str, ...] = RUNTIMES
    cors_origins: tuple[str, ...] = field(default=(), metadata=rule(env=_names))  # browser origins
    audit_log: Path | None = field(default=None, metadata=rule(env=_text))
    audit_code: Literal["hash", "full"] = field(default="hash", metadata=rule(one_of("hash", "full"), _text))
    # exercises (wasm_runner.exercises): the folder served at /api/exercises, or None
    exercises_dir: Path | None = field(default=None, metadata=rule(env=_text))
    # a first start's quick tier (sandbox/default.py): Winch's code answers while Cranelift compiles;
    # off: server-tier runs wait for Cranelift's module (docs/security.md)
    quick_tier: bool = field(default=True, metadata=rule(env=_on_off))
    # -- the sections (SECTIONS: each one's fields are [server] keys, flat in the file) ---------
    admission: AdmissionSettings = field(default_factory=AdmissionSettings)
    sessions: SessionSettings = field(default_factory=SessionSettings)
    downloads: DownloadSettings = field(default_factory=DownloadSettings)
    client_bounds: ClientBounds = field(default_factory=ClientBounds)
    scale_out: ScaleOutSettings = field(default_factory=ScaleOutSettings)

    @classmethod
    def from_keys(cls, **keys: Any) -> ServerConfig:
        """A config from ``[server]``'s flat keys (``max_running=4``), each put into its section,
        with the config's own fields (``auth``, ``api_keys``, ``profiles`` ...) as they are. An
        unknown key raises ``TypeError`` (``load_config`` names unknown keys first)."""
        own, parts = _by_section(keys)
        for name, values in parts.items():
            base = own.get(name)
            own[name] = replace(base, **values) if base is not None else SECTIONS[name](**values)
        return cls(**own)

    def with_(self, **changes: Any) -> ServerConfig:
        """This config with ``changes`` (flat ``[server]`` keys or own fields) made; checked again."""
        own, parts = _by_section(changes)
        for name, values in parts.items():
            own[name] = replace(own.get(name, getattr(self, name)), **values)
        return replace(self, **own)

    def check(self) -> None:
        """Raise ``ConfigError`` when a setting is out of its range or settings contradict each other
        (each section checked its own fields when it was made)."""
        for name, kind in SECTIONS.items():
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"{name} must be a {kind.__name__}, got {getattr(self, name)!r}")
        if self.default_profile not in self.profiles:
            raise ConfigError(
                f"default_profile {self.default_profile!r} is not a profile "
                f"(profiles: {', '.join(self.profiles)})"
            )
        super().check()
        for profile in self.profiles.values():
            self._check_profile(profile)
        for key in self.api_keys:
            key.check(self.profiles)

    def _check_profile(self, profile: Policy) -> None:
        admission = self.admission
        if profile.limits.memory_mb > admission.memory_budget_mb:
            raise ConfigError(
                f"profile {profile.name!r} allows {profile.limits.memory_mb} MB, more than "
                f"memory_budget_mb={admission.memory_budget_mb}"
            )
        held = profile.limits.memory_mb + (
            RESIDENT_MB.get(profile.image or "", 0) if profile.runtime == "default" else 0
        )  # what a session of this profile holds in the budget (admission.resident_mb)
        if held > admission.tenant_memory_mb:
            raise ConfigError(
                f"profile {profile.name!r} holds {held} MB (memory_mb and its image's "
                "resident pages), more than one "
                f"key's share of the memory budget ({admission.tenant_memory_mb} MB = "
                f"tenant_memory_share {admission.tenant_memory_share:g} of memory_budget_mb "
                f"{admission.memory_budget_mb}); raise memory_budget_mb or tenant_memory_share"
            )
        if profile.runtime not in RUNTIMES:
            raise ConfigError(f"profile {profile.name!r}: unknown runtime {profile.runtime!r}")
        if profile.image not in image_names():
            raise ConfigError(f"profile {profile.name!r}: unknown image {profile.image!r} "
                              f"(images: {', '.join(image_names())})")

    def tools(self, profile: str | None = None) -> ToolSettings:
        """The MCP tools' settings on this server (``mcp.http``): ``profile``'s limits and runtime
        (default: the default profile), the server's session cap and idle expiry, and its
        ``max_file_in_bytes`` for uploads."""
        chosen = self.profile(profile)
        return ToolSettings(
            limits=chosen.limits,
            runtime=chosen.runtime,
            max_sessions=self.sessions.max_sessions,
            idle_seconds=self.sessions.session_idle_seconds,
            max_upload_bytes=self.client_bounds.max_file_in_bytes,
        )

    @property
    def locked(self) -> bool:
        """Auth on but no key configured: every API call is refused (``serve`` will not start)."""
        return self.auth and not self.api_keys

    def profile(self, name: str | None) -> Policy:
        return self.profiles[name or self.default_profile]


# ServerConfig's sections by field name; each section's fields are [server] keys, flat in the file
SECTIONS: dict[str, type[Any]] = {
    "admission": AdmissionSettings,
    "sessions": SessionSettings,
    "downloads": DownloadSettings,
    "client_bounds": ClientBounds,
    "scale_out": ScaleOutSettings,
}
# every [server] key a section holds -> that section's field name in ServerConfig
SECTION_OF: dict[str, str] = {f.name: name for name, kind in SECTIONS.items() for f in fields(kind)}


def _own_fields() -> list[Field[Any]]:
    """ServerConfig's fields that are not sections."""
    return [f for f in fields(ServerConfig) if f.name not in SECTIONS]


def _flat_fields() -> list[Field[Any]]:
    """Every setting as the file and the environment name it: ServerConfig's own fields, then
    each section's fields."""
    return _own_fields() + [f for kind in SECTIONS.values() for f in fields(kind)]


def _by_section(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``settings`` (flat keys) split: ServerConfig's own (and whole sections), and each section's."""
    own: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {}
    for key, value in settings.items():
        if key in SECTION_OF:
            parts.setdefault(SECTION_OF[key], {})[key] = value
        else:
            own[key] = value
    return own, parts


def hash_key(key: str) -> str:
    """The sha256 hex digest under which an API key is stored and compared."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def server_keys() -> set[str]:
    """The keys of ``[server]``: the settings' fields (keys, profiles and functions have tables of
    their own; the cluster secret is never read from the file, only the file naming it)."""
    return {f.name for f in _flat_fields()} - {"api_keys", "profiles", "functions", "cluster_secret"} | {
        "cluster_secret_file"
    }


# -- reading ----------------------------------------------------------------------------------
_PROFILE_KEYS = {"data_dir", "files_out", "runtime", "display", "pool_size", "preload", "image"}
_KEY_KEYS = {
    "name", "key", "key_sha256", "profiles", "rate", "max_concurrent", "user_rate",
    "user_max_concurrent", "user_token_secret", "user_token_secret_file", "user_token_required",
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
    )


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
    unknown_tables = set(doc) - {"server", "profiles", "api_keys", "functions"}
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
    secret_file = server.pop("cluster_secret_file", None)
    if secret_file and not server.get("cluster_secret"):
        server["cluster_secret"] = _read_secret(Path(secret_file))
    try:  # host functions the operator declares (docs/host-functions.md#the-http-service-and-mcp)
        functions = functions_from(doc.get("functions", {}))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        return ServerConfig.from_keys(api_keys=tuple(keys), profiles=profiles, functions=functions, **server)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
