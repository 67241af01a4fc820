"""``/healthz`` (liveness), ``/readyz`` (readiness for a load balancer), ``/metrics``,
``/api/openapi.json``, ``/api/profiles`` and ``/.well-known/jwks.json`` (the public keys of signed
results, no auth: docs/lms.md)."""

from __future__ import annotations

import asyncio

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..errors import SafeJSONResponse
from ..openapi import openapi_document
from ..faces import MetaFace
from ._common import app_service

__all__ = ["healthz", "readyz", "metrics", "openapi", "profiles", "jwks", "routes"]


def service_of(conn: HTTPConnection) -> MetaFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


async def healthz(request: Request) -> Response:
    service = service_of(request)
    return SafeJSONResponse(
        {
            "status": "ok",
            "running": service.admission.running,
            "queued": service.admission.waiting,
            "waiting": service.admission.parked,
            "sessions": len(service.sessions),  # live ones
            "paused_sessions": service.sessions.paused_count,
        }
    )


async def readyz(request: Request) -> Response:
    """200 ``{"status": "ready"}`` when this replica takes work; else 503 with the reason
    (``warming``, ``runtime_failed``, ``draining``, ``shared_state_unavailable``) in ``status``;
    while warming (or failed) ``runtimes`` lists the profiles' runtimes: state, seconds left."""
    service = service_of(request)
    ready, reason = await service.lifecycle.readiness()
    body: dict[str, object] = {"status": reason, "ready": ready}
    if reason in ("warming", "runtime_failed"):  # what the playground page shows meanwhile
        body["runtimes"] = [p.describe() for p in service.lifecycle.preparing]
    if service.shared is not None:
        body["shared_state"] = "up" if service.shared.up else "down"
    return SafeJSONResponse(
        body,
        status_code=200 if ready else 503,
        headers={"Cache-Control": "no-store", **({} if ready else {"Retry-After": "5"})},
    )


async def metrics(request: Request) -> Response:
    body, content_type = service_of(request).metrics.exposition()
    return Response(body, media_type=content_type)


_OPENAPI = openapi_document()


async def openapi(request: Request) -> Response:
    return SafeJSONResponse(_OPENAPI)


async def profiles(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    return SafeJSONResponse(
        {
            "default": service.default_profile,
            "profiles": {
                name: {
                    "limits": p.limits.to_dict(),
                    "runtime": p.runtime,
                    "image": p.image if p.runtime == "default" else None,
                    "data_dir": p.data_dir is not None,
                    "files_out": p.files_out,
                }
                for name, p in service.profiles.items()
                if tenant.may_use(name)
            },
        }
    )


async def jwks(request: Request) -> Response:
    """The public keys check results are signed with (current first, then previous ones)."""
    service = service_of(request)
    keys = await asyncio.to_thread(service.results.jwks)
    return SafeJSONResponse(keys, headers={"Cache-Control": "public, max-age=300"})


def routes() -> list[BaseRoute]:
    return [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/api/openapi.json", openapi, methods=["GET"]),
        Route("/api/profiles", profiles, methods=["GET"]),
        Route("/.well-known/jwks.json", jwks, methods=["GET"]),
    ]
