"""Session routes: ``POST /api/sessions``, ``GET|DELETE /api/sessions/{id}``,
``POST /api/sessions/{id}/run`` and ``POST /api/sessions/{id}/run/stream`` (the same cell, its
output as Server-Sent Events while it runs: the events of ``POST /api/run/stream``, the last
``result`` with ``"session"`` added); ``POST /api/sessions/{id}/fork`` (independent copies of its
state, each a new session of the same key), ``GET /api/sessions/{id}/snapshot`` (its state as
sealed bytes: encrypted, bound to the key) and ``POST /api/sessions/resume`` (those bytes back
as a new session; refused unless they authenticate for the calling key);
``POST /api/sessions/{id}/save`` (its state kept on the server under a ``saved_id`` of the key's,
the MCP tools' ``save_session``), ``POST /api/saved-sessions/{saved_id}/resume`` (a new session
continuing it) and ``DELETE /api/saved-sessions/{saved_id}``. ``POST /api/sessions/{id}/hand-over``
is only another replica's (a signed internal call; a client's is 404): the session is left to that
replica, which resumes it from its snapshot (``relay.Hop.take_over``, for the MCP tools).

A session run answers with the result object plus ``"session": {...}``, whose ``alive`` says
whether the session is still there for the next call (see ``wasm_runner.sessions.SessionStore``).

With several replicas a session lives on the replica that opened it; a call for it that reaches
another replica is passed on to the owner (``relay.py``, ``scaleout/forwarding.py``), or answered ``410 session_lost`` when the
owner is gone. Creating and resuming a session is always local.
"""

from __future__ import annotations

import asyncio
import time

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ...execution import Refused
from ...sessions import LiveSession
from ..auth import Tenant
from ..errors import SafeJSONResponse
from ..guests import cancel_on_disconnect
from ..internal import client_of, internal_call
from ..errors import ApiError
from ..schemas import BodySlots, SessionCreate, SessionFork, SessionRunRequest, read_body, read_model
from ..service import Job
from ..faces import SessionFace
from ._common import app_service
from .stream import RunEventStream

__all__ = [
    "create_session", "show_session", "delete_session", "run_in_session", "stream_in_session",
    "fork_session", "snapshot_session", "resume_session", "save_session", "resume_saved_session",
    "delete_saved_session", "hand_over_session", "routes",
]


def service_of(conn: HTTPConnection) -> SessionFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


async def create_session(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    body = await read_model(request, SessionCreate, service.client_bounds.max_body_bytes, empty_ok=True)
    profile, limits, runtime = service.policy(tenant, body.profile, body.limits, body.runtime)
    live = await service.sessions.create(tenant, profile, limits, runtime, packages=tuple(body.packages or ()))
    return SafeJSONResponse(live.describe(), status_code=201)


async def _session_or_hop(
    request: Request,
) -> tuple[SessionFace, Tenant, LiveSession | None, Response | None]:
    """Who calls, and either their session here or the owner's answer from another replica."""
    service = service_of(request)
    tenant = await service.caller(request)  # also the tenant of a call another replica passed on
    session_id = request.path_params["session_id"]
    relayed = await service.hop.session_call(request, session_id, tenant.name, tenant.user_id,
                                             tenant.user_token)  # the user goes with the call
    if relayed is not None:
        return service, tenant, None, relayed
    return service, tenant, service.sessions.get(session_id, tenant), None


async def show_session(request: Request) -> Response:
    _, _, live, relayed = await _session_or_hop(request)
    if relayed is not None:
        return relayed
    assert live is not None
    return SafeJSONResponse(live.describe())


async def delete_session(request: Request) -> Response:
    service, _, live, relayed = await _session_or_hop(request)
    if relayed is not None:
        return relayed
    assert live is not None
    await service.sessions.close(live.id)
    return Response(status_code=204)


async def _session_job(
    request: Request, service: SessionFace, tenant: Tenant, live: LiveSession, kind: str
) -> tuple[Job, SessionRunRequest]:
    body = await read_model(request, SessionRunRequest, service.client_bounds.max_body_bytes)
    limits = service.tighten(live.limits, body.limits)
    job = Job(
        tenant=tenant,
        client=client_of(request),
        kind=kind,
        profile=live.profile,
        limits=limits,
        runtime=live.runtime,
        code=body.code,
        stdin=body.stdin,
        files=service.files_in(body.files),
        display=live.profile.display if body.display is None else body.display,
        filename=body.filename,
        session_id=live.id,
        packages=tuple(body.packages or ()),  # checked against the session's (sessions.packages)
    )
    job.functions = service.host_functions(tenant, live.profile, body.functions, job.request_id)
    service.network_for(job)
    return job, body


async def run_in_session(request: Request) -> Response:
    service, tenant, live, relayed = await _session_or_hop(request)
    if relayed is not None:
        return relayed
    assert live is not None
    job, body = await _session_job(request, service, tenant, live, "session")
    work = asyncio.ensure_future(service.sessions.run(live, job))
    result = await cancel_on_disconnect(request.receive, work)
    payload = service.render(result, body.files_as, body.lang)
    payload["session"] = live.describe()
    return SafeJSONResponse(payload)


async def stream_in_session(request: Request) -> Response:
    service, tenant, live, relayed = await _session_or_hop(request)
    if relayed is not None:
        return relayed
    assert live is not None
    job, body = await _session_job(request, service, tenant, live, "session_stream")
    session = live

    def add_session(payload: dict[str, object]) -> None:
        payload["session"] = session.describe()

    return RunEventStream(
        service,
        job,
        body.files_as,
        run=lambda **kw: service.sessions.run(session, job, **kw),
        finish=add_session,
        lang=body.lang,
    )


async def fork_session(request: Request) -> Response:
    """``{"copies": N, "keep_seeds": false}`` -> ``201 {"sessions": [...]}``, N new sessions."""
    service, tenant, live, relayed = await _session_or_hop(request)
    if relayed is not None:
        return relayed
    assert live is not None
    body = await read_model(request, SessionFork, service.client_bounds.max_body_bytes, empty_ok=True)
    copies = await service.sessions.fork(live, tenant, body.copies, keep_seeds=body.keep_seeds)
    return SafeJSONResponse({"sessions": [c.describe() for c in copies]}, status_code=201)


async def snapshot_session(request: Request) -> Response:
    """The session's state as a sealed snapshot (``application/octet-stream``); it goes on."""
    service, tenant, live, relayed = await _session_or_hop(request)
    if relayed is not None:
        return relayed
    assert live is not None
    owner, user = service.snapshot_binding(tenant)  # the key's id, and the user of a user token
    expires_at = time.time() + service.session_settings.snapshot_expiry_seconds
    blob = await service.sessions.snapshot(live, owner=owner, secret=service.snapshot_secret, user=user,
                                           expires_at=expires_at)  # fmt: skip
    return Response(
        blob,
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": f'attachment; filename="session-{live.profile.name}.wrsnap"',
            "Cache-Control": "no-store",
        },
    )


# one snapshot upload (and its resume) at a time per key: a key holds at most one
# ``max_snapshot_bytes`` body in this process's memory, not one per body slot
SNAPSHOT_UPLOADS = BodySlots()


async def resume_session(request: Request) -> Response:
    """A snapshot's bytes (``application/octet-stream``, at most ``max_snapshot_bytes``) ->
    ``201`` and a new session continuing it, under the profile and runtime its authenticated
    header records; ``?profile=`` may name that profile (another one: ``422
    profile_mismatch``). One at a time per key (``429 too_many_uploads`` meanwhile)."""
    service = service_of(request)
    tenant = await service.caller(request)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/octet-stream":
        raise ApiError(
            415, "unsupported_media_type",
            "send the snapshot's bytes as application/octet-stream",
        )  # fmt: skip
    asked = request.query_params.get("profile")
    if asked is not None:  # refused before a byte of the body is read
        service.policy(tenant, asked, None)
    SNAPSHOT_UPLOADS.take(tenant.name, 1)
    try:
        blob = await read_body(request, service.session_settings.max_snapshot_bytes)
        (owner, user), secret = service.snapshot_binding(tenant), service.snapshot_secret
        recorded, runtime = service.sessions.label(blob, owner=owner, secret=secret, user=user, need_expiry=True)
        if asked is not None and recorded and asked != recorded:
            raise ApiError(
                422, "profile_mismatch",
                f"the snapshot was saved from a session of profile {recorded!r}, not {asked!r}: "
                "leave out ?profile= (the snapshot says its profile) or name that one",
            )  # fmt: skip
        profile, limits, runtime = service.policy(tenant, recorded or asked, None, runtime or None)
        live = await service.sessions.resume(tenant, profile, limits, runtime, blob, owner=owner, secret=secret,
                                             user=user)
    except Refused as exc:
        if exc.code == "snapshot_refused":
            reason = (exc.details or [{}])[0].get("reason", "")
            service.audit.event("snapshot_refused", tenant=tenant.name,
                                client=client_of(request), reason=str(reason))  # fmt: skip
            service.metrics.rejections.labels(exc.code).inc()
        raise
    finally:
        SNAPSHOT_UPLOADS.give(tenant.name)
    return SafeJSONResponse(live.describe(), status_code=201)


async def save_session(request: Request) -> Response:
    """The session's state kept on the server -> ``201 {"saved_id", "profile", "runtime",
    "bytes", "expires_in"}``; the session goes on."""
    service, tenant, live, relayed = await _session_or_hop(request)
    if relayed is not None:
        return relayed
    assert live is not None
    saved = await service.sessions.save(live, tenant)
    return SafeJSONResponse(saved.describe(), status_code=201)


async def resume_saved_session(request: Request) -> Response:
    """A saved state of the key's -> ``201`` and a new session continuing it, under the profile
    it was saved from (the key must still be allowed it)."""
    service = service_of(request)
    tenant = await service.caller(request)
    saved = await service.sessions.load_saved(tenant, request.path_params["saved_id"])
    profile, limits, runtime = service.policy(tenant, saved.profile, None, saved.runtime)
    live = await service.sessions.resume(
        tenant, profile, limits, runtime, saved.snapshot, owner=tenant.name,
        secret=service.snapshot_secret, folders=saved.files, saved_id=saved.handle,
    )  # fmt: skip
    return SafeJSONResponse(live.describe(), status_code=201)


async def delete_saved_session(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    await service.sessions.delete_saved(tenant, request.path_params["saved_id"])
    return Response(status_code=204)


async def hand_over_session(request: Request) -> Response:
    """Another replica's signed call: leave the session to it (``SessionStore.hand_over``);
    ``204``, or the refusal (409 while it runs a call, 422/507 when it cannot be saved)."""
    service = service_of(request)
    if internal_call(request) is None:
        raise ApiError(404, "not_found", "no such route")
    tenant = await service.caller(request)
    live = service.sessions.get(request.path_params["session_id"], tenant)
    await service.sessions.hand_over(live)
    return Response(status_code=204)


def routes() -> list[BaseRoute]:
    return [
        Route("/api/sessions", create_session, methods=["POST"]),
        Route("/api/sessions/resume", resume_session, methods=["POST"]),
        Route("/api/sessions/{session_id}", show_session, methods=["GET"]),
        Route("/api/sessions/{session_id}", delete_session, methods=["DELETE"]),
        Route("/api/sessions/{session_id}/run", run_in_session, methods=["POST"]),
        Route("/api/sessions/{session_id}/run/stream", stream_in_session, methods=["POST"]),
        Route("/api/sessions/{session_id}/fork", fork_session, methods=["POST"]),
        Route("/api/sessions/{session_id}/snapshot", snapshot_session, methods=["GET"]),
        Route("/api/sessions/{session_id}/save", save_session, methods=["POST"]),
        Route("/api/sessions/{session_id}/hand-over", hand_over_session, methods=["POST"]),
        Route("/api/saved-sessions/{saved_id}/resume", resume_saved_session, methods=["POST"]),
        Route("/api/saved-sessions/{saved_id}", delete_saved_session, methods=["DELETE"]),
    ]
