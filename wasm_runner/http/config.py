"""Server settings and policy profiles, from a TOML file and ``WASM_RUNNER_*`` environment
variables.

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
    user_token_secret_file = "…"      # signs user tokens for browser pages (users.py)

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

Scale-out (docs/configuration.md, "Several replicas"): ``[server] redis_url`` /
``WASM_RUNNER_REDIS_URL`` turns shared state on; ``advertise_url`` / ``WASM_RUNNER_ADVERTISE_URL`` is
this replica's internal base URL; the replicas' shared secret comes from
``WASM_RUNNER_CLUSTER_SECRET`` or the file named by ``[server] cluster_secret_file`` /
``WASM_RUNNER_CLUSTER_SECRET_FILE`` (never from the TOML file itself, never shown in ``repr``).
"""

from __future__ import annotations

import hashlib
import math
import ipaddress
import os
import tomllib
from urllib.parse import urlsplit
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from limits import parse as parse_rate

from ..errors import WasmRunnerError
from ..execution import Policy
from ..host_functions.declared import DeclaredFunction, functions_from
from ..host_memory import default_memory_budget_mb
from ..images import RESIDENT_MB, image_names
from ..limits import InvalidLimits, Limits

__all__ = [
    "ConfigError", "Profile", "ApiKey", "ServerConfig", "load_config", "DEFAULT_PROFILES", "LOOPBACK_HOSTS",
    "is_loopback",
]

RUNTIMES = ("default", "small")
MIN_SECRET_CHARS = 32  # the cluster secret: at least this many characters (e.g. openssl rand -hex 16)
REDIS_SCHEMES = ("redis", "rediss", "unix")
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address to listen on) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ConfigError(WasmRunnerError, ValueError):
    """The TOML file or an environment variable holds a setting the server cannot use."""


PROFILE_IMAGE = "datascience"  # a server profile's image unless it names one


def Profile(name: str, limits: Limits, **settings: Any) -> Policy:
    """A server profile, ``[profiles.NAME]``: an ``execution.Policy`` (the one policy record) with
    the server's defaults: files written to ``/out`` come back, the ``datascience`` image."""
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


# A key's caps fit a class of 30 students on one key (a platform's key, or one client address
# under --no-auth); each student's share inside them is the per-user caps (users.py).
KEY_RATE = "600/minute"
KEY_MAX_CONCURRENT = 32
USER_RATE = "60/minute"
USER_MAX_CONCURRENT = 2


@dataclass(frozen=True)
class ApiKey:
    """One tenant: the sha256 of its key, the profiles it may use, its rate and concurrency caps,
    and the caps of each of its users (``users.py``: a user id sent with a request)."""

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


@dataclass(frozen=True)
class ServerConfig:
    """Everything the HTTP app needs to know; built by ``load_config`` or directly in tests."""

    auth: bool = True
    api_keys: tuple[ApiKey, ...] = ()
    profiles: Mapping[str, Policy] = field(default_factory=lambda: dict(DEFAULT_PROFILES))
    # host functions declared by the operator (``[functions.NAME]``, host_functions/declared.py)
    functions: Mapping[str, DeclaredFunction] = field(default_factory=dict)
    default_profile: str = "student"
    runtimes: tuple[str, ...] = RUNTIMES
    # admission
    max_running: int = 2
    # a class on one key (or one address) takes half: 32 places (16 refused a class's burst: 429
    # tenant_queue while two endless loops held both slots, benchmarks/classroom.py)
    max_queue: int = 64
    queue_timeout_seconds: float = 30.0
    # half the memory of the host (or its container), at least 1024 (host_memory.py): a class of
    # 30 each holding a session (98 MB with the default profile) did not fit in a fixed 2048
    memory_budget_mb: int = field(default_factory=default_memory_budget_mb)
    # runs parked while they wait for interactive input (no run slot, memory held), all / per key
    max_waiting_runs: int = 256
    max_waiting_runs_per_key: int = 128
    anonymous_rate: str = KEY_RATE  # per client address, when auth is off
    anonymous_max_concurrent: int = KEY_MAX_CONCURRENT
    anonymous_user_rate: str = USER_RATE  # per user id of one client address (auth off)
    anonymous_user_max_concurrent: int = USER_MAX_CONCURRENT
    # requests
    max_body_bytes: int = 12 << 20
    max_files_in: int = 32
    max_file_in_bytes: int = 4 << 20
    # sessions
    max_sessions: int = 64  # live sessions of all keys (a class of 30 each with one fits)
    session_idle_seconds: float = 300.0
    session_max_lifetime_seconds: float = 3600.0
    # downloads of files a run wrote
    download_ttl_seconds: float = 300.0
    download_store_bytes: int = 256 << 20
    # browser
    cors_origins: tuple[str, ...] = ()
    # audit
    audit_log: Path | None = None
    audit_code: Literal["hash", "full"] = "hash"
    # exercises (wasm_runner.exercises): the folder served at /api/exercises, or None
    exercises_dir: Path | None = None
    # hostile clients (docs/security.md): which setting bounds which attack
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS  # Host header values served; "*" = any
    max_header_bytes: int = 16 << 10  # request line + headers; more: 400 and the socket closes
    header_timeout_seconds: float = 10.0  # to send the request line and headers; then 408
    body_timeout_seconds: float = 60.0  # to send the whole body; then 408
    body_idle_seconds: float = 10.0  # longest pause inside a body; then 408
    keep_alive_seconds: float = 5.0  # an idle kept-alive connection is closed after this
    max_connections: int = 2048  # open connections, all addresses; more: 503 and closed
    max_connections_per_address: int = 64  # open connections from one address (IPv6: per /64)
    ws_first_message_bytes: int = 64 << 10  # a WebSocket's first message before authentication
    failed_auth_rate: str = "30/minute"  # 401s per address; then 429 without checking keys
    tenant_memory_share: float = 0.6  # of memory_budget_mb one tenant's sessions+runs may hold
    tenant_queue_share: float = 0.5  # of max_queue places one tenant may hold
    download_tenant_share: float = 0.25  # of download_store_bytes one tenant's links may hold
    max_json_structure: int = 65536  # JSON bytes outside strings (bounds element count, depth)
    max_json_depth: int = 32
    # scale-out (docs/configuration.md, "Several replicas"); without redis_url all state is local
    # redis://[:password@]host:port/db; shared rate limits, leases, directory (may hold a password)
    redis_url: str | None = field(default=None, repr=False)
    advertise_url: str | None = None  # this replica's internal base URL, e.g. http://10.0.0.5:8000
    cluster_secret: str | None = field(default=None, repr=False)  # the replicas' internal hop
    redis_timeout_seconds: float = 1.0  # bound of every Redis call (connect, read, write)
    lease_ttl_seconds: float = 10.0  # a lease (concurrency, open session) lives this long unrefreshed
    drain_seconds: float = 30.0  # on SIGTERM, in-flight runs get this long before they are cancelled

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ``ConfigError`` when settings contradict each other."""
        if self.default_profile not in self.profiles:
            raise ConfigError(
                f"default_profile {self.default_profile!r} is not a profile "
                f"(profiles: {', '.join(self.profiles)})"
            )
        for name, value in (
            ("max_running", self.max_running),
            ("max_sessions", self.max_sessions),
            ("memory_budget_mb", self.memory_budget_mb),
            ("max_body_bytes", self.max_body_bytes),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be a whole number of at least 1, got {value!r}")
        for name in ("queue_timeout_seconds", "session_idle_seconds",
                     "session_max_lifetime_seconds", "download_ttl_seconds",
                     "header_timeout_seconds", "body_timeout_seconds", "body_idle_seconds",
                     "keep_alive_seconds"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"{name} must be a number of seconds above 0, got {value!r}")
        for name in ("anonymous_max_concurrent", "anonymous_user_max_concurrent", "max_waiting_runs", "max_waiting_runs_per_key",
                     "max_files_in", "max_file_in_bytes",
                     "download_store_bytes", "max_header_bytes", "max_connections",
                     "max_connections_per_address", "ws_first_message_bytes",
                     "max_json_structure", "max_json_depth"):  # fmt: skip
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a whole number of at least 1, got {value!r}")
        if not isinstance(self.max_queue, int) or self.max_queue < 0:
            raise ConfigError(
                f"max_queue must be a whole number of at least 0, got {self.max_queue!r}"
            )
        for name in ("tenant_memory_share", "tenant_queue_share", "download_tenant_share"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ConfigError(f"{name} must be a fraction above 0 and at most 1, got {value!r}")
        if not isinstance(self.allowed_hosts, tuple) or not all(
            isinstance(h, str) and h.strip() for h in self.allowed_hosts
        ):
            raise ConfigError(f"allowed_hosts must be a list of host names, got {self.allowed_hosts!r}")
        for profile in self.profiles.values():
            if profile.limits.memory_mb > self.memory_budget_mb:
                raise ConfigError(
                    f"profile {profile.name!r} allows {profile.limits.memory_mb} MB, more than "
                    f"memory_budget_mb={self.memory_budget_mb}"
                )
            held = profile.limits.memory_mb + (
                RESIDENT_MB.get(profile.image or "", 0) if profile.runtime == "default" else 0
            )  # what a session of this profile holds in the budget (service.resident_mb)
            if held > self.tenant_memory_mb:
                raise ConfigError(
                    f"profile {profile.name!r} holds {held} MB (memory_mb and its image's "
                    "resident pages), more than one "
                    f"key's share of the memory budget ({self.tenant_memory_mb} MB = "
                    f"tenant_memory_share {self.tenant_memory_share:g} of memory_budget_mb "
                    f"{self.memory_budget_mb}); raise memory_budget_mb or tenant_memory_share"
                )
            if profile.runtime not in RUNTIMES:
                raise ConfigError(f"profile {profile.name!r}: unknown runtime {profile.runtime!r}")
            if profile.image not in image_names():
                raise ConfigError(f"profile {profile.name!r}: unknown image {profile.image!r} "
                                  f"(images: {', '.join(image_names())})")
        for key in self.api_keys:
            _check_rate(key.rate, f"api key {key.name!r}")
            _check_rate(key.user_rate, f"api key {key.name!r} user_rate")
            if isinstance(key.user_max_concurrent, bool) or not isinstance(key.user_max_concurrent, int) \
                    or key.user_max_concurrent < 1:
                raise ConfigError(f"api key {key.name!r}: user_max_concurrent must be a whole "
                                  f"number of at least 1, got {key.user_max_concurrent!r}")
            if key.user_token_secret is not None and len(key.user_token_secret) < MIN_SECRET_CHARS:
                raise ConfigError(f"api key {key.name!r}: user_token_secret must be at least "
                                  f"{MIN_SECRET_CHARS} characters (e.g. openssl rand -hex 32)")
            if key.user_token_required and key.user_token_secret is None:
                raise ConfigError(f"api key {key.name!r}: user_token_required needs a "
                                  "user_token_secret (or user_token_secret_file)")
            unknown = [p for p in key.profiles if p not in self.profiles]
            if unknown:
                raise ConfigError(f"api key {key.name!r} names unknown profile(s): {unknown}")
        _check_rate(self.anonymous_rate, "anonymous_rate")
        _check_rate(self.anonymous_user_rate, "anonymous_user_rate")
        _check_rate(self.failed_auth_rate, "failed_auth_rate")
        if self.audit_code not in ("hash", "full"):
            raise ConfigError(f"audit_code must be 'hash' or 'full', got {self.audit_code!r}")
        self._check_cluster()

    def _check_cluster(self) -> None:
        for name in ("redis_timeout_seconds", "lease_ttl_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"{name} must be a number of seconds above 0, got {value!r}")
        drain = self.drain_seconds
        if isinstance(drain, bool) or not isinstance(drain, (int, float)) or not drain >= 0:
            raise ConfigError(f"drain_seconds must be a number of seconds of at least 0, got {drain!r}")
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
            not isinstance(self.cluster_secret, str)
            or len(self.cluster_secret) < MIN_SECRET_CHARS
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

    @property
    def locked(self) -> bool:
        """Auth on but no key configured: every API call is refused (``serve`` will not start)."""
        return self.auth and not self.api_keys

    @property
    def tenant_memory_mb(self) -> int:
        """Memory one tenant may hold at once (runs and sessions together)."""
        return max(1, int(self.memory_budget_mb * self.tenant_memory_share))

    @property
    def tenant_queue_places(self) -> int:
        """Queue places one tenant may hold at once."""
        return max(1, math.ceil(self.max_queue * self.tenant_queue_share))

    @property
    def download_tenant_bytes(self) -> int:
        """Bytes of download links one tenant may hold at once."""
        return max(1, int(self.download_store_bytes * self.download_tenant_share))

    def profile(self, name: str | None) -> Policy:
        return self.profiles[name or self.default_profile]


def hash_key(key: str) -> str:
    """The sha256 hex digest under which an API key is stored and compared."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _check_rate(rate: str, where: str) -> None:
    try:
        parse_rate(rate)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{where}: rate {rate!r} is not like '120/minute' ({exc})") from None


_PROFILE_KEYS = {"data_dir", "files_out", "runtime", "display", "pool_size", "preload", "image"}
_SERVER_KEYS = {
    "auth", "default_profile", "runtimes", "max_running", "max_queue", "queue_timeout_seconds",
    "memory_budget_mb", "max_waiting_runs", "max_waiting_runs_per_key", "anonymous_rate",
    "anonymous_user_rate", "anonymous_user_max_concurrent", "anonymous_max_concurrent", "max_body_bytes",
    "max_files_in", "max_file_in_bytes", "max_sessions", "session_idle_seconds",
    "session_max_lifetime_seconds", "download_ttl_seconds", "download_store_bytes", "cors_origins",
    "audit_log", "audit_code", "exercises_dir", "allowed_hosts", "max_header_bytes",
    "header_timeout_seconds", "body_timeout_seconds", "body_idle_seconds", "keep_alive_seconds",
    "max_connections", "max_connections_per_address", "ws_first_message_bytes", "failed_auth_rate",
    "tenant_memory_share", "tenant_queue_share", "download_tenant_share", "max_json_structure",
    "max_json_depth", "redis_url", "advertise_url", "cluster_secret_file",
    "redis_timeout_seconds", "lease_ttl_seconds", "drain_seconds",
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
    unknown = set(entry) - {"name", "key", "key_sha256", "profiles", "rate", "max_concurrent",
                            "user_rate", "user_max_concurrent", "user_token_secret",
                            "user_token_secret_file", "user_token_required"}  # fmt: skip
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


def _bool(value: str, name: str) -> bool:
    low = value.strip().lower()
    if low in ("1", "true", "on", "yes"):
        return True
    if low in ("0", "false", "off", "no"):
        return False
    raise ConfigError(f"{name} must be on or off, got {value!r}")


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "WASM_RUNNER_AUTH" in env:
        out["auth"] = _bool(env["WASM_RUNNER_AUTH"], "WASM_RUNNER_AUTH")
    if env.get("WASM_RUNNER_ALLOWED_HOSTS"):
        out["allowed_hosts"] = [
            h.strip() for h in env["WASM_RUNNER_ALLOWED_HOSTS"].split(",") if h.strip()
        ]
    if env.get("WASM_RUNNER_CORS_ORIGINS"):
        out["cors_origins"] = [
            o.strip() for o in env["WASM_RUNNER_CORS_ORIGINS"].split(",") if o.strip()
        ]
    if env.get("WASM_RUNNER_EXERCISES_DIR"):
        out["exercises_dir"] = env["WASM_RUNNER_EXERCISES_DIR"]
    for name in ("audit_log", "audit_code", "default_profile"):
        if env.get(f"WASM_RUNNER_{name.upper()}"):
            out[name] = env[f"WASM_RUNNER_{name.upper()}"]
    for name in ("redis_url", "advertise_url", "cluster_secret_file"):
        if env.get(f"WASM_RUNNER_{name.upper()}"):
            out[name] = env[f"WASM_RUNNER_{name.upper()}"]
    if env.get("WASM_RUNNER_CLUSTER_SECRET"):
        out["cluster_secret"] = env["WASM_RUNNER_CLUSTER_SECRET"]
    for name in ("max_running", "max_queue", "memory_budget_mb", "max_waiting_runs",
                 "max_waiting_runs_per_key"):
        raw = env.get(f"WASM_RUNNER_{name.upper()}")
        if raw:
            try:
                out[name] = int(raw)
            except ValueError:
                raise ConfigError(
                    f"WASM_RUNNER_{name.upper()} must be a whole number, got {raw!r}"
                ) from None
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
    env = os.environ if env is None else env
    path = path or env.get("WASM_RUNNER_CONFIG") or None
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
    unknown = set(server) - _SERVER_KEYS
    if unknown:
        raise ConfigError(f"unknown [server] setting(s): {sorted(unknown)}")
    server.update(_env_overrides(env))
    server.update({k: v for k, v in overrides.items() if v is not None})

    profiles = dict(DEFAULT_PROFILES)
    if env.get("WASM_RUNNER_DATA_DIR"):
        profiles["analyst"] = replace(
            profiles["analyst"], data_dir=Path(env["WASM_RUNNER_DATA_DIR"])
        )
    for name, table in doc.get("profiles", {}).items():
        profiles[name] = _profile_from(name, table, profiles.get(name))

    keys = [_key_from(e) for e in doc.get("api_keys", [])]
    if env.get("WASM_RUNNER_API_KEYS"):
        keys += _env_keys(env["WASM_RUNNER_API_KEYS"])

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
        return ServerConfig(api_keys=tuple(keys), profiles=profiles, functions=functions, **server)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
