"""The browser tier's network (``network/browser_runs.py``; docs/security.md, "Network").

- ``POST /api/network/runs`` (the page, with its API key and user like every API route; body
  ``{"profile"?}``): ``{"on": true, "token", "seconds"}`` when a ``[network.NAME]`` rule names the
  key and profile (a grant for one run, valid for the profile's wall limit from the run's first
  request: ``network/browser_runs.py``), else ``{"on":
  false, "refusal"}`` with the sentence every request of the run raises, as on the server tier.
- ``POST /api/network/fetch`` (the run's worker, a synchronous XMLHttpRequest from the sandbox
  frame's opaque origin; body ``{"token", "request"}`` as text/plain, so no preflight): one
  request made by this server within the grant's rules and caps, answered as the server tier's
  host call is (``{"value": ...}`` or ``{"error": ...}``), each request in the audit log. The
  token is the only credential: the answer may be read by any origin (``*``), never with cookies.
  Any replica answers it (grants and caps in Redis with ``redis_url``: ``network/browser_runs.py``).
  An unknown or expired token is a failed attempt of the client's address, counted with wrong
  keys (``failed_auth_rate``): an address over it gets ``429`` with ``Retry-After`` and its
  tokens are not even looked up, so nobody can guess them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ...execution import Refused
from ...network import answer_request, describe_off, rules_for
from ...network.calls import encode_error
from ..errors import ApiError
from ..schemas import NetworkRunRequest, decode_json, read_body, read_model
from ..service import client_address
from ..faces import NetworkFace
from ._common import app_service

__all__ = ["FETCH_BODIES", "fetch_endpoint", "open_endpoint", "routes"]

FETCH_BODIES = 32  # network requests of browser runs read at once from one address (a class behind one NAT)

_READABLE = {"access-control-allow-origin": "*", "cache-control": "no-store"}


def service_of(conn: HTTPConnection) -> NetworkFace:
    """What this module sees of the service (``http/faces.py``)."""
    return app_service(conn)


async def open_endpoint(request: Request) -> Response:
    service = service_of(request)
    tenant = await service.caller(request)
    body = await read_model(request, NetworkRunRequest, service.client_bounds.max_body_bytes, empty_ok=True)
    profile, limits, _ = service.policy(tenant, body.profile, None)
    rules = rules_for(tuple(service.network_rules.values()), tenant.name, profile.name)
    if not rules:
        return JSONResponse({"on": False, "refusal": describe_off(tenant.name, profile.name)})
    seconds = float(limits.wall_seconds)
    token = await service.browser_networks.open(rules, tenant=tenant.name, user=tenant.user,
                                                client=client_address(request), seconds=seconds)
    return JSONResponse({"on": True, "token": token, "seconds": seconds})


def _refused(message: str, status: int, headers: Mapping[str, str] | None = None) -> Response:
    return Response(encode_error("ConnectionRefusedError", message), status, headers={**_READABLE, **(headers or {})},
                    media_type="application/json")


def _over(error: Refused) -> Response:
    return _refused(error.message, error.status, error.headers)


async def fetch_endpoint(request: Request) -> Response:
    service = service_of(request)
    client = client_address(request)
    try:  # the credential is in the body: bodies counted per address, more of them than a key's
        raw = await read_body(request, service.client_bounds.max_body_bytes, (f"network:{client}", FETCH_BODIES))
    except ApiError as error:  # the guest reads it as its exception (a refusal any origin may read)
        return _refused(error.message, error.status, error.headers)
    bounds = service.client_bounds
    try:  # its size, element count and depth checked before it is parsed
        msg = decode_json(raw, bounds.max_json_structure, bounds.max_json_depth)
    except ApiError as error:
        if error.status == 413:  # too many elements, too deep
            return _refused(error.message, error.status, error.headers)
        msg = None
    if type(msg) is not dict or type(msg.get("token")) is not str or type(msg.get("request")) is not dict:
        return _refused("a network request the runner cannot read (it needs the run's token and the request)", 400)
    rejections = service.metrics.rejections
    over: Refused | None
    grant = None
    try:
        over = await service.gatekeeper.failed_too_often(client)
        if over is None:
            grant = await service.browser_networks.get(msg["token"])
            if grant is None:
                over = await service.gatekeeper.failed_attempt(client)
    except Refused as e:  # Redis did not answer: the guest raises the sentence
        over = e
    if over is not None:
        rejections.labels(over.code).inc()
        return _over(over)
    if grant is None:
        rejections.labels("network_grant_unknown").inc()
        return _refused("this run's network grant is unknown or has expired (the run took longer than its "
                        "wall limit, or the runner restarted)", 403)
    inner = json.dumps(msg["request"], separators=(",", ":"), ensure_ascii=True).encode("ascii")
    answer = await answer_request(grant.network, inner, grant.deadline)
    return Response(answer, headers=_READABLE, media_type="application/json")


def routes() -> list[BaseRoute]:
    return [Route("/api/network/runs", open_endpoint, methods=["POST"]),
            Route("/api/network/fetch", fetch_endpoint, methods=["POST"])]
