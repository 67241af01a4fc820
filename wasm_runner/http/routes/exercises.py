"""Exercises on the server (``[server] exercises_dir``, ``--exercises DIR``).

- ``GET  /api/exercises``               the exercises: id and title
- ``GET  /api/exercises/{id}``          title, instructions, starter code, number of checks: what
                                        a student may see (never a check, never the solution)
- ``POST /api/exercises/{id}/check``    ``{"code": ..., "profile": ...}`` → per-check results; each
                                        check is one job through admission and the audit log
                                        (a test check: two instances, one job), up to 4 at once;
                                        hidden checks come back as "hidden check N" and pass/fail;
                                        ``result_token``: the result signed (``http/results.py``),
                                        sent to the key's webhook (``wasm_runner/webhooks``);
                                        ``hints_used``: the page's count (``exercises/hint_counts.py``);
                                        ``style_notes``: for an exercise with ``style = true``, the
                                        lint's style findings (``wasm_runner.lint``), not scored
                                        ``lang``: the language of a check's ``explanation`` (a
                                        function the tests call is missing), as ``/api/run``'s
- ``GET  /api/exercises/{id}/bundle``   every check, for the browser tier, only for an exercise
                                        that says ``browser = true`` (its hidden checks then reach
                                        the student's machine; 404 otherwise)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from typing import Any

from pydantic import Field
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...exercises import Exercise, RunSpec, judge, plan, redact, run_check, summarize
from ...exercises.model import MAX_HINTS
from ...explanations import LANG_DESCRIPTION, LANG_PATTERN, rendered_result
from ...inputs import MAX_SOURCE_BYTES
from ...lint import LintFailed, lint_source
from ..errors import ApiError, SafeJSONResponse
from ..results import result_claims
from ..guests import cancel_on_disconnect
from ..schemas import _Strict, read_model
from ..auth import Tenant
from ..service import Job, client_address
from ..faces import CheckFace, ExerciseFace
from ._common import app_service

__all__ = ["CheckRequest", "list_exercises", "get_exercise", "get_bundle", "check_exercise", "routes", "run_checks",
           "style_notes"]

log = logging.getLogger("wasm_runner.http")
PARALLEL_CHECKS = 4  # checks of one request that run at once, at most


def service_of(conn: HTTPConnection) -> ExerciseFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


class CheckRequest(_Strict):
    code: str = Field(max_length=MAX_SOURCE_BYTES, description="the student's Python source")
    profile: str | None = Field(default=None, description="policy profile (default: the server's)")
    hints_used: int = Field(default=0, ge=0, le=MAX_HINTS, description=(
        "hints the page has shown the student (the page's count; bounded by the exercise's hints)"))
    lang: str | None = Field(default=None, max_length=35, pattern=LANG_PATTERN,
                             description=LANG_DESCRIPTION + " The style notes are worded in it too (docs/lint.md).")


def _exercise(request: Request) -> tuple[ExerciseFace, Exercise]:
    service = service_of(request)
    ex_id = request.path_params["exercise_id"]
    found = service.exercises.all().get(ex_id)
    if found is None:
        raise ApiError(404, "unknown_exercise", f"no exercise {ex_id!r} here")
    return service, found


async def list_exercises(request: Request) -> Response:
    service = service_of(request)
    await service.caller(request)
    return SafeJSONResponse({"exercises": [{"id": e.id, "title": e.title}
                                           for e in service.exercises.all().values()]})


async def get_exercise(request: Request) -> Response:
    service, ex = _exercise(request)
    await service.caller(request)
    return SafeJSONResponse(ex.public())


async def get_bundle(request: Request) -> Response:
    service, ex = _exercise(request)
    await service.caller(request)
    if not ex.browser:
        raise ApiError(404, "server_only", f"exercise {ex.id!r} is checked on the server only "
                       "(its checks are not sent to browsers)")
    return SafeJSONResponse(ex.bundle())


async def run_checks(request: Request, service: CheckFace, tenant: Tenant, ex: Exercise, code: str,
                     profile_name: str | None = None) -> dict[str, Any]:
    """Every check of ``ex`` on ``code`` for ``tenant``, the report not yet redacted (the LTI
    routes grade with it too: ``routes/lti.py``)."""
    profile, base_limits, runtime = service.policy(tenant, profile_name, None)
    profile = dataclasses.replace(profile, files_out=False, display=False)
    limits = ex.run_limits(base_limits)
    client = client_address(request)
    # checks in parallel, within the key's runs in flight and, for a named user, within the
    # user's (each check is one admitted job): a student's check waits for its own places instead
    # of being refused by them (the classroom benchmark: every check of a named user got 429
    # user_concurrency when four ran at once against a cap of two)
    width = min(PARALLEL_CHECKS, tenant.max_concurrent)
    if tenant.user_name is not None:
        width = min(width, tenant.user_max_concurrent)
    room = asyncio.Semaphore(max(1, width))

    async def one(spec: RunSpec) -> dict[str, Any]:
        job = Job(tenant=tenant, client=client, kind="check", profile=profile, limits=limits,
                  runtime=runtime, code=spec.code, stdin=spec.stdin, filename=spec.filename)
        verdict: dict[str, Any] = {}

        def call(sandbox: Any, pool: str | None, cancel: threading.Event) -> Any:
            result, verdict["check"] = run_check(sandbox, spec, limits, cancel=cancel, pool=pool)
            return result

        async with room:
            result = await service.executor.run_with(job, call)
        check: dict[str, Any] = verdict.get("check") or judge(spec, result.to_dict())
        return check

    async def run_all() -> dict[str, Any]:
        checks = await asyncio.gather(*(one(spec) for spec in plan(ex, code)))
        return summarize(ex.id, list(checks))

    work = asyncio.ensure_future(run_all())
    report: dict[str, Any] = await cancel_on_disconnect(request.receive, work)
    return report


async def check_exercise(request: Request) -> Response:
    service, ex = _exercise(request)
    tenant = await service.caller(request)
    body = await read_model(request, CheckRequest, service.client_bounds.max_body_bytes)
    report = await run_checks(request, service, tenant, ex, body.code, body.profile)
    shown = redact(report)
    for check in shown["checks"]:  # a function the tests call is missing: said in the asked language
        rendered_result(check, body.lang)
    if ex.style:  # beside the checks, never scored
        shown["style_notes"] = await asyncio.to_thread(style_notes, body.code, body.lang)
    # the hints the student has seen (exercises/hint_counts.py: the page's count, never lowered)
    shown["hints_used"] = await service.hints.record(tenant.name, tenant.user, ex.id, body.hints_used, len(ex.hints))
    # the result signed for the key's backend (docs/lms.md, "Signed results"): never logged, never
    # in the audit log; its user is the request's own id (None without one)
    claims = result_claims(report, body.code, user=tenant.user_id, audience=tenant.name,
                           hints_used=shown["hints_used"])
    shown["result_token"] = await asyncio.to_thread(service.results.sign, claims)
    await queue_webhook(service, tenant.name, shown["result_token"], ex.id)
    return SafeJSONResponse(shown)


def style_notes(code: str, lang: str | None = None) -> list[dict[str, Any]]:
    """The lint's style findings for ``code`` (beside the checks, never scored), worded in the
    check's ``lang``; [] when lint could not run (the checks' verdict stands either way)."""
    try:
        return [dict(f) for f in lint_source(code, style=True, lang=lang) if f["kind"] == "style"]
    except LintFailed:
        return []


async def queue_webhook(service: ExerciseFace, key: str, token: str, exercise: str) -> None:
    """The signed result queued for the key's webhook (``wasm_runner.webhooks``), if it names
    one; the check answers without waiting for the receiver. An outbox that cannot take it
    (Redis down) is logged and audited, and the student still gets the result."""
    if service.webhooks is None:
        return
    try:
        await service.webhooks.enqueue(key, token, exercise)
    except Exception as exc:
        log.warning("the webhook outbox did not take a check result for %s: %s", key, type(exc).__name__)
        service.audit.event("webhook_not_queued", tenant=key, exercise=exercise, reason=type(exc).__name__)


def routes() -> list[BaseRoute]:
    return [
        Route("/api/exercises", list_exercises, methods=["GET"]),
        Route("/api/exercises/{exercise_id}", get_exercise, methods=["GET"]),
        Route("/api/exercises/{exercise_id}/bundle", get_bundle, methods=["GET"]),
        Route("/api/exercises/{exercise_id}/check", check_exercise, methods=["POST"]),
    ]
