"""``POST /api/lint``: the beginner lint (``wasm_runner.lint``) of the code in the body.

Authenticated and rate limited like every API route (``Service.caller``); the body is bounded
(``LintRequest``: 256 KiB of code); Ruff runs with ``--isolated`` on stdin with a time limit, at
most ``PARALLEL_LINTS`` at once per process (the rest wait their turn).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import partial

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...lint import LintFailed, lint_source
from ..errors import ApiError, SafeJSONResponse
from ..schemas import LintRequest, read_model
from ..faces import LintFace
from ._common import app_service

__all__ = ["PARALLEL_LINTS", "lint_endpoint", "routes"]

PARALLEL_LINTS = 2
_LINTERS = ThreadPoolExecutor(max_workers=PARALLEL_LINTS, thread_name_prefix="wasm-runner-lint")
_STATUS = {"lint_timeout": 503, "lint_unavailable": 503, "lint_failed": 500, "too_large": 413}


def service_of(conn: HTTPConnection) -> LintFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


async def lint_endpoint(request: Request) -> Response:
    service = service_of(request)
    await service.caller(request)
    body = await read_model(request, LintRequest, service.client_bounds.max_body_bytes)
    work = partial(lint_source, body.code, style=body.style, lang=body.lang)
    try:
        findings = await asyncio.get_running_loop().run_in_executor(_LINTERS, work)
    except LintFailed as exc:
        raise ApiError(_STATUS.get(exc.code, 500), exc.code, exc.message) from exc
    return SafeJSONResponse({"findings": findings})


def routes() -> list[BaseRoute]:
    return [Route("/api/lint", lint_endpoint, methods=["POST"])]
