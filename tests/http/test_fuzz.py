"""A schemathesis fuzz pass over the OpenAPI description: no request gets a 5xx, and every
response matches the documented status codes, content types and schemas.

``WASM_RUNNER_FUZZ_EXAMPLES`` sets the examples per operation (default 25)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
from tests.support.live_server import KEY, LiveServer, live_server, make_config
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from wasm_runner.http.openapi import openapi_document


@pytest.fixture(scope="module")
def fuzz_server(
    warm_sandbox: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    config = make_config(tmp_path_factory.mktemp("fuzz"), max_running=2, max_queue=16)
    with live_server(config) as live:
        yield live


# The description the server serves (checked below), loaded at collection time so schemathesis
# can generate cases per operation; the cases are sent to the live server.
schema = schemathesis.openapi.from_dict(openapi_document())


@schema.parametrize()
@settings(
    max_examples=int(os.environ.get("WASM_RUNNER_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_5xx_and_responses_as_documented(
    case: schemathesis.Case, fuzz_server: LiveServer
) -> None:
    case.call_and_validate(
        base_url=fuzz_server.url,
        headers={"Authorization": f"Bearer {KEY}"},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
        timeout=120,
    )


def test_the_served_description_is_the_fuzzed_one(fuzz_server: LiveServer) -> None:
    served = httpx.get(fuzz_server.url + "/api/openapi.json").json()
    assert served == openapi_document()
    operations = {op.ok().label for op in schema.get_all_operations()}
    assert "POST /api/run" in operations and "POST /api/sessions/{session_id}/run" in operations
    assert {"GET /.well-known/jwks.json", "GET /lti/config", "GET /lti/canvas.json"} <= operations
