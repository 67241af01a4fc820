"""Checking a student's code against an exercise: one fresh run per check, judged on the host.

- An **I/O case** runs the student's program with the case's stdin; the host compares what it
  printed with the expected output. Nothing the program does can make the host see a pass: it
  has to print the right text.
- A **test function** runs in the guest harness (``wasm_runner/guest/check_harness.py``): the
  student's code is imported as ``solution``, then one teacher test runs. The outcome comes back
  as a file named after a per-run random nonce (server: ``/out/<nonce>.json``; browser: the
  worker's rich-output channel), never through stdout, and only if the harness reached its end.
  No report, or one without the nonce, is a failure.

``plan`` lists the runs, ``judge`` turns a run's result into a check result, ``summarize`` adds
the totals, and ``redact`` hides hidden checks' details for students. ``check_code`` does it all
with a ``Sandbox`` (Python API and CLI); the HTTP route drives ``plan``/``judge`` through the
service's admission and audit.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.resources import files as _pkg_files
from typing import Any

from ..limits import Limits
from ..result import Result
from .model import Exercise, IOCase, TestFile

__all__ = ["RunSpec", "plan", "judge", "summarize", "redact", "check_code", "harness_program",
           "compare_output", "CHECK_MIME"]

CHECK_MIME = "application/vnd.wasm-runner.check+json"
STUDENT_FILE = "solution.py"
MAX_SHOWN_LINES = 20
MAX_SHOWN_CHARS = 1500

_HARNESS_SOURCE = (_pkg_files("wasm_runner") / "guest" / "check_harness.py").read_text()


def harness_program() -> str:
    """The program a test-function check runs: the harness, executed in globals of its own with
    a copy of the builtins taken before the student's code exists."""
    return (
        "import builtins\n"
        f"exec(compile({_HARNESS_SOURCE!r}, '<wasm-runner check>', 'exec'),\n"
        "     {'__builtins__': dict(vars(builtins)), '__name__': '__wr_check__'})\n"
    )


@dataclass(frozen=True)
class RunSpec:
    """One run of a check: what to run, with what stdin, and how to judge it."""

    index: int
    kind: str  # "io" | "test"
    name: str
    hidden: bool
    code: str
    stdin: str
    filename: str
    nonce: str | None = None
    case: IOCase | None = None
    tests: TestFile | None = None
    test: str | None = None


def plan(ex: Exercise, code: str, channel: str = "file") -> list[RunSpec]:
    """The runs that check ``code``: one per I/O case, one per test function (or test file)."""
    specs: list[RunSpec] = []
    for case in ex.io:
        specs.append(RunSpec(len(specs), "io", case.name, case.hidden, code, case.stdin,
                             STUDENT_FILE, case=case))
    program = harness_program()
    for tf in ex.tests:
        for test in tf.tests or (None,):
            nonce = secrets.token_hex(16)
            payload = {"nonce": nonce, "channel": channel, "student": code,
                       "student_file": STUDENT_FILE, "tests": tf.source,
                       "tests_file": tf.filename, "test": test}
            specs.append(RunSpec(len(specs), "test", test or tf.name, tf.hidden, program,
                                 json.dumps(payload), "<wasm-runner check>", nonce=nonce,
                                 tests=tf, test=test))
    return specs


# -- comparing output -------------------------------------------------------------------------
def _number(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def compare_output(case: IOCase, got: str) -> tuple[bool, str]:
    """(same, first difference) of the program's stdout and the case's, by the case's mode."""
    want = case.stdout
    if case.compare == "exact":
        if got == want:
            return True, ""
        a, b = got.split("\n"), want.split("\n")
    elif case.compare == "lines":  # trailing spaces on each line and trailing blank lines ignored
        a = [line.rstrip() for line in got.rstrip().split("\n")]
        b = [line.rstrip() for line in want.rstrip().split("\n")]
        if a == b:
            return True, ""
    else:
        ta, tb = got.split(), want.split()
        if case.compare == "whitespace":
            if ta == tb:
                return True, ""
        else:  # float: numbers within the tolerance (relative or absolute), other words exactly
            same = len(ta) == len(tb)
            for x, y in zip(ta, tb):
                nx, ny = _number(x), _number(y)
                if nx is not None and ny is not None:
                    ok = math.isclose(nx, ny, rel_tol=case.tolerance, abs_tol=case.tolerance)
                else:
                    ok = x == y
                if not ok:
                    tol = f" (tolerance {case.tolerance:g})" if ny is not None else ""
                    return False, f"expected {y!r}, got {x!r}{tol}"
            if same:
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


def _block(text: str) -> str:
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


_LIMIT_HINT = {
    "cpu": "Is there an infinite loop?",
    "wall": "Is there an infinite loop, or is the program waiting for input it never gets?",
    "memory": "Is a list or string growing without end?",
    "output": "Is something printed in an endless loop?",
}


def _stopped(res: dict[str, Any]) -> str:
    msg = res.get("message") or f"The run ended with status {res.get('status')}."
    hint = _LIMIT_HINT.get(res.get("limit") or "")
    return f"{msg} {hint}" if hint else msg


def _stderr_tail(text: str) -> str:
    text = text.strip("\n")
    return text if len(text) <= MAX_SHOWN_CHARS else "..." + text[-MAX_SHOWN_CHARS:]


def find_record(spec: RunSpec, res: dict[str, Any], files: Iterable[tuple[str, bytes]] = ()) -> dict[str, Any] | None:
    """The harness's report for ``spec``: the file /out/<nonce>.json (server) or an output of
    type CHECK_MIME (browser), holding the same nonce. Anything else is ignored."""
    if spec.nonce is None:
        return None
    found = [data for path, data in files if path == f"/out/{spec.nonce}.json"]
    found += [o.get("data", "").encode() for o in res.get("outputs") or []
              if o.get("mime") == CHECK_MIME]
    records = []
    for data in found:
        try:
            rec = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(rec, dict) and rec.get("nonce") == spec.nonce and rec.get("test") == spec.test:
            records.append(rec)
    return records[0] if len(records) == 1 else None


def judge(spec: RunSpec, res: dict[str, Any], record: dict[str, Any] | None = None) -> dict[str, Any]:
    """One check's result from its run's result (a ``Result.to_dict()``-shaped mapping)."""
    status = res.get("status")
    out: dict[str, Any] = {"name": spec.name, "kind": spec.kind, "hidden": spec.hidden,
                           "passed": False, "message": "", "status": status, "limit": res.get("limit")}
    if spec.kind == "io":
        case = spec.case
        assert case is not None
        stdin_part = f"Input:\n{_block(case.stdin)}\n" if case.stdin else ""
        if status != "ok":
            if res.get("limit"):
                out["message"] = _stopped(res)
            else:
                err = _stderr_tail(res.get("stderr") or "")
                out["message"] = (f"{stdin_part}Your program stopped with an error:\n{_block(err)}"
                                  if err else f"{stdin_part}{_stopped(res)}")
            return out
        same, diff = compare_output(case, res.get("stdout") or "")
        out["passed"] = same
        if same:
            out["message"] = "Output matches."
        else:
            out["message"] = (f"{stdin_part}Expected output:\n{_block(case.stdout)}\n"
                              f"Your output:\n{_block(res.get('stdout') or '')}"
                              + (f"\nFirst difference: {diff}." if diff else ""))
        return out
    if record is not None:
        out["passed"] = record.get("passed") is True
        out["message"] = "Test passed." if out["passed"] else str(record.get("message") or "Test failed.")
        if status != "ok" and res.get("limit"):  # reported, then a limit (cannot pass then)
            out["passed"] = False
        return out
    if res.get("limit"):
        out["message"] = _stopped(res)
    elif status in ("invalid_input", "internal_error", "cancelled"):
        out["message"] = _stopped(res)
    else:
        out["message"] = ("The test did not report back: the program ended before the test "
                          "finished (sys.exit or os._exit in your code?).")
    return out


def summarize(exercise_id: str, checks: list[dict[str, Any]]) -> dict[str, Any]:
    passed = sum(1 for c in checks if c["passed"])
    total = len(checks)
    return {
        "exercise": exercise_id,
        "passed": total > 0 and passed == total,
        "total": total,
        "passed_count": passed,
        "failed_count": total - passed,
        "summary": f"{passed} of {total} checks passed" + (" — well done!" if passed == total and total else "."),
        "checks": checks,
    }


def redact(report: dict[str, Any]) -> dict[str, Any]:
    """The report a student may see: a hidden check keeps only its number, pass/fail and, when a
    limit stopped it, which limit. Its name, input, expected output and messages stay here."""
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
        checks.append({"name": f"hidden check {n}", "kind": c["kind"], "hidden": True,
                       "passed": c["passed"], "message": msg, "status": c.get("status"),
                       "limit": c.get("limit")})
    return {**report, "checks": checks}


def check_code(
    ex: Exercise,
    code: str,
    *,
    sandbox: Any = None,
    limits: Limits | None = None,
    on_check: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Check ``code`` against ``ex`` on the server tier (a ``Sandbox``; the default one if None).
    Returns the full report (hidden checks included: ``redact`` it before showing a student)."""
    if sandbox is None:
        from ..sandbox import default_sandbox

        sandbox = default_sandbox()
    run_limits = ex.run_limits(limits)
    checks = []
    for spec in plan(ex, code):
        result: Result = sandbox.run(spec.code, stdin=spec.stdin, limits=run_limits,
                                     filename=spec.filename, collect_out=spec.kind == "test")
        record = find_record(spec, result.to_dict(), ((f.path, f.content) for f in result.files))
        check = judge(spec, result.to_dict(), record)
        checks.append(check)
        if on_check is not None:
            on_check(check)
    return summarize(ex.id, checks)
