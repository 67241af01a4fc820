"""What the tools tell a model: the environment, the limits, where files are.

Tool descriptions are the model's only manual, so they state every fact it needs to write code
that works the first time: the Python version, what is installed (and that nothing can be
installed), that there is no network, where files are, how plots come back, and each limit.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..limits import Limits

__all__ = ["RuntimeFacts", "RUNTIME_FACTS", "runtime_facts", "environment_text", "limits_text", "duration"]


@dataclass(frozen=True)
class RuntimeFacts:
    """What a runtime offers a program: its Python and the packages importable in it."""

    python: str
    packages: tuple[str, ...]  # import names, checked by tests/mcp/test_descriptions.py
    rich_outputs: bool  # matplotlib figures and last-expression tables come back


RUNTIME_FACTS: dict[str, RuntimeFacts] = {
    "default": RuntimeFacts(
        python="3.15",
        packages=(
            "numpy", "pandas", "matplotlib", "scipy", "sklearn", "statsmodels", "seaborn",
            "sympy", "networkx", "PIL", "openpyxl", "xlsxwriter", "xlrd", "pypdf", "bs4",
            "lxml", "yaml", "jinja2", "tabulate", "regex", "dateutil",
        ),  # fmt: skip
        rich_outputs=True,
    ),
    "small": RuntimeFacts(python="3.12", packages=(), rich_outputs=False),
}

_DISPLAY_NAMES = {"sklearn": "scikit-learn", "PIL": "Pillow", "bs4": "BeautifulSoup (bs4)", "yaml": "PyYAML"}


def runtime_facts(runtime: str) -> RuntimeFacts:
    """The facts for ``runtime``; an unknown name gets the plain stdlib-only description."""
    return RUNTIME_FACTS.get(runtime, RuntimeFacts(python="3", packages=(), rich_outputs=False))


def _seconds(x: float) -> str:
    return f"{int(x) if float(x) == int(x) else x:g} s"


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def duration(seconds: float) -> str:
    """``seconds`` as a model reads it: "90 s", "20 min", "24 h"."""
    if seconds >= 7200:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min"
    return _seconds(round(seconds, 1))


def limits_text(limits: Limits) -> str:
    """The limits as one line a model can plan around."""
    return (
        f"Limits per call: {_seconds(limits.cpu_seconds)} of CPU time, {_seconds(limits.wall_seconds)} "
        f"wall-clock, {limits.memory_mb} MB of memory, {_size(limits.stdout_bytes)} of printed output, "
        f"{limits.disk_mb:g} MB / {limits.max_files} files written. A call that exceeds a limit is "
        f"stopped and the result names the limit."
    )


def environment_text(runtime: str) -> str:
    """Python version, what is installed, no network, no installs."""
    facts = runtime_facts(runtime)
    if facts.packages:
        names = ", ".join(_DISPLAY_NAMES.get(p, p) for p in facts.packages)
        installed = f"Installed besides the standard library: {names}."
    else:
        installed = "Only the standard library is installed."
    rich = (
        " Plots: matplotlib figures left open at the end are returned as PNG images automatically "
        "(no plt.show() or savefig needed). The value of the last line is shown like a notebook cell "
        "(a DataFrame comes back as a table)."
        if facts.rich_outputs
        else ""
    )
    return (
        f"Python {facts.python} in a WebAssembly sandbox. {installed} Nothing else can be "
        f"installed (no pip). There is no network: HTTP requests, sockets and downloads fail, so "
        f"all data must come from uploaded files or the code itself. No subprocesses.{rich}"
    )


def run_python_description(limits: Limits, runtime: str) -> str:
    return (
        "Run a Python program once in a fresh, isolated sandbox and get back what it printed, "
        "its plots and the files it wrote. Nothing is kept between calls; to work on uploaded "
        "data over several steps use open_session, upload_file and run_cell instead.\n"
        f"{environment_text(runtime)}\n"
        "Files: the working directory /scratch is writable and thrown away after the call; files "
        "written to /out are returned as attachments.\n"
        f"{limits_text(limits)}"
    )


def open_session_description(limits: Limits, runtime: str, idle_seconds: float) -> str:
    return (
        "Open a persistent Python session (like a notebook kernel) and get its session_id. "
        "Variables, imports and files survive from one run_cell to the next. Upload data with "
        "upload_file, run code with run_cell, and call close_session when done: closing deletes "
        f"the session and every file in it. An idle session is closed after {idle_seconds:g} s.\n"
        f"{environment_text(runtime)}\n"
        "Files: uploaded files are in /data (read-only); the working directory /scratch is "
        "writable; files written to /out are returned as links after each cell.\n"
        f"{limits_text(limits)}"
    )


def run_cell_description(limits: Limits, runtime: str) -> str:
    return (
        "Run Python code in an open session; state from earlier cells (variables, imports, "
        "files) is still there. Returns printed output, errors with a traceback trimmed to your "
        "own code, plots as images, the last expression's value as a table or text, and links to "
        "files written to /out. Uploaded files are read from /data, e.g. "
        "pd.read_csv('/data/sales.csv'). If a limit stops a cell, the result says which one; "
        "if the session itself ended, open a new one.\n"
        f"{limits_text(limits)}"
    )


def upload_file_description(max_upload_bytes: int) -> str:
    return (
        "Put a file into an open session so code can read it. destination 'data' (default) "
        "places it read-only at /data/<name>; 'scratch' places a writable copy at /scratch/<name> "
        "(the working directory). Give text content as is (encoding 'utf-8') or binary content "
        "(xlsx, png, parquet) as base64 (encoding 'base64'). name is a plain file name such as "
        f"'sales.csv' (no folders). At most {_size(max_upload_bytes)} per file."
    )


def close_session_description() -> str:
    return (
        "Close a session: its Python process ends and every file in it (/data, /scratch, /out) "
        "is deleted. Call it when the conversation no longer needs the session."
    )


def fork_session_description(max_copies: int) -> str:
    return (
        "Copy a session: each copy is a new session (its own session_id) holding the same "
        "variables, imported modules and files as this one now, independent of it and of the "
        "other copies. Use it to try several continuations from one state. Each copy counts as "
        f"an open session; at most {max_copies} copies per call. Random generators are reseeded "
        "in each copy unless keep_seeds is true."
    )


def save_session_description(lifetime_seconds: float | None) -> str:
    kept = (f"A saved state is kept {duration(lifetime_seconds)} on the server, then deleted"
            if lifetime_seconds else "Saving needs the HTTP server (it keeps the saved states)")  # fmt: skip
    return (
        "Save an open session's state (variables, imported modules, random state and its files "
        "in /data, /scratch and /out) on the server and get a saved_id for it; the session stays "
        "open. Later, even after the session is closed or has expired, resume_session with the "
        "saved_id opens a new session that continues from exactly this state. Only your key "
        f"can resume or delete it. {kept}; saved states count in your key's disk budget, so "
        "delete_saved_session those you no longer need."
    )


def resume_session_description() -> str:
    return (
        "Open a new session continuing from a state save_session kept: variables, imports and "
        "files are as they were when it was saved. Returns the new session_id (use it with "
        "run_cell; close it with close_session). The saved state stays, so it can be resumed "
        "again, until it expires or delete_saved_session."
    )


def delete_saved_session_description() -> str:
    return "Delete a state save_session kept (its saved_id); sessions resumed from it go on."
