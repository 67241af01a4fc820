"""Request bodies as pydantic models, and ``read_model`` which turns a request into one or a 4xx.

Unknown fields, wrong types, out-of-range limits, bad base64, oversize bodies and bad JSON are all
refused here with a clear ``ApiError``; the routes only see valid, typed requests.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.requests import Request

from ..inputs import FILE_NAME_PATTERN, MAX_FILE_NAME_CHARS, MAX_SOURCE_BYTES, MAX_STDIN_BYTES
from ..limits import limit_ranges
from .errors import ApiError

__all__ = [
    "LimitsRequest",
    "FileIn",
    "RunRequest",
    "SessionCreate",
    "SessionRunRequest",
    "WsStart",
    "read_model",
    "parse_model",
]

_RANGES = limit_ranges()


def _limit(name: str, integer: bool) -> Any:
    r = _RANGES[name]
    kind: Any = int if integer else float
    return Annotated[
        kind | None,
        Field(default=None, ge=r["minimum"], le=r["maximum"], description=f"in {r['unit']}"),
    ]


def _utf8(value: str, what: str, max_bytes: int) -> str:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(f"{what} is not valid Unicode text (lone surrogate)") from None
    if size > max_bytes:
        raise ValueError(f"{what} is {size} bytes; the limit is {max_bytes} bytes")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class LimitsRequest(_Strict):
    """Limits for this run; each may only be lower than the profile's."""

    cpu_seconds: _limit("cpu_seconds", False)  # type: ignore[valid-type]
    wall_seconds: _limit("wall_seconds", False)  # type: ignore[valid-type]
    memory_mb: _limit("memory_mb", True)  # type: ignore[valid-type]
    stdout_bytes: _limit("stdout_bytes", True)  # type: ignore[valid-type]
    stderr_bytes: _limit("stderr_bytes", True)  # type: ignore[valid-type]
    disk_mb: _limit("disk_mb", False)  # type: ignore[valid-type]
    max_files: _limit("max_files", True)  # type: ignore[valid-type]
    input_wait_seconds: _limit("input_wait_seconds", False)  # type: ignore[valid-type]

    def given(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class FileIn(_Strict):
    """A file placed in the run's working directory (``/scratch/<name>``) before it starts."""

    name: str = Field(
        min_length=1,
        max_length=MAX_FILE_NAME_CHARS,
        pattern=FILE_NAME_PATTERN,
        description="plain file name: letters, digits, '.', '_', '-', inner spaces; no directories",
    )
    content_base64: str = Field(max_length=12 << 20)

    @field_validator("content_base64")
    @classmethod
    def _is_base64(cls, value: str) -> str:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("content_base64 is not valid base64") from None
        return value

    def content(self) -> bytes:
        return base64.b64decode(self.content_base64, validate=True)


ProfileName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
FilesAs = Literal["base64", "url"]


class _RunFields(_Strict):
    code: str = Field(max_length=MAX_SOURCE_BYTES, description="Python source to run")
    stdin: str | None = Field(
        default=None, max_length=MAX_STDIN_BYTES, description="given up front"
    )
    limits: LimitsRequest | None = None
    files: list[FileIn] = Field(default_factory=list, max_length=256)
    display: bool | Literal["figures"] | None = Field(
        default=None,
        description=(
            "true: capture open plots and the last expression's value in outputs; \"figures\": "
            "open plots only; false: neither (plt.show() always captures). Default: the profile's"
        ),
    )
    filename: str | None = Field(
        default=None,
        max_length=MAX_FILE_NAME_CHARS,
        pattern=FILE_NAME_PATTERN,
        description="the name the code runs under, shown in tracebacks (e.g. main.py); "
        "default <string>",
    )
    files_as: FilesAs = Field(
        default="base64",
        description="files the run wrote: inline as base64, or as short-lived download URLs",
    )

    @field_validator("code")
    @classmethod
    def _code_size(cls, value: str) -> str:
        return _utf8(value, "code", MAX_SOURCE_BYTES)

    @field_validator("stdin")
    @classmethod
    def _stdin_size(cls, value: str | None) -> str | None:
        return None if value is None else _utf8(value, "stdin", MAX_STDIN_BYTES)

    @field_validator("files")
    @classmethod
    def _unique_names(cls, value: list[FileIn]) -> list[FileIn]:
        names = [f.name for f in value]
        if len(set(names)) != len(names):
            raise ValueError("file names must be unique")
        return value


class RunRequest(_RunFields):
    """``POST /api/run`` and ``POST /api/run/stream``: one run in a fresh instance."""

    profile: ProfileName | None = None
    runtime: Literal["default", "small"] | None = None


class SessionCreate(_Strict):
    """``POST /api/sessions``: a long-lived instance keeping variables and files across calls."""

    profile: ProfileName | None = None
    limits: LimitsRequest | None = None
    runtime: Literal["default", "small"] | None = None


class SessionRunRequest(_RunFields):
    """``POST /api/sessions/{id}/run``: one call in the session, with its own limits."""


class WsStart(RunRequest):
    """The first WebSocket message: ``{"type": "run", ...RunRequest}``."""

    type: Literal["run"]


ModelT = TypeVar("ModelT", bound=BaseModel)


def _strict_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors without echoing the (possibly huge) input back."""
    return [
        {"loc": ".".join(str(p) for p in e["loc"]) or "body", "msg": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_input=False, include_context=False)
    ]


def parse_model(model: type[ModelT], data: Any) -> ModelT:
    """Validate decoded JSON against ``model``; ``ApiError(422)`` naming every bad field."""
    if not isinstance(data, dict):
        raise ApiError(422, "invalid_request", "the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = validation_details(exc)
        first = details[0]
        raise ApiError(
            422, "invalid_request", f"{first['loc']}: {first['msg']}", details=details
        ) from None


def decode_json(raw: bytes | str) -> Any:
    """JSON text to Python, refusing NaN/Infinity; ``ApiError(400)`` on anything malformed."""
    try:
        return json.loads(raw, parse_constant=_strict_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(400, "bad_json", f"the request body is not valid JSON: {exc}") from None


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The body; 413 once it passes ``max_bytes`` (checked before and while reading)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "bad_request", "Content-Length is not a number")
        if int(declared) > max_bytes:
            raise ApiError(
                413, "body_too_large", f"the body is over the limit of {max_bytes} bytes"
            )
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise ApiError(
                413, "body_too_large", f"the body is over the limit of {max_bytes} bytes"
            )
        chunks.append(chunk)
    return b"".join(chunks)


async def read_model(
    request: Request, model: type[ModelT], max_bytes: int, *, empty_ok: bool = False
) -> ModelT:
    """Read, size-check, decode and validate a JSON request body (an empty one is ``{}`` when
    ``empty_ok``)."""
    ctype = request.headers.get("content-type", "")
    if ctype.split(";")[0].strip().lower() not in ("application/json", ""):
        raise ApiError(415, "unsupported_media_type", "send the body as application/json")
    raw = await read_body(request, max_bytes)
    if empty_ok and not raw.strip():
        raw = b"{}"
    return parse_model(model, decode_json(raw))
