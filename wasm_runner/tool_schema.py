"""OpenAI-style function (tool) definitions for the HTTP API, and how to turn a call into a request.

Apps whose model does not speak MCP pass ``openai_tools()`` as ``tools=`` to a chat API, then send
each tool call the model makes to the wasm-runner server with ``http_request(name, arguments)``::

    tools = openai_tools()                       # or: wasm-runner tools-schema > tools.json
    method, path, body = http_request(call.name, json.loads(call.arguments))
    reply = httpx.request(method, base_url + path, json=body, headers={"Authorization": f"Bearer {key}"})

The functions mirror the MCP tools: ``run_python`` (``POST /api/run``), ``open_session``
(``POST /api/sessions``), ``run_cell`` (``POST /api/sessions/{session_id}/run``),
``fork_session`` (``POST /api/sessions/{session_id}/fork``), ``save_session`` (``POST
/api/sessions/{session_id}/save``), ``resume_session`` (``POST /api/saved-sessions/{saved_id}/resume``),
``delete_saved_session`` (``DELETE /api/saved-sessions/{saved_id}``) and ``close_session`` (``DELETE
/api/sessions/{session_id}``). Files travel with a run (``files``),
placed in the working directory ``/scratch`` before the code starts.
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from .errors import WasmRunnerError
from .explanations import LANG_DESCRIPTION, LANG_PATTERN
from .limits import Limits
from .mcp.descriptions import environment_text, limits_text

__all__ = ["Operation", "OPERATIONS", "openai_tools", "http_request", "ToolCallError", "main"]

Style = Literal["chat", "responses"]


class ToolCallError(WasmRunnerError, ValueError):
    """A tool call whose name or arguments cannot become an HTTP request."""


_FILES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "Files to place in the working directory /scratch before the code runs.",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Plain file name such as 'sales.csv' (no folders)."},
            "content": {"type": "string", "description": "The file's content: text as is, binary as base64."},
            "encoding": {
                "type": "string",
                "enum": ["utf-8", "base64"],
                "description": "'utf-8' for text (default), 'base64' for binary files.",
            },
        },
        "required": ["name", "content"],
        "additionalProperties": False,
    },
}
_SESSION_ID: dict[str, Any] = {"type": "string", "description": "The session_id open_session returned."}
_PACKAGES: dict[str, Any] = {
    "type": "array",
    "items": {"type": "string"},
    "maxItems": 64,
    "description": "Packages beyond the built-in ones the program imports, from the server's allowed list "
    "(e.g. [\"rich\"]); an import of an allowed package asks for it too.",
}
_SAVED_ID: dict[str, Any] = {"type": "string", "description": "The saved_id save_session returned."}
_CODE: dict[str, Any] = {"type": "string", "description": "Python source to run."}
_LANG: dict[str, Any] = {"type": "string", "maxLength": 35, "pattern": LANG_PATTERN, "description": LANG_DESCRIPTION}
_PATH_PARAMETERS = ("session_id", "saved_id")


@dataclass(frozen=True)
class Operation:
    """One function: its name, the HTTP call it makes, and its JSON-schema parameters."""

    name: str
    method: str
    path: str  # may contain {session_id} or {saved_id}
    summary: str
    parameters: dict[str, Any]

    def description(self, limits: Limits, runtime: str) -> str:
        return f"{self.summary}\n{environment_text(runtime)}\n{limits_text(limits)}"


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "run_python",
        "POST",
        "/api/run",
        "Run a Python program once in a fresh, isolated sandbox and get back its printed output, "
        "its plots (outputs, PNG as base64) and the files it wrote to /out. Nothing is kept "
        "between calls; for several steps on the same data use open_session and run_cell.",
        {
            "type": "object",
            "properties": {
                "code": _CODE,
                "stdin": {"type": "string", "description": "Text given on standard input."},
                "files": _FILES_SCHEMA,
                "packages": _PACKAGES,
                "lang": _LANG,
            },
            "required": ["code"],
            "additionalProperties": False,
        },
    ),
    Operation(
        "open_session",
        "POST",
        "/api/sessions",
        "Open a persistent Python session (like a notebook kernel): variables, imports and files "
        "survive from one run_cell to the next. Returns its session_id. Close it with "
        "close_session when done; closing deletes every file in it.",
        {"type": "object", "properties": {"packages": _PACKAGES}, "additionalProperties": False},
    ),
    Operation(
        "run_cell",
        "POST",
        "/api/sessions/{session_id}/run",
        "Run Python code in an open session, keeping the state of earlier cells. Files given "
        "in 'files' are placed in /scratch first (read them as e.g. pd.read_csv('sales.csv')). "
        "Returns printed output, a traceback trimmed to your code on error, plots, and the "
        "last expression's value as a table or text.",
        {
            "type": "object",
            "properties": {"session_id": _SESSION_ID, "code": _CODE, "files": _FILES_SCHEMA, "lang": _LANG},
            "required": ["session_id", "code"],
            "additionalProperties": False,
        },
    ),
    Operation(
        "fork_session",
        "POST",
        "/api/sessions/{session_id}/fork",
        "Copy an open session: each copy is a new session (its own session_id, in 'sessions' of "
        "the answer) with the same variables, imports and files as this one now, independent of "
        "it and of the other copies. Use it to try several continuations from one state; close "
        "each copy with close_session when done.",
        {
            "type": "object",
            "properties": {
                "session_id": _SESSION_ID,
                "copies": {"type": "integer", "minimum": 1, "maximum": 8,
                           "description": "How many copies (default 1)."},
                "keep_seeds": {"type": "boolean", "description": "true: the copies' random "
                               "generators continue as this session's would (default false)."},
            },
            "required": ["session_id"],
            "additionalProperties": False,
        },  # fmt: skip
    ),
    Operation(
        "save_session",
        "POST",
        "/api/sessions/{session_id}/save",
        "Save an open session's state (variables, imported modules, files) on the server and get "
        "a saved_id for it; the session stays open. resume_session with the saved_id later opens "
        "a new session continuing from exactly this state, even after this one is closed. Only "
        "this API key can use it; it expires after a while (expires_in, seconds) and counts in "
        "the key's disk budget: delete_saved_session those no longer needed.",
        {
            "type": "object",
            "properties": {"session_id": _SESSION_ID},
            "required": ["session_id"],
            "additionalProperties": False,
        },
    ),
    Operation(
        "resume_session",
        "POST",
        "/api/saved-sessions/{saved_id}/resume",
        "Open a new session continuing from a state save_session kept (variables, imports and "
        "files as they were when saved). Returns the new session's id; the saved state stays "
        "until it expires or is deleted, so it can be resumed again.",
        {
            "type": "object",
            "properties": {"saved_id": _SAVED_ID},
            "required": ["saved_id"],
            "additionalProperties": False,
        },
    ),
    Operation(
        "delete_saved_session",
        "DELETE",
        "/api/saved-sessions/{saved_id}",
        "Delete a state save_session kept; sessions resumed from it go on.",
        {
            "type": "object",
            "properties": {"saved_id": _SAVED_ID},
            "required": ["saved_id"],
            "additionalProperties": False,
        },
    ),
    Operation(
        "close_session",
        "DELETE",
        "/api/sessions/{session_id}",
        "Close a session: its Python process ends and all its files are deleted.",
        {
            "type": "object",
            "properties": {"session_id": _SESSION_ID},
            "required": ["session_id"],
            "additionalProperties": False,
        },
    ),
)
_BY_NAME = {op.name: op for op in OPERATIONS}


def openai_tools(
    limits: Limits | None = None, runtime: str = "default", style: Style = "chat"
) -> list[dict[str, Any]]:
    """The function definitions, as the Chat Completions API (``chat``) or Responses API takes them."""
    limits = limits or Limits()
    tools = []
    for op in OPERATIONS:
        fn = {"name": op.name, "description": op.description(limits, runtime), "parameters": copy.deepcopy(op.parameters)}
        tools.append({"type": "function", "function": fn} if style == "chat" else {"type": "function", **fn})
    return tools


def _file_in(item: Any) -> dict[str, str]:
    if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or not isinstance(item.get("content"), str):
        raise ToolCallError("each file needs a string 'name' and a string 'content'")
    encoding = item.get("encoding", "utf-8")
    if encoding == "base64":
        content_base64 = item["content"]
    elif encoding == "utf-8":
        content_base64 = base64.b64encode(item["content"].encode("utf-8")).decode("ascii")
    else:
        raise ToolCallError(f"file encoding must be 'utf-8' or 'base64', got {encoding!r}")
    return {"name": item["name"], "content_base64": content_base64}


def http_request(name: str, arguments: Mapping[str, Any]) -> tuple[str, str, dict[str, Any] | None]:
    """``(method, path, json_body)`` for a tool call; ``json_body`` is ``None`` for ``DELETE``.

    Raises ``ToolCallError`` for an unknown function or arguments outside its schema.
    """
    op = _BY_NAME.get(name)
    if op is None:
        raise ToolCallError(f"unknown function {name!r}; known: {', '.join(_BY_NAME)}")
    if not isinstance(arguments, Mapping):
        raise ToolCallError("arguments must be a JSON object")
    allowed = set(op.parameters["properties"])
    unknown = set(arguments) - allowed
    if unknown:
        raise ToolCallError(f"{name}: unknown argument(s) {sorted(unknown)}")
    missing = [p for p in op.parameters.get("required", []) if p not in arguments]
    if missing:
        raise ToolCallError(f"{name}: missing argument(s) {missing}")
    args = dict(arguments)
    path = op.path
    for param in _PATH_PARAMETERS:
        if "{" + param + "}" in path:
            value = args.pop(param)
            if not isinstance(value, str) or not value:
                raise ToolCallError(f"{name}: {param} must be a non-empty string")
            path = path.replace("{" + param + "}", quote(value, safe=""))
    if op.method == "DELETE":
        return op.method, path, None
    if "files" in args:
        if not isinstance(args["files"], list):
            raise ToolCallError(f"{name}: files must be a list")
        args["files"] = [_file_in(f) for f in args["files"]]
    for key in ("code", "stdin", "lang"):
        if key in args and not isinstance(args[key], str):
            raise ToolCallError(f"{name}: {key} must be a string")
    if "packages" in args and (not isinstance(args["packages"], list)
                               or not all(isinstance(p, str) for p in args["packages"])):
        raise ToolCallError(f"{name}: packages must be a list of package names")
    return op.method, path, args


def main(argv: Sequence[str] | None = None) -> int:
    """``wasm-runner tools-schema``: print the function definitions as JSON."""
    parser = argparse.ArgumentParser(
        prog="wasm-runner tools-schema",
        description="Print OpenAI-style function definitions for the HTTP API's run and session operations.",
    )
    parser.add_argument("--style", choices=["chat", "responses"], default="chat",
                        help="chat: Chat Completions 'tools' entries (default); responses: Responses API entries")
    parser.add_argument("--config", metavar="TOML",
                        help="the server's config file (default: $WASM_RUNNER_CONFIG, else built-in profiles)")
    parser.add_argument("--profile",
                        help="profile whose limits and runtime the descriptions state (default: the server's default)")
    parser.add_argument("--with-http", action="store_true",
                        help="wrap as {tools, operations}, adding each function's HTTP method and path")
    args = parser.parse_args(argv)
    from .settings import ConfigError, load_config

    try:
        config = load_config(args.config)
        if args.profile is not None and args.profile not in config.profiles:
            raise ConfigError(f"unknown profile {args.profile!r}; profiles: {', '.join(config.profiles)}")
    except ConfigError as exc:
        parser.error(str(exc))
    profile = config.profile(args.profile)
    tools = openai_tools(profile.limits, runtime=profile.runtime, style=args.style)
    doc: Any = tools
    if args.with_http:
        doc = {"tools": tools, "operations": {op.name: {"method": op.method, "path": op.path} for op in OPERATIONS}}
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
