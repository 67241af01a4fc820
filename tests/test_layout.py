"""The package's layout rules that import-linter cannot express: faces reach the core only through
public names, every module declares ``__all__``, no module imports itself back through others
(type-only imports included), and the public API stays what it is."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import wasm_runner

PACKAGE = Path(wasm_runner.__file__).parent
FACES = ("http", "mcp", "compare", "browser", "cli.py", "bench.py", "tool_schema.py")
CORE = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "cli", "bench", "tool_schema"} | {"sandbox", "wasi", "execution"}


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


def _imports_of(path: Path, modules: set[str]) -> set[str]:
    """The ``modules`` ``path`` imports: anywhere in it, under ``TYPE_CHECKING`` too
    (``from . import x`` names the module ``x``, not the package)."""
    name = ".".join(("wasm_runner", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + (node.module.split(".") if node.module else []))
            found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found & modules


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    """No module reaches itself through its imports, type-only ones included: a part that needs
    something of the module above it declares a Protocol of just that (``sandbox.guest.GuestHost``,
    ``scaleout.drain.Load``) and is handed the object by its constructor or caller."""
    paths = {".".join(("wasm_runner", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"): p
             for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "guest"}
    graph = {name: _imports_of(path, set(paths)) - {name} for name, path in paths.items()}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check works
    assert _cycles(graph) == []


def test_the_public_api_is_what_the_docs_name() -> None:
    """A change to the public API is a deliberate edit of this list (and of docs/python-api.md)."""
    assert sorted(wasm_runner.__all__) == sorted([
        "Caller", "Executor", "FileOut", "HostFunctions", "InputSource", "InvalidLimits", "Job", "Limits", "Output",
        "Policy", "RESULT_JSON_SCHEMA", "Refused", "Result", "RuntimeUnavailable", "Sandbox", "Session",
        "SessionEnded", "SnapshotFailed", "SnapshotRefused", "Status", "WasmRunnerError", "run", "runtime_names",
    ])
    for name in wasm_runner.__all__:
        assert getattr(wasm_runner, name) is not None
