"""The bridge to ``pyodide-build`` and ``pyodide-lock``, which live in their own venv.

Both need Python 3.12 or newer; the project's venv may be older, so ``scripts/setup.sh`` makes a
second venv, ``.venv-pyodide`` (the ``pyodide-build`` extra of ``pyproject.toml``, from PyPI),
with the newest Python 3.12+ it finds. This module runs what those packages do for the
wheelhouse:

- ``lock_tool``: reading, checking and writing ``pyodide-lock.json`` entries with
  ``pyodide-lock`` (``PyodideLockSpec``, ``add_wheels_to_spec``), via ``lock_tool.py``.
- ``build_sdist``: a ``py3-none-any`` wheel from a pure-Python source distribution with
  ``pypa build`` (``pyodide build`` needs a cross-build environment downloaded from outside
  the package registries; see docs/browser.md).
- ``py_compile``: ``pyodide py-compile`` run by Pyodide's own Python in Node
  (``py_compile.mjs``), because ``.pyc`` files must be made by the very Python version the
  browser runs (3.14 for Pyodide 314), which no host interpreter here has.

Setting: ``WASM_RUNNER_PYODIDE_BUILD_PYTHON`` (the interpreter of that venv; default
``.venv-pyodide/bin/python`` next to the package).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ..environment import PYODIDE_BUILD_PYTHON
from ..errors import WasmRunnerError
from .archives import safe_extract

__all__ = ["ToolError", "build_sdist", "lock_tool", "py_compile", "tool_python"]

_HERE = Path(__file__).resolve().parent
_SETUP_HINT = "run scripts/setup.sh (it makes .venv-pyodide with pyodide-build from PyPI)"


class ToolError(WasmRunnerError, RuntimeError):
    """pyodide-build / pyodide-lock is missing or refused the job; ``code`` is stable."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def tool_python() -> Path:
    """The interpreter of the pyodide-build venv, or ``ToolError`` saying how to get it."""
    configured = PYODIDE_BUILD_PYTHON.text()
    python = Path(configured) if configured else _HERE.parents[1] / ".venv-pyodide" / "bin" / "python"
    if not python.exists():
        raise ToolError("pyodide_build_missing", f"pyodide-build is not installed ({python} is missing): {_SETUP_HINT}")
    return python


def lock_tool(request: dict[str, Any]) -> dict[str, Any]:
    """Run one ``lock_tool.py`` operation with ``pyodide-lock``; its answer, or ``ToolError``."""
    completed = subprocess.run(
        [str(tool_python()), str(_HERE / "lock_tool.py")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    try:
        answer: dict[str, Any] = json.loads(completed.stdout or "{}")
    except json.JSONDecodeError:
        answer = {"error": completed.stderr.strip()[-800:] or "no answer"}
    if completed.returncode != 0 or "error" in answer:
        raise ToolError("pyodide_lock_refused", f"pyodide-lock: {answer.get('error', completed.stderr[-800:])}")
    return answer


def _site_packages(python: Path) -> str:
    completed = subprocess.run(
        [str(python), "-c", "import pathlib, pyodide_build; print(pathlib.Path(pyodide_build.__file__).parents[1])"],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise ToolError("pyodide_build_missing", f"pyodide-build is not importable by {python}: {_SETUP_HINT}")
    return completed.stdout.strip()


def py_compile(folder: Path, pyodide_dir: Path) -> None:
    """``pyodide py-compile FOLDER``: its wheels get ``.pyc`` instead of ``.py`` (and a ``cp314``
    tag), and ``FOLDER/pyodide-lock.json`` their new names and sha256; run by Pyodide in Node."""
    node = shutil.which("node")
    if node is None:
        raise ToolError("node_missing", "py-compile runs Pyodide in Node, and `node` is not on PATH")
    site = _site_packages(tool_python())
    completed = subprocess.run(
        [node, str(_HERE / "py_compile.mjs"), str(pyodide_dir), site, str(folder)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if completed.returncode != 0:
        raise ToolError("py_compile_failed", f"pyodide py-compile failed: {completed.stderr.strip()[-800:]}")


def build_sdist(sdist: Path, out: Path) -> Path:
    """Build a wheel from a pure-Python source distribution with ``pypa build`` into ``out``.

    The build backend comes from PyPI (build isolation). A result that is not ``*-none-any.whl``
    (the package has compiled parts) is refused: only Pyodide's build can make those.
    """
    python = tool_python()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "src"
        safe_extract(sdist, source)
        entries = [p for p in source.iterdir() if p.is_dir()]
        root = entries[0] if len(entries) == 1 and not (source / "pyproject.toml").exists() else source
        built = Path(tmp) / "dist"
        completed = subprocess.run(
            [str(python), "-m", "build", "--wheel", "--outdir", str(built), str(root)],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        if completed.returncode != 0:
            raise ToolError("sdist_build_failed", f"pypa build could not build {sdist.name}: "
                            f"{(completed.stderr or completed.stdout).strip()[-800:]}")
        wheels = sorted(built.glob("*.whl"))
        if len(wheels) != 1 or not wheels[0].name.endswith("-none-any.whl"):
            names = ", ".join(w.name for w in wheels) or "nothing"
            raise ToolError("sdist_not_pure", f"{sdist.name} built {names}, not one pure-Python wheel "
                            "(*-none-any.whl); compiled packages need Pyodide's own build")
        out.mkdir(parents=True, exist_ok=True)
        target = out / wheels[0].name
        shutil.copyfile(wheels[0], target)
        return target
