"""``POST /api/notebooks/run``: a notebook's code cells in one session of the key, the executed
notebook back, valid per nbformat's own schema and readable by nbformat (what JupyterLab opens);
errors as ``error`` outputs; the first failing cell stops the run unless allow_errors; a bad
notebook is refused with a sentence; the key's auth holds. And the playground's page says whether
the operator trusts the programs' HTML (``[server] trust_html``)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from tests.support.live_server import LiveServer, live_server, make_config

FIVE_CELLS = [
    "import pandas as pd\nclass Fraction:\n    def _repr_latex_(self):\n        return r'$\\frac{1}{2}$'\n"
    "    def __repr__(self):\n        return '1/2'",
    "%matplotlib inline\ndf = pd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.0]})\ndf",
    "display(Fraction())\nprint('mean', df.temp.mean())",
    "class Badge:\n    def _repr_html_(self):\n        return '<b>passed</b>'\nBadge()",
    "len(df) * 21",
]


def notebook(*sources: str) -> dict[str, Any]:
    nb = new_notebook(cells=[new_markdown_cell("# A lesson")] + [new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return json.loads(nbformat.writes(nb))  # as a client reads an .ipynb file


def run(api: httpx.Client, nb: dict[str, Any], **body: Any) -> dict[str, Any]:
    r = api.post("/api/notebooks/run", json={"notebook": nb, **body})
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_a_five_cell_notebook_round_trips_and_nbformat_opens_it(api: httpx.Client) -> None:
    answer = run(api, notebook(*FIVE_CELLS))
    assert (answer["status"], answer["cells_run"], answer["failed"]) == ("ok", 5, None)
    done = nbformat.reads(json.dumps(answer["notebook"]), as_version=4)
    nbformat.validate(done)
    code = [c for c in done.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == [1, 2, 3, 4, 5]
    assert [[o.output_type for o in c.outputs] for c in code] == [
        [], ["execute_result"], ["display_data", "stream"], ["execute_result"], ["execute_result"]]
    table = code[1].outputs[0]
    assert "<table" in table.data["text/html"] and "Oslo" in table.data["text/plain"]
    assert code[2].outputs == [  # in the order the cell made them
        {"output_type": "display_data", "data": {"text/latex": "$\\frac{1}{2}$", "text/plain": "1/2"},
         "metadata": {}},
        {"output_type": "stream", "name": "stdout", "text": "mean 11.25\n"}]
    badge = code[3].outputs[0].data
    assert badge["text/html"] == "<b>passed</b>" and badge["text/plain"].startswith("<__main__.Badge object at ")
    assert code[4].outputs[0].data == {"text/plain": "42"}
    assert done.cells[0].cell_type == "markdown" and done.metadata.kernelspec.name == "python3"


def test_the_first_failing_cell_stops_the_run_unless_errors_are_allowed(api: httpx.Client) -> None:
    nb = notebook("x = 1", "x / 0", "print('after', x)")
    stopped = run(api, nb)
    assert stopped["status"] == "error" and stopped["cells_run"] == 2
    assert stopped["failed"]["cell"] == 2 and stopped["failed"]["status"] == "error"
    cells = stopped["notebook"]["cells"]
    assert cells[2]["outputs"][-1]["output_type"] == "error" and cells[2]["outputs"][-1]["ename"] == "ZeroDivisionError"
    assert cells[3]["execution_count"] is None and cells[3]["outputs"] == []
    nbformat.validate(nbformat.from_dict(stopped["notebook"]))
    allowed = run(api, nb, allow_errors=True)
    assert allowed["cells_run"] == 3 and allowed["failed"]["cell"] == 2
    assert allowed["notebook"]["cells"][3]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "after 1\n"}]


def test_a_limit_ends_the_notebook_and_the_server_still_answers(api: httpx.Client) -> None:
    answer = run(api, notebook("while True:\n    pass", "print('never')"), profile="quick")
    assert answer["status"] == "cpu_limit" and answer["cells_run"] == 1
    assert answer["notebook"]["cells"][1]["outputs"][-1]["ename"] == "CpuLimit"
    assert answer["notebook"]["cells"][2]["outputs"] == []
    assert api.post("/api/run", json={"code": "print('still here')"}).json()["stdout"] == "still here\n"


def test_a_bad_notebook_is_refused_with_a_sentence_and_auth_holds(api: httpx.Client, server: LiveServer) -> None:
    old = api.post("/api/notebooks/run", json={"notebook": {"nbformat": 3, "worksheets": []}})
    assert old.status_code == 422 and old.json()["error"]["code"] == "invalid_notebook"
    assert "only nbformat 4 notebooks" in old.json()["error"]["message"]
    odd = api.post("/api/notebooks/run", json={"notebook": {"nbformat": 4, "cells": [{"cell_type": "widget"}]}})
    assert odd.status_code == 422 and "cell 0" in odd.json()["error"]["message"]
    anonymous = httpx.post(server.url + "/api/notebooks/run", json={"notebook": notebook("1")})
    assert anonymous.status_code == 401


def playground_config(base: str) -> dict[str, Any]:
    page = httpx.get(base + "/").text
    start = page.index('id="playground-config">') + len('id="playground-config">')
    return json.loads(page[start:page.index("</script>", start)])  # type: ignore[no-any-return]


def test_the_playground_sanitises_html_unless_the_operator_trusts_it(
        server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> None:
    assert playground_config(server.url)["trust_html"] is False
    with live_server(make_config(tmp_path_factory.mktemp("trusting"), trust_html=True)) as trusting:
        assert playground_config(trusting.url)["trust_html"] is True
