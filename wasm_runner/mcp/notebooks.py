"""The MCP tool ``run_notebook``: a Jupyter notebook's code cells, in order, in one new session
of the caller's (the same store, caps and limits as ``open_session``), and the executed notebook
back (``wasm_runner.notebook.running``). The text says how each cell went, with its text
outputs in short; the structured content holds the executed notebook (nbformat 4.5)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from ..execution import CallerLike, Job, PolicyLike, Refused
from ..notebook.running import NotebookError, NotebookRun, execute, read_notebook
from ..result import Result
from ..sessions import SessionStore

__all__ = ["NOTEBOOK_DESCRIPTION", "notebook_tool", "notebook_text"]

NOTEBOOK_DESCRIPTION = (
    "Run a Jupyter notebook: its code cells in order, in one fresh session (variables carry over "
    "from cell to cell), and get the executed notebook back (outputs, execution counts, errors; "
    "nbformat 4.5, which JupyterLab opens). Pass the .ipynb file's JSON text. The first cell that "
    "raises stops the run unless allow_errors is true. display(obj) and each cell's last "
    "expression give rich outputs (HTML tables, LaTeX, images)."
)
_SHOWN_CHARS = 600  # of one output's text, in the tool's text


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + " ..."


def notebook_text(done: NotebookRun) -> str:
    """How the notebook's run went, cell by cell, for a chat model."""
    head = f"The notebook ran {done.cells_run} code cells."
    if done.failure is not None:
        head = (f"The notebook stopped at cell {done.failed} ({done.status}"
                f"{': ' + done.failure.message if done.failure.message else ''}) after "
                f"{done.cells_run} code cells.")
    lines = [head]
    for i, cell in enumerate(done.notebook["cells"]):
        if cell.get("cell_type") != "code" or cell.get("execution_count") is None:
            continue
        lines.append(f"In [{cell['execution_count']}] (cell {i}):")
        for out in cell.get("outputs", []):
            kind = out["output_type"]
            if kind == "stream":
                lines.append(f"  {out['name']}: {_short(out['text'])}")
            elif kind == "error":
                lines.append(f"  error: {out['ename']}: {_short(out['evalue'])}")
            else:
                types = ", ".join(sorted(out["data"]))
                lines.append(f"  {kind} ({types}): {_short(str(out['data'].get('text/plain', '')))}")
    return "\n".join(lines)


def notebook_tool(store: SessionStore, policy: PolicyLike,
                  who: Callable[[Context | None], tuple[CallerLike, str]],
                  refused: Callable[[Refused, str], CallToolResult],
                  error: Callable[[str], CallToolResult]) -> Callable[..., Awaitable[CallToolResult]]:
    """The tool function, for ``MCPServer.add_tool``."""

    async def run_notebook(
        notebook: Annotated[str, Field(description="The notebook: the .ipynb file's JSON text (nbformat 4).")],
        allow_errors: Annotated[bool, Field(description="Run the cells after one that raised.")] = False,
        ctx: Context | None = None,
    ) -> CallToolResult:
        try:
            nb = read_notebook(notebook)
        except NotebookError as exc:
            return error(f"The notebook cannot be run: {exc}.")
        caller, client = who(ctx)
        await store.sweep()
        try:
            live = await store.create(caller, policy, policy.limits, policy.runtime, private_folders=True)
        except Refused as exc:
            return refused(exc, "Opening a session for the notebook")

        async def run_cell(code: str) -> Result:
            job = Job(tenant=caller, client=client, kind="mcp_notebook", profile=policy,
                      limits=live.limits, runtime=live.runtime, code=code, display=True,
                      session_id=live.id)
            return await store.run(live, job)

        try:
            done = await execute(nb, run_cell, allow_errors=allow_errors)
        except Refused as exc:
            return refused(exc, "The notebook")
        finally:
            await store.close(live.id)
        structured: dict[str, Any] = {"notebook": done.notebook, **done.summary()}
        text = notebook_text(done)
        json.dumps(structured)  # what goes out is JSON (a cell's output is text or JSON already)
        return CallToolResult(content=[TextContent(text=text)], structured_content=structured,
                              is_error=done.failure is not None and done.cells_run == 0)

    return run_notebook
