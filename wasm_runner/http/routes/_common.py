"""Helpers shared by the route modules."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from ..service import Service

__all__ = ["app_service"]


def app_service(conn: HTTPConnection) -> Service:
    """The app's service. A route module never keeps it: its own ``service_of`` returns the
    module's face (``http/faces.py``), which mypy checks ``Service`` satisfies."""
    service: Service = conn.app.state.service
    return service
