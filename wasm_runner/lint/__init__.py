"""Lint for beginners: Ruff with a small rule set, in plain words, the same on both tiers.

The rule list and the wording live in one table, ``rules.json`` (``rules.py`` reads it), that the
browser's editor uses too (``web/src/lintrules.js`` is generated from it by
``python -m wasm_runner.exercises.webgen``; ``web/src/lint.js`` applies it to the findings of
Ruff's WebAssembly build). The server runs the ``ruff`` command (``ruff_cli.py``): ``POST
/api/lint``, ``wasm-runner lint FILE`` (``cli.py``) and exercises' style notes. Two rules Ruff
lacks are ours (``own_rules.py``; ``web/src/lint-own.js`` in the browser): code that never runs
and a value thrown away. docs/lint.md, docs/http-api.md, docs/cli.md.
"""

from __future__ import annotations

from .rules import Finding, RuleTable, lint_language, rule_table
from .ruff_cli import MAX_LINT_BYTES, LintFailed, lint_source

__all__ = ["MAX_LINT_BYTES", "Finding", "LintFailed", "RuleTable", "lint_language", "lint_source", "rule_table"]
