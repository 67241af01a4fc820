"""Signed results (docs/lms.md, "Signed results"): each server-side check of an exercise comes back
with a JWS (compact, RS256, the JOSE library ``joserfc``) signed with this tool's own key and its
``kid`` (the key's RFC 7638 thumbprint); ``GET /.well-known/jwks.json`` publishes the public keys.

The keys: ``[server] result_key_file`` (``WASM_RUNNER_RESULT_KEY_FILE``), a PEM file of one or more
private RSA keys, the first signing and the others (previous keys, kept while rotating) only
published; else one made once in the private cache folder (``result-key.pem``, mode 0600), like
the snapshot secret. Replicas on several hosts must share the file: nothing is derived from the
cluster secret (an asymmetric key is not a function of a shared secret here), and a cluster
without ``result_key_file`` logs a warning at start. The key is never logged; tokens are not
written to the audit log.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from ..cache import cache_dir, private_file_ok

__all__ = ["ALGORITHM", "DEFAULT_ISSUER", "ResultSigner", "result_claims"]

ALGORITHM = "RS256"
DEFAULT_ISSUER = "wasm-runner"
KEY_FILE_NAME = "result-key.pem"
_PEM = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----.+?-----END [A-Z ]*PRIVATE KEY-----", re.S)
log = logging.getLogger("wasm_runner.http")


def _import(pem: bytes) -> RSAKey:
    probe = RSAKey.import_key(pem)
    return RSAKey.import_key(pem, parameters={"kid": probe.thumbprint(), "use": "sig", "alg": ALGORITHM})


def read_keys(path: Path) -> list[RSAKey]:
    """The private RSA keys of a PEM file, the signing one first. ``ValueError`` (never showing
    the file's content) when it holds none or one that is not an RSA private key."""
    blocks = _PEM.findall(path.read_bytes())
    if not blocks:
        raise ValueError(f"{path} holds no PEM private key")
    keys = []
    for n, block in enumerate(blocks, 1):
        try:
            keys.append(_import(block))
        except Exception:
            raise ValueError(f"{path}: key {n} is not an RSA private key") from None
    return keys


def _own_key_file() -> Path:
    """This machine's key (the cache folder), made once: the first writer wins."""
    path = cache_dir() / KEY_FILE_NAME
    if private_file_ok(path):
        return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(RSAKey.generate_key(2048).as_pem(private=True))
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    return path


class ResultSigner:
    """Signs check results with the current key; publishes every key (current and previous)."""

    def __init__(self, key_file: Path | None = None, issuer: str | None = None):
        self.key_file = key_file
        self.issuer = issuer or DEFAULT_ISSUER
        self._keys: list[RSAKey] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"ResultSigner(key_file={self.key_file!r}, issuer={self.issuer!r})"

    def keys(self) -> list[RSAKey]:
        """The keys, read (or made) on first use."""
        with self._lock:
            if self._keys is None:
                self._keys = read_keys(self.key_file if self.key_file is not None else _own_key_file())
            return self._keys

    def jwks(self) -> dict[str, Any]:
        """The public keys as a JWKS (``{"keys": [...]}``), the signing one first."""
        return dict(KeySet(list(self.keys())).as_dict(private=False))

    def sign(self, claims: dict[str, Any]) -> str:
        """``claims`` as a compact JWS (RS256, the current key's ``kid``), with ``iss``."""
        key = self.keys()[0]
        return jwt.encode({"alg": ALGORITHM, "kid": key.kid, "typ": "JWT"}, {"iss": self.issuer, **claims}, key,
                          algorithms=[ALGORITHM])  # fmt: skip


def result_claims(report: dict[str, Any], code: str, *, user: str | None, audience: str,
                  now: float | None = None, hints_used: int = 0) -> dict[str, Any]:
    """What a check's token says (``iss`` is the signer's): the exercise, the user (the request's
    own id, or None), the score (the weighted share of the checks passed: the report's), checks
    passed and total, the hints the student revealed (the page's count), the sha256 of the code,
    when (``iat``) and for whom (``aud``: the API key's name)."""
    total = int(report["total"])
    passed = int(report["passed_count"])
    weighted = report.get("score")
    return {
        "aud": audience,
        "iat": int(time.time() if now is None else now),
        "exercise": report["exercise"],
        "user": user,
        "score": float(weighted) if weighted is not None else (passed / total if total else 0.0),
        "passed": passed,
        "total": total,
        "hints_used": int(hints_used),
        "code_sha256": hashlib.sha256(code.encode("utf-8")).hexdigest(),
    }
