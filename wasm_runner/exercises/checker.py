"""Checking a student's code against an exercise on the server tier, judged on the host.

- An **I/O case** runs the student's program with the case's stdin; the host compares what it
  printed with the expected output. Nothing the program does can make the host see a pass: it
  has to print the right text.
- A **test function** runs in two instances (``crossing.py``): the student's code in one, the
  teacher's test in another that the student's code never touches; the test calls the student's
  functions across the host with plain data only, and its verdict reaches the host from the
  test's instance alone.

``plan`` lists the checks, ``run_check`` runs one, ``judge`` turns a run's result into a check
result; comparing, messages, ``summarize`` and ``redact`` live in ``judging.py``, the one copy
both tiers load. ``check_code`` does it all with a ``Sandbox`` (Python API and CLI); the HTTP
route runs each check through the service's admission and audit. ``harness_program`` and
``find_record`` are the browser tier's single-interpreter harness (``guest/check_harness.py``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib.resources import files as _pkg_files
from typing import Any

from ..explanations import checked, render
from ..limits import Limits
from ..result import Result
from .crossing import run_test_check
from .judging import check_result, compare_output, redact, summarize
from .model import Exercise, IOCase, TestFile

__all__ = ["RunSpec", "plan", "judge", "run_check", "summarize", "redact", "check_code",
           "harness_program", "compare_output", "CHECK_MIME"]

CHECK_MIME = "application/vnd.wasm-runner.check+json"
STUDENT_FILE = "solution.py"

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
    weight: float = 1.0
    fail_message: str | None = None


def plan(ex: Exercise, code: str) -> list[RunSpec]:
    """The checks of ``code``: one run per I/O case, one pair of instances per test function (or
    test file; ``run_check``). The student's code is all a spec holds: tests stay on the host."""
    specs: list[RunSpec] = []
    for case in ex.io:
        specs.append(RunSpec(len(specs), "io", case.name, case.hidden, code, case.stdin,
                             STUDENT_FILE, case=case, weight=case.weight, fail_message=case.fail_message))
    for tf in ex.tests:
        for test in tf.tests or (None,):
            specs.append(RunSpec(len(specs), "test", test or tf.name, tf.hidden, code, "",
                                 STUDENT_FILE, tests=tf, test=test, weight=tf.weight,
                                 fail_message=tf.fail_message))
    return specs


def run_check(sandbox: Any, spec: RunSpec, limits: Limits, *, cancel: threading.Event | None = None,
              pool: str | None = None) -> tuple[Result, dict[str, Any]]:
    """Run one check on ``sandbox``: (the result that decided it, the check's verdict)."""
    if spec.kind == "io":
        result: Result = sandbox.run(spec.code, stdin=spec.stdin, limits=limits, filename=spec.filename,
                                     cancel=cancel, pool=pool)
        return result, judge(spec, result.to_dict())
    assert spec.tests is not None
    result, record = run_test_check(sandbox, spec.code, spec.tests.source, spec.test, limits,
                                    tests_file=spec.tests.filename, student_file=spec.filename,
                                    cancel=cancel, pool=pool)
    verdict = judge(spec, result.to_dict(), record)
    explanation = checked((record or {}).get("explanation"))
    if explanation is not None and not verdict["passed"]:  # a function the tests call is missing
        verdict["explanation"] = render(explanation)
    return result, verdict


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
    return check_result(spec.kind, spec.name, spec.hidden, res, case=spec.case, record=record,
                        weight=spec.weight, fail_message=spec.fail_message)


def check_code(
    ex: Exercise,
    code: str,
    *,
    sandbox: Any = None,
    limits: Limits | None = None,
    on_check: Callable[[dict[str, Any]], None] | None = None,
    parallel: int = 4,
) -> dict[str, Any]:
    """Check ``code`` against ``ex`` on the server tier (a ``Sandbox``; the default one if None).
    Returns the full report (hidden checks included: ``redact`` it before showing a student).
    Up to ``parallel`` checks run at once; ``on_check`` sees each as it ends."""
    if sandbox is None:
        from ..sandbox import default_sandbox

        sandbox = default_sandbox()
    run_limits = ex.run_limits(limits)
    specs = plan(ex, code)
    checks: list[dict[str, Any] | None] = [None] * len(specs)
    lock = threading.Lock()

    def one(spec: RunSpec) -> None:
        check = run_check(sandbox, spec, run_limits)[1]
        with lock:
            checks[spec.index] = check
            if on_check is not None:
                on_check(check)

    workers = max(1, min(parallel, len(specs)))
    if workers == 1:
        for spec in specs:
            one(spec)
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="check") as pool:
            list(pool.map(one, specs))
    return summarize(ex.id, [c for c in checks if c is not None])
