"""Tests for wasm_runner.mcp.content: how a Result reads to a model (pure conversion)."""

from __future__ import annotations

import base64

from mcp.types import EmbeddedResource, ImageContent, ResourceLink, TextContent

from wasm_runner.limits import Limits
from wasm_runner.mcp.content import file_uri, result_to_tool_result, summary_sentence
from wasm_runner.result import FileOut, Output, Result, Status

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n....").decode()
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "<string>", line 2, in <module>\n'
    "    df = pd.read_csv('/data/nope.csv')\n"
    '  File "/usr/local/lib/python3.15/site-packages/pandas/io/parsers/readers.py", line 1, in read_csv\n'
    "    return _read(filepath_or_buffer, kwds)\n"
    '  File "/usr/local/lib/python3.15/site-packages/pandas/io/common.py", line 9, in get_handle\n'
    "    handle = open(handle)\n"
    "FileNotFoundError: [Errno 44] No such file or directory: '/data/nope.csv'\n"
)


def test_cpu_limit_is_one_sentence_with_the_value() -> None:
    result = Result(Status.CPU_LIMIT, limit="cpu", stdout="partial\n")
    tool = result_to_tool_result(result, Limits(cpu_seconds=2))
    assert tool.is_error
    first = tool.content[0].text.split("\n")[0]
    assert first.startswith("Stopped: it used more than 2 seconds of CPU time;")
    assert "partial" in tool.content[0].text
    assert tool.structured_content["status"] == "cpu_limit"


def test_error_names_the_exception_and_trims_library_frames() -> None:
    result = Result(Status.ERROR, exit_code=1, stderr=TRACEBACK)
    text = result_to_tool_result(result, Limits()).content[0].text
    assert text.startswith("The code raised FileNotFoundError: [Errno 44]")
    assert "line 2, in <module>" in text and "[2 frames in library code hidden]" in text
    assert "readers.py" not in text


def test_exit_without_exception() -> None:
    assert summary_sentence(Result(Status.ERROR, exit_code=3), Limits()) == "The program exited with code 3."


def test_plot_table_and_value_become_image_and_text() -> None:
    result = Result(
        Status.OK,
        exit_code=0,
        outputs=[
            Output("table", "text/html", "<table><tr><td>1</td></tr></table>"),
            Output("table", "text/plain", "   a\n0  1"),
            Output("image", "image/png", PNG),
        ],
    )
    tool = result_to_tool_result(result, Limits())
    assert not tool.is_error
    texts = [b.text for b in tool.content if isinstance(b, TextContent)]
    assert "Out (table):\n   a\n0  1" in texts and not any("<table>" in t for t in texts)
    images = [b for b in tool.content if isinstance(b, ImageContent)]
    assert [(i.mime_type, i.data) for i in images] == [("image/png", PNG)]


def test_html_only_table_is_still_shown() -> None:
    result = Result(Status.OK, exit_code=0, outputs=[Output("table", "text/html", "<b>x</b>")])
    assert any("<b>x</b>" in b.text for b in result_to_tool_result(result, Limits()).content if isinstance(b, TextContent))


def test_silent_success_tells_the_model_how_to_see_values() -> None:
    text = result_to_tool_result(Result(Status.OK, exit_code=0), Limits()).content[0].text
    assert "printed nothing" in text


def test_session_files_are_links_and_one_off_files_are_embedded() -> None:
    files = [FileOut("/out/report.csv", b"a,b\n1,2\n"), FileOut("/out/chart.png", b"\x89PNG\x00")]
    result = Result(Status.OK, exit_code=0, files=files)
    linked = result_to_tool_result(result, Limits(), session_id="S1")
    links = [b for b in linked.content if isinstance(b, ResourceLink)]
    assert [(link.uri, link.mime_type, link.size) for link in links] == [
        (file_uri("S1", "/out/report.csv"), "text/csv", 8),
        (file_uri("S1", "/out/chart.png"), "image/png", 5),
    ]
    embedded = [b for b in result_to_tool_result(result, Limits()).content if isinstance(b, EmbeddedResource)]
    assert embedded[0].resource.text == "a,b\n1,2\n"
    assert base64.b64decode(embedded[1].resource.blob) == b"\x89PNG\x00"


def test_file_uri_quotes_the_path() -> None:
    assert file_uri("S", "/out/a b/../c.csv") == "wasm-runner://sessions/S/files/out%2Fa%20b%2F..%2Fc.csv"


def test_truncation_is_said() -> None:
    result = Result(Status.OUTPUT_LIMIT, stdout="x" * 10, stdout_truncated=True, limit="output")
    text = result_to_tool_result(result, Limits(stdout_bytes=10)).content[0].text
    assert "printed more than 10 bytes" in text and "[stdout was cut off at the output limit]" in text


def test_the_explanation_is_a_line_of_the_text_and_its_own_field() -> None:
    from wasm_runner.explanations import render

    explanation = render({"id": "zero_division", "params": {}, "span": {"line": 2, "col": 11, "end_col": 28}})
    result = Result(Status.ERROR, exit_code=1, stderr="ZeroDivisionError: division by zero\n", explanation=explanation)
    tool = result_to_tool_result(result, Limits())
    assert "\nExplanation (line 2): Division by zero. The number you divide by is 0 here" in tool.content[0].text
    assert "Next step: Check the divisor first" in tool.content[0].text
    assert tool.structured_content["explanation"]["id"] == "zero_division"
    assert "explanation" not in result_to_tool_result(Result(Status.OK, exit_code=0), Limits()).structured_content
