"""Request bodies as pydantic models, and ``read_model`` which turns a request into one or a 4xx.

Unknown fields, wrong types, out-of-range limits, bad base64, oversize bodies and bad JSON are all
refused here with a clear ``ApiError``; the routes only see valid, typed requests.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.requests import Request

from ..explanations import LANG_PATTERN
from ..inputs import FILE_NAME_PATTERN, MAX_FILE_NAME_CHARS, MAX_SOURCE_BYTES, MAX_STDIN_BYTES
from ..limits import limit_ranges
from ..lint import MAX_LINT_BYTES
from .auth import current_tenant
from .errors import ApiError

__all__ = [
    "LimitsRequest",
    "LintRequest",
    "FileIn",
    "NetworkRunRequest",
    "RunRequest",
    "NotebookRunRequest",
    "SessionCreate",
    "SessionFork",
    "SessionRunRequest",
    "WsStart",
    "BodySlots",
    "read_body",
    "read_model",
    "parse_model",
    "decode_json",
    "check_json_shape",
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
    host_calls: _limit("host_calls", True)  # type: ignore[valid-type]
    host_call_bytes: _limit("host_call_bytes", True)  # type: ignore[valid-type]
    host_seconds: _limit("host_seconds", False)  # type: ignore[valid-type]

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


PackageName = Annotated[str, Field(max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]


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
    lang: str | None = Field(
        default=None,
        max_length=35,
        pattern=LANG_PATTERN,
        description="the language of the result's explanation (a BCP 47 tag such as de or de-AT); "
        "English when the server has no catalogue for it (docs/explanations.md)",
    )
    functions: list[Annotated[str, Field(max_length=100, pattern=r"^[A-Za-z][A-Za-z0-9_]*$")]] | None = Field(
        default=None,
        max_length=64,
        description="host functions the code may call (from host import NAME): functions the "
        "server declares that this key and profile may use (docs/host-functions.md)",
    )
    packages: list[PackageName] | None = Field(
        default=None,
        max_length=64,
        description="packages of the operator's wheelhouse the code may import (e.g. [\"rich\"]); "
        "a '# requires: NAME' line or an import of the wheelhouse's module asks too "
        "(docs/configuration.md#packages)",
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


class LintRequest(_Strict):
    """``POST /api/lint``: the beginner lint of the playground's editor (docs/http-api.md)."""

    code: str = Field(max_length=MAX_LINT_BYTES, description="Python source to lint")
    style: bool = Field(default=False, description="add style notes (names, long lines, ';')")
    lang: str | None = Field(
        default=None,
        max_length=35,
        pattern=LANG_PATTERN,
        description="the language of the findings' title and message (a BCP 47 tag such as de or "
        "de-AT): English when the lint has no wording in it (docs/lint.md)",
    )

    @field_validator("code")
    @classmethod
    def _code_size(cls, value: str) -> str:
        return _utf8(value, "code", MAX_LINT_BYTES)


class NetworkRunRequest(_Strict):
    """``POST /api/network/runs``: the network of one browser-tier run, under ``profile``."""

    profile: ProfileName | None = None


class SessionCreate(_Strict):
    """``POST /api/sessions``: a long-lived instance keeping variables and files across calls."""

    profile: ProfileName | None = None
    limits: LimitsRequest | None = None
    runtime: Literal["default", "small"] | None = None
    packages: list[PackageName] | None = Field(
        default=None,
        max_length=64,
        description="packages of the operator's wheelhouse the session's cells may import, mounted "
        "from its first cell; a session opened with any sees the whole wheelhouse "
        "(docs/configuration.md#packages)",
    )


class SessionFork(_Strict):
    """``POST /api/sessions/{id}/fork``: independent copies of a session's state."""

    copies: int = Field(default=1, ge=1, le=64, description="how many copies (at most the "
                        "server's max_fork_copies, 8 by default)")
    keep_seeds: bool = Field(default=False, description="false: each copy reseeds random, "
                             "numpy.random and tempfile names from fresh entropy before its next cell")


class SessionRunRequest(_RunFields):
    """``POST /api/sessions/{id}/run``: one call in the session, with its own limits."""


class NotebookRunRequest(_Strict):
    """``POST /api/notebooks/run``: a notebook's code cells, in order, in one new session."""

    notebook: dict[str, Any] = Field(description="the .ipynb file's content (nbformat 4)")
    profile: ProfileName | None = None
    limits: LimitsRequest | None = Field(default=None, description="each cell's limits (the "
                                         "profile's, tightened)")
    runtime: Literal["default", "small"] | None = None
    allow_errors: bool = Field(default=False, description="false: the first cell that fails stops "
                               "the run, as Run All does; true: the cells after it run too (a limit "
                               "that ends the session always stops it)")


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


# JSON limits, checked before the document is materialised: the bytes outside strings (structure:
# brackets, commas, colons, numbers, literals; each string counts 1) bound the number of elements a
# body can make, and the nesting depth is bounded on its own. A valid request has a few hundred.
MAX_JSON_STRUCTURE = 65536
MAX_JSON_DEPTH = 32
_OPEN = frozenset("[{")
_CLOSE = frozenset("]}")


def check_json_shape(
    text: str, max_structure: int = MAX_JSON_STRUCTURE, max_depth: int = MAX_JSON_DEPTH
) -> None:
    """``ApiError`` when ``text`` has more JSON structure or nesting than allowed.

    Strings are skipped with the C scanner of the ``json`` module (one call per string), so the
    work in Python is bounded by ``max_structure``, whatever the body's size.
    """
    structure = 0
    depth = 0
    i = 0
    n = len(text)
    too_complex = ApiError(
        413, "json_too_complex",
        f"the JSON has more than {max_structure} elements; send fewer, larger values",
    )  # fmt: skip
    while i < n:
        j = text.find('"', i)
        end = n if j < 0 else j
        if end - i > 4 * max_structure:  # no copy of a long run of structure: refuse it outright
            raise too_complex
        compact = "".join(text[i:end].split())
        structure += len(compact) + (j >= 0)
        if structure > max_structure:
            raise too_complex
        for ch in compact:
            if ch in _OPEN:
                depth += 1
                if depth > max_depth:
                    raise ApiError(
                        413, "json_too_deep", f"the JSON nests deeper than {max_depth} levels"
                    )
            elif ch in _CLOSE:
                depth -= 1
        if j < 0:
            return
        try:
            _, i = _scanstring(text, j + 1, True)
        except ValueError as exc:
            raise ApiError(400, "bad_json", f"the request body is not valid JSON: {exc}") from None


def decode_json(
    raw: bytes | str, max_structure: int = MAX_JSON_STRUCTURE, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """JSON text to Python, refusing NaN/Infinity; ``ApiError(400)`` on anything malformed and
    ``ApiError(413)`` on too many elements or too deep a nesting (checked before parsing)."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else raw
    except UnicodeDecodeError as exc:
        raise ApiError(400, "bad_json", f"the request body is not valid JSON: {exc}") from None
    check_json_shape(text, max_structure, max_depth)
    try:
        return json.loads(text, parse_constant=_strict_constant)
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, "bad_json", f"the request body is not valid JSON: {exc}") from None


class BodySlots:
    """How many request bodies each tenant is sending at once; more are refused with 429.

    Authentication comes before any body is read, so only known tenants (or, with auth off, known
    addresses) hold these; the bytes buffered at once are at most slots x ``max_body_bytes``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def take(self, who: str, limit: int) -> None:
        with self._lock:
            if self._held.get(who, 0) >= limit:
                raise ApiError(
                    429, "too_many_uploads",
                    f"{'this API key' if current_tenant.get() is not None else 'this client'} is "
                    f"already sending {limit} request bodies; wait for one",
                    headers={"Retry-After": "5"},
                )  # fmt: skip
            self._held[who] = self._held.get(who, 0) + 1

    def give(self, who: str) -> None:
        with self._lock:
            self._held[who] -= 1
            if not self._held[who]:
                del self._held[who]


BODY_SLOTS = BodySlots()
# JSON decoding and validation run here, off the event loop; two at a time at most
_PARSERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="wasm-json")


async def read_body(request: Request, max_bytes: int, slots: tuple[str, int] | None = None) -> bytes:
    """The body; 413 once it passes ``max_bytes`` (checked before and while reading). Each
    tenant (each address without one) sends a few bodies at once (``BodySlots``); ``slots``
    (who, how many) counts a route's bodies apart (a browser run's network requests, whose
    credential is in the body, per address)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "bad_request", "Content-Length is not a number")
        if int(declared) > max_bytes:
            raise ApiError(
                413, "body_too_large", f"the body is over the limit of {max_bytes} bytes"
            )
    tenant = current_tenant.get()
    if slots is not None:
        who, limit = slots
    else:
        who = tenant.name if tenant is not None else f"address:{request.client.host if request.client else '?'}"
        limit = max(2, tenant.max_concurrent * 2) if tenant is not None else 2
    BODY_SLOTS.take(who, limit)
    try:
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
    finally:
        BODY_SLOTS.give(who)


async def read_model(
    request: Request, model: type[ModelT], max_bytes: int, *, empty_ok: bool = False
) -> ModelT:
    """Read, size-check, decode and validate a JSON request body (an empty one is ``{}`` when
    ``empty_ok``); decoding and validation run off the event loop."""
    ctype = request.headers.get("content-type", "")
    if ctype.split(";")[0].strip().lower() not in ("application/json", ""):
        raise ApiError(415, "unsupported_media_type", "send the body as application/json")
    raw = await read_body(request, max_bytes)
    if empty_ok and not raw.strip():
        raw = b"{}"
    config = getattr(getattr(request.app.state, "service", None), "config", None)
    bounds = getattr(config, "client_bounds", None)  # ClientBounds; none outside a server's app
    structure = getattr(bounds, "max_json_structure", MAX_JSON_STRUCTURE)
    depth = getattr(bounds, "max_json_depth", MAX_JSON_DEPTH)

    held = [raw]
    del raw

    def parse() -> ModelT:
        text = held.pop()
        return parse_model(model, decode_json(text, structure, depth))

    return await asyncio.get_running_loop().run_in_executor(_PARSERS, parse)
