"""``GET /api/files/{token}``: download a file a run wrote (``files_as: "url"``), while it lasts.

With several replicas the link works on every one: a replica that does not hold the file passes
the request to the one that does (``relay.py``); if that replica is gone the answer is ``410
download_lost``.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..errors import ApiError
from ..faces import FilesFace
from ._common import app_service

__all__ = ["download_endpoint", "routes"]


def service_of(conn: HTTPConnection) -> FilesFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


async def download_endpoint(request: Request) -> Response:
    service = service_of(request)
    token = request.path_params["token"]
    item = service.downloads.get(token)
    if item is None:
        relayed = await service.hop.download(request, token)
        if relayed is not None:
            return relayed
        raise ApiError(404, "unknown_file", "no such file: the link is wrong or has expired")
    return Response(
        item.content,
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(item.name)}",
            "Cache-Control": "no-store",
        },
    )


def routes() -> list[BaseRoute]:
    return [Route("/api/files/{token}", download_endpoint, methods=["GET"])]
