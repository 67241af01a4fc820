"""The shared rule table (``rules.json``): which Ruff rules run, how each finding is worded.

A finding's ``message`` is the table's ``text`` with ``{name}`` (the first `quoted` part of Ruff's
own message) and ``{detail}`` (Ruff's message) filled in; ``web/src/lint.js`` does the same in the
browser, so both tiers word a finding alike. Each rule is worded in English (``title``, ``text``)
and in the table's other ``languages`` (``"de": {"title", "text"}``); ``lint_language`` picks the
language of an asked one (``de-AT``: ``de``; unknown: English), as the explanations do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files as _pkg_files
from typing import Any, Literal, TypedDict

__all__ = ["DEFAULT_LINT_LANGUAGE", "Finding", "Rule", "RuleTable", "lint_language", "rule_table", "table_text"]

Severity = Literal["error", "warning", "info"]
DEFAULT_LINT_LANGUAGE = "en"
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
    title: str  # English
    text: str  # English
    kind: Literal["beginner", "style", "syntax"]
    words: tuple[tuple[str, str, str], ...] = ()  # (language, title, text) in the table's other languages

    def _in(self, lang: str) -> tuple[str, str]:
        for language, title, text in self.words:
            if language == lang:
                return title, text
        return self.title, self.text

    def title_in(self, lang: str = DEFAULT_LINT_LANGUAGE) -> str:
        """The title in ``lang`` (one of the table's languages, see ``lint_language``)."""
        return self._in(lang)[0]

    def message(self, ruff_message: str, lang: str = DEFAULT_LINT_LANGUAGE) -> str:
        quoted = _QUOTED.search(ruff_message)
        detail = ruff_message.rstrip(".")
        text = self._in(lang)[1]
        return text.replace("{name}", quoted.group(1) if quoted else "this name").replace("{detail}", detail)


@dataclass(frozen=True)
class RuleTable:
    beginner: tuple[Rule, ...]
    own: tuple[Rule, ...]  # wasm-runner's own rules (own_rules.py), not Ruff's: beginner rules too
    style: tuple[Rule, ...]
    syntax: Rule
    target_version: str
    line_length: int
    languages: tuple[str, ...]  # English first

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


def _rule(entry: dict[str, Any], kind: Literal["beginner", "style", "syntax"], languages: list[str]) -> Rule:
    words = tuple((lang, entry[lang]["title"], entry[lang]["text"]) for lang in languages
                  if lang != DEFAULT_LINT_LANGUAGE)  # a missing wording fails here, at the first lint
    return Rule(code=entry.get("code", "syntax"), name=entry["name"], severity=entry["severity"],
                title=entry["title"], text=entry["text"], kind=kind, words=words)


@cache
def rule_table() -> RuleTable:
    raw = json.loads(table_text())
    languages = list(raw["languages"])
    return RuleTable(
        beginner=tuple(_rule(e, "beginner", languages) for e in raw["beginner"]),
        own=tuple(_rule(e, "beginner", languages) for e in raw["own"]),
        style=tuple(_rule(e, "style", languages) for e in raw["style"]),
        syntax=_rule(raw["syntax"], "syntax", languages),
        target_version=raw["ruff"]["target-version"],
        line_length=int(raw["ruff"]["line-length"]),
        languages=tuple(languages),
    )


def lint_language(asked: str | None) -> str:
    """The table's language for an asked one (``de-AT``: ``de``); English when it has none, as
    the explanations choose theirs (``web/src/lint.js``: ``lintLanguage``)."""
    if not isinstance(asked, str) or not asked.strip():
        return DEFAULT_LINT_LANGUAGE
    base = asked.strip().lower().replace("_", "-").split("-")[0]
    return base if base in rule_table().languages else DEFAULT_LINT_LANGUAGE
