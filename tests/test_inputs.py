"""The one module of input rules: every face takes the same source, stdin and file names."""

from __future__ import annotations

import pytest

from wasm_runner import inputs
from wasm_runner.http.schemas import FileIn
from wasm_runner.mcp.sessions import SessionError, check_file_name


@pytest.mark.parametrize("name", ["a", "sales.csv", "my data.csv", "_x.txt", "a..b", "x" * 255])
def test_plain_file_names_are_taken_by_every_face(name: str) -> None:
    assert inputs.check_file_name(name) == name
    assert check_file_name(name) == name  # MCP upload_file
    assert FileIn(name=name, content_base64="").name == name  # HTTP files[]
    assert inputs.upload_path(name) == name  # Python API files= / Session.upload


@pytest.mark.parametrize(
    "name", ["", ".", "..", "../etc", "/etc/passwd", "a/b", ".hidden", "a ", " a", "x" * 256,
             "a\x00b", "a\\b", 7],
)
def test_bad_file_names_are_refused_by_every_face(name: object) -> None:
    with pytest.raises(ValueError, match="invalid file name"):
        inputs.check_file_name(name)
    with pytest.raises(SessionError):
        check_file_name(name)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        FileIn(name=name, content_base64="")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/abs", "", "\x00", "x" * 256])
def test_api_upload_paths_stay_below_scratch(name: str) -> None:
    with pytest.raises(ValueError):
        inputs.upload_path(name)


def test_api_upload_paths_may_name_folders() -> None:
    assert inputs.upload_path("in/./data.csv") == "in/data.csv"
    assert inputs.upload_path("in\\data.csv") == "in/data.csv"


def test_source_rules() -> None:
    assert inputs.check_source("print(1)") is None
    assert inputs.check_source(b"print(1)") is None
    assert "maximum" in (inputs.check_source("#" * (inputs.MAX_SOURCE_BYTES + 1)) or "")
    assert inputs.check_source("#" * inputs.MAX_SOURCE_BYTES) is None
    assert "NUL" in (inputs.check_source("a\x00") or "")
    assert "UTF-8" in (inputs.check_source(b"\xff") or "")
    assert "surrogates" in (inputs.check_source("\ud800") or "")
    assert "text" in (inputs.check_source(3) or "")
    assert inputs.check_source("x", filename="a\x00") == "the file name is not usable"


def test_stdin_rules() -> None:
    assert inputs.stdin_bytes(None) == b""
    assert inputs.stdin_bytes("é") == "é".encode()
    assert inputs.stdin_bytes(bytearray(b"x")) == b"x"
    with pytest.raises(ValueError, match="stdin is"):
        inputs.stdin_bytes(b"x" * (inputs.MAX_STDIN_BYTES + 1))
    with pytest.raises(ValueError, match="bytes or text"):
        inputs.stdin_bytes(3)  # type: ignore[arg-type]


def test_every_face_caps_source_at_the_same_size() -> None:
    from wasm_runner.http.schemas import RunRequest
    from wasm_runner.mcp.server import ToolConfig

    assert RunRequest.model_fields["code"].metadata[0].max_length == inputs.MAX_SOURCE_BYTES
    assert ToolConfig().max_code_bytes == inputs.MAX_SOURCE_BYTES
