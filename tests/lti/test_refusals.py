"""Every launch or grade that must not pass, each refused with a clear message, audit-logged by
its code, nothing recorded in the platform's gradebook, the tool still answering. The id_tokens
here are made with another JOSE library (PyJWT) with the platform's own key unless the test is
about another key; the HS256 and ``alg: none`` tokens are built by hand, as an attacker would."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import jwt
import pytest

from tests.lti.conftest import Lti, audit_lines, launch, login, session_of
from tests.support.live_server import wait_until
from tests.support.lti_platform import CLIENT_ID, DEPLOYMENT, new_rsa_pem
from wasm_runner.lti import claims as c

SOLUTION = "name = input()\nprint(f'Hello, {name}!')\n"


def tool_login(lti: Lti, browser: httpx.Client) -> tuple[str, str]:
    """The tool's state and nonce for a login the platform started."""
    r = browser.get(f"{lti.tool.url}/lti/login", params={"iss": lti.platform.issuer, "client_id": CLIENT_ID,
                                                          "login_hint": "student-x",
                                                          "target_link_uri": f"{lti.tool.url}/lti/launch"})
    assert r.status_code == 302, r.text
    query = parse_qs(urlsplit(r.headers["location"]).query)
    return query["state"][0], query["nonce"][0]


def claims(lti: Lti, nonce: str, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    body: dict[str, Any] = {
        "iss": lti.platform.issuer, "aud": CLIENT_ID, "azp": CLIENT_ID, "sub": "student-x", "iat": now,
        "exp": now + 300, "nonce": nonce, c.DEPLOYMENT_ID: DEPLOYMENT, c.MESSAGE_TYPE: "LtiResourceLinkRequest",
        c.VERSION: "1.3.0", c.RESOURCE_LINK: {"id": "link-x"}, c.CUSTOM: {"exercise": "greet"},
        c.AGS_ENDPOINT: {"scope": [c.SCOPE_LINEITEM, c.SCOPE_SCORE], "lineitems": f"{lti.platform.url}/lineitems"},
    }  # fmt: skip
    body.update(changes)
    return {k: v for k, v in body.items() if v is not None}


def signed(lti: Lti, body: dict[str, Any], pem: str | None = None) -> str:
    kid = lti.platform.registration().get_kid()
    return jwt.encode(body, pem or lti.platform.private_pem, algorithm="RS256", headers={"kid": kid})


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unsigned(body: dict[str, Any]) -> str:
    return f"{_b64(json.dumps({'alg': 'none', 'typ': 'JWT'}).encode())}.{_b64(json.dumps(body).encode())}."


def hs256_with_public_key(lti: Lti, body: dict[str, Any]) -> str:
    kid = lti.platform.registration().get_kid()
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
    signing = f"{head}.{_b64(json.dumps(body).encode())}"
    mac = hmac.new(lti.platform.public_pem.encode(), signing.encode(), hashlib.sha256).digest()
    return f"{signing}.{_b64(mac)}"


def refused(lti: Lti, r: httpx.Response, code: str, status: int = 401) -> None:
    assert r.status_code == status, r.text
    assert "cannot open" in r.text or "error" in r.text
    assert any(a.get("event") == "lti_refused" and a.get("code") == code for a in audit_lines(lti)), code
    assert not lti.platform.scores_for("student-x")  # nothing recorded
    assert httpx.get(f"{lti.tool.url}/lti/config").status_code == 200  # the tool still answers


def post_launch(lti: Lti, browser: httpx.Client, id_token: str, state: str) -> httpx.Response:
    return browser.post(f"{lti.tool.url}/lti/launch", data={"id_token": id_token, "state": state})


CASES = {
    "wrong_audience": lambda lti, nonce: signed(lti, claims(lti, nonce, aud="another-tool", azp=None)),
    "unknown_platform": lambda lti, nonce: signed(lti, claims(lti, nonce, iss="https://other-lms.example")),
    "unknown_deployment": lambda lti, nonce: signed(lti, claims(lti, nonce, **{c.DEPLOYMENT_ID: "deployment-9"})),
    "expired": lambda lti, nonce: signed(lti, claims(lti, nonce, iat=int(time.time()) - 4000,
                                                     exp=int(time.time()) - 3600)),
    "bad_signature": lambda lti, nonce: signed(lti, claims(lti, nonce), pem=new_rsa_pem()[0]),
    "wrong_algorithm": lambda lti, nonce: unsigned(claims(lti, nonce)),
    "nonce_mismatch": lambda lti, nonce: signed(lti, claims(lti, "a-nonce-this-tool-never-made")),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_a_bad_id_token_is_refused(lti: Lti, code: str) -> None:
    with httpx.Client(timeout=60) as browser:
        state, nonce = tool_login(lti, browser)
        refused(lti, post_launch(lti, browser, CASES[code](lti, nonce), state), code)


def test_hs256_signed_with_the_platforms_public_key_is_refused(lti: Lti) -> None:
    with httpx.Client(timeout=60) as browser:
        state, nonce = tool_login(lti, browser)
        refused(lti, post_launch(lti, browser, hs256_with_public_key(lti, claims(lti, nonce)), state),
                "wrong_algorithm")


def test_a_replayed_id_token_and_a_reused_state_or_nonce_are_refused(lti: Lti) -> None:
    with httpx.Client(timeout=60) as browser:
        action, fields = login(lti, browser, user="student-x")
        assert browser.post(action, data=fields).status_code == 200  # the launch itself works
        refused(lti, browser.post(action, data=fields), "invalid_state")  # the same state again
        state, _ = tool_login(lti, browser)  # a fresh state, the old id_token (its nonce used)
        refused(lti, post_launch(lti, browser, fields["id_token"], state), "nonce_mismatch")


def test_a_login_from_an_unregistered_platform_is_refused(lti: Lti) -> None:
    r = httpx.get(f"{lti.tool.url}/lti/login", params={"iss": "https://unknown-lms.example", "login_hint": "u",
                                                        "target_link_uri": f"{lti.tool.url}/lti/launch"})
    refused(lti, r, "unknown_platform")
    assert "https://unknown-lms.example" in r.text


def test_grade_service_urls_off_the_registered_origins_are_refused(lti: Lti) -> None:
    # a private address handed over in a (validly signed) message: refused before any call
    with httpx.Client(timeout=60) as browser:
        state, nonce = tool_login(lti, browser)
        body = claims(lti, nonce, **{c.AGS_ENDPOINT: {"scope": [c.SCOPE_SCORE], "lineitems": "http://10.0.0.7/li"}})
        refused(lti, post_launch(lti, browser, signed(lti, body), state), "unregistered_url", 400)


def test_a_score_for_another_exercise_or_user_is_refused(lti: Lti) -> None:
    with httpx.Client(timeout=60) as browser:
        page = launch(lti, browser, user="student-x", exercise="greet", link="link-x")
        cfg = session_of(page.text)
        r = browser.post(f"{lti.tool.url}/lti/exercises/mean/check", json={"code": SOLUTION},
                         headers={"X-Wasm-Runner-Launch": cfg["session"]})
        assert r.status_code == 403 and r.json()["error"]["code"] == "wrong_exercise"
        head, payload, sig = cfg["session"].split(".")
        body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        body["sub"] = "student-y"  # a classmate: the payload changed, the signature kept
        forged = f"{head}.{_b64(json.dumps(body).encode())}.{sig}"
        r = browser.post(lti.tool.url + cfg["checkUrl"], json={"code": SOLUTION},
                         headers={"X-Wasm-Runner-Launch": forged})
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_launch_session"
        r = browser.post(lti.tool.url + cfg["checkUrl"], json={"code": SOLUTION})  # no session at all
        assert r.status_code == 401
    assert not lti.platform.scores_for("student-y") and not lti.platform.scores_for("student-x")


def test_tokens_keys_and_grades_stay_out_of_the_audit_log_and_the_logs(lti: Lti, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with httpx.Client(timeout=60) as browser:
        action, fields = login(lti, browser, user="student-z", link="link-z")
        cfg = session_of(browser.post(action, data=fields).text)
        r = browser.post(lti.tool.url + cfg["checkUrl"], json={"code": SOLUTION},
                         headers={"X-Wasm-Runner-Launch": cfg["session"]})
        assert r.status_code == 200
    assert wait_until(lambda: lti.platform.scores_for("student-z"), timeout=60)
    text = lti.audit.read_text()
    # the server's own logs (this process's HTTP clients, the test's included, log at DEBUG too)
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith(("wasm_runner", "uvicorn")))
    for secret in (fields["id_token"], fields["state"], cfg["session"], "Bearer", "PRIVATE KEY", "scoreGiven"):
        assert secret not in text and secret not in logged
