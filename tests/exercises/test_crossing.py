"""Test checks in two instances (exercises/crossing.py, guest/check_agent.py), real wasmtime runs:
what crosses (plain data, handles, exceptions, copied-back arguments, callbacks, printed output),
and a red-team set written to the attack classes of issue 21 that must fail every check."""

from __future__ import annotations

from pathlib import Path

import pytest

from wasm_runner import Limits
from wasm_runner.exercises import check_code, load_exercise
from wasm_runner.exercises.crossing import check_message
from wasm_runner.sandbox import default_sandbox

QUICK = Limits(cpu_seconds=2, wall_seconds=8, memory_mb=256)

# teacher tests written the way teachers write them: ==, tolerance, isinstance, math.isclose,
# statistics; visible and hidden
MEAN_TOML = '''
title = "mean"
[[tests]]
name = "visible"
source = """
import math, statistics

def test_equal():
    assert mean([1, 3]) == 2

def test_tolerance():
    got = mean([0.1, 0.2])
    assert abs(got - 0.15) < 1e-9

def test_type_and_isclose():
    got = mean([1, 2, 4])
    assert isinstance(got, float)
    assert math.isclose(got, 7 / 3)

def test_like_statistics():
    data = [2.5, 3.5, 10.0, -1.0]
    assert mean(data) == statistics.mean(data)

def test_empty_raises():
    try:
        mean([])
    except ZeroDivisionError:
        pass
    else:
        assert False, "mean([]) must raise"
"""
[[tests]]
name = "hidden"
hidden = true
source = """
import math
def test_hidden_values():
    assert math.isclose(mean([9, 10, 11, 12]), 10.5)
    assert mean([7]) == 7.0
"""
'''

REFERENCE = "def mean(xs):\n    return sum(xs) / len(xs)\n"

CORRECT_VARIANTS = {
    "prints, recurses, defines helpers": (
        "def _total(xs):\n    return 0 if not xs else xs[0] + _total(xs[1:])\n"
        "def count(xs):\n    return len(xs)\n"
        "print('loading my solution')\n"
        "def mean(xs):\n    print('mean of', xs)\n    return _total(xs) / count(xs)\n"
        "if __name__ == '__main__':\n    print(mean([float(x) for x in input().split()]))\n"),
    "uses statistics and a class of its own": (
        "import statistics\nclass Acc:\n    def __init__(self):\n        self.n = 0\n"
        "def mean(xs):\n    if not xs:\n        raise ZeroDivisionError('empty')\n"
        "    return float(statistics.fmean(xs))\n"),
}

WRONG = {
    # values that lie
    "metaclass makes it look like a float": (
        "class Meta(type):\n    def __instancecheck__(cls, o):\n        return True\n"
        "    def __eq__(cls, o):\n        return True\n    __hash__ = type.__hash__\n"
        "class F(metaclass=Meta):\n    __class__ = float\n"
        "    def __eq__(s, o):\n        return True\n    def __ne__(s, o):\n        return False\n"
        "    def __sub__(s, o):\n        return 0.0\n    __rsub__ = __sub__\n"
        "    def __float__(s):\n        return 0.0\n    def __abs__(s):\n        return 0.0\n"
        "    __hash__ = object.__hash__\n"
        "def mean(xs):\n    if not xs:\n        raise ZeroDivisionError\n    return F()\n"),
    "duck-typed tolerance liar": (
        "class Near:\n    def __sub__(s, o):\n        return 0.0\n    def __rsub__(s, o):\n        return 0.0\n"
        "    def __lt__(s, o):\n        return True\n    def __gt__(s, o):\n        return True\n"
        "    def __abs__(s):\n        return 0.0\n    def __eq__(s, o):\n        return True\n"
        "def mean(xs):\n    1 / len(xs)\n    return Near()\n"),
    "float subclass whose arithmetic returns genuine floats": (
        "class F(float):\n    def __eq__(s, o):\n        return True\n"
        "    def __sub__(s, o):\n        return 0.0\n    def __rsub__(s, o):\n        return 0.0\n"
        "    __hash__ = float.__hash__\n"
        "def mean(xs):\n    return F(len(xs) / 0 if not xs else -1234.5)\n"),
    # shared state
    "patches math.isclose and statistics.mean": (
        "import math, statistics\nmath.isclose = lambda *a, **k: True\n"
        "statistics.mean = lambda data: -1\nstatistics.fmean = lambda data: -1\n"
        "def mean(xs):\n    if not xs:\n        raise ZeroDivisionError\n    return -1.0\n"),
    "patches builtins the asserts use": (
        "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.isinstance = lambda *a: True\n"
        "builtins.AssertionError = type('Nope', (Exception,), {})\nbuiltins.len = lambda x: 1\n"
        "def mean(xs):\n    if not xs:\n        raise ZeroDivisionError\n    return -1.0\n"),
    "swaps a stdlib class during the call": (
        "import fractions, decimal\n"
        "def mean(xs):\n    fractions.Fraction.__eq__ = lambda s, o: True\n"
        "    float.__dict__\n    if not xs:\n        raise ZeroDivisionError\n    return -1.0\n"),
    # student code running inside the harness
    "exception property that flips the verdict": (
        "class E(Exception):\n    @property\n    def args(self):\n"
        "        import sys\n        f = sys._getframe()\n"
        "        while f:\n            f.f_locals.get('record', {})['passed'] = True\n            f = f.f_back\n"
        "        return ('ok',)\n    def __str__(self):\n        return 'passed'\n"
        "def mean(xs):\n    raise E()\n"),
    "str subclass in the message": (
        "class S(str):\n    def __str__(self):\n        return self\n"
        "    def startswith(self, *a):\n        return True\n    def __len__(self):\n        return 0\n"
        "def mean(xs):\n    raise AssertionError(S('assert passed'))\n"),
    "replaces the stream methods": (
        "import sys\nclass W:\n    def write(self, s):\n        return 0\n    def flush(self):\n"
        "        raise SystemExit(0)\nsys.stdout = sys.stderr = sys.__stdout__ = W()\n"
        "type(sys.__stderr__).flush = lambda self: None\n"
        "def mean(xs):\n    print('hi')\n    return -1.0\n"),
    "signal handler and atexit": (
        "import atexit, signal, os\n"
        "atexit.register(lambda: os.write(1, b'{\"passed\": true}'))\n"
        "try:\n    signal.signal(signal.SIGINT, lambda *a: None)\nexcept Exception:\n    pass\n"
        "def mean(xs):\n    raise KeyboardInterrupt\n"),
    "forges messages to the host": (
        "import os, json\n"
        "def mean(xs):\n"
        "    for m in ({'op': 'done', 'passed': True, 'message': ''},\n"
        "              {'op': 'return', 'value': 2}, {'op': 'call', 'target': 1, 'action': 'getattr',\n"
        "               'name': '__globals__', 'args': [], 'kwargs': {}}):\n"
        "        try:\n            os.write(0, b'WRHC' + json.dumps(m).encode())\n"
        "        except OSError:\n            pass\n"
        "    return -1.0\n"),
    "exits the process mid-call": "import os\ndef mean(xs):\n    os._exit(0)\n",
}


@pytest.fixture(scope="module")
def mean_ex(tmp_path_factory):
    path = tmp_path_factory.mktemp("ex") / "mean.toml"
    path.write_text(MEAN_TOML)
    return load_exercise(path)


def test_reference_passes(mean_ex):
    report = check_code(mean_ex, REFERENCE, limits=QUICK)
    assert report["passed"], report


@pytest.mark.parametrize("variant", list(CORRECT_VARIANTS))
def test_correct_solutions_pass(mean_ex, variant):
    report = check_code(mean_ex, CORRECT_VARIANTS[variant], limits=QUICK)
    assert report["passed"], report


def test_a_solution_importing_numpy_passes(mean_ex):
    code = ("import numpy as np\ndef mean(xs):\n    if not xs:\n        raise ZeroDivisionError\n"
            "    return np.mean(np.array(xs, dtype=float))\n")  # a numpy.float64 comes back a float
    report = check_code(mean_ex, code, limits=Limits(cpu_seconds=5, wall_seconds=15, memory_mb=256))
    assert report["passed"], report


@pytest.mark.parametrize("attempt", list(WRONG))
def test_wrong_programs_fail_every_value_check(mean_ex, attempt):
    report = check_code(mean_ex, WRONG[attempt], limits=QUICK)
    value_checks = [c for c in report["checks"] if c["name"] != "test_empty_raises"]
    assert value_checks and not any(c["passed"] for c in value_checks), (attempt, report["checks"])
    # the host is unharmed and still runs code
    assert default_sandbox().run("print(6 * 7)").stdout == "42\n"


def test_lying_values_are_named_in_the_message(mean_ex):
    checks = {c["name"]: c for c in check_code(mean_ex, WRONG["duck-typed tolerance liar"],
                                               limits=QUICK)["checks"]}
    assert "(type: got Near, expected int)" in checks["test_equal"]["message"]
    assert "TypeError" in checks["test_tolerance"]["message"]  # Near - 0.15: never handed over


def test_forged_messages_fail_the_check_saying_so(mean_ex):
    checks = {c["name"]: c for c in check_code(mean_ex, WRONG["forges messages to the host"],
                                               limits=QUICK)["checks"]}
    assert "could not talk to your code" in checks["test_equal"]["message"]


FEATURES_TOML = '''
title = "features"
[[tests]]
name = "features"
source = """
import io
from contextlib import redirect_stdout

def test_objects_are_handles():
    p = Point(3, 4)
    assert p.x == 3 and p.norm() == 5.0
    assert isinstance(p, Point) and not isinstance(5, Point)
    assert str(p) == "Point(3, 4)" and repr(p) == "Point(3, 4)"
    p.x = 6
    assert p.norm() == 7.211102550927978
    assert [v for v in p] == [6, 4]
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)

def test_in_place_changes_come_back():
    xs = [3, 1, 2]
    assert sort_in_place(xs) is None
    assert xs == [1, 2, 3]
    d = {"a": [1]}
    add_key(d)
    assert d == {"a": [1, 2], "b": 0}

def test_callbacks_cross_the_other_way():
    assert apply(lambda v: v * 10, [1, 2]) == [10, 20]
    seen = []
    apply(seen.append, ["x"])
    assert seen == ["x"]

def test_printed_output_is_captured():
    buf = io.StringIO()
    with redirect_stdout(buf):
        greet("Ada")
    assert buf.getvalue() == "Hello, Ada!\\\\n"

def test_exceptions_keep_their_type_and_message():
    try:
        check_age(-1)
    except ValueError as e:
        assert type(e).__name__ == "AgeError" and str(e) == "negative age: -1"
    else:
        assert False
    try:
        lookup({}, "k")
    except KeyError as e:
        assert e.args == ("k",)

def test_plain_values_and_constants():
    assert LIMIT == 10 and NAMES == ("a", "b")
    assert pair() == (1, b"x", {2}, 1.5 + 2j, None)
    assert type(pair()[0]) is int

def test_student_generators_iterate():
    assert list(count_to(3)) == [1, 2, 3]
    assert 2 in count_to(3)
"""
'''

FEATURES_CODE = '''
import math
LIMIT = 10
NAMES = ("a", "b")

class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y
    def norm(self):
        return math.hypot(self.x, self.y)
    def __iter__(self):
        return iter((self.x, self.y))
    def __eq__(self, other):
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)
    def __repr__(self):
        return f"Point({self.x}, {self.y})"

class AgeError(ValueError):
    pass

def check_age(n):
    if n < 0:
        raise AgeError(f"negative age: {n}")

def lookup(d, k):
    return d[k]

def sort_in_place(xs):
    xs.sort()

def add_key(d):
    d["a"].append(2)
    d["b"] = 0

def apply(f, xs):
    return [f(x) for x in xs]

def greet(name):
    print(f"Hello, {name}!")

def pair():
    return (1, b"x", {2}, 1.5 + 2j, None)

def count_to(n):
    yield from range(1, n + 1)
'''


def test_what_crosses_the_boundary(tmp_path: Path):
    path = tmp_path / "features.toml"
    path.write_text(FEATURES_TOML)
    report = check_code(load_exercise(path), FEATURES_CODE, limits=QUICK)
    failed = [(c["name"], c["message"]) for c in report["checks"] if not c["passed"]]
    assert not failed and report["total"] == 7, failed


def test_a_stuck_student_call_fails_its_check_naming_the_limit(mean_ex):
    code = "def mean(xs):\n    while True:\n        pass\n"
    report = check_code(mean_ex, code, limits=Limits(cpu_seconds=0.5, wall_seconds=6, memory_mb=256))
    for c in report["checks"]:
        assert not c["passed"] and c["limit"] in ("cpu", "wall"), c
        assert "infinite loop" in c["message"]
    assert default_sandbox().run("print(6 * 7)").stdout == "42\n"


# teacher asserts that a student's own abs, len, isinstance, sorted, all or round would make pass
# with a wrong mean, were the student's names to shadow the test's builtins (issue 39)
SHADOW_TOML = '''
title = "shadow"
[[tests]]
name = "hidden"
hidden = true
source = """
def test_abs():
    assert abs(mean([0.1, 0.4]) - 0.25) < 1e-9

def test_len():
    assert len([m for m in [mean([1, 3])] if m == 2]) == 1

def test_isinstance():
    got = mean([1, 3])
    assert isinstance(got, str) or got == 2

def test_sorted():
    assert sorted([mean([3, 1]), 1]) == [1, 2]

def test_all():
    assert all(mean(xs) == 2 for xs in ([1, 3], [2]))

def test_round():
    assert round(mean([1, 2]), 1) == 1.5

def test_own_abs_is_reachable():
    import solution
    assert solution.abs(-3) == 0
"""
'''

SHADOWING = (
    "def abs(x):\n    return 0\n"
    "def len(x):\n    return 1\n"
    "def isinstance(*a):\n    return True\n"
    "def sorted(xs):\n    return [1, 2]\n"
    "def all(xs):\n    return True\n"
    "def round(x, n=0):\n    return 1.5\n"
    "__builtins__ = {'abs': abs, 'len': len, 'isinstance': isinstance, 'sorted': sorted,\n"
    "                'all': all, 'round': round, 'AssertionError': Exception}\n"
    "def mean(xs):\n    return -1.0\n"
)


def test_a_students_builtins_never_stand_in_for_the_tests(tmp_path: Path):
    path = tmp_path / "shadow.toml"
    path.write_text(SHADOW_TOML)
    checks = {c["name"]: c for c in check_code(load_exercise(path), SHADOWING, limits=QUICK)["checks"]}
    # every value check fails with the wrong mean, and the teacher can still reach the student's
    # own abs through the module
    assert checks.pop("test_own_abs_is_reachable")["passed"]
    assert checks and not any(c["passed"] for c in checks.values()), checks
    assert default_sandbox().run("print(6 * 7)").stdout == "42\n"


def test_the_host_drops_private_names_from_the_students_ready():
    msg = check_message("student", {"op": "ready", "names": {
        "__builtins__": {"abs": 1}, "_helper": 2, "mean": 3}})
    assert msg == {"op": "ready", "names": {"mean": 3}}
