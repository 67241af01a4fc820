"""Exercises: what a teacher writes (a folder or one TOML file) and how it is loaded.

A folder ``add-two/``::

    exercise.toml       title, [limits], [[io]] cases, optional [[tests]] entries, hints
    instructions.md     Markdown shown to the student
    starter.py          the code the student starts from
    solution.py         the reference solution (never sent to students)
    tests.py            visible test functions (optional)
    hidden_tests.py     hidden test functions (optional)

or one file ``add-two.toml`` holding the same keys inline (``instructions``, ``starter``,
``solution``, ``[[tests]] source = ...``). The id is the folder's name or the file's stem.

Grading (docs/exercises.md): each I/O case and each ``[[tests]]`` entry may say its ``weight``
(default 1; the score is the weighted share of the checks passed) and ``fail_message``, the
teacher's words a student sees when that check fails (for a hidden check, in place of anything
about it). ``hints = [...]``: hints the student reveals one at a time. ``grade = "best"`` or
``"latest"``: which attempt the course's gradebook keeps when the exercise is launched from an
LMS (docs/lms.md); without it, the server's ``[lti] grade``.
"""

from __future__ import annotations

import ast
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import WasmRunnerError
from ..limits import InvalidLimits, Limits

__all__ = ["Exercise", "IOCase", "TestFile", "ExerciseError", "load_exercise", "load_folder",
           "COMPARE_MODES", "GRADE_POLICIES", "GradePolicy", "ID_PATTERN", "MAX_WEIGHT", "MAX_HINTS",
           "MAX_MESSAGE_CHARS"]

COMPARE_MODES = ("exact", "lines", "whitespace", "float")
GradePolicy = Literal["best", "latest"]  # which attempt an LMS's gradebook keeps
GRADE_POLICIES: tuple[GradePolicy, ...] = ("best", "latest")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MAX_TEXT = 1 << 20
EXERCISE_LIMIT_KEYS = ("cpu_seconds", "wall_seconds", "memory_mb", "stdout_bytes", "stderr_bytes")
MAX_WEIGHT = 1000.0
MAX_HINTS = 20
MAX_MESSAGE_CHARS = 2000  # a teacher's fail_message, and each hint


class ExerciseError(WasmRunnerError, ValueError):
    """An exercise folder or file that cannot be used; the message says where and why."""


@dataclass(frozen=True)
class IOCase:
    """stdin → expected stdout, compared on the host (``compare``: exact, lines, whitespace, float)."""

    name: str
    stdin: str
    stdout: str
    compare: str = "lines"
    tolerance: float = 1e-6
    hidden: bool = False
    weight: float = 1.0
    fail_message: str | None = None  # the teacher's words when this case fails


@dataclass(frozen=True)
class TestFile:
    """Teacher tests: ``test_*`` functions (one check each), or top-level asserts (one check)."""

    name: str
    source: str
    hidden: bool = False
    tests: tuple[str, ...] = ()  # test function names, in file order; () = the whole file
    filename: str = "tests.py"
    weight: float = 1.0  # of each check (test function) of the file
    fail_message: str | None = None  # the teacher's words when one of its checks fails


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    instructions: str = ""
    starter: str = ""
    solution: str | None = None
    io: tuple[IOCase, ...] = ()
    tests: tuple[TestFile, ...] = ()
    limits: dict[str, float] = field(default_factory=dict)
    browser: bool = False  # may the full exercise (hidden checks too) be sent to browsers?
    hints: tuple[str, ...] = ()  # revealed one at a time by the student
    style: bool = False  # add style notes (wasm_runner.lint, the style rules) beside the checks?
    grade: GradePolicy | None = None  # the attempt an LMS gradebook keeps; None: the server's default

    def public(self) -> dict[str, Any]:
        """What a student may see: title, instructions, starter, whether the browser tier may
        check it (``browser``: its bundle is served), the hints, whether a check adds style notes
        (``style``); no checks, no solution."""
        return {"id": self.id, "title": self.title, "instructions": self.instructions,
                "starter": self.starter, "checks": len(self.check_names()),
                "limits": dict(self.limits), "browser": self.browser, "hints": list(self.hints),
                "style": self.style}

    def check_weights(self) -> list[float]:
        """The weight of every check, in ``check_names``' order."""
        return [c.weight for c in self.io] + [t.weight for t in self.tests for _ in (t.tests or (t.name,))]

    def check_names(self) -> list[tuple[str, str, bool]]:
        """(kind, name, hidden) of every check, in the order they run."""
        out: list[tuple[str, str, bool]] = [("io", c.name, c.hidden) for c in self.io]
        for t in self.tests:
            for name in t.tests or (t.name,):
                out.append(("test", name, t.hidden))
        return out

    def run_limits(self, base: Limits | None = None) -> Limits:
        """The limits each check's run gets: ``base`` tightened by the exercise's own."""
        base = base or Limits(cpu_seconds=5.0, wall_seconds=10.0, memory_mb=256)
        lower = {k: min(v, getattr(base, k)) for k, v in self.limits.items()}
        return base.tightened(lower) if lower else base

    def bundle(self) -> dict[str, Any]:
        """Everything the browser tier needs to check (hidden checks too): for ``browser = true``."""
        return {
            "id": self.id, "title": self.title, "instructions": self.instructions,
            "starter": self.starter, "limits": dict(self.limits),
            "io": [dict(vars(c)) for c in self.io],
            "tests": [{"name": t.name, "source": t.source, "hidden": t.hidden,
                       "tests": list(t.tests), "filename": t.filename, "weight": t.weight,
                       "fail_message": t.fail_message} for t in self.tests],
            "hints": list(self.hints),
        }


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ExerciseError(f"{where} must be text, not {type(value).__name__}")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_TEXT or "\x00" in value:
        raise ExerciseError(f"{where} is too long or holds a NUL byte")
    return value


def _read(folder: Path | None, name: str, where: str) -> str | None:
    if folder is None:
        return None
    path = folder / name
    if not path.exists():
        return None
    if path.is_symlink() or not path.is_file():
        raise ExerciseError(f"{where}: {name} is not a regular file")
    try:
        return _text(path.read_text(encoding="utf-8"), f"{where}: {name}")
    except UnicodeDecodeError as e:
        raise ExerciseError(f"{where}: {name} is not UTF-8 ({e.reason} at byte {e.start})") from None


def test_functions(source: str, where: str) -> tuple[str, ...]:
    """The ``test_*`` functions a test file defines at its top level, in order."""
    try:
        tree = ast.parse(source, where)
    except SyntaxError as e:
        raise ExerciseError(f"{where} does not compile: {e.msg} (line {e.lineno})") from None
    names = [n.name for n in tree.body
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test")]
    if len(set(names)) != len(names):
        raise ExerciseError(f"{where} defines a test function twice")
    return tuple(names)


def _weight(raw: Any, where: str) -> float:
    value = raw.get("weight", 1)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_WEIGHT:
        raise ExerciseError(f"{where}: weight must be a number from 0 to {MAX_WEIGHT:g}, not {value!r}")
    return float(value)


def _fail_message(raw: Any, where: str) -> str | None:
    if raw.get("fail_message") is None:
        return None
    text = _text(raw["fail_message"], f"{where} fail_message").strip()
    if not text or len(text) > MAX_MESSAGE_CHARS:
        raise ExerciseError(f"{where}: fail_message must be 1 to {MAX_MESSAGE_CHARS} characters")
    return text


def _hints(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_HINTS:
        raise ExerciseError(f"{where}: hints must be a list of at most {MAX_HINTS} texts")
    hints = []
    for n, hint in enumerate(raw, 1):
        text = _text(hint, f"{where}: hint {n}").strip()
        if not text or len(text) > MAX_MESSAGE_CHARS:
            raise ExerciseError(f"{where}: hint {n} must be 1 to {MAX_MESSAGE_CHARS} characters")
        hints.append(text)
    return tuple(hints)


def _grade(raw: Any, where: str) -> GradePolicy | None:
    if raw is None:
        return None
    for policy in GRADE_POLICIES:
        if raw == policy:
            return policy
    raise ExerciseError(f'{where}: grade must be "best" (the best attempt counts) or "latest" (the latest '
                        f"attempt counts), not {raw!r}")


def _io_case(i: int, raw: Any, where: str) -> IOCase:
    w = f"{where}: io case {i + 1}"
    if not isinstance(raw, dict):
        raise ExerciseError(f"{w} must be a table")
    unknown = set(raw) - {"name", "stdin", "stdout", "compare", "tolerance", "hidden", "weight",
                          "fail_message"}
    if unknown:
        raise ExerciseError(f"{w} has unknown keys: {', '.join(sorted(unknown))}")
    if "stdout" not in raw:
        raise ExerciseError(f"{w} needs an expected 'stdout'")
    compare = raw.get("compare", "lines")
    if compare not in COMPARE_MODES:
        raise ExerciseError(f"{w}: compare must be one of {', '.join(COMPARE_MODES)}, not {compare!r}")
    tol = raw.get("tolerance", 1e-6)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 <= tol <= 1e6:
        raise ExerciseError(f"{w}: tolerance must be a number between 0 and 1e6")
    hidden = raw.get("hidden", False)
    if not isinstance(hidden, bool):
        raise ExerciseError(f"{w}: hidden must be true or false")
    return IOCase(
        name=_text(raw.get("name", f"case {i + 1}"), f"{w} name")[:200],
        stdin=_text(raw.get("stdin", ""), f"{w} stdin"),
        stdout=_text(raw["stdout"], f"{w} stdout"),
        compare=compare, tolerance=float(tol), hidden=hidden,
        weight=_weight(raw, w), fail_message=_fail_message(raw, w),
    )


def _limits(raw: Any, where: str) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ExerciseError(f"{where}: [limits] must be a table")
    unknown = set(raw) - set(EXERCISE_LIMIT_KEYS)
    if unknown:
        raise ExerciseError(f"{where}: [limits] may set {', '.join(EXERCISE_LIMIT_KEYS)}; "
                            f"not {', '.join(sorted(unknown))}")
    try:
        Limits.from_dict(dict(raw)).validate()  # ranges checked here
    except InvalidLimits as e:
        raise ExerciseError(f"{where}: [limits]: {e}") from None
    except (TypeError, ValueError) as e:
        raise ExerciseError(f"{where}: [limits]: {e}") from None
    return dict(raw)


def load_exercise(path: str | Path) -> Exercise:
    """Load an exercise folder (with ``exercise.toml``) or a single ``.toml`` file."""
    path = Path(path)
    if path.is_dir():
        folder: Path | None = path
        toml_path = path / "exercise.toml"
        ex_id = path.name
        if not toml_path.is_file():
            raise ExerciseError(f"{path}: no exercise.toml in this folder")
    elif path.is_file() and path.suffix == ".toml":
        folder, toml_path, ex_id = None, path, path.stem
    else:
        raise ExerciseError(f"{path}: not an exercise folder or .toml file")
    where = ex_id
    if not ID_PATTERN.match(ex_id):
        raise ExerciseError(f"{path}: {ex_id!r} is not a usable exercise id (letters, digits, . _ -)")
    try:
        raw = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ExerciseError(f"{where}: {toml_path.name}: {e}") from None
    known = {"title", "instructions", "starter", "solution", "io", "tests", "limits", "browser", "hints", "style",
             "grade"}
    unknown = set(raw) - known
    if unknown:
        raise ExerciseError(f"{where}: unknown keys in {toml_path.name}: {', '.join(sorted(unknown))}")

    def field_text(key: str, filename: str) -> str | None:
        if key in raw:
            return _text(raw[key], f"{where}: {key}")
        return _read(folder, filename, where)

    title = raw.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ExerciseError(f"{where}: a title is needed")
    io_raw = raw.get("io", [])
    if not isinstance(io_raw, list):
        raise ExerciseError(f"{where}: io must be an array of tables ([[io]])")
    io = tuple(_io_case(i, c, where) for i, c in enumerate(io_raw))

    tests: list[TestFile] = []
    tests_raw = raw.get("tests")
    if tests_raw is None:
        for filename, hidden in (("tests.py", False), ("hidden_tests.py", True)):
            src = _read(folder, filename, where)
            if src is not None:
                tests_raw = tests_raw or []
                tests_raw.append({"file": filename, "hidden": hidden})
        tests_raw = tests_raw or []
    if not isinstance(tests_raw, list):
        raise ExerciseError(f"{where}: tests must be an array of tables ([[tests]])")
    for i, t in enumerate(tests_raw):
        w = f"{where}: tests entry {i + 1}"
        if not isinstance(t, dict) or set(t) - {"file", "source", "hidden", "name", "weight", "fail_message"}:
            raise ExerciseError(f"{w} may have file or source, hidden, name, weight, fail_message")
        if ("file" in t) == ("source" in t):
            raise ExerciseError(f"{w} needs exactly one of file or source")
        if "file" in t:
            fname = t["file"]
            if not isinstance(fname, str) or "/" in fname or "\\" in fname or fname.startswith("."):
                raise ExerciseError(f"{w}: file must be a plain file name in the folder")
            src = _read(folder, fname, where)
            if src is None:
                raise ExerciseError(f"{w}: {fname} not found")
        else:
            fname = "hidden_tests.py" if t.get("hidden") else "tests.py"
            src = _text(t["source"], f"{w} source")
        hidden = t.get("hidden", False)
        if not isinstance(hidden, bool):
            raise ExerciseError(f"{w}: hidden must be true or false")
        name = _text(t.get("name", fname), f"{w} name")[:200]
        tests.append(TestFile(name=name, source=src, hidden=hidden,
                              tests=test_functions(src, f"{where}: {fname}"), filename=fname,
                              weight=_weight(t, w), fail_message=_fail_message(t, w)))
    if not io and not tests:
        raise ExerciseError(f"{where}: no checks: add [[io]] cases or a tests.py")
    weights = [c.weight for c in io] + [t.weight for t in tests for _ in (t.tests or (t.name,))]
    if not sum(weights) > 0:
        raise ExerciseError(f"{where}: the checks' weights add up to 0: give one a weight above 0")
    browser = raw.get("browser", False)
    if not isinstance(browser, bool):
        raise ExerciseError(f"{where}: browser must be true or false")
    style = raw.get("style", False)
    if not isinstance(style, bool):
        raise ExerciseError(f"{where}: style must be true or false")
    return Exercise(
        id=ex_id,
        title=title.strip()[:200],
        instructions=field_text("instructions", "instructions.md") or "",
        starter=field_text("starter", "starter.py") or "",
        solution=field_text("solution", "solution.py"),
        io=io,
        tests=tuple(tests),
        limits=_limits(raw.get("limits"), where),
        browser=browser,
        hints=_hints(raw.get("hints"), where),
        style=style,
        grade=_grade(raw.get("grade"), where),
    )


def load_folder(root: str | Path) -> dict[str, Exercise]:
    """Every exercise in ``root`` (sub-folders with exercise.toml, and .toml files), by id.
    A broken exercise raises ``ExerciseError`` naming it: a server should not start half-right."""
    root = Path(root)
    if not root.is_dir():
        raise ExerciseError(f"{root}: the exercises folder does not exist")
    found: dict[str, Exercise] = {}
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if (entry.is_dir() and (entry / "exercise.toml").is_file()) or entry.suffix == ".toml":
            ex = load_exercise(entry)
            if ex.id in found:
                raise ExerciseError(f"{root}: two exercises have the id {ex.id!r}")
            found[ex.id] = ex
    return found
