"""Judging a check, written once for both tiers: comparing output, a check's verdict and message,
the report's summary and score (the weighted share of the checks passed), what a student may see
of hidden checks (its number, pass/fail, and the teacher's ``fail_message`` when it fails), bounded ``repr`` for messages, and
the asserts of teacher tests (rewritten to say what they compared; run on the test's side).

Pure and standard-library only, with no imports from this package: the server imports it, and
the browser tier loads the same file into Pyodide. Everything takes and returns plain data: a
run's result is a ``Result.to_dict()``-shaped mapping, an I/O case a mapping (or an object) with
``stdin``, ``stdout``, ``compare`` and ``tolerance``, a test's record ``{"passed", "message"}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["compare_output", "judge_io", "judge_test", "check_result", "summarize", "redact", "score",
           "short", "block", "strict_eq", "assert_compare", "assert_true", "rewrite_asserts",
           "missing_function",
           "MAX_SHOWN_LINES", "MAX_SHOWN_CHARS", "MAX_REPR_CHARS", "LIMIT_HINT"]

MAX_SHOWN_LINES = 20
MAX_SHOWN_CHARS = 1500
MAX_REPR_CHARS = 300

LIMIT_HINT = {
    "cpu": "Is there an infinite loop?",
    "wall": "Is there an infinite loop, or is the program waiting for input it never gets?",
    "memory": "Is a list or string growing without end?",
    "output": "Is something printed in an endless loop?",
}


def _get(case: Any, key: str, default: Any = None) -> Any:
    if isinstance(case, Mapping):
        return case.get(key, default)
    return getattr(case, key, default)


# -- comparing output -------------------------------------------------------------------------
def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def compare_output(case: Any, got: str) -> tuple[bool, str]:
    """(same, first difference) of the program's stdout and the case's, by the case's mode:
    ``exact``, ``lines`` (trailing spaces and blank lines ignored), ``whitespace`` (words) or
    ``float`` (words; numbers within ``tolerance``, relative or absolute)."""
    want = _get(case, "stdout", "")
    mode = _get(case, "compare") or "lines"
    tolerance = _get(case, "tolerance")
    tolerance = 1e-6 if tolerance is None else float(tolerance)
    if mode == "exact":
        if got == want:
            return True, ""
        a, b = got.split("\n"), want.split("\n")
    elif mode == "lines":
        a = [line.rstrip() for line in got.rstrip().split("\n")]
        b = [line.rstrip() for line in want.rstrip().split("\n")]
        if a == b:
            return True, ""
    else:
        ta, tb = got.split(), want.split()
        if mode == "whitespace":
            if ta == tb:
                return True, ""
        else:  # float: numbers within the tolerance (relative or absolute), other words exactly
            for x, y in zip(ta, tb):
                nx, ny = _number(x), _number(y)
                if nx is not None and ny is not None:
                    ok = math.isclose(nx, ny, rel_tol=tolerance, abs_tol=tolerance)
                else:
                    ok = x == y
                if not ok:
                    tol = f" (tolerance {tolerance:g})" if ny is not None else ""
                    return False, f"expected {y!r}, got {x!r}{tol}"
            if len(ta) == len(tb):
                return True, ""
        if len(ta) != len(tb):
            return False, f"expected {len(tb)} words, got {len(ta)}"
        for x, y in zip(ta, tb):
            if x != y:
                return False, f"expected {y!r}, got {x!r}"
        return False, ""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return False, f"line {i + 1}: expected {y!r}, got {x!r}"
    if len(a) < len(b):
        return False, f"line {len(a) + 1}: expected {b[len(a)]!r}, got nothing more"
    return False, f"line {len(b) + 1}: expected nothing more, got {a[len(b)]!r}"


# -- messages ---------------------------------------------------------------------------------
def block(text: str) -> str:
    """``text`` indented, at most MAX_SHOWN_LINES lines and MAX_SHOWN_CHARS characters."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return "    (nothing)"
    cut = len(lines) > MAX_SHOWN_LINES
    shown = "\n".join("    " + line for line in lines[:MAX_SHOWN_LINES])
    if len(shown) > MAX_SHOWN_CHARS:
        shown, cut = shown[:MAX_SHOWN_CHARS], True
    return shown + ("\n    ..." if cut else "")


def short(value: Any) -> str:
    """``repr(value)`` for a message: at most MAX_REPR_CHARS characters, never an exception."""
    try:
        text = repr(value)
    except BaseException as e:  # noqa: BLE001 - a value's __repr__ may raise anything
        text = f"<unprintable {type(e).__name__}>"
    if type(text) is not str:
        text = "<unprintable>"
    return text if len(text) <= MAX_REPR_CHARS else text[:MAX_REPR_CHARS - 3] + "..."


def _stopped(res: Mapping[str, Any]) -> str:
    msg = res.get("message") or f"The run ended with status {res.get('status')}."
    hint = LIMIT_HINT.get(res.get("limit") or "")
    return f"{msg} {hint}" if hint else msg


def _stderr_tail(text: str) -> str:
    text = text.strip("\n")
    return text if len(text) <= MAX_SHOWN_CHARS else "..." + text[-MAX_SHOWN_CHARS:]


# -- verdicts ---------------------------------------------------------------------------------
def judge_io(case: Any, res: Mapping[str, Any]) -> tuple[bool, str]:
    """(passed, message) of an I/O case from its run's result."""
    stdin = _get(case, "stdin") or ""
    stdin_part = f"Input:\n{block(stdin)}\n" if stdin else ""
    if res.get("status") != "ok":
        if res.get("limit"):
            return False, _stopped(res)
        err = _stderr_tail(res.get("stderr") or "")
        if err:
            return False, f"{stdin_part}Your program stopped with an error:\n{block(err)}"
        return False, f"{stdin_part}{_stopped(res)}"
    got = res.get("stdout") or ""
    same, diff = compare_output(case, got)
    if same:
        return True, "Output matches."
    return False, (f"{stdin_part}Expected output:\n{block(_get(case, 'stdout', ''))}\n"
                   f"Your output:\n{block(got)}" + (f"\nFirst difference: {diff}." if diff else ""))


def judge_test(record: Mapping[str, Any] | None, res: Mapping[str, Any]) -> tuple[bool, str]:
    """(passed, message) of a test check: its ``record`` (what the test's side reported, None
    when it reported nothing) and the run's result (a limit fails the check whatever was said)."""
    if record is not None:
        passed = record.get("passed") is True
        message = "Test passed." if passed else str(record.get("message") or "Test failed.")
        if res.get("status") != "ok" and res.get("limit"):  # reported, then a limit
            return False, message if not passed else _stopped(res)
        return passed, message
    if res.get("limit") or res.get("status") in ("invalid_input", "internal_error", "cancelled"):
        return False, _stopped(res)
    return False, ("The test did not report back: the program ended before the test "
                   "finished (sys.exit or os._exit in your code?).")


def check_result(kind: str, name: str, hidden: bool, res: Mapping[str, Any], *, case: Any = None,
                 record: Mapping[str, Any] | None = None, weight: float = 1.0,
                 fail_message: str | None = None) -> dict[str, Any]:
    """One check's result: ``kind`` "io" (judged with ``case``) or "test" (with ``record``), its
    ``weight`` in the score, and the teacher's ``fail_message`` (said first when it fails; of a
    hidden check on the server, all the student is told: ``redact``)."""
    if kind == "io":
        passed, message = judge_io(case, res)
    else:
        passed, message = judge_test(record, res)
    if not passed and fail_message:
        message = f"{fail_message}\n{message}"
    return {"name": name, "kind": kind, "hidden": hidden, "passed": passed, "message": message,
            "status": res.get("status"), "limit": res.get("limit"), "weight": float(weight),
            "fail_message": fail_message if not passed else None}


def score(checks: Sequence[Mapping[str, Any]]) -> float:
    """The weighted share of the checks passed, from 0 to 1 (rounded to 4 places; 0 when the
    weights add up to 0). A check without a weight weighs 1."""
    total = sum(float(c.get("weight", 1.0)) for c in checks)
    got = sum(float(c.get("weight", 1.0)) for c in checks if c["passed"])
    return round(got / total, 4) if total > 0 else 0.0


def summarize(exercise_id: str, checks: list[dict[str, Any]]) -> dict[str, Any]:
    """The report: totals, the score (the weighted share passed), a one-line summary, the checks."""
    passed = sum(1 for c in checks if c["passed"])
    total = len(checks)
    weighted = score(checks)
    summary = f"{passed} of {total} checks passed"
    if len({float(c.get("weight", 1.0)) for c in checks}) > 1:  # weights differ: say the score
        summary += f", score {weighted * 100:.4g}%"
    return {
        "exercise": exercise_id,
        "passed": total > 0 and passed == total,
        "total": total,
        "passed_count": passed,
        "failed_count": total - passed,
        "score": weighted,
        "summary": summary + (" — well done!" if passed == total and total else "."),
        "checks": checks,
    }


def redact(report: Mapping[str, Any]) -> dict[str, Any]:
    """The report a student may see: a hidden check keeps only its number, pass/fail, its weight,
    when a limit stopped it which limit, and when it failed the teacher's ``fail_message`` if
    there is one. Its name, input, expected output and judged messages stay here."""
    checks = []
    n = 0
    for c in report["checks"]:
        if not c["hidden"]:
            checks.append(c)
            continue
        n += 1
        msg = "Hidden check passed." if c["passed"] else "Hidden check failed."
        if c.get("limit"):
            msg = f"Hidden check stopped by the {c['limit']} limit."
        if not c["passed"] and c.get("fail_message"):
            msg = f"{msg} {c['fail_message']}"
        checks.append({"name": f"hidden check {n}", "kind": c["kind"], "hidden": True,
                       "passed": c["passed"], "message": msg, "status": c.get("status"),
                       "limit": c.get("limit"), "weight": c.get("weight", 1.0),
                       "fail_message": c.get("fail_message")})
    return {**report, "checks": checks}


# -- asserts in teacher tests -----------------------------------------------------------------
# The test's side rewrites each ``assert`` of a test file into a call of ``assert_compare`` or
# ``assert_true``, so a failure says what was compared: the assert's text, what the code gave and
# what was expected. ``strict_eq`` is the ``==`` of those asserts: a value of a builtin type
# equals only a value of a builtin type, element by element (a handle of the student's object
# is never equal to a number, whatever its class says).
PLAIN = (int, float, complex, bool, str, bytes, type(None), list, tuple, dict, set, frozenset)
NUMBERS = (int, float, complex, bool)
SETS = (set, frozenset)


def _type_name(value: Any) -> str:
    return type(value).__name__


def strict_eq(a: Any, b: Any, type_name: Any = _type_name) -> tuple[bool, str | None]:
    """(equal, why-not) of ``a`` (what the code gave) and ``b`` (what was expected)."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        tx, ty = type(x), type(y)
        if tx not in PLAIN and ty not in PLAIN:
            if not (x == y):
                return False, None
            continue
        if tx not in PLAIN or ty not in PLAIN:
            return False, f"type: got {type_name(x)}, expected {type_name(y)}"
        if tx in NUMBERS and ty in NUMBERS:
            if not (x == y):
                return False, None
            continue
        if tx is not ty and not (tx in SETS and ty in SETS):
            return False, f"type: got {tx.__name__}, expected {ty.__name__}"
        if tx is list or tx is tuple:
            if len(x) != len(y):
                return False, None
            stack.extend(zip(x, y))
        elif tx is dict:
            if len(x) != len(y):
                return False, None
            for k in x:
                if k not in y:
                    return False, None
                stack.append((x[k], y[k]))
        elif not (x == y):
            return False, None
    return True, None


_OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b, "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
        "is": lambda a, b: a is b, "is not": lambda a, b: a is not b}


def assert_compare(left: Any, op: str, right: Any, source: str, msg: Any = None,
                   type_name: Any = _type_name) -> None:
    """A rewritten ``assert left <op> right``: compares once, explains a failure."""
    why = None
    if op == "==":
        ok, why = strict_eq(left, right, type_name)
    elif op == "!=":
        ok = not strict_eq(left, right, type_name)[0]
    else:
        ok = bool(_OPS[op](left, right))
    if ok:
        return
    text = "assert " + source
    if msg is not None:
        text += f" ({msg})"
    if op == "==":
        text += f"\n  got:      {short(left)}\n  expected: {short(right)}"
    else:
        text += f"\n  left:  {short(left)}\n  right: {short(right)}"
    if why:
        text += f"\n  ({why})"
    raise AssertionError(text)


def assert_true(value: Any, source: str, msg: Any = None) -> None:
    if value:
        return
    raise AssertionError("assert " + source + ("" if msg is None else f" ({msg})"))


def rewrite_asserts(source: str, filename: str, compare: str = "__wr_compare",
                    truth: str = "__wr_truth") -> Any:
    """``source`` compiled with each ``assert`` turned into a call of the globals ``compare``
    (``assert_compare``) or ``truth`` (``assert_true``). Raises SyntaxError like ``compile``."""
    import ast

    names = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
             ast.GtE: ">=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
    tree = ast.parse(source, filename)

    def rewrite(stmt: Any) -> Any:
        test = stmt.test
        text = " ".join((ast.get_source_segment(source, test) or ast.unparse(test)).split())
        msg = stmt.msg if stmt.msg is not None else ast.Constant(None)
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in names:
            call = ast.Call(ast.Name(compare, ast.Load()),
                            [test.left, ast.Constant(names[type(test.ops[0])]),
                             test.comparators[0], ast.Constant(text), msg], [])
        else:
            call = ast.Call(ast.Name(truth, ast.Load()), [test, ast.Constant(text), msg], [])
        return ast.copy_location(ast.Expr(call), stmt)

    def walk(node: Any) -> None:
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for i, child in enumerate(block):
                if isinstance(child, ast.Assert):
                    block[i] = rewrite(child)
                elif isinstance(child, ast.AST):
                    walk(child)

    walk(tree)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


def _edits(a: str, b: str) -> int:
    """The number of one-character edits (insert, delete, change) from ``a`` to ``b``."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def _named_otherwise(name: str, functions: Sequence[str]) -> str | None:
    """The student's function that is probably the one the test calls ``name``: the closest
    in spelling (at most one edit in three letters, any case), else the only one there is."""
    names = sorted({f for f in functions if type(f) is str and f.isidentifier() and f != name})[:100]
    close = sorted((_edits(f.lower(), name.lower()), f) for f in names)
    if close and close[0][0] <= max(1, len(name) // 3):
        return close[0][1]
    return names[0] if len(names) == 1 else None


def missing_function(name: Any, tests_source: str, functions: Sequence[str] = ()) -> dict[str, Any] | None:
    """The explanation (``{id, params, span}``, docs/explanations.md) of a teacher test that
    failed with ``NameError`` for ``name``, a name the student's code does not define, or None
    when the tests never call ``name``. The signature shown is the test's first call of it
    (``add(a, b)`` for ``add(2, 3)``; keyword arguments by their names). ``functions`` are the
    names of the functions the student's code does define: one spelt close to ``name`` (``ad``),
    or the only one (``plus``), is named as probably the one (``exercise_function_named_otherwise``).
    Both tiers' harnesses (``guest/check_agent.py``, and ``practice.py`` for
    ``guest/check_harness.py``) use this one."""
    import ast

    if type(name) is not str or not name.isidentifier():
        return None
    try:
        tree = ast.parse(tests_source)
    except (SyntaxError, ValueError):
        return None
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name]
    if not calls:
        return None
    first = min(calls, key=lambda node: (node.lineno, node.col_offset))
    args = ["abcdefgh"[i] if i < 8 else f"x{i}" for i in range(len(first.args))]
    args += [k.arg for k in first.keywords if k.arg]
    params = {"name": name, "signature": f"{name}({', '.join(args)})"}
    defined = _named_otherwise(name, functions)
    if defined is not None:
        return {"id": "exercise_function_named_otherwise", "span": None, "params": {**params, "defined": defined}}
    return {"id": "exercise_missing_function", "span": None, "params": params}
