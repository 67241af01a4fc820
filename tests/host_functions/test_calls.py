"""Host functions (issue 24) on the server tier, in real wasmtime instances: the guest's code
calls the app's functions from ``host``; plain data both ways, the functions' errors as Python
exceptions, coroutines on the app's loop, the three host-call limits, Stop during a call, and
what is recorded of each call."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from wasm_runner import Executor, Job, Limits, Sandbox, Status, run
from wasm_runner.host_functions import CallRecord, CallTally, HostFunctions

WALL = Limits(wall_seconds=60.0)  # generous: these runs end by what they test, not the clock


def _shown(result: Any) -> list[str]:
    """The text of each value a run showed (each a MIME bundle, guest/rich.py)."""
    return [json.loads(o.data)["data"]["text/plain"] for o in result.outputs]


def still_works(sb: Sandbox) -> None:
    r = sb.run("from host import double\nprint(double(21))", functions={"double": lambda x: 2 * x})
    assert r.status is Status.OK and r.stdout == "42\n", r.stderr


class OrderNotFound(LookupError):
    pass


ORDERS = {42: {"id": 42, "total": 19.5, "items": ("pen", "ink")}}


def lookup_order(order_id: int, *, fields: list[str] | None = None) -> dict[str, Any]:
    if order_id not in ORDERS:
        raise OrderNotFound(f"no order {order_id}")
    order = ORDERS[order_id]
    return {k: v for k, v in order.items() if fields is None or k in fields}


def test_every_runtime_calls_a_function(sandbox: Sandbox) -> None:
    r = sandbox.run("from host import lookup_order\nprint(lookup_order(42, fields=['total']))",
                    functions={"lookup_order": lookup_order}, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "{'total': 19.5}\n"


def test_plain_data_crosses_both_ways_as_it_was(default_sandbox: Sandbox) -> None:
    seen: list[Any] = []

    def echo(*args: Any, **kwargs: Any) -> Any:
        seen.append((args, kwargs))
        return [args, kwargs]

    code = (
        "from host import echo\n"
        "value = (None, True, -2**80, 1.5, float('inf'), 2-3j, 'é', b'\\x00\\xff', [1, (2,)],\n"
        "         {1: 'a', ('k',): {2, 3}}, frozenset({4}), {'$x': 1})\n"
        "back = echo(*value, key={'n': [1, 2]})\n"
        "assert back == [value, {'key': {'n': [1, 2]}}], back\n"
        "assert type(back[0][5]) is complex and type(back[0][7]) is bytes and type(back[0][9][('k',)]) is set\n"
        "print('same')\n"
    )
    r = default_sandbox.run(code, functions={"echo": echo}, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "same\n"
    args, kwargs = seen[0]
    assert args[2] == -2**80 and args[5] == 2 - 3j and args[7] == b"\x00\xff"
    assert args[9] == {1: "a", ("k",): {2, 3}} and kwargs == {"key": {"n": [1, 2]}}


def test_the_host_module_lists_the_functions_and_refuses_other_names(default_sandbox: Sandbox) -> None:
    code = (
        "import host\n"
        "print(host.__all__, host.double.__doc__)\n"
        "try:\n"
        "    from host import system\n"
        "except ImportError as e:\n"
        "    print('ImportError')\n"
        "try:\n"
        "    host.system\n"
        "except AttributeError as e:\n"
        "    print(e)\n"
    )
    fns = HostFunctions({"double": lambda x: 2 * x, "half": lambda x: x / 2},
                        descriptions={"double": "Twice x."})
    r = default_sandbox.run(code, functions=fns, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout.splitlines() == [
        "['double', 'half'] Twice x.", "ImportError",
        "the app gave this run no function named 'system'; it may call: double, half"]


def test_an_error_arrives_as_a_python_exception_with_the_message(default_sandbox: Sandbox) -> None:
    code = (
        "from host import lookup_order, HostError\n"
        "try:\n"
        "    lookup_order(7)\n"
        "except LookupError as e:\n"
        "    print(type(e).__name__, isinstance(e, HostError), e)\n"
        "try:\n"
        "    lookup_order('x', nope=1)\n"
        "except TypeError as e:\n"
        "    print('TypeError', isinstance(e, HostError))\n"
        "lookup_order(8)\n"
    )
    r = default_sandbox.run(code, functions={"lookup_order": lookup_order}, filename="main.py", limits=WALL)
    assert r.status is Status.ERROR and r.exit_code == 1
    assert r.stdout.splitlines() == ["OrderNotFound True no order 7", "TypeError True"]
    # the guest's traceback: the user's own frame and line, the function's message, nothing of
    # the host (its file, its frames) nor of the code that carries the call
    assert 'File "main.py", line 10, in <module>' in r.stderr
    assert r.stderr.rstrip().endswith("host.OrderNotFound: no order 8")
    assert __file__ not in r.stderr and "host_functions" not in r.stderr
    assert "<wasm-runner>" not in r.stderr and r.stderr.count('File "') == 1


def test_a_builtin_error_keeps_its_type_and_args(default_sandbox: Sandbox) -> None:
    def fail(kind: str) -> None:
        raise {"key": KeyError("order 5"), "value": ValueError("bad", 3), "exit": SystemExit(3)}[kind]

    code = (
        "from host import fail\n"
        "for kind in ('key', 'value', 'exit'):\n"
        "    try:\n"
        "        fail(kind)\n"
        "    except Exception as e:\n"
        "        print(kind, [c.__name__ for c in type(e).__mro__][:3], e.args, str(e))\n"
        "print('alive')\n"
    )
    r = default_sandbox.run(code, functions={"fail": fail}, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout.splitlines() == [
        "key ['KeyError', 'HostError', 'KeyError'] ('order 5',) 'order 5'",
        "value ['ValueError', 'HostError', 'ValueError'] ('bad', 3) ('bad', 3)",
        "exit ['SystemExit', 'HostError', 'Exception'] ('3',) 3",  # a host's exit ends nothing here
        "alive"]


def test_what_cannot_cross_is_a_type_error_naming_the_type(default_sandbox: Sandbox) -> None:
    code = (
        "from host import echo, give\n"
        "class Point: pass\n"
        "for call in (lambda: echo(Point()), lambda: echo(x=open), lambda: give()):\n"
        "    try:\n"
        "        call()\n"
        "    except TypeError as e:\n"
        "        print(str(e)[:80])\n"
        "a = []\n"
        "a.append(a)\n"
        "deep = []\n"
        "for _ in range(150):\n"
        "    deep = [deep]\n"
        "for bad in (a, deep):\n"
        "    try:\n"
        "        echo(bad)\n"
        "    except ValueError as e:\n"
        "        print(e)\n"
    )
    r = default_sandbox.run(code, functions={"echo": lambda *a, **k: None, "give": lambda: threading.Lock()},
                            limits=WALL)
    assert r.status is Status.OK, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("a value of type __main__.Point cannot cross")
    assert lines[1].startswith("a value of type builtin_function_or_method cannot cross")
    assert lines[2].startswith("the host function give returned what cannot cross: a value of type _thread.lock")
    assert lines[3] == "a value that contains itself (a list in a cycle)"
    assert lines[4] == "nested deeper than 100 levels"


def test_a_coroutine_function_runs_on_a_background_loop_under_run() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def fetch(n: int) -> list[int]:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0.01)
        return list(range(n))

    r = run("from host import fetch\nprint(sum(fetch(5)))", functions={"fetch": fetch})
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "10\n" and len(loops) == 1


def test_an_async_face_runs_coroutines_on_its_own_loop_and_counts_every_call() -> None:
    async def main() -> tuple[Any, asyncio.AbstractEventLoop, list[asyncio.AbstractEventLoop], Job]:
        seen: list[asyncio.AbstractEventLoop] = []

        async def total(order_id: int) -> float:
            seen.append(asyncio.get_running_loop())
            return lookup_order(order_id)["total"]

        job = Job("from host import total, lookup_order\nprint(total(42) * 2)\ntry:\n    lookup_order(1)\n"
                  "except LookupError:\n    pass\n",
                  functions={"total": total, "lookup_order": lookup_order}, limits=WALL)
        result = await Executor().run(job)
        return result, asyncio.get_running_loop(), seen, job

    result, loop, seen, job = asyncio.run(main())
    assert result.status is Status.OK, result.stderr
    assert result.stdout == "39.0\n"
    assert seen == [loop]
    rows = job.host_calls.rows()
    assert [(r["name"], r["outcome"], r["calls"]) for r in rows] == [("lookup_order", "error", 1), ("total", "ok", 1)]
    assert all(r["request_bytes"] > 0 and r["answer_bytes"] > 0 for r in rows)


def test_each_call_is_recorded_without_its_payload(default_sandbox: Sandbox) -> None:
    records: list[CallRecord] = []
    fns = HostFunctions({"lookup_order": lookup_order}, on_call=records.append)
    r = default_sandbox.run("from host import lookup_order\nlookup_order(42)\ntry:\n    lookup_order(9)\n"
                            "except LookupError:\n    pass\n", functions=fns, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert [(c.name, c.outcome) for c in records] == [("lookup_order", "ok"), ("lookup_order", "error")]
    assert all(c.request_bytes > 10 and c.answer_bytes > 10 and c.seconds >= 0 for c in records)
    assert set(vars(records[0])) == {"name", "outcome", "request_bytes", "answer_bytes", "seconds"}
    tally = CallTally()
    for c in records:
        tally.add(c)
    assert len(tally) == 2


def test_time_in_a_host_function_is_not_cpu_time(default_sandbox: Sandbox) -> None:
    def busy() -> int:
        end = time.thread_time() + 0.5
        n = 0
        while time.thread_time() < end:
            n += 1
        return n

    r = default_sandbox.run("from host import busy\nprint(busy() > 0)", functions={"busy": busy},
                            limits=Limits(cpu_seconds=0.2, wall_seconds=60))
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "True\n"


def test_the_last_expression_is_shown_and_line_numbers_are_the_users(default_sandbox: Sandbox) -> None:
    r = default_sandbox.run("from host import double\n\ndouble(4)", functions={"double": lambda x: 2 * x},
                            display=True, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert _shown(r) == ["8"]
    r = default_sandbox.run("import sys\nprint(sys.argv, __name__)\n\n1/0", functions={"double": abs},
                            filename="prog.py", limits=WALL)
    assert r.stdout == "['prog.py'] __main__\n"
    assert 'File "prog.py", line 4, in <module>' in r.stderr and r.stderr.count('File "') == 1
    r = default_sandbox.run("x = (", functions={"double": abs}, filename="prog.py", limits=WALL)
    assert r.status is Status.ERROR and "Traceback" not in r.stderr and 'File "prog.py", line 1' in r.stderr


def test_a_session_keeps_its_variables_and_takes_functions_per_cell(default_sandbox: Sandbox) -> None:
    with default_sandbox.session(limits=WALL) as s:
        r = s.run("from host import lookup_order\norder = lookup_order(42)", functions={"lookup_order": lookup_order})
        assert r.status is Status.OK, r.stderr
        r = s.run("from host import double\norder['total'] + double(1)", functions={"double": lambda x: 2 * x})
        assert r.status is Status.OK, r.stderr
        assert _shown(r) == ["21.5"]
        r = s.run("import host\nhost.__all__")
        assert _shown(r) == ["['double']"]  # the module stays, its functions refuse
        r = s.run("try:\n    host.double(1)\nexcept RuntimeError as e:\n    print(e)")
        assert r.stdout == "the host refused the call to double: this run may not call it (now)\n"


def test_a_run_inside_a_host_call_works(default_sandbox: Sandbox) -> None:
    def inner(code: str) -> str:
        return default_sandbox.run(code, limits=WALL).stdout

    r = default_sandbox.run("from host import inner\nprint(inner('print(6 * 7)').strip())",
                            functions={"inner": inner}, limits=WALL)
    assert r.status is Status.OK, r.stderr
    assert r.stdout == "42\n"


# ---- limits --------------------------------------------------------------------------------------
def test_too_many_calls_stop_the_run_naming_the_limit(default_sandbox: Sandbox) -> None:
    calls = []
    r = default_sandbox.run("from host import tick\nfor i in range(100):\n    tick(i)\nprint('done')",
                            functions={"tick": calls.append}, limits=Limits(wall_seconds=60, host_calls=10))
    assert r.status is Status.HOST_CALLS_LIMIT and r.limit == "host_calls"
    assert r.message.startswith("Stopped: it called the app's functions more than 10 times")
    assert calls == list(range(10)) and "done" not in r.stdout
    still_works(default_sandbox)


@pytest.mark.parametrize("code", [
    "from host import echo\necho('x' * 5000)",  # arguments over the limit
    "from host import echo\necho(x=[b'y' * 100] * 100)",
    "from host import big\nbig()",  # a result over the limit
], ids=["argument", "keywords", "result"])
def test_a_call_over_the_byte_limit_stops_the_run(default_sandbox: Sandbox, code: str) -> None:
    calls = []

    def echo(*args: Any, **kwargs: Any) -> None:
        calls.append(1)

    r = default_sandbox.run(code + "\nprint('after')", functions={"echo": echo, "big": lambda: "z" * 10**8},
                            limits=Limits(wall_seconds=60, host_call_bytes=4096))
    assert r.status is Status.HOST_BYTES_LIMIT and r.limit == "host_bytes"
    assert "more than 4 KB" in r.message and "after" not in r.stdout
    assert calls == []
    still_works(default_sandbox)


def test_time_inside_functions_has_its_own_limit(default_sandbox: Sandbox) -> None:
    r = default_sandbox.run("from host import slow\nfor i in range(10):\n    slow()\nprint('done')",
                            functions={"slow": lambda: time.sleep(0.2)},
                            limits=Limits(wall_seconds=60, host_seconds=0.5))
    assert r.status is Status.HOST_TIME_LIMIT and r.limit == "host_time"
    assert "took more than 0.5 seconds" in r.message and "done" not in r.stdout
    still_works(default_sandbox)


def test_a_coroutine_over_the_time_limit_is_cancelled(default_sandbox: Sandbox) -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    r = default_sandbox.run("from host import forever\nforever()", functions={"forever": forever},
                            limits=Limits(wall_seconds=60, host_seconds=0.3))
    assert r.status is Status.HOST_TIME_LIMIT and r.limit == "host_time"
    assert cancelled.wait(10)
    still_works(default_sandbox)


def test_the_wall_limit_holds_during_a_call(default_sandbox: Sandbox) -> None:
    async def forever() -> None:
        await asyncio.sleep(3600)

    r = default_sandbox.run("from host import forever\nforever()", functions={"forever": forever},
                            limits=Limits(wall_seconds=1, host_seconds=600))
    assert r.status is Status.TIMEOUT and r.limit == "wall"


def test_stop_during_an_async_call_cancels_it_and_drops_the_result(default_sandbox: Sandbox) -> None:
    cancel = threading.Event()
    started, cancelled = threading.Event(), threading.Event()
    records: list[CallRecord] = []

    async def wait() -> str:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    threading.Thread(target=lambda: started.wait(60) and cancel.set(), daemon=True).start()
    r = default_sandbox.run("from host import wait\nprint(wait())", cancel=cancel, limits=WALL,
                            functions=HostFunctions({"wait": wait}, on_call=records.append))
    assert r.status is Status.CANCELLED and r.stdout == ""
    assert cancelled.wait(10)
    assert [(c.name, c.outcome) for c in records] == [("wait", "stopped")]
    still_works(default_sandbox)


def test_stop_during_a_sync_call_ends_the_run_when_it_returns(default_sandbox: Sandbox) -> None:
    cancel = threading.Event()

    def press_stop() -> str:
        cancel.set()  # Stop pressed while the function works
        time.sleep(0.2)
        return "dropped"

    r = default_sandbox.run("from host import press_stop\nprint(press_stop())\nprint('after')", cancel=cancel,
                            functions={"press_stop": press_stop}, limits=WALL)
    assert r.status is Status.CANCELLED
    assert "dropped" not in r.stdout and "after" not in r.stdout


def test_bad_functions_are_refused_before_the_run(default_sandbox: Sandbox) -> None:
    for functions, words in [({"os.system": abs}, "cannot be a host function's name"),
                             ({"_secret": abs}, "not starting with '_'"),
                             ({"HostError": abs}, "not HostError"),
                             ({"f": 3}, "is not callable")]:
        r = default_sandbox.run("print(1)", functions=functions)
        assert r.status is Status.INVALID_INPUT and words in r.message
