"""LTI 1.3 (``wasm_runner.lti``; docs/lms.md, "LTI 1.3"): thin routes around the tool.

- ``GET|POST /lti/login``                 OIDC login initiation from the platform → its auth URL
- ``POST /lti/launch``                    the platform's ``id_token`` → the exercise page (a resource
                                          link) or the exercise picker (deep linking)
- ``POST /lti/deep-link``                 the teacher's pick → the signed answer, posted back
- ``POST /lti/run``                       a launched student's run (header ``X-Wasm-Runner-Launch``)
- ``POST /lti/exercises/{id}/check``      a launched student's check (header
                                          ``X-Wasm-Runner-Launch``: the launch session), graded
- ``GET  /lti/grades/{id}``               whether that grade reached the platform
- ``GET  /lti/config``                    the URLs an admin registers in the LMS
- ``GET  /lti/canvas.json``               the same as a Canvas developer key's JSON configuration

Refusals are pages (launch) or JSON errors (calls), each audit-logged as ``lti_refused`` with its
code; each call to a platform is audit-logged as ``lti_call`` (method, path, status). Redis down
(the launch state, the best scores, the outbox with ``redis_url``) is ``503`` with
``Retry-After``: a page for the login and the launch (a browser in the LMS's frame), the JSON
``shared_state_unavailable`` for the calls."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from pydantic import Field
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from ...exercises import redact
from ...lti.pages import auto_post_page, csp, exercise_page, new_nonce, picker_page, refusal_page
from ...inputs import MAX_SOURCE_BYTES
from ...lti.tool import MAX_STARTER_CHARS, LtiTool, ToolUrls, canvas_configuration
from ...lti.validation import LaunchRefused
from ...scaleout.state import SharedStateUnavailable
from ..auth import Tenant
from ..errors import ApiError, SafeJSONResponse
from ..results import result_claims
from ..guests import cancel_on_disconnect
from ..schemas import _Strict, read_model
from ..service import Job, client_address
from ..faces import LtiFace
from ._common import app_service
from .exercises import CheckRequest, run_checks

__all__ = ["LtiRunRequest", "SESSION_HEADER", "routes", "tool_urls"]

SESSION_HEADER = "x-wasm-runner-launch"
MAX_STDIN_CHARS = 64 * 1024
MAX_FORM_BYTES = 128 * 1024


def service_of(conn: HTTPConnection) -> LtiFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


class LtiRunRequest(_Strict):
    code: str = Field(max_length=MAX_SOURCE_BYTES, description="the student's Python source")
    stdin: str | None = Field(default=None, max_length=MAX_STDIN_CHARS, description="the program's input")


def _tool(service: LtiFace) -> LtiTool:
    if service.lti is None:
        raise ApiError(404, "lti_not_configured", "this server has no LTI platform registered ([[lti.platforms]])")
    return service.lti


def tool_urls(service: LtiFace, request: Request) -> ToolUrls:
    base = service.advertise_url or str(request.base_url)
    return ToolUrls.under(base)


def _refused(service: LtiFace, exc: LaunchRefused, request: Request) -> None:
    service.audit.event("lti_refused", code=exc.code, client=client_address(request))


def _html(service: LtiFace, html: str, nonce: str, status: int = 200) -> HTMLResponse:
    tool = _tool(service)
    return HTMLResponse(html, status, headers={"Content-Security-Policy": csp(nonce, tool.frame_origins()),
                                               "Cache-Control": "no-store"})  # fmt: skip


def _refusal(service: LtiFace, request: Request, exc: LaunchRefused) -> HTMLResponse:
    _refused(service, exc, request)
    nonce = new_nonce()
    return _html(service, refusal_page(exc.message, nonce), nonce, exc.status)


def _unavailable(service: LtiFace, exc: SharedStateUnavailable) -> HTMLResponse:
    """Redis down during a login or a launch: a page the student reads in the LMS's frame (503,
    ``Retry-After``); nothing is refused for good, the launch works again once Redis is back."""
    nonce = new_nonce()
    wait = exc.headers.get("Retry-After", "a few")
    page = refusal_page(f"The tool cannot open this activity right now (its shared store does not answer). "
                        f"Open it from the course again in {wait} seconds.", nonce)  # fmt: skip
    response = _html(service, page, nonce, exc.status)
    response.headers.update(exc.headers)
    return response


async def _form(request: Request) -> dict[str, str]:
    if int(request.headers.get("content-length") or 0) > MAX_FORM_BYTES:
        raise LaunchRefused("invalid_launch", "the launch is too large", 413)
    form = await request.form(max_files=0, max_fields=50)
    return {k: v for k, v in form.items() if isinstance(v, str)}


async def login(request: Request) -> Response:
    service = service_of(request)
    tool = _tool(service)
    try:
        params = dict(request.query_params) if request.method == "GET" else await _form(request)
        url = await tool.login(params, tool_urls(service, request).launch)
    except LaunchRefused as exc:
        return _refusal(service, request, exc)
    except SharedStateUnavailable as exc:
        return _unavailable(service, exc)
    return RedirectResponse(url, 302, headers={"Cache-Control": "no-store"})


async def launch(request: Request) -> Response:
    service = service_of(request)
    tool = _tool(service)
    try:
        launched = await tool.launch(await _form(request))
    except LaunchRefused as exc:
        return _refusal(service, request, exc)
    except SharedStateUnavailable as exc:
        return _unavailable(service, exc)
    nonce = new_nonce()
    exercises = service.exercises.all()
    if launched.kind == "deep_link":
        listed = [{"id": e.id, "title": e.title} for e in exercises.values()]
        return _html(service, picker_page(listed, launched.session, "/lti/deep-link", nonce), nonce)
    ex_id = launched.claims.get("exercise")
    if ex_id is None:  # a playground: Run only, no grade
        shown = {"title": launched.title or "Python playground", "starter": launched.starter}
        return _html(service, exercise_page(shown, launched.session, {"runUrl": "/lti/run"}, nonce), nonce)
    ex = exercises.get(ex_id) if isinstance(ex_id, str) else None
    if ex is None:
        return _refusal(service, request, LaunchRefused(
            "unknown_exercise", f"this activity names no exercise of this server ({ex_id!r})", 404))
    urls = {"runUrl": "/lti/run", "checkUrl": f"/lti/exercises/{ex.id}/check", "statusUrl": "/lti/grades/"}
    return _html(service, exercise_page(ex.public(), launched.session, urls, nonce), nonce)


async def deep_link(request: Request) -> Response:
    service = service_of(request)
    tool = _tool(service)
    try:
        form = await _form(request)
        session = tool.sessions.verify(form.get("session"), "deep_link")
        ex = service.exercises.all().get(form.get("exercise", ""))
        if ex is None and not form.get("playground"):
            raise LaunchRefused("unknown_exercise", "pick one of the listed exercises", 404)
    except LaunchRefused as exc:
        return _refusal(service, request, exc)
    urls = tool_urls(service, request)
    item: dict[str, Any]
    if ex is None:  # a playground with the teacher's starter code: no grade, no line item
        title = (form.get("title") or "Python playground")[:200]
        item = {"type": "ltiResourceLink", "title": title, "url": urls.launch,
                "custom": {"starter": form.get("starter", "")[:MAX_STARTER_CHARS]}}  # fmt: skip
    else:
        item = {
            "type": "ltiResourceLink", "title": ex.title, "url": urls.launch, "custom": {"exercise": ex.id},
            "lineItem": {"scoreMaximum": len(ex.check_names()), "label": ex.title, "resourceId": ex.id},
        }  # fmt: skip
    url, token = tool.deep_link_answer(session, item)
    nonce = new_nonce()
    return _html(service, auto_post_page(url, {"JWT": token}, nonce), nonce)


def _session(request: Request, tool: LtiTool, kind: str) -> dict[str, Any]:
    try:
        return tool.sessions.verify(request.headers.get(SESSION_HEADER), kind)
    except LaunchRefused as exc:
        _refused(service_of(request), exc, request)
        raise ApiError(exc.status, exc.code, exc.message) from None


async def _student(service: LtiFace, request: Request, session: dict[str, Any]) -> Tenant:
    """The launched student as a user inside the platform's API key (its limits, its fairness)."""
    platform = service.lti_settings.named(str(session["platform"]))
    if platform is None:
        raise ApiError(403, "unknown_platform", "the platform of this launch is no longer registered")
    user = "lti-" + hashlib.sha256(f"{platform.name}\x00{session['sub']}".encode()).hexdigest()[:40]
    name = platform.api_key if service.auth_required else f"anonymous:{client_address(request)}"
    tenant = service.gatekeeper.vouched(str(name), user)
    await service.gatekeeper.count(tenant)  # the key's and the student's rates, like any request
    return tenant


async def run(request: Request) -> Response:
    """A launched student's run (the page's Run): one fresh instance, the default profile's limits."""
    service = service_of(request)
    tool = _tool(service)
    session = _session(request, tool, "resource")
    tenant = await _student(service, request, session)
    body = await read_model(request, LtiRunRequest, service.client_bounds.max_body_bytes)
    profile, limits, runtime = service.policy(tenant, None, None)
    job = Job(tenant=tenant, client=client_address(request), kind="run", profile=profile, limits=limits,
              runtime=runtime, code=body.code, stdin=body.stdin, display=False)  # fmt: skip
    work = asyncio.ensure_future(service.run_job(job))
    result = await cancel_on_disconnect(request.receive, work)
    answer = service.render(result)
    answer.pop("files", None)
    return SafeJSONResponse(answer)


async def check(request: Request) -> Response:
    service = service_of(request)
    tool = _tool(service)
    session = _session(request, tool, "resource")
    ex_id = request.path_params["exercise_id"]
    if ex_id != session.get("exercise"):
        _refused(service, LaunchRefused("wrong_exercise", ""), request)
        raise ApiError(403, "wrong_exercise", "this launch is for another exercise: a grade goes only to the "
                       "exercise the course opened")  # fmt: skip
    ex = service.exercises.all().get(ex_id)
    if ex is None:
        raise ApiError(404, "unknown_exercise", f"no exercise {ex_id!r} here")
    tenant = await _student(service, request, session)
    body = await read_model(request, CheckRequest, service.client_bounds.max_body_bytes)
    report = await run_checks(request, service, tenant, ex, body.code, None)
    shown = redact(report)
    claims = result_claims(report, body.code, user=tenant.user_id, audience=tenant.name)
    shown["result_token"] = await asyncio.to_thread(service.results.sign, claims)
    total = int(report["total"])
    share = float(report.get("score", int(report["passed_count"]) / total if total else 0.0))  # weighted
    receipt = await tool.grade(session, title=ex.title, score=share, total=total, counts=ex.grade)
    shown["grade"] = {"state": receipt.state, "id": receipt.outbox_id}
    return SafeJSONResponse(shown)


async def grade_state(request: Request) -> Response:
    service = service_of(request)
    tool = _tool(service)
    _session(request, tool, "resource")
    return SafeJSONResponse({"state": await tool.outbox.state(request.path_params["grade_id"][:64])})


async def config(request: Request) -> Response:
    service = service_of(request)
    _tool(service)
    urls = tool_urls(service, request)
    return SafeJSONResponse({"login_url": urls.login, "launch_url": urls.launch,
                             "deep_linking_url": urls.deep_linking, "jwks_url": urls.jwks,
                             "redirect_uris": list(urls.redirect_uris)})  # fmt: skip


async def canvas_config(request: Request) -> Response:
    service = service_of(request)
    _tool(service)
    return SafeJSONResponse(canvas_configuration(tool_urls(service, request)))


def routes() -> list[BaseRoute]:
    return [
        Route("/lti/login", login, methods=["GET", "POST"]),
        Route("/lti/launch", launch, methods=["POST"]),
        Route("/lti/deep-link", deep_link, methods=["POST"]),
        Route("/lti/run", run, methods=["POST"]),
        Route("/lti/exercises/{exercise_id}/check", check, methods=["POST"]),
        Route("/lti/grades/{grade_id}", grade_state, methods=["GET"]),
        Route("/lti/config", config, methods=["GET"]),
        Route("/lti/canvas.json", canvas_config, methods=["GET"]),
    ]
