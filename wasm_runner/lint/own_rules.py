"""Two beginner rules Ruff lacks (issue 36 §2), on Python's ``ast``: code that can never run
(statements after ``return``, ``raise``, ``break`` or ``continue`` in the same block) and a value
computed then thrown away (an expression statement that is an arithmetic operation or an index,
``n + 1``, ``total * 2``, ``scores[0]``: Ruff's B018 leaves those out because an operator might have
a side effect).

The browser computes the same marks from Ruff's WebAssembly tokens (``web/src/lint-own.js``); the
rules and the merging with Ruff's findings are written alike on both tiers (docs/lint.md):

- no own marks when the code has a syntax error (Ruff's "syntax" finding, or ``ast`` cannot read it);
- one "unreachable" mark per block: from the first statement after the first ``return`` /
  ``raise`` / ``break`` / ``continue`` (or ``while True:`` whose body has no ``break`` of its own,
  or an ``if`` with an ``else`` whose every branch leaves so, or a ``try`` whose body or ``else``
  and every ``except`` leave, or whose ``finally`` does) to the end of the block's last statement;
- the program's last top-level statement, when it is an expression, is shown like a notebook
  cell's value (guest/rich.py): neither our "thrown-away" rule nor Ruff's B015/B018 marks it;
- a "thrown-away" mark where Ruff's B015/B018 already marks the statement, or in code that never
  runs, is left out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from .rules import Finding, rule_table

__all__ = ["THROWN_AWAY", "UNREACHABLE", "OwnMarks", "Span", "merge_own_findings", "own_marks"]

UNREACHABLE = "unreachable-code"
THROWN_AWAY = "thrown-away-value"
_RUFF_THROWN_AWAY = frozenset({"B015", "B018"})
_TERMINATORS = (ast.Return, ast.Raise, ast.Break, ast.Continue)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class Span(NamedTuple):
    """1-based line and column (characters), end exclusive, as the findings count."""

    line: int
    column: int
    end_line: int
    end_column: int

    def holds(self, line: int, column: int) -> bool:
        return (self.line, self.column) <= (line, column) < (self.end_line, self.end_column)


class OwnMarks(NamedTuple):
    marks: list[tuple[str, str, Span]]  # (rule name, detail, where)
    last_expression: Span | None  # the program's last top-level expression statement


class _Positions:
    """ast's columns are UTF-8 byte offsets; the findings count characters."""

    def __init__(self, code: str) -> None:
        self.lines = [line.encode("utf-8", "surrogatepass") for line in _LINE_BREAK.split(code)]

    def column(self, line: int, byte_offset: int) -> int:
        return len(self.lines[line - 1][:byte_offset].decode("utf-8", "surrogatepass")) + 1

    def span(self, first: ast.stmt, last: ast.stmt) -> Span:
        end_line = last.end_lineno or last.lineno
        end_col = last.end_col_offset if last.end_col_offset is not None else last.col_offset
        return Span(first.lineno, self.column(first.lineno, first.col_offset),
                    end_line, self.column(end_line, end_col))


def _blocks(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body


_KEYWORD = {ast.Return: "return", ast.Raise: "raise", ast.Break: "break", ast.Continue: "continue"}


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _breaks_out(block: list[ast.stmt]) -> bool:
    """Whether a ``break`` in ``block`` leaves the loop whose body it is (not an inner loop's)."""
    for stmt in block:
        if isinstance(stmt, ast.Break):
            return True
        if isinstance(stmt, _SCOPES):
            continue
        inner = [stmt.orelse] if isinstance(stmt, _LOOPS) else list(_blocks(stmt))  # an inner loop's else: ours
        if any(_breaks_out(b) for b in inner):
            return True
    return False


def _ends(block: list[ast.stmt]) -> bool:
    """Whether ``block`` never goes on to the statement after it (one of its statements leaves)."""
    return any(_leaves(stmt) is not None for stmt in block)


def _leaves(stmt: ast.stmt) -> str | None:
    """The keyword after which the rest of the block never runs, if ``stmt`` is one."""
    if isinstance(stmt, _TERMINATORS):
        return _KEYWORD[type(stmt)]
    if (isinstance(stmt, ast.While) and isinstance(stmt.test, ast.Constant) and stmt.test.value is True
            and not _breaks_out(stmt.body)):
        return "while True"  # a loop with no way out but return / raise
    if isinstance(stmt, ast.If) and stmt.orelse and _ends(stmt.body) and _ends(stmt.orelse):
        return "if"  # every branch (if, each elif, else) leaves
    if isinstance(stmt, ast.Try | ast.TryStar) and (
            _ends(stmt.finalbody)
            or (all(_ends(h.body) for h in stmt.handlers) and (_ends(stmt.body) or _ends(stmt.orelse)))):
        return "try"  # no way through: the try's body or else, and each except, leave (or finally does)
    return None


def _unreachable(block: list[ast.stmt], positions: _Positions, out: list[tuple[str, str, Span]]) -> None:
    for index, stmt in enumerate(block):
        for inner in _blocks(stmt):
            _unreachable(inner, positions, out)
        keyword = _leaves(stmt)
        if keyword is not None:
            if index + 1 < len(block):
                detail = f"Code after `{keyword}` never runs"
                out.append((UNREACHABLE, detail, positions.span(block[index + 1], block[-1])))
            return


def _is_thrown_away(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.BinOp | ast.Subscript)


def own_marks(code: str) -> OwnMarks | None:
    """Our rules' marks for ``code``, or None when ``ast`` cannot read it."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    positions = _Positions(code)
    marks: list[tuple[str, str, Span]] = []
    _unreachable(tree.body, positions, marks)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node is not last and _is_thrown_away(node):
            marks.append((THROWN_AWAY, "The value of this expression is not used", positions.span(node, node)))
    return OwnMarks(marks, positions.span(last, last) if last is not None else None)


def merge_own_findings(code: str, ruff_findings: list[Finding], lang: str = "en") -> list[Finding]:
    """Ruff's findings with our rules' marks added (and merged as the module's docstring says)."""
    if any(f["kind"] == "syntax" for f in ruff_findings):
        return ruff_findings
    own = own_marks(code)
    if own is None:
        return ruff_findings
    last = own.last_expression
    found = [f for f in ruff_findings
             if not (f["rule"] in _RUFF_THROWN_AWAY and last is not None and last.holds(f["line"], f["column"]))]
    ruff_marked = [(f["line"], f["column"]) for f in found if f["rule"] in _RUFF_THROWN_AWAY]
    never_runs = [span for name, _, span in own.marks if name == UNREACHABLE]
    table = rule_table()
    for name, detail, span in own.marks:
        if name == THROWN_AWAY and (any(span.holds(*where) for where in ruff_marked)
                                    or any(never.holds(span.line, span.column) for never in never_runs)):
            continue
        rule = table.by_name(name)
        assert rule is not None, name
        found.append(Finding(
            rule=rule.code, name=rule.name, kind=rule.kind, severity=rule.severity, title=rule.title_in(lang),
            message=rule.message(detail, lang), detail=detail, line=span.line, column=span.column,
            end_line=span.end_line, end_column=span.end_column,
        ))
    found.sort(key=lambda f: (f["line"], f["column"], f["rule"]))
    return found
