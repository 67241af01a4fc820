"""``wasm-runner lint FILE``: the beginner lint of the playground and ``POST /api/lint``, in a terminal.

Prints one line per finding, ``FILE:LINE:COLUMN: severity: title: message``; ``--json`` prints the
findings as ``POST /api/lint`` answers them; ``--style`` adds the style notes; ``--lang de`` words
them in German (English when the lint has no wording in the language asked). Exit status 0 when
nothing was found, 1 when something was, 2 when the file could not be read or linted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .rules import Finding
from .ruff_cli import DEFAULT_TIMEOUT, LintFailed, lint_source

__all__ = ["format_finding", "main"]


def format_finding(filename: str, finding: Finding) -> str:
    return (f"{filename}:{finding['line']}:{finding['column']}: {finding['severity']}: "
            f"{finding['title']}: {finding['message']}")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="wasm-runner lint",
                                description="Mark beginner mistakes in a Python file (Ruff, in plain words).")
    p.add_argument("file", help="the Python file ('-' reads it from stdin)")
    p.add_argument("--style", action="store_true", help="add style notes (names, long lines, ';')")
    p.add_argument("--lang", default=None,
                   help="the language of the words (a tag such as de or de-AT; English when the lint has none)")
    p.add_argument("--json", action="store_true", help="print the findings as JSON, like POST /api/lint")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds Ruff may take (default %(default)s)")
    args = p.parse_args(argv)
    name = "<stdin>" if args.file == "-" else args.file
    try:
        if args.file == "-":
            code = sys.stdin.buffer.read().decode("utf-8")
        else:
            with open(args.file, encoding="utf-8") as handle:
                code = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        print(f"wasm-runner lint: cannot read {name}: {exc}", file=sys.stderr)
        return 2
    try:
        findings = lint_source(code, style=args.style, lang=args.lang, timeout=args.timeout)
    except LintFailed as exc:
        print(f"wasm-runner lint: {exc.message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"findings": findings}, indent=2, ensure_ascii=False))
    else:
        for finding in findings:
            print(format_finding(name, finding))
        if not findings:
            print(f"{name}: no mistakes found", file=sys.stderr)
    return 1 if findings else 0
