"""Exercises on the server tier (real wasmtime runs): loading, judging, messages, limits,
tampering, the CLI, and turtle drawings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wasm_runner import Limits
from wasm_runner.exercises import (ExerciseError, check_code, load_exercise, load_folder, plan,
                                   redact)
from wasm_runner.sandbox import default_sandbox

ROOT = Path(__file__).resolve().parents[2]
EXERCISES = ROOT / "tests" / "exercises"
EXAMPLE = ROOT / "examples" / "exercises" / "add-numbers"
QUICK = Limits(cpu_seconds=1, wall_seconds=4, memory_mb=256)


@pytest.fixture(scope="module")
def mean():
    return load_exercise(EXERCISES / "mean")


def by_name(report):
    return {c["name"]: c for c in report["checks"]}


def test_reference_passes_and_starter_fails(mean):
    good = check_code(mean, mean.solution, limits=QUICK)
    assert good["passed"] and good["passed_count"] == good["total"] == 7, good
    assert good["summary"].startswith("7 of 7 checks passed")
    bad = check_code(mean, mean.starter, limits=QUICK)
    assert not bad["passed"] and bad["passed_count"] == 0 and bad["failed_count"] == 7


def test_wrong_solution_gets_helpful_messages(mean):
    wrong = (
        "def helper(v):\n"
        "    return v[0] / 0 if v == [5] else sum(v) // len(v)\n"
        "def mean(values):\n"
        "    return helper(values)\n"
        "if __name__ == '__main__':\n"
        "    print(mean([float(x) for x in input().split()]))\n"
    )
    checks = by_name(check_code(mean, wrong, limits=QUICK))
    io = checks["three numbers"]
    assert not io["passed"]
    assert "Expected output:\n    2.3333333" in io["message"] and "Your output:\n    2.0" in io["message"]
    assert "expected '2.3333333', got '2.0' (tolerance 1e-06)" in io["message"]
    assert checks["spaces do not matter"]["passed"]  # 30 // 2 = 15.0: whitespace ignored
    # an assertion: its text, got and expected
    two = checks["test_mean_of_two"]
    assert two["passed"]  # 4 // 2 == 2
    one = checks["test_mean_of_one"]
    assert not one["passed"]
    msg = one["message"]
    # a traceback trimmed to the test's and the student's frames: no harness frame
    assert "ZeroDivisionError: division by zero" in msg
    assert 'File "solution.py", line 2, in helper (your code)' in msg
    assert 'File "solution.py", line 4, in mean (your code)' in msg
    assert 'File "tests.py", line 7, in test_mean_of_one (the test)' in msg
    assert "wasm-runner" not in msg and "check_harness" not in msg and "<" not in msg.split("\n")[1]
    raises = checks["test_empty_list_raises"]
    assert raises["passed"]


def test_assertion_shows_got_and_expected(mean):
    checks = by_name(check_code(mean, "def mean(v):\n    return 3\n", limits=QUICK))
    msg = checks["test_mean_of_two"]["message"]
    assert msg == "assert mean([1, 3]) == 2\n  got:      3\n  expected: 2"
    msg = checks["test_mean_of_one"]["message"]
    assert msg.startswith("assert mean([5]) == 5.0 (the mean of one value is that value)")
    msg = checks["test_empty_list_raises"]["message"]
    assert msg == "assert False (mean([]) should raise ZeroDivisionError)"


def test_infinite_loop_is_stopped_and_reported_on_its_check(mean):
    code = ("def mean(values):\n"
            "    if len(values) == 1:\n"
            "        while True:\n"
            "            pass\n"
            "    return sum(values) / len(values)\n"
            "if __name__ == '__main__':\n"
            "    print(mean([float(x) for x in input().split()]))\n")
    report = check_code(mean, code, limits=QUICK)
    checks = by_name(report)
    stuck = checks["test_mean_of_one"]
    assert not stuck["passed"]
    # the CPU limit (1 s) normally; the wall limit (4 s) first on a loaded machine
    assert (stuck["status"], stuck["limit"]) in (("cpu_limit", "cpu"), ("timeout", "wall"))
    assert "infinite loop" in stuck["message"]
    # the other checks ran in runs of their own and pass
    assert checks["test_mean_of_two"]["passed"] and checks["three numbers"]["passed"]
    assert report["passed_count"] == 6
    # the sandbox still answers
    assert default_sandbox().run("print(6 * 7)").stdout == "42\n"


TAMPERING = {
    "prints PASSED": "print('PASSED'); print('{\"passed\": true}')\ndef mean(v):\n    return 0\n",
    "an object equal to everything": (
        "class Any:\n    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "def mean(v):\n    return Any()\n"),
    "a float subclass equal to everything": (
        "class F(float):\n    def __eq__(self, other):\n        return True\n"
        "def mean(v):\n    return F(0)\n"),
    "overrides builtins the asserts use": (
        "import builtins\nbuiltins.AssertionError = Exception\nbuiltins.len = lambda x: 1\n"
        "builtins.sum = lambda x: 99\nbuiltins.isinstance = lambda *a: True\n"
        "def mean(v):\n    return 0\n"),
    "shadows builtins by name": "def len(x):\n    return 1\ndef sum(x):\n    return 2\ndef mean(v):\n    return 0\n",
    "monkeypatches the harness's modules": (
        "import json, ast, posix, os, gc\njson.loads = lambda s: {'passed': True}\n"
        "json.dumps = lambda *a, **k: '{\"passed\": true}'\nposix.write = lambda fd, d: len(d)\n"
        "os.write = lambda fd, d: len(d)\ngc.disable = lambda: None\n"
        "def mean(v):\n    return 0\n"),
    "reaches for the harness's frames": (
        "import sys\ndef mean(v):\n    f = sys._getframe(1)\n"
        "    while f is not None:\n        f.f_locals.get('record', {})['passed'] = True\n"
        "        f = f.f_back\n    return 0\n"),
    "reaches for frames through a traceback": (
        "def mean(v):\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
        "        f = e.__traceback__.tb_frame.f_back\n        f.f_locals['record']['passed'] = True\n"
        "    return 0\n"),
    "walks the garbage collector": (
        "import gc\ndef mean(v):\n    for o in gc.get_objects():\n"
        "        if isinstance(o, dict) and 'nonce' in o:\n            o['passed'] = True\n"
        "    return 0\n"),
    "adds an audit hook and a tracer": (
        "import sys\nsys.addaudithook(lambda e, a: None)\n"
        "def mean(v):\n    sys.settrace(lambda *a: None)\n    return 0\n"),
    "exits early with sys.exit(0)": "import sys\nsys.exit(0)\ndef mean(v):\n    return sum(v) / len(v)\n",
    "sys.exit(0) inside the function": "import sys\ndef mean(v):\n    sys.exit(0)\n",
    "os._exit(0) at the top": "import os\nos._exit(0)\n",
    "os._exit(0) inside the function": "import os\ndef mean(v):\n    os._exit(0)\n",
    "writes fake result files": (
        "import os\nfor n in range(50):\n"
        "    with open(f'/out/{n:032x}.json', 'w') as f:\n"
        "        f.write('{\"passed\": true, \"nonce\": \"%032x\", \"test\": \"test_mean_of_two\"}' % n)\n"
        "def mean(v):\n    return 0\n"),
    "rewrites the report afterwards": (
        "import atexit, os\n"
        "def flip():\n    for n in os.listdir('/out'):\n"
        "        p = '/out/' + n\n        t = open(p).read().replace('false', 'true')\n"
        "        open(p, 'w').write(t)\n"
        "atexit.register(flip)\n"
        "class Late:\n    def __del__(self):\n        flip()\nkeep = Late()\n"
        "def mean(v):\n    return 0\n"),
    "reads stdin for the nonce": (
        "import sys, os\nleft = sys.stdin.read()\n"
        "try:\n    os.lseek(0, 0, 0)\nexcept OSError:\n    pass\n"
        "print(left, file=sys.stderr)\ndef mean(v):\n    return 0\n"),
    "raises an AssertionError that looks like a pass": "def mean(v):\n    raise AssertionError('passed')\n",
}


@pytest.mark.parametrize("attempt", list(TAMPERING))
def test_tampering_does_not_pass(mean, attempt):
    report = check_code(mean, TAMPERING[attempt], limits=QUICK)
    tests = [c for c in report["checks"] if c["kind"] == "test" and c["name"] != "test_empty_list_raises"]
    assert tests and not any(c["passed"] for c in tests), (attempt, tests)
    assert not report["passed"]


def test_tampering_report_says_why(mean):
    checks = by_name(check_code(mean, TAMPERING["an object equal to everything"], limits=QUICK))
    assert "(type: got Any, expected int)" in checks["test_mean_of_two"]["message"]
    checks = by_name(check_code(mean, TAMPERING["os._exit(0) inside the function"], limits=QUICK))
    assert "did not report back" in checks["test_mean_of_two"]["message"]
    checks = by_name(check_code(mean, TAMPERING["sys.exit(0) inside the function"], limits=QUICK))
    assert checks["test_mean_of_two"]["message"] == "The code called sys.exit() during the test."


def test_ordinary_code_still_works_under_the_guard(mean):
    code = ("from collections import namedtuple\nfrom dataclasses import dataclass\n"
            "from enum import Enum\nimport typing, functools, statistics\n"
            "P = namedtuple('P', 'x y', defaults=[0])\n"
            "@dataclass\nclass D:\n    x: int = 0\n"
            "Color = Enum('Color', 'RED GREEN')\n"
            "class T(typing.NamedTuple):\n    a: int = 1\n"
            "@functools.lru_cache\ndef _m(t):\n    return statistics.fmean(t) if t else 1 / 0\n"
            "def mean(values):\n    return _m(tuple(values))\n")
    checks = by_name(check_code(mean, code, limits=QUICK))
    assert all(checks[n]["passed"] for n in ("test_mean_of_two", "test_mean_of_one",
                                             "test_empty_list_raises", "test_secret_values"))


def test_redact_hides_hidden_checks(mean):
    report = redact(check_code(mean, mean.starter, limits=QUICK))
    text = json.dumps(report)
    for secret in ("zebra-quartz", "secret case", "7 7 7 7", "test_secret_values", "mean([2, 4, 9])"):
        assert secret not in text
    hidden = [c for c in report["checks"] if c["hidden"]]
    assert [c["name"] for c in hidden] == ["hidden check 1", "hidden check 2"]
    assert all(c["message"] == "Hidden check failed." for c in hidden)


def test_plan_sends_no_test_to_the_student_code(mean):
    for spec in plan(mean, "pass"):
        assert spec.code == "pass"  # the student's instance gets the student's code only
        if spec.kind == "test":
            assert spec.stdin == "" and spec.tests is not None


@pytest.mark.parametrize("toml, error", [
    ("", "a title is needed"),
    ("title = 'x'", "no checks"),
    ("title = 'x'\n[[io]]\nstdin = '1'\n", "needs an expected 'stdout'"),
    ("title = 'x'\n[[io]]\nstdout = '1'\ncompare = 'fuzzy'\n", "compare must be one of"),
    ("title = 'x'\nsurprise = 1\n[[io]]\nstdout = '1'\n", "unknown keys"),
    ("title = 'x'\n[limits]\ncpu_seconds = -1\n[[io]]\nstdout = '1'\n", "[limits]"),
    ("title = 'x'\n[[tests]]\nsource = 'def test_a(:\\n pass'\n", "does not compile"),
    ("title = [\n", "exercise.toml"),
])
def test_bad_exercises_are_refused_plainly(tmp_path, toml, error):
    d = tmp_path / "ex"
    d.mkdir()
    (d / "exercise.toml").write_text(toml)
    with pytest.raises(ExerciseError) as info:
        load_exercise(d)
    assert error in str(info.value) and "ex" in str(info.value)


def test_folder_of_exercises_loads_by_id():
    found = load_folder(EXERCISES)
    assert {"mean", "greet", "turtle-square"} <= set(found)
    assert found["greet"].public() == {
        "id": "greet", "title": "Greet", "instructions": "Read a name and print `Hello, NAME!`",
        "starter": "name = input()\nprint(name)\n", "checks": 2, "limits": {},
        "browser": False, "hints": [], "style": False}
    assert found["tidy"].style is True


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wasm_runner.cli", "exercise", *args],
                          capture_output=True, text=True, timeout=600)


def test_cli_check_validates_an_exercise(tmp_path):
    ok = _cli("check", str(EXAMPLE))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK: add-numbers: the reference passes all 7 checks" in ok.stdout
    assert "✗ io two small numbers" in ok.stdout
    # a starter that already passes is a broken exercise
    broken = tmp_path / "broken.toml"
    broken.write_text("title = 'b'\nstarter = \"print('hi')\"\nsolution = \"print('hi')\"\n"
                      "[[io]]\nstdout = 'hi'\n")
    bad = _cli("check", str(broken))
    assert bad.returncode == 1 and "the starter code passes every check" in bad.stdout
    missing = _cli("check", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not an exercise folder" in missing.stderr


def test_cli_run_redacts_and_export_bundles(tmp_path):
    student = tmp_path / "mine.py"
    student.write_text("def mean(v):\n    return 0\n")
    out = _cli("run", str(EXERCISES / "mean"), str(student), "--json")
    assert out.returncode == 1
    report = json.loads(out.stdout)
    assert "zebra-quartz" not in out.stdout and report["total"] == 7
    bundle = json.loads(_cli("export", str(EXERCISES / "mean")).stdout)
    assert [t["tests"] for t in bundle["tests"]] == [
        ["test_mean_of_two", "test_mean_of_one", "test_empty_list_raises"], ["test_secret_values"]]
    assert "solution" not in bundle


def test_turtle_svg_on_the_server_matches_the_module_run_locally():
    program = (EXERCISES / "turtle_program.py").read_text()
    res = default_sandbox().run(program)
    assert res.ok, res.stderr
    svgs = [o for o in res.outputs if o.mime == "image/svg+xml"]
    assert len(svgs) == 1 and svgs[0].kind == "image"
    # the same module on the host's CPython draws the same bytes
    local = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); exec(open(sys.argv[2]).read()); "
         "import turtle; sys.stdout.write(turtle._wr_take_svg())",
         str(ROOT / "wasm_runner" / "guest" / "lib"), str(EXERCISES / "turtle_program.py")],
        capture_output=True, text=True, check=True)
    assert svgs[0].data == local.stdout
    svg = svgs[0].data
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and svg.endswith("</svg>")
    assert "&lt;b&gt;" in svg and "<b>" not in svg  # text is escaped
    assert 'fill="yellow"' in svg and "<polyline" in svg and "<circle" in svg


def test_turtle_rejects_markup_in_colors_and_needs_no_window():
    res = default_sandbox().run(
        "import turtle\nt = turtle.Turtle()\n"
        "try:\n    t.color('red\" onload=\"x')\nexcept turtle.TurtleGraphicsError as e:\n    print('refused')\n"
        "turtle.Screen().bgcolor(0.5, 0.5, 1)\nturtle.mainloop()\nturtle.exitonclick()\nprint(turtle.pos())\n")
    assert res.ok and res.stdout == "refused\n(0.00,0.00)\n", res.stderr
    assert res.outputs[0].mime == "image/svg+xml" and 'fill="#8080ff"' in res.outputs[0].data
    plain = default_sandbox().run("print('no turtle')")
    assert plain.outputs == []


def test_browser_copy_of_the_python_is_current():
    from wasm_runner.exercises import webgen

    assert webgen.main(["--check"]) == 0  # web/src/pylib.js, bootstrap.py.js, checking.js, lintrules.js == the package here


def test_a_test_calling_a_function_the_code_lacks_says_so() -> None:
    """Issue 36: NameError 'add' in a teacher's test tells the student their code does not
    define add(a, b) yet."""
    example = load_exercise(EXAMPLE)
    report = check_code(example, "a = int(input())\nb = int(input())\nprint(a + b)\n", limits=QUICK)
    test_checks = [c for c in report["checks"] if c["kind"] == "test" and not c["hidden"]]
    assert test_checks and all(not c["passed"] for c in test_checks)
    explanation = test_checks[0]["explanation"]
    assert explanation["id"] == "exercise_missing_function"
    assert explanation["title"] == "Your code does not define add yet"
    assert explanation["text"] == "The teacher's test calls add(a, b), but your code has no function named add."
    io_checks = [c for c in report["checks"] if c["kind"] == "io"]
    assert io_checks[0]["passed"] and "explanation" not in io_checks[0]
