"""Checking in the browser tier, as practice: the server's judging (``judging.py``), run by
Pyodide in the page's worker. The page holds no checking logic of its own.

A practice check is a few runs in the page's Pyodide: this module's program plans the runs, the
page runs each (the student's program with an I/O case's stdin, or the test harness of
``wasm_runner/guest/check_harness.py`` with one teacher test), and this module's program judges
each run's result with ``judging.check_result`` and adds the summary. Every check, hidden ones
too, is on the student's machine, and the student's runs share the worker with the judging, so
a student who wants to can make the page say anything: practice feedback only; the check that
counts runs on the server.

Standard library and ``judging`` only: ``webgen`` ships this file and ``judging.py`` into the
browser bundle (``web/src/checking.js``), where the program below runs them as the package
``_wr_exercises``. Protocol: one JSON request on stdin, one JSON answer on stdout::

    {"op": "plan", "bundle": {...}, "code": "..."}   -> {"runs": [run, ...], "limits": {...},
                                                          "report": (the report of no checks)}
    {"op": "judge", "exercise": id, "run": run, "result": {...}, "checks": [...]}
                                                      -> {"check": {...}, "report": {...}}

A ``run`` says what the page runs: ``program`` "student" (the code, ``stdin``, ``filename``) or
"harness" (the harness program followed by ``suffix``, with ``stdin``, the harness's payload).
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections.abc import Mapping
from typing import Any

from .judging import check_result, missing_function, summarize

__all__ = ["plan", "find_record", "judge", "answer", "main", "CHECK_MIME", "STUDENT_FILE"]

CHECK_MIME = "application/vnd.wasm-runner.check+json"
STUDENT_FILE = "solution.py"
HARNESS_FILE = "<wasm-runner check>"
BROWSER_LIMITS = ("wall_seconds", "stdout_bytes")  # what the browser enforces of an exercise's

_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w., ]+))", re.MULTILINE)
_NAME = re.compile(r"[A-Za-z_][\w.]*")


def import_hint(code: str) -> str:
    """Imports of the student's code, never executed, so the worker loads those packages before
    a harness run too (it looks for imports in the code it runs)."""
    names: list[str] = []
    for m in _IMPORT.finditer(code):
        for part in (m.group(1) or m.group(2)).split(","):
            words = part.split()
            if words and _NAME.fullmatch(words[0]) and words[0] not in names:
                names.append(words[0])
    return "".join(["\nif False:\n", *(f"    import {n}\n" for n in names)]) if names else ""


def plan(bundle: Mapping[str, Any], code: str) -> list[dict[str, Any]]:
    """The runs that check ``code`` against an exercise ``bundle`` (``Exercise.bundle()``): one
    per I/O case, one per test function (or test file without any), in the server's order."""
    runs: list[dict[str, Any]] = []
    for case in bundle.get("io") or []:
        runs.append({"kind": "io", "name": case["name"], "hidden": bool(case.get("hidden")),
                     "program": "student", "stdin": case.get("stdin") or "",
                     "filename": STUDENT_FILE, "case": dict(case),
                     "weight": case.get("weight", 1.0), "fail_message": case.get("fail_message")})
    suffix = import_hint(code)
    for tf in bundle.get("tests") or []:
        for test in tf.get("tests") or [None]:
            nonce = secrets.token_hex(16)
            payload = {"nonce": nonce, "channel": "output", "student": code,
                       "student_file": STUDENT_FILE, "tests": tf["source"],
                       "tests_file": tf.get("filename") or "tests.py", "test": test}
            runs.append({"kind": "test", "name": test or tf["name"], "hidden": bool(tf.get("hidden")),
                         "program": "harness", "suffix": suffix, "stdin": json.dumps(payload),
                         "filename": HARNESS_FILE, "nonce": nonce, "test": test,
                         "weight": tf.get("weight", 1.0), "fail_message": tf.get("fail_message")})
    return runs


def find_record(run: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The harness's report of a test run: the one output of type CHECK_MIME holding the run's
    nonce and test name (none, or two, is no report)."""
    records = []
    for output in result.get("outputs") or []:
        if not isinstance(output, Mapping) or output.get("mime") != CHECK_MIME:
            continue
        try:
            record = json.loads(output.get("data") or "")
        except ValueError:
            continue
        if (isinstance(record, dict) and record.get("nonce") == run.get("nonce")
                and record.get("test") == run.get("test")):
            records.append(record)
    return records[0] if len(records) == 1 else None


def judge(run: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """One check's result from its run's result, as the server judges it. A failed test that
    called a function the code lacks gets the server's explanation, ``{id, params, span}``
    (``judging.missing_function``; the page renders it in its language: web/src/explain.js)."""
    record = find_record(run, result) if run["kind"] == "test" else None
    check = check_result(run["kind"], run["name"], bool(run["hidden"]), result,
                         case=run.get("case"), record=record, weight=float(run.get("weight", 1.0)),
                         fail_message=run.get("fail_message"))
    if record is not None and not check["passed"] and "missing_name" in record:
        functions = record.get("functions")
        functions = [f for f in functions if isinstance(f, str)] if isinstance(functions, list) else []
        explanation = missing_function(record["missing_name"], str(json.loads(run["stdin"])["tests"]), functions)
        if explanation is not None:
            check["explanation"] = explanation
    return check


def answer(request: Mapping[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "plan":
        bundle = request["bundle"]
        limits = {k: v for k, v in (bundle.get("limits") or {}).items() if k in BROWSER_LIMITS}
        return {"runs": plan(bundle, request["code"]), "limits": limits,
                "report": summarize(str(bundle.get("id") or ""), [])}
    if op == "judge":
        check = judge(request["run"], request["result"])
        checks = [*request.get("checks", []), check]
        return {"check": check, "report": summarize(str(request.get("exercise") or ""), checks)}
    raise ValueError(f"unknown request {op!r}")


def main() -> None:
    request = json.loads(sys.stdin.read())
    sys.stdout.write(json.dumps(answer(request), ensure_ascii=True))


if __name__ == "__main__":
    main()
