"""Helpers shared by the route modules."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from ..service import Service

__all__ = ["service_of"]


def service_of(conn: HTTPConnection) -> Service:
    service: Service = conn.app.state.service
    return service
