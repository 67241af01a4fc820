"""Session routes: ``POST /api/sessions``, ``GET|DELETE /api/sessions/{id}``,
``POST /api/sessions/{id}/run``.

A session run answers with the result object plus ``"session": {...}``, whose ``alive`` says
whether the session is still there for the next call (see ``wasm_runner.execution.SessionStore``).
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..errors import SafeJSONResponse
from ..guests import cancel_on_disconnect
from ..schemas import SessionCreate, SessionRunRequest, read_model
from ..service import Job, client_address
from ._common import service_of


async def create_session(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    body = await read_model(request, SessionCreate, service.config.max_body_bytes, empty_ok=True)
    profile, limits, runtime = service.policy(tenant, body.profile, body.limits, body.runtime)
    live = await service.sessions.create(tenant, profile, limits, runtime)
    return SafeJSONResponse(live.describe(), status_code=201)


async def show_session(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    live = service.sessions.get(request.path_params["session_id"], tenant)
    return SafeJSONResponse(live.describe())


async def delete_session(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    live = service.sessions.get(request.path_params["session_id"], tenant)
    await service.sessions.close(live.id)
    return Response(status_code=204)


async def run_in_session(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    live = service.sessions.get(request.path_params["session_id"], tenant)
    body = await read_model(request, SessionRunRequest, service.config.max_body_bytes)
    limits = service.tighten(live.limits, body.limits)
    job = Job(
        tenant=tenant,
        client=client_address(request),
        kind="session",
        profile=live.profile,
        limits=limits,
        runtime=live.runtime,
        code=body.code,
        stdin=body.stdin,
        files=service.files_in(body.files),
        display=live.profile.display if body.display is None else body.display,
        filename=body.filename,
        session_id=live.id,
    )
    work = asyncio.ensure_future(service.sessions.run(live, job))
    result = await cancel_on_disconnect(request.receive, work)
    payload = service.render(result, body.files_as)
    payload["session"] = live.describe()
    return SafeJSONResponse(payload)


def routes() -> list[BaseRoute]:
    return [
        Route("/api/sessions", create_session, methods=["POST"]),
        Route("/api/sessions/{session_id}", show_session, methods=["GET"]),
        Route("/api/sessions/{session_id}", delete_session, methods=["DELETE"]),
        Route("/api/sessions/{session_id}/run", run_in_session, methods=["POST"]),
    ]
