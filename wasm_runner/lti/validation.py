"""The platform's ``id_token`` validated (LTI 1.3 Core, section 5.1.3; IMS Security Framework
5.1.3): RS256 only (``alg: none`` and HS256 signed with the public key are refused before any
key is looked at), the signature with the key its ``kid`` names in the registered platform's JWKS
(fetched from the registered URL only, cached, fetched again once for an unknown ``kid``),
``iss`` and ``aud`` registered, ``azp``, ``exp`` and ``iat``, the ``nonce`` the login kept, the
deployment id registered, the message type and LTI version. The JOSE work is joserfc's."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from joserfc import jws, jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from ..errors import WasmRunnerError
from .claims import DEPLOYMENT_ID, LTI_VERSION, MESSAGE_TYPE, RESOURCE_LINK, VERSION
from .registration import LtiSettings, Platform

__all__ = ["JwksCache", "LaunchRefused", "ValidLaunch", "validate_id_token"]

MESSAGE_TYPES = ("LtiResourceLinkRequest", "LtiDeepLinkingRequest")
LEEWAY_SECONDS = 60
JWKS_SECONDS = 600.0  # a platform's keys are fetched again after this long
MAX_TOKEN_CHARS = 64 * 1024


class LaunchRefused(WasmRunnerError):
    """A launch (or a message) refused: ``code`` for logs and tests, ``message`` for the person."""

    def __init__(self, code: str, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class ValidLaunch:
    platform: Platform
    claims: dict[str, Any]

    @property
    def message_type(self) -> str:
        return str(self.claims[MESSAGE_TYPE])


class JwksCache:
    """Each registered platform's public keys, from its registered ``jwks_url`` only."""

    def __init__(self, fetch: Callable[[Platform], Awaitable[dict[str, Any]]]) -> None:
        self._fetch = fetch
        self._keys: dict[str, tuple[float, KeySet]] = {}
        self._lock = asyncio.Lock()

    async def key_set(self, platform: Platform, kid: str) -> KeySet:
        async with self._lock:
            cached = self._keys.get(platform.name)
            fresh = cached is not None and cached[0] > time.monotonic()
            if cached is not None and fresh and any(k.kid == kid for k in cached[1].keys):
                return cached[1]
            try:
                raw = await self._fetch(platform)
                keys = KeySet.import_key_set(raw)  # type: ignore[arg-type]
            except (httpx.HTTPError, ValueError, JoseError, TypeError, KeyError) as exc:
                raise LaunchRefused("platform_keys_unavailable",
                                    f"the keys of platform {platform.name!r} could not be read from its "
                                    f"registered JWKS URL ({type(exc).__name__})", 502) from None  # fmt: skip
            self._keys[platform.name] = (time.monotonic() + JWKS_SECONDS, keys)
            return keys


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS or token.count(".") != 2:
        raise LaunchRefused("invalid_id_token", "the launch carries no valid id_token (a JWT)", 400)
    try:
        obj = jws.extract_compact(token.encode("ascii"))
        payload = json.loads(obj.payload)
    except (ValueError, JoseError, UnicodeError):
        raise LaunchRefused("invalid_id_token", "the id_token cannot be decoded", 400) from None
    if not isinstance(payload, dict):
        raise LaunchRefused("invalid_id_token", "the id_token's payload is not a JSON object", 400)
    return dict(obj.headers()), payload


def _audiences(payload: dict[str, Any]) -> list[str]:
    aud = payload.get("aud")
    if isinstance(aud, str):
        return [aud]
    if isinstance(aud, list) and all(isinstance(a, str) for a in aud):
        return list(aud)
    raise LaunchRefused("wrong_audience", "the id_token names no audience (aud)")


async def validate_id_token(token: str, settings: LtiSettings, keys: JwksCache, *,
                            expected_nonce: str, expected_platform: str,
                            now: float | None = None) -> ValidLaunch:  # fmt: skip
    """The launch's claims, or ``LaunchRefused`` naming what is wrong. ``expected_nonce`` and
    ``expected_platform`` are what the login (``state``) kept server-side."""
    header, payload = _unverified(token)
    alg = header.get("alg")
    if alg != "RS256":  # none, HS256 with the public key as secret, anything else: never
        raise LaunchRefused("wrong_algorithm", f"the id_token is signed with {alg!r}; only RS256 is accepted")
    issuer = payload.get("iss")
    if not isinstance(issuer, str):
        raise LaunchRefused("unknown_platform", "the id_token names no issuer (iss)")
    audiences = _audiences(payload)
    platform = next((p for a in audiences if (p := settings.find(issuer, a)) is not None), None)
    if platform is None:
        if settings.find(issuer, None) is None:
            raise LaunchRefused("unknown_platform", f"no platform with issuer {issuer!r} is registered here")
        raise LaunchRefused("wrong_audience", f"the id_token is not for a client id registered for {issuer!r}")
    if platform.name != expected_platform:
        raise LaunchRefused("wrong_platform", "the id_token is from another platform than the login")
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise LaunchRefused("unknown_key", "the id_token's header names no key (kid)")
    key_set = await keys.key_set(platform, kid)
    if not any(k.kid == kid for k in key_set.keys):
        raise LaunchRefused("unknown_key", f"the id_token is signed with a key platform {platform.name!r} "
                            "does not publish")  # fmt: skip
    try:
        decoded = jwt.decode(token, key_set, algorithms=["RS256"])
    except JoseError:
        raise LaunchRefused("bad_signature", "the id_token's signature does not verify with the platform's key") from None
    claims = dict(decoded.claims)
    registry = jwt.JWTClaimsRegistry(now=int(time.time() if now is None else now), leeway=LEEWAY_SECONDS,
                                     iss={"essential": True, "value": platform.issuer},
                                     exp={"essential": True}, iat={"essential": True},
                                     sub={"essential": False})  # fmt: skip
    try:
        registry.validate(claims)
    except JoseError as exc:
        what = getattr(exc, "claim", "") or type(exc).__name__
        code = "expired" if "exp" in str(what) or "Expired" in type(exc).__name__ else "invalid_claims"
        raise LaunchRefused(code, f"the id_token is not valid now ({what}: {exc.description})") from None
    if len(audiences) > 1 or "azp" in claims:
        if claims.get("azp") != platform.client_id:
            raise LaunchRefused("wrong_audience", "the id_token's azp is not this tool's client id")
    if claims.get("nonce") != expected_nonce:
        raise LaunchRefused("nonce_mismatch", "the id_token's nonce is not the one this login made "
                            "(a replayed or foreign launch)")  # fmt: skip
    deployment = claims.get(DEPLOYMENT_ID)
    if deployment not in platform.deployment_ids:
        raise LaunchRefused("unknown_deployment", f"deployment {deployment!r} is not registered for "
                            f"platform {platform.name!r}")  # fmt: skip
    if claims.get(MESSAGE_TYPE) not in MESSAGE_TYPES:
        raise LaunchRefused("unsupported_message", f"message type {claims.get(MESSAGE_TYPE)!r} is not "
                            f"one this tool answers ({', '.join(MESSAGE_TYPES)})", 400)  # fmt: skip
    if claims.get(VERSION) != LTI_VERSION:
        raise LaunchRefused("unsupported_version", f"LTI version {claims.get(VERSION)!r}; this tool speaks "
                            f"{LTI_VERSION}", 400)  # fmt: skip
    if claims[MESSAGE_TYPE] == "LtiResourceLinkRequest":
        link = claims.get(RESOURCE_LINK)
        if not isinstance(link, dict) or not link.get("id"):
            raise LaunchRefused("invalid_claims", "the launch names no resource link", 400)
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise LaunchRefused("invalid_claims", "the launch names no user (sub): anonymous launches "
                                "get no grade here", 400)  # fmt: skip
    return ValidLaunch(platform, claims)
