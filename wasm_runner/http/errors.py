"""Errors as JSON: every refusal is ``{"error": {"code", "message", "details"?}}``, status 4xx.

``ApiError`` is raised anywhere in a route; the handlers installed by ``install_error_handlers``
turn it, Starlette's routing errors and anything unexpected into JSON responses.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from ..execution import Refused

__all__ = ["ApiError", "SafeJSONResponse", "error_response", "install_error_handlers"]

log = logging.getLogger("wasm_runner.http")

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "body_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
}


class ApiError(Refused):
    """A refusal the client can act on: HTTP status, a stable code, and one plain sentence.

    The core's ``wasm_runner.execution.Refused`` (admission, sessions) is answered the same way.
    """


class SafeJSONResponse(JSONResponse):
    """JSON that never fails to encode: non-UTF-8-encodable text (lone surrogates) is escaped."""

    def render(self, content: Any) -> bytes:
        try:
            text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            return text.encode("utf-8")
        except (UnicodeEncodeError, ValueError):
            return json.dumps(content, ensure_ascii=True, default=str).encode("ascii")


def error_response(error: Refused) -> Response:
    return SafeJSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = _CODES.get(exc.status_code, "error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    if exc.status_code == 404:
        message = f"no such endpoint: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    return error_response(ApiError(exc.status_code, code, message, headers=dict(exc.headers or {})))


async def _client_gone(request: Request, exc: Exception) -> Response:
    """The client went away mid-body: an ordinary event, not an error (nobody reads this)."""
    log.debug("client left during %s %s", request.method, request.url.path)
    return error_response(ApiError(400, "client_disconnected", "the client went away"))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return error_response(
        ApiError(500, "internal_error", "the server failed to handle this request")
    )


def install_error_handlers(app: Starlette) -> None:
    app.add_exception_handler(Refused, _api_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(Exception, _unexpected)
