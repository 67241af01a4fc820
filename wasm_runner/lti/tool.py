"""The tool: one object the HTTP routes call. ``login`` (OIDC third-party-initiated login: the
state and nonce kept server-side, the browser sent to the platform's registered auth URL),
``launch`` (the ``id_token`` validated, the state taken once, a launch session signed),
``deep_link_answer`` (the signed ``LtiDeepLinkingResponse``), ``grade`` (a server-side check's
score into the outbox, best or latest attempt) and the URLs an admin registers (``urls``)."""

from __future__ import annotations

import dataclasses
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, UTC
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from joserfc import jwt
from joserfc.jwk import RSAKey

from ..exercises.model import GradePolicy
from ..outbox import Entry, NotYet, Store, Undeliverable, Worker
from ..outbox.worker import Outcome
from .ags import GradeError, GradeService, Score
from .claims import (
    AGS_ENDPOINT, CONTENT_ITEMS, CUSTOM, DATA, DEEP_LINKING_SETTINGS, DEPLOYMENT_ID, LTI_VERSION,
    MESSAGE_TYPE, RESOURCE_LINK, SCOPE_LINEITEM, SCOPE_SCORE, TARGET_LINK_URI, VERSION,
)  # fmt: skip
from .onetime import OneTimeStore
from .registration import LtiSettings, Platform
from .session import LaunchSessions
from .validation import JwksCache, LaunchRefused, ValidLaunch, validate_id_token

__all__ = ["SENT_KEEP_SECONDS", "GradeReceipt", "LtiTool", "Launched", "ToolUrls", "canvas_configuration"]

log = logging.getLogger("wasm_runner.lti")
SENT_KEEP_SECONDS = 24 * 3600.0  # a sent score's trace: the page says "sent" this long
STATE_SECONDS = 600  # a login's state and nonce wait this long for the launch
MAX_STARTER_CHARS = 64 * 1024  # a playground's starter code


@dataclass(frozen=True)
class ToolUrls:
    """What an admin types into the LMS for this tool."""

    login: str
    launch: str
    deep_linking: str
    jwks: str
    redirect_uris: tuple[str, ...]
    canvas_json: str  # the tool's configuration as Canvas reads it

    @classmethod
    def under(cls, base: str) -> ToolUrls:
        base = base.rstrip("/")
        launch = f"{base}/lti/launch"
        return cls(f"{base}/lti/login", launch, launch, f"{base}/.well-known/jwks.json", (launch,),
                   f"{base}/lti/canvas.json")  # fmt: skip


def canvas_configuration(urls: ToolUrls, title: str = "wasm-runner") -> dict[str, Any]:
    """The tool's LTI 1.3 configuration in Canvas's JSON form (a developer key's "Enter URL"
    method): the login, launch and JWKS URLs, the grade scopes, and two placements (assignment
    and link selection) that open the exercise picker (deep linking)."""
    placements = [
        {"placement": place, "message_type": "LtiDeepLinkingRequest", "target_link_uri": urls.deep_linking}
        for place in ("assignment_selection", "link_selection")
    ]
    return {
        "title": title,
        "description": "Python exercises checked on the server; grades go to the gradebook.",
        "oidc_initiation_url": urls.login,
        "target_link_uri": urls.launch,
        "public_jwk_url": urls.jwks,
        "scopes": [SCOPE_LINEITEM, SCOPE_SCORE],
        "extensions": [{"platform": "canvas.instructure.com", "privacy_level": "anonymous",
                        "settings": {"placements": placements}}],  # fmt: skip
    }


@dataclass(frozen=True)
class Launched:
    """A validated launch: the session token for the page, and what it is for."""

    kind: Literal["resource", "deep_link"]
    session: str
    claims: dict[str, Any]  # the session's claims
    title: str = ""  # the resource link's title
    starter: str = ""  # a playground's starter code (the ``starter`` custom parameter)


@dataclass(frozen=True)
class GradeReceipt:
    state: Literal["queued", "kept_best", "no_grade_service"]
    outbox_id: str | None = None


class LtiTool:
    def __init__(self, settings: LtiSettings, *, keys: Callable[[], list[RSAKey]], store: OneTimeStore,
                 outbox: Store,
                 on_call: Callable[[Platform, str, str, int | str], None],
                 session_issuer: str = "wasm-runner") -> None:  # fmt: skip
        self.settings = settings
        self._keys = keys
        self.store = store
        self._http = httpx.AsyncClient(timeout=10.0, follow_redirects=False, trust_env=False)
        self._on_call = on_call
        self.jwks = JwksCache(self._fetch_jwks)
        self.sessions = LaunchSessions(keys, session_issuer, settings.launch_seconds)
        self.grades = GradeService(keys, on_call)
        # the scores waiting for their platform (wasm_runner.outbox), delivered one after the other
        self.outbox = Worker(outbox, self._deliver, name="LTI", retry_seconds=settings.retry_seconds,
                             retry_max_seconds=settings.retry_max_seconds, report=_report)  # fmt: skip

    async def close(self) -> None:
        await self._http.aclose()
        await self.grades.close()

    def frame_origins(self) -> tuple[str, ...]:
        """The origins that may frame the tool's pages: the registered platforms'."""
        from .registration import origin_of

        found = [origin_of(p.auth_url) for p in self.settings.platforms]
        found += [o for p in self.settings.platforms for o in p.service_origins]
        return tuple(dict.fromkeys(found))

    async def _fetch_jwks(self, platform: Platform) -> dict[str, Any]:
        r = await self._http.get(platform.jwks_url)
        self._on_call(platform, "GET", urlsplit(platform.jwks_url).path, r.status_code)
        r.raise_for_status()
        found = r.json()
        if not isinstance(found, dict):
            raise ValueError("not a JWKS")
        return found

    # -- login and launch ----------------------------------------------------------------
    async def login(self, params: dict[str, str], launch_url: str) -> str:
        """The platform's authorisation URL to send the browser to (OIDC login initiation). The
        redirect URI is always this tool's ``launch_url``, whatever ``target_link_uri`` the
        request names (the launch's own claims say what opens)."""
        issuer = params.get("iss", "")
        client_id = params.get("client_id") or None
        platform = self.settings.find(issuer, client_id)
        if platform is None:
            raise LaunchRefused("unknown_platform", f"no platform with issuer {issuer!r}"
                                + (f" and client id {client_id!r}" if client_id else "") + " is registered here")
        login_hint = params.get("login_hint")
        if not login_hint:
            raise LaunchRefused("invalid_login", "the login request has no login_hint", 400)
        state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        await self.store.put("state:" + state, {"nonce": nonce, "platform": platform.name}, STATE_SECONDS)
        query = {
            "scope": "openid", "response_type": "id_token", "response_mode": "form_post",
            "prompt": "none", "client_id": platform.client_id, "redirect_uri": launch_url,
            "state": state, "nonce": nonce, "login_hint": login_hint,
        }  # fmt: skip
        if params.get("lti_message_hint"):
            query["lti_message_hint"] = params["lti_message_hint"]
        sep = "&" if "?" in platform.auth_url else "?"
        return f"{platform.auth_url}{sep}{urlencode(query)}"

    async def launch(self, form: dict[str, str]) -> Launched:
        """A launch POSTed by the platform (``id_token`` and ``state``), validated; its state is
        used up whatever the outcome (a second try with it is refused)."""
        state = form.get("state") or ""
        kept = await self.store.take("state:" + state) if state and len(state) < 200 else None
        if kept is None:
            raise LaunchRefused("invalid_state", "this launch's state is unknown, used already or expired: "
                                "open the activity from the course again")  # fmt: skip
        valid = await validate_id_token(form.get("id_token", ""), self.settings, self.jwks,
                                        expected_nonce=kept["nonce"], expected_platform=kept["platform"])  # fmt: skip
        if valid.message_type == "LtiDeepLinkingRequest":
            return self._deep_link_session(valid)
        return self._resource_session(valid)

    def _resource_session(self, valid: ValidLaunch) -> Launched:
        c = valid.claims
        exercise = _exercise_of(c)
        found = c.get(AGS_ENDPOINT)
        ags: dict[str, Any] = found if isinstance(found, dict) else {}
        lineitem = ags.get("lineitem") if isinstance(ags.get("lineitem"), str) else None
        lineitems = ags.get("lineitems") if isinstance(ags.get("lineitems"), str) else None
        for url in (lineitem, lineitems):
            if url is not None and not valid.platform.serves(url):
                raise LaunchRefused("unregistered_url", f"the launch names a grade service at {url!r}, "
                                    f"not on platform {valid.platform.name!r}'s registered origins", 400)  # fmt: skip
        scopes: list[Any] = ags["scope"] if isinstance(ags.get("scope"), list) else []
        claims = {
            "kind": "resource", "platform": valid.platform.name, "sub": c["sub"], "exercise": exercise,
            "deployment": c[DEPLOYMENT_ID], "resource_link": c[RESOURCE_LINK]["id"],
            "lineitem": lineitem, "lineitems": lineitems,
            "grades": exercise is not None and SCOPE_SCORE in scopes and (lineitem is not None or lineitems is not None),
        }  # fmt: skip
        named = c.get(CUSTOM)
        custom: dict[str, Any] = named if isinstance(named, dict) else {}
        starter: str = custom["starter"] if isinstance(custom.get("starter"), str) else ""
        title = c[RESOURCE_LINK].get("title")
        return Launched("resource", self.sessions.sign(claims), claims, title if isinstance(title, str) else "",
                        starter[:MAX_STARTER_CHARS])  # fmt: skip

    def _deep_link_session(self, valid: ValidLaunch) -> Launched:
        settings = valid.claims.get(DEEP_LINKING_SETTINGS)
        if not isinstance(settings, dict) or not isinstance(settings.get("deep_link_return_url"), str):
            raise LaunchRefused("invalid_claims", "the deep-linking request has no deep_link_return_url", 400)
        url = settings["deep_link_return_url"]
        if not valid.platform.serves(url):
            raise LaunchRefused("unregistered_url", f"the deep-linking return URL {url!r} is not on platform "
                                f"{valid.platform.name!r}'s registered origins", 400)  # fmt: skip
        claims = {
            "kind": "deep_link", "platform": valid.platform.name, "sub": valid.claims.get("sub"),
            "deployment": valid.claims[DEPLOYMENT_ID], "return_url": url, "data": settings.get("data"),
        }  # fmt: skip
        return Launched("deep_link", self.sessions.sign(claims), claims)

    # -- deep linking ----------------------------------------------------------------------
    def deep_link_answer(self, session: dict[str, Any], item: dict[str, Any]) -> tuple[str, str]:
        """The return URL and the signed ``LtiDeepLinkingResponse`` holding ``item``."""
        platform = self._platform(session)
        key = self._keys()[0]
        now = int(time.time())
        body: dict[str, Any] = {
            "iss": platform.client_id, "aud": platform.issuer, "iat": now, "exp": now + 600,
            "nonce": secrets.token_urlsafe(16), MESSAGE_TYPE: "LtiDeepLinkingResponse",
            VERSION: LTI_VERSION, DEPLOYMENT_ID: session["deployment"], CONTENT_ITEMS: [item],
        }  # fmt: skip
        if session.get("data") is not None:
            body[DATA] = session["data"]
        token = jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "JWT"}, body, key, algorithms=["RS256"])
        return str(session["return_url"]), token

    # -- grades ----------------------------------------------------------------------------
    def _platform(self, session: dict[str, Any]) -> Platform:
        platform = self.settings.named(str(session.get("platform")))
        if platform is None:  # the registration was removed since the launch
            raise LaunchRefused("unknown_platform", "the platform of this launch is no longer registered", 403)
        return platform

    async def grade(self, session: dict[str, Any], *, title: str, score: float, total: int,
                    counts: GradePolicy | None = None) -> GradeReceipt:
        """A server-side check's score (``score``: the weighted share passed, 0 to 1, of
        ``total`` checks) for the launched student: into the outbox (never waiting for the
        platform), unless the best attempt counts and this one is not better. ``counts``: the
        exercise's own choice of the attempt that counts (None: the server's ``[lti] grade``).
        The platform gets ``score * total`` out of ``total`` (with equal weights: the checks
        passed)."""
        platform = self._platform(session)
        if not session.get("grades") or total <= 0:
            return GradeReceipt("no_grade_service")
        exercise = str(session["exercise"])
        if self.settings.grade_for(counts) == "best":
            key = f"{platform.name}|{session['resource_link']}|{session['sub']}"
            if not await self.store.raise_to(key, score):
                return GradeReceipt("kept_best")
        sent = Score(
            user=str(session["sub"]), exercise=exercise, title=title, resource_link=str(session["resource_link"]),
            lineitem=session.get("lineitem"), lineitems=session.get("lineitems"), given=round(score * total, 4),
            maximum=float(total), timestamp=datetime.now(UTC).isoformat(timespec="milliseconds"),
        )  # fmt: skip
        entry = await self.outbox.put({"platform": platform.name, "score": dataclasses.asdict(sent)})
        return GradeReceipt("queued", entry.id)

    async def _deliver(self, entry: Entry) -> str:
        """One attempt at a queued score (an outbox entry): ``NotYet`` when trying again later
        may help (the platform down, slow, 401/408/425/429), else ``Undeliverable``."""
        name = str(entry.payload["platform"])
        platform = self.settings.named(name)
        if platform is None:
            raise Undeliverable(f"platform {name!r} is no longer registered")
        try:
            await self.grades.post(platform, Score(**entry.payload["score"]))
        except GradeError as exc:
            raise (NotYet if exc.retry else Undeliverable)(str(exc)) from None
        return "sent"


def _report(outcome: Outcome, entry: Entry, detail: str, error: BaseException | None) -> None:
    """The outbox's outcomes in the log (each platform call is in the audit log already)."""
    platform = entry.payload.get("platform")
    if outcome == "retry":
        log.info("score %s not delivered (attempt %d): %s; next try in %.1f s", entry.id, entry.attempts, detail,
                 entry.due - time.time())  # fmt: skip
    elif outcome != "sent":
        log.warning("score %s refused for good by platform %r: %s", entry.id, platform, detail)


def _exercise_of(claims: dict[str, Any]) -> str | None:
    """The exercise a launch opens: the ``exercise`` custom parameter (what deep linking sets),
    else ``?exercise=`` on the target link URI; None: the playground."""
    custom = claims.get(CUSTOM)
    if isinstance(custom, dict) and isinstance(custom.get("exercise"), str) and custom["exercise"]:
        return str(custom["exercise"])
    target = claims.get(TARGET_LINK_URI)
    if isinstance(target, str):
        found = parse_qs(urlsplit(target).query).get("exercise")
        if found:
            return found[0]
    return None
