"""Running a notebook: its code cells, in order, in one session, and the executed notebook back.

Every face (``POST /api/notebooks/run``, ``wasm-runner notebook run``, the MCP tool
``run_notebook``) reads the notebook with ``read_notebook`` and hands ``execute`` a function that
runs one cell's code in the session it opened (with ``display=True``: the last expression is
the cell's ``execute_result``). The notebook comes back as nbformat 4.5 (cell ids added where
missing), each code cell with its ``outputs`` (``bundles.notebook_outputs``) and
``execution_count``; JupyterLab opens it and ``nbformat.validate`` accepts it.

Like "Run All" in JupyterLab, the first cell that fails stops the run (``allow_errors``: go on,
as ``nbclient --allow-errors``), and a cell that ends the session (a limit) always does: the cells
after it keep no outputs. IPython's ``%matplotlib`` and ``%config`` lines are left out (figures
are always shown); any other magic or shell line (``!pip``) is a SyntaxError of its cell.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import WasmRunnerError
from ..result import Result, Status

if TYPE_CHECKING:
    from ..sandbox import Session

__all__ = ["MAX_CELLS", "NotebookError", "NotebookRun", "code_of", "execute", "read_notebook", "run_in_session"]

MAX_CELLS = 500  # cells of one notebook, at most
_CELL_ID = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")
_HARMLESS_MAGIC = re.compile(r"^\s*%(matplotlib|config)\b.*$", re.MULTILINE)

RunCell = Callable[[str], Awaitable[Result]]


class NotebookError(WasmRunnerError, ValueError):
    """The notebook cannot be run: not JSON, not nbformat 4, too many cells. The message says
    which."""


@dataclass
class NotebookRun:
    """An executed notebook (nbformat 4.5, as a dict) and how its run went: ``cells_run`` code
    cells ran; ``failed`` is the index (in ``cells``) of the cell that stopped it, or None;
    ``results`` each run cell's result."""

    notebook: dict[str, Any]
    cells_run: int = 0
    failed: int | None = None
    failure: Result | None = None
    results: list[Result] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``ok`` when every code cell ran without an error, else the first failed cell's status."""
        return "ok" if self.failure is None else self.failure.status.value

    def summary(self) -> dict[str, Any]:
        """What a face says besides the notebook itself."""
        failed = None
        if self.failure is not None:
            last = self.failure
            failed = {"cell": self.failed, "status": last.status.value, "limit": last.limit,
                      "message": last.message}
        return {"status": self.status, "cells_run": self.cells_run, "failed": failed}


def read_notebook(raw: str | bytes | dict[str, Any]) -> dict[str, Any]:
    """``raw`` (an .ipynb's text or its parsed JSON) as a fresh nbformat-4 dict, or NotebookError
    saying what is wrong with it."""
    if isinstance(raw, (str, bytes)):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise NotebookError(f"the notebook is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise NotebookError("the notebook must be a JSON object (an .ipynb file's content)")
    if raw.get("nbformat") != 4:
        raise NotebookError(f"only nbformat 4 notebooks can be run (this one says nbformat "
                            f"{raw.get('nbformat')!r}); save it again with Jupyter 4 or later")
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise NotebookError("the notebook has no list of cells")
    if len(cells) > MAX_CELLS:
        raise NotebookError(f"the notebook has {len(cells)} cells; at most {MAX_CELLS} can be run at once")
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            raise NotebookError(f"cell {i} is not a code, markdown or raw cell")
        if not isinstance(cell.get("source", ""), (str, list)):
            raise NotebookError(f"cell {i}'s source is neither text nor a list of lines")
    return copy.deepcopy(raw)


def code_of(cell: dict[str, Any]) -> str:
    """A code cell's source as one text, IPython's harmless magics (``%matplotlib``,
    ``%config``) left out."""
    source = cell.get("source", "")
    text = "".join(str(line) for line in source) if isinstance(source, list) else str(source)
    return _HARMLESS_MAGIC.sub("", text)


def _as_v45(nb: dict[str, Any]) -> None:
    """nbformat 4.5 in place: every cell an id (unique), the code cells' old outputs cleared,
    metadata and attachments as the schema has them."""
    nb["nbformat_minor"] = max(int(nb.get("nbformat_minor") or 0), 5)
    if not isinstance(nb.get("metadata"), dict):
        nb["metadata"] = {}
    nb["metadata"].setdefault("language_info", {"name": "python"})
    seen: set[str] = set()
    for i, cell in enumerate(nb["cells"]):
        cell_id = cell.get("id")
        if not isinstance(cell_id, str) or not _CELL_ID.match(cell_id) or cell_id in seen:
            cell_id = f"wr-cell-{i}"
            while cell_id in seen:
                cell_id += "x"
            cell["id"] = cell_id
        seen.add(cell_id)
        if not isinstance(cell.get("metadata"), dict):
            cell["metadata"] = {}
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None


class _Steps:
    """The cells to run, one at a time, and what each result does to the notebook and the run."""

    def __init__(self, nb: dict[str, Any], allow_errors: bool) -> None:
        _as_v45(nb)
        self.run = NotebookRun(nb)
        self.allow_errors = allow_errors
        self.count = 0

    def cells(self) -> Iterator[tuple[int, dict[str, Any], str]]:
        for i, cell in enumerate(self.run.notebook["cells"]):
            if cell["cell_type"] == "code":
                code = code_of(cell)
                if code.strip():
                    yield i, cell, code

    def record(self, i: int, cell: dict[str, Any], result: Result) -> bool:
        """Whether the next cell runs."""
        run = self.run
        self.count += 1
        run.results.append(result)
        run.cells_run += 1
        cell["execution_count"] = self.count
        cell["outputs"] = result.notebook_outputs(self.count)
        if result.status is Status.OK:
            return True
        if run.failure is None:
            run.failed, run.failure = i, result
        # an exception in a cell leaves the session sound; a limit or a crash ends it
        return self.allow_errors and result.status is Status.ERROR and result.limit is None


async def execute(nb: dict[str, Any], run_cell: RunCell, *, allow_errors: bool = False) -> NotebookRun:
    """Run ``nb``'s code cells in order through ``run_cell(code) -> Result`` (one session's
    cells, awaited), filling in their outputs and execution counts. ``nb`` is changed in place
    and returned in the NotebookRun."""
    steps = _Steps(nb, allow_errors)
    for i, cell, code in steps.cells():
        if not steps.record(i, cell, await run_cell(code)):
            break
    return steps.run


def run_in_session(nb: dict[str, Any], session: Session, *, allow_errors: bool = False) -> NotebookRun:
    """``execute`` for the Python API: the cells run in ``session`` (``Sandbox.session()``), on
    this thread."""
    steps = _Steps(nb, allow_errors)
    for i, cell, code in steps.cells():
        if not steps.record(i, cell, session.run(code, display=True)):
            break
    return steps.run
