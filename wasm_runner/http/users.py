"""Who inside a key: the user a request is for, so each student of a class gets a fair share of the
platform's one key.

A platform names its user in one of three ways:

- from its own server, an opaque id: the header ``X-Wasm-Runner-User`` (or ``user`` in a
  WebSocket's first message); the key's holder vouches for it;
- for a page that calls the API from the student's browser, a short-lived token the platform
  signs for that user with the key's ``user_token_secret``: the header
  ``X-Wasm-Runner-User-Token`` (or ``user_token`` in a WebSocket's first message). A student
  cannot take a classmate's id or mint new ones: a forged, expired or too long-lived token is
  refused (``401 invalid_user_token``), and a key with ``user_token_required`` refuses plain ids
  and requests without a token;
- the playground with ``--no-auth``: a random id per browser (best effort: a client can change it).

A token is ``<payload>.<signature>``, both base64url without padding: the payload is the JSON
``{"key": KEY_NAME, "sub": USER_ID, "exp": UNIX_SECONDS}`` and the signature is
HMAC-SHA256(secret, payload as ASCII). ``sign_user_token`` makes one; ``exp`` may be at most
``MAX_TOKEN_SECONDS`` ahead.

The id itself is never stored or logged: counts, rate windows, leases and the audit log use
``user_key``, an HMAC of the key's name and the id with a server secret (the cluster secret when
one is set, so every replica agrees; else a random secret of this process).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Mapping

from .errors import ApiError

__all__ = [
    "MAX_TOKEN_SECONDS", "USER_HEADER", "USER_TOKEN_HEADER", "UserIds", "sign_user_token",
    "verify_user_token",
]  # fmt: skip

USER_HEADER = "x-wasm-runner-user"
USER_TOKEN_HEADER = "x-wasm-runner-user-token"
MAX_TOKEN_SECONDS = 24 * 3600  # a token may live at most this long: short-lived, by rule
MAX_TOKEN_CHARS = 1024
_USER_ID = re.compile(r"[A-Za-z0-9._:@+=/-]{1,128}")


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign_user_token(secret: str, key_name: str, user: str, ttl_seconds: float = 3600) -> str:
    """A token for ``user`` of the key ``key_name``, valid ``ttl_seconds`` (what a platform's
    server does before it renders a page that calls the API from the browser)."""
    payload = json.dumps(
        {"key": key_name, "sub": user, "exp": int(time.time() + ttl_seconds)},
        separators=(",", ":"),
    ).encode()
    body = _b64(payload)
    sig = hmac.new(secret.encode(), body.encode("ascii"), hashlib.sha256).digest()
    return f"{body}.{_b64(sig)}"


def _invalid(why: str) -> ApiError:
    return ApiError(401, "invalid_user_token", f"the user token is not valid: {why}")


def verify_user_token(token: str, secret: str, key_name: str, now: float | None = None) -> str:
    """The user id in ``token``, or ``ApiError(401 invalid_user_token)`` when it is forged, for
    another key, expired, or lives longer than ``MAX_TOKEN_SECONDS``."""
    now = time.time() if now is None else now
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or token.count(".") != 1:
        raise _invalid("it is not a token")
    body, sig = token.split(".")
    expected = hmac.new(secret.encode(), body.encode("ascii", "replace"), hashlib.sha256).digest()
    try:
        given = _unb64(sig)
        payload = json.loads(_unb64(body))
    except (ValueError, UnicodeDecodeError):
        raise _invalid("it is not a token") from None
    if not hmac.compare_digest(expected, given):
        raise _invalid("its signature does not match")
    if not isinstance(payload, dict) or payload.get("key") != key_name:
        raise _invalid("it was signed for another key")
    exp, user = payload.get("exp"), payload.get("sub")
    if isinstance(exp, bool) or not isinstance(exp, int) or exp <= now:
        raise _invalid("it has expired")
    if exp > now + MAX_TOKEN_SECONDS:
        raise _invalid(f"it is valid for more than {MAX_TOKEN_SECONDS // 3600} hours")
    return check_user_id(user)


def check_user_id(user: object) -> str:
    """``user`` if it is a valid opaque id (1-128 of ``A-Z a-z 0-9 . _ : @ + = / -``), else 422."""
    if not isinstance(user, str) or not _USER_ID.fullmatch(user):
        raise ApiError(
            422, "invalid_user",
            "a user id is 1 to 128 characters of A-Z, a-z, 0-9 and . _ : @ + = / -",
        )  # fmt: skip
    return user


class UserIds:
    """Reads the user of a request and turns it into ``user_key`` (never the id itself)."""

    def __init__(self, server_secret: str | None) -> None:
        self._secret = (server_secret or secrets.token_hex(32)).encode()

    def user_key(self, tenant: str, user: str) -> str:
        mac = hmac.new(self._secret, f"{tenant}\0{user}".encode(), hashlib.sha256)
        return mac.hexdigest()[:24]

    def read(
        self,
        headers: Mapping[str, str],
        tenant: str,
        *,
        token_secret: str | None,
        token_required: bool,
        user: str | None = None,
        user_token: str | None = None,
    ) -> str | None:
        """The ``user_key`` of this request's user, None without one; 401/422 when refused."""
        found = self.identify(headers, tenant, token_secret=token_secret, token_required=token_required,
                              user=user, user_token=user_token)
        return None if found is None else found[1]

    def identify(
        self,
        headers: Mapping[str, str],
        tenant: str,
        *,
        token_secret: str | None,
        token_required: bool,
        user: str | None = None,
        user_token: str | None = None,
    ) -> tuple[str, str] | None:
        """(the user's id, its ``user_key``) for this request, None without a user; 401/422 when
        refused. The id goes to the app's own endpoints only (host functions), never further."""
        token = user_token if user_token is not None else headers.get(USER_TOKEN_HEADER)
        plain = user if user is not None else headers.get(USER_HEADER)
        if token is not None:
            if token_secret is None:
                raise ApiError(
                    401, "invalid_user_token",
                    "user tokens are not enabled for this key (it has no user_token_secret)",
                )  # fmt: skip
            user_id = verify_user_token(token, token_secret, tenant)
            return user_id, self.user_key(tenant, user_id)
        if token_required:
            raise ApiError(
                401, "user_token_required",
                "this key needs a signed user token with every request "
                f"({USER_TOKEN_HEADER.title()} or user_token)",
            )  # fmt: skip
        if plain is None:
            return None
        user_id = check_user_id(plain)
        return user_id, self.user_key(tenant, user_id)
