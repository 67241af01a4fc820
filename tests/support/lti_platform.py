"""An independent LTI 1.3 platform (an LMS) for the tests: the PyPI library ``lti1p3platform``
(its registration, OIDC login, message launch with Deep Linking and AGS claims, access tokens
and deep-linking answers) behind a small Starlette app served by a real uvicorn on 127.0.0.1
with its own RSA key. Its course page frames the tool; its gradebook (line items and scores,
AGS 2.0) records what the tool posts with a token the platform issued; ``down`` makes its
services answer 503 (an LMS that is down)."""

from __future__ import annotations

import html
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import uvicorn
from jwcrypto.jwk import JWK  # type: ignore[import-untyped]
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract  # type: ignore[import-untyped]
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract  # type: ignore[import-untyped]
from lti1p3platform.oidc_login import OIDCLoginAbstract  # type: ignore[import-untyped]
from lti1p3platform.registration import Registration  # type: ignore[import-untyped]
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from tests.support.live_server import wait_until

__all__ = ["LtiPlatform", "lti_platform", "new_rsa_pem"]

CLIENT_ID = "wasm-runner-tool"
DEPLOYMENT = "deployment-1"
STUDENT_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
TEACHER_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"


def new_rsa_pem() -> tuple[str, str]:
    """(private, public) PEM of a new RSA key."""
    key = JWK.generate(kty="RSA", size=2048)
    return key.export_to_pem(private_key=True, password=None).decode(), key.export_to_pem().decode()


@dataclass
class Gradebook:
    lineitems: dict[str, dict[str, Any]] = field(default_factory=dict)
    scores: list[dict[str, Any]] = field(default_factory=list)
    deep_links: list[list[dict[str, Any]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class LtiPlatform:
    url: str
    tool_url: str
    private_pem: str
    public_pem: str
    gradebook: Gradebook
    down: bool = False
    refused_tokens: int = 0

    @property
    def issuer(self) -> str:
        return self.url

    def registration(self) -> Registration:
        return (Registration().set_iss(self.issuer).set_client_id(CLIENT_ID).set_deployment_id(DEPLOYMENT)
                .set_oidc_login_url(f"{self.tool_url}/lti/login").set_launch_url(f"{self.tool_url}/lti/launch")
                .set_deeplink_launch_url(f"{self.tool_url}/lti/launch")
                .set_tool_key_set_url(f"{self.tool_url}/.well-known/jwks.json")
                .set_platform_private_key(self.private_pem).set_platform_public_key(self.public_pem))

    def config(self) -> LTI1P3PlatformConfAbstract:
        platform = self

        class Conf(LTI1P3PlatformConfAbstract):  # type: ignore[misc]
            def init_platform_config(self, **kwargs: Any) -> None:
                pass

            def get_registration_by_params(self, **kwargs: Any) -> Registration:
                return platform.registration()

        conf = Conf()
        conf.get_registration()
        return conf

    def scores_for(self, user: str) -> list[dict[str, Any]]:
        with self.gradebook.lock:
            return [s for s in self.gradebook.scores if s["userId"] == user]

    def toml(self, api_key: str | None = None, name: str = "course-lms") -> dict[str, Any]:
        """The tool's ``[[lti.platforms]]`` entry for this platform."""
        entry: dict[str, Any] = {"name": name, "issuer": self.issuer, "client_id": CLIENT_ID,
                                 "deployment_ids": [DEPLOYMENT], "auth_url": f"{self.url}/auth",
                                 "token_url": f"{self.url}/token", "jwks_url": f"{self.url}/jwks"}  # fmt: skip
        if api_key:
            entry["api_key"] = api_key
        return entry


def _auto_post(url: str, fields: dict[str, str]) -> HTMLResponse:
    inputs = "".join(f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in fields.items())
    return HTMLResponse(f'<!doctype html><html><body><form id="f" method="post" action="{html.escape(url)}">{inputs}'
                        '</form><script>document.getElementById("f").submit()</script></body></html>')


def _app(p: LtiPlatform) -> Starlette:
    class Launch(LTIAdvantageMessageLaunchAbstract):  # type: ignore[misc]
        def get_preflight_response(self) -> dict[str, Any]:
            return dict(self._request.query_params)

        def render_launch_form(self, launch_data: dict[str, Any], **kwargs: Any) -> Response:
            return _auto_post(launch_data["launch_url"], {"id_token": launch_data["id_token"],
                                                          "state": launch_data["state"]})

    class Login(OIDCLoginAbstract):  # type: ignore[misc]
        def set_lti_message_hint(self, **kwargs: Any) -> None:
            self._lti_message_hint = json.dumps(kwargs)

        def get_redirect(self, url: str) -> RedirectResponse:
            return RedirectResponse(url, 302)

    def course(request: Request) -> HTMLResponse:
        q = urlencode(dict(request.query_params))
        return HTMLResponse(f'<!doctype html><html><body><h1>Course</h1><iframe id="tool" src="/start?{q}" '
                            'width="900" height="700"></iframe></body></html>')

    def start(request: Request) -> Response:  # the platform starts a launch: OIDC login initiation
        login = Login(request, p.config())
        hint = dict(request.query_params)
        login.set_lti_message_hint(**hint)
        return login.initiate_login(hint.get("user", "student-1"))  # type: ignore[no-any-return]

    def auth(request: Request) -> Response:  # the platform's authorisation endpoint
        hint = json.loads(request.query_params.get("lti_message_hint", "{}"))
        launch = Launch(request, p.config())
        user = hint.get("user", "student-1")
        if hint.get("kind") == "deep_link":
            launch.set_user_data(user, [TEACHER_ROLE])
            launch.set_dl(f"{p.url}/deep-link-return", accept_types={"ltiResourceLink"},
                          extra_data={"course": "c-1"})
        else:
            launch.set_user_data(user, [STUDENT_ROLE])
            launch.set_resource_link_claim(hint.get("link", "link-1"), title="Exercise")
            custom = {"starter": hint["starter"]} if "starter" in hint else {"exercise": hint.get("exercise", "greet")}
            launch.set_extra_claims({"https://purl.imsglobal.org/spec/lti/claim/custom": custom})
            launch.set_ags(f"{p.url}/lineitems", allow_creating_lineitems=True)
        launch.set_launch_context_claim("course-1", context_title="Course")
        return launch.lti_launch()  # type: ignore[no-any-return]

    def jwks(request: Request) -> JSONResponse:
        return JSONResponse(p.config().get_jwks())

    async def token(request: Request) -> JSONResponse:
        if p.down:
            return JSONResponse({"error": "down"}, 503)
        form = dict(await request.form())
        try:
            return JSONResponse(p.config().get_access_token(form))
        except Exception as exc:
            p.refused_tokens += 1
            return JSONResponse({"error": "invalid_client", "why": type(exc).__name__}, 401)

    def authorised(request: Request, scope: str) -> bool:
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
        try:
            return bool(p.config().validate_token(bearer, allowed_scopes=[scope]))
        except Exception:
            return False

    async def lineitems(request: Request) -> Response:
        if p.down:
            return JSONResponse({"error": "down"}, 503)
        if not authorised(request, "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"):
            return JSONResponse({"error": "unauthorised"}, 401)
        with p.gradebook.lock:
            if request.method == "GET":
                rid = request.query_params.get("resource_id")
                items = [i for i in p.gradebook.lineitems.values() if rid is None or i.get("resourceId") == rid]
                return JSONResponse(items)
            item = await request.json()
            item["id"] = f"{p.url}/lineitems/{len(p.gradebook.lineitems) + 1}"
            p.gradebook.lineitems[item["id"]] = item
            return JSONResponse(item, 201)

    async def scores(request: Request) -> Response:
        if p.down:
            return JSONResponse({"error": "down"}, 503)
        if not authorised(request, "https://purl.imsglobal.org/spec/lti-ags/scope/score"):
            return JSONResponse({"error": "unauthorised"}, 401)
        lineitem = f"{p.url}/lineitems/{request.path_params['n']}"
        score = await request.json()
        with p.gradebook.lock:
            if lineitem not in p.gradebook.lineitems:
                return JSONResponse({"error": "no such line item"}, 404)
            p.gradebook.scores.append({**score, "lineitem": lineitem})
        return Response(status_code=204)

    async def deep_link_return(request: Request) -> Response:
        form = dict(await request.form())
        try:
            items = p.config().validate_deeplinking_resp(form)
        except Exception as exc:
            return HTMLResponse(f"<p id='refused'>refused: {html.escape(type(exc).__name__)}</p>", 400)
        with p.gradebook.lock:
            p.gradebook.deep_links.append(items)
        return HTMLResponse(f"<p id='added'>added {html.escape(items[0].get('title', ''))}</p>")

    return Starlette(routes=[
        Route("/course", course), Route("/start", start), Route("/auth", auth), Route("/jwks", jwks),
        Route("/token", token, methods=["POST"]), Route("/lineitems", lineitems, methods=["GET", "POST"]),
        Route("/lineitems/{n}/scores", scores, methods=["POST"]),
        Route("/deep-link-return", deep_link_return, methods=["POST"]),
    ])


@contextmanager
def lti_platform() -> Iterator[LtiPlatform]:
    """The platform on a free port of 127.0.0.1; set ``tool_url`` once the tool runs (the tool's
    config names the platform's URL, so the platform starts first)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    private_pem, public_pem = new_rsa_pem()
    port = sock.getsockname()[1]
    platform = LtiPlatform(f"http://127.0.0.1:{port}", "", private_pem, public_pem, Gradebook())
    server = uvicorn.Server(uvicorn.Config(_app(platform), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    if not wait_until(lambda: server.started, timeout=30):
        raise RuntimeError("the LTI platform did not start")
    try:
        yield platform
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
