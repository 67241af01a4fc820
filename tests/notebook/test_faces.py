"""The notebook faces besides HTTP (tests/http/test_notebooks.py): ``wasm-runner notebook run``
writes the executed notebook, which nbformat validates and reads; the MCP tool ``run_notebook``
answers a model with how each cell went and the executed notebook as structured content."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nbformat
import pytest
from mcp import Client
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from wasm_runner.cli import main
from wasm_runner.mcp.server import build_server
from wasm_runner.settings import ToolSettings

CELLS = ["class Fraction:\n    def _repr_latex_(self):\n        return '$x^2$'\n", "Fraction()",
         "print('sum', sum(range(4)))\n6 * 7", "missing_name"]


def write_notebook(path: Path) -> Path:
    nb = new_notebook(cells=[new_markdown_cell("notes")] + [new_code_cell(c) for c in CELLS])
    path.write_text(nbformat.writes(nb))
    return path


def test_the_cli_writes_the_executed_notebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = write_notebook(tmp_path / "lesson.ipynb")
    assert main(["notebook", "run", str(source)]) == 1  # the last cell raises NameError
    said = capsys.readouterr().err
    assert "cell 4 failed (error" in said and "lesson.out.ipynb" in said
    done = nbformat.read(str(tmp_path / "lesson.out.ipynb"), as_version=4)
    nbformat.validate(done)
    code = [c for c in done.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2, 3, 4]
    assert code[1].outputs[0].data == {"text/latex": "$x^2$", "text/plain": code[1].outputs[0].data["text/plain"]}
    assert [o.output_type for o in code[2].outputs] == ["stream", "execute_result"]
    assert code[3].outputs[-1].ename == "NameError"
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    assert main(["notebook", "run", str(broken)]) == 2
    assert "the notebook is not JSON" in capsys.readouterr().err


def test_the_mcp_tool_runs_a_notebook(tmp_path: Path) -> None:
    source = write_notebook(tmp_path / "lesson.ipynb").read_text()
    server, executor = build_server(ToolSettings())

    async def conversation() -> None:
        try:
            async with Client(server, read_timeout_seconds=600) as client:
                tools = {t.name for t in (await client.list_tools()).tools}
                assert "run_notebook" in tools
                result = await client.call_tool("run_notebook", {"notebook": source, "allow_errors": True})
                text = result.content[0].text
                assert text.startswith("The notebook stopped at cell 4 (error: ")
                assert "execute_result (text/latex, text/plain)" in text and "stdout: sum 6" in text
                assert "error: NameError: name 'missing_name' is not defined" in text
                done = result.structured_content
                assert done is not None and done["cells_run"] == 4
                nbformat.validate(nbformat.from_dict(done["notebook"]))
                bad = await client.call_tool("run_notebook", {"notebook": json.dumps({"nbformat": 4})})
                assert bad.is_error and "no list of cells" in bad.content[0].text
        finally:
            await executor.sessions.close_all()

    asyncio.run(conversation())
