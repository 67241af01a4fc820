"""``POST /api/notebooks/run``: a notebook's code cells, in order, in one new session of the
calling key (the sessions' caps and the profile's limits, per cell), and the executed notebook
back (``wasm_runner.notebook.running``): ``{"notebook": {...}, "status", "cells_run", "failed"}``.
The session is closed when the notebook has run, or when the client goes away."""

from __future__ import annotations

import asyncio

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...notebook.running import NotebookError, NotebookRun, execute, read_notebook
from ...result import Result
from ..errors import ApiError, SafeJSONResponse
from ..guests import cancel_on_disconnect
from ..schemas import NotebookRunRequest, read_model
from ..service import Job, client_address
from ..faces import NotebookFace
from ._common import app_service

__all__ = ["run_notebook", "routes"]


def service_of(conn: HTTPConnection) -> NotebookFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


async def run_notebook(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    body = await read_model(request, NotebookRunRequest, service.client_bounds.max_body_bytes)
    try:
        nb = read_notebook(body.notebook)
    except NotebookError as exc:
        raise ApiError(422, "invalid_notebook", str(exc)) from None
    profile, limits, runtime = service.policy(tenant, body.profile, body.limits, body.runtime)
    client = client_address(request)
    live = await service.sessions.create(tenant, profile, limits, runtime)

    async def run_cell(code: str) -> Result:
        job = Job(tenant=tenant, client=client, kind="notebook", profile=profile, limits=limits,
                  runtime=runtime, code=code, display=True, session_id=live.id)
        return await service.sessions.run(live, job)

    async def run_all() -> NotebookRun:
        try:
            return await execute(nb, run_cell, allow_errors=body.allow_errors)
        finally:
            await service.sessions.close(live.id)

    done = await cancel_on_disconnect(request.receive, asyncio.ensure_future(run_all()))
    return SafeJSONResponse({"notebook": done.notebook, **done.summary()})


def routes() -> list[BaseRoute]:
    return [Route("/api/notebooks/run", run_notebook, methods=["POST"])]
