"""Assignment and Grade Services 2.0, the tool's side: an access token by OAuth2 client
credentials with a JWT assertion signed with the tool's key (cached until shortly before it
expires), the line item found (by ``resourceId`` = the exercise) or created, and the score
posted. Every URL called is the platform's registered token URL or a grade-service URL on one of
its ``service_origins`` (``Platform.serves``), never another one a message names; each call is
reported to ``on_call`` (the audit log) with its method, path and status, never a token, a key
or a grade."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
from joserfc import jwt
from joserfc.jwk import RSAKey

from ..errors import WasmRunnerError
from .claims import SCOPE_LINEITEM, SCOPE_SCORE
from .registration import Platform

__all__ = ["GradeError", "GradeService", "Score", "scores_url"]

SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
LINEITEMS_TYPE = "application/vnd.ims.lis.v2.lineitemcontainer+json"
TOKEN_MARGIN_SECONDS = 30


class GradeError(WasmRunnerError):
    """A grade not delivered: ``retry`` says whether trying again later may help."""

    def __init__(self, message: str, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


@dataclass(frozen=True)
class Score:
    user: str  # the platform's user id (sub)
    exercise: str
    title: str
    resource_link: str
    lineitem: str | None  # the launch's line item URL, when it named one
    lineitems: str | None  # the launch's line items container URL
    given: float
    maximum: float
    timestamp: str  # ISO 8601, when the check ended

    def body(self) -> dict[str, Any]:
        return {
            "userId": self.user, "scoreGiven": self.given, "scoreMaximum": self.maximum,
            "activityProgress": "Completed", "gradingProgress": "FullyGraded", "timestamp": self.timestamp,
        }  # fmt: skip


def scores_url(lineitem: str) -> str:
    """``{lineitem}/scores``, the line item's query kept (AGS 2.0, 3.4)."""
    parts = urlsplit(lineitem)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/scores"))


class GradeService:
    def __init__(self, keys: Callable[[], list[RSAKey]],
                 on_call: Callable[[Platform, str, str, int | str], None],
                 client: httpx.AsyncClient | None = None) -> None:  # fmt: skip
        self._keys = keys
        self._on_call = on_call
        self._client = client or httpx.AsyncClient(timeout=20.0, follow_redirects=False, trust_env=False)
        self._tokens: dict[str, tuple[float, str]] = {}

    async def close(self) -> None:
        await self._client.aclose()

    async def _call(self, platform: Platform, method: str, url: str, **kw: Any) -> httpx.Response:
        if url != platform.token_url and not platform.serves(url):
            self._on_call(platform, method, urlsplit(url).path, "refused_unregistered_url")
            raise GradeError(f"{url!r} is not a URL of platform {platform.name!r} (service_origins)", retry=False)
        try:
            r = await self._client.request(method, url, **kw)
        except httpx.HTTPError as exc:
            self._on_call(platform, method, urlsplit(url).path, type(exc).__name__)
            raise GradeError(f"platform {platform.name!r} did not answer ({type(exc).__name__})", retry=True) from None
        self._on_call(platform, method, urlsplit(url).path, r.status_code)
        if r.status_code == 401:
            self._tokens.pop(platform.name, None)
        if r.status_code >= 400:
            retry = r.status_code in (401, 408, 425, 429) or r.status_code >= 500
            raise GradeError(f"platform {platform.name!r} answered {r.status_code} to {method} "
                             f"{urlsplit(url).path}", retry=retry)  # fmt: skip
        return r

    def assertion(self, platform: Platform) -> str:
        """The client assertion (IMS Security Framework 4.1.1): signed with the tool's key."""
        key = self._keys()[0]
        now = int(time.time())
        claims = {"iss": platform.client_id, "sub": platform.client_id, "aud": platform.token_url,
                  "iat": now, "exp": now + 300, "jti": secrets.token_urlsafe(16)}  # fmt: skip
        return jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "JWT"}, claims, key, algorithms=["RS256"])

    async def token(self, platform: Platform) -> str:
        cached = self._tokens.get(platform.name)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        form = {
            "grant_type": "client_credentials",
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": self.assertion(platform),
            "scope": f"{SCOPE_LINEITEM} {SCOPE_SCORE}",
        }
        r = await self._call(platform, "POST", platform.token_url, data=form)
        try:
            answer = r.json()
            token = str(answer["access_token"])
            lifetime = float(answer.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError):
            raise GradeError(f"platform {platform.name!r}'s token answer is not OAuth2 JSON", retry=True) from None
        self._tokens[platform.name] = (time.monotonic() + max(0.0, lifetime - TOKEN_MARGIN_SECONDS), token)
        return token

    async def line_item(self, platform: Platform, score: Score, token: str) -> str:
        """The line item's URL: the launch's own, else found by resourceId, else created."""
        if score.lineitem:
            return score.lineitem
        if not score.lineitems:
            raise GradeError("the launch named no line item and no line items service", retry=False)
        auth = {"Authorization": f"Bearer {token}"}
        sep = "&" if "?" in score.lineitems else "?"
        query = urlencode({"resource_link_id": score.resource_link, "resource_id": score.exercise})
        r = await self._call(platform, "GET", f"{score.lineitems}{sep}{query}",
                             headers={**auth, "Accept": LINEITEMS_TYPE})  # fmt: skip
        try:
            found = [i for i in r.json() if isinstance(i, dict) and i.get("resourceId") == score.exercise
                     and i.get("resourceLinkId", score.resource_link) == score.resource_link]  # fmt: skip
        except (ValueError, TypeError):
            found = []
        if found and isinstance(found[0].get("id"), str):
            return str(found[0]["id"])
        item = {"scoreMaximum": score.maximum, "label": score.title, "resourceId": score.exercise,
                "resourceLinkId": score.resource_link}  # fmt: skip
        r = await self._call(platform, "POST", score.lineitems, json=item,
                             headers={**auth, "Content-Type": LINEITEM_TYPE, "Accept": LINEITEM_TYPE})  # fmt: skip
        try:
            return str(r.json()["id"])
        except (ValueError, KeyError, TypeError):
            raise GradeError("the platform's new line item has no id", retry=True) from None

    async def post(self, platform: Platform, score: Score) -> None:
        """The score in the platform's gradebook, or ``GradeError``."""
        token = await self.token(platform)
        lineitem = await self.line_item(platform, score, token)
        await self._call(platform, "POST", scores_url(lineitem), json=score.body(),
                         headers={"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE})  # fmt: skip
