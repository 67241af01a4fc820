"""Fixtures for the LTI tests: an independent platform (tests/support/lti_platform.py) and the
tool (a live wasm-runner with the platform registered), and the launch driven over HTTP as a
browser would follow it (redirects, the platform's auto-posted form)."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.live_server import LiveServer, live_server, make_config
from tests.support.lti_platform import LtiPlatform, lti_platform
from wasm_runner.lti.registration import LtiSettings

_INPUT = re.compile(r'<input type="hidden" name="([^"]+)" value="([^"]*)">')
_ACTION = re.compile(r'<form [^>]*action="([^"]+)"')


@dataclass
class Lti:
    platform: LtiPlatform
    tool: LiveServer
    audit: Path

    def tool_settings(self) -> LtiSettings:
        return self.tool.config.lti


def lti_config(tmp: Path, platform: LtiPlatform, **lti: Any) -> Any:
    settings = LtiSettings.from_table({"platforms": [platform.toml(api_key="alice")],
                                       "outbox_dir": str(tmp / "outbox"), "retry_seconds": 0.2,
                                       "retry_max_seconds": 1.0, **lti})  # fmt: skip
    return make_config(tmp, lti=settings)


@pytest.fixture(scope="module")
def lti(warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lti]:
    tmp = tmp_path_factory.mktemp("lti")
    with lti_platform() as platform, live_server(lti_config(tmp, platform)) as tool:
        platform.tool_url = tool.url
        yield Lti(platform, tool, tmp / "audit.jsonl")


def form_of(page: str) -> tuple[str, dict[str, str]]:
    """The action and hidden fields of an auto-posted form."""
    action = _ACTION.search(page)
    assert action, page
    return html.unescape(action.group(1)), {html.unescape(k): html.unescape(v) for k, v in _INPUT.findall(page)}


def login(lti: Lti, browser: httpx.Client, **hint: str) -> tuple[str, dict[str, str]]:
    """The platform starts a launch and the tool's login answers: the platform's authorisation
    form (its action is the tool's launch URL, its fields id_token and state)."""
    r = browser.get(f"{lti.platform.url}/start", params=hint)
    assert r.status_code == 302, r.text
    r = browser.get(r.headers["location"])  # the tool's /lti/login
    assert r.status_code == 302, r.text
    assert r.headers["location"].startswith(f"{lti.platform.url}/auth?")
    r = browser.get(r.headers["location"])  # the platform's authorisation endpoint
    assert r.status_code == 200, r.text
    return form_of(r.text)


def launch(lti: Lti, browser: httpx.Client, **hint: str) -> httpx.Response:
    action, fields = login(lti, browser, **hint)
    return browser.post(action, data=fields)


def session_of(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="cfg">(.*?)</script>', page)
    assert found, page
    return json.loads(found.group(1))  # type: ignore[no-any-return]


def audit_lines(lti: Lti) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lti.audit.read_text().splitlines()] if lti.audit.exists() else []
