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
CORE = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "cli", "bench", "tool_schema"} | {"sandbox", "wasi", "execution", "admission", "sessions"}


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
        if rel.parts[0] == "guest":
            continue  # guest code runs inside the sandbox (standard library only, no host names)
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
        if rel.parts[0] == "guest":
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
    return _imports_in(ast.parse(path.read_text()), package, modules)


def _imports_in(tree: ast.AST, package: str, modules: set[str]) -> set[str]:
    """The ``modules`` a module of ``package`` whose syntax is ``tree`` imports."""
    found: set[str] = set()
    for node in ast.walk(tree):
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
    something of the module above it declares a record or a Protocol of just that
    (``sandbox.guest.GuestModule``, ``scaleout.drain.Load``) and is handed it by its constructor
    or caller."""
    paths = {".".join(("wasm_runner", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"): p
             for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] != "guest"}
    graph = {name: _imports_of(path, set(paths)) - {name} for name, path in paths.items()}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check works
    type_only = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .core import Sandbox\n"
                          "def f():\n    from .. import engine\n")
    assert _imports_in(type_only, "wasm_runner.sandbox", set(paths)) == {  # type-only and late imports count
        "wasm_runner.sandbox.core", "wasm_runner.engine"}
    assert _cycles(graph) == []


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ" and isinstance(node.value, ast.Name)
            and node.value.id == "os") or (isinstance(node, ast.Name) and node.id == "environ")


def _ours(key: ast.AST | None) -> bool:
    """Whether a key read from the environment may be a ``WASM_RUNNER_*`` name: anything but a
    literal that names another variable (``XDG_CACHE_HOME``)."""
    return not (isinstance(key, ast.Constant) and isinstance(key.value, str)
                and not key.value.startswith("WASM_RUNNER_"))


def _environment_reads(tree: ast.AST) -> list[int]:
    """Lines that read ``os.environ`` (or ``os.getenv``) for a name that may be ours. Writing a
    variable for a child process, or copying the whole environment for one, is no read."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "getenv":
            if _ours(node.args[0] if node.args else None):
                lines.append(node.lineno)
        if not _is_environ(node):
            continue
        up = parents.get(node)
        if isinstance(up, ast.Attribute) and up.attr in ("get", "__getitem__", "__contains__"):
            call = parents.get(up)
            key = call.args[0] if isinstance(call, ast.Call) and call.args else None
            bad = _ours(key)
        elif isinstance(up, ast.Attribute):
            bad = up.attr not in ("pop", "update", "setdefault", "__setitem__")  # items(), copy(): reads all
        elif isinstance(up, ast.Subscript):
            bad = isinstance(up.ctx, ast.Load) and _ours(up.slice)
        elif isinstance(up, ast.Compare):
            bad = _ours(up.left)
        elif isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "dict":
            bad = False  # dict(os.environ): the environment handed to a child process
        elif isinstance(up, ast.Dict):
            bad = False  # {**os.environ, ...}: the same
        else:
            bad = True  # bound to a name, passed on: read somewhere else
        if bad:
            lines.append(node.lineno)
    return sorted(lines)


def test_only_the_environment_module_reads_wasm_runner_variables() -> None:
    """``wasm_runner/environment.py`` is the one reader of ``WASM_RUNNER_*`` variables (the
    server's settings read theirs through its ``variables()``); guest code runs in the sandbox."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "guest" or rel == Path("environment.py"):
            continue
        offenders += [f"{rel}:{line}" for line in _environment_reads(ast.parse(path.read_text()))]
    check = ast.parse("import os\nos.environ.get('WASM_RUNNER_X')\nos.environ.get('HOME')\nenv = os.environ\n"
                      "dict(os.environ)\nos.environ['WASM_RUNNER_Y'] = '1'\nos.getenv(NAME)\n")
    assert _environment_reads(check) == [2, 4, 7]  # the check works
    assert offenders == []


def test_the_public_api_is_what_the_docs_name() -> None:
    """A change to the public API is a deliberate edit of this list (and of docs/python-api.md)."""
    assert sorted(wasm_runner.__all__) == sorted([
        "Caller", "Executor", "FileOut", "HostFunctions", "InputSource", "InvalidLimits", "Job", "Limits", "Output",
        "Policy", "RESULT_JSON_SCHEMA", "Refused", "Result", "RuntimeUnavailable", "Sandbox", "Session",
        "SessionEnded", "SnapshotFailed", "SnapshotRefused", "Status", "WasmRunnerError", "run", "runtime_names",
    ])
    for name in wasm_runner.__all__:
        assert getattr(wasm_runner, name) is not None


def test_guest_code_outside_guest_imports_only_the_standard_library() -> None:
    """``codec.py``, ``exercises/judging.py`` and ``exercises/practice.py`` also run in the guest
    (``wasm_runner/guest/__init__.py``): the standard library only (practice: and judging)."""
    import sys

    allowed_relative = {"exercises/practice.py": {"judging"}}
    for rel in ("codec.py", "exercises/judging.py", "exercises/practice.py"):
        tree = ast.parse((PACKAGE / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    assert node.module in allowed_relative.get(rel, set()), (rel, node.module)
                    continue
                names = [(node.module or "").split(".")[0]]
            else:
                continue
            for name in names:
                assert name == "__future__" or name in sys.stdlib_module_names, (rel, name)
