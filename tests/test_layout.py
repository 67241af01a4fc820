"""The package's layout rules that import-linter cannot express: faces reach the core only through
public names, every module declares ``__all__``, and the public API stays what it is."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import wasm_runner

PACKAGE = Path(wasm_runner.__file__).parent
FACES = ("http", "mcp", "compare", "browser", "cli.py", "bench.py", "tool_schema.py")
CORE = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "cli", "bench", "tool_schema"} | {"sandbox", "wasi"}


def _modules(*under: str) -> list[Path]:
    found: list[Path] = []
    for name in under:
        p = PACKAGE / name
        found += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return found


def _core_module(node: ast.ImportFrom, path: Path) -> str | None:
    """The core module an import names (``wasm_runner.x`` or relative), else None."""
    if node.level == 0:
        mod = node.module or ""
        if not mod.startswith("wasm_runner."):
            return None
        top = mod.split(".")[1]
    else:
        pkg = path.parent.relative_to(PACKAGE).parts
        base = list(pkg[: len(pkg) - (node.level - 1)]) if node.level > 1 else list(pkg)
        parts = base + (node.module.split(".") if node.module else [])
        if not parts:
            return None
        top = parts[0]
    return top if top in CORE else None


def test_faces_import_no_private_core_names() -> None:
    offenders = []
    for path in _modules(*FACES):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and _core_module(node, path):
                offenders += [f"{path.relative_to(PACKAGE)}:{node.lineno} {a.name}"
                              for a in node.names if a.name.startswith("_")]
    assert offenders == []


def test_every_host_module_declares_its_public_names() -> None:
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "guest" or path.name == "__main__.py":
            continue  # guest/ runs inside the sandbox; __main__ only calls main()
        tree = ast.parse(path.read_text())
        if not any(isinstance(n, ast.Assign | ast.AnnAssign) and "__all__" in ast.unparse(n).split("=")[0]
                   for n in tree.body):
            missing.append(str(rel))
    assert missing == []


def test_every_name_in_all_exists() -> None:
    """A name left in ``__all__`` after it was renamed or moved fails here (``import *`` would)."""
    stale = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "guest" or path.name == "__main__.py":
            continue
        name = ".".join(("wasm_runner", *rel.with_suffix("").parts)).removesuffix(".__init__")
        module = importlib.import_module(name)
        stale += [f"{name}.{n}" for n in getattr(module, "__all__", []) if not hasattr(module, n)]
    assert stale == []


def test_the_public_api_is_what_the_docs_name() -> None:
    """A change to the public API is a deliberate edit of this list (and of docs/python-api.md)."""
    assert sorted(wasm_runner.__all__) == sorted([
        "Caller", "Executor", "FileOut", "InputSource", "InvalidLimits", "Job", "Limits", "Output",
        "Policy", "RESULT_JSON_SCHEMA", "Refused", "Result", "RuntimeUnavailable", "Sandbox", "Session",
        "SessionEnded", "Status", "WasmRunnerError", "run", "runtime_names",
    ])
    for name in wasm_runner.__all__:
        assert getattr(wasm_runner, name) is not None
