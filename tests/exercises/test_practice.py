"""The browser tier's practice checking (``wasm_runner/exercises/practice.py``) on the host: it
plans the runs in the server's order and judges with the server's ``judging``; the generated
program that ships it to Pyodide runs unchanged in a plain Python (the browser runs it in
Pyodide: tests/web/practice.test.mjs, tests/browser/test_exercises.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from wasm_runner.exercises import judging, load_exercise, practice
from wasm_runner.exercises.webgen import practice_program

ROOT = Path(__file__).resolve().parents[2]
ADD = load_exercise(ROOT / "examples" / "exercises" / "add-numbers")
MEAN = load_exercise(ROOT / "tests" / "exercises" / "mean")


def _ask(request: dict) -> dict:
    """The generated program, as the page runs it: a JSON request on stdin, the answer on stdout."""
    done = subprocess.run([sys.executable, "-c", practice_program()], input=json.dumps(request),
                          capture_output=True, text=True, timeout=60, check=True)
    answer: dict = json.loads(done.stdout)
    return answer


def test_plan_is_the_servers_order_with_a_fresh_nonce_per_test():
    for ex in (ADD, MEAN):
        runs = practice.plan(ex.bundle(), ex.solution)
        assert [(r["kind"], r["name"], r["hidden"]) for r in runs] == ex.check_names()
    runs = practice.plan(MEAN.bundle(), "import math, statistics as st\nfrom numpy import mean\n")
    tests = [r for r in runs if r["kind"] == "test"]
    assert len({r["nonce"] for r in tests}) == len(tests)
    assert all(json.loads(r["stdin"])["nonce"] == r["nonce"] for r in tests)
    assert tests[0]["suffix"] == "\nif False:\n    import math\n    import statistics\n    import numpy\n"


def test_the_generated_program_judges_as_the_server_judges():
    plan = _ask({"op": "plan", "bundle": ADD.bundle(), "code": ADD.starter})
    assert plan["limits"] == {"wall_seconds": 5} and plan["report"]["summary"] == "0 of 0 checks passed."
    io, test = plan["runs"][0], plan["runs"][3]
    result = {"status": "ok", "limit": None, "message": "", "stdout": "None\n", "stderr": "", "outputs": []}
    said = _ask({"op": "judge", "exercise": "add-numbers", "run": io, "result": result, "checks": []})
    assert said["check"] == judging.check_result("io", io["name"], False, result, case=ADD.io[0])
    assert said["report"]["summary"] == "0 of 1 checks passed."
    # a test's report counts only with its run's nonce, once
    record = {"nonce": test["nonce"], "test": test["test"], "passed": True}
    output = {"kind": "check", "mime": practice.CHECK_MIME, "data": json.dumps(record)}
    forged = {**output, "data": json.dumps({**record, "nonce": "guess"})}
    for outputs, passed in (([output], True), ([forged], False), ([output, output], False), ([], False)):
        said = _ask({"op": "judge", "exercise": "add-numbers", "run": test,
                     "result": {**result, "stdout": "", "outputs": outputs}, "checks": [said["check"]]})
        assert said["check"]["passed"] is passed
        assert said["report"]["total"] == 2


def test_missing_function_is_explained_from_the_tests_call_and_the_codes_functions():
    tests = "def test_it():\n    assert total([1, 2], start=3) == 6\n"
    plain = judging.missing_function("total", tests)
    assert plain == {"id": "exercise_missing_function", "span": None,
                     "params": {"name": "total", "signature": "total(a, start)"}}
    assert judging.missing_function("helper", tests) is None  # the tests never call it
    assert judging.missing_function("total", "def broken(:\n") is None
    assert judging.missing_function(["total"], tests) is None
    close = judging.missing_function("total", tests, ["main", "Totl", "helper"])
    assert close is not None and close["params"]["defined"] == "Totl"  # spelt close, any case
    only = judging.missing_function("total", tests, ["sum_up"])
    assert only is not None and only["params"]["defined"] == "sum_up"  # the only function there is
    assert judging.missing_function("total", tests, ["main", "helper"]) == plain  # neither is close
