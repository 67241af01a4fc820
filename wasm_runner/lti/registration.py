"""Platforms registered with this tool (``[[lti.platforms]]`` in the server's config) and the
``[lti]`` settings, validated with errors that name the platform and the setting.

A platform is what an LMS admin reads off its tool registration page: the issuer, the client id
the LMS gave this tool, the deployment ids, and the LMS's three URLs (OIDC authorisation, OAuth2
token, JWKS). ``api_key`` names the API key (``[[api_keys]]``) whose limits the platform's
launched students use, each student a user inside it. The tool calls only these URLs, and the
grade-service URLs a launch names only when they share an origin with them (``service_origins``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..exercises.model import GRADE_POLICIES, GradePolicy

__all__ = ["LtiSettings", "Platform", "origin_of"]

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_PLATFORM_KEYS = {"name", "issuer", "client_id", "deployment_ids", "auth_url", "token_url", "jwks_url",
                  "api_key", "service_origins"}  # fmt: skip
_LTI_KEYS = {"platforms", "outbox_dir", "retry_seconds", "retry_max_seconds", "claim_seconds", "launch_seconds",
             "grade"}  # fmt: skip


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` (lower case)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _url(where: str, name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {name} is required (a URL)")
    parts = urlsplit(value)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError(f"{where}: {name} must be an http(s) URL, got {value!r}")
    if parts.username or parts.password:
        raise ValueError(f"{where}: {name} must not hold a user or password")
    return value


@dataclass(frozen=True)
class Platform:
    """One LMS registration (see the module's docstring)."""

    name: str
    issuer: str
    client_id: str
    deployment_ids: tuple[str, ...]
    auth_url: str
    token_url: str
    jwks_url: str
    api_key: str | None = None
    service_origins: tuple[str, ...] = ()

    @classmethod
    def from_table(cls, table: dict[str, Any], n: int) -> Platform:
        where = f"[[lti.platforms]] #{n}"
        if not isinstance(table, dict):
            raise ValueError(f"{where} must be a table")
        unknown = sorted(set(table) - _PLATFORM_KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown setting(s) {unknown}")
        name = table.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"{where}: name is required (letters, digits, '._-', at most 64)")
        where = f"[[lti.platforms]] {name!r}"
        issuer = table.get("issuer")
        if not isinstance(issuer, str) or not issuer:
            raise ValueError(f"{where}: issuer is required (the platform's iss, e.g. its base URL)")
        client_id = table.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise ValueError(f"{where}: client_id is required (the id the platform gave this tool)")
        deployments = table.get("deployment_ids")
        if (not isinstance(deployments, list) or not deployments
                or not all(isinstance(d, str) and d for d in deployments)):
            raise ValueError(f"{where}: deployment_ids is required: a list of the deployment ids "
                             "the platform shows for this tool")  # fmt: skip
        api_key = table.get("api_key")
        if api_key is not None and not isinstance(api_key, str):
            raise ValueError(f"{where}: api_key must name one of [[api_keys]]")
        urls = {k: _url(where, k, table.get(k)) for k in ("auth_url", "token_url", "jwks_url")}
        origins = table.get("service_origins", [origin_of(urls["token_url"])])
        if not isinstance(origins, list):
            raise ValueError(f"{where}: service_origins must be a list of origins")
        checked = tuple(origin_of(_url(where, "service_origins", o)) for o in origins)
        return cls(name, issuer, client_id, tuple(deployments), urls["auth_url"], urls["token_url"],
                   urls["jwks_url"], api_key, checked)  # fmt: skip

    def serves(self, url: str) -> bool:
        """Whether ``url`` (a grade-service or deep-linking return URL a message named) is one
        this platform's registration allows the tool to call or send a browser to."""
        try:
            return urlsplit(url).scheme in ("http", "https") and origin_of(url) in self.service_origins
        except ValueError:
            return False


@dataclass(frozen=True)
class LtiSettings:
    """``[lti]``: the platforms; where the outbox of scores waits (``outbox_dir``; None: the
    private cache folder); the outbox's retry backoff (first wait, doubled up to the most); how
    long a worker's claim on a score holds before another replica takes it back
    (``claim_seconds``: its replica died between the claim and the post); how long a launch
    session lives; which attempt counts by default (``grade``; an exercise's own ``grade`` in its
    TOML wins)."""

    platforms: tuple[Platform, ...] = ()
    outbox_dir: Path | None = None
    retry_seconds: float = 5.0
    retry_max_seconds: float = 300.0
    claim_seconds: float = 300.0
    launch_seconds: int = 4 * 3600
    grade: GradePolicy = "best"

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> LtiSettings:
        """``[lti]`` as read from TOML; ``ValueError`` with a plain message when it is wrong."""
        unknown = sorted(set(table) - _LTI_KEYS)
        if "grade_per_exercise" in unknown:
            raise ValueError('[lti] grade_per_exercise is gone: the teacher says it in the exercise '
                             '(grade = "best" or "latest" in its TOML)')
        if unknown:
            raise ValueError(f"unknown [lti] setting(s): {unknown}")
        raw = table.get("platforms", [])
        if not isinstance(raw, list):
            raise ValueError("[lti] platforms must be a list of tables ([[lti.platforms]])")
        platforms = tuple(Platform.from_table(t, n) for n, t in enumerate(raw, 1))
        settings = cls(
            platforms=platforms,
            outbox_dir=Path(table["outbox_dir"]) if table.get("outbox_dir") else None,
            retry_seconds=float(table.get("retry_seconds", cls.retry_seconds)),
            retry_max_seconds=float(table.get("retry_max_seconds", cls.retry_max_seconds)),
            claim_seconds=float(table.get("claim_seconds", cls.claim_seconds)),
            launch_seconds=int(table.get("launch_seconds", cls.launch_seconds)),
            grade=table.get("grade", "best"),
        )
        settings.check()
        return settings

    def check(self) -> None:
        """``ValueError`` when settings contradict each other or are out of range."""
        seen: set[tuple[str, str]] = set()
        names: set[str] = set()
        for p in self.platforms:
            if (p.issuer, p.client_id) in seen:
                raise ValueError(f"[[lti.platforms]] {p.name!r}: issuer {p.issuer!r} with client_id "
                                 f"{p.client_id!r} is registered twice")  # fmt: skip
            if p.name in names:
                raise ValueError(f"[[lti.platforms]]: the name {p.name!r} is used twice")
            seen.add((p.issuer, p.client_id))
            names.add(p.name)
        if not 0 < self.retry_seconds <= self.retry_max_seconds:
            raise ValueError("[lti] retry_seconds must be > 0 and at most retry_max_seconds")
        if not 1 <= self.claim_seconds <= 3600:
            raise ValueError("[lti] claim_seconds must be between 1 and 3600")
        if not 60 <= self.launch_seconds <= 24 * 3600:
            raise ValueError("[lti] launch_seconds must be between 60 and 86400")
        if self.grade not in GRADE_POLICIES:
            raise ValueError(f"[lti] grade: the attempt that counts is 'best' or 'latest', got {self.grade!r}")

    def check_keys(self, key_names: set[str], auth: bool) -> None:
        """``ValueError`` when a platform names an API key the config does not have."""
        for p in self.platforms:
            if auth and p.api_key is None:
                raise ValueError(f"[[lti.platforms]] {p.name!r}: api_key is required when auth is on "
                                 "(the key whose limits its students use)")  # fmt: skip
            if auth and p.api_key not in key_names:
                raise ValueError(f"[[lti.platforms]] {p.name!r}: api_key {p.api_key!r} is not one of "
                                 f"[[api_keys]] ({', '.join(sorted(key_names)) or 'none'})")  # fmt: skip

    def find(self, issuer: str, client_id: str | None) -> Platform | None:
        """The platform registered for ``issuer`` (and ``client_id`` when given)."""
        for p in self.platforms:
            if p.issuer == issuer and (client_id is None or p.client_id == client_id):
                return p
        return None

    def named(self, name: str) -> Platform | None:
        return next((p for p in self.platforms if p.name == name), None)

    def grade_for(self, exercise_choice: GradePolicy | None) -> GradePolicy:
        """The attempt that counts: the exercise's own ``grade`` when it says one, else ``grade``."""
        return exercise_choice or self.grade
