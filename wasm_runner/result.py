"""The result of one run: the contract every tier and every face shares.

The server tier (wasmtime), the browser tier (Pyodide) and every face (CLI, HTTP, MCP) produce and
consume these fields. Change them here, and in ``RESULT_JSON_SCHEMA`` below, nowhere else.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .notebook.bundles import notebook_outputs

__all__ = ["FileOut", "LIMIT_STATUSES", "Output", "RESULT_JSON_SCHEMA", "Result", "Status", "output_position"]


class Status(str, Enum):
    """How a run ended. Every limit that stops a run has a status of its own."""

    OK = "ok"
    ERROR = "error"  # non-zero exit or uncaught exception
    CPU_LIMIT = "cpu_limit"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    DISK_LIMIT = "disk_limit"
    INVALID_INPUT = "invalid_input"
    INTERNAL_ERROR = "internal_error"
    CANCELLED = "cancelled"
    HOST_CALLS_LIMIT = "host_calls_limit"  # host functions: more calls than ``host_calls``
    HOST_BYTES_LIMIT = "host_bytes_limit"  # a call's arguments or result over ``host_call_bytes``
    HOST_TIME_LIMIT = "host_time_limit"  # more than ``host_seconds`` inside host functions

    def __str__(self) -> str:
        return self.value


LIMIT_STATUSES = frozenset(
    {Status.CPU_LIMIT, Status.TIMEOUT, Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT, Status.DISK_LIMIT,
     Status.HOST_CALLS_LIMIT, Status.HOST_BYTES_LIMIT, Status.HOST_TIME_LIMIT}
)


@dataclass(frozen=True)
class FileOut:
    """A regular file the run left in a writable grant. ``path`` is the guest path (``/out/x.csv``)."""

    path: str
    content: bytes

    @property
    def size(self) -> int:
        return len(self.content)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "content_base64": base64.b64encode(self.content).decode("ascii"),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FileOut:
        return cls(path=d["path"], content=base64.b64decode(d.get("content_base64", "")))


@dataclass(frozen=True)
class Output:
    """A rich output: a plot, a table, a value shown like a notebook cell.

    ``data`` is text for text mime types and base64 for binary ones (``image/png``). Kind
    ``display`` (``display(obj)``) and ``result`` (the last expression's value) are Jupyter MIME
    bundles: mime ``application/vnd.wasm-runner.bundle+json``, data the bundle as JSON text
    (``{"data": {mime: data}, "metadata": {...}}``, ``wasm_runner/notebook/bundles.py``).
    ``at``, when the tier knows it: how much the program had written when it made this output,
    ``{"stdout": bytes, "stderr": bytes}`` (UTF-8 bytes of ``stdout`` and ``stderr``), so that a
    notebook shows streams and outputs in the order the program made them.
    """

    kind: str  # "image", "table", "text", "display", "result"
    mime: str
    data: str
    at: tuple[int, int] | None = None  # (stdout bytes, stderr bytes) written before this output

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "mime": self.mime, "data": self.data}
        if self.at is not None:
            out["at"] = {"stdout": self.at[0], "stderr": self.at[1]}
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Output:
        return cls(kind=d["kind"], mime=d["mime"], data=d["data"], at=output_position(d.get("at")))


def output_position(raw: Any) -> tuple[int, int] | None:
    """An output's ``at`` (``{"stdout": n, "stderr": m}``, whole bytes) as a pair, or None when
    it is missing or not that shape (it comes from the guest: nothing is trusted)."""
    if not isinstance(raw, dict):
        return None
    values = (raw.get("stdout"), raw.get("stderr"))
    if not all(type(v) is int and 0 <= v < 1 << 53 for v in values):
        return None
    return values[0], values[1]  # type: ignore[return-value]


@dataclass
class Result:
    """What one run produced and how it ended.

    ``message`` is one plain sentence when the run did not end ``ok`` (which limit, its value), and
    empty otherwise. ``limit`` names the limit that stopped the run (``cpu``, ``wall``, ``memory``,
    ``output``, ``disk``, ``input_wait``: an abandoned ``input()``; ``stack``: the interpreter ran
    out of stack, status ``error``; ``host_calls``, ``host_bytes``, ``host_time``: the host
    functions' limits) or is ``None``. ``input_wait_ms`` is the part of ``wall_ms``
    spent waiting for interactive input, which no limit but ``input_wait_seconds`` counts.
    """

    status: Status
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    fuel_used: int = 0
    wall_ms: float = 0.0
    files: list[FileOut] = field(default_factory=list)
    outputs: list[Output] = field(default_factory=list)
    message: str = ""
    limit: str | None = None
    runtime: str = ""
    input_wait_ms: float = 0.0  # time spent waiting for interactive input (part of wall_ms)
    # what went wrong, for a beginner (docs/explanations.md): {id, title, text, hint, span, params,
    # lang}, or None when the run ended ok or nothing is known about how it failed
    explanation: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "fuel_used": self.fuel_used,
            "wall_ms": self.wall_ms,
            "files": [f.to_dict() for f in self.files],
            "outputs": [o.to_dict() for o in self.outputs],
            "message": self.message,
            "limit": self.limit,
            "runtime": self.runtime,
            "input_wait_ms": self.input_wait_ms,
            "explanation": self.explanation,
            "notebook_outputs": self.notebook_outputs(),
        }

    def notebook_outputs(self, execution_count: int | None = None) -> list[dict[str, Any]]:
        """The run as a notebook code cell's ``outputs`` (nbformat v4: stream, display_data,
        execute_result, error)."""
        return notebook_outputs(self, execution_count)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        return cls(
            status=Status(d["status"]),
            exit_code=d.get("exit_code"),
            stdout=d.get("stdout", ""),
            stderr=d.get("stderr", ""),
            stdout_truncated=bool(d.get("stdout_truncated", False)),
            stderr_truncated=bool(d.get("stderr_truncated", False)),
            fuel_used=int(d.get("fuel_used", 0)),
            wall_ms=float(d.get("wall_ms", 0.0)),
            files=[FileOut.from_dict(f) for f in d.get("files", [])],
            outputs=[Output.from_dict(o) for o in d.get("outputs", [])],
            message=d.get("message", ""),
            limit=d.get("limit"),
            runtime=d.get("runtime", ""),
            input_wait_ms=float(d.get("input_wait_ms", 0.0)),
            explanation=d.get("explanation") if isinstance(d.get("explanation"), dict) else None,
        )

    @classmethod
    def invalid(cls, message: str, runtime: str = "") -> Result:
        """A run refused before it started: bad source, stdin or limits."""
        return cls(status=Status.INVALID_INPUT, message=message, runtime=runtime)


RESULT_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "wasm-runner result",
    "type": "object",
    "required": [
        "status",
        "exit_code",
        "stdout",
        "stderr",
        "stdout_truncated",
        "stderr_truncated",
        "fuel_used",
        "wall_ms",
        "files",
        "outputs",
        "message",
        "limit",
        "runtime",
    ],
    "properties": {
        "status": {"enum": [s.value for s in Status]},
        "exit_code": {"type": ["integer", "null"]},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "stdout_truncated": {"type": "boolean"},
        "stderr_truncated": {"type": "boolean"},
        "fuel_used": {"type": "integer", "minimum": 0},
        "wall_ms": {"type": "number", "minimum": 0},
        "files": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "size", "sha256"],
                "properties": {
                    "path": {"type": "string"},
                    "size": {"type": "integer"},
                    "sha256": {"type": "string"},
                    "content_base64": {"type": "string"},
                    "url": {"type": "string"},
                },
            },
        },
        "outputs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["kind", "mime", "data"],
                "properties": {
                    "kind": {"enum": ["image", "table", "text", "display", "result"]},
                    "mime": {"type": "string"},
                    "data": {"type": "string"},
                    "at": {
                        "type": "object",
                        "description": "UTF-8 bytes of stdout and stderr the program had written when it made "
                                       "this output (where the tier records it)",
                        "required": ["stdout", "stderr"],
                        "properties": {"stdout": {"type": "integer"}, "stderr": {"type": "integer"}},
                    },
                },
            },
        },
        "message": {"type": "string"},
        "limit": {"enum": [None, "cpu", "wall", "memory", "output", "disk", "stack", "input_wait",
                           "host_calls", "host_bytes", "host_time"]},
        "runtime": {"type": "string"},
        "input_wait_ms": {"type": "number", "minimum": 0},
        "explanation": {
            "description": "what went wrong, in plain language, with one next step (docs/explanations.md)",
            "type": ["object", "null"],
            "required": ["id", "title", "text", "hint", "span"],
            "properties": {
                "id": {"type": "string"},
                "title": {"type": "string"},
                "text": {"type": "string"},
                "hint": {"type": "string"},
                "span": {
                    "type": ["object", "null"],
                    "description": "the failing part of the code: line (1-based), col and end_col "
                                   "(0-based characters of that line, end_col exclusive)",
                    "properties": {"line": {"type": "integer"}, "col": {"type": "integer"},
                                   "end_col": {"type": "integer"}},
                },
                "params": {"type": "object"},
                "lang": {"type": "string"},
            },
        },
        "notebook_outputs": {
            "description": "the run as a notebook code cell's outputs (nbformat v4)",
            "type": "array",
            "items": {
                "type": "object",
                "required": ["output_type"],
                "properties": {"output_type": {"enum": ["stream", "display_data", "execute_result", "error"]}},
            },
        },
    },
}
