"""What a beginner writes, over the HTTP faces (issue 10, server side): a print flood arrives as a
few coalesced events and ends at the output cap; stdout and stderr keep the order written;
tracebacks name the student's file with source lines and carets and never the runner; running out
of stack says so; ``plt.show()`` gives an image; the file name is a request parameter."""

from __future__ import annotations

import json
from typing import Any

import httpx
from tests.support.live_server import KEY, LiveServer
from tests.support.http_clients import sse_events
from websockets.sync.client import connect

FLOOD = "i = 0\nwhile True:\n    print(i)\n    i += 1\n"
STACK_LINE = "RecursionError: Python ran out of stack (the recursion went too deep)\n"


def stream(api: httpx.Client, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    with api.stream("POST", "/api/run/stream", json=body) as r:
        assert r.status_code == 200, r.read()
        return list(sse_events(r))


def test_print_flood_is_a_few_events_and_ends_at_the_output_cap(api: httpx.Client) -> None:
    events = stream(api, {"code": FLOOD})
    kinds = [k for k, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "result"
    assert events[0][1]["python"] == "3.15"
    result = events[-1][1]
    assert result["status"] == "output_limit" and result["limit"] == "output"
    assert result["stdout_truncated"] and len(result["stdout"].encode()) == 1 << 20
    assert result["message"].startswith("Stopped: it printed more than 1 MB;")
    out = [d["data"] for k, d in events if k == "stdout"]
    assert 1 <= len(out) <= 100  # one event per line would be 165,000
    assert "".join(out) == result["stdout"]
    assert result["stdout"].startswith("0\n1\n2\n")


def test_print_flood_over_the_websocket_is_a_few_messages(server: LiveServer) -> None:
    with connect(server.ws_url + f"/api/run/ws?api_key={KEY}", open_timeout=30, max_size=None) as ws:
        ws.send(json.dumps({"type": "run", "code": FLOOD}))
        messages = []
        while True:
            msg = json.loads(ws.recv(timeout=60))
            messages.append(msg)
            if msg["type"] == "result":
                break
    assert messages[0]["type"] == "start" and messages[0]["python"] == "3.15"
    out = [m["data"] for m in messages if m["type"] == "stdout"]
    assert 1 <= len(out) <= 100
    result = messages[-1]["result"]
    assert result["status"] == "output_limit" and "".join(out) == result["stdout"]


def test_stdout_and_stderr_arrive_in_the_order_written(api: httpx.Client) -> None:
    code = (
        "import sys\n"
        "for i in range(300):\n"  # fast enough to be held in blocks
        "    print('out', i)\n"
        "    if i % 100 == 99:\n"
        "        print('err', i, file=sys.stderr)\n"
        "print('partial', end='')\n"
        "sys.stderr.write('E')\n"
        "print(' line')\n"
        "1 / 0\n"
    )
    events = stream(api, {"code": code, "filename": "main.py"})
    chunks = [(k, d["data"]) for k, d in events if k in ("stdout", "stderr")]
    merged = []  # consecutive chunks of one stream joined: the order across streams stays
    for kind, text in chunks:
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + text)
        else:
            merged.append((kind, text))
    expected = []
    for block in range(3):
        lines = "".join(f"out {i}\n" for i in range(block * 100, block * 100 + 100))
        expected += [("stdout", lines), ("stderr", f"err {block * 100 + 99}\n")]
    expected += [("stdout", "partial"), ("stderr", "E"), ("stdout", " line\n")]
    assert merged[: len(expected)] == expected
    assert merged[len(expected)][0] == "stderr" and len(merged) == len(expected) + 1
    assert merged[-1][1].startswith("Traceback (most recent call last):")
    assert events[-1][1]["status"] == "error" and events[-1][1]["exit_code"] == 1


def test_traceback_names_the_file_with_source_and_carets_and_no_runner(api: httpx.Client) -> None:
    code = "def half(n):\n    return n / 0\n\nprint('before')\nhalf(4)\n"
    result = api.post("/api/run", json={"code": code, "filename": "main.py"}).json()
    assert result["status"] == "error" and result["exit_code"] == 1
    assert result["stdout"] == "before\n"
    assert result["stderr"] == (
        "Traceback (most recent call last):\n"
        '  File "main.py", line 5, in <module>\n'
        "    half(4)\n"
        "    ~~~~^^^\n"
        '  File "main.py", line 2, in half\n'
        "    return n / 0\n"
        "           ~~^~~\n"
        "ZeroDivisionError: division by zero\n"
    )
    assert result["message"] == "Your program stopped with an error."
    syntax = api.post("/api/run", json={"code": "print('a'\n", "filename": "main.py"}).json()
    assert syntax["status"] == "error" and 'File "main.py", line 1' in syntax["stderr"]
    assert "wasm-runner" not in syntax["stderr"] + result["stderr"]
    bad = api.post("/api/run", json={"code": "1", "filename": "../etc/passwd"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
    assert api.get("/healthz").json()["status"] == "ok"


def test_running_out_of_stack_is_a_plain_error_not_a_timeout(api: httpx.Client) -> None:
    # a chain of a million map objects: CPython's C code recurses without a check of its own
    chain = "it = iter([1])\nfor i in range(10**6):\n    it = map(abs, it)\nprint(list(it))\n"
    crash = api.post("/api/run", json={"code": chain, "filename": "main.py", "profile": "analyst"}).json()
    assert crash["status"] == "error" and crash["limit"] == "stack" and crash["exit_code"] == 1
    assert crash["stderr"] == STACK_LINE
    assert "ran out of stack" in crash["message"]
    deep = (
        "import sys\nsys.setrecursionlimit(10**6)\n\ndef f(n):\n    return f(n + 1)\n\nf(0)\n"
    )
    body = {"code": deep, "filename": "main.py", "profile": "analyst"}
    result = api.post("/api/run", json=body).json()
    assert result["status"] == "error" and result["exit_code"] == 1, result["message"]
    lines = result["stderr"].splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[1:4] == ['  File "main.py", line 7, in <module>', "    f(0)", "    ~^^^"]
    assert lines[4:6] == ['  File "main.py", line 5, in f', "    return f(n + 1)"]  # as CPython prints
    assert lines[-2].startswith("  [Previous line repeated ") and lines[-2].endswith(" more times]")
    assert int(lines[-2].split()[3]) > 900_000
    assert lines[-1] == "RecursionError: maximum recursion depth exceeded"


def test_plt_show_gives_an_image_and_no_warning(api: httpx.Client) -> None:
    code = (
        "import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2])\n"
        "plt.show()\n"
        "print('after show')\n"
        "plt.figure()\n"
        "plt.plot([3, 1])\n"  # left open: only "figures" (or display) captures it at the end
    )
    body = {"code": code, "profile": "analyst", "display": False}
    shown = api.post("/api/run", json=body).json()
    assert shown["status"] == "ok", shown["stderr"]
    assert shown["stdout"] == "after show\n" and shown["stderr"] == ""
    assert [(o["kind"], o["mime"]) for o in shown["outputs"]] == [("image", "image/png")]
    both = api.post("/api/run", json={**body, "code": code + "42\n", "display": "figures"}).json()
    assert both["status"] == "ok" and both["stderr"] == ""
    assert [o["mime"] for o in both["outputs"]] == ["image/png", "image/png"]  # no echo of 42
