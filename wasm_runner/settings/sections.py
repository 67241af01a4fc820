"""The server's settings sections (``ServerConfig`` holds them: ``config.admission.x``): admission,
sessions, downloads, client bounds, scale-out; and the MCP tools' ``ToolSettings``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..host_memory import default_memory_budget_mb
from ..inputs import MAX_SOURCE_BYTES
from ..limits import Limits
from .rules import (
    ConfigError, KEY_MAX_CONCURRENT, KEY_RATE, LOOPBACK_HOSTS, MIN_SECRET_CHARS, REDIS_SCHEMES,
    RUNTIMES, USER_MAX_CONCURRENT, USER_RATE, _Section, _int, _names, _text, fraction,
    host_names, limits_in_range, one_of, rate, rule, seconds, seconds_or_none, whole,
    whole_between,
)

__all__ = [
    "AdmissionSettings", "ClientBounds", "DEFAULT_TOOL_LIMITS", "DownloadSettings",
    "ScaleOutSettings", "SessionSettings", "ToolSettings",
]


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
    """Links to files a run wrote (``wasm_runner.downloads``): how long, how many bytes, per key."""

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


