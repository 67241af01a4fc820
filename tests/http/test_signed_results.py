"""Signed results (docs/lms.md, "Signed results"): a server-side check's response carries a JWS the
server signed with its own key (joserfc), verified here with another JOSE library (PyJWT) against
the JWKS fetched over HTTP from ``/.well-known/jwks.json``; a changed payload, another key's
signature and ``alg: none`` do not verify."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.live_server import LiveServer, live_server, make_config
from wasm_runner.http.results import ResultSigner

ISSUER = "https://runner.example"
# the student's code: the visible check (Ada) fails, the hidden one passes
HALF = "name = input()\nprint('Hi' if name == 'Ada' else f'Hello, {name}!')\n"
SOLUTION = "name = input()\nprint(f'Hello, {name}!')\n"


def pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())  # fmt: skip


@pytest.fixture(scope="module")
def keys() -> tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey]:
    return rsa.generate_private_key(65537, 2048), rsa.generate_private_key(65537, 2048)


@pytest.fixture(scope="module")
def signed_server(warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory,
                  keys: tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey]) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp("signed")
    key_file = tmp / "result-keys.pem"
    key_file.write_bytes(pem(keys[0]) + pem(keys[1]))  # the current key, then the previous one
    key_file.chmod(0o600)
    with live_server(make_config(tmp, result_key_file=key_file, result_issuer=ISSUER)) as live:
        yield live


def jwks(server: LiveServer) -> dict[str, jwt.PyJWK]:
    """The server's public keys by kid, fetched over HTTP without a key."""
    r = httpx.get(server.url + "/.well-known/jwks.json")
    assert r.status_code == 200, r.text
    return {k["kid"]: jwt.PyJWK(k) for k in r.json()["keys"]}


def verify(server: LiveServer, token: str, audience: str = "alice") -> dict:  # type: ignore[type-arg]
    kid = jwt.get_unverified_header(token)["kid"]
    key = jwks(server)[kid]
    return jwt.decode(token, key, algorithms=["RS256"], audience=audience, issuer=ISSUER)  # type: ignore[no-any-return]


def check(server: LiveServer, code: str, user: str | None = None) -> dict:  # type: ignore[type-arg]
    headers = {"X-Wasm-Runner-User": user} if user else {}
    with server.client() as api:
        r = api.post("/api/exercises/greet/check", json={"code": code}, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_a_check_carries_a_token_that_verifies_with_another_library(signed_server: LiveServer) -> None:
    report = check(signed_server, HALF, user="student-42")
    token = report["result_token"]
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "RS256"
    claims = verify(signed_server, token)
    # the claims say what the student got: the hidden check counted, not described
    assert report["passed_count"] == 1 and report["total"] == 2 and not report["passed"]
    assert [c["passed"] for c in report["checks"]] == [False, True]
    assert report["checks"][1]["name"] == "hidden check 1"
    assert claims["exercise"] == "greet" and claims["user"] == "student-42"
    assert (claims["passed"], claims["total"], claims["score"]) == (1, 2, 0.5)
    assert claims["code_sha256"] == hashlib.sha256(HALF.encode()).hexdigest()
    assert claims["aud"] == "alice" and claims["iss"] == ISSUER and isinstance(claims["iat"], int)
    assert set(claims) == {"iss", "aud", "iat", "exercise", "user", "score", "passed", "total", "code_sha256",
                           "hints_used"}
    assert "hidden-name-case" not in json.dumps(claims) and "Xylophone" not in json.dumps(claims)

    full = check(signed_server, SOLUTION)  # no user: null
    claims = verify(signed_server, full["result_token"])
    assert claims["user"] is None and claims["score"] == 1.0 and claims["passed"] == claims["total"] == 2


def test_the_jwks_lists_the_current_and_the_previous_key(
    signed_server: LiveServer, keys: tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey]
) -> None:
    published = jwks(signed_server)
    assert len(published) == 2
    moduli = [k.key.public_numbers().n for k in published.values()]  # type: ignore[union-attr]
    assert moduli == [keys[0].public_key().public_numbers().n, keys[1].public_key().public_numbers().n]
    r = httpx.get(signed_server.url + "/.well-known/jwks.json")
    assert all(set(k) >= {"kty", "kid", "n", "e"} and "d" not in k for k in r.json()["keys"])
    token = check(signed_server, SOLUTION)["result_token"]
    assert jwt.get_unverified_header(token)["kid"] == next(iter(published))  # signed with the current one


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_forged_tokens_do_not_verify(signed_server: LiveServer) -> None:
    token = check(signed_server, HALF)["result_token"]
    head, body, sig = token.split(".")
    # the payload changed (a full score) under the server's signature
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged = {**claims, "passed": 2, "score": 1.0}
    with pytest.raises(jwt.InvalidSignatureError):
        verify(signed_server, f"{head}.{_b64(json.dumps(forged).encode())}.{sig}")
    # signed by another key under the server's kid
    other = rsa.generate_private_key(65537, 2048)
    kid = jwt.get_unverified_header(token)["kid"]
    with pytest.raises(jwt.InvalidSignatureError):
        verify(signed_server, jwt.encode(forged, other, algorithm="RS256", headers={"kid": kid}))
    # alg none
    none = f"{_b64(json.dumps({'alg': 'none', 'kid': kid}).encode())}.{_b64(json.dumps(forged).encode())}."
    with pytest.raises(jwt.InvalidAlgorithmError):
        verify(signed_server, none)
    # for another key's backend
    with pytest.raises(jwt.InvalidAudienceError):
        verify(signed_server, token, audience="bob")


def test_tokens_are_not_in_the_audit_log(signed_server: LiveServer) -> None:
    token = check(signed_server, SOLUTION)["result_token"]
    audit = signed_server.config.audit_log
    assert audit is not None and audit.read_text().strip()
    assert token not in audit.read_text() and token.split(".")[2] not in audit.read_text()


def test_the_default_key_is_made_once_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WASM_RUNNER_CACHE", str(tmp_path / "cache"))
    first = ResultSigner()
    token = first.sign({"aud": "x"})
    made = tmp_path / "cache" / "result-key.pem"
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o600
    again = ResultSigner()  # another process or replica on this machine: the same key
    assert again.jwks() == first.jwks()
    key = jwt.PyJWK(again.jwks()["keys"][0])
    assert jwt.decode(token, key, algorithms=["RS256"], audience="x")["iss"] == "wasm-runner"
    assert "PRIVATE" not in repr(first) and made.read_text() not in repr(first.keys())


def test_the_key_file_from_the_file_or_the_environment(tmp_path: Path) -> None:
    from wasm_runner.assembly import result_signer
    from wasm_runner.settings import load_config

    toml = tmp_path / "server.toml"
    toml.write_text('[server]\nauth = false\nresult_key_file = "/srv/keys/result.pem"\n'
                    'result_issuer = "https://runner.example"\n')  # fmt: skip
    config = load_config(toml, env={})
    assert config.result_key_file == Path("/srv/keys/result.pem") and config.result_issuer == ISSUER
    config = load_config(None, env={"WASM_RUNNER_RESULT_KEY_FILE": str(tmp_path / "k.pem"), "WASM_RUNNER_AUTH": "off",
                                    "WASM_RUNNER_ADVERTISE_URL": "http://10.0.0.5:8000"})
    assert config.result_key_file == tmp_path / "k.pem"
    signer = result_signer(config)
    assert (signer.key_file, signer.issuer) == (tmp_path / "k.pem", "http://10.0.0.5:8000")  # iss: advertise_url
    (tmp_path / "k.pem").write_text("not a key")
    with pytest.raises(ValueError, match="holds no PEM private key"):
        signer.keys()


def test_replicas_of_a_cluster_sign_with_one_issuer(tmp_path: Path, keys: tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey],
                                                    caplog: pytest.LogCaptureFixture) -> None:
    """With ``redis_url`` and no ``result_issuer``, each replica's ``advertise_url`` differs but
    every token says the same ``iss`` (a platform checking it accepts any replica's), and the
    operator is told to set ``result_issuer``; one host keeps ``advertise_url``."""
    from wasm_runner.assembly import result_signer
    from wasm_runner.settings import load_config

    key_file = tmp_path / "cluster.pem"
    key_file.write_bytes(pem(keys[0]))
    key_file.chmod(0o600)
    cluster = {"WASM_RUNNER_REDIS_URL": "redis://127.0.0.1:1/0", "WASM_RUNNER_CLUSTER_SECRET": "c" * 32,
               "WASM_RUNNER_RESULT_KEY_FILE": str(key_file), "WASM_RUNNER_AUTH": "off"}
    replicas = [result_signer(load_config(None, env={**cluster, "WASM_RUNNER_ADVERTISE_URL": f"http://10.0.0.{n}:8000"}))
                for n in (5, 6)]  # fmt: skip
    tokens = [signer.sign({"aud": "course", "exercise": "greet"}) for signer in replicas]
    public = jwt.PyJWK(replicas[0].jwks()["keys"][0])
    assert [jwt.decode(t, public, algorithms=["RS256"], audience="course")["iss"] for t in tokens] == ["wasm-runner"] * 2
    assert "set [server] result_issuer" in caplog.text
    named = load_config(None, env={**cluster, "WASM_RUNNER_RESULT_ISSUER": ISSUER,
                                   "WASM_RUNNER_ADVERTISE_URL": "http://10.0.0.5:8000"})  # fmt: skip
    assert result_signer(named).issuer == ISSUER
