"""The internal hop's signature: what a replica adds to a call it passes on, and the check of it.

A replica that passes a call to another (``forwarding.py``) sends, without the client's API key::

    X-Wasm-Runner-Internal-Tenant   the tenant it authenticated (percent-encoded)
    X-Wasm-Runner-Internal-Client   the client's address (for the owner's audit log)
    X-Wasm-Runner-Internal-User     the user inside the tenant the call is for: empty for none,
                                    else ``id:`` or ``token:`` (how the user was named: a plain
                                    id, or a signed user token) and the user id, percent-encoded
    X-Wasm-Runner-Internal-Replica  the replica_id the directory names (the owner's process)
    X-Wasm-Runner-Internal-Time     Unix time of signing
    X-Wasm-Runner-Internal-Nonce    random, once
    X-Wasm-Runner-Internal-Mac      hex HMAC-SHA256(cluster_secret, "v2", method, path?query,
                                    tenant, client, replica, time, nonce, user, sha256(body))

``Signer.check`` accepts such a call only with a valid MAC made within ``WINDOW_SECONDS`` and a
nonce not seen before (at most ``MAX_NONCES`` remembered). An API key alone cannot pass: the MAC
needs the cluster secret, which clients never hold. The user is signed with the rest, so the owner
takes the per-user lease, hands host functions the user and audits it as the replica that
authenticated the call did. A call without the user header (a replica of an older version, during
a rolling upgrade) is checked against the MAC without it (the version-1 message, without the "v2"
line and the user): it is then for no user, as before; a user header cannot be added to or taken
from a signed call without the MAC failing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

__all__ = [
    "HEADER_PREFIX", "InternalCall", "MAX_NONCES", "Signer", "WINDOW_SECONDS", "H_REPLICA", "H_USER",
    "sign", "target_of",
]  # fmt: skip

HEADER_PREFIX = "x-wasm-runner-internal-"
H_TENANT = HEADER_PREFIX + "tenant"
H_CLIENT = HEADER_PREFIX + "client"
H_USER = HEADER_PREFIX + "user"
H_REPLICA = HEADER_PREFIX + "replica"
H_TIME = HEADER_PREFIX + "time"
H_NONCE = HEADER_PREFIX + "nonce"
H_MAC = HEADER_PREFIX + "mac"

WINDOW_SECONDS = 5.0  # a signature older (or newer: clock skew) than this is refused
MAX_NONCES = 100_000  # nonces remembered for the window (replays refused); bounded


def sign(
    secret: str,
    *,
    method: str,
    target: str,
    tenant: str,
    client: str,
    replica: str,
    timestamp: str,
    nonce: str,
    body: bytes,
    user: str | None = None,
) -> str:
    """The hop's MAC: hex HMAC-SHA256 with the cluster secret over every field it vouches for
    (``target`` is the path with its query string; ``tenant`` and ``user`` as sent). With a
    ``user`` field (even empty) the message is version 2 (it starts with the line ``v2``, which no
    method is); without, version 1, as replicas before the user was carried signed."""
    fields = [method.upper(), target, tenant, client, replica, timestamp, nonce]
    if user is not None:
        fields = ["v2", *fields, user]
    message = "\n".join([*fields, hashlib.sha256(body).hexdigest()])
    return hmac.new(secret.encode("utf-8"), message.encode("utf-8"), hashlib.sha256).hexdigest()


def target_of(path: str, query: bytes | str) -> str:
    """The path with its query string, as signed."""
    query = query.decode("latin-1") if isinstance(query, bytes) else query
    return f"{path}?{query}" if query else path


@dataclass(frozen=True)
class InternalCall:
    """A request another replica passed on, its signature checked: who the caller was (the
    tenant, the client's address and the user inside the tenant: its id, or None, and whether it
    was named by a signed user token)."""

    tenant: str
    client: str
    user: str | None = None
    user_token: bool = False


def user_field(user: str | None, user_token: bool = False) -> str:
    """The ``X-Wasm-Runner-Internal-User`` value for ``user`` (empty: none)."""
    if user is None:
        return ""
    return ("token:" if user_token else "id:") + quote(user, safe="")


def read_user_field(value: str) -> tuple[str | None, bool] | None:
    """(the user id or None, named by a token) from a signed user field; None when malformed."""
    if value == "":
        return None, False
    how, sep, rest = value.partition(":")
    if not sep or how not in ("id", "token") or not rest:
        return None
    return unquote(rest), how == "token"


class Signer:
    """One replica's signing with the cluster secret: headers for the calls it passes on, and the
    check of the calls passed to it (with the nonces it has seen)."""

    def __init__(self, secret: str) -> None:
        self._secret = secret
        self._nonces: dict[str, float] = {}

    def __repr__(self) -> str:  # never the secret
        return "Signer(...)"

    def headers(
        self, *, method: str, target: str, tenant: str, client: str, replica: str, body: bytes,
        user: str | None = None, user_token: bool = False,
    ) -> dict[str, str]:
        """The internal headers for a call to the process ``replica`` for ``tenant`` and its
        ``user`` (an id, or None; ``user_token``: named by a signed token), signed now."""
        fields = {
            "tenant": quote(tenant, safe=""),
            "client": client,
            "replica": replica,
            "timestamp": f"{time.time():.3f}",
            "nonce": secrets.token_urlsafe(18),
            "user": user_field(user, user_token),
        }
        mac = sign(self._secret, method=method, target=target, body=body, **fields)
        return {
            H_TENANT: fields["tenant"],
            H_CLIENT: fields["client"],
            H_USER: fields["user"],
            H_REPLICA: fields["replica"],
            H_TIME: fields["timestamp"],
            H_NONCE: fields["nonce"],
            H_MAC: mac,
        }

    def check(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> InternalCall | str:
        """The call these headers vouch for, or why they do not (a short reason for the log)."""
        values = {name: headers.get(name) for name in (H_TENANT, H_CLIENT, H_REPLICA, H_TIME,
                                                       H_NONCE, H_MAC)}  # fmt: skip
        if any(v is None for v in values.values()):
            return "internal headers incomplete"
        try:
            signed_at = float(values[H_TIME] or "")
        except ValueError:
            return "bad timestamp"
        if not abs(time.time() - signed_at) <= WINDOW_SECONDS:
            return "signature outside the time window"
        user_value = headers.get(H_USER)  # absent: a replica of an older version (no user)
        expected = sign(
            self._secret, method=method, target=target, tenant=values[H_TENANT] or "",
            client=values[H_CLIENT] or "", replica=values[H_REPLICA] or "",
            timestamp=values[H_TIME] or "", nonce=values[H_NONCE] or "", body=body,
            user=user_value,
        )  # fmt: skip
        if not hmac.compare_digest(expected.encode(), (values[H_MAC] or "").encode("latin-1")):
            return "bad signature"
        user = read_user_field(user_value or "")
        if user is None:
            return "bad user field"
        if not self._first_use(values[H_NONCE] or "", signed_at):
            return "replayed nonce"
        return InternalCall(tenant=unquote(values[H_TENANT] or ""), client=values[H_CLIENT] or "",
                            user=user[0], user_token=user[1])  # fmt: skip

    def _first_use(self, nonce: str, signed_at: float) -> bool:
        now = time.time()
        if len(self._nonces) >= MAX_NONCES:
            self._nonces = {n: t for n, t in self._nonces.items() if t > now}
            if len(self._nonces) >= MAX_NONCES:
                return False
        if nonce in self._nonces:
            return False
        self._nonces[nonce] = signed_at + 2 * WINDOW_SECONDS
        return True
