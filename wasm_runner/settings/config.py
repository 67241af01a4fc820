"""The whole server's settings: API keys, profiles and ``ServerConfig`` with its sections, and the
map from the file's flat ``[server]`` keys to them."""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from ..execution import Policy
from ..host_functions.declared import DeclaredFunction
from ..network.rules import NetworkRule
from ..images import RESIDENT_MB, image_names
from ..limits import Limits
from ..lti.registration import LtiSettings
from .rules import (
    ConfigError, KEY_MAX_CONCURRENT, KEY_RATE, MIN_SECRET_CHARS, PROFILE_IMAGE, RUNTIMES,
    USER_MAX_CONCURRENT, USER_RATE, _Section, _int, _names, _on_off, _text, one_of, rate, rule,
    seconds, whole_between,
)
from .sections import (
    AdmissionSettings, ClientBounds, DownloadSettings, ScaleOutSettings, SessionSettings,
    ToolSettings,
)

__all__ = [
    "ApiKey", "DEFAULT_PROFILES", "Profile", "SECTIONS", "SECTION_OF", "ServerConfig",
    "hash_key", "server_keys",
]


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
    # the webhook (wasm_runner/webhooks, docs/lms.md): each server-side check result of this key,
    # signed, is POSTed here; None: none. Only a public address, or one of ``webhook_allow``
    # (addresses or networks the operator opens, e.g. 127.0.0.1 for a receiver on this machine)
    webhook_url: str | None = None
    webhook_allow: tuple[str, ...] = ()

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
        self._check_webhook(where)

    def _check_webhook(self, where: str) -> None:
        for entry in self.webhook_allow:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ConfigError(f"{where}: webhook_allow takes addresses or networks "
                                  f"(127.0.0.1, 10.0.0.0/8), not {entry!r}") from None
        if self.webhook_allow and self.webhook_url is None:
            raise ConfigError(f"{where}: webhook_allow without a webhook_url")
        if self.webhook_url is None:
            return
        parts = urlsplit(self.webhook_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password \
                or parts.fragment or len(self.webhook_url) > 2000:
            raise ConfigError(f"{where}: webhook_url must be an http:// or https:// URL without "
                              f"credentials or fragment, not {self.webhook_url!r}")


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
    # where runs may connect (``[network.NAME]``, network/rules.py): none, the network is off
    network: Mapping[str, NetworkRule] = field(default_factory=dict)
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
    # rich outputs (docs/notebooks.md): the HTML a program shows (a pandas table, _repr_html_) goes
    # into the playground's page sanitised by DOMPurify; on: as the program made it (the page's
    # CSP still runs no inline script)
    trust_html: bool = field(default=False, metadata=rule(env=_on_off))
    # signed results (http/results.py, docs/lms.md): a PEM file of the tool's private RSA keys (the
    # first signs, the others are published while rotating), or None: one made in the cache folder
    result_key_file: Path | None = field(default=None, metadata=rule(env=_text))
    # the signed results' ``iss``; None: "wasm-runner" in a cluster (redis_url), else advertise_url or "wasm-runner"
    result_issuer: str | None = field(default=None, metadata=rule(env=_text))
    # packages beyond the image (wasm_runner.packages, docs/configuration.md#packages): the operator's
    # lock file (``wasm-runner packages lock``); None: runs have only the image's packages
    packages_lock: Path | None = field(default=None, metadata=rule(env=_text))
    # webhooks (wasm_runner/webhooks, docs/lms.md): where deliveries wait without redis_url (None:
    # ``webhooks`` in the cache folder), the first retry's delay (doubled each time, at most an
    # hour) and the attempts before a delivery is given up (each in the audit log)
    webhook_outbox_dir: Path | None = field(default=None, metadata=rule(env=_text))
    webhook_retry_seconds: float = field(default=5.0, metadata=rule(seconds))
    webhook_max_attempts: int = field(default=12, metadata=rule(whole_between(1, 100), _int))
    # LTI 1.3 (wasm_runner.lti, docs/lms.md): ``[lti]`` and its ``[[lti.platforms]]``
    lti: LtiSettings = field(default_factory=LtiSettings)
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
        if self.packages_lock is not None:  # the operator's package lock: read now, refused at start
            from ..packages.lock import LockError, PackageLock

            try:
                PackageLock.read(Path(self.packages_lock))
            except LockError as exc:
                raise ConfigError(f"packages_lock: {exc}") from None
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
        try:
            self.lti.check()
            self.lti.check_keys({k.name for k in self.api_keys}, self.auth)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

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
    return {f.name for f in _flat_fields()} - {"api_keys", "profiles", "functions", "lti", "network", "cluster_secret"} | {
        "cluster_secret_file"
    }


