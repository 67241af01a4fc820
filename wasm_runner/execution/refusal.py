"""A request that cannot be served now or at all, as every face answers it.

``Refused`` carries an HTTP-like status, a stable code and one plain sentence the caller can act on
(``headers`` such as ``Retry-After``): the HTTP face answers it as JSON (``http.errors``), the MCP
face as a tool error. Admission, the session store, the warm-up and scale-out raise it.
"""

from __future__ import annotations

from typing import Any

from ..errors import WasmRunnerError

__all__ = ["Refused"]


class Refused(WasmRunnerError):
    """A request that cannot be served now or at all: an HTTP-like status, a stable code, and one
    plain sentence the caller can act on (``headers`` such as ``Retry-After`` for the HTTP face)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = self.details
        return {"error": error}
