"""A notebook cell's outputs in the order the program made them (nbformat and Jupyter keep it):
a cell that prints, displays, then prints again gives stream, display_data, stream. Both tiers
record where each output came among the streams (``Output.at``, UTF-8 bytes written before it:
the server's guest counts what it sent, ``guest/output.py``; the browser's worker what reached
it, run here in Pyodide under Node, the page's controller); ``notebook_outputs`` cuts the streams
there, the same way for both. A result without positions keeps streams first."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from wasm_runner import Sandbox
from wasm_runner.result import Output, Result, Status
from wasm_runner.sandbox.classify import outputs as report_outputs

REPO = Path(__file__).resolve().parents[2]
CELL = """\
print("before")
display({"a": 1})
print("é between")
import sys; print("to stderr", file=sys.stderr)
display([1, 2])
print("after")
7 * 6
"""


def browser_result(code: str) -> Result:
    """``code`` run by the browser tier's controller in Node (Pyodide), its result as Python has it."""
    node = shutil.which("node")
    assert node is not None, "node is installed by scripts/setup.sh"
    done = subprocess.run([node, str(Path(__file__).with_name("browser_cell.mjs"))], input=code, capture_output=True,
                          text=True, timeout=300, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return Result.from_dict(json.loads(done.stdout))


def kinds(outputs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(o["output_type"], o.get("name") or json.dumps(o.get("data", {}).get("text/plain"))) for o in outputs]


def validate(outputs: list[dict[str, Any]]) -> None:
    nbformat.validate(nbformat.from_dict(new_notebook(cells=[new_code_cell(CELL, execution_count=1, outputs=outputs)])))


PROGRAM_ORDER = [
    ("stream", "stdout"), ("display_data", '"{\'a\': 1}"'), ("stream", "stdout"), ("stream", "stderr"),
    ("display_data", '"[1, 2]"'), ("stream", "stdout"), ("execute_result", '"42"')]


def test_the_browser_tier_keeps_the_programs_order() -> None:
    result = browser_result(CELL)
    assert result.status is Status.OK, result.stderr
    assert [o.at is not None for o in result.outputs] == [True, True, True]
    outputs = result.notebook_outputs(1)
    assert kinds(outputs) == PROGRAM_ORDER
    assert [o["text"] for o in outputs if o["output_type"] == "stream"] == [
        "before\n", "é between\n", "to stderr\n", "after\n"]
    validate(outputs)


def test_the_server_tier_keeps_the_programs_order_too(default_sandbox: Sandbox) -> None:
    result = default_sandbox.run(CELL, display=True)
    assert result.status is Status.OK, result.stderr
    assert [o.at for o in result.outputs] == [(7, 0), (18, 10), (24, 10)]  # "é" is two bytes
    outputs = result.notebook_outputs(1)
    assert kinds(outputs) == PROGRAM_ORDER
    assert [o["text"] for o in outputs if o["output_type"] == "stream"] == [
        "before\n", "é between\n", "to stderr\n", "after\n"]
    validate(outputs)


def test_without_positions_streams_come_first() -> None:
    bundle = json.dumps({"data": {"text/plain": "x"}, "metadata": {}})
    mime = "application/vnd.wasm-runner.bundle+json"
    result = Result(Status.OK, exit_code=0, stdout="one\ntwo\n", stderr="warn\n",
                    outputs=[Output("display", mime, bundle), Output("display", mime, bundle)])
    outputs = result.notebook_outputs(1)
    assert kinds(outputs) == [("stream", "stdout"), ("stream", "stderr"), ("display_data", '"x"'),
                              ("display_data", '"x"')]
    validate(outputs)


def test_positions_past_a_cut_stream_and_an_error_keep_every_byte_once() -> None:
    """Positions are the guest's word: beyond the text kept (a truncated stream, the traceback
    moved into the ``error`` output) they are cut to it, and going back is ignored."""
    bundle = json.dumps({"data": {"text/plain": "x"}, "metadata": {}})
    mime = "application/vnd.wasm-runner.bundle+json"
    result = Result(Status.ERROR, exit_code=1, stdout="one\ntwo\n",
                    stderr='Traceback (most recent call last):\n  File "main.py", line 3\nValueError: no\n',
                    outputs=[Output("display", mime, bundle, (4, 0)), Output("display", mime, bundle, (2, 500)),
                             Output("display", mime, bundle, (10_000, 10_000))])
    outputs = result.notebook_outputs(1)
    assert kinds(outputs) == [("stream", "stdout"), ("display_data", '"x"'), ("display_data", '"x"'),
                              ("stream", "stdout"), ("display_data", '"x"'), ("error", "null")]
    assert [o["text"] for o in outputs if o["output_type"] == "stream"] == ["one\n", "two\n"]
    assert Result.from_dict(result.to_dict()).outputs == result.outputs
    validate(outputs)


def test_the_server_reads_positions_from_the_guests_report_and_trusts_no_other_shape() -> None:
    """What the host takes of ``at`` in a run's report (``sandbox/classify.outputs``): whole bytes
    of both streams, else nothing (the output is then shown the server tier's way)."""
    bundle = json.dumps({"data": {"text/plain": "x"}, "metadata": {}})
    mime = "application/vnd.wasm-runner.bundle+json"
    raw = [{"kind": "display", "mime": mime, "data": bundle, "at": at}
           for at in ({"stdout": 3, "stderr": 1}, {"stdout": -1, "stderr": 0}, {"stdout": 1.5, "stderr": 0},
                      {"stdout": True, "stderr": 0}, {"stdout": 2}, "3")]
    assert [o.at for o in report_outputs(raw)] == [(3, 1), None, None, None, None, None]
