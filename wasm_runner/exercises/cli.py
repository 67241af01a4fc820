"""``wasm-runner exercise``: for teachers.

    wasm-runner exercise check DIR            the reference solution passes every check and the
                                              starter code fails at least one (exit 0), else 1
    wasm-runner exercise run DIR FILE.py      check a student's file, as the student would see it
                                              (hidden checks redacted; --all shows them)
                                              (--lang de: explanations in German)
    wasm-runner exercise export DIR           the browser bundle (JSON) for <wasm-runner exercise=…>:
                                              every check, hidden ones too (they reach the browser)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..explanations import rendered_result
from .checker import check_code, redact
from .model import ExerciseError, load_exercise

__all__ = ["main"]


LANG_HELP = "the language of a failed check's explanation (en, de; default: from LANG, else English)"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="wasm-runner exercise",
                                description="Validate, try and export exercises (docs/exercises.md).")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="the reference solution passes and the starter code fails")
    c.add_argument("path", help="an exercise folder or .toml file")
    c.add_argument("--json", action="store_true", help="print both reports as JSON")
    c.add_argument("--lang", help=LANG_HELP)
    r = sub.add_parser("run", help="check a student's file against the exercise")
    r.add_argument("path")
    r.add_argument("file", help="the student's .py file ('-' for stdin)")
    r.add_argument("--all", action="store_true", help="show hidden checks in full (teacher view)")
    r.add_argument("--json", action="store_true")
    r.add_argument("--lang", help=LANG_HELP)
    e = sub.add_parser("export", help="print the browser bundle (all checks, hidden ones too)")
    e.add_argument("path")
    return p


def _print_report(title: str, report: dict[str, Any], out: Any) -> None:
    print(f"{title}: {report['summary']}", file=out)
    for c in report["checks"]:
        mark = "✓" if c["passed"] else "✗"
        hidden = " (hidden)" if c["hidden"] else ""
        print(f"  {mark} {c['kind']} {c['name']}{hidden}", file=out)
        if not c["passed"] and c["message"]:
            for line in c["message"].splitlines():
                print(f"      {line}", file=out)
        explanation = c.get("explanation")
        if not c["passed"] and explanation:  # docs/explanations.md, in the asked language
            print(f"      {explanation['title']}\n      {explanation['text']}\n      → {explanation['hint']}", file=out)


def _in_language(report: dict[str, Any], lang: str | None) -> dict[str, Any]:
    """``report`` with each check's explanation rendered in ``lang`` (from its id and params)."""
    for check in report["checks"]:
        rendered_result(check, lang)
    return report


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        ex = load_exercise(args.path)
    except ExerciseError as e:
        print(f"wasm-runner exercise: {e}", file=sys.stderr)
        return 2
    if args.cmd == "export":
        json.dump(ex.bundle(), sys.stdout, indent=1)
        print()
        return 0
    lang = args.lang or os.environ.get("LANG")
    if args.cmd == "run":
        code = sys.stdin.read() if args.file == "-" else open(args.file, encoding="utf-8").read()
        report = _in_language(check_code(ex, code), lang)
        shown = report if args.all else redact(report)
        if args.json:
            print(json.dumps(shown, indent=1))
        else:
            _print_report(ex.title, shown, sys.stdout)
        return 0 if report["passed"] else 1
    # check: the teacher's own sanity test of the exercise
    problems = []
    if ex.solution is None:
        problems.append("no reference solution (solution.py or solution = ...)")
        ref = None
    else:
        ref = _in_language(check_code(ex, ex.solution), lang)
        if not ref["passed"]:
            problems.append(f"the reference solution fails: {ref['summary']}")
    start = _in_language(check_code(ex, ex.starter), lang)
    if start["passed"]:
        problems.append("the starter code passes every check: the exercise asks nothing")
    if args.json:
        print(json.dumps({"exercise": ex.id, "ok": not problems, "problems": problems,
                          "solution": ref, "starter": start}, indent=1))
    else:
        if ref is not None:
            _print_report("reference solution", ref, sys.stdout)
        _print_report("starter code", start, sys.stdout)
        print(("OK: " if not problems else "PROBLEMS: ") + (
            f"{ex.id}: the reference passes all {ref['total'] if ref else 0} checks and the starter fails "
            f"{start['failed_count']}" if not problems else "; ".join(problems)))
    return 0 if not problems else 1
