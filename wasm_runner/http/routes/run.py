"""``POST /api/run``: one run in a fresh instance; answers with the result object."""

from __future__ import annotations

import asyncio

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..errors import SafeJSONResponse
from ..guests import cancel_on_disconnect
from ..schemas import RunRequest, read_model
from ..service import Job, client_address
from ..faces import RunFace
from ._common import app_service

__all__ = ["job_from_request", "run_endpoint", "routes"]


def service_of(conn: HTTPConnection) -> RunFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


async def job_from_request(service: RunFace, request: Request, kind: str) -> tuple[Job, RunRequest]:
    """Authenticate, read and validate a run request and resolve its policy (shared with stream)."""
    tenant = await service.caller(request)
    body = await read_model(request, RunRequest, service.client_bounds.max_body_bytes)
    profile, limits, runtime = service.policy(tenant, body.profile, body.limits, body.runtime)
    job = Job(
        tenant=tenant,
        client=client_address(request),
        kind=kind,
        profile=profile,
        limits=limits,
        runtime=runtime,
        code=body.code,
        stdin=body.stdin,
        files=service.files_in(body.files),
        display=profile.display if body.display is None else body.display,
        filename=body.filename,
        packages=tuple(body.packages or ()),
    )
    job.functions = service.host_functions(tenant, profile, body.functions, job.request_id)
    service.network_for(job)
    return job, body


async def run_endpoint(request: Request) -> Response:
    service = service_of(request)
    job, body = await job_from_request(service, request, "run")
    work = asyncio.ensure_future(service.run_job(job))
    result = await cancel_on_disconnect(request.receive, work)
    return SafeJSONResponse(service.render(result, body.files_as, body.lang))


def routes() -> list[BaseRoute]:
    return [Route("/api/run", run_endpoint, methods=["POST"])]
