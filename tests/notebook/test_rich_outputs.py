"""Rich output as notebooks have it, on the server tier (the real sandbox): ``display(obj)`` and
the last expression give Jupyter MIME bundles from the ``_repr_*_`` protocol (guest/rich.py), the
host keeps only what a bundle may hold (notebook/bundles.py), and a result's
``notebook_outputs`` are outputs that nbformat's own schema accepts. The browser tier gives the
same bundles: the shared probes (tests/guest/tiers_alike.json) run on both tiers."""

from __future__ import annotations

import base64
import json
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from wasm_runner import Limits, Sandbox
from wasm_runner.notebook import BUNDLE_MIME
from wasm_runner.result import Status
from wasm_runner.sandbox.classify import outputs as report_outputs

LIMITS = Limits(wall_seconds=60, cpu_seconds=30)

RICH_PROGRAM = r'''
import pandas as pd
import matplotlib.pyplot as plt

class Fraction:
    def __init__(self, a, b):
        self.a, self.b = a, b

    def _repr_latex_(self):
        return r"$\frac{%d}{%d}$" % (self.a, self.b)

    def __repr__(self):
        return f"{self.a}/{self.b}"

class Badge:
    def _repr_html_(self):
        return "<span class='badge'>passed</span>"

    def __repr__(self):
        return "Badge()"

print("rows:", 2)
display(Fraction(1, 2))
display(Badge())
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [1, 4, 9])
display(fig)
plt.close(fig)
pd.DataFrame({"city": ["Oslo", "Lima"], "temp": [3.5, 19.0]})
'''


def validate_outputs(outputs: list[dict[str, Any]], count: int | None = 1) -> None:
    """nbformat's schema on a code cell holding ``outputs`` (raises ValidationError)."""
    nb = new_notebook(cells=[new_code_cell("pass", execution_count=count, outputs=outputs)])
    nbformat.validate(nbformat.from_dict(nb))


def bundles(result: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(o.kind, json.loads(o.data)["data"]) for o in result.outputs if o.mime == BUNDLE_MIME]


def test_a_dataframe_a_latex_object_a_users_html_and_a_figure_are_bundles_nbformat_accepts(
        datascience_sandbox: Sandbox) -> None:
    result = datascience_sandbox.run(RICH_PROGRAM, display=True, limits=LIMITS)
    assert result.status is Status.OK, result.stderr
    got = bundles(result)
    assert [(kind, sorted(data)) for kind, data in got] == [
        ("display", ["text/latex", "text/plain"]),
        ("display", ["text/html", "text/plain"]),
        ("display", ["image/png", "text/plain"]),
        ("result", ["text/html", "text/plain"]),
    ]
    latex, badge, figure, frame = (data for _, data in got)
    assert latex == {"text/latex": r"$\frac{1}{2}$", "text/plain": "1/2"}
    assert badge["text/html"] == "<span class='badge'>passed</span>"
    assert base64.b64decode(figure["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    assert "<table" in frame["text/html"] and "Oslo" in frame["text/html"] and "Lima" in frame["text/plain"]
    cell = result.notebook_outputs(3)
    assert [o["output_type"] for o in cell] == ["stream", "display_data", "display_data", "display_data",
                                                "execute_result"]
    assert cell[0] == {"output_type": "stream", "name": "stdout", "text": "rows: 2\n"}
    assert cell[-1]["execution_count"] == 3 and cell[-1]["data"] == frame
    validate_outputs(cell, 3)
    assert result.to_dict()["notebook_outputs"] == result.notebook_outputs()


def test_errors_and_limits_are_error_outputs(default_sandbox: Sandbox) -> None:
    raised = default_sandbox.run("print('before')\n1 / 0", display=True, limits=LIMITS)
    syntax = default_sandbox.run("x = (", display=True, limits=LIMITS)
    exited = default_sandbox.run("import sys\nsys.exit(3)", display=True, limits=LIMITS)
    looped = default_sandbox.run("while True:\n    pass", display=True, limits=Limits(cpu_seconds=0.5))
    error = raised.notebook_outputs(1)
    assert [o["output_type"] for o in error] == ["stream", "error"]
    assert error[1]["ename"] == "ZeroDivisionError" and error[1]["evalue"] == "division by zero"
    assert error[1]["traceback"][0] == "Traceback (most recent call last):"
    assert syntax.notebook_outputs()[-1]["ename"] == "SyntaxError"
    assert [o["output_type"] for o in exited.notebook_outputs()] == []  # sys.exit(3): nothing raised
    stopped = looped.notebook_outputs()[-1]
    assert looped.status is Status.CPU_LIMIT and stopped["ename"] == "CpuLimit"
    assert "0.5 seconds of CPU time" in stopped["evalue"]
    for outputs in (error, syntax.notebook_outputs(), exited.notebook_outputs(), looped.notebook_outputs()):
        validate_outputs(outputs)


def test_bundles_are_bounded_and_the_sandbox_goes_on(default_sandbox: Sandbox) -> None:
    """One bundle over 8 MiB becomes a note; a run's bundles stop at 12 MiB (the report the host
    reads stays within its bound); the run ends ok, and the next run is served."""
    big = default_sandbox.run(
        "display({'text/html': 'x' * (9 << 20), 'text/plain': 'big'}, raw=True)\n"
        "for i in range(14):\n    display({'text/html': 'y' * (1 << 20), 'text/plain': str(i)}, raw=True)\n"
        "print('done')", display=True, limits=Limits(wall_seconds=60, cpu_seconds=30))
    assert big.status is Status.OK and big.stdout == "done\n", big.stderr
    got = bundles(big)
    assert list(got[0][1]) == ["text/plain"] and "output too large to show" in got[0][1]["text/plain"]
    shown = [data for _, data in got[1:] if "text/html" in data]
    notes = [data for _, data in got[1:] if "text/html" not in data]
    assert 0 < len(shown) < 14 and len(shown) + len(notes) == 14
    assert all("output too large to show" in note["text/plain"] for note in notes)
    assert sum(len(o.data) for o in big.outputs) <= 12 << 20
    assert default_sandbox.run("print('next')", limits=LIMITS).stdout == "next\n"


def test_the_host_keeps_only_what_a_bundle_may_hold() -> None:
    """What the guest reports is checked: a bundle that is no JSON object, has no data object, or
    comes under another mime is dropped; types that are no mime type, and text types whose value
    is not text, are left out; NaN becomes null; text/plain is always there."""
    good = json.dumps({"data": {"text/html": "<b>x</b>", "text/plain": "x"}, "metadata": {}})
    raw = [
        {"kind": "display", "mime": BUNDLE_MIME, "data": "not json"},
        {"kind": "display", "mime": BUNDLE_MIME, "data": json.dumps({"data": ["text/plain"]})},
        {"kind": "display", "mime": "text/html", "data": good},
        {"kind": "result", "mime": BUNDLE_MIME, "data": json.dumps(
            {"data": {"text/html": 5, "not a type": "x", "application/json": {"v": float("nan")},
                      "image/png": "iVBORw0KGgo="}, "metadata": "none"})},
        {"kind": "script", "mime": "text/html", "data": "<script>"},
        {"kind": "display", "mime": BUNDLE_MIME, "data": good},
    ]
    kept = report_outputs(raw)
    assert [(o.kind, json.loads(o.data)) for o in kept] == [
        ("result", {"data": {"application/json": {"v": None}, "image/png": "iVBORw0KGgo=", "text/plain": ""},
                    "metadata": {}}),
        ("display", {"data": {"text/html": "<b>x</b>", "text/plain": "x"}, "metadata": {}}),
    ]
