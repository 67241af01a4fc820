"""Hostile programs against host functions, in real wasmtime instances: forged names and values
written straight to the host-call channel, huge and deep arguments, cycles, re-entrancy, calls
during shutdown, hostile exceptions on the host side. Each is refused cleanly (the guest gets an
exception or the run ends naming a limit), the app's functions are never called with anything
the rules refuse, and the next run works."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from wasm_runner import Limits, Sandbox, Status
from wasm_runner.host_functions import CallRecord, HostFunctions

WALL = Limits(wall_seconds=60.0)

# a raw host call, bypassing the guest's ``host`` module: what a program can write on fd 0
RAW = (
    "import os, json\n"
    "def raw(data):\n"
    "    os.write(0, b'WRHC' + data)\n"
    "    n = int.from_bytes(os.read(0, 4), 'little')\n"
    "    got = b''\n"
    "    while len(got) < n:\n"
    "        got += os.read(0, n - len(got))\n"
    "    return json.loads(got)\n"
)


class Counter:
    """A host function that counts its calls (what reached the app)."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        self.calls.append((args, kwargs))
        return "ok"


def still_works(sb: Sandbox) -> None:
    r = sb.run("from host import double\nprint(double(21))", functions={"double": lambda x: 2 * x})
    assert r.status is Status.OK and r.stdout == "42\n", r.stderr


def run_forged(sb: Sandbox, requests: list[bytes]) -> tuple[list[Any], Counter, list[CallRecord]]:
    """Write each request raw; the answers the program read, the function, the records."""
    f, records = Counter(), []
    code = RAW + "\n".join(f"print(json.dumps(raw({r!r})))" for r in requests)
    res = sb.run(code, functions=HostFunctions({"f": f}, on_call=records.append), limits=WALL)
    assert res.status is Status.OK, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()], f, records


def test_forged_names_reach_no_function(default_sandbox: Sandbox) -> None:
    requests = [json.dumps({"op": "host", "name": name, "args": [], "kwargs": {}}).encode()
                for name in ("__import__", "os.system", "F", "f ", "x" * 100_000, 123, None, ["f"])]
    answers, f, records = run_forged(default_sandbox, requests)
    assert f.calls == []
    for answer in answers:
        assert answer["error"]["type"] == "NameError"
        assert answer["error"]["message"].endswith("it may call: f")
    assert {(r.name, r.outcome) for r in records} == {("<unknown>", "refused")}
    still_works(default_sandbox)


@pytest.mark.parametrize("request_", [
    b"not json", b"[" * 200_000 + b"]" * 200_000, b'"a string"', b'{"op": "call", "name": "f"}',
    json.dumps({"op": "host", "name": "f", "args": [{"$handle": 1}], "kwargs": {}}).encode(),
    json.dumps({"op": "host", "name": "f", "args": [{"$remote": 1}], "kwargs": {}}).encode(),
    json.dumps({"op": "host", "name": "f", "args": [{"$set": [[1]]}], "kwargs": {}}).encode(),
    json.dumps({"op": "host", "name": "f", "args": [{"$int": "zz"}], "kwargs": {}}).encode(),
    json.dumps({"op": "host", "name": "f", "args": "xy", "kwargs": {}}).encode(),
    json.dumps({"op": "host", "name": "f", "args": [], "kwargs": {"$dict": [[1, 2]]}}).encode(),
    json.dumps({"op": "host", "name": "f", "args": [eval("[" * 120 + "]" * 120)], "kwargs": {}}).encode(),
], ids=["not-json", "json-bomb", "not-an-object", "wrong-op", "handle", "remote", "unhashable",
        "bad-int", "args-not-a-list", "non-text-keyword", "too-deep"])
def test_forged_values_are_refused_with_an_error(default_sandbox: Sandbox, request_: bytes) -> None:
    answers, f, records = run_forged(default_sandbox, [request_])
    assert f.calls == []
    assert answers[0]["error"]["type"] in ("ValueError", "TypeError")
    assert [r.outcome for r in records] == ["refused"]
    still_works(default_sandbox)


def test_a_huge_raw_request_ends_the_run_naming_the_limit(default_sandbox: Sandbox) -> None:
    f = Counter()
    code = RAW + "raw(b'{\"op\": \"host\", \"name\": \"f\", \"args\": [\"' + b'x' * (20 << 20) + b'\"]}')\nprint('after')"
    r = default_sandbox.run(code, functions={"f": f}, limits=Limits(wall_seconds=60, memory_mb=512))
    assert r.status is Status.HOST_BYTES_LIMIT and r.limit == "host_bytes"
    assert f.calls == [] and "after" not in r.stdout
    still_works(default_sandbox)


def test_a_value_bomb_within_host_call_bytes_is_refused_before_it_is_parsed(default_sandbox: Sandbox) -> None:
    """12 MiB of [{},{},...] (4 million values) under a 16 MiB host_call_bytes: refused by the
    count of values before the parse (issue 39: the host built ~27 bytes of objects a byte)."""
    f = Counter()
    code = RAW + ("print(json.dumps(raw(b'{\"op\": \"host\", \"name\": \"f\", \"args\": [['"
                  " + b'{},' * (4 << 20) + b'{}]]}')))")
    tracemalloc.start()  # the host's own allocations (the guest's memory is not Python's)
    try:
        r = default_sandbox.run(code, functions=HostFunctions({"f": f}),
                                limits=Limits(wall_seconds=60, memory_mb=512, host_call_bytes=16 << 20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.status is Status.OK, (r.status, r.stderr)
    assert peak < 64 << 20, peak  # the request's copies, not 4 million objects
    answer = json.loads(r.stdout)
    assert answer["error"]["type"] == "ValueError" and "more than" in answer["error"]["message"], answer
    assert f.calls == []
    still_works(default_sandbox)


def test_huge_deep_and_cyclic_arguments_are_refused_in_the_guest(default_sandbox: Sandbox) -> None:
    f = Counter()
    code = (
        "from host import f\n"
        "deep = []\n"
        "for _ in range(100_000):\n"
        "    deep = [deep]\n"
        "cycle = {}\n"
        "cycle['me'] = cycle\n"
        "wide = [None] * 2_000_000\n"
        "for value in (deep, cycle, wide):\n"
        "    try:\n"
        "        f(value)\n"
        "    except ValueError as e:\n"
        "        print(e)\n"
        "print(f(1))\n"
    )
    r = default_sandbox.run(code, functions={"f": f}, limits=Limits(wall_seconds=60, host_call_bytes=16 << 20))
    assert r.status is Status.OK, r.stderr
    assert r.stdout.splitlines() == ["nested deeper than 100 levels", "a value that contains itself (a dict in a cycle)",
                                     "more than 1000000 values", "ok"]
    assert f.calls == [((1,), {})]


def test_a_second_call_before_the_first_answer_is_read_is_refused(default_sandbox: Sandbox) -> None:
    f = Counter()
    code = (
        "import os, json\n"
        "call = json.dumps({'op': 'host', 'name': 'f', 'args': [1], 'kwargs': {}}).encode()\n"
        "os.write(0, b'WRHC' + call)\n"
        "try:\n"
        "    os.write(0, b'WRHC' + call)\n"
        "except OSError as e:\n"
        "    print('second refused', e.errno)\n"
        "n = int.from_bytes(os.read(0, 4), 'little')\n"
        "print(json.loads(os.read(0, n)))\n"
    )
    r = default_sandbox.run(code, functions={"f": f}, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout.splitlines() == ["second refused 28", "{'value': 'ok'}"]
    assert f.calls == [((1,), {})]


def test_a_call_from_inside_a_call_is_refused_in_the_guest(default_sandbox: Sandbox) -> None:
    f = Counter()
    code = (
        "import sys\n"
        "from host import f\n"
        "nested = []\n"
        "def tracer(frame, event, arg):\n"  # runs inside the host module's own code during a call
        "    if event == 'call' and frame.f_code.co_filename == '<wasm-runner>':\n"
        "        try:\n"
        "            f('nested')\n"
        "        except RuntimeError as e:\n"
        "            nested.append(str(e))\n"
        "    return None\n"
        "sys.settrace(tracer)\n"
        "results = [f(i) for i in range(3)]\n"
        "sys.settrace(None)\n"
        "print(results, len(nested) > 0, set(nested))\n"
    )
    r = default_sandbox.run(code, functions={"f": f}, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "['ok', 'ok', 'ok'] True {'a host function was called while another host call was in progress'}\n"
    # calls the tracer made between two calls went through, one at a time; none inside a call did
    assert [a for a, _ in f.calls if a != ("nested",)] == [(0,), (1,), (2,)]


def test_runs_nested_through_host_functions_keep_their_limits(default_sandbox: Sandbox) -> None:
    depth: list[int] = []

    def deeper(n: int) -> str:
        depth.append(n)
        code = f"from host import deeper\nprint(deeper({n + 1}))" if n < 3 else "print('bottom')"
        return default_sandbox.run(code, functions={"deeper": deeper}, limits=WALL).stdout.strip()

    r = default_sandbox.run("from host import deeper\nprint(deeper(1))", functions={"deeper": deeper}, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "bottom\n" and depth == [1, 2, 3]


def test_calls_after_the_program_ended_are_refused(default_sandbox: Sandbox) -> None:
    f, records = Counter(), []
    code = (
        "import atexit\n"
        "from host import f\n"
        "atexit.register(lambda: print('atexit', f('atexit')))\n"  # still the program's time
        "class Late:\n"
        "    def __del__(self, f=f):\n"
        "        f('finalizer')\n"  # after the program's report: refused
        "late = Late()\n"
        "print('end')\n"
    )
    r = default_sandbox.run(code, functions=HostFunctions({"f": f}, on_call=records.append), limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "end\natexit ok\n"
    assert f.calls == [(("atexit",), {})]
    assert [(c.name, c.outcome) for c in records] == [("f", "ok"), ("<unknown>", "refused")]
    still_works(default_sandbox)


def test_a_tight_loop_of_calls_stops_at_the_call_limit(default_sandbox: Sandbox) -> None:
    f = Counter()
    r = default_sandbox.run("from host import f\nwhile True:\n    try:\n        f()\n    except Exception:\n        pass",
                            functions={"f": f}, limits=Limits(wall_seconds=60, host_calls=2000))
    assert r.status is Status.HOST_CALLS_LIMIT and r.limit == "host_calls"
    assert len(f.calls) == 2000
    still_works(default_sandbox)


def test_hostile_exceptions_of_the_app_cross_as_short_messages(default_sandbox: Sandbox) -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    def fail(kind: str) -> None:
        if kind == "unprintable":
            raise Unprintable()
        raise ValueError("m" * 10_000_000)

    code = (
        "from host import fail\n"
        "for kind in ('unprintable', 'huge'):\n"
        "    try:\n"
        "        fail(kind)\n"
        "    except Exception as e:\n"
        "        print(type(e).__name__, len(str(e)), str(e)[:30])\n"
    )
    r = default_sandbox.run(code, functions={"fail": fail}, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout.splitlines() == ["Unprintable 25 <unprintable Unprintable>", "ValueError 4000 " + "m" * 30]
