"""The shared rule table (``rules.json``): which Ruff rules run, how each finding is worded.

A finding's ``message`` is the table's ``text`` with ``{name}`` (the first `quoted` part of Ruff's
own message) and ``{detail}`` (Ruff's message) filled in; ``web/src/lint.js`` does the same in the
browser, so both tiers word a finding alike.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files as _pkg_files
from typing import Any, Literal, TypedDict

__all__ = ["Finding", "Rule", "RuleTable", "rule_table", "table_text"]

Severity = Literal["error", "warning", "info"]
_QUOTED = re.compile(r"`([^`]*)`")


class Finding(TypedDict):
    """One mark: where (1-based lines and columns, columns in characters; end exclusive), what."""

    rule: str  # Ruff's code (F821), or "syntax"
    name: str  # Ruff's rule name (undefined-name), or "invalid-syntax"
    kind: Literal["beginner", "style", "syntax"]
    severity: Severity
    title: str
    message: str  # plain words, from the table
    detail: str  # Ruff's own message
    line: int
    column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    title: str
    text: str
    kind: Literal["beginner", "style", "syntax"]

    def message(self, ruff_message: str) -> str:
        quoted = _QUOTED.search(ruff_message)
        detail = ruff_message.rstrip(".")
        return self.text.replace("{name}", quoted.group(1) if quoted else "this name").replace("{detail}", detail)


@dataclass(frozen=True)
class RuleTable:
    beginner: tuple[Rule, ...]
    own: tuple[Rule, ...]  # wasm-runner's own rules (own_rules.py), not Ruff's: beginner rules too
    style: tuple[Rule, ...]
    syntax: Rule
    target_version: str
    line_length: int

    def codes(self, style: bool = False) -> list[str]:
        """The Ruff codes to select: the beginner rules, and the style rules when asked (our own
        rules are not Ruff's: see ``own``)."""
        return [r.code for r in self.beginner + (self.style if style else ())]

    def by_name(self, name_or_code: str) -> Rule | None:
        """The rule of a Ruff finding: the CLI names its code and name, the wasm build its name."""
        for rule in (*self.beginner, *self.own, *self.style, self.syntax):
            if name_or_code in (rule.code, rule.name):
                return rule
        return None


def table_text() -> str:
    return _pkg_files("wasm_runner").joinpath("lint", "rules.json").read_text()


def _rule(entry: dict[str, Any], kind: Literal["beginner", "style", "syntax"]) -> Rule:
    return Rule(code=entry.get("code", "syntax"), name=entry["name"], severity=entry["severity"],
                title=entry["title"], text=entry["text"], kind=kind)


@cache
def rule_table() -> RuleTable:
    raw = json.loads(table_text())
    return RuleTable(
        beginner=tuple(_rule(e, "beginner") for e in raw["beginner"]),
        own=tuple(_rule(e, "beginner") for e in raw["own"]),
        style=tuple(_rule(e, "style") for e in raw["style"]),
        syntax=_rule(raw["syntax"], "syntax"),
        target_version=raw["ruff"]["target-version"],
        line_length=int(raw["ruff"]["line-length"]),
    )
