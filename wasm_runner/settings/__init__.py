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

    [network.course-apis]             # where runs may connect (network/rules.py); none: off
    destinations = ["https://api.example.org", "https://*.wikipedia.org"]
    max_requests = 20                 # and max_bytes_in, max_bytes_out, request_seconds, addresses
    keys = ["course-site"]            # the keys it applies to; profiles = [...] narrows it

Environment (overrides the file): ``WASM_RUNNER_CONFIG`` (path of the TOML file),
``WASM_RUNNER_AUTH`` (``on``/``off``), ``WASM_RUNNER_API_KEYS`` (``name:key,name:key``),
``WASM_RUNNER_CORS_ORIGINS`` (comma-separated), ``WASM_RUNNER_AUDIT_LOG``,
``WASM_RUNNER_AUDIT_CODE``,
``WASM_RUNNER_MAX_RUNNING``, ``WASM_RUNNER_MAX_QUEUE``, ``WASM_RUNNER_MEMORY_BUDGET_MB``,
``WASM_RUNNER_MAX_WAITING_RUNS``, ``WASM_RUNNER_MAX_WAITING_RUNS_PER_KEY``,
``WASM_RUNNER_DEFAULT_PROFILE``, ``WASM_RUNNER_EXERCISES_DIR`` (``[server] exercises_dir``: the
exercises served at ``/api/exercises``), ``WASM_RUNNER_DATA_DIR`` (the ``analyst`` profile's data
directory), ``WASM_RUNNER_ALLOWED_HOSTS`` (comma-separated), ``WASM_RUNNER_RESULT_KEY_FILE`` and
``WASM_RUNNER_RESULT_ISSUER`` (``[server] result_key_file``, ``result_issuer``: signed check results,
docs/lms.md), ``WASM_RUNNER_WEBHOOK_OUTBOX_DIR`` and ``WASM_RUNNER_WEBHOOK_MAX_ATTEMPTS`` (``[server]
webhook_outbox_dir``, ``webhook_max_attempts``, with ``webhook_retry_seconds``: the keys' webhooks,
``[[api_keys]] webhook_url`` and ``webhook_allow``, docs/lms.md).

Scale-out: ``[server] redis_url`` / ``WASM_RUNNER_REDIS_URL`` turns shared state on;
``advertise_url`` / ``WASM_RUNNER_ADVERTISE_URL`` is this replica's internal base URL; the
replicas' shared secret comes from ``WASM_RUNNER_CLUSTER_SECRET`` or the file named by ``[server]
cluster_secret_file`` / ``WASM_RUNNER_CLUSTER_SECRET_FILE`` (never from the TOML file itself,
never shown in ``repr``).
"""

from __future__ import annotations

from .rules import (
    ConfigError, KEY_MAX_CONCURRENT, KEY_RATE, LOOPBACK_HOSTS, USER_MAX_CONCURRENT, USER_RATE,
    is_loopback,
)
from .sections import (
    AdmissionSettings, ClientBounds, DEFAULT_TOOL_LIMITS, DownloadSettings, ScaleOutSettings,
    SessionSettings, ToolSettings,
)
from .config import (
    ApiKey, DEFAULT_PROFILES, Profile, SECTIONS, SECTION_OF, ServerConfig, hash_key, server_keys,
)
from .loading import environment, load_config

__all__ = [
    "AdmissionSettings", "ApiKey", "ClientBounds", "ConfigError", "DEFAULT_PROFILES", "DownloadSettings",
    "DEFAULT_TOOL_LIMITS", "KEY_MAX_CONCURRENT", "KEY_RATE", "LOOPBACK_HOSTS", "Profile", "ScaleOutSettings",
    "SECTION_OF", "SECTIONS", "ServerConfig", "SessionSettings", "ToolSettings", "USER_MAX_CONCURRENT", "USER_RATE",
    "environment", "hash_key", "is_loopback", "load_config", "server_keys",
]  # fmt: skip
