"""Checking a student's code against an exercise: one fresh run per check, judged on the host.

- An **I/O case** runs the student's program with the case's stdin; the host compares what it
  printed with the expected output. Nothing the program does can make the host see a pass: it
  has to print the right text.
- A **test function** runs in the guest harness (``wasm_runner/guest/check_harness.py``): the
  student's code is imported as ``solution``, then one teacher test runs. The outcome comes back
  as a file named after a per-run random nonce (server: ``/out/<nonce>.json``; browser: the
  worker's rich-output channel), never through stdout, and only if the harness reached its end.
  No report, or one without the nonce, is a failure.

``plan`` lists the runs and ``judge`` turns a run's result into a check result; comparing,
messages, ``summarize`` and ``redact`` live in ``judging.py``, the one copy both tiers load. ``check_code`` does it all
with a ``Sandbox`` (Python API and CLI); the HTTP route drives ``plan``/``judge`` through the
service's admission and audit.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.resources import files as _pkg_files
from typing import Any

from ..limits import Limits
from ..result import Result
from .judging import check_result, compare_output, redact, summarize
from .model import Exercise, IOCase, TestFile

__all__ = ["RunSpec", "plan", "judge", "summarize", "redact", "check_code", "harness_program",
           "compare_output", "CHECK_MIME"]

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
    return check_result(spec.kind, spec.name, spec.hidden, res, case=spec.case, record=record)


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
