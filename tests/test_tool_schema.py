"""Tests for wasm_runner.tool_schema: the exported function definitions and their HTTP mapping."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from wasm_runner.limits import Limits
from tests.support.live_server import operator_env
from wasm_runner.tool_schema import OPERATIONS, ToolCallError, http_request, openai_tools

# The shape the Chat Completions API takes in `tools=` (function calling).
CHAT_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "function"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "function"},
        "function": {
            "type": "object",
            "required": ["name", "description", "parameters"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                "description": {"type": "string", "minLength": 1, "maxLength": 1024 * 4},
                "parameters": {
                    "type": "object",
                    "required": ["type", "properties"],
                    "properties": {"type": {"const": "object"}},
                },
            },
        },
    },
}
RESPONSES_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "name", "description", "parameters"],
    "additionalProperties": False,
    "properties": {
        "type": {"const": "function"},
        "name": {"type": "string"},
        "description": {"type": "string"},
        "parameters": {"type": "object"},
    },
}

EXAMPLES: dict[str, dict[str, Any]] = {
    "run_python": {
        "code": "print(sum(range(10)))",
        "stdin": "x",
        "files": [
            {"name": "a.csv", "content": "x,y\n1,2\n"},
            {"name": "b.bin", "content": base64.b64encode(b"\x00\x01").decode(), "encoding": "base64"},
        ],
    },
    "open_session": {},
    "run_cell": {"session_id": "abc_123", "code": "import pandas as pd", "files": []},
    "fork_session": {"session_id": "abc_123", "copies": 2},
    "save_session": {"session_id": "abc_123"},
    "resume_session": {"saved_id": "saved_abc"},
    "delete_saved_session": {"saved_id": "saved_abc"},
    "close_session": {"session_id": "abc_123"},
}


def _exported(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "wasm_runner.tool_schema", *args],
        env=operator_env(),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


def test_export_command_prints_valid_chat_tools() -> None:
    tools = _exported()
    assert [t["function"]["name"] for t in tools] == [op.name for op in OPERATIONS]
    for tool in tools:
        jsonschema.validate(tool, CHAT_TOOL_SCHEMA)
        jsonschema.Draft202012Validator.check_schema(tool["function"]["parameters"])


def test_export_responses_style_and_http_operations() -> None:
    doc = _exported("--style", "responses", "--with-http")
    for tool in doc["tools"]:
        jsonschema.validate(tool, RESPONSES_TOOL_SCHEMA)
    assert doc["operations"]["run_cell"] == {"method": "POST", "path": "/api/sessions/{session_id}/run"}
    assert doc["operations"]["close_session"]["method"] == "DELETE"


def test_export_states_the_chosen_profiles_limits(tmp_path: Path) -> None:
    config = tmp_path / "server.toml"
    config.write_text('[profiles.chat]\ncpu_seconds = 7\nmemory_mb = 300\nruntime = "small"\n')
    tools = _exported("--config", str(config), "--profile", "chat")
    text = tools[0]["function"]["description"]
    assert "7 s of CPU time" in text and "300 MB of memory" in text and "Only the standard library" in text
    student = _exported("--profile", "student")[0]["function"]["description"]
    assert "2 s of CPU time" in student and "64 MB of memory" in student


def test_unknown_profile_is_a_clear_cli_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wasm_runner.tool_schema", "--profile", "nope"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "unknown profile 'nope'" in done.stderr and "Traceback" not in done.stderr


def test_bad_option_is_a_clear_cli_error() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wasm_runner.tool_schema", "--style", "xml"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "invalid choice" in done.stderr and "Traceback" not in done.stderr


def test_descriptions_state_limits_packages_and_no_network() -> None:
    tools = openai_tools(Limits(cpu_seconds=3, memory_mb=256))
    run = tools[0]["function"]["description"]
    assert "3 s of CPU time" in run and "256 MB of memory" in run
    assert "pandas" in run and "matplotlib" in run
    assert "no network" in run
    small = openai_tools(runtime="small")[0]["function"]["description"]
    assert "Only the standard library" in small and "pandas" not in small


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_examples_fit_the_schema_and_make_requests(name: str) -> None:
    params = next(t["function"]["parameters"] for t in openai_tools() if t["function"]["name"] == name)
    jsonschema.validate(EXAMPLES[name], params)
    method, path, body = http_request(name, EXAMPLES[name])
    assert method in ("POST", "DELETE") and path.startswith("/api/")
    assert "{" not in path
    if method == "DELETE":
        assert body is None
    else:
        assert "session_id" not in body and "saved_id" not in body


def test_request_bodies_are_accepted_by_the_http_api_models() -> None:
    from wasm_runner.http import schemas

    _, path, body = http_request("run_python", EXAMPLES["run_python"])
    request = schemas.parse_model(schemas.RunRequest, body)
    assert path == "/api/run"
    assert [f.content() for f in request.files] == [b"x,y\n1,2\n", b"\x00\x01"]
    _, path, body = http_request("run_cell", EXAMPLES["run_cell"])
    assert path == "/api/sessions/abc_123/run"
    schemas.parse_model(schemas.SessionRunRequest, body)
    _, _, body = http_request("open_session", {})
    schemas.parse_model(schemas.SessionCreate, body)
    _, _, body = http_request("open_session", {"packages": ["markdown-it-py"]})
    assert schemas.parse_model(schemas.SessionCreate, body).packages == ["markdown-it-py"]
    _, _, body = http_request("run_python", {"code": "import sympy", "packages": ["sympy"]})
    assert schemas.parse_model(schemas.RunRequest, body).packages == ["sympy"]
    _, path, body = http_request("fork_session", EXAMPLES["fork_session"])
    assert path == "/api/sessions/abc_123/fork"
    assert schemas.parse_model(schemas.SessionFork, body).copies == 2
    # the explanation's language, as the MCP tools take it: the HTTP API's lang
    _, _, body = http_request("run_python", {"code": "1 / 0", "lang": "de-AT"})
    assert schemas.parse_model(schemas.RunRequest, body).lang == "de-AT"
    _, _, body = http_request("run_cell", {"session_id": "s", "code": "1 / 0", "lang": "de"})
    assert schemas.parse_model(schemas.SessionRunRequest, body).lang == "de"
    for name in ("run_python", "run_cell"):
        lang = next(op for op in OPERATIONS if op.name == name).parameters["properties"]["lang"]
        assert "any other language gets English" in lang["description"]


def test_session_id_is_quoted_into_the_path() -> None:
    _, path, _ = http_request("close_session", {"session_id": "../../etc"})
    assert path == "/api/sessions/..%2F..%2Fetc"
    assert http_request("resume_session", {"saved_id": "a/b"}) == ("POST", "/api/saved-sessions/a%2Fb/resume", {})
    assert http_request("delete_saved_session", {"saved_id": "s"}) == ("DELETE", "/api/saved-sessions/s", None)


@pytest.mark.parametrize(
    ("name", "arguments", "fragment"),
    [
        ("rm_rf", {}, "unknown function"),
        ("run_python", {}, "missing argument"),
        ("run_python", {"code": "1", "shell": True}, "unknown argument"),
        ("run_python", {"code": 1}, "code must be a string"),
        ("run_cell", {"session_id": "", "code": "1"}, "non-empty"),
        ("resume_session", {"saved_id": 7}, "saved_id must be a non-empty string"),
        ("run_python", {"code": "1", "files": [{"name": "a"}]}, "'content'"),
        ("run_python", {"code": "1", "files": [{"name": "a", "content": "x", "encoding": "rot13"}]}, "encoding"),
        ("run_python", [], "JSON object"),
        ("run_python", {"code": "1", "packages": "sympy"}, "packages must be a list"),
        ("open_session", {"packages": [1]}, "packages must be a list"),
        ("run_python", {"code": "1", "lang": ["de"]}, "lang must be a string"),
    ],
)
def test_bad_calls_are_refused_clearly(name: str, arguments: Any, fragment: str) -> None:
    with pytest.raises(ToolCallError, match=fragment):
        http_request(name, arguments)


def test_every_function_maps_to_a_route_of_the_http_app() -> None:
    from starlette.routing import Match

    from wasm_runner.http.app import build_app
    from wasm_runner.settings import ServerConfig

    app = build_app(ServerConfig(auth=False))
    for op, args in ((op, EXAMPLES[op.name]) for op in OPERATIONS):
        method, path, _ = http_request(op.name, args)
        scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}
        matches = [route for route in app.routes if route.matches(scope)[0] is Match.FULL]
        assert matches, f"{op.name}: no route serves {method} {path}"
