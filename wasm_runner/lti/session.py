"""The launch session: what the tool's page holds instead of an API key. A short-lived JWS the
tool signs with its own key (RS256, ``kid``; the same keys as signed results) and verifies on
each call: which platform, which student (``sub``), which exercise, and where the grade goes
(the resource link and the grade-service URLs the launch named). The page can read it but not
change it: a changed one, another tool's, or an expired one is refused."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet, RSAKey

from .validation import LaunchRefused

__all__ = ["LaunchSessions"]

AUDIENCE = "wasm-runner-lti-launch"


class LaunchSessions:
    def __init__(self, keys: Callable[[], list[RSAKey]], issuer: str, lifetime_seconds: int) -> None:
        self._keys = keys
        self.issuer = issuer
        self.lifetime_seconds = lifetime_seconds

    def sign(self, claims: dict[str, Any], now: float | None = None) -> str:
        key = self._keys()[0]
        at = int(time.time() if now is None else now)
        body = {**claims, "iss": self.issuer, "aud": AUDIENCE, "iat": at, "exp": at + self.lifetime_seconds}
        return jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "JWT"}, body, key, algorithms=["RS256"])

    def verify(self, token: str | None, kind: str) -> dict[str, Any]:
        """The session's claims, or ``LaunchRefused(401 invalid_launch_session)``."""
        if not token or len(token) > 16 * 1024:
            raise LaunchRefused("invalid_launch_session", "this page has no launch session: open it from "
                                "the course again")  # fmt: skip
        try:
            decoded = jwt.decode(token, KeySet(list(self._keys())), algorithms=["RS256"])
            jwt.JWTClaimsRegistry(iss={"essential": True, "value": self.issuer},
                                  aud={"essential": True, "value": AUDIENCE},
                                  exp={"essential": True}).validate(decoded.claims)  # fmt: skip
        except (JoseError, ValueError):
            raise LaunchRefused("invalid_launch_session", "the launch session is not valid (changed, "
                                "expired or not this tool's): open the activity from the course again") from None
        claims = dict(decoded.claims)
        if claims.get("kind") != kind:
            raise LaunchRefused("invalid_launch_session", f"this launch session is not for a {kind} call", 403)
        return claims
