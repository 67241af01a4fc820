"""Request validation: every malformed body becomes a clear 4xx ``ApiError``."""

from __future__ import annotations

import base64

import pytest

from wasm_runner.http.errors import ApiError
from wasm_runner.http.schemas import RunRequest, decode_json, parse_model


def test_a_valid_request() -> None:
    body = {
        "code": "print(1)",
        "stdin": "x",
        "limits": {"cpu_seconds": 1, "memory_mb": 64},
        "files": [{"name": "data.csv", "content_base64": base64.b64encode(b"a,b").decode()}],
        "files_as": "url",
    }
    req = parse_model(RunRequest, body)
    assert req.limits is not None and req.limits.given() == {"cpu_seconds": 1.0, "memory_mb": 64}
    assert req.files[0].content() == b"a,b"


@pytest.mark.parametrize(
    "body, where",
    [
        ({}, "code"),
        ({"code": 1}, "code"),
        ({"code": "x", "extra": 1}, "extra"),
        ({"code": "x", "limits": {"cpu_seconds": "1"}}, "limits.cpu_seconds"),
        ({"code": "x", "limits": {"cpu_seconds": 1e9}}, "limits.cpu_seconds"),
        ({"code": "x", "limits": {"fuel": 1}}, "limits.fuel"),
        ({"code": "x", "files": [{"name": "../etc", "content_base64": ""}]}, "files.0.name"),
        (
            {"code": "x", "files": [{"name": "a", "content_base64": "***"}]},
            "files.0.content_base64",
        ),
        ({"code": "x", "runtime": "cpython2"}, "runtime"),
        ({"code": "\ud800"}, "code"),
        ([1, 2], "the request body"),
    ],
)
def test_invalid_requests_are_422_naming_the_field(body: object, where: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_model(RunRequest, body)
    assert info.value.status == 422
    assert info.value.message.startswith(where)


@pytest.mark.parametrize("raw", [b"{", b"{'code': 1}", b'{"code": NaN}', b"\xff\xfe"])
def test_bad_json_is_400(raw: bytes) -> None:
    with pytest.raises(ApiError) as info:
        decode_json(raw)
    assert info.value.status == 400 and info.value.code == "bad_json"
